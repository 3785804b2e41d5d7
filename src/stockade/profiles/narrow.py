"""Apply an untrusted project policy to the user's own: it may narrow, never widen.

A cloned repository wrote `.stockade.toml`; until the user trusts it, it can
add denials and tighten limits, and can only keep allowances the user's own
default already grants.
"""

from __future__ import annotations

from dataclasses import replace

from stockade.profiles.credentials import Credential
from stockade.profiles.domains import overlaps, parse_rule
from stockade.profiles.model import CheckpointRules, ContainerRules, DeviceRules, EnvRules, FilesystemRules, Limits, NetworkMode, NetworkRules, Policy
from stockade.profiles.paths import is_within


def narrow(base: Policy, project: Policy) -> tuple[Policy, list[str]]:
    """The effective policy and one note per allowance of `project` that was dropped."""
    notes: list[str] = []
    if project.audit.log and project.audit.log != base.audit.log:
        notes.append(f"audit log {project.audit.log}")
    if project.audit.otlp and project.audit.otlp != base.audit.otlp:
        notes.append(f"audit otlp {project.audit.otlp} (it would send your records where it chose)")
    fs = FilesystemRules(
        deny_read=_union(base.filesystem.deny_read, project.filesystem.deny_read),
        allow_write=_intersect_roots(base.filesystem.allow_write, project.filesystem.allow_write, notes),
        deny_write=_union(base.filesystem.deny_write, project.filesystem.deny_write),
        home=_narrow_home(base.filesystem.home, project.filesystem.home, notes),
        allow_read=_intersect_reads(base.filesystem.allow_read, project.filesystem.allow_read, notes),
        tool_config=base.filesystem.tool_config and project.filesystem.tool_config,  # a project may only hide them
    )
    return (
        replace(
            base,
            filesystem=fs,
            network=_narrow_network(base.network, project.network, notes),
            env=_narrow_env(base.env, project.env, notes),
            limits=_narrow_limits(base.limits, project.limits),
            # a project may stage its runs, and keep every change for review; never the reverse
            checkpoints=_narrow_checkpoints(base.checkpoints, project.checkpoints, notes),
            devices=_narrow_devices(base.devices, project.devices, notes),
            containers=_narrow_containers(base.containers, project.containers, notes),
            credentials=_narrow_credentials(base, project, notes),
            project_dir=project.project_dir,
            origin=project.origin,
            sources=tuple(dict.fromkeys((*base.sources, *project.sources))),
            protected_files=_union(base.protected_files, project.protected_files),
        ),
        notes,
    )


def _narrow_credentials(base: Policy, project: Policy, notes: list[str]) -> tuple[Credential, ...]:
    """Only your own credentials: an untrusted file that adds one (or changes where one goes)
    would send your secret where it chose."""
    notes += [f"[credentials.{c.name}] (an untrusted policy cannot add credentials)" for c in project.credentials if c not in base.credentials]
    return base.credentials


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*a, *b)))


def _intersect_roots(base: tuple[str, ...], project: tuple[str, ...], notes: list[str]) -> tuple[str, ...]:
    """Subtrees writable under both policies, compared by real path: `./w` is not inside the
    project when the repository made `w` a symlink to somewhere else."""
    import os

    real_base = [os.path.realpath(b) for b in base]
    kept: list[str] = []
    for path in project:
        inside = [b for b, real in zip(base, real_base, strict=True) if is_within(path, b) and is_within(os.path.realpath(path), real)]
        if inside:
            kept.append(path)
        else:
            notes.append(f"allow_write {path} (outside what your own policy lets you write)")
        kept += [b for b in base if is_within(b, path) and b != path]
    return tuple(dict.fromkeys(kept))


def _narrow_home(base: str, project: str, notes: list[str]) -> str:
    """A project may make the home private, never show the real one."""
    if base == "private" and project != "private":
        notes.append(f'home = "{project}"')
        return base
    return project


def _intersect_reads(base: tuple[str, ...], project: tuple[str, ...], notes: list[str]) -> tuple[str, ...]:
    """Home places both policies show: a cloned repository cannot ask to read the user's secrets."""
    kept = [path for path in project if any(is_within(path, b) for b in base)]
    notes += [f"allow_read {path} (outside what your own policy lets a sandbox read)" for path in project if path not in kept]
    kept += [b for b in base if any(is_within(b, path) and b != path for path in project)]
    return tuple(dict.fromkeys(kept))


def _narrow_network(base: NetworkRules, project: NetworkRules, notes: list[str]) -> NetworkRules:
    deny = _union(base.deny, project.deny)
    for sock in project.unix_sockets:
        if sock not in base.unix_sockets:
            notes.append(f"unix_sockets {sock}")
    sockets = tuple(s for s in project.unix_sockets if s in base.unix_sockets)
    if project.unix_datagram and not base.unix_datagram:
        notes.append("unix_datagram = true")
    datagram = base.unix_datagram and project.unix_datagram
    if project.mode.rank > base.mode.rank:
        notes.append(f'network mode "{project.mode.value}" (yours is "{base.mode.value}")')
    mode = min(base.mode, project.mode, key=lambda m: m.rank)
    http = _narrow_http(base.http, project.http, notes)
    push = _narrow_push(base, project, notes)
    if mode is NetworkMode.NONE:
        return NetworkRules(mode=mode, allow=(), deny=deny, unix_sockets=sockets, unix_datagram=datagram, http=http, push=push)
    if base.mode is NetworkMode.OPEN:
        allow = _within_open(base.allow, project.allow, notes) if project.mode is NetworkMode.ALLOWLIST else base.allow
    elif project.mode is NetworkMode.OPEN:
        allow = base.allow
    else:
        base_rules = [parse_rule(r) for r in base.allow]
        allow = tuple(r for r in project.allow if any(b.covers(parse_rule(r)) for b in base_rules))
        notes += [f"network allow {r}" for r in project.allow if r not in allow]
    return NetworkRules(mode=mode, allow=allow, deny=deny, unix_sockets=sockets, unix_datagram=datagram, http=http, push=push)


def _within_open(base: tuple[str, ...], project: tuple[str, ...], notes: list[str]) -> tuple[str, ...]:
    """A project's allowlist under your open network (ESCAPES 87): its entries for public hosts, and others only
    where your own allow names them. Open mode reaches no loopback, private or metadata address
    unless listed: a project listing one would widen yours (and, with a port, open it to every
    client inside, bwrap/parts/forwards.py)."""
    from stockade.profiles.addresses import network_kind

    base_rules = [parse_rule(r) for r in base]
    kept = []
    for text in project:
        rule = parse_rule(text)
        public = rule.host != "localhost" if rule.network is None else network_kind(rule.network) is None
        if public or any(b.covers(rule) for b in base_rules):
            kept.append(text)
        else:
            notes.append(f"network allow {text} (not a public address, and your open network does not list it)")
    return tuple(kept)


def _narrow_push(base: NetworkRules, project: NetworkRules, notes: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A project's `push` patterns, like its allow rules: where your own policy already limits a host's
    requests (any table of yours it meets, pushes refused there unless you listed them), only the
    patterns every one of your tables it meets lists too are kept; elsewhere its table narrows a host
    you allowed wholesale, so they apply. It can refuse pushes anywhere with a deny rule
    ("POST /**/git-receive-pack")."""
    ours = dict(base.push)
    kept: dict[str, tuple[str, ...]] = dict(base.push)
    for host, patterns in project.push:
        met = [ours.get(name, ()) for name, _allow, _deny in base.http if overlaps(parse_rule(name), parse_rule(host))]
        if met:
            dropped = [p for p in patterns if not all(p in mine for mine in met)]
            notes += [f'push "{p}" for {host} (your own policy limits that host)' for p in dropped]
            patterns = tuple(p for p in patterns if p not in dropped)
        if patterns:
            kept[host] = _union(kept.get(host, ()), patterns)
    return tuple(sorted(kept.items()))


HttpTables = tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]


def _narrow_http(base: HttpTables, project: HttpTables, notes: list[str]) -> HttpTables:
    """HTTP rules only ever narrow a host that is allowed at all, so a project's tables apply, with one
    exception: where your own policy already limits a host's requests, the project may add denials
    there but no allow rule (which would let through a request you limited away).

    The daemon lets a request through when any table matching its host allows it (decide.py
    `decide_request`), so "there" is every host both tables can match, not only the same
    spelling: a project's "*.example.com" or "api.example.com:443" table reaches your
    "api.example.com" too. Such a table keeps only the allow rules every one of your tables
    it meets has as well."""
    from stockade.profiles.merge import merge_http

    kept: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for host, allow, deny in project:
        met = [ours for name, ours, _deny in base if overlaps(parse_rule(name), parse_rule(host))]
        if met:
            dropped = [rule for rule in allow if not all(rule in ours for ours in met)]
            notes += [f'HTTP rule "allow {rule}" for {host} (your own policy limits that host)' for rule in dropped]
            allow = tuple(rule for rule in allow if rule not in dropped)
        previous = kept.get(host, ((), ()))
        kept[host] = (_union(previous[0], allow), _union(previous[1], deny))
    merged = merge_http({host: (allow, deny, ()) for host, allow, deny in base}, {host: (*lists, ()) for host, lists in kept.items()})
    return tuple((host, allow, deny) for host, (allow, deny, _push) in sorted(merged.items()))


def _narrow_env(base: EnvRules, project: EnvRules, notes: list[str]) -> EnvRules:
    """Constants an untrusted project sets reach only the sandbox, except names that load or run
    code (LD_*, BASH_ENV, ...) or look like secrets: those are dropped and reported."""
    from stockade.profiles.envfilter import LOADER_ENV, SECRET_ENV, matches

    notes += [f"env pass {name}" for name in project.passthrough if name not in base.passthrough]
    risky = [name for name, _ in project.set if matches(name, SECRET_ENV + LOADER_ENV)]
    notes += [f"env set {name}" for name in risky]
    merged_set = dict(base.set)
    merged_set.update((name, value) for name, value in project.set if name not in risky)
    return EnvRules(
        deny=_union(base.deny, project.deny),
        set=tuple(sorted(merged_set.items())),
        passthrough=tuple(n for n in base.passthrough if n in project.passthrough or not project.passthrough),
    )


def _narrow_devices(base: DeviceRules, project: DeviceRules, notes: list[str]) -> DeviceRules:
    """A project may give the sandbox fewer devices, never more: no GPU the user's own policy does not give."""
    if project.gpu and not base.gpu:
        notes.append("[devices] gpu = true")
    if not (base.gpu and project.gpu):
        return DeviceRules()
    if not project.gpus:
        return base
    if base.gpus:
        kept = tuple(number for number in project.gpus if number in base.gpus)
        return DeviceRules(gpu=bool(kept), gpus=kept)
    return project


def _narrow_containers(base: ContainerRules, project: ContainerRules, notes: list[str]) -> ContainerRules:
    """A project may take the engine away, or allow fewer images; never add an engine, an image,
    another engine's socket, or keep what a run made."""
    if project.engine != "none" and project.engine != base.engine:
        notes.append(f'[containers] engine = "{project.engine}"')
    if project.engine == "none" or base.engine == "none" or project.engine != base.engine:
        return ContainerRules()
    if project.socket is not None and project.socket != base.socket:
        notes.append("[containers] socket")
    images = base.images
    if project.images:
        images = tuple(image for image in project.images if image in base.images)
        notes += [f"[containers] images {image}" for image in project.images if image not in base.images]
    if project.keep and not base.keep:
        notes.append("[containers] keep = true")
    return replace(base, images=images, keep=base.keep and project.keep)


def _narrow_checkpoints(base: CheckpointRules, project: CheckpointRules, notes: list[str]) -> CheckpointRules:
    """A project may stage its runs, and keep every change for review; never the reverse."""
    if project.accept == "unmarked" and base.accept != "unmarked":
        notes.append('[checkpoints] accept = "unmarked"')
    if not project.stage:
        return base
    return replace(base, stage=True, accept="review" if "review" in (base.accept, project.accept) else base.accept)


def _narrow_limits(base: Limits, project: Limits) -> Limits:
    def lower(a: float | int | None, b: float | int | None) -> float | int | None:
        values = [v for v in (a, b) if v is not None]
        return min(values) if values else None

    return Limits(
        memory=lower(base.memory, project.memory),  # type: ignore[arg-type]
        pids=lower(base.pids, project.pids),  # type: ignore[arg-type]
        wall_time=lower(base.wall_time, project.wall_time),
        file_size=lower(base.file_size, project.file_size),  # type: ignore[arg-type]
        tmp_size=lower(base.tmp_size, project.tmp_size),  # type: ignore[arg-type]
    )


def kept_notes(base: Policy, effective: Policy) -> list[str]:
    """What an untrusted project policy did change: its added denials and tightened limits."""
    notes: list[str] = []
    for label, mine, theirs in (
        ("deny_read", base.filesystem.deny_read, effective.filesystem.deny_read),
        ("deny_write", base.filesystem.deny_write, effective.filesystem.deny_write),
        ("network deny", base.network.deny, effective.network.deny),
        ("env deny", base.env.deny, effective.env.deny),
    ):
        added = len(set(theirs) - set(mine))
        if added:
            notes.append(f"{added} {label} rule{'s' * (added != 1)}")
    hosts = len(set(base.network.allow) - set(effective.network.allow))
    if hosts:
        notes.append(f"{hosts} of your allowed hosts left out")
    if effective.network.mode.rank < base.network.mode.rank:
        notes.append(f'network mode "{effective.network.mode.value}"')
    limits = [name for name in ("memory", "pids", "wall_time", "file_size", "tmp_size")
              if getattr(effective.limits, name) != getattr(base.limits, name)]  # fmt: skip
    if limits:
        notes.append("tighter " + ", ".join(limits))
    return notes


def within_bound(bound: Policy, said: frozenset[str], policy: Policy) -> tuple[Policy, list[str]]:
    """`policy` within an administrator's baseline (profiles/baseline.py): each key `said` ("table.key")
    bounds the policy as an untrusted project file is bounded by the user's own; a key the baseline
    leaves out bounds nothing; its denials are always added. One note per allowance lost."""
    notes: list[str] = []
    fs, cap = policy.filesystem, bound.filesystem
    filesystem = FilesystemRules(
        deny_read=_union(fs.deny_read, cap.deny_read),
        allow_write=_intersect_roots(cap.allow_write, fs.allow_write, notes) if "filesystem.allow_write" in said else fs.allow_write,
        deny_write=_union(fs.deny_write, cap.deny_write),
        home=_narrow_home(cap.home, fs.home, notes) if "filesystem.home" in said else fs.home,
        allow_read=_intersect_reads(cap.allow_read, fs.allow_read, notes) if "filesystem.allow_read" in said else fs.allow_read,
        tool_config=fs.tool_config and (cap.tool_config or "filesystem.tool_config" not in said),
    )
    return (
        replace(
            policy,
            filesystem=filesystem,
            network=_bound_network(bound.network, policy.network, said, notes),
            env=_bound_env(bound.env, policy.env, said, notes),
            limits=_narrow_limits(policy.limits, bound.limits),
            audit=replace(
                policy.audit,
                log=bound.audit.log if "audit.log" in said else policy.audit.log,
                otlp=bound.audit.otlp if "audit.otlp" in said else policy.audit.otlp,
            ),
            checkpoints=_bound_checkpoints(bound.checkpoints, policy.checkpoints, said, notes),
            devices=_bound_devices(bound.devices, policy.devices, said, notes),
            containers=_bound_containers(bound.containers, policy.containers, said, notes),
        ),
        notes,
    )


def _bound_network(cap: NetworkRules, net: NetworkRules, said: frozenset[str], notes: list[str]) -> NetworkRules:
    out = replace(net, deny=_union(net.deny, cap.deny))
    if "network.mode" in said or "network.allow" in said:
        if cap.mode is not NetworkMode.OPEN:  # an approval never reaches past the baseline's list (none: nothing at all)
            ceiling = cap.allow if cap.mode is NetworkMode.ALLOWLIST else ()
            if net.ceiling is not None:
                ceiling = tuple(rule for rule in ceiling if rule in net.ceiling)
            out = replace(out, ceiling=ceiling)
        reach = _narrow_network(
            replace(cap, unix_sockets=net.unix_sockets, unix_datagram=net.unix_datagram, http=(), push=()), replace(net, http=(), push=()), notes
        )
        out = replace(out, mode=reach.mode, allow=reach.allow)
        if reach.mode is NetworkMode.NONE:
            out = replace(out, allow=())
    if cap.mode is NetworkMode.NONE and "network.mode" in said and "network.unix_sockets" not in said:
        said = said | {"network.unix_sockets", "network.unix_datagram"}  # no network: the host's sockets are network too
    if "network.unix_sockets" in said:
        notes += [f"unix_sockets {sock}" for sock in net.unix_sockets if sock not in cap.unix_sockets]
        out = replace(out, unix_sockets=tuple(sock for sock in net.unix_sockets if sock in cap.unix_sockets))
    if "network.unix_datagram" in said and net.unix_datagram and not cap.unix_datagram:
        notes.append("unix_datagram = true")
        out = replace(out, unix_datagram=False)
    if "network.http" in said:
        out = replace(out, http=_narrow_http(cap.http, net.http, notes), push=_narrow_push(cap, net, notes))
    return out


def _bound_env(cap: EnvRules, env: EnvRules, said: frozenset[str], notes: list[str]) -> EnvRules:
    from stockade.profiles.envfilter import matches

    passthrough = env.passthrough
    if "env.pass" in said:
        notes += [f"env pass {name}" for name in env.passthrough if name not in cap.passthrough]
        passthrough = tuple(name for name in env.passthrough if name in cap.passthrough)
    if cap.deny:  # a `pass` lets a name through a deny pattern: never through the baseline's, unless it passes the name itself
        held = [name for name in passthrough if matches(name, cap.deny) and name not in cap.passthrough]
        notes += [f"env pass {name} (the baseline denies it)" for name in held]
        passthrough = tuple(name for name in passthrough if name not in held)
    values = dict(env.set)
    values.update(cap.set)  # the baseline's values are the ones set
    return EnvRules(deny=tuple(dict.fromkeys((*env.deny, *cap.deny))), set=tuple(sorted(values.items())), passthrough=passthrough)


def _bound_checkpoints(cap: CheckpointRules, own: CheckpointRules, said: frozenset[str], notes: list[str]) -> CheckpointRules:
    out = own
    if "checkpoints.enabled" in said and cap.enabled and not out.enabled:
        notes.append("[checkpoints] enabled = false")
        out = replace(out, enabled=True)
    if "checkpoints.stage" in said and cap.stage and not out.stage:
        notes.append("[checkpoints] stage = false")
        out = replace(out, stage=True)
    if "checkpoints.accept" in said and cap.accept == "review" and out.accept != "review":
        notes.append(f'[checkpoints] accept = "{out.accept}"')
        out = replace(out, accept="review")
    return out


def _bound_containers(cap: ContainerRules, rules: ContainerRules, said: frozenset[str], notes: list[str]) -> ContainerRules:
    """The baseline's engine, socket and images bound the policy's where it names them."""
    if "containers.engine" in said and rules.engine not in ("none", cap.engine):
        notes.append(f'[containers] engine = "{rules.engine}"')
        return ContainerRules()
    out = rules
    if "containers.socket" in said and out.socket != cap.socket:
        out = replace(out, socket=cap.socket)
    if "containers.images" in said:
        kept = tuple(image for image in out.images if image in cap.images)
        notes += [f"[containers] images {image}" for image in out.images if image not in cap.images]
        out = replace(out, images=kept)
    if "containers.keep" in said and out.keep and not cap.keep:
        notes.append("[containers] keep = true")
        out = replace(out, keep=False)
    return out


def _bound_devices(cap: DeviceRules, devices: DeviceRules, said: frozenset[str], notes: list[str]) -> DeviceRules:
    if "devices.gpu" in said and not cap.gpu and devices.gpu:
        notes.append("[devices] gpu = true")
        return DeviceRules()
    if "devices.gpus" in said and devices.gpu:
        chosen = devices.gpus or cap.gpus
        kept = tuple(number for number in chosen if number in cap.gpus)
        notes += [f"[devices] gpus {number}" for number in chosen if number not in cap.gpus]
        return DeviceRules(gpu=bool(kept), gpus=kept)
    return devices
