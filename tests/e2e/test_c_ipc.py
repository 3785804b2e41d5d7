"""ESCAPES.md section C (IPC and sockets), Linux: host listeners must hear nothing from inside.

Case 45 (LaunchServices, Apple Events, XPC) is macOS-only.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import (
    BAD,
    IS_ROOT,
    NR,
    PY,
    Listener,
    named,
    parse_probe,
    policy_text,
    probe,
    q,
    syscall_probe_code,
    unix_listener,
)

AF_UNIX, AF_INET, AF_VSOCK = 1, 2, 40
SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET, SOCK_CLOEXEC = 1, 2, 5, 0o2000000
EPERM, EFAULT = 1, 14

CONNECT_PROBE = r"""
import json, socket
out = {}
for path in PATHS:
    try:
        s = socket.socket(socket.AF_UNIX)
    except OSError as exc:
        out[path] = "socket errno %d" % exc.errno
        continue
    try:
        s.settimeout(2)
        s.connect(path)
        out[path] = "CONNECTED " + s.recv(9).decode(errors="replace")
    except OSError as exc:
        out[path] = "connect errno %d" % exc.errno
    finally:
        s.close()
print("PROBE " + json.dumps(out))
"""


def connect_code(paths: list[str]) -> str:
    return f"PATHS = {paths!r}\n{CONNECT_PROBE}"


def allow_unix_policy(box: Box, socket_path: Path) -> str:
    """The debug policy of ESCAPES 35: AF_UNIX allowed for one listed socket path."""
    return policy_text(extra=f'[network]\nunix_sockets = ["{socket_path}"]\n')


@pytest.fixture
def run_user_socket() -> Iterator[Path | None]:
    """/run/user/$UID/stockade-test-*.sock when this uid may create it (root may create the folder)."""
    folder = Path(f"/run/user/{os.getuid()}")
    made = False
    if not folder.is_dir() and IS_ROOT and Path("/run/user").is_dir():
        folder.mkdir(mode=0o700)
        made = True
    path = folder / f"stockade-test-{secrets.token_hex(3)}.sock"
    if not os.access(folder, os.W_OK):
        yield None
        return
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        if made:
            shutil.rmtree(folder, ignore_errors=True)


# --- case 35 ----------------------------------------------------------------------------------------


@pytest.mark.skipif(not NR, reason="no syscall table for this machine")
def test_case_35_af_unix_socket_creation_is_refused_by_the_filter(vbox: Box) -> None:
    """ESCAPES 35 (V1, V7): datagram AF_UNIX sockets and socketpairs and vsock are refused by the filter, not
    the kernel; stream sockets of the sandbox's own are allowed (every host socket is hidden instead).

    socketpair gets a bad pointer for its result: EFAULT means the kernel was reached (the stream
    control), EPERM means our filter answered first.
    """
    cases = [
        ("socket-unix-dgram", "socket", (AF_UNIX, SOCK_DGRAM, 0)),
        ("socket-unix-dgram-cloexec", "socket", (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)),
        ("socket-unix-dgram-high-bit", "socket", (AF_UNIX | (1 << 32), SOCK_DGRAM, 0)),
        ("socket-unix-seqpacket", "socket", (AF_UNIX, SOCK_SEQPACKET, 0)),
        ("socket-unix-raw", "socket", (AF_UNIX, 3, 0)),
        ("socketpair-dgram", "socketpair", (AF_UNIX, SOCK_DGRAM, 0, BAD)),
        ("socketpair-dgram-cloexec", "socketpair", (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, BAD)),
        ("socket-vsock", "socket", (AF_VSOCK, SOCK_STREAM, 0)),
        # Controls: these reach the kernel.
        ("control-socketpair-stream", "socketpair", (AF_UNIX, SOCK_STREAM, 0, BAD)),
        ("control-socketpair-seqpacket", "socketpair", (AF_UNIX, SOCK_SEQPACKET, 0, BAD)),  # Rust's spawn: a pair reaches only its twin
        ("control-socket-unix-stream", "socket", (AF_UNIX, SOCK_STREAM, 0)),
        ("control-socket-inet", "socket", (AF_INET, SOCK_STREAM, 0)),
    ]
    seen, result = probe(vbox, syscall_probe_code(cases))
    refused = {k: v for k, v in seen.items() if not k.startswith("control")}
    assert set(refused.values()) == {EPERM}, named(seen)
    assert seen["control-socketpair-stream"] == EFAULT and seen["control-socketpair-seqpacket"] == EFAULT, named(seen)
    assert seen["control-socket-inet"] == 0, named(seen)
    assert seen["control-socket-unix-stream"] == 0, named(seen)


def test_case_35_host_unix_sockets_are_unreachable(vbox: Box, run_user_socket: Path | None) -> None:
    """ESCAPES 35: the host listens on pathname sockets under the read-only root, the home and /run; nothing
    connects (a visible one is masked: ECONNREFUSED; the others are out of sight: ENOENT)."""
    paths = [vbox.home / "test.sock", vbox.outside / "docker.sock"] + ([run_user_socket] if run_user_socket else [])
    listeners = [unix_listener(path) for path in paths]
    try:
        seen, _ = probe(vbox, connect_code([str(p) for p in paths]))
        curl = vbox.run(f"curl -s -m3 --unix-socket {q(str(paths[1]))} http://x/version; echo curl=$?")
        assert all(answer in ("connect errno 2", "connect errno 111") for answer in seen.values()), seen
        assert "HOSTHELLO" not in curl.stdout, curl
        assert [listener.connections for listener in listeners] == [0] * len(paths)
        # Control: the same connect from the host, outside the sandbox, is answered.
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(paths[0]))
            assert client.recv(9) == b"HOSTHELLO"
    finally:
        for listener in listeners:
            listener.close()


def test_case_35_allowed_socket_path_works_hidden_run_paths_do_not(vbox: Box, run_user_socket: Path | None) -> None:
    """ESCAPES 35 with AF_UNIX allowed (debug policy): the listed socket works; /run and abstract host sockets are out of reach."""
    allowed = vbox.project / "ok.sock"
    abstract = "\0stockade-test-" + secrets.token_hex(4)
    with unix_listener(allowed) as ok, Listener(socket.AF_UNIX, abstract) as hidden_abstract:
        extra = [run_user_socket] if run_user_socket else []
        others = [unix_listener(p) for p in extra]
        try:
            seen, _ = probe(vbox, connect_code([str(allowed), abstract, *map(str, extra)]), policy=allow_unix_policy(vbox, allowed))
            assert seen[str(allowed)] == "CONNECTED HOSTHELLO", seen  # control
            assert ok.connections == 1
            assert seen[abstract].startswith("connect errno"), seen  # the network namespace isolates abstract names
            assert hidden_abstract.connections == 0
            for path, listener in zip(extra, others, strict=True):
                assert seen[str(path)] == "connect errno 2", seen  # /run is a private tmpfs
                assert listener.connections == 0
        finally:
            for listener in others:
                listener.close()


def test_case_35_allowed_socket_does_not_open_every_other_socket(vbox: Box) -> None:
    """ESCAPES 35: with AF_UNIX allowed for one path, other host sockets under the read-only root are masked (ENOENT)."""
    allowed = vbox.project / "ok.sock"
    with unix_listener(allowed), unix_listener(vbox.home / "test.sock") as other:
        seen, _ = probe(vbox, connect_code([str(vbox.home / "test.sock")]), policy=allow_unix_policy(vbox, allowed))
        assert other.connections == 0 and "CONNECTED" not in seen[str(vbox.home / "test.sock")], seen


# --- case 36 ----------------------------------------------------------------------------------------


def test_case_36_dbus_buses_are_unreachable(vbox: Box) -> None:
    """ESCAPES 36: no D-Bus address passed in, the fake host bus hears nothing, no transient unit runs a marker."""
    bus = vbox.home / "bus"
    marker = vbox.outside / "ESCAPED"
    address = f"unix:path={bus}"
    with unix_listener(bus) as fake_bus:
        attack = vbox.run(
            'echo "session=${DBUS_SESSION_BUS_ADDRESS:-unset} system=${DBUS_SYSTEM_BUS_ADDRESS:-unset}";'
            f"systemd-run --user --wait touch {q(str(marker))};"
            f"DBUS_SESSION_BUS_ADDRESS={q(address)} busctl --user list; "
            f"DBUS_SESSION_BUS_ADDRESS={q(address)} gdbus call --session --dest org.freedesktop.DBus "
            "--object-path / --method org.freedesktop.DBus.ListNames;"
            "gdbus call --system --dest org.freedesktop.DBus --object-path / --method org.freedesktop.DBus.ListNames;"
            "test -e /run/dbus/system_bus_socket && echo SYSTEM-BUS-VISIBLE",
            env={"DBUS_SESSION_BUS_ADDRESS": address, "DBUS_SYSTEM_BUS_ADDRESS": address},
            timeout=30,
        )
        assert "session=unset system=unset" in attack.stdout, attack
        assert "SYSTEM-BUS-VISIBLE" not in attack.stdout
        assert fake_bus.connections == 0 and not marker.exists(), attack
        # Control: the same client on the host reaches the fake bus.
        if shutil.which("gdbus"):
            subprocess.run(
                [
                    "gdbus",
                    "call",
                    "--address",
                    address,
                    "--dest",
                    "org.freedesktop.DBus",
                    "--object-path",
                    "/",
                    "--method",
                    "org.freedesktop.DBus.ListNames",
                    "--timeout",
                    "1",
                ],
                capture_output=True,
                timeout=10,
            )
        else:
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(bus))
        for _ in range(40):
            if fake_bus.connections:
                break
            subprocess.run(["sleep", "0.05"])
        assert fake_bus.connections >= 1


# --- case 37 ----------------------------------------------------------------------------------------


@pytest.fixture
def ssh_agent(vbox: Box) -> Iterator[tuple[Path, str]]:
    """A host ssh-agent on a socket in $H holding a fresh test key; yields (socket, key fingerprint)."""
    if not shutil.which("ssh-agent") or not shutil.which("ssh-keygen"):
        pytest.skip("openssh-client is not installed")
    sock = vbox.home / "agent.sock"
    key = vbox.root / "agent_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stockade-test", "-f", str(key)], check=True)
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.02"])
        env = {"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        listed = subprocess.run(["ssh-add", "-l"], env=env, capture_output=True, text=True, check=True).stdout
        yield sock, listed.split()[1]
    finally:
        agent.kill()
        agent.wait()


def test_case_37_ssh_agent_is_no_signing_oracle(vbox: Box, ssh_agent: tuple[Path, str]) -> None:
    """ESCAPES 37: SSH_AUTH_SOCK removed, the agent socket unreachable even by its path."""
    sock, fingerprint = ssh_agent
    attack = vbox.run(
        'echo "sock=${SSH_AUTH_SOCK:-unset}"; ssh-add -l; '
        f"SSH_AUTH_SOCK={q(str(sock))} ssh-add -l; SSH_AUTH_SOCK={q(str(sock))} ssh-add -D && echo DELETED-KEYS;"
        "gpg-connect-agent /bye",
        env={"SSH_AUTH_SOCK": str(sock)},
    )
    assert "sock=unset" in attack.stdout, attack
    assert fingerprint not in attack.stdout and "DELETED-KEYS" not in attack.stdout, attack
    assert "Could not open a connection to your authentication agent" in attack.stderr or "Error connecting" in attack.stderr, attack.stderr
    # Control (host side): the agent still holds the key and answers outside the sandbox.
    listed = subprocess.run(["ssh-add", "-l"], env={"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert fingerprint in listed.stdout, listed


# --- case 38 ----------------------------------------------------------------------------------------


@pytest.fixture
def tmux_server(vbox: Box) -> Iterator[Path]:
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    sock = vbox.home / "tmux.sock"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(vbox.home), "TERM": "xterm"}
    subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "-s", "t", "sh"], env=env, check=True)
    try:
        yield sock
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], env=env, capture_output=True)


def test_case_38_terminal_multiplexer_socket(vbox: Box, tmux_server: Path) -> None:
    """ESCAPES 38: TMUX/NVIM/VSCODE variables scrubbed, the tmux socket unreachable, nothing runs on the host."""
    sock = tmux_server
    marker = vbox.outside / "ESCAPED"
    tmux_env = {"TMUX": f"{sock},1,0", "NVIM": str(vbox.home / "nvim.sock"), "VSCODE_IPC_HOOK_CLI": str(vbox.home / "vs.sock")}
    attack = vbox.run(
        'echo "vars=${TMUX:-}${NVIM:-}${VSCODE_IPC_HOOK_CLI:-}."; '
        f"tmux new-window 'touch {marker}'; tmux -S {q(str(sock))} send-keys 'touch {marker}' Enter;"
        f"tmux -S {q(str(sock))} new-window 'touch {marker}'",
        env=tmux_env,
    )
    subprocess.run(["sleep", "0.5"])
    assert "vars=." in attack.stdout, attack
    assert not marker.exists(), attack
    # Control (host side): the same send-keys from outside does run.
    control_marker = vbox.outside / "CONTROL"
    subprocess.run(["tmux", "-S", str(sock), "send-keys", "-t", "t", f"touch {control_marker}", "Enter"], env={"PATH": "/usr/bin:/bin"}, check=True)
    for _ in range(50):
        if control_marker.exists():
            break
        subprocess.run(["sleep", "0.05"])
    assert control_marker.exists()


# --- case 39 ----------------------------------------------------------------------------------------


def test_case_39_x11_and_wayland(vbox: Box) -> None:
    """ESCAPES 39: DISPLAY/WAYLAND_DISPLAY unset; the abstract X socket unreachable even with AF_UNIX allowed."""
    display = 90 + secrets.randbelow(9)
    abstract = f"\0/tmp/.X11-unix/X{display}-{secrets.token_hex(3)}"
    allowed = vbox.project / "ok.sock"
    with Listener(socket.AF_UNIX, abstract) as x_server, unix_listener(allowed):
        env = {"DISPLAY": f":{display}", "WAYLAND_DISPLAY": "wayland-0", "XAUTHORITY": str(vbox.home / ".Xauthority")}
        plain = vbox.run('echo "display=${DISPLAY:-unset} wayland=${WAYLAND_DISPLAY:-unset} xauth=${XAUTHORITY:-unset}"; ls /tmp/.X11-unix', env=env)
        seen_blocked, _ = probe(vbox, connect_code([abstract]))
        seen_allowed, _ = probe(vbox, connect_code([abstract]), policy=allow_unix_policy(vbox, allowed))
        assert "display=unset wayland=unset xauth=unset" in plain.stdout, plain
        assert seen_blocked[abstract].startswith("connect errno"), seen_blocked  # the network namespace
        assert seen_allowed[abstract].startswith("connect errno"), seen_allowed
        assert x_server.connections == 0
        # Control (host side): the abstract socket answers outside the sandbox.
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(abstract)
            assert client.recv(9) == b"HOSTHELLO"


# --- case 41 ----------------------------------------------------------------------------------------

FD_SEND_PROBE = r"""
import json, os, socket
open_fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
sent = {}
for fd in FDS:
    try:
        socket.socket(fileno=fd).send(b"FROM-SANDBOX")
        sent[fd] = "sent"
    except OSError as exc:
        sent[fd] = "errno %d" % exc.errno
print("PROBE " + json.dumps({"open": open_fds, "sent": sent}))
"""


def test_case_41_inherited_sockets_do_not_reach_inside(vbox: Box) -> None:
    """ESCAPES 41 (V2): live TCP and Unix sockets leaked into `stockade run` are not usable inside."""
    with Listener(socket.AF_INET, ("127.0.0.1", 0)) as tcp, unix_listener(vbox.home / "leak.sock") as unix:
        tcp_client = socket.create_connection(tcp.address)
        unix_client = socket.socket(socket.AF_UNIX)
        unix_client.connect(str(vbox.home / "leak.sock"))
        fds = [tcp_client.fileno(), unix_client.fileno()]
        for fd in fds:
            os.set_inheritable(fd, True)
        try:
            result = vbox.run(argv=[PY, "-c", f"FDS = {fds}\n{FD_SEND_PROBE}"], pass_fds=tuple(fds))
            seen = parse_probe(result)
            assert seen["open"] == [], seen
            assert all(answer.startswith("errno") for answer in seen["sent"].values()), seen
            # Control: the leaked sockets were live; the host side still sends through them.
            tcp_client.sendall(b"CONTROL")
            unix_client.sendall(b"CONTROL")
        finally:
            tcp_client.close()
            unix_client.close()
        for _ in range(40):
            if b"CONTROL" in tcp.received and b"CONTROL" in unix.received:
                break
            subprocess.run(["sleep", "0.05"])
    assert b"FROM-SANDBOX" not in tcp.received and b"FROM-SANDBOX" not in unix.received
    assert tcp.received == b"CONTROL" and unix.received == b"CONTROL"


# --- case 42 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("unix_allowed", [False, True], ids=["default-filter", "af-unix-allowed"])
def test_case_42_own_control_plane_is_hidden(vbox: Box, unix_allowed: bool) -> None:
    """ESCAPES 42: the daemon's control socket under $XDG_RUNTIME_DIR/stockade is neither visible nor connectable."""
    runtime = vbox.home / "run"
    (runtime / "stockade").mkdir(parents=True, mode=0o700)
    (vbox.home / ".local" / "state" / "stockade").mkdir(parents=True)
    control = runtime / "stockade" / "control.sock"
    allowed = vbox.project / "ok.sock"
    with unix_listener(control) as daemon, unix_listener(allowed):
        policy = allow_unix_policy(vbox, allowed) if unix_allowed else None
        env = {"XDG_RUNTIME_DIR": str(runtime)}
        listing = vbox.run('ls -la "$XDG_RUNTIME_DIR/stockade" ~/.local/state/stockade', policy=policy, env=env)
        seen, _ = probe(vbox, connect_code([str(control)]), policy=policy, env=env)
        assert "control.sock" not in listing.stdout, listing
        assert "CONNECTED" not in seen[str(control)], seen
        assert daemon.connections == 0
        # Control (host side): the socket is live.
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(control))
            assert client.recv(9) == b"HOSTHELLO"


# --- case 43 ----------------------------------------------------------------------------------------


def _ipcmk(*args: str) -> str:
    out = subprocess.run(["ipcmk", *args], capture_output=True, text=True, check=True).stdout
    return out.strip().split(":")[-1].strip()


@pytest.mark.skipif(not shutil.which("ipcmk"), reason="util-linux ipcmk is not installed")
def test_case_43_host_sysv_ipc_is_invisible(vbox: Box) -> None:
    """ESCAPES 43: host SysV shared memory, queues and semaphores are invisible (IPC namespace); private ones work."""
    ids = {"-m": _ipcmk("-M", "4096"), "-q": _ipcmk("-Q"), "-s": _ipcmk("-S", "1")}
    try:
        attack = vbox.run(
            "ipcs -a; for id in " + " ".join(ids.values()) + "; do ipcrm -m $id; ipcrm -q $id; ipcrm -s $id; done 2>/dev/null;"
            "ipcmk -M 4096 && ipcs -m | grep -c 4096 | sed 's/^/OWN=/'"
        )
        for kind, ident in ids.items():
            listed = subprocess.run(["ipcs", kind, "-i", ident], capture_output=True, text=True)
            assert listed.returncode == 0, f"host IPC object {kind} {ident} was removed from inside"
            assert f" {ident} " not in attack.stdout.replace("\t", " "), attack.stdout
        assert "OWN=1" in attack.stdout, attack  # control: the sandbox's own IPC namespace works
    finally:
        for kind, ident in ids.items():
            subprocess.run(["ipcrm", kind, ident], capture_output=True)
