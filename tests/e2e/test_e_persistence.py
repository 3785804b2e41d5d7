"""ESCAPES.md section E (files written inside that run later outside), Linux.

Every attack is judged on the host: the file is unchanged (or absent) after the run, and where a host
tool would run it (git hooks), the host tool is run and its marker must not appear.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import policy_text, q

HOOK = "#!/bin/sh\ntouch {marker}\n"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.test",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.test",
}


def git(box: Box, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_ENV, "HOME": str(box.home)}
    return subprocess.run(["git", *args], cwd=cwd or box.project, env=env, capture_output=True, text=True, check=check)


def snapshot(path: Path) -> object:
    """What a path is on the host: absent, a link, a folder listing or file bytes."""
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_dir():
        return ("dir", sorted(str(p.relative_to(path)) for p in path.rglob("*")))
    if path.exists():
        return ("file", path.read_bytes())
    return None


def home_writable(box: Box) -> str:
    return policy_text(allow_write=[box.home, box.project])


# --- case 58 ----------------------------------------------------------------------------------------


def test_case_58_git_hooks_read_only_while_commits_work(vbox: Box) -> None:
    """ESCAPES 58: the project's hooks and config stay read-only (also via rename); `git commit` inside works."""
    git(vbox, "init", "-q")
    (vbox.project / "f").write_text("one\n")
    git(vbox, "add", "f")
    git(vbox, "commit", "-qm", "first")
    marker = vbox.root / "HOOKED"
    hook = HOOK.format(marker=marker)
    config_before = (vbox.project / ".git" / "config").read_bytes()
    attack = vbox.run(
        f"printf {q(hook)} > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo WROTE-HOOK;"
        f"git config core.hooksPath {q(str(vbox.project / 'evil'))} && echo WROTE-CONFIG;"
        "mv .git/hooks .git/hooks-old && echo MOVED-HOOKS; mv .git .git-old && echo MOVED-GIT;"
        "echo two >> f && git add f && git commit -qm second && echo COMMITTED",
        env=GIT_ENV,
    )
    for leak in ("WROTE-HOOK", "MOVED-GIT"):
        assert leak not in attack.stdout, (leak, attack)
    # `mv .git/hooks` inside moves only the stage's link to them (gitstage.py): the host's hooks stay
    assert (vbox.project / ".git" / "hooks").is_dir() and not (vbox.project / ".git" / "hooks-old").exists()
    # git's config write works inside (bwrap/running/gitstage.py); a key that runs something never reaches the host
    assert "WROTE-CONFIG" in attack.stdout and "core.hookspath" in attack.stderr, attack
    assert (vbox.project / ".git" / "config").read_bytes() == config_before
    assert "COMMITTED" in attack.stdout, attack  # control: objects, refs and index are writable
    assert "second" in git(vbox, "log", "--format=%s").stdout
    git(vbox, "commit", "-q", "--allow-empty", "-m", "host")  # the host runs whatever hook is there
    assert not marker.exists()


def _nested_repo(box: Box) -> Path:
    repo = box.project / "vendor" / "lib"
    repo.mkdir(parents=True)
    git(box, "init", "-q", cwd=repo)
    return repo


HOLE_FRESH = (
    "RESIDUAL: a repository or submodule git dir created during the run cannot be mounted over, so its hooks "
    "and config are writable inside; bwrap/running/execute.py moves them aside after the run (the host commit runs no "
    "hook), but the write itself succeeds"
)

NESTED = [
    pytest.param(
        "vendor/lib",
        "printf {hook} > vendor/lib/.git/hooks/pre-commit && chmod +x vendor/lib/.git/hooks/pre-commit",
        None,
        id="existing-nested-repo-hook",
    ),
    pytest.param(
        "vendor/lib",
        "mkdir -p evil && printf {hook} > evil/pre-commit && chmod +x evil/pre-commit && git -C vendor/lib config core.hooksPath {project}/evil",
        None,
        id="existing-nested-repo-config",
    ),
    pytest.param(
        "sub",
        "mkdir -p .git/modules/lib/hooks && printf {hook} > .git/modules/lib/hooks/pre-commit && chmod +x .git/modules/lib/hooks/pre-commit",
        None,
        id="existing-submodule-git-dir",
    ),
    pytest.param(
        "fresh",
        "git init -q fresh && printf {hook} > fresh/.git/hooks/pre-commit && chmod +x fresh/.git/hooks/pre-commit",
        HOLE_FRESH,
        id="freshly-initialised-repo",
    ),
    pytest.param(
        "new-sub",
        "mkdir -p .git/modules && git init -q --separate-git-dir=.git/modules/new new-sub && printf {hook} > .git/modules/new/hooks/pre-commit"
        " && chmod +x .git/modules/new/hooks/pre-commit",
        HOLE_FRESH,
        id="submodule-git-dir-made-inside",
    ),
]


@pytest.mark.parametrize(
    ("repo", "script", "hole"),
    [pytest.param(*p.values, marks=[pytest.mark.xfail(reason=p.values[2], strict=True)] if p.values[2] else [], id=p.id) for p in NESTED],
)
def test_case_58_nested_and_fresh_repositories(vbox: Box, repo: str, script: str, hole: str | None) -> None:
    """ESCAPES 58: hooks and config of nested, submodule and freshly initialised repositories are not writable either."""
    git(vbox, "init", "-q")
    if repo == "vendor/lib":
        _nested_repo(vbox)
    if repo == "sub":  # a submodule checkout: sub/.git is a `gitdir:` file pointing into .git/modules/lib
        (vbox.project / ".git" / "modules").mkdir()
        git(vbox, "init", "-q", "--separate-git-dir=.git/modules/lib", "sub")
    marker = vbox.root / "HOOKED"
    attack = vbox.run(script.format(hook=q(HOOK.format(marker=marker)), project=q(str(vbox.project))) + " && echo PLANTED", env=GIT_ENV)
    target = vbox.project / repo
    if (target / ".git").exists():
        git(vbox, "commit", "-q", "--allow-empty", "-m", "host", cwd=target, check=False)  # the host's next commit there
    assert not marker.exists(), f"a host git commit in {repo} ran a hook planted inside: {attack.stdout!r}"
    if "config core.hooksPath" in script:  # the write works inside (gitstage.py); the key is not carried out
        assert "core.hookspath" in attack.stderr, attack
        assert "hookspath" not in (target / ".git" / "config").read_text().lower()
    else:
        assert "PLANTED" not in attack.stdout
    control = vbox.run("echo ok > notes.txt && git status --short >/dev/null && echo CONTROL", env=GIT_ENV)
    assert "CONTROL" in control.stdout, control


def test_case_58_repository_made_inside_an_unversioned_project(vbox: Box) -> None:
    """ESCAPES 58: `git init` in a project without .git: the hooks written inside are moved aside after the run."""
    marker = vbox.root / "HOOKED"
    attack = vbox.run(
        f"git init -q . && printf {q(HOOK.format(marker=marker))} > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo PLANTED",
        env=GIT_ENV,
    )
    assert "PLANTED" in attack.stdout, attack  # control: the project is writable and git works inside
    assert not (vbox.project / ".git" / "hooks" / "pre-commit").exists(), attack.stderr
    git(vbox, "commit", "-q", "--allow-empty", "-m", "host", check=False)
    assert not marker.exists()


@pytest.mark.parametrize(
    "plant",
    [
        pytest.param("printf {hook} > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit", id="hook"),
        pytest.param("git config core.fsmonitor {fsmonitor}", id="fsmonitor"),
        pytest.param("git config alias.st '!{fsmonitor}'", id="shell-alias"),
    ],
)
def test_case_58_a_first_git_init_stays_a_working_repository_and_what_runs_goes(vbox: Box, plant: str) -> None:
    """`git init` at the project's root is an agent's first command: the repository it makes stays
    whole (an inert config, git's sample hooks), and what would run later is still moved aside."""
    work = vbox.run("git init -q . && git add -A && git commit -q --allow-empty -m first && git config user.name someone && echo MADE", env=GIT_ENV)
    assert "MADE" in work.stdout and "renamed to" not in work.stderr, work
    assert git(vbox, "config", "--local", "user.name").stdout.strip() == "someone"  # the user's repository, whole
    assert (vbox.project / ".git" / "hooks" / "pre-commit.sample").exists()
    assert git(vbox, "log", "--oneline").stdout.strip().endswith("first")
    marker = vbox.root / "RAN"
    shutil.rmtree(vbox.project / ".git")
    attack = vbox.run(
        f"git init -q . && {plant.format(hook=q(HOOK.format(marker=marker)), fsmonitor=q(f'touch {marker}'))} && echo PLANTED", env=GIT_ENV
    )
    assert "PLANTED" in attack.stdout and "renamed to" in attack.stderr, attack
    git(vbox, "status", check=False)
    git(vbox, "commit", "-q", "--allow-empty", "-m", "host", check=False)
    git(vbox, "st", check=False)
    assert not marker.exists()


# --- case 61 ----------------------------------------------------------------------------------------

RC_FILES = [".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".config/fish/config.fish"]


@pytest.mark.parametrize("writable_home", [False, True], ids=["default-policy", "home-writable"])
@pytest.mark.parametrize("name", RC_FILES)
def test_case_61_shell_startup_files(vbox: Box, name: str, writable_home: bool) -> None:
    """ESCAPES 61: every shell startup file stays unwritable, existing (.bashrc, .profile) or not."""
    for existing in (".bashrc", ".profile"):
        (vbox.home / existing).write_text("# host rc\n")
    target = vbox.home / name
    before = snapshot(target)
    policy = home_writable(vbox) if writable_home else None
    attack = vbox.run(f"mkdir -p \"$(dirname ~/{name})\"; echo 'touch /tmp/RC' >> ~/{name} && echo WROTE", policy=policy)
    assert snapshot(target) == before, attack
    control = vbox.run("echo ok > ~/plain.txt" if writable_home else "echo ok > ./plain.txt", policy=policy)
    assert control.returncode == 0, control  # control: the writable places are writable


# --- case 62 ----------------------------------------------------------------------------------------

AGENT_FILES = [
    ".claude/settings.json",
    ".mcp.json",
    ".vscode/tasks.json",
    ".vscode/settings.json",
    ".idea/workspace.xml",
    ".github/hooks/x.json",
    ".codex/config.toml",
    ".cursor/mcp.json",
    ".gemini/settings.json",
]


@pytest.mark.parametrize("existing", [False, True], ids=["absent", "existing"])
@pytest.mark.parametrize("name", AGENT_FILES)
def test_case_62_agent_and_editor_configuration(vbox: Box, name: str, existing: bool) -> None:
    """ESCAPES 62: agent and editor files that run commands stay unwritable in the project, existing or not."""
    target = vbox.project / name
    if existing:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text('{"host": true}\n')
    before = snapshot(target)
    attack = vbox.run(f'mkdir -p "$(dirname {q(name)})"; echo \'{{"runOn": "folderOpen"}}\' > {q(name)} && echo WROTE')
    assert snapshot(target) == before, attack  # an absent parent folder: created inside, moved aside after the run
    control = vbox.run("mkdir -p docs && echo ok > docs/notes.json")
    assert control.returncode == 0 and (vbox.project / "docs" / "notes.json").exists(), control


@pytest.mark.parametrize("folder", [".claude", ".vscode", ".cursor"])
def test_case_62_symlink_swap_of_protected_folder(vbox: Box, folder: str) -> None:
    """ESCAPES 62 (codex symlink replacement): replacing a protected folder with a link to a decoy fails."""
    (vbox.project / folder).mkdir()
    (vbox.project / folder / "settings.json").write_text("{}\n")
    (vbox.project / "decoy").mkdir()
    before = snapshot(vbox.project / folder)
    attack = vbox.run(
        f"mv {folder} old-{folder} && echo MOVED; rm -rf {folder} && echo REMOVED; ln -sfn decoy {folder} && echo LINKED;"
        f"echo '{{\"hooks\": 1}}' > decoy/settings.json"
    )
    assert snapshot(vbox.project / folder) == before, attack
    assert "MOVED" not in attack.stdout and "REMOVED" not in attack.stdout, attack
    assert (vbox.project / "decoy" / "settings.json").exists()  # control: the decoy itself is ordinary and writable


# --- case 63 ----------------------------------------------------------------------------------------

MODE_OPEN = '[network]\nmode = "open"\n'


def test_case_63_project_policy_and_extends_are_read_only(vbox: Box) -> None:
    """ESCAPES 63: the project's .stockade.toml and every file it extends are read-only; one the run
    creates where none was is moved aside after it, before any later run can read it."""
    attack = vbox.run(f"printf {q(MODE_OPEN)} > .stockade.toml && echo WROTE-ABSENT")
    assert not (vbox.project / ".stockade.toml").exists(), attack
    assert [p.name for p in vbox.project.glob(".stockade.toml.stockade-quarantine-*")], attack
    assert "renamed to" in attack.stderr, attack
    later = vbox.run("true", options=["--dry-run"])
    assert "network: none" in later.stdout, later  # the next run still has the default policy
    (vbox.project / "base.toml").write_text('[filesystem]\nallow_write = ["."]\n')
    policy = vbox.project / "policy.toml"
    policy.write_text('extends = ["./base.toml"]\n')
    before = (policy.read_bytes(), (vbox.project / "base.toml").read_bytes())
    attack = vbox.run(
        f"printf {q(MODE_OPEN)} >> base.toml && echo WROTE-BASE; printf {q(MODE_OPEN)} >> policy.toml && echo WROTE-POLICY;echo ok > other.txt",
        options=["--policy", str(policy)],
    )
    assert "WROTE" not in attack.stdout, attack
    assert (policy.read_bytes(), (vbox.project / "base.toml").read_bytes()) == before
    assert (vbox.project / "other.txt").exists()  # control


@pytest.mark.parametrize("config_exists", [False, True], ids=["no-config-folder", "config-folder-exists"])
def test_case_63_user_config_protected_even_when_absent(vbox: Box, config_exists: bool) -> None:
    """ESCAPES 63: with a writable HOME, ~/.config/stockade/config.toml cannot be planted."""
    if config_exists:
        (vbox.home / ".config").mkdir()
    target = vbox.home / ".config" / "stockade" / "config.toml"
    attack = vbox.run(
        f"mkdir -p ~/.config/stockade && printf {q(MODE_OPEN)} > ~/.config/stockade/config.toml && echo WROTE", policy=home_writable(vbox)
    )
    assert not target.exists(), attack
    later = vbox.run("true", options=["--dry-run"])
    assert "network: none" in later.stdout, later  # the next run still has the default policy


@pytest.mark.xfail(
    reason="HOLE: the floor protects .stockade.toml only at the top of each writable root; sub/.stockade.toml is "
    "writable and is the first file the walk-up discovery finds from sub/ (trust still only lets it narrow)",
    strict=True,
)
def test_case_63_nested_policy_cannot_be_planted(vbox: Box) -> None:
    """ESCAPES 63: a planted sub/.stockade.toml would be found first by discovery from sub/."""
    attack = vbox.run(f"mkdir -p sub && printf {q(MODE_OPEN)} > sub/.stockade.toml && echo WROTE")
    assert "WROTE" not in attack.stdout and not (vbox.project / "sub" / ".stockade.toml").exists(), attack


def test_case_63_planted_nested_policy_cannot_widen(vbox: Box) -> None:
    """ESCAPES 63 (defence in depth): a nested policy found first is untrusted and can only narrow."""
    (vbox.project / "sub").mkdir()
    (vbox.project / "sub" / ".stockade.toml").write_text(MODE_OPEN + '[filesystem]\nallow_write = ["~"]\n')
    plan = vbox.run("true", options=["--dry-run"], cwd=vbox.project / "sub")
    assert "network: none" in plan.stdout and "not trusted" in plan.stderr, plan
    attack = vbox.run("echo x > ~/widened && echo WROTE", cwd=vbox.project / "sub")
    assert not (vbox.home / "widened").exists(), attack


# --- case 64 ----------------------------------------------------------------------------------------

PACKAGE_FILES = [
    pytest.param(".npmrc", "git=./pwn.sh", id="npmrc"),
    pytest.param(".yarnrc", 'yarn-path "./x.js"', id="yarnrc"),
    pytest.param(".yarnrc.yml", "yarnPath: ./x.cjs", id="yarnrc-yml"),
    pytest.param(".cargo/config.toml", '[build]\nrustc-wrapper = "./w.sh"', id="cargo-config-toml"),
    pytest.param(".cargo/config", '[build]\nrustc-wrapper = "./w.sh"', id="cargo-config-legacy"),
    pytest.param("pip.conf", "[global]\nindex-url = http://evil.test/", id="pip-conf"),
]


@pytest.mark.parametrize("existing", [False, True], ids=["absent", "existing"])
@pytest.mark.parametrize(("name", "line"), PACKAGE_FILES)
def test_case_64_package_manager_hooks(vbox: Box, name: str, line: str, existing: bool) -> None:
    """ESCAPES 64: .npmrc, .yarnrc*, .cargo/config*, pip.conf stay unwritable in the project."""
    target = vbox.project / name
    if existing:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# host\n")
    before = snapshot(target)
    attack = vbox.run(f"mkdir -p \"$(dirname {q(name)})\"; printf '%s\\n' {q(line)} >> {q(name)} && echo WROTE")
    assert snapshot(target) == before, attack
    control = vbox.run("echo '{}' > package.json")
    assert control.returncode == 0, control


def test_case_64_pth_startup_hook_is_reported(vbox: Box) -> None:
    """ESCAPES 64: a new .venv/**/*.pth is allowed (project file) but named in the end-of-run summary."""
    site = vbox.project / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    result = vbox.run(f"echo 'import os; os.system(\"touch /tmp/PTH\")' > {q(str(site / 'zz.pth'))}")
    assert result.returncode == 0 and (site / "zz.pth").exists(), result  # allowed by design
    assert "zz.pth" in result.stderr, result.stderr


# --- case 65 ----------------------------------------------------------------------------------------

PATH_DIRS = [
    pytest.param(".local/bin", id="local-bin"),
    pytest.param(".bun/bin", id="bun-bin"),
    pytest.param(".cargo/bin", id="cargo-bin"),
    pytest.param(".local/share/mise/shims", id="mise-shims"),
    pytest.param("bin", id="home-bin-on-path"),
]


@pytest.mark.parametrize("folder", PATH_DIRS)
def test_case_65_user_path_directories(vbox: Box, folder: str) -> None:
    """ESCAPES 65: with a writable HOME, folders on the user's PATH stay unwritable (no git shim ahead of /usr/bin)."""
    path_dir = vbox.home / folder
    path_dir.mkdir(parents=True)
    path = f"{path_dir}:/usr/local/bin:/usr/bin:/bin"
    marker = vbox.root / "PATHED"
    shim = f'#!/bin/sh\ntouch {marker}\nexec /usr/bin/git "$@"\n'
    attack = vbox.run(
        f"printf {q(shim)} > {q(str(path_dir / 'git'))} && chmod +x {q(str(path_dir / 'git'))} && echo WROTE",
        policy=home_writable(vbox),
        env={"PATH": path},
    )
    subprocess.run(["git", "--version"], env={"PATH": path, "HOME": str(vbox.home)}, capture_output=True)  # the host's next git
    assert not marker.exists() and not (path_dir / "git").exists(), attack
    control = vbox.run("echo ok > ~/notes.txt", policy=home_writable(vbox), env={"PATH": path})
    assert control.returncode == 0, control


def test_case_65_stockade_finds_bwrap_by_absolute_path(vbox: Box) -> None:
    """ESCAPES 65: a `bwrap` planted first on the caller's PATH is never what stockade runs."""
    fake = vbox.home / ".local" / "bin"
    fake.mkdir(parents=True)
    marker = vbox.root / "FAKE-BWRAP"
    (fake / "bwrap").write_text(f'#!/bin/sh\ntouch {marker}\nexec /usr/bin/bwrap "$@"\n')
    (fake / "bwrap").chmod(0o755)
    result = vbox.run("echo inside", env={"PATH": f"{fake}:/usr/local/bin:/usr/bin:/bin"})
    assert result.returncode == 0 and "inside" in result.stdout, result  # control: the run works
    assert not marker.exists()


# --- case 66 ----------------------------------------------------------------------------------------

LOGIN_HOOKS = [
    pytest.param(".config/autostart/x.desktop", "[Desktop Entry]\nExec=touch /tmp/AUTOSTART", True, id="autostart"),
    pytest.param(".config/systemd/user/x.service", "[Service]\nExecStart=/bin/touch /tmp/UNIT", True, id="systemd-user-unit"),
    pytest.param(".config/environment.d/x.conf", "LD_PRELOAD=/tmp/x.so", True, id="environment-d"),
    pytest.param(".config/autostart/x.desktop", "[Desktop Entry]\nExec=touch /tmp/AUTOSTART", False, id="autostart-no-config-folder"),
    pytest.param("Library/LaunchAgents/x.plist", "<plist/>", False, id="launch-agents"),
    pytest.param(".ssh/authorized_keys", "ssh-ed25519 AAAA attacker", False, id="authorized-keys"),
    pytest.param(".ssh/config", "Host *\n  ProxyCommand touch /tmp/SSH", False, id="ssh-config"),
]


@pytest.mark.parametrize(("name", "content", "config_exists"), LOGIN_HOOKS)
def test_case_66_login_and_remote_login_hooks(vbox: Box, name: str, content: str, config_exists: bool) -> None:
    """ESCAPES 66: autostart entries, user units, launch agents and ~/.ssh stay unwritable with a writable HOME."""
    if config_exists:
        (vbox.home / ".config").mkdir()
    target = vbox.home / name
    before = snapshot(target)
    attack = vbox.run(f"mkdir -p \"$(dirname ~/{name})\"; printf '%s\\n' {q(content)} >> ~/{name} && echo WROTE", policy=home_writable(vbox))
    assert snapshot(target) == before, attack
    control = vbox.run("mkdir -p ~/.config/app && echo ok > ~/.config/app/settings.ini", policy=home_writable(vbox))
    assert control.returncode == 0 and (vbox.home / ".config" / "app" / "settings.ini").exists(), control


# --- case 67 ----------------------------------------------------------------------------------------


def test_case_67_ci_runner_channels(vbox: Box) -> None:
    """ESCAPES 67: GITHUB_ENV/PATH/OUTPUT files and RUNNER_TEMP scripts stay unwritable; ACTIONS_* tokens absent."""
    runner = vbox.outside / "runner"
    temp = runner / "tmp"
    temp.mkdir(parents=True)
    files = {name: runner / name.lower() for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    for path in files.values():
        path.write_text("")
    (temp / "next-step.sh").write_text("echo next step\n")
    env = {name: str(path) for name, path in files.items()}
    env |= {
        "RUNNER_TEMP": str(temp),
        "GITHUB_REPOSITORY": "org/repo",
        "ACTIONS_RUNTIME_TOKEN": "CANARY-RT",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARY-OIDC",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "http://x.test/CANARY-URL",
        "ACTIONS_CACHE_URL": "http://x.test/CANARY-CACHE",
    }
    before = {path: path.read_bytes() for path in [*files.values(), temp / "next-step.sh"]}
    attack = vbox.run(
        'echo "BASH_ENV=/tmp/x" >> "$GITHUB_ENV"; echo "$PWD/bin" >> "$GITHUB_PATH"; echo "x=1" >> "$GITHUB_OUTPUT";'
        'echo "# hi" >> "$GITHUB_STEP_SUMMARY"; echo "touch /tmp/PWNED" >> "$RUNNER_TEMP/next-step.sh";'
        'env | grep -E "^ACTIONS_|CANARY"; echo "repo=$GITHUB_REPOSITORY"',
        env=env,
    )
    assert "CANARY" not in attack.stdout and "ACTIONS_" not in attack.stdout, attack
    assert {path: path.read_bytes() for path in before} == before
    assert "repo=org/repo" in attack.stdout  # control: ordinary CI variables pass


# --- case 68 ----------------------------------------------------------------------------------------

RUNS_LATER = [
    pytest.param("Makefile", "all:\n\ttouch /tmp/MADE", id="makefile"),
    pytest.param("conftest.py", "import os; os.system('touch /tmp/CONF')", id="conftest"),
    pytest.param("package.json", '{"scripts": {"test": "touch /tmp/NPM"}}', id="package-json"),
    pytest.param("build.sh", "touch /tmp/SH", id="shell-script"),
    pytest.param(".pre-commit-config.yaml", "repos: []", id="pre-commit-config"),
    pytest.param(".github/workflows/x.yml", "on: push", id="workflow"),
]


@pytest.mark.parametrize(("name", "content"), RUNS_LATER)
def test_case_68_runs_later_files_are_reported(vbox: Box, name: str, content: str) -> None:
    """ESCAPES 68 (residual): allowed by design, so the run summary must name what was created or changed."""
    result = vbox.run(f"mkdir -p \"$(dirname {q(name)})\"; printf '%s\\n' {q(content)} > {q(name)}")
    assert result.returncode == 0 and (vbox.project / name).exists(), result  # allowed: the project is writable
    assert name in result.stderr, f"summary does not mention {name}: {result.stderr!r}"


def test_case_58_hooks_of_a_repository_made_during_the_run_are_moved_aside(vbox: Box) -> None:
    """ESCAPES 58 (what stockade does about the residual above): after the run, a fresh nested repository's new
    hook and config are renamed aside, the summary says so, and the host's next commit runs no hook."""
    git(vbox, "init", "-q")
    marker = vbox.root / "HOOKED"
    attack = vbox.run(
        f"git init -q fresh && printf {q(HOOK.format(marker=marker))} > fresh/.git/hooks/pre-commit && "
        "chmod +x fresh/.git/hooks/pre-commit && git -C fresh config core.fsmonitor 'touch /tmp/FSMON' && echo PLANTED",
        env=GIT_ENV,
    )
    assert "PLANTED" in attack.stdout, attack  # control: git works inside and the project is writable
    fresh = vbox.project / "fresh" / ".git"
    assert not (fresh / "hooks" / "pre-commit").exists() and not (fresh / "config").exists(), attack.stderr
    assert "fresh/.git/hooks/pre-commit" in attack.stderr and "renamed to" in attack.stderr, attack.stderr
    git(vbox, "commit", "-q", "--allow-empty", "-m", "host", cwd=vbox.project / "fresh", check=False)
    assert not marker.exists()
