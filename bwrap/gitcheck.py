"""After a run: git data the run made where nothing protected it, kept when git reading it
on the host cannot run a program.

`git clone`, `git init`, `git worktree add` and `git submodule update` inside a
project write a config, a `.git` pointer file or a worktree's `commondir`
where none was. The check after the run (changes.py) finds each; this module
says which of them are inert, so real work survives the run:
- a config whose every key is one git writes for ordinary repositories
  (format, remotes, branches, submodules) and names no program, include or
  transport helper;
- a `.git` file pointing into `GIT_DIR/worktrees/NAME` whose `commondir` leads
  back to that git dir, or into `GIT_DIR/modules/...` whose config is inert;
- a worktree's `commondir` that leads back to the git dir holding it.
Anything else found there is moved aside as before. Hooks are never inert
(git's own `*.sample` files are not watched at all).
"""

from __future__ import annotations

import os
import stat

from stockade.profiles import gitconfig

INERT_KEYS = frozenset({
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates", "core.ignorecase",
    "core.precomposeunicode", "core.symlinks", "core.worktree", "core.autocrlf", "core.eol", "core.safecrlf",
    "core.quotepath", "core.sparsecheckout", "core.sparsecheckoutcone", "core.sharedrepository",
    "core.compression", "core.bigfilethreshold", "core.abbrev", "core.untrackedcache", "core.splitindex",
    "core.commitgraph", "core.multipackindex",
    "extensions.objectformat", "extensions.refstorage", "extensions.worktreeconfig", "extensions.preciousobjects",
    "user.name", "user.email", "init.defaultbranch", "pull.rebase", "pull.ff", "gc.auto", "fetch.prune",
    "index.version", "feature.manyfiles", "lfs.repositoryformatversion",
})
# remote.NAME.KEY, branch.NAME.KEY, submodule.NAME.KEY: (section, key) pairs that name no program
INERT_NAMED = frozenset({
    ("remote", "url"), ("remote", "pushurl"), ("remote", "fetch"), ("remote", "push"), ("remote", "tagopt"),
    ("remote", "mirror"), ("remote", "prune"), ("remote", "promisor"), ("remote", "partialclonefilter"),
    ("branch", "remote"), ("branch", "merge"), ("branch", "rebase"), ("branch", "pushremote"),
    ("submodule", "url"), ("submodule", "active"), ("submodule", "update"), ("submodule", "branch"),
    ("submodule", "fetchrecursesubmodules"), ("submodule", "ignore"), ("submodule", "shallow"),
})
URL_KEYS = frozenset({"url", "pushurl"})
SUBMODULE_UPDATE_MODES = frozenset({"checkout", "rebase", "merge", "none"})


def inert_entry(key: str, value: str) -> bool:
    if key in INERT_KEYS:
        return True
    section, _, rest = key.partition(".")
    _name, _, leaf = rest.rpartition(".")
    if (section, leaf) not in INERT_NAMED or not _name:
        return False
    if leaf in URL_KEYS:
        # `ext::` and other `helper::address` transports run programs; an option is not a URL
        return "::" not in value and not value.startswith("-")
    if section == "submodule" and leaf == "update":
        return value in SUBMODULE_UPDATE_MODES  # `!command` runs a shell command
    return True


def inert_config(path: str) -> bool:
    entries = gitconfig.read(path)
    return entries is not None and all(inert_entry(key, value) for key, value in entries)


def _is_git_dir(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "HEAD")) and os.path.isdir(os.path.join(folder, "objects"))


def _leads_back(commondir_file: str, git_dir: str) -> bool:
    """A worktree's `commondir` naming the git dir that holds it (git writes `../..`)."""
    try:
        info = os.lstat(commondir_file)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 4096:
            return False
        with open(commondir_file, "rb") as handle:
            named = handle.read().decode("utf-8", "surrogateescape").strip()
    except OSError:
        return False
    return bool(named) and os.path.realpath(os.path.join(os.path.dirname(commondir_file), named)) == os.path.realpath(git_dir)


def _only_samples(git_dir: str) -> bool:
    """No hook git would run: the hooks folder is absent, or holds git's own *.sample files only."""
    hooks = os.path.join(git_dir, "hooks")
    try:
        info = os.lstat(hooks)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        return False
    try:
        with os.scandir(hooks) as entries:
            return all(entry.name.endswith(".sample") and entry.is_file(follow_symlinks=False) for entry in entries)
    except OSError:
        return False


def _inert_git_dir(git_dir: str, trusted_configs: set[str]) -> bool:
    """A git dir the user had (its config and hooks were held read-only during the run), or one
    whose config is inert and whose hooks are only samples. The post-run walk looks for hooks
    under `.git` only: a git dir under another name (a bare repository made in the run) is
    judged here, or a pointer into it would bring its hooks to the host."""
    config = os.path.join(git_dir, "config")
    if config in trusted_configs:
        return True
    return inert_config(config) and _only_samples(git_dir)


def _inert_worktree_dir(admin: str, trusted_configs: set[str]) -> bool:
    """GIT_DIR/worktrees/NAME: points back to its git dir, holds no config of its own,
    and that git dir is inert (_inert_git_dir)."""
    git_dir = os.path.dirname(os.path.dirname(admin))
    if os.path.basename(os.path.dirname(admin)) != "worktrees" or not _is_git_dir(git_dir):
        return False
    if os.path.lexists(os.path.join(admin, "config.worktree")):
        return False
    return _leads_back(os.path.join(admin, "commondir"), git_dir) and _inert_git_dir(git_dir, trusted_configs)


def _inert_pointer(dot_git: str, trusted_configs: set[str]) -> bool:
    from stockade.profiles.gitdirs import pointer_target

    try:
        if not stat.S_ISREG(os.lstat(dot_git).st_mode):
            return False  # a link: git would follow it anywhere
    except OSError:
        return False
    target = pointer_target(dot_git)
    if target is None or not os.path.isfile(os.path.join(target, "HEAD")):
        return False  # a worktree's git dir has a HEAD but no objects of its own
    if os.path.basename(os.path.dirname(target)) == "worktrees":
        return _inert_worktree_dir(target, trusted_configs)
    if "/modules/" in target:
        return _inert_git_dir(target, trusted_configs) and not os.path.lexists(os.path.join(target, "commondir"))
    return False


def user_hook_folders(planted: list[str]) -> list[str]:
    """For each repository the run made (a new git config or `.git` pointer among `planted`),
    the folders a relative core.hooksPath of the user's or the system's config names in its
    work tree: git runs hooks from there on the host, so they are moved aside with it."""
    work_trees = []
    for path in planted:
        name, parent = os.path.basename(path), os.path.dirname(path)
        if name == ".git":
            work_trees.append(parent)
        elif name == "config" and os.path.basename(parent) == ".git":
            work_trees.append(os.path.dirname(parent))
    if not work_trees:
        return []
    from stockade.profiles.gitdirs import user_hooks_paths

    home = os.environ.get("HOME") or os.path.expanduser("~")
    relative = [value for value in user_hooks_paths(home, os.environ) if not value.startswith(("/", "~"))]
    found = [os.path.normpath(os.path.join(tree, value)) for tree in work_trees for value in relative]
    return [folder for folder in dict.fromkeys(found) if os.path.lexists(folder)]


def inert(path: str, trusted_configs: set[str]) -> bool:
    """Whether `path`, created or changed by the run, can stay: see the module's rules.
    `trusted_configs` are git configs that existed before the run (held read-only)."""
    name = os.path.basename(path)
    parent = os.path.dirname(path)
    if name == "config" and _is_git_dir(parent):
        return inert_config(path)
    if name == ".git":
        return _inert_pointer(path, trusted_configs)
    if name == "commondir" and os.path.basename(os.path.dirname(parent)) == "worktrees":
        return _inert_worktree_dir(parent, trusted_configs)
    return False
