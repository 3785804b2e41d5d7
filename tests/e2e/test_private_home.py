"""The sandbox's home is its own: writable scratch that vanishes, showing only what the policy names.

Each test runs the same command with `home = "host"` as its control: there the
real home shows (read-only), so a test that passes for the wrong reason fails it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.boxes import Box

HOST_HOME = 'extends = ["default"]\n[filesystem]\nhome = "host"\n'
STORES = {
    ".codex/auth.json": "CANARY-CODEX",
    ".claude/.credentials.json": "CANARY-CLAUDE",
    ".gemini/oauth_creds.json": "CANARY-GEMINI",
    ".config/github-copilot/apps.json": "CANARY-COPILOT",
    ".cargo/credentials.toml": "CANARY-CARGO",
    ".gem/credentials": "CANARY-GEM",
    ".m2/settings.xml": "CANARY-M2",
    ".pgpass": "CANARY-PG",
    ".config/rclone/rclone.conf": "CANARY-RCLONE",
    "work/other-app/.env": "CANARY-SIBLING",
    "some-store-nobody-listed/token": "CANARY-UNKNOWN",
}


def _plant(box: Box) -> None:
    for name, text in STORES.items():
        path = box.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def test_a_scratch_write_to_home_works_and_leaves_nothing(vbox: Box) -> None:
    vbox.run("true")  # stockade's own state folders are made in the real home on first use
    before = sorted(os.listdir(vbox.home))
    result = vbox.run("mkdir ~/.node-spawn-wrap-1-abc && echo x > ~/.node-spawn-wrap-1-abc/f && cat ~/.node-spawn-wrap-1-abc/f")
    assert result.returncode == 0 and result.stdout == "x\n", result
    assert sorted(os.listdir(vbox.home)) == before
    control = vbox.run("mkdir ~/.node-spawn-wrap-1-abc", policy=HOST_HOME)
    assert control.returncode != 0 and "Read-only file system" in control.stderr, control
    assert sorted(os.listdir(vbox.home)) == before


def test_credential_stores_nobody_listed_are_unreadable(vbox: Box) -> None:
    _plant(vbox)
    script = "; ".join(f"cat ~/{name} 2>/dev/null" for name in STORES) + "; true"
    result = vbox.run(script)
    assert result.returncode == 0, result
    assert "CANARY" not in result.stdout, result
    control = vbox.run(script, policy=HOST_HOME)  # the deny list (a second wall) names most, not these
    assert "CANARY-SIBLING" in control.stdout and "CANARY-UNKNOWN" in control.stdout, control


def test_git_identity_and_a_symlinked_dotfile_show(vbox: Box) -> None:
    dotfiles = vbox.home / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "gitconfig").write_text("[user]\n\tname = Linked Name\n\temail = l@example.test\n")
    (vbox.home / ".gitconfig").symlink_to(dotfiles / "gitconfig")
    result = vbox.run("git config --global user.name; ls ~/dotfiles 2>&1")
    assert result.stdout.startswith("Linked Name\n"), result
    assert "No such file" in result.stdout, result  # the dotfiles repository itself stays hidden


def test_files_the_git_config_includes_show_with_it(vbox: Box) -> None:
    (vbox.home / ".gitconfig").write_text("[include]\n\tpath = .gitconfig.local\n")
    (vbox.home / ".gitconfig.local").write_text("[user]\n\tname = Included Name\n")
    result = vbox.run("git config --includes --global user.name")
    assert result.stdout == "Included Name\n", result


def test_a_tool_on_the_path_under_home_runs_and_its_folder_is_read_only(vbox: Box) -> None:
    tools = vbox.home / "bin"
    tools.mkdir()
    (tools / "hello-tool").write_text("#!/bin/sh\necho hello from home\n")
    (tools / "hello-tool").chmod(0o755)
    env = {"PATH": f"{tools}:/usr/local/bin:/usr/bin:/bin"}
    result = vbox.run("hello-tool; touch ~/bin/planted", env=env)
    assert "hello from home" in result.stdout, result
    assert result.returncode != 0 and not (tools / "planted").exists(), result


def test_an_active_virtualenv_under_home_runs(vbox: Box) -> None:
    venv = vbox.home / ".virtualenvs" / "app"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "marker_pkg.py").write_text("VALUE = 'from the venv'\n")
    env = {"PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv)}
    result = vbox.run("env -u PYTHONPATH python -c 'import marker_pkg; print(marker_pkg.VALUE)'", env=env)
    assert result.returncode == 0 and "from the venv" in result.stdout, result


def test_allow_read_shows_a_place_and_deny_read_still_wins_inside_it(vbox: Box) -> None:
    shown = vbox.home / ".config" / "tool"
    shown.mkdir(parents=True)
    (shown / "settings").write_text("READABLE\n")
    (shown / "token").write_text("CANARY-TOKEN\n")
    policy = 'extends = ["default"]\n[filesystem]\nallow_read = ["~/.config/tool"]\ndeny_read = ["~/.config/tool/token"]\n'
    result = vbox.run("cat ~/.config/tool/settings; cat ~/.config/tool/token; touch ~/.config/tool/new", policy=policy)
    assert "READABLE" in result.stdout and "CANARY" not in result.stdout, result
    assert not (shown / "new").exists()
    hidden = vbox.run("cat ~/.config/tool/settings")
    assert "READABLE" not in hidden.stdout, hidden


def test_an_allow_write_place_under_home_still_reaches_the_real_home(vbox: Box) -> None:
    (vbox.home / "src").mkdir()
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = ["{vbox.project}", "~/src"]\n'
    result = vbox.run("echo kept > ~/src/kept && echo scratch > ~/.scratch", policy=policy)
    assert result.returncode == 0, result
    assert (vbox.home / "src" / "kept").read_text() == "kept\n"
    assert not (vbox.home / ".scratch").exists()


def test_a_project_inside_home_is_writable_and_its_siblings_hidden(vbox: Box) -> None:
    project = vbox.home / "work" / "app"
    sibling = vbox.home / "work" / "other"
    project.mkdir(parents=True)
    sibling.mkdir(parents=True)
    (sibling / "notes").write_text("CANARY-SIBLING\n")
    result = vbox.run("echo made > made; cat ../other/notes", cwd=project)
    assert (project / "made").read_text() == "made\n"
    assert "CANARY" not in result.stdout, result


def test_a_project_reached_through_a_home_symlink_keeps_its_paths(vbox: Box) -> None:
    real = vbox.outside / "work"
    (real / "app").mkdir(parents=True)
    (vbox.home / "work").symlink_to(real)
    (vbox.home / "keys").symlink_to(vbox.home / ".ssh")
    (vbox.home / "notes").mkdir()
    (vbox.home / "notes-link").symlink_to(vbox.home / "notes")
    lexical = vbox.home / "work" / "app"
    script = f"cd {lexical} && echo made > f && cat {lexical}/f; ls ~/keys/ 2>&1; ls -d ~/notes-link 2>&1"
    result = vbox.run(script, cwd=lexical)
    assert result.stdout.startswith("made\n"), result
    assert (real / "app" / "f").read_text() == "made\n"
    assert "id_test" not in result.stdout and "No such file" in result.stdout, result
    assert result.stdout.count("No such file") == 2, result  # neither a link into ~/.ssh nor one into hidden home


def test_home_set_to_the_root_still_hides_the_account_home(vbox: Box) -> None:
    import pwd

    account = pwd.getpwuid(os.getuid()).pw_dir
    probe = os.path.join(account, ".stockade-test-canary")
    with open(probe, "w") as handle:
        handle.write("CANARY-ACCOUNT\n")
    own = {f"XDG_{kind}_HOME": str(vbox.root / kind.lower()) for kind in ("STATE", "CACHE", "CONFIG")}  # stockade's own files
    try:
        result = vbox.run(f"cat {probe}", env={"HOME": "/", **own})
        assert result.returncode == 1 and "No such file" in result.stderr and "CANARY" not in result.stdout, result
        control = vbox.run(f"cat {probe}", env={"HOME": "/", **own}, policy='extends = ["default"]\n[filesystem]\nhome = "host"\n')
        assert "CANARY-ACCOUNT" in control.stdout, control
    finally:
        os.unlink(probe)


@pytest.mark.parametrize("value", ['"public"', "true"])
def test_a_bad_home_value_is_a_policy_error_with_its_line(vbox: Box, value: str) -> None:
    result = vbox.run("true", policy=f'extends = ["default"]\n[filesystem]\nhome = {value}\n')
    assert result.returncode == 2, result
    assert "policy.toml:3" in result.stderr and '"private" or "host"' in result.stderr, result


def test_a_shown_entry_linked_to_the_home_itself_shows_none_of_it(vbox: Box) -> None:
    _plant(vbox)
    (vbox.home / ".cargo").mkdir(exist_ok=True)
    (vbox.home / ".cargo" / "bin").symlink_to("..")  # ~/.cargo/bin -> ~ (a default allow_read entry)
    (vbox.home / ".local").mkdir()
    (vbox.home / ".local" / "bin").symlink_to("/")  # and one to the whole host
    script = (
        "cat ~/.cargo/bin/.ssh/id_test ~/.cargo/bin/some-store-nobody-listed/token; "
        f"cat ~/.local/bin{vbox.home}/.aws/credentials ~/.local/bin{vbox.home}/.pgpass; true"
    )
    result = vbox.run(script)
    assert "CANARY" not in result.stdout, result


def test_deny_read_and_host_sockets_inside_a_symlinked_shown_place_stay_hidden(vbox: Box) -> None:
    import socket

    dotfiles = vbox.home / "dotfiles" / "tool"
    dotfiles.mkdir(parents=True)
    (dotfiles / "settings").write_text("READABLE\n")
    (dotfiles / "token").write_text("CANARY-TOKEN\n")
    (vbox.home / ".config").mkdir()
    (vbox.home / ".config" / "tool").symlink_to(dotfiles)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(dotfiles / "agent.sock"))
    server.listen(1)
    policy = 'extends = ["default"]\n[filesystem]\nallow_read = ["~/.config/tool"]\ndeny_read = ["~/.config/tool/token"]\n'
    probe = "import socket, os\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(os.path.expanduser('~/.config/tool/agent.sock')); print('REACHED')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n"
    try:
        result = vbox.run(f'cat ~/.config/tool/settings ~/.config/tool/token; python3 -c "{probe}"', policy=policy)
    finally:
        server.close()
    assert "READABLE" in result.stdout, result
    assert "CANARY" not in result.stdout and "REACHED" not in result.stdout, result


SWAPPER = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + float(os.environ["SECS"])
while time.time() < end and not os.path.exists("stop"):
    libc.renameat2(-100, b"gitconfig", -100, b"alt", 2)  # RENAME_EXCHANGE: the file and a link to a secret
"""


def test_a_shown_entry_linked_into_a_writable_place_is_not_bound_from_there(vbox: Box) -> None:
    """~/.gitconfig -> the project's copy: a concurrent sandbox of the same project swaps that copy
    for a link to a secret, and bwrap, binding from the path, would follow the link."""
    dotfiles = vbox.home / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "gitconfig").write_text("[user]\n\tname = Linked Name\n")
    (dotfiles / "alt").symlink_to(vbox.home / ".aws" / "credentials")
    (vbox.home / ".gitconfig").symlink_to(dotfiles / "gitconfig")
    dry = vbox.run("true", options=["--dry-run"], cwd=dotfiles)
    assert f"--ro-bind {dotfiles}/gitconfig" not in dry.stdout + dry.stderr, dry
    swapper = subprocess.Popen(
        [*vbox.command_words(), "--", "python3", "-c", SWAPPER],
        cwd=dotfiles,
        env={**vbox.env, "SECS": "30"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(25):
            result = vbox.run("cat ~/.gitconfig", cwd=dotfiles)
            assert "CANARY" not in result.stdout, result
    finally:
        (dotfiles / "stop").touch()
        swapper.wait(timeout=60)
    result = vbox.run("git config --global user.name", cwd=dotfiles)
    assert result.stdout in ("Linked Name\n", ""), result  # the file, or the link (hidden) mid-swap


def test_a_pth_file_in_the_projects_own_venv_shows_nothing_of_the_home(vbox: Box) -> None:
    """Hostile: a repository commits .venv with a .pth naming a folder of the home (or an earlier run plants
    one, the project being writable); the folder stays hidden, where a user's own venv's would show."""
    private = vbox.home / "Documents"
    private.mkdir(exist_ok=True)
    (private / "notes.txt").write_text("PRIVATE-NOTES\n")
    venv = vbox.project / ".venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "planted.pth").write_text(f"{private}\n")
    env = {"PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv)}
    result = vbox.run(f"cat {private / 'notes.txt'}; python -c 'print(1)'", env=env)
    assert "PRIVATE-NOTES" not in result.stdout and "1" in result.stdout, result


@pytest.mark.skipif(
    sys.executable.startswith(("/tmp/", "/var/tmp/")), reason="this Python is installed under /var/tmp, which is private inside the sandbox"
)
def test_stockade_installed_under_the_home_imports_itself_inside(vbox: Box) -> None:
    """A newcomer's `stockade run -- stockade run -- CMD` ended in a traceback: installed editable from a
    checkout under the home, stockade's code was hidden inside. Its own package folder is shown now
    (read-only), and nothing else of that checkout."""
    import shutil

    import stockade

    checkout = vbox.home / "stockade-checkout"
    shutil.copytree(Path(stockade.__file__).parent, checkout / "src" / "stockade", ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "secret.txt").write_text("CHECKOUT-SECRET\n")
    env = {"PYTHONPATH": str(checkout / "src")}
    inner = f"{sys.executable} -S -m stockade.cli.main run -- sh -c 'echo inner-ran; exit 5'"  # -S: no .pth, the copy only
    words = [sys.executable, "-m", "stockade.cli.main", "run", "--", "sh", "-c", f"{inner}; cat {checkout / 'secret.txt'}"]
    result = subprocess.run(words, cwd=vbox.project, env={**vbox.env, **env}, capture_output=True, text=True, timeout=60)
    assert "inner-ran" in result.stdout and "already inside a stockade sandbox" in result.stderr, result
    assert "Traceback" not in result.stderr and "CHECKOUT-SECRET" not in result.stdout, result
