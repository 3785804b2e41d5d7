"""ESCAPES.md section A (filesystem), Linux: every attack paired with a control, checked on the host.

Cases 7 and 16 are macOS-only (Seatbelt rename rules, SBPL injection) and live with the seatbelt tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import NR, PY, one_line, parse_probe, policy_text, probe, q, syscall_probe_code, tree


def test_visible_box_is_really_visible(vbox: Box) -> None:
    """Sanity for the whole suite: HOME and the outside folder are on the sandbox's read-only root.

    Otherwise every "write failed" below could be ENOENT from the private /tmp, not the wall under test.
    """
    result = vbox.run(f"cat {q(str(vbox.outside / 'secret.txt'))}; test -d {q(str(vbox.home))} && echo HOME-VISIBLE")
    assert "CANARY-O" in result.stdout and "HOME-VISIBLE" in result.stdout, result


# --- case 1 -----------------------------------------------------------------------------------------


def _outside_targets(box: Box, token: str) -> list[Path]:
    return [box.outside / "new", Path(f"/etc/stockade-probe-{token}"), Path(f"/usr/local/stockade-probe-{token}")]


def test_case_1_plain_writes_outside_writable_roots_fail(vbox: Box) -> None:
    """ESCAPES 1: writes outside allow_write fail with EROFS/EACCES and nothing appears on the host."""
    token = secrets.token_hex(4)
    targets = _outside_targets(vbox, token)
    script = "; ".join(f"echo x > {q(str(t))} && echo WROTE {q(str(t))}" for t in targets)
    script += f"; echo more >> {q(str(vbox.outside / 'secret.txt'))} && echo WROTE-APPEND"
    script += f"; rm -f {q(str(vbox.outside / 'secret.txt'))} && echo REMOVED"
    script += f"; mv {q(str(vbox.outside / 'secret.txt'))} ./stolen && echo MOVED"
    script += f"; mkdir {q(str(vbox.outside / 'dir'))} && echo MKDIR"
    try:
        attack = vbox.run(script)
        assert "WROTE" not in attack.stdout and "REMOVED" not in attack.stdout, attack
        assert "MOVED" not in attack.stdout and "MKDIR" not in attack.stdout, attack
        assert "Read-only file system" in attack.stderr or "Permission denied" in attack.stderr, attack.stderr
        for target in targets:
            assert not target.exists(), f"{target} was created on the host"
        assert (vbox.outside / "secret.txt").read_text() == "CANARY-O\n"
        assert not (vbox.outside / "dir").exists()
    finally:
        for target in targets:
            if target.exists() and target.is_file():
                target.unlink()
    control = vbox.run(f"echo x > {q(str(vbox.project / 'new'))}")
    assert control.returncode == 0, control.stderr
    assert (vbox.project / "new").read_text() == "x\n"
    for home in ("private", "host"):  # the home: a private one takes the write and drops it; the real one refuses
        written = vbox.run("echo x > ~/probe && echo WROTE", policy=policy_text(extra=f'home = "{home}"\n'))
        assert ("WROTE" in written.stdout) == (home == "private"), written
        assert not (vbox.home / "probe").exists()


# --- case 2 -----------------------------------------------------------------------------------------


def test_case_2_symlink_out_of_project(vbox: Box) -> None:
    """ESCAPES 2: a symlink made inside that points out neither writes there nor reads past a mask."""
    p, h, o = (q(str(x)) for x in (vbox.project, vbox.home, vbox.outside))
    attack = vbox.run(
        f"ln -s {o}/escape {p}/l && echo pwn > {p}/l && echo WROTE-THROUGH-LINK;"
        f"ln -s {h} {p}/home && cat {p}/home/.ssh/id_test {p}/home/.aws/credentials;"
        f"ln -s {o} {p}/out && echo pwn > {p}/out/new && echo WROTE-DIR-LINK"
    )
    assert "WROTE" not in attack.stdout, attack
    assert "CANARY-SSH" not in attack.stdout and "CANARY-AWS" not in attack.stdout, attack
    assert not (vbox.outside / "escape").exists() and not (vbox.outside / "new").exists()
    assert "Read-only file system" in attack.stderr, attack.stderr
    control = vbox.run(f"ln -s {p}/a {p}/b && echo ok > {p}/b")
    assert control.returncode == 0, control.stderr
    assert (vbox.project / "a").read_text() == "ok\n"


# --- case 4 -----------------------------------------------------------------------------------------

# (id, planted inside by run 1 or on the host before run 2, link name in the project, target below $O)
PLANTED = [
    pytest.param("inside", ".git", "", id="git-dir-link-planted-inside"),
    pytest.param("inside", ".github", "", id="github-dir-link-planted-inside"),
    pytest.param("inside", ".cargo", "", id="cargo-dir-link-planted-inside"),
    pytest.param("host", ".vscode", "", id="vscode-dir-link-from-a-clone"),
    pytest.param("host", ".claude", "decoy", id="claude-dangling-dir-link"),
    pytest.param("host", ".envrc", "envrc", id="envrc-dangling-file-link"),
    pytest.param("host", ".mcp.json", "mcp.json", id="mcp-dangling-file-link"),
    pytest.param("host", ".stockade.toml", "policy.toml", id="policy-dangling-file-link"),
]


@pytest.mark.parametrize(("where", "name", "target"), PLANTED)
def test_case_4_planted_symlink_is_not_followed_when_mounting(vbox: Box, where: str, name: str, target: str) -> None:
    """ESCAPES 4: a symlink planted where a protected mount point goes; the next run creates nothing under $O.

    bwrap 0.8.0 follows symlinked parents of mount destinations, so stockade must refuse them itself.
    """
    link = vbox.project / name
    destination = vbox.outside / target if target else vbox.outside
    if where == "inside":
        plant = vbox.run(f"ln -s {q(str(destination))} {q(str(link))} && echo PLANTED")
        assert "PLANTED" in plant.stdout, plant
    if not link.is_symlink():  # planted on the host (a cloned repo), or the first run's sweep moved it aside
        link.symlink_to(destination)
    before = tree(vbox.outside)
    second = vbox.run("echo RAN")
    assert tree(vbox.outside) == before, f"run 2 created {set(tree(vbox.outside)) - set(before)} under $O"
    assert (vbox.outside / "secret.txt").read_text() == "CANARY-O\n"
    if second.returncode == 125:
        assert one_line(second.stderr) and str(link) in second.stderr, second.stderr
    else:
        assert second.returncode == 0 and "RAN" in second.stdout, second
    # Control: with the link replaced by a real folder or file, runs work again.
    link.unlink(missing_ok=True)
    assert vbox.run("echo RAN").returncode == 0


SWEPT = [
    pytest.param(".git", "hooks", id="git-link-to-folder-with-hooks"),
    pytest.param(".github", "hooks", id="github-link-to-folder-with-hooks"),
    pytest.param(".cargo", "config.toml", id="cargo-link-to-folder-with-config"),
    pytest.param(".pip", "pip.conf", id="pip-link-to-folder-with-pip-conf"),
]


@pytest.mark.parametrize(("name", "victim"), SWEPT)
def test_case_4_post_run_sweep_does_not_follow_planted_symlink(vbox: Box, name: str, victim: str) -> None:
    """ESCAPES 4 (stockade's own cleanup): a symlink planted during the run must not steer the host-side sweep.

    `.git` is absent at planning, so `.git/hooks` is "unguarded" and swept after the run; a sandbox that makes
    `.git` a link to a folder it cannot write gets that folder's `hooks` moved away by stockade itself.
    """
    target = vbox.outside / victim
    if "." in victim:
        target.write_text("precious\n")
    else:
        target.mkdir()
        (target / "precious").write_text("precious\n")
    before = tree(vbox.outside)
    attack = vbox.run(f"ln -s {q(str(vbox.outside))} {q(name)} && echo PLANTED")
    assert "PLANTED" in attack.stdout, attack
    assert tree(vbox.outside) == before, f"stockade's sweep removed {set(before) - set(tree(vbox.outside))} from $O"


def test_case_4_sweep_control_moves_real_files(vbox: Box) -> None:
    """ESCAPES 4 control: a hooks folder really created inside an absent .git is moved aside after the run."""
    result = vbox.run("mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch HOOKED\\n' > .git/hooks/pre-commit && echo MADE")
    assert "MADE" in result.stdout, result
    assert not (vbox.project / ".git" / "hooks" / "pre-commit").exists()
    assert ".git/hooks" in result.stderr, result.stderr


# --- case 5 -----------------------------------------------------------------------------------------


def test_case_5_hard_links_are_no_alias_of_protected_files(vbox: Box) -> None:
    """ESCAPES 5: no readable alias of a denied file, no writable alias of a read-only one."""
    subprocess.run(["git", "init", "-q", str(vbox.project)], check=True)
    config_before = (vbox.project / ".git" / "config").read_bytes()
    (vbox.project / ".env").write_text("CANARY-ENV\n")
    p = q(str(vbox.project))
    attack = vbox.run(
        f"ln {q(str(vbox.home / '.ssh' / 'id_test'))} {p}/k && cat {p}/k;"
        f"ln /etc/passwd {p}/pw && echo x >> {p}/pw && echo WROTE-PASSWD;"
        f"ln {p}/.git/config {p}/cfg && echo '[core] hooksPath = /x' >> {p}/cfg && echo WROTE-CONFIG;"
        f"ln {p}/.env {p}/env2 && cat {p}/env2"
    )
    assert "CANARY-SSH" not in attack.stdout and "CANARY-ENV" not in attack.stdout, attack
    assert "WROTE" not in attack.stdout, attack
    assert (vbox.project / ".git" / "config").read_bytes() == config_before
    assert "x\n" not in Path("/etc/passwd").read_text().splitlines(keepends=True)[-1:]
    for alias in ("k", "pw", "cfg", "env2"):
        assert not (vbox.project / alias).exists(), alias
    control = vbox.run(f"echo data > {p}/a && ln {p}/a {p}/b && echo more >> {p}/b")
    assert control.returncode == 0, control.stderr
    assert (vbox.project / "a").read_text() == "data\nmore\n"


# --- case 8 -----------------------------------------------------------------------------------------


def test_case_8_masks_are_read_only_ordered_and_cover_symlink_targets(vbox: Box) -> None:
    """ESCAPES 8: a mask is read-only, a deny inside a writable folder holds, both spellings of an alias hidden."""
    home, project = vbox.home, vbox.project
    (home / "dotfiles").mkdir()
    (home / "dotfiles" / "id_alias").write_text("CANARY-ALIAS\n")
    (home / "dotfiles" / "readme").write_text("PUBLIC-DOTFILE\n")
    (home / ".ssh" / "id_alias").symlink_to(home / "dotfiles" / "id_alias")
    (project / "secret.env").write_text("CANARY-SECRET-ENV\n")
    (project / "secrets").mkdir()
    (project / "secrets" / "key").write_text("CANARY-SECRETS-DIR\n")
    (project / "readme").write_text("PUBLIC-README\n")
    policy = policy_text(deny_read=[home / ".ssh", project / "secret.env", project / "secrets"], extra='home = "host"\n')
    h, p = q(str(home)), q(str(project))
    attack = vbox.run(
        f"echo x > {h}/.ssh/new && echo WROTE-MASK;"
        f"touch {p}/secrets/new && echo WROTE-DIR-MASK;"
        f"cat {p}/secret.env {p}/secrets/key {h}/.ssh/id_alias {h}/dotfiles/id_alias;"
        f"rm -f {p}/secret.env && echo REMOVED; mv {p}/secret.env {p}/moved && echo MOVED;"
        f"mv {p}/secrets {p}/s2 && echo MOVED-DIR; echo x > {p}/secret.env && echo OVERWROTE;"
        f"cat {p}/readme {h}/dotfiles/readme",
        policy=policy,
    )
    for leak in ("CANARY-ALIAS", "CANARY-SECRET-ENV", "CANARY-SECRETS-DIR", "WROTE", "REMOVED", "MOVED", "OVERWROTE"):
        assert leak not in attack.stdout, (leak, attack)
    assert not (home / ".ssh" / "new").exists() and not (project / "secrets" / "new").exists()
    assert (project / "secret.env").read_text() == "CANARY-SECRET-ENV\n"
    assert (project / "secrets" / "key").read_text() == "CANARY-SECRETS-DIR\n"
    # Control: neighbours of the masks stay readable.
    assert "PUBLIC-README" in attack.stdout and "PUBLIC-DOTFILE" in attack.stdout, attack


# --- case 9 -----------------------------------------------------------------------------------------

RC_ATTEMPTS = [
    pytest.param("~/.bashrc", "echo 'touch /tmp/RC' >> ~/.bashrc", None, id="bashrc-existing"),
    pytest.param("~/.bash_profile", ": > ~/.bash_profile", None, id="bash-profile-absent"),
    pytest.param("~/.zshenv", ": > ~/.zshenv", None, id="zshenv-absent"),
    pytest.param(
        "~/.config/fish/config.fish", "mkdir -p ~/.config/fish && echo x > ~/.config/fish/config.fish", None, id="fish-config-absent-parent"
    ),
    pytest.param("~/other/.envrc", "echo 'touch /tmp/ENVRC' > ~/other/.envrc", None, id="envrc-outside-cwd"),
    pytest.param("~/proj/sub/.envrc", "echo 'touch /tmp/ENVRC' > .envrc", None, id="envrc-of-cwd-project"),
    pytest.param("~/proj/sub/.git/hooks/pre-commit", "echo 'touch /tmp/HOOK' > .git/hooks/pre-commit", None, id="git-hooks-of-cwd-project"),
    pytest.param("~/proj/sub/.vscode/tasks.json", "mkdir -p .vscode; echo '{}' > .vscode/tasks.json", None, id="vscode-of-cwd-project"),
]


@pytest.mark.parametrize(
    ("victim", "script", "hole"),
    [pytest.param(*p.values, marks=[pytest.mark.xfail(reason=p.values[2], strict=True)] if p.values[2] else [], id=p.id) for p in RC_ATTEMPTS],
)
def test_case_9_protection_covers_absent_files_and_paths_outside_cwd(vbox: Box, victim: str, script: str, hole: str | None) -> None:
    """ESCAPES 9: with allow_write = ["~"] and cwd $H/proj/sub, floor files stay unwritable, existing or not."""
    home = vbox.home
    cwd = home / "proj" / "sub"
    (cwd / ".git" / "hooks").mkdir(parents=True)
    (home / "other").mkdir()
    (home / ".bashrc").write_text("# rc\n")
    target = home / victim[2:]
    before = target.read_bytes() if target.exists() else None
    attack = vbox.run(script + " && echo WROTE", policy=policy_text(allow_write=[home]), cwd=cwd)
    after = target.read_bytes() if target.exists() else None
    assert after == before, f"{victim} changed on the host: {attack.stdout!r} {attack.stderr!r}"
    assert "WROTE" not in attack.stdout or after == before
    # Control: the broad root is really writable.
    control = vbox.run("echo ok > ~/plain && echo ok > ./plain", policy=policy_text(allow_write=[home]), cwd=cwd)
    assert control.returncode == 0, control.stderr
    assert (home / "plain").read_text() == "ok\n" and (cwd / "plain").read_text() == "ok\n"


# --- case 10 ----------------------------------------------------------------------------------------


def test_case_10_climbing_allow_write_is_rejected_at_load(vbox: Box) -> None:
    """ESCAPES 10: allow_write = ["/tmp/../etc"] is refused with file and line; nothing runs."""
    token = secrets.token_hex(4)
    target = Path(f"/etc/stockade-probe-{token}")
    text = 'extends = ["default"]\n[filesystem]\nallow_write = ["/tmp/../etc"]\n'
    try:
        result = vbox.run(f"echo x > {target} && echo WROTE", policy=text)
        assert result.returncode == 2, result
        assert "WROTE" not in result.stdout and not target.exists()
        assert f"{vbox.root / 'policy.toml'}:3:" in result.stderr, result.stderr
    finally:
        if target.exists():
            target.unlink()


def test_case_10_trailing_slash_still_binds(vbox: Box) -> None:
    """ESCAPES 10: allow_write = ["./build/"] (relative, trailing slash) binds build and only build."""
    (vbox.project / "build").mkdir()
    policy = vbox.project / "policy.toml"
    policy.write_text('extends = []\n[filesystem]\nallow_write = ["./build/"]\n')
    result = vbox.run("echo ok > build/f; echo x > other && echo WROTE-OTHER", options=["--policy", str(policy)])
    assert (vbox.project / "build" / "f").read_text() == "ok\n", result
    assert "WROTE-OTHER" not in result.stdout and not (vbox.project / "other").exists()


def test_case_10_home_behind_a_symlink(vbox: Box) -> None:
    """ESCAPES 10: allow_write = ["~/x"] when $HOME is a symlink binds the real folder; its siblings stay read-only."""
    (vbox.home / "x").mkdir()
    link = vbox.root / "home-link"
    link.symlink_to(vbox.home)
    for home in ("host", "private"):
        text = f'extends = ["default"]\n[filesystem]\nallow_write = ["~/x"]\nhome = "{home}"\n'
        result = vbox.run("echo ok > ~/x/f; echo y > ~/y && echo WROTE-Y; cat ~/.ssh/id_test", policy=text, env={"HOME": str(link)})
        assert (vbox.home / "x" / "f").read_text() == "ok\n", result
        assert ("WROTE-Y" in result.stdout) == (home == "private") and not (vbox.home / "y").exists(), result
        assert "CANARY-SSH" not in result.stdout
        (vbox.home / "x" / "f").unlink()


def test_case_10_parent_in_deny_read_does_not_break_the_run(vbox: Box) -> None:
    """ESCAPES 10: deny_read = [".."] is refused at load, or else the cwd still works and nothing leaks."""
    text = '[filesystem]\nallow_write = ["."]\ndeny_read = [".."]\n'
    policy = vbox.project / "p.toml"
    policy.write_text(text)
    result = vbox.run("pwd; cat ../home/.ssh/id_test", options=["--policy", str(policy)])
    assert "CANARY-SSH" not in result.stdout
    if result.returncode == 2:
        assert f"{policy}:3:" in result.stderr and one_line(result.stderr), result.stderr
    else:
        assert str(vbox.project) in result.stdout, result


# --- case 11 ----------------------------------------------------------------------------------------


def test_case_11_cwd_outside_the_view(vbox: Box) -> None:
    """ESCAPES 11: a cwd hidden by the policy is refused (or neutral); relative reads never reach $O."""
    policy = policy_text(allow_write=[vbox.project], deny_read=[vbox.outside])
    result = vbox.run("pwd; cat secret.txt ../outside/secret.txt", policy=policy, cwd=vbox.outside)
    assert "CANARY-O" not in result.stdout, result
    if result.returncode == 125:
        assert one_line(result.stderr) and str(vbox.outside) in result.stderr, result.stderr
    control = vbox.run("pwd", policy=policy)
    assert control.stdout.strip() == str(vbox.project), control


FD_PROBE = r"""
import json, os, sys
open_fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
reads = {}
for fd in FDS:
    try:
        reads[fd] = os.read(fd, 100).decode(errors="replace")
    except OSError as exc:
        reads[fd] = "errno %d" % exc.errno
try:
    listed = os.listdir("/proc/self/fd/%d/" % FDS[1])
except OSError as exc:
    listed = "errno %d" % exc.errno
print("PROBE " + json.dumps({"open": open_fds, "reads": reads, "listed": listed, "stdin": sys.stdin.read()}))
"""


def test_case_11_inherited_descriptors_do_not_reach_inside(vbox: Box) -> None:
    """ESCAPES 11 (and V2): a caller's fd on a hidden file and a directory fd on $O never reach the command."""
    policy = policy_text(deny_read=[vbox.outside])
    file_fd = os.open(vbox.outside / "secret.txt", os.O_RDONLY)
    dir_fd = os.open(vbox.outside, os.O_RDONLY | os.O_DIRECTORY)
    try:
        code = f"FDS = {[file_fd, dir_fd]}\n{FD_PROBE}"
        result = vbox.run(argv=[PY, "-c", code], policy=policy, pass_fds=(file_fd, dir_fd), input="stdin-works")
        seen = parse_probe(result)
    finally:
        os.close(file_fd)
        os.close(dir_fd)
    assert seen["open"] == [], seen
    assert "CANARY-O" not in result.stdout and "secret.txt" not in json.dumps(seen["listed"]), seen
    assert seen["stdin"] == "stdin-works", seen  # control: fds 0-2 are the caller's


# --- case 13 ----------------------------------------------------------------------------------------


def test_case_13_device_nodes_and_setuid_on_writable_binds(vbox: Box) -> None:
    """ESCAPES 13: mknod fails, a setuid copy runs as the caller (chmod u+s itself is refused by the filter
    now; the copy still runs as the caller), the project bind is nosuid,nodev; mkfifo works."""
    p = q(str(vbox.project))
    result = vbox.run(
        f"mknod {p}/null2 c 1 3 && echo MKNOD-OK;"
        f"cp /bin/dash {p}/sh; chmod u+s {p}/sh; echo caller=$(id -u) copy=$({p}/sh -p -c 'id -u');"
        f"mkfifo {p}/fifo && echo FIFO-OK;"
        f"awk -v m={p} '$5 == m {{print \"OPTS\", $6}}' /proc/self/mountinfo"
    )
    assert "MKNOD-OK" not in result.stdout, result
    node = vbox.project / "null2"
    assert not node.exists() or not stat.S_ISCHR(node.lstat().st_mode)
    ids = dict(word.split("=") for line in result.stdout.splitlines() if line.startswith("caller=") for word in line.split())
    assert ids and ids["caller"] == ids["copy"], result
    opts = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("OPTS")]
    assert opts and all({"nosuid", "nodev"} <= set(o.split(",")) for o in opts), opts
    assert "FIFO-OK" in result.stdout and stat.S_ISFIFO((vbox.project / "fifo").lstat().st_mode)


# --- case 14 ----------------------------------------------------------------------------------------


def test_case_14_scratch_directories_are_private(vbox: Box) -> None:
    """ESCAPES 14: host /tmp, /dev/shm, /var/tmp invisible; writes land in private tmpfs and vanish."""
    token = secrets.token_hex(4)
    host_files = [Path(f"/tmp/HOSTFILE-{token}"), Path(f"/dev/shm/HOSTSHM-{token}"), Path(f"/var/tmp/HOSTVAR-{token}")]
    written = [Path(d) / f"from_sbx-{token}" for d in ("/tmp", "/dev/shm", "/var/tmp", f"/run/user/{os.getuid()}", "/run")]
    for path in host_files:
        path.write_text("HOST\n")
    try:
        script = "ls -a /tmp /dev/shm /var/tmp /run 2>&1;"
        script += "".join(f"echo x > {w} && cat {w} && echo WROTE-{w};" for w in written)
        attack = vbox.run(script)
        for name in ("HOSTFILE", "HOSTSHM", "HOSTVAR"):
            assert f"{name}-{token}" not in attack.stdout, attack
        for path in written:
            assert not path.exists(), f"{path} appeared on the host"
        # Control: the private scratch folders are writable inside, and private to one run.
        assert f"WROTE-/tmp/from_sbx-{token}" in attack.stdout and f"WROTE-/dev/shm/from_sbx-{token}" in attack.stdout
        again = vbox.run(f"ls /tmp/from_sbx-{token} /dev/shm/from_sbx-{token} && echo STILL-THERE")
        assert "STILL-THERE" not in again.stdout
    finally:
        for path in host_files + written:
            try:
                path.unlink()
            except OSError:
                pass


# --- case 15 ----------------------------------------------------------------------------------------


def _seed_state(box: Box) -> tuple[Path, Path]:
    """Run once so the seccomp cache exists; plant an audit log and a runtime folder with canaries."""
    assert box.run("true").returncode == 0
    bpf = sorted((box.home / ".cache" / "stockade" / "seccomp").glob("*.bpf"))
    assert bpf, "the first run did not cache its seccomp filter"
    state = box.home / ".local" / "state" / "stockade"
    state.mkdir(parents=True, exist_ok=True)
    (state / "audit.jsonl").write_text('{"session": "other", "token": "CANARY-AUDIT"}\n')
    runtime = box.home / "run" / "stockade"
    runtime.mkdir(parents=True)
    (runtime / "control.info").write_text("CANARY-RUNTIME\n")
    return bpf[0], runtime


@pytest.mark.parametrize("writable_home", [False, True], ids=["default-policy", "home-writable"])
def test_case_15_own_state_hidden_and_cache_not_replaceable(vbox: Box, writable_home: bool) -> None:
    """ESCAPES 15: audit log, filter cache and runtime folder are hidden; the cached BPF cannot be replaced."""
    bpf, runtime = _seed_state(vbox)
    digest = hashlib.sha256(bpf.read_bytes()).hexdigest()
    env = {"XDG_RUNTIME_DIR": str(runtime.parent)}
    policy = policy_text(allow_write=[vbox.home]) if writable_home else policy_text(extra='home = "host"\n')
    attack = vbox.run(
        f'ls -la ~/.local/state/stockade ~/.cache/stockade "$XDG_RUNTIME_DIR/stockade" 2>&1;'
        f'cat ~/.local/state/stockade/audit.jsonl "$XDG_RUNTIME_DIR/stockade/control.info";'
        f"cp /dev/null {q(str(bpf))} && echo REPLACED; rm -rf ~/.cache/stockade && echo REMOVED;"
        f"mv ~/.cache ~/.cache-old && echo MOVED-PARENT",
        policy=policy,
        env=env,
    )
    for leak in ("CANARY-AUDIT", "CANARY-RUNTIME", "REPLACED", "REMOVED", "MOVED-PARENT", "seccomp-"):
        assert leak not in attack.stdout, (leak, attack)
    assert hashlib.sha256(bpf.read_bytes()).hexdigest() == digest
    # Control: the filter from that cache is in force in the next run (io_uring refused by the filter).
    seen, _ = probe(vbox, syscall_probe_code([("io_uring_setup", "io_uring_setup", (4, 16))]))
    assert seen == {"io_uring_setup": 1}, seen


ALLOW_ALL_BPF = (
    (0x20).to_bytes(2, "little")
    + b"\0\0"
    + (4).to_bytes(4, "little")  # ld [4] (arch)
    + (0x06).to_bytes(2, "little")
    + b"\0\0"
    + (0x7FFF0000).to_bytes(4, "little")  # ret ALLOW
)


@pytest.mark.skipif(NR.get("io_uring_setup") is None, reason="no syscall table for this machine")
def test_case_15_first_run_cannot_poison_the_filter_cache(vbox: Box) -> None:
    """ESCAPES 15 (firejail 0.9.60 class): a first run with a writable HOME cannot replace the cached seccomp BPF."""
    assert not (vbox.home / ".cache").exists()
    poison = "".join(f"\\{b:03o}" for b in ALLOW_ALL_BPF)
    attack = vbox.run(
        f'for f in ~/.cache/stockade/seccomp/*.bpf; do rm -f "$f"; printf \'{poison}\' > "$f" && echo POISONED; done',
        policy=policy_text(allow_write=[vbox.home]),
    )
    cached = sorted((vbox.home / ".cache" / "stockade" / "seccomp").glob("*.bpf"))
    poisoned = [f for f in cached if f.read_bytes() == ALLOW_ALL_BPF]
    later, _ = probe(vbox, syscall_probe_code([("io_uring_setup", "io_uring_setup", (4, 16))]))
    assert later == {"io_uring_setup": 1}, f"the next default run is unfiltered (1 = EPERM from the filter): {later}"
    assert "POISONED" not in attack.stdout and not poisoned, attack


def test_case_15_planted_placeholder_record_deletes_nothing_outside(vbox: Box) -> None:
    """ESCAPES 15: stockade's placeholder records are its own state; a sandbox must not be able to add one."""
    (vbox.outside / "empty-file").write_text("")
    (vbox.outside / "empty-dir").mkdir()
    victims = [str(vbox.outside / "empty-file"), str(vbox.outside / "empty-dir")]
    before = tree(vbox.outside)
    attack = vbox.run(
        f"echo {q(json.dumps(victims))} > ~/.local/state/stockade/placeholders/planted.json && "
        f"printf '%s\\0%s' {q(victims[0])} {q(victims[1])} > ~/.local/state/stockade/placeholders/planted.paths && echo PLANTED",
        policy=policy_text(allow_write=[vbox.home]),
    )
    assert tree(vbox.outside) == before, f"stockade deleted {set(before) - set(tree(vbox.outside))}: {attack.stdout!r}"
    assert "PLANTED" not in attack.stdout


SETID_CREATE = r"""
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call):
    try:
        result = call()
        if isinstance(result, int) and result < 0:
            raise OSError(ctypes.get_errno(), name)
        print(name, "made")
    except OSError as exc:
        print(name, errno.errorcode.get(exc.errno, exc.errno))
mode = int(sys.argv[1], 8)
attempt("open", lambda: os.close(os.open("o-" + sys.argv[1], os.O_CREAT | os.O_WRONLY, mode)))
attempt("openat", lambda: os.close(os.open("a-" + sys.argv[1], os.O_CREAT | os.O_WRONLY, mode, dir_fd=os.open(".", os.O_RDONLY))))
attempt("creat", lambda: libc.creat(("c-" + sys.argv[1]).encode(), mode))
attempt("mknod", lambda: os.mknod("m-" + sys.argv[1], 0o100000 | mode))
attempt("tmpfile", lambda: os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, mode)))
attempt("openat2", lambda: libc.syscall(437, -100, b"x-openat2", ctypes.c_void_p(0), 0))
"""


def test_files_cannot_be_created_setuid_or_setgid(vbox: Box) -> None:
    """ESCAPES 13 class: the mode a file is created with sets setuid and setgid too (the umask leaves
    them), so open, openat, creat, mknod and O_TMPFILE with either bit are refused like chmod; openat2,
    whose mode seccomp cannot see, says ENOSYS so callers fall back to openat."""
    (vbox.project / "probe.py").write_text(SETID_CREATE)
    for mode in ("4755", "2755"):
        attack = vbox.run(f"env -u PYTHONPATH /usr/bin/python3 probe.py {mode}")
        for call in ("open", "openat", "creat", "mknod", "tmpfile"):
            assert f"{call} EPERM" in attack.stdout, attack
        assert "openat2 ENOSYS" in attack.stdout, attack
        made = [p for p in vbox.project.iterdir() if p.is_file() and p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)]
        assert not made, made
    control = vbox.run("env -u PYTHONPATH /usr/bin/python3 probe.py 0755")
    assert all(f"{call} made" in control.stdout for call in ("open", "openat", "creat", "mknod", "tmpfile")), control
    assert (vbox.project / "o-0755").stat().st_mode & 0o777 == 0o755


def test_setuid_bits_cannot_be_set_in_writable_places(vbox: Box) -> None:
    """Found by the escape hunt (not in the catalogue): run as root, sandbox uid 0 is host root, so a
    `chmod u+s` in the project would leave a setuid-root file on the host. The filter refuses setuid and
    setgid bits in chmod, fchmod, fchmodat and fchmodat2; plain modes still work."""
    attack = vbox.run(
        "cp /bin/true ./suid && chmod u+s ./suid; echo u=$?; chmod g+s ./suid; echo g=$?;"
        " /usr/bin/python3 -c \"import os; os.chmod('suid', 0o4755)\" 2>/dev/null; echo py=$?"
    )
    assert "u=1" in attack.stdout and "g=1" in attack.stdout and "py=1" in attack.stdout, attack
    mode = (vbox.project / "suid").stat().st_mode
    assert not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)
    control = vbox.run("chmod 0750 ./suid && chmod +x ./suid && echo CONTROL")
    assert "CONTROL" in control.stdout and (vbox.project / "suid").stat().st_mode & 0o777 == 0o751, control


@pytest.mark.parametrize("spelling", ["../policy.toml", "./../policy.toml", "..//policy.toml"])
def test_a_policy_named_through_dot_dot_keeps_the_homes_walls(vbox: Box, spelling: str) -> None:
    """`--policy ../policy.toml` from a project inside HOME: the file was named `/home/proj/../policy.toml`,
    which string checks took for a path inside the project; the home (`/home/proj/..`) was then bound
    writable over every mount that hid a secret in it."""
    project = vbox.home / "proj"
    project.mkdir()
    (vbox.home / "policy.toml").write_text('extends = ["default"]\n[filesystem]\nhome = "host"\n')
    script = "cat ~/.ssh/id_test; echo planted >> ~/.bashrc && echo WROTE-BASHRC; echo ok > made && echo WROTE-PROJECT"
    result = vbox.run(argv=["/bin/sh", "-c", script], options=["--policy", spelling], cwd=project)
    assert "CANARY-SSH" not in result.stdout and "WROTE-BASHRC" not in result.stdout, result
    assert not (vbox.home / ".bashrc").exists()
    assert "WROTE-PROJECT" in result.stdout and (project / "made").read_text() == "ok\n", result  # control: the project is writable


def test_stockades_own_files_are_never_shown_whatever_the_policy_says(vbox: Box) -> None:
    """ESCAPES 15 (issue 33): a trusted policy's allow_read of the CA's key, the trust store or the
    state folder, or of a hard link to one of them, showed it inside."""
    assert vbox.run("true").returncode == 0
    state, config = vbox.home / ".local" / "state" / "stockade", vbox.home / ".config" / "stockade"
    (state / "mitmproxy").mkdir(parents=True, exist_ok=True)
    (state / "mitmproxy" / "mitmproxy-ca.pem").write_text("CANARY-CA-KEY\n")
    config.mkdir(parents=True, exist_ok=True)
    (config / "trusted.json").write_text('{"CANARY-TRUST": 1}\n')
    os.link(config / "trusted.json", vbox.home / "innocent.json")
    (vbox.home / "notes.txt").write_text("CONTROL-NOTES\n")
    shown = ["~/.local/state/stockade/mitmproxy/mitmproxy-ca.pem", "~/.config/stockade/trusted.json", "~/.local/state/stockade",
             "~/.config", "~/innocent.json", "~/notes.txt"]  # fmt: skip
    policy = policy_text(extra="allow_read = " + json.dumps(shown) + "\n")
    attack = vbox.run(
        "cat ~/.local/state/stockade/mitmproxy/mitmproxy-ca.pem ~/.config/stockade/trusted.json ~/innocent.json ~/notes.txt 2>&1;"
        " ls ~/.local/state/stockade ~/.config/stockade 2>&1",
        policy=policy,
    )
    assert "CANARY" not in attack.stdout, attack
    assert "CONTROL-NOTES" in attack.stdout, attack  # control: the rest of the list is shown
    assert attack.stderr.count("stockade's own files") == 4, attack.stderr


def test_a_policys_own_audit_log_folder_is_never_seen(vbox: Box) -> None:
    """ESCAPES 82 (a review's finding): the masks on the log's files stayed with the renamed files when
    the log rotated, and the sandbox read every session's records. The folder is hidden whole."""
    logs = vbox.outside / "auditlogs"
    logs.mkdir()
    (logs / "audit.jsonl.1").write_text('{"CANARY": "rotated"}\n')
    (logs / "audit.jsonl").write_text('{"CANARY": "current"}\n')
    (logs / "later").write_text('{"CANARY": "a file no mask named: the log after a rotation"}\n')
    policy = policy_text(extra="") + f'[audit]\nlog = "{logs}/audit.jsonl"\n'
    result = vbox.run(f"cat {logs}/audit.jsonl {logs}/audit.jsonl.1 {logs}/later 2>&1; ls {logs} 2>&1; echo RAN", policy=policy)
    assert "RAN" in result.stdout and "CANARY" not in result.stdout, result
    inside = policy_text(extra="") + f'[audit]\nlog = "{vbox.project}/audit.jsonl"\n'  # a folder the sandbox must see
    refused = vbox.run("echo RAN", policy=inside)
    assert refused.returncode == 2 and "RAN" not in refused.stdout and "policy.toml:" in refused.stderr, refused
