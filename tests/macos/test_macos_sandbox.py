"""Real `sandbox-exec` runs of the generated profiles: ESCAPES cases that apply to macOS.

Each attack is paired with a control that must succeed, and the verdict is
read on the host (files, canary processes, listeners), not only from output.
Skipped off macOS; `STOCKADE_MACOS_MUST_RUN=1` (the macOS workflow) turns the
skip into a failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stockade.profiles.loader import builtin_names
from tests.macos.macos_support import CONNECT, CONNECT_UNIX, PLATFORM, Listener, World

pytestmark = PLATFORM

FIXTURES = Path(__file__).parent.parent / "seatbelt" / "fixtures"


# ---- every profile is accepted and ordinary commands work ----


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_profiles_compile_and_run(world: World, name: str) -> None:
    result = world.run(("/usr/bin/true",), policy=world.policy(profile=name))
    assert result.code == 0, result.err


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.toml")))
def test_fixture_profiles_compile_and_run(world: World, fixture: str) -> None:
    policy = world.policy(text=(FIXTURES / fixture).read_text())
    assert world.run(("/usr/bin/true",), policy=policy).code == 0


def test_ordinary_commands(world: World) -> None:
    script = (
        "ls / >/dev/null && id -un >/dev/null && uname -a >/dev/null && date >/dev/null"
        ' && echo hi > "$TMPDIR/x" && cat "$TMPDIR/x" && echo err >/dev/stderr'
    )
    result = world.sh(script)
    assert result.code == 0, result.err
    assert result.out == "hi\n" and "err" in result.err
    probe = (
        "import asyncio, socket, subprocess, tempfile, multiprocessing, os\n"
        "a, b = socket.socketpair(); a.sendall(b'x'); assert b.recv(1) == b'x'\n"
        "asyncio.run(asyncio.sleep(0))\n"
        "d = tempfile.mkdtemp(); open(os.path.join(d, 'f'), 'w').write('x')\n"
        "print(subprocess.run(['/bin/echo', 'sub'], capture_output=True, text=True).stdout.strip())\n"
        "print(os.cpu_count() > 0)\n"
    )
    result = world.python(probe)
    assert result.code == 0, result.err
    assert result.out.split() == ["sub", "True"]


def test_git_works_in_the_project(world: World) -> None:
    if subprocess.run(["/usr/bin/git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no working git on this Mac")
    subprocess.run(["/usr/bin/git", "init", "-q", str(world.project)], check=True)
    script = "git -c user.email=t@t -c user.name=t add README && git -c user.email=t@t -c user.name=t commit -qm x && git log --oneline | wc -l"
    result = world.sh(script)
    assert result.code == 0, result.err
    assert result.out.strip() == "1"


def test_exit_codes_signals_and_wall_time(world: World) -> None:
    assert world.sh("exit 7").code == 7
    assert world.sh("kill -TERM $$").code == 128 + signal.SIGTERM
    policy = world.policy(text='extends = ["default"]\n[limits]\nwall_time = "1s"\n')
    started = time.monotonic()
    result = world.run(("/bin/sleep", "30"), policy=policy)
    assert result.code == 128 + signal.SIGKILL
    assert time.monotonic() - started < 10
    assert "wall_time" in result.err


# ---- A. filesystem ----


def test_case1_writes_outside_the_project(world: World) -> None:
    """ESCAPES 1."""
    targets = [world.outside / "new", world.home / "probe", Path("/etc/stockade-probe"), Path("/usr/local/stockade-probe")]
    for target in targets:
        existed = target.exists()
        assert world.sh('echo x > "$1"', str(target)).code != 0, target
        assert target.exists() == existed, target
    control = world.sh('echo x > "$1"', str(world.project / "new"))
    assert control.code == 0 and (world.project / "new").read_text() == "x\n"


def test_case2_read_denied_secret_directly_and_through_a_symlink(world: World) -> None:
    """ESCAPES 2 and 78."""
    result = world.sh('cat "$1"', str(world.home / ".ssh" / "id_test"))
    assert result.code != 0 and "CANARY" not in result.out
    result = world.sh('ln -s "$1" home && cat home/.ssh/id_test', str(world.home))
    assert "CANARY" not in result.out
    (world.project / "sub").mkdir()
    (world.project / "sub" / ".env").write_text("CANARY-ENV\n")
    assert "CANARY" not in world.sh("cat sub/.env").out
    control = world.sh("cat README")
    assert control.code == 0 and control.out == "CANARY-OK\n"


def test_case5_hard_link_is_no_alias_for_a_denied_file(world: World) -> None:
    """ESCAPES 5: a link made inside must not read the secret (either step may fail)."""
    result = world.sh('ln "$1" k; cat k', str(world.home / ".ssh" / "id_test"))
    assert "CANARY" not in result.out
    control = world.sh("cp README copy && cat copy")
    assert control.code == 0 and control.out == "CANARY-OK\n"


def test_case7_moving_a_denied_folder_out(world: World) -> None:
    """ESCAPES 7, with the default policy and with the whole home writable."""
    aws = world.home / ".aws"
    assert world.sh('mv "$1" aws', str(aws)).code != 0
    assert world.sh('mv "$1" c', str(aws / "credentials")).code != 0
    policy = world.policy(text='[filesystem]\nallow_write = ["~"]\ndeny_read = ["~/.ssh", "~/.aws"]\n')
    (world.home / "notes").mkdir()
    for script in ('mv "$1/.aws" "$1/aws2"', 'mv "$1/.aws/credentials" "$1/c"', 'cp -R "$1/.aws" "$1/aws3"'):
        world.sh(script, str(world.home), policy=policy)
    assert (aws / "credentials").read_text() == "CANARY-AWS\n"
    assert not (world.home / "aws2").exists() and not (world.home / "c").exists()
    copied = [p.read_text() for p in (world.home / "aws3").rglob("*") if p.is_file()]
    assert not any("CANARY" in text for text in copied)
    control = world.sh('mv "$1/notes" "$1/notes2"', str(world.home), policy=policy)
    assert control.code == 0 and (world.home / "notes2").is_dir()


def test_case9_and_61_shell_rc_files_stay_read_only(world: World) -> None:
    """ESCAPES 9, 61, 66: with the home writable, rc files, existing or not, stay read-only."""
    policy = world.policy(text='[filesystem]\nallow_write = ["~"]\n')
    for name in (".bashrc", ".zshenv", ".profile", ".config/fish/config.fish", "Library/LaunchAgents/x.plist", ".ssh/authorized_keys"):
        target = world.home / name
        before = target.read_text() if target.exists() else None
        world.sh('mkdir -p "$(dirname "$1")"; echo "touch /tmp/RC" >> "$1"', str(target), policy=policy)
        after = target.read_text() if target.exists() else None
        assert after == before, name
    control = world.sh('echo x > "$1"', str(world.home / "notes.txt"), policy=policy)
    assert control.code == 0


def test_case58_git_hooks_and_config(world: World) -> None:
    """ESCAPES 58: hooks and config read-only, absent or present; the rest of .git writable."""
    git = world.project / ".git"
    (git / "objects").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    assert world.sh("mkdir -p .git/hooks && echo 'touch /tmp/HOOKED' > .git/hooks/pre-commit").code != 0
    assert not (git / "hooks" / "pre-commit").exists()
    assert world.sh("echo '[core]' > .git/config").code != 0 and not (git / "config").exists()
    assert world.sh("mv .git .git-old").code != 0 and git.is_dir()
    control = world.sh("echo x > .git/objects/probe")
    assert control.code == 0 and (git / "objects" / "probe").exists()


def test_case58_git_folder_cannot_be_renamed_into_place(world: World) -> None:
    """A prepared folder with hooks/ renamed to .git would plant hooks without writing below .git/hooks."""
    script = "mkdir -p y/hooks && echo 'touch /tmp/HOOKED' > y/hooks/pre-commit && mv y .git"
    assert world.sh(script).code != 0
    assert not (world.project / ".git").exists()
    assert world.sh("ln -s y .git").code != 0 and not (world.project / ".git").is_symlink()


def test_case63_policy_file_and_agent_config_stay_read_only(world: World) -> None:
    """ESCAPES 62, 63."""
    for name in (".stockade.toml", ".vscode/tasks.json", ".claude/settings.json", ".mcp.json", ".envrc"):
        world.sh('mkdir -p "$(dirname "$1")"; echo x > "$1"', name)
        assert not (world.project / name).exists(), name


def test_case10_tmp_spellings(world: World) -> None:
    """ESCAPES 10: a rule for /tmp/x also matches /private/tmp/x, and nothing else in /tmp."""
    name = f"stockade-mac-{secrets.token_hex(4)}"
    root = Path("/tmp") / name
    root.mkdir()
    try:
        policy = world.policy(text=f'extends = ["default"]\n[filesystem]\nallow_write = ["{root}"]\n')
        assert world.sh('echo ok > "$1"', str(root / "a"), policy=policy).code == 0
        assert world.sh('echo ok > "$1"', f"/private{root}/b", policy=policy).code == 0
        other = Path(f"/tmp/{name}-other")
        assert world.sh('echo no > "$1"', str(other), policy=policy).code != 0
        assert not other.exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_case15_stockade_state_is_hidden(world: World) -> None:
    """ESCAPES 15."""
    state = world.home / ".local" / "state" / "stockade"
    state.mkdir(parents=True)
    (state / "audit.jsonl").write_text('{"secret": "CANARY-AUDIT"}\n')
    result = world.sh('ls "$1"; cat "$1/audit.jsonl"', str(state))
    assert "CANARY" not in result.out and "audit.jsonl" not in result.out
    assert world.sh('ls "$1" >/dev/null', str(world.home)).code == 0


@pytest.mark.parametrize("name", ['p") (allow default) ("', "line\nbreak\\and\\back", 'q"(u)o;te'])
def test_case16_injection_named_project(world: World, name: str) -> None:
    """ESCAPES 16: the folder name reaches SBPL only as a -D parameter."""
    project = world.root / name
    project.mkdir()
    policy = world.policy(project=project)
    assert world.sh('echo x > "$1"', str(world.outside / "new"), policy=policy, cwd=project).code != 0
    assert not (world.outside / "new").exists()
    control = world.sh('echo x > "$1"', str(project / "ok"), policy=policy, cwd=project)
    assert control.code == 0 and (project / "ok").exists()


# ---- B. network ----


def test_case17_direct_connections_refused_proxy_reachable(world: World) -> None:
    """ESCAPES 17 and 28: only the proxy port is reachable; host loopback services are not."""
    proxy, canary = Listener(), Listener()
    try:
        policy = world.policy(profile="npm")
        env = world.sh('printf %s "$HTTPS_PROXY"', policy=policy, proxy_port=proxy.port)
        assert env.out == f"http://127.0.0.1:{proxy.port}"
        direct = world.python(CONNECT, "127.0.0.1", str(canary.port), policy=policy, proxy_port=proxy.port)
        assert direct.code != 0 and canary.accepted == 0
        outside = world.python(CONNECT, "198.51.100.1", "80", policy=policy, proxy_port=proxy.port)
        assert outside.code != 0
        control = world.python(CONNECT, "127.0.0.1", str(proxy.port), policy=policy, proxy_port=proxy.port)
        assert control.code == 0 and proxy.accepted == 1
        offline = world.python(CONNECT, "127.0.0.1", str(proxy.port))  # default profile: network off
        assert offline.code != 0 and proxy.accepted == 1
    finally:
        proxy.close()
        canary.close()


def test_case37_unix_sockets_only_when_listed(world: World) -> None:
    """ESCAPES 37: a host agent socket is unreachable unless the policy lists it."""
    path = f"/tmp/sa-{secrets.token_hex(4)}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)
    try:
        npm = world.policy(profile="npm")
        assert world.python(CONNECT_UNIX, path, policy=npm).code != 0
        listed = world.policy(text=f'extends = ["npm"]\n[network]\nunix_sockets = ["{path}"]\n')
        control = world.python(CONNECT_UNIX, path, policy=listed)
        assert control.code == 0 and control.out.strip() == "connected"
    finally:
        server.close()
        os.unlink(path)


# ---- C/D. processes and host services ----


def test_case54_signals_reach_only_the_sandbox(world: World) -> None:
    """ESCAPES 54."""
    canary = subprocess.Popen(["/bin/sleep", "600"])
    try:
        world.sh('kill -TERM "$1"; kill -STOP "$1"', str(canary.pid))
        time.sleep(0.2)
        assert canary.poll() is None
        state = subprocess.run(["/bin/ps", "-o", "stat=", "-p", str(canary.pid)], capture_output=True, text=True).stdout
        assert "T" not in state
        control = world.sh('sleep 30 & pid=$!; kill "$pid" && echo killed')
        assert control.code == 0 and "killed" in control.out
    finally:
        canary.kill()
        canary.wait()


def test_case77_other_processes_arguments_and_environment(world: World) -> None:
    """ESCAPES 77."""
    canary = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "--token", "CANARY6"],
        env={**os.environ, "STOCKADE_CANARY5": "CANARY5"},
    )
    try:
        host = subprocess.run(["/bin/ps", "eww", "-A"], capture_output=True, text=True).stdout
        assert "CANARY6" in host  # visible outside, so the check below can fail
        result = world.sh("ps eww -A; ps -A -o args=")
        assert "CANARY5" not in result.out and "CANARY6" not in result.out
        assert world.sh("kill -0 $$").code == 0
    finally:
        canary.kill()
        canary.wait()


def test_case45_apple_events_launch_services_keychain_pasteboard(world: World) -> None:
    """ESCAPES 45 and 79."""
    if subprocess.run(["/usr/bin/osascript", "-e", "return 1"], capture_output=True).returncode != 0:
        pytest.skip("osascript does not work outside the sandbox here, so refusing it proves nothing")
    assert world.run(("/usr/bin/osascript", "-e", "return 1")).code != 0
    marker = world.home / "ESCAPED"
    world.run(("/usr/bin/osascript", "-e", f'do shell script "touch {marker}"'))
    assert world.run(("/usr/bin/open", "-g", "-a", "Finder", str(world.project))).code != 0
    assert not marker.exists()
    copied = subprocess.run(["/usr/bin/pbcopy"], input="CANARY-PB", text=True).returncode == 0
    if copied:
        assert "CANARY-PB" not in world.run(("/usr/bin/pbpaste",)).out
    service = f"stockade-test-{secrets.token_hex(4)}"
    added = subprocess.run(["/usr/bin/security", "add-generic-password", "-s", service, "-a", "t", "-w", "CANARY-KC"], capture_output=True)
    try:
        if added.returncode == 0:
            assert "CANARY-KC" not in world.run(("/usr/bin/security", "find-generic-password", "-s", service, "-w")).out
    finally:
        subprocess.run(["/usr/bin/security", "delete-generic-password", "-s", service], capture_output=True)
    control = world.run(("/bin/echo", "ok"))
    assert control.code == 0 and control.out == "ok\n"


# ---- violation report ----


def test_denials_are_summarised_with_the_policy_line(world: World) -> None:
    result = world.sh('cat "$1"', str(world.home / ".ssh" / "id_test"), quiet=False)
    assert result.code != 0
    assert "stockade: the sandbox denied" in result.err, result.err
    assert 'deny_read "~/.ssh"' in result.err
