"""Where a repository's git data really lives, in every layout git has, and which of it
makes git run a program on the host later.

A work tree's `.git` is a folder (a plain repository), a file naming the git dir
(`gitdir: ...`: a linked worktree, a submodule), or a symlink to a git dir. A
git dir may name a second, shared one in `commondir` (worktrees): hooks, the
repository config and the objects live there. Hooks may live elsewhere
altogether: `core.hooksPath`, set in the repository's config, the user's or
the system's, or any file those include. stockade protects the files of the
git dir that git really reads, and every folder `core.hooksPath` names,
existing or not.
"""

from __future__ import annotations

import os
import stat

from stockade.profiles import gitconfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_MODULES = 256  # submodule git dirs looked at in one repository


class GitLayout:
    """One repository as git would find it from its work tree (or from GIT_DIR)."""

    __slots__ = ("work_tree", "dot_git", "git_dir", "common_dir")

    def __init__(self, work_tree: str | None, dot_git: str | None, git_dir: str, common_dir: str) -> None:
        self.work_tree = work_tree
        self.dot_git = dot_git  # the `.git` entry itself, when there is one
        self.git_dir = git_dir  # real path
        self.common_dir = common_dir  # real path; == git_dir unless `commondir` names another

    @property
    def linked(self) -> bool:
        """A worktree or submodule whose git dir is not the `.git` folder beside its files."""
        return self.dot_git is None or self.git_dir != os.path.realpath(self.dot_git) or not _is_real_dir(self.dot_git)


def points_back(layout: GitLayout) -> bool:
    """Whether the linked git dir names this work tree back, as git writes it: a worktree's
    `GIT_DIR/worktrees/NAME/gitdir` holds the path of its `.git` file, a submodule's
    `modules/NAME/config` its `core.worktree`. A `.git` file or link alone proves nothing:
    a sandbox that can write the project can write one naming any folder, and a later run
    would make that folder writable (bwrap/plan/mounts.py). GIT_DIR comes from the user."""
    if layout.dot_git is None:
        return True
    if not _is_real_dir(layout.git_dir) or not os.path.isfile(layout.dot_git) or os.path.islink(layout.dot_git):
        return False
    dot_git = os.path.realpath(layout.dot_git)
    data = gitconfig.read_regular(os.path.join(layout.git_dir, "gitdir"), 4096)
    if data is not None:
        named = data.split(b"\n", 1)[0].decode("utf-8", "surrogateescape").strip()
        if named and "\0" not in named and os.path.realpath(os.path.join(layout.git_dir, named)) == dot_git:
            return True
    work_tree = os.path.realpath(os.path.dirname(layout.dot_git))
    entries = gitconfig.read(os.path.join(layout.git_dir, "config")) or []
    for value in gitconfig.values(entries, "core.worktree"):
        if value and "\0" not in value and os.path.realpath(os.path.join(layout.git_dir, value)) == work_tree:
            return True
    return False


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def pointer_target(dot_git_file: str) -> str | None:
    """The real path a `gitdir: ...` file names, or None if it is not one."""
    data = gitconfig.read_regular(dot_git_file, 4096)
    if data is None:
        return None
    first = data.split(b"\n", 1)[0].decode("utf-8", "surrogateescape").strip()
    if not first.startswith("gitdir:") or "\0" in first:
        return None  # a NUL names no path (os.path would raise)
    target = first[len("gitdir:") :].strip()
    return os.path.realpath(os.path.join(os.path.dirname(dot_git_file), target)) if target else None


def is_git_dir(folder: str) -> bool:
    """What git itself checks to take a folder for a git dir: a HEAD file, objects and refs."""
    inside = os.path.join
    return os.path.isfile(inside(folder, "HEAD")) and _is_real_dir(inside(folder, "objects")) and _is_real_dir(inside(folder, "refs"))


def common_dir_of(git_dir: str) -> str:
    data = gitconfig.read_regular(os.path.join(git_dir, "commondir"), 4096)
    if data is None:
        return git_dir
    named = data.split(b"\n", 1)[0].decode("utf-8", "surrogateescape").strip()
    if "\0" in named:
        return git_dir
    return os.path.realpath(os.path.join(git_dir, named)) if named else git_dir


def locate(work_tree: str) -> GitLayout | None:
    """The repository whose `.git` sits in `work_tree`, or None."""
    dot_git = os.path.join(work_tree, ".git")
    try:
        info = os.lstat(dot_git)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        git_dir = os.path.realpath(dot_git)
    elif stat.S_ISLNK(info.st_mode):
        git_dir = os.path.realpath(dot_git)
        if not os.path.isdir(git_dir):
            return None
    elif stat.S_ISREG(info.st_mode):
        target = pointer_target(dot_git)
        if target is None or not os.path.isdir(target):
            return None
        git_dir = target
    else:
        return None
    return GitLayout(work_tree, dot_git, git_dir, common_dir_of(git_dir))


def from_environment(env: Mapping[str, str], cwd: str) -> GitLayout | None:
    """The repository GIT_DIR names (git's own variable), if any."""
    named = env.get("GIT_DIR", "")
    if not named:
        return None
    git_dir = os.path.realpath(os.path.join(cwd, named))
    if not os.path.isdir(git_dir):
        return None
    common = env.get("GIT_COMMON_DIR", "")
    common_dir = os.path.realpath(os.path.join(cwd, common)) if common else common_dir_of(git_dir)
    work = env.get("GIT_WORK_TREE", "")
    return GitLayout(os.path.realpath(os.path.join(cwd, work)) if work else None, None, git_dir, common_dir)


def user_configs(home: str, env: Mapping[str, str]) -> list[str]:
    """The config files git reads before a repository's own: system, then global."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    files = [env.get("GIT_CONFIG_SYSTEM", "") or "/etc/gitconfig"]
    files.append(os.path.join(xdg if os.path.isabs(xdg) else os.path.join(home, ".config"), "git", "config"))
    files.append(env.get("GIT_CONFIG_GLOBAL", "") or os.path.join(home, ".gitconfig"))
    return files


class UserGit:
    """What the system's and the user's git config (and the files they include, and config
    given in the environment) say for every repository; read once per plan."""

    __slots__ = ("hook_values", "included")

    def __init__(self, home: str, env: Mapping[str, str]) -> None:
        self.hook_values: list[str] = []  # core.hooksPath as written
        self.included: list[str] = []  # files a config includes: config that can run code
        for config in user_configs(home, env):
            entries, included = gitconfig.with_includes(config, home)
            self.included += included
            self.hook_values += gitconfig.values(entries, "core.hookspath")
        self.hook_values = [value for value in self.hook_values + environment_hooks_paths(env) if value]


def user_hooks_paths(home: str, env: Mapping[str, str]) -> list[str]:
    """core.hooksPath values the user's and the system's config give, as written: an absolute
    one names one folder for every repository, a relative one a folder in each repository's
    work tree, including repositories that do not exist yet."""
    return UserGit(home, env).hook_values


def environment_hooks_paths(env: Mapping[str, str]) -> list[str]:
    """core.hooksPath given as config in the environment (GIT_CONFIG_COUNT/KEY_n/VALUE_n, git 2.31+)."""
    count = env.get("GIT_CONFIG_COUNT", "")
    found = []
    for index in range(min(int(count), 1000) if count.isdigit() else 0):
        if env.get(f"GIT_CONFIG_KEY_{index}", "").lower() == "core.hookspath":
            found.append(env.get(f"GIT_CONFIG_VALUE_{index}", ""))
    return [value for value in found if value]


def module_git_dirs(common_dir: str) -> list[str]:
    """Git dirs of submodules kept inside a repository's git dir (`modules/NAME`, nested)."""
    found: list[str] = []
    stack = [os.path.join(common_dir, "modules")]
    while stack and len(found) < MAX_MODULES:
        folder = stack.pop()
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in entries:
            path = os.path.join(folder, name)
            if not _is_real_dir(path):
                continue
            if os.path.lexists(os.path.join(path, "HEAD")):
                found.append(path)
                stack.append(os.path.join(path, "modules"))
            else:
                stack.append(path)  # a submodule named a/b keeps its git dir at modules/a/b
    return found


def worktree_git_dirs(common_dir: str) -> list[str]:
    folder = os.path.join(common_dir, "worktrees")
    try:
        return [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if _is_real_dir(os.path.join(folder, name))]
    except OSError:
        return []


def runs_later(layout: GitLayout, home: str, user: UserGit) -> list[str]:
    """Every path of this repository that makes git run a program, existing or not.

    The common dir's hooks and config; the git dir's per-worktree config and its
    commondir pointer; the same for every other worktree and submodule git dir the
    repository holds; every file a config includes; every folder core.hooksPath names.
    """
    common, own = layout.common_dir, layout.git_dir
    paths = [f"{common}/hooks", f"{common}/config", f"{common}/commondir", f"{common}/config.worktree"]
    if own != common:
        paths += [f"{own}/commondir", f"{own}/config.worktree", f"{own}/config", f"{own}/hooks"]
    for other in worktree_git_dirs(common):
        paths += [f"{other}/commondir", f"{other}/config.worktree"]
    for module in module_git_dirs(common):
        paths += [f"{module}/hooks", f"{module}/config", f"{module}/commondir", f"{module}/config.worktree"]
    hook_values = list(user.hook_values)
    paths += user.included
    for config in dict.fromkeys((f"{common}/config", f"{own}/config.worktree")):
        entries, included = gitconfig.with_includes(config, home)
        paths += included
        hook_values += gitconfig.values(entries, "core.hookspath")
    base = layout.work_tree or own
    for value in hook_values:
        folder = gitconfig.expand_path(value, base, home)
        if folder is not None:
            paths.append(folder)
    return list(dict.fromkeys(paths))


def protected_paths(layouts: list[GitLayout], home: str, env: Mapping[str, str]) -> list[str]:
    """What makes git run code for these repositories (runs_later), each `.git` pointer file
    itself (ESCAPES 58), and every absolute core.hooksPath of the user's: hooks for every
    repository, one yet to exist included."""
    user = UserGit(home, env)
    paths: list[str] = []
    for layout in layouts:
        if layout.dot_git and os.path.isfile(layout.dot_git) and not os.path.islink(layout.dot_git):
            paths.append(layout.dot_git)
        paths += runs_later(layout, home, user)
    for value in user.hook_values:
        folder = gitconfig.expand_path(value, "/", home)
        if folder is not None and value.startswith(("/", "~/")):
            paths.append(folder)
    return list(dict.fromkeys(paths))


def protected_for(work_trees: tuple[str, ...], writable: tuple[str, ...], home: str, env: Mapping[str, str], cwd: str) -> list[str]:
    """protected_paths of the repositories at `work_trees` and of GIT_DIR, kept to what lies
    inside a writable place (the rest is read-only anyway)."""
    from stockade.profiles.paths import is_within

    found = [locate(folder) for folder in dict.fromkeys(work_trees)]
    found.append(from_environment(env, cwd))
    roots = [os.path.realpath(root) for root in writable]
    paths = protected_paths([layout for layout in found if layout is not None], home, env)
    return [path for path in paths if any(is_within(path, root) for root in roots)]
