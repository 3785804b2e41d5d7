"""The macOS backend: build a `SeatbeltPlan`, explain it, run it under `sandbox-exec`.

`build` and `explain` work on any platform (a dry run on Linux shows the
exact macOS plan); `run` needs `/usr/bin/sandbox-exec`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from stockade.core.backend import RunRequest
from stockade.core.errors import (
    CannotExecuteError,
    CommandNotFoundError,
    SandboxSetupError,
    UsageError,
)
from stockade.core.invocation import new_session_id
from stockade.core.proxy_env import ca_environment, proxy_environment
from stockade.profiles import gitdirs
from stockade.profiles.envfilter import sandbox_env, withheld
from stockade.profiles.floor import floor_for
from stockade.profiles.model import NetworkMode, Policy
from stockade.profiles.paths import is_within
from stockade.profiles.text import say
from stockade.profiles.units import format_duration
from stockade.seatbelt import sbpl
from stockade.seatbelt.logstream import LOG_COMMAND, LogStream
from stockade.seatbelt.profile import Profile, ProfileSpec, render
from stockade.seatbelt.supervise import supervise
from stockade.seatbelt.violations import file_findings, parse_lines, printable, summary

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
PLACEHOLDER_PORT = 0
TEMP_VARIABLES = ("TMPDIR",)
_MAX_SYMLINK_HOPS = 40


@dataclass(frozen=True)
class HostPaths:
    """Path spellings as Seatbelt will compare them on this machine (it sees resolved paths).

    Deny rules get every spelling, symlinks followed: denying more is safe.
    Allow rules follow a symlink only when it lies outside every writable
    root: a link the sandbox could have planted in an earlier run must not
    decide what the next run may write.
    """

    writable_roots: tuple[str, ...] = ()
    scan_limit: int = 5000  # entries looked at per denied folder when looking for symlinks
    truncated: list[str] = field(default_factory=list)  # folders too big to scan completely

    def deny_spellings(self, path: str) -> tuple[str, ...]:
        return _unique((*sbpl.private_aliases(path), *sbpl.private_aliases(os.path.realpath(path))))

    def allow_spellings(self, path: str) -> tuple[str, ...]:
        real = self._trusted_realpath(path)
        return _unique((*sbpl.private_aliases(path), *(sbpl.private_aliases(real) if real else ())))

    def link_targets(self, path: str) -> tuple[str, ...]:
        """Resolved targets of the symlinks below `path` (not following them further down)."""
        targets: list[str] = []
        seen = 0
        for folder, dirs, files in os.walk(os.path.realpath(path)):
            for name in (*dirs, *files):
                seen += 1
                full = os.path.join(folder, name)
                if os.path.islink(full):
                    targets.append(os.path.realpath(full))
            if seen > self.scan_limit:
                self.truncated.append(path)
                break
        return tuple(targets)

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def _planted(self, link: str) -> bool:
        roots = (*self.writable_roots, *(os.path.realpath(r) for r in self.writable_roots))
        return any(is_within(alias, root) for root in roots for alias in sbpl.private_aliases(link))

    def _trusted_realpath(self, path: str) -> str | None:
        """`path` with symlinks resolved, or None when a link inside a writable root is in the way."""
        resolved = "/"
        parts = path.split("/")
        hops = 0
        while parts:
            part = parts.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                resolved = os.path.dirname(resolved)
                continue
            candidate = os.path.join(resolved, part)
            if not os.path.islink(candidate):
                resolved = candidate
                continue
            hops += 1
            if self._planted(candidate) or hops > _MAX_SYMLINK_HOPS:
                return None
            try:
                target = os.readlink(candidate)
            except OSError:
                return None
            parts = target.split("/") + parts
            if target.startswith("/"):
                resolved = "/"
        return resolved


def _unique(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


@dataclass(frozen=True)
class SeatbeltPlan:
    """One run, fully decided: `argv` is exactly what gets executed."""

    argv: tuple[str, ...]
    profile: Profile
    command: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...]
    temp_dir: Path
    tag: str
    network_mode: NetworkMode
    proxy_port: int | None  # None when the network is off; 0 is the dry-run placeholder
    wall_time: float | None = None
    file_size: int | None = None
    report_violations: bool = True
    withheld_env: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def environment(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        return self.profile.params


def proxy_env(port: int, token: str | None = None) -> dict[str, str]:
    """The proxy variables inside a macOS sandbox: the session's credential rides in the URL
    (only this sandbox sees it, and it admits only this session); nothing bypasses the proxy."""
    return proxy_environment(port, credential=f"stockade:{token}" if token else "")


class SeatbeltPlanner:
    """The macOS planner: a Seatbelt profile run by `sandbox-exec` (run.py decides when)."""

    def __init__(
        self,
        *,
        proxy_port: int | None = None,
        session_id: str | None = None,
        temp_base: Path | None = None,
        sandbox_exec: str = SANDBOX_EXEC,
        log_command: str = LOG_COMMAND,
        proxy_token: str | None = None,
        placeholders: dict[str, str] | None = None,
    ) -> None:
        """`proxy_port`: the proxy daemon's loopback port (None in a dry run without a daemon).

        `session_id` names the run in denial messages (and may be the proxy's
        session id); a random one is made per build when not given.
        """
        self.findings: dict[str, object] = {}  # after run: the refusals as data (seatbelt/run.py)
        if proxy_port is not None and not 0 <= proxy_port <= 65535:
            raise ValueError(f"proxy port {proxy_port} out of range")
        self.proxy_port = proxy_port
        self.proxy_token = proxy_token
        self.placeholders = placeholders or {}  # credential name -> this run's placeholder (proxy/client/credentials.py)
        self.session_id = session_id
        self.temp_base = temp_base
        self.sandbox_exec = sandbox_exec
        self.log_command = log_command

    # ---- build ----

    def build(self, request: RunRequest) -> SeatbeltPlan:
        if not request.command:
            raise UsageError("no command to run")
        if any("\0" in part for part in request.command):
            raise UsageError("the command contains a NUL character")
        policy = request.policy
        session = self.session_id or request.session_id or new_session_id()
        try:
            tag = sbpl.check_tag(f"stockade-{session}")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        temp_dir = self._temp_base() / tag
        port, notes = self._port(policy)
        floor = floor_for(policy.filesystem.allow_write, request.locations, policy.protected_files)
        git = gitdirs.protected_for(
            (str(policy.project_dir), str(request.cwd)),
            policy.filesystem.allow_write,
            str(request.locations.home),
            request.host_env,
            str(request.cwd),
        )
        floor = replace(floor, read_only=tuple(dict.fromkeys((*floor.read_only, *git))))
        ca_bundle = self._ca_bundle(request)
        ssh_files, ssh_env = self._ssh(request)
        spec = ProfileSpec(
            policy=policy, floor=floor, home=str(request.locations.home), temp_dir=str(temp_dir), tag=tag, proxy_port=port, ca_bundle=ca_bundle,
            ssh_files=ssh_files,
        )  # fmt: skip
        paths = HostPaths(writable_roots=(*policy.filesystem.allow_write, str(temp_dir)))
        try:
            profile = render(spec, paths)
        except ValueError as exc:
            raise SandboxSetupError(f"cannot write the Seatbelt profile: {exc}") from None
        notes += [f"{path}: more than {paths.scan_limit} entries; symlinks beyond those are not followed" for path in paths.truncated]
        env = sandbox_env(request.host_env, policy.env)
        env["TMPDIR"] = str(temp_dir)
        if port is not None:
            env.update(proxy_env(port, self.proxy_token))
        if ca_bundle is not None:
            env.update(ca_environment(ca_bundle))
        env.update(ssh_env)
        if port is not None:
            env.update(self.placeholders)  # over any variable of the same name: the sandbox holds no value
        argv = (self.sandbox_exec, *profile.sandbox_exec_args(), "--", *request.command)
        return SeatbeltPlan(
            argv=argv,
            profile=profile,
            command=tuple(request.command),
            cwd=request.cwd,
            env=tuple(env.items()),
            temp_dir=temp_dir,
            tag=tag,
            network_mode=policy.network.mode,
            proxy_port=port,
            wall_time=policy.limits.wall_time,
            file_size=policy.limits.file_size,
            report_violations=not request.quiet,
            withheld_env=tuple(withheld(request.host_env, policy.env)),
            notes=tuple(notes + _limit_notes(policy)),
        )

    def _ca_bundle(self, request: RunRequest) -> str | None:
        """Hosts with HTTP rules: the bundle the sandbox reads where it is (proxy/client/cabundle.py). None on a
        dry run (the placeholder port: nothing is made) and without HTTP rules."""
        policy = request.policy
        if policy.network.mode is NetworkMode.NONE or not policy.terminated_hosts or self.proxy_port is None:
            return None
        from stockade.proxy.client.cabundle import bundle
        from stockade.proxy.client.launch import daemon_files

        return bundle(daemon_files(request.locations), str(request.locations.cache))

    def _ssh(self, request: RunRequest) -> tuple[tuple[str, ...], dict[str, str]]:
        """Raw-TCP allow rules (`github.com:22`): ssh's files, read where they are in stockade's cache, and the
        variables naming its config (proxy/client/sshroute.py). Nothing on a dry run, nor without such a rule."""
        policy = request.policy
        if policy.network.mode is NetworkMode.NONE or self.proxy_port is None:
            return (), {}
        from stockade.proxy.client import sshroute

        rules = sshroute.raw_tcp_rules(policy.network.allow)
        if not rules:
            return (), {}
        system = sshroute.SYSTEM_CONFIG if os.path.isfile(sshroute.SYSTEM_CONFIG) else None
        files = sshroute.ssh_files(str(request.locations.cache), str(request.locations.home), rules, inside=False, system=system)
        return files.paths(), sshroute.ssh_environment(files.config, policy.env.set)

    def _temp_base(self) -> Path:
        return Path(os.path.realpath(self.temp_base or tempfile.gettempdir()))

    def _port(self, policy: Policy) -> tuple[int | None, list[str]]:
        notes: list[str] = []
        if policy.network.mode is NetworkMode.NONE:
            if policy.network.unix_sockets:
                notes.append('[network] unix_sockets are not reachable: the network mode is "none"')
            return None, notes
        if self.proxy_port is None:
            notes.append("proxy port 0 is a placeholder: no proxy daemon runs during a dry run; `stockade run` puts the daemon's port there")
            return PLACEHOLDER_PORT, notes
        return self.proxy_port, notes

    # ---- explain ----

    def explain(self, plan: SeatbeltPlan) -> str:
        index = plan.profile.index
        if plan.proxy_port is None:
            network = 'off (mode "none"): no outbound connection at all'
        else:
            network = f'mode "{plan.network_mode.value}": only the proxy at 127.0.0.1:{plan.proxy_port}, which applies [network] allow/deny'
        denials = f"summarised after the run from `log stream`, tag {plan.tag}" if plan.report_violations else "not reported (quiet)"
        ours = {*proxy_env(0), *TEMP_VARIABLES}
        set_here = sorted(n for n in plan.environment if n in ours)
        lines = [
            "# stockade run plan: macOS Seatbelt (sandbox-exec)",
            f"policy: {printable(index.origin)}",
            f"network: {network}",
            f"temp dir: {printable(str(plan.temp_dir))} (created at start, removed at the end; TMPDIR points here)",
            f"wall time: {format_duration(plan.wall_time) if plan.wall_time else 'no limit'}",
            f"denials: {denials}",
            f"environment: {len(plan.env)} variables; set by stockade: {', '.join(set_here)}; withheld: {', '.join(plan.withheld_env) or 'none'}",
        ]
        lines += [f"note: {printable(note)}" for note in plan.notes]
        lines += ["", "--- profile (sandbox-exec -p) ---", plan.profile.text.rstrip("\n"), ""]
        lines += ["--- parameters (sandbox-exec -D) ---"]
        lines += [f"{name}={printable(value)}" for name, value in plan.params]
        lines += ["", "--- command ---", " ".join(_shell_word(a) if a != plan.profile.text else '"$PROFILE"' for a in plan.argv)]
        lines += ["(where $PROFILE is the profile above)"]
        return "\n".join(lines) + "\n"

    # ---- run ----

    def run(self, plan: SeatbeltPlan) -> int:
        self._preflight(plan)
        env = plan.environment
        _check_command(plan.command, env, plan.cwd)
        _make_private_dir(plan.temp_dir)
        monitor = LogStream(plan.tag, self.log_command) if plan.report_violations else None
        try:
            if monitor is not None and not monitor.start():
                monitor = None
            outcome = supervise(plan.argv, env=env, cwd=plan.cwd, wall_time=plan.wall_time, file_size=plan.file_size)
        except OSError as exc:
            raise SandboxSetupError(f"cannot start {self.sandbox_exec}: {exc.strerror or exc}") from None
        finally:
            lines = monitor.stop() if monitor is not None else []
            _remove_tree(plan.temp_dir)
        if outcome.timed_out:
            _say(f"stockade: wall_time limit of {format_duration(plan.wall_time or 0)} reached; the command was killed")
        violations = parse_lines(lines, plan.tag)
        for line in summary(violations, plan.profile.index):
            _say(line)
        self.findings = {"files": file_findings(violations, plan.profile.index), "limits": ["wall_time"] if outcome.timed_out else []}
        return outcome.exit_code

    def _preflight(self, plan: SeatbeltPlan) -> None:
        if not (os.path.isfile(self.sandbox_exec) and os.access(self.sandbox_exec, os.X_OK)):
            raise SandboxSetupError(f"{self.sandbox_exec} not found: the Seatbelt backend runs on macOS only")
        if plan.network_mode is not NetworkMode.NONE and not plan.proxy_port:
            raise SandboxSetupError(
                f'network mode "{plan.network_mode.value}" needs the proxy daemon\'s port and none was given; '
                'start the proxy daemon, or use a policy with network mode "none"'
            )


def _limit_notes(policy: Policy) -> list[str]:
    limits = policy.limits
    missing = [name for name in ("memory", "pids", "tmp_size") if getattr(limits, name) is not None]
    return [f"limits.{name} is not enforced on macOS (no cgroups or private /tmp there)" for name in missing]


def _check_command(command: tuple[str, ...], env: dict[str, str], cwd: Path) -> None:
    """127 and 126 before starting anything, as a shell would answer."""
    name = command[0]
    if "/" in name:
        path = Path(name) if os.path.isabs(name) else cwd / name
        if not path.exists():
            raise CommandNotFoundError(f"{name}: no such file")
        if path.is_dir() or not os.access(path, os.X_OK):
            what = "a folder, not a program" if path.is_dir() else "not executable (chmod +x it, or run it through its interpreter)"
            raise CannotExecuteError(f"{name}: {what}")
        return
    if shutil.which(name, path=env.get("PATH", os.defpath)) is None:
        raise CommandNotFoundError(f"{name}: command not found")


def _make_private_dir(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise SandboxSetupError(f"cannot create the private temp dir {path}: {exc.strerror or exc}") from None


def _remove_tree(path: Path) -> None:
    """Remove the temp dir, even folders the command made unwritable; never follows links."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    os.chmod(path, stat.S_IRWXU)
    for root, dirs, _files in os.walk(path):  # top-down: a folder is opened up before it is entered
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


def _shell_word(text: str) -> str:
    """A shell spelling of one argv element that is safe to print to a terminal."""
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + text.encode("unicode_escape").decode("ascii").replace("'", "\\'") + "'"


def _say(line: str) -> None:
    say(line)
