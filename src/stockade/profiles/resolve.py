"""Pick and build the effective policy for a run: explicit file, profile, project file or default."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stockade.core.backend import RunRequest
from stockade.core.errors import PolicyError
from stockade.core.invocation import Invocation
from stockade.core.locations import Locations
from stockade.profiles.discovery import find_project_policy
from stockade.profiles.loader import BUILTIN_PREFIX, Layer, load_builtin, load_file, parse_layer
from stockade.profiles.merge import compose
from stockade.profiles.model import Policy

DEFAULT_PROFILE = "default"
LEARNED_SOURCE = "stockade learn"  # the additions layer's name in errors


@dataclass(frozen=True)
class Resolution:
    policy: Policy
    project_file: Path | None = None  # a discovered .stockade.toml
    trusted: bool = True
    dropped: tuple[str, ...] = ()  # allowances an untrusted project policy asked for and did not get
    kept: tuple[str, ...] = ()  # what an untrusted project policy did change: denials, limits
    changed: bool = False  # untrusted because it changed since the user trusted it
    notes: tuple[str, ...] = field(default=())
    doubt: str = ""  # why a --policy file named in CI is not trusted as it is (profiles/citrust.py)
    baseline: tuple[str, ...] = ()  # the administrator's baseline files the policy was narrowed by (profiles/baseline.py)
    bounded: tuple[str, ...] = ()  # what the baseline took away


class _Expander:
    """Loads a layer and everything it extends, depth first, detecting cycles.

    The file a run starts from, with no `extends` key, builds on `implicit` (the user's default:
    a hand-written `[network] allow = [...]` must not start from nothing, which leaves every
    secret readable and the project read-only); `extends = []` starts from nothing, on purpose.
    Files it extends are fragments and get nothing implicit.
    """

    def __init__(
        self, project_dir: Path, locations: Locations, relative_base: Path | None = None,
        implicit: Callable[[], list[Layer]] | None = None,
    ) -> None:  # fmt: skip
        self.project_dir = project_dir
        self.home = locations.home
        self.relative_base = relative_base  # overrides a file's own directory (user config)
        self.implicit = implicit
        self._implicit_layers: list[Layer] | None = None

    def from_file(self, path: Path) -> list[Layer]:
        return self._expand(load_file(path, home=self.home, base=self.relative_base), [])

    def from_builtin(self, name: str) -> list[Layer]:
        return self._expand(load_builtin(name, project_dir=self.project_dir, home=self.home), [])

    def _expand(self, layer: Layer, stack: list[str]) -> list[Layer]:
        stack = [*stack, layer.source]
        layers: list[Layer] = []
        if not stack[:-1] and not layer.is_builtin and not layer.names_extends and self.implicit is not None:
            if self._implicit_layers is None:
                self._implicit_layers = [dataclasses.replace(base, implicit=True) for base in self.implicit()]
            layers += self._implicit_layers
        for entry in layer.extends:
            child = self._load_entry(entry, layer)
            if child.source in stack:
                cycle = " -> ".join([*stack[stack.index(child.source) :], child.source])
                where = None if layer.is_builtin else layer.source
                raise PolicyError(f"extends cycle: {cycle}; remove one of these extends", file=where, line=_line_of_extends(layer))
            layers += self._expand(child, stack)
        layers.append(layer)
        return list({layer.source: layer for layer in layers}.values())  # a diamond loads each file once

    def _load_entry(self, entry: str, parent: Layer) -> Layer:
        if "/" in entry or entry.endswith(".toml") or entry.startswith("~"):
            if parent.is_builtin:
                raise PolicyError(f"built-in profile {parent.source} may only extend built-ins, not {entry!r}")
            base = Path(parent.source).parent
            target = Path(str(self.home) + entry[1:]) if entry.startswith("~") else base / entry
            if ".." in Path(entry).parts:
                raise PolicyError(f"extends {entry!r} climbs with '..': write the real path", file=parent.source, line=_line_of_extends(parent))
            if not target.is_file():
                raise PolicyError(f"extends {entry!r}: no such file {target}", file=parent.source, line=_line_of_extends(parent))
            try:
                return load_file(target, home=self.home, base=self.relative_base)
            except PolicyError as exc:
                if exc.line is None and str(exc.file) == str(target):  # the file could not be read at all
                    raise PolicyError(f"extends {entry!r}: {target} {exc.reason}", file=parent.source, line=_line_of_extends(parent)) from None
                raise
        try:
            return load_builtin(entry, project_dir=self.project_dir, home=self.home)
        except PolicyError as exc:
            raise PolicyError(exc.reason, file=None if parent.is_builtin else parent.source, line=_line_of_extends(parent)) from None


def _line_of_extends(layer: Layer) -> int | None:
    for number, line in enumerate(layer.text.splitlines(), start=1):
        if line.strip().startswith("extends"):
            return number
    return None


def user_default(project_dir: Path, locations: Locations) -> list[Layer]:
    """The user's own policy: ~/.config/stockade/config.toml, else the built-in default.

    Relative paths in the user config mean the project, like the built-ins.
    """
    config = locations.user_config_file
    builtin = _Expander(project_dir, locations)
    if config.is_file():
        return _Expander(project_dir, locations, relative_base=project_dir, implicit=lambda: builtin.from_builtin(DEFAULT_PROFILE)).from_file(config)
    return builtin.from_builtin(DEFAULT_PROFILE)


def resolve(
    cwd: Path,
    locations: Locations,
    *,
    policy_file: Path | None = None,
    profile: str | None = None,
    additions: str | None = None,
    env: Mapping[str, str] | None = None,
    bounded: bool = True,
) -> Resolution:
    """The effective policy for a run started in `cwd`.

    Order: `--policy FILE` (the user's explicit choice), `--profile NAME`, the
    nearest `.stockade.toml` (narrowing only, unless trusted), the user default.
    `additions` (TOML, stockade learn's) is one more layer on top, the user's own: an
    untrusted project file is narrowed against the user's policy with it. Whichever it is,
    the administrator's baseline bounds it last (`bounded`; `request_for` bounds it itself,
    after the run's own flags).
    """
    resolution = _resolve(cwd, locations, policy_file=policy_file, profile=profile, additions=additions, env=env)
    return within_baseline(resolution, locations, env) if bounded else resolution


def within_baseline(resolution: Resolution, locations: Locations, env: Mapping[str, str] | None) -> Resolution:
    """The resolution bounded by the administrator's baseline (profiles/baseline.py), where there is one."""
    import os

    from stockade.profiles import baseline

    found = baseline.load(os.environ if env is None else env, locations.state, resolution.policy.project_dir, locations.home)
    if found is None:
        return resolution
    policy, notes = baseline.narrowed(found, resolution.policy)
    return dataclasses.replace(resolution, policy=policy, baseline=found.files, bounded=tuple(notes))


def baseline_note(resolution: Resolution) -> str | None:
    """One line saying what the baseline took from the run's policy; none when it took nothing."""
    if not resolution.bounded:
        return None
    files = ", ".join(resolution.baseline)
    return f"stockade: the system baseline ({files}) allows less than this policy; left out or lowered: {'; '.join(resolution.bounded)}"


def _resolve(
    cwd: Path,
    locations: Locations,
    *,
    policy_file: Path | None,
    profile: str | None,
    additions: str | None,
    env: Mapping[str, str] | None,
) -> Resolution:
    if policy_file is not None and profile is not None:
        raise PolicyError("give either --policy or --profile, not both")
    project_file = find_project_policy(cwd)
    project_dir = project_file.parent if project_file else cwd
    implicit = lambda: user_default(project_dir, locations)  # noqa: E731
    extra = [parse_layer(additions, LEARNED_SOURCE, base=project_dir, home=locations.home)] if additions else []
    if policy_file is not None:
        path = policy_file if policy_file.is_absolute() else cwd / policy_file
        # a file of the user's config folder (an MCP server's, cli/mcp_policy.py) means the project by ".", as config.toml does
        relative = project_dir if path.parent.parent == locations.config or path.parent == locations.config else None
        layers = _Expander(project_dir, locations, relative_base=relative, implicit=implicit).from_file(path)
        named = compose([*layers, *extra], project_dir=project_dir, origin=str(path))
        from stockade.profiles.citrust import doubt

        why = doubt(layers, env) if env is not None else None
        if why is None:
            return Resolution(named)
        from stockade.profiles.narrow import kept_notes, narrow

        base = _reviewed_base(path, layers, env or {}, project_dir, locations, extra)
        effective, dropped = narrow(base, named)
        return Resolution(
            effective, project_file=path, trusted=False, dropped=tuple(dropped), kept=tuple(kept_notes(base, effective)), doubt=why,
        )  # fmt: skip
    if profile is not None:
        layers = _Expander(project_dir, locations).from_builtin(profile)
        return Resolution(compose([*layers, *extra], project_dir=project_dir, origin=f"{BUILTIN_PREFIX}{profile}"))
    base_layers = [*user_default(project_dir, locations), *extra]
    base_origin = str(locations.user_config_file) if locations.user_config_file.is_file() else f"{BUILTIN_PREFIX}{DEFAULT_PROFILE}"
    base = compose(base_layers, project_dir=project_dir, origin=base_origin)
    if project_file is None:
        return Resolution(base)
    from stockade.profiles.narrow import kept_notes, narrow
    from stockade.profiles.trust import TrustStore, chain_digest

    layers = _Expander(project_dir, locations, implicit=implicit).from_file(project_file)
    _refuse_project_commands(layers)
    project = compose([*layers, *extra], project_dir=project_dir, origin=str(project_file))
    store = TrustStore(locations.trust_file)
    if store.is_trusted(project_file, chain_digest(layers)):
        return Resolution(project, project_file=project_file)
    effective, dropped = narrow(base, project)
    return Resolution(
        effective, project_file=project_file, trusted=False, dropped=tuple(dropped), kept=tuple(kept_notes(base, effective)),
        changed=store.was_trusted(project_file),
    )  # fmt: skip


def _refuse_project_commands(layers: list[Layer]) -> None:
    """A project's files (trusted or not) may not name a credential by a command: it would run
    outside the sandbox, as you, at every run. Such a credential belongs in your own config."""
    for layer in layers:
        if layer.implicit or layer.is_builtin:
            continue
        for name, credential in layer.values.get("credentials", {}).items():
            if credential.source == "command":
                from stockade.profiles.toml_lines import KeyLines

                lines = KeyLines(layer.text)
                raise PolicyError(
                    f"[credentials.{name}] runs a command outside the sandbox to get its value, which a project's policy may not do; "
                    "move this table to your own config (~/.config/stockade/config.toml), or use env = or file =",
                    file=layer.source,
                    line=lines.key(f"credentials.{name}", "command") or lines.table(f"credentials.{name}"),
                )


def project_chain(project_file: Path, locations: Locations) -> list[Layer]:
    """Every layer a project policy is made of, for `stockade trust`."""
    project_dir = project_file.parent
    return _Expander(project_dir, locations, implicit=lambda: user_default(project_dir, locations)).from_file(project_file)


def _reviewed_base(path: Path, layers: list[Layer], env: Mapping[str, str], project_dir: Path, locations: Locations, extra: list[Layer]) -> Policy:
    """What a CI run's untrusted --policy file narrows: the base branch's copy of it when that copy
    extends only built-in profiles, else the built-in default (profiles/citrust.py)."""
    from stockade.profiles.citrust import base_text

    text = base_text(layers, env)
    if text is not None:
        try:
            reviewed = parse_layer(text, f"{path} (the base branch's)", base=project_dir, home=locations.home)
            if all(not ("/" in entry or entry.endswith(".toml") or entry.startswith("~")) for entry in reviewed.extends):
                expanded = _Expander(project_dir, locations, implicit=lambda: user_default(project_dir, locations))._expand(reviewed, [])
                return compose([*expanded, *extra], project_dir=project_dir, origin=reviewed.source)
        except PolicyError:
            pass  # a base copy that no longer reads: the default
    return compose([*user_default(project_dir, locations), *extra], project_dir=project_dir, origin=f"{BUILTIN_PREFIX}{DEFAULT_PROFILE}")


def layers_of(path: Path, locations: Locations) -> list[Layer]:
    """A policy file and every file it extends, as resolve reads them."""
    return _Expander(path.parent, locations, implicit=lambda: user_default(path.parent, locations)).from_file(path)


def untrusted_note(resolution: Resolution) -> str | None:
    """One line saying what of an untrusted project policy was ignored and what was kept; none when
    nothing was ignored (the run is what the file says, trusted or not)."""
    if resolution.trusted or resolution.project_file is None or not resolution.dropped:
        return None
    kept = f"kept: {', '.join(resolution.kept)}" if resolution.kept else "none of its own rules apply"
    if resolution.doubt:  # a file a CI workflow named (profiles/citrust.py)
        return (
            f"stockade: {resolution.project_file} is not trusted as it is here ({resolution.doubt}), so it can only narrow the "
            f"base branch's copy or the built-in default (ignored: {'; '.join(resolution.dropped)}; {kept}); "
            "pin what you reviewed with STOCKADE_POLICY_SHA256"
        )
    why = "changed since you trusted it" if resolution.changed else "not trusted"
    return (
        f"stockade: {resolution.project_file} is {why}, so it can only narrow your own policy "
        f"(ignored: {'; '.join(resolution.dropped)}; {kept}); to trust it: stockade trust {resolution.project_file}"
    )


def with_user_denials(policy: Policy, locations: Locations) -> Policy:
    """`policy` with the user's own policy's denials added (deny_read, deny_write, env deny): what the
    user hid or held from every sandbox stays so for one started with a policy of its own (an MCP
    server's, cli/mcp_policy.py), which does not build on the user's."""
    from dataclasses import replace

    from stockade.profiles.merge import compose

    project_dir = policy.project_dir
    user = compose(user_default(project_dir, locations), project_dir=project_dir, origin=str(locations.user_config_file))
    fs, mine = policy.filesystem, user.filesystem

    def union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*a, *b)))

    return replace(
        policy,
        filesystem=replace(fs, deny_read=union(fs.deny_read, mine.deny_read), deny_write=union(fs.deny_write, mine.deny_write)),
        env=replace(policy.env, deny=union(policy.env.deny, user.env.deny)),
        sources=union(policy.sources, user.sources),
        protected_files=union(policy.protected_files, user.protected_files),
    )


def request_for(invocation: Invocation) -> tuple[RunRequest, str | None]:
    """The invocation with its policy read, and the untrusted note (already said unless quiet).

    Both backends start here, and put the policy, its locations and the note in their RunResult."""
    from stockade.core.locations import locate
    from stockade.core.notices import first_time
    from stockade.profiles.text import say

    locations = locate(invocation.env)
    cwd = Path(invocation.cwd)
    resolution = resolve(
        cwd, locations, policy_file=Path(invocation.policy_file) if invocation.policy_file else None, profile=invocation.profile,
        additions=invocation.additions, env=invocation.env, bounded=False,
    )  # fmt: skip
    note = untrusted_note(resolution)
    if note and not invocation.quiet and first_time(str(locations.state), invocation.agent_session, note):
        say(note)
    policy = resolution.policy
    if invocation.mcp:  # an MCP server's own policy keeps every denial of the user's own
        policy = with_user_denials(policy, locations)
    if invocation.stage or invocation.gpu:
        from dataclasses import replace

        if invocation.stage:  # every change waits for review, whatever the policy would accept at once
            policy = replace(policy, checkpoints=replace(policy.checkpoints, stage=True, accept="review"))
        if invocation.gpu:  # the user's own flag: every GPU unless the policy chose some
            policy = replace(policy, devices=replace(policy.devices, gpu=True))
    bounded = within_baseline(dataclasses.replace(resolution, policy=policy), locations, invocation.env)  # last: nothing widens it after
    bound_note = baseline_note(bounded)
    if bound_note and not invocation.quiet and first_time(str(locations.state), invocation.agent_session, bound_note):
        say(bound_note)
    # both notes, as a stored plan says them again (bwrap/run.py)
    return RunRequest.of(invocation, bounded.policy, locations), "\n".join(line for line in (note, bound_note) if line) or None
