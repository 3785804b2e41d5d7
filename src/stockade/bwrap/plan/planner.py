"""The Linux planner: a policy becomes a bwrap invocation plus a seccomp filter."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from stockade.bwrap.parts import args as bw
from stockade.bwrap.parts.limits import plan_limits
from stockade.bwrap.parts.probe import bwrap_path
from stockade.bwrap.plan.mounts import GIT_ALIASES, STAGE_BOUND, View, carved_out, make_write_places, moved, plan_view, visible
from stockade.bwrap.running.execute import Launch
from stockade.core.backend import RunRequest
from stockade.core.errors import SandboxSetupError
from stockade.core.invocation import new_session_id
from stockade.core.locations import Locations
from stockade.profiles.envfilter import sandbox_env, withheld
from stockade.profiles.model import NetworkMode, Policy
from stockade.profiles.paths import is_within
from stockade.profiles.text import say

SANDBOX_CA = "/run/stockade/ca-bundle.pem"  # proxy.client.cabundle.SANDBOX_PATH, where the sandbox finds the CA bundle

# New namespaces for everything; no nested user namespaces; no capabilities even as root.
# The network namespace is bwrap's own when the network is off, else stockade's (bwrap/parts/netns.py).
SEALED = (
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
)

# GitHub Actions file commands (env, PATH, outputs, state, step summary) and the runner's
# temp folder, where later steps' scripts live.
CI_CHANNELS = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY", "RUNNER_TEMP")


@dataclass
class BwrapPlan:
    bwrap: str
    policy: Policy
    pieces: list[bw.Piece]
    command: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    view: View
    session: str
    interactive: bool
    quiet: bool
    locations: Locations
    host_env: Mapping[str, str] = field(default_factory=dict)  # for explain: what was withheld
    ca_bundle: str | None = None  # the CA bundle bound at SANDBOX_CA (hosts with HTTP rules): proxy/client/cabundle.py
    ssh_files: tuple[str, ...] = ()  # the ssh ProxyCommand, config and known hosts (raw-TCP allow rules): proxy/client/sshroute.py
    tool_files: list[tuple[str, str, str]] = field(default_factory=list)  # the user's tool configuration (profiles/toolconfig.py)
    mcp: str = ""  # the agent's MCP server this run is (--mcp), named in its audit records

    @property
    def network(self) -> bool:
        return self.policy.network.mode is not NetworkMode.NONE

    @property
    def allow_unix(self) -> bool:
        return self.policy.network.unix_datagram


def ci_channels(host_env: Mapping[str, str], policy: Policy) -> tuple[str, ...]:
    """Files and folders through which a CI step reaches later steps (ESCAPES 67): kept
    read-only inside writable places unless the policy lists that very path in allow_write."""
    paths = [p for p in (host_env.get(name, "") for name in CI_CHANNELS) if os.path.isabs(p)]
    if not paths:
        return ()
    granted = {os.path.realpath(entry) for entry in policy.filesystem.allow_write}
    return tuple(p for p in paths if os.path.realpath(p) not in granted)


def _sealing(interactive: bool, network: bool) -> list[bw.Piece]:
    pieces: list[bw.Piece] = [bw.Flag(word) for word in SEALED]
    if not network:
        pieces.append(bw.Flag("--unshare-net"))
    if not interactive:
        pieces.append(bw.Flag("--new-session"))  # no TIOCSTI into a terminal we do not own (ESCAPES 46)
    return [*pieces, bw.Flag("--hostname"), bw.Flag("stockade")]


def _working_dir(cwd: str, view: View) -> str:
    real = os.path.realpath(cwd)
    hidden = [m for m in view.masked if is_within(real, m) and not carved_out(view, real, m)]
    if hidden:
        raise SandboxSetupError(f"the working directory {cwd} is hidden by the policy ({hidden[0]}); run from a folder the sandbox can see")
    if not os.path.isdir(real):
        raise SandboxSetupError(f"the working directory {cwd} does not exist")
    if not visible(real, view.writable, view.home, view.shown):
        raise SandboxSetupError(
            f"the working directory {cwd} is not visible inside the sandbox (it gets a private /tmp, /var/tmp and /run); "
            "add it to allow_write in the policy, or run from a folder outside those"
        )
    return real


def _ssh(request: RunRequest, view: View) -> tuple[tuple[str, ...], list[bw.Piece], dict[str, str]]:
    """ssh through the proxy when an allow rule names a raw-TCP port (proxy/client/sshroute.py): the files
    made, their binds and the variables; nothing otherwise (nor on a dry run, which makes nothing).
    Of the host's ssh config, only what the sandbox could read itself is copied in (`view`)."""
    network = request.policy.network
    if network.mode is NetworkMode.NONE or request.dry_run or not any(":" in entry for entry in network.allow):
        return (), [], {}
    from stockade.proxy.client import sshroute

    rules = sshroute.raw_tcp_rules(network.allow)
    if not rules:
        return (), [], {}
    system = os.path.isfile(sshroute.SYSTEM_CONFIG)

    def readable(path: str) -> bool:
        return sshroute.system_folder_only(path) and all(_seen_inside(view, p) for p in (os.path.abspath(path), os.path.realpath(path)))

    files = sshroute.ssh_files(
        str(request.locations.cache), str(request.locations.home), rules, inside=True,
        system=sshroute.SYSTEM_CONFIG if system else None, readable=readable,
    )  # fmt: skip
    binds: list[bw.Piece] = [
        bw.ReadOnlyBindFrom(files.script, sshroute.SCRIPT),
        bw.ReadOnlyBindFrom(files.config, sshroute.CONFIG),
        bw.ReadOnlyBindFrom(files.known_hosts, sshroute.KNOWN_HOSTS),
    ]
    if system:  # a plain `ssh host` reads it: ours, which carries the host's own on
        binds.append(bw.ReadOnlyBindFrom(files.config, sshroute.SYSTEM_CONFIG))
    return files.paths(), binds, sshroute.ssh_environment(sshroute.CONFIG, request.policy.env.set)


def _seen_inside(view: View, path: str) -> bool:
    """Whether the sandbox sees the host's `path` (not under a private tmpfs, nor hidden by the policy)."""
    seen = visible(path, [*view.writable, *view.read_only], view.home, view.shown)
    return seen and not any(is_within(path, m) and not carved_out(view, path, m) for m in view.masked)


def _environment(request: RunRequest, view: View, terminates: bool) -> dict[str, str]:
    env = sandbox_env(request.host_env, request.policy.env)
    tmpdir = env.get("TMPDIR")
    if tmpdir and not any(is_within(os.path.realpath(tmpdir), root) for root in view.writable):
        env["TMPDIR"] = "/tmp"
    env["STOCKADE_SANDBOX"] = "1"
    if request.policy.devices.gpu and view.devices:
        from stockade.bwrap.parts.devices import gpu_environment

        env.update(gpu_environment(request.policy.devices.gpus, env))
    if request.policy.network.mode is not NetworkMode.NONE:
        from stockade.bwrap.running.network import proxy_environment

        env.update(proxy_environment())
        if terminates:
            from stockade.core.proxy_env import ca_environment
            from stockade.proxy.client.cabundle import SANDBOX_PATH

            env.update(ca_environment(SANDBOX_PATH))
    return env


def _terminates(request: RunRequest, tool_files: list[tuple[str, str, str]]) -> bool:
    """Whether the daemon may terminate TLS for this run: for HTTP rules and credentials, and for the
    secrets of the user's tool configuration (a file that appears later makes a new plan)."""
    return bool(request.policy.terminated_hosts) or any(os.path.lexists(real) for _inside, real, _path in tool_files)


def _ca_bundle(request: RunRequest, terminates: bool) -> str | None:
    """The bundle a sandbox trusts when the daemon terminates TLS for some host (proxy/client/cabundle.py);
    None without HTTP rules, and on a dry run (which makes nothing; explain says so)."""
    if request.policy.network.mode is NetworkMode.NONE or not terminates or request.dry_run:
        return None
    from stockade.proxy.client.cabundle import bundle
    from stockade.proxy.client.launch import daemon_files

    return bundle(daemon_files(request.locations), str(request.locations.cache))


class BwrapPlanner:
    """Turns a request into a plan (run.py decides when to plan, and runs it)."""

    def build(self, request: RunRequest) -> BwrapPlan:
        bwrap = bwrap_path()
        if bwrap is None:
            raise SandboxSetupError("bubblewrap (bwrap) is not installed: sudo apt-get install bubblewrap; then run `stockade doctor`")
        request.locations.ensure()
        _ensure_audit_log(request.policy)
        unmade = make_write_places(
            request.policy.filesystem.allow_write, str(request.locations.home), str(request.policy.project_dir), request.dry_run
        )
        path_dirs = tuple(d for d in request.host_env.get("PATH", "").split(os.pathsep) if d)
        view = plan_view(
            request.policy,
            request.locations,
            str(request.cwd),
            path_dirs,
            ci_channels(request.host_env, request.policy),
            request.host_env,
            unmade,
        )
        if request.verbose:
            view.notes += view.details
        cwd = _working_dir(str(request.cwd), view)
        interactive = sys.stdin is not None and _isatty(0)
        network = request.policy.network.mode is not NetworkMode.NONE
        from stockade.profiles.toolconfig import policy_files

        tool_files = policy_files(request.policy, str(request.locations.home))
        terminates = _terminates(request, tool_files)
        ca_bundle = _ca_bundle(request, terminates)
        trusted = [bw.ReadOnlyBindFrom(ca_bundle, SANDBOX_CA)] if ca_bundle else []
        ssh_files, ssh_binds, ssh_env = _ssh(request, view)
        pieces = _sealing(interactive, network) + view.pieces() + trusted + ssh_binds + [bw.Chdir(cwd)]
        session = request.session_id or new_session_id()
        return BwrapPlan(
            bwrap=bwrap,
            policy=request.policy,
            pieces=pieces,
            command=request.command,
            env={**_environment(request, view, terminates), **ssh_env},
            cwd=cwd,
            view=view,
            session=session,
            interactive=interactive,
            quiet=request.quiet,
            locations=request.locations,
            host_env=request.host_env,
            ca_bundle=ca_bundle,
            ssh_files=ssh_files,
            tool_files=tool_files,
            mcp=request.mcp,
        )

    def explain(self, plan: BwrapPlan) -> str:
        import shlex

        from stockade.bwrap.after.sweep import LINK_PIN

        lines = [
            f"# stockade plan: linux, {plan.bwrap}",
            f"# policy: {plan.policy.origin}",
            f"{plan.bwrap} --args FD --seccomp FD --info-fd FD -- {shlex.join(plan.command)}",
            "# --args FD carries, NUL-separated:",
        ]
        lines += [f"  {shlex.join(list(piece.to_args()))}" for piece in plan.pieces]
        lines += [f"  --ro-bind /dev/null {shlex.quote(path)}  # a host socket, if still there at the start" for path in plan.view.socket_masks]
        listed = (
            f"; host sockets reachable: {', '.join(plan.policy.network.unix_sockets)}"
            if plan.policy.network.unix_sockets
            else " (host sockets hidden)"
        )
        kinds = "AF_UNIX stream and datagram sockets" if plan.allow_unix else "AF_UNIX stream sockets only"
        lines.append(f"# seccomp: {kinds}{listed}; see `stockade explain`")
        if plan.network:
            lines.append(
                f"# network: {plan.policy.network.mode.value}: a private namespace whose only way out is 127.0.0.1:3128, "
                "a listener handed to the proxy daemon"
            )
            if plan.policy.terminated_hosts:
                hosts = ", ".join(plan.policy.terminated_hosts)
                where = plan.ca_bundle or "made at the first run"
                why = ", ".join(name for name, given in (("HTTP rules", plan.policy.network.http), ("credentials", plan.policy.credentials)) if given)
                lines.append(
                    f"# TLS inspected for {hosts} ({why}): the daemon terminates it with this user's CA; the sandbox "
                    f"trusts it through {SANDBOX_CA} ({where}), named by SSL_CERT_FILE and the other CA variables"
                )
            for credential in plan.policy.credentials:
                lines.append(
                    f"# credential {credential.name}: read at each run from {credential.described()}; the sandbox gets a placeholder "
                    f"in ${credential.name}, swapped for the value on requests to {', '.join(credential.hosts)} in {credential.places()}"
                )
            if plan.ssh_files:
                from stockade.proxy.client.sshroute import CONFIG, KNOWN_HOSTS, SCRIPT

                lines.append(
                    f"# ssh: raw TCP to the host:port allow entries; ssh's ProxyCommand {SCRIPT}, config {CONFIG} "
                    f"(also over /etc/ssh/ssh_config; GIT_SSH_COMMAND names it), host keys {KNOWN_HOSTS}"
                )
        else:
            lines.append("# network: none (a private namespace with only an empty loopback)")
        lines.append(
            f"# environment: bwrap starts with none; --clearenv and {len(plan.env)} --setenv in the memfd; "
            f"withheld: {', '.join(withheld(plan.host_env, plan.policy.env)) or 'none'}"
        )
        limits = plan_limits(plan.policy.limits.file_size, plan.policy.limits.pids, plan.policy.limits.memory, plan.session)
        lines.append(
            f"# limits: {limits.describe()}{'; wall_time ' + str(plan.policy.limits.wall_time) + 's' if plan.policy.limits.wall_time else ''}"
        )
        for place, upper, _work, _mount in plan.view.cache_layers:
            lines.append(
                f"# cache layer: {place} reads the host's cache; what the sandbox writes there lands in {upper} "
                "(this project's, never run by the host)"
            )
        if plan.view.shared_files:
            lines.append(
                f"# hard links: {len(plan.view.shared_files)} files of the project share their data with other places; a run copies them first"
            )
        pins = list(dict.fromkeys(path for path, mark in plan.view.unguarded if mark.startswith(LINK_PIN)))
        absent = sum(1 for _path, mark in plan.view.unguarded if not mark.startswith(LINK_PIN))
        if absent:
            lines.append(f"# absent protected paths: {absent}, nothing mounted there; anything the run creates at one is moved aside after it")
        if pins:
            lines.append(f"# protected behind symlinks: {', '.join(pins)}; protected at their targets, and a link the run replaces is put back")
        lines += [f"# note: {note}" for note in (*plan.view.notes, *plan.view.details)]
        return "\n".join(lines) + "\n"


def make_own(paths: list[str], quiet: bool) -> None:
    """Copy the project's files that other places share by hard link, before the sandbox can write one."""
    from stockade.bwrap.parts.hardlinks import make_own

    copied, failed = make_own(paths)
    lines = failed[:3] + ([f"... and {len(failed) - 3} more such files"] if len(failed) > 3 else [])
    if copied and not quiet:
        lines.insert(
            0,
            f"made {copied} file{'s' * (copied != 1)} of the project its own: {'they were hard links' if copied != 1 else 'it was a hard link'} "
            "shared with other places (a uv or pnpm store, a local git clone's objects), "
            "which a write inside would have changed too",
        )
    for line in lines:
        say(f"stockade: {line}")


def launch_of(plan: BwrapPlan) -> Launch:
    """The plan as plain data: what execute needs, and what the plan cache stores."""
    from stockade.bwrap.parts.seccomp_cache import cache_path
    from stockade.bwrap.running.execute import environment

    view, limits = plan.view, plan.policy.limits
    cache_dir = str(plan.locations.cache)
    staged = {id(piece) for path in view.staged_git for piece in view.under(path)}
    return Launch(
        bwrap=plan.bwrap,
        # a staged git dir's mounts travel apart: over its stage, or instead of it (execute._git_stages)
        args=bw.encode([*(piece for piece in plan.pieces if id(piece) not in staged), *environment(plan.env)]),
        command=list(plan.command),
        env=dict(plan.env),
        cwd=plan.cwd,
        project=view.project,
        writable=list(view.writable),
        reported=view.watched.reported,
        swept=view.watched.swept,
        tree=view.watched.tree,
        patterns=view.watch_patterns,
        watch_roots=view.watch_roots,
        unguarded=list(view.unguarded),
        socket_masks=list(view.socket_masks),
        notes=list(view.notes),
        state_dir=str(plan.locations.state),
        cache_dir=cache_dir,
        seccomp_file=cache_path(os.path.join(cache_dir, "seccomp"), plan.allow_unix),
        allow_unix=plan.allow_unix,
        session_rules=_session_rules(plan) if plan.network else None,
        file_size=limits.file_size,
        pids=limits.pids,
        memory=limits.memory,
        wall_time=limits.wall_time,
        origin=str(plan.policy.origin),
        interactive=plan.interactive,
        quiet=plan.quiet,
        walls=walls_of(view),
        tool_files=list(plan.tool_files),
        git_stages=[
            (
                path,
                alias,
                bw.encode([moved(piece, path, alias) for piece in view.under(path, frozenset())]),
                bw.encode(view.under(path)),
                [(name, bw.encode(view.under(os.path.join(path, name)))) for name in STAGE_BOUND],
            )
            for path, alias in ((path, f"{GIT_ALIASES}/{number}") for number, path in enumerate(view.staged_git))
        ],  # fmt: skip
        layers=list(view.cache_layers),
        checkpoints=(plan.policy.checkpoints.max_size, plan.policy.checkpoints.max_age) if plan.policy.checkpoints.enabled else None,
        stage=_stage_of(plan) if view.stage_mount else None,
        audit=(plan.policy.audit.log or str(plan.locations.default_audit_log), plan.policy.audit.otlp or ""),
        containers=_containers_of(plan.policy),
    )


def _containers_of(policy: Policy) -> tuple[str, str, list[str], bool] | None:
    rules = policy.containers
    return None if rules.engine == "none" else (rules.engine, rules.socket or "", list(rules.images), rules.keep)


def _stage_of(plan: BwrapPlan) -> dict[str, object]:
    """A staged run's: where its overlay is mounted, what the review marks, and what is accepted at once."""
    import re

    from stockade.profiles.floor import stage_marks

    view = plan.view
    exact = [(re.escape(path) + "(?:/.*)?", why) for path, why in view.stage_marks]  # a folder's contents with it
    return {
        "mount": view.stage_mount,
        "marks": [*exact, *stage_marks(view.project, plan.policy.filesystem.deny_write, str(plan.locations.home))],
        "accept": plan.policy.checkpoints.accept,
    }


def walls_of(view: View) -> dict[str, object]:
    """What --trace needs to name the wall a refused file access hit (denials.py): the hidden and
    read-only places with why each is, and the private home with what it shows."""

    def why(path: str) -> str:
        return view.reasons.get(path) or view.reasons.get(os.path.realpath(path)) or ""

    return {
        "hidden": [[path, why(path)] for path in view.masked],
        "read_only": [[path, why(path)] for path in view.read_only],
        "home": view.home,
        "shown": list(view.shown),
    }


def _session_rules(plan: BwrapPlan) -> dict[str, object]:
    """The daemon's rules for the run, and the host loopback ports its namespace forwards (forwards.py)."""
    from stockade.bwrap.parts.forwards import loopback_forwards
    from stockade.bwrap.parts.interception import DNS_PORT, TRANSPARENT_PORT
    from stockade.bwrap.parts.netns import PROXY_PORT
    from stockade.proxy.client.api import session_rules

    rules = session_rules(plan.policy, plan.locations)
    rules["mcp"] = plan.mcp
    rules["forwards"] = loopback_forwards(plan.policy.network.allow, PROXY_PORT, (TRANSPARENT_PORT, DNS_PORT))
    return rules


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _ensure_audit_log(policy: Policy) -> None:
    """A custom audit log must exist before planning, or it could not be hidden (ESCAPES 82);
    so must its rotated generations (proxy/audit.py), which readers take as records too."""
    from stockade.proxy.audit import generations

    for path in generations(policy.audit.log):
        if os.path.lexists(path):
            continue
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600))
