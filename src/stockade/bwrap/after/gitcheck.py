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

from stockade.bwrap.after.changes import stamp
from stockade.profiles import gitconfig

INERT_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "core.worktree",
        "core.autocrlf",
        "core.eol",
        "core.safecrlf",
        "core.quotepath",
        "core.sparsecheckout",
        "core.sparsecheckoutcone",
        "core.sharedrepository",
        "core.compression",
        "core.bigfilethreshold",
        "core.abbrev",
        "core.untrackedcache",
        "core.splitindex",
        "core.commitgraph",
        "core.multipackindex",
        "extensions.objectformat",
        "extensions.refstorage",
        "extensions.worktreeconfig",
        "extensions.preciousobjects",
        "user.name",
        "user.email",
        "init.defaultbranch",
        "pull.rebase",
        "pull.ff",
        "gc.auto",
        "fetch.prune",
        "index.version",
        "feature.manyfiles",
        "lfs.repositoryformatversion",
    }
)
# remote.NAME.KEY, branch.NAME.KEY, submodule.NAME.KEY: (section, key) pairs that name no program.
# Not remote.*.promisor nor partialclonefilter: with them, a host `git log -p` fetches missing
# objects from the remote's URL by itself, with the user's ssh keys or credential helpers.
INERT_NAMED = frozenset(
    {
        ("remote", "url"),
        ("remote", "pushurl"),
        ("remote", "fetch"),
        ("remote", "push"),
        ("remote", "tagopt"),
        ("remote", "mirror"),
        ("remote", "prune"),
        ("branch", "remote"),
        ("branch", "merge"),
        ("branch", "rebase"),
        ("branch", "pushremote"),
        ("submodule", "url"),
        ("submodule", "active"),
        ("submodule", "update"),
        ("submodule", "branch"),
        ("submodule", "fetchrecursesubmodules"),
        ("submodule", "ignore"),
        ("submodule", "shallow"),
    }
)
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


class _Before:
    """What the check knows of the time before the run: the project walk's runs-later files
    (stamps) and the places the run could write."""

    __slots__ = ("stamps", "writable")

    def __init__(self, stamps: dict[str, tuple[int, int, int, int]], writable: list[str]) -> None:
        self.stamps = stamps
        self.writable = writable

    def configs(self) -> set[str]:
        return {path for path in self.stamps if path.endswith("/config")}

    def could_write(self, path: str) -> bool:
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in self.writable)

    def unchanged(self, path: str) -> bool:
        try:
            info = os.lstat(path)
        except OSError:
            return False
        return self.stamps.get(path) == stamp(info)


def _own_hooks(git_dir: str, before: _Before) -> bool:
    """Whether `git_dir` holds hooks the run could have put there: git runs them from the git
    dir a kept pointer or commondir names, wherever it is (a `modules` or `worktrees` folder
    outside any `.git` is in no walk's patterns). Git's `*.sample` files never run; a hook that
    was there before the run, unchanged, is the user's."""
    hooks = os.path.join(git_dir, "hooks")
    if not before.could_write(hooks):
        return False
    try:
        info = os.lstat(hooks)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    if not stat.S_ISDIR(info.st_mode):
        return True  # a link or a file: it leads anywhere
    try:
        names = os.listdir(hooks)
    except OSError:
        return True
    return any(not name.endswith(".sample") and not before.unchanged(os.path.join(hooks, name)) for name in names)


def _leads_back(commondir_file: str, git_dir: str) -> bool:
    """A worktree's `commondir` naming the git dir that holds it (git writes `../..`)."""
    try:
        info = os.lstat(commondir_file)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 4096:
            return False
    except OSError:
        return False
    data = gitconfig.read_regular(commondir_file, 4096)
    if data is None:
        return False
    named = data.decode("utf-8", "surrogateescape").strip()
    if not named or "\0" in named:
        return False
    return os.path.realpath(os.path.join(os.path.dirname(commondir_file), named)) == os.path.realpath(git_dir)


def _inert_worktree_dir(admin: str, before: _Before) -> bool:
    """GIT_DIR/worktrees/NAME: points back to its git dir, holds no config of its own,
    and that git dir's config is one the user had (protected) or is inert, its hooks too."""
    git_dir = os.path.dirname(os.path.dirname(admin))
    if os.path.basename(os.path.dirname(admin)) != "worktrees" or not _is_git_dir(git_dir):
        return False
    if os.path.lexists(os.path.join(admin, "config.worktree")):
        return False
    config = os.path.join(git_dir, "config")
    return (
        _leads_back(os.path.join(admin, "commondir"), git_dir)
        and (config in before.configs() or inert_config(config))
        and not _own_hooks(git_dir, before)
    )


def _inert_pointer(dot_git: str, before: _Before) -> bool:
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
        return _inert_worktree_dir(target, before)
    if "/modules/" in target:
        return (
            inert_config(os.path.join(target, "config"))
            and not any(os.path.lexists(os.path.join(target, name)) for name in ("commondir", "config.worktree"))
            and not _own_hooks(target, before)
        )
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
        if name == "config" and _is_git_dir(parent):
            work_trees += named_work_trees(path, parent)
    if not work_trees:
        return []
    from stockade.profiles.gitdirs import user_hooks_paths

    home = os.environ.get("HOME") or os.path.expanduser("~")
    relative = [value for value in user_hooks_paths(home, os.environ) if not value.startswith(("/", "~"))]
    found = [os.path.normpath(os.path.join(tree, value)) for tree in work_trees for value in relative]
    return [folder for folder in dict.fromkeys(found) if os.path.lexists(folder)]


def named_work_trees(config: str, git_dir: str) -> list[str]:
    """Where a config moves its work tree (`core.worktree`), or the git dir itself for a bare one:
    git resolves a relative core.hooksPath from there, so the run could choose where hooks run from."""
    found = []
    for key, value in gitconfig.read(config) or []:
        if key == "core.worktree":
            found.append(os.path.normpath(os.path.join(git_dir, value)))
        elif key == "core.bare" and value.strip().lower() in ("true", "yes", "on", "1", ""):
            found.append(git_dir)
    return found


def inert_git_dir(git_dir: str, before: _Before) -> bool:
    """A git dir judged whole (ESCAPES 85): every file git reads there as configuration or code. Its config
    and each worktree's config.worktree inert or absent, its own config.worktree too, no
    `commondir` (it names where config and hooks are read), no `info/attributes` naming a
    filter, diff or merge driver, and no hook the run could have put there."""
    config = os.path.join(git_dir, "config")
    if os.path.lexists(config) and not inert_config(config):  # unchanged proves nothing: an earlier run could plant it
        return False
    if os.path.lexists(os.path.join(git_dir, "commondir")) or _own_hooks(git_dir, before):
        return False
    worktree_configs = [os.path.join(git_dir, "config.worktree")]
    try:
        worktree_configs += [os.path.join(git_dir, "worktrees", name, "config.worktree") for name in os.listdir(os.path.join(git_dir, "worktrees"))]
    except OSError:
        pass
    if any(os.path.lexists(path) and not inert_config(path) for path in worktree_configs):
        return False
    attributes = gitconfig.read_regular(os.path.join(git_dir, "info", "attributes"), 1 << 20)
    return attributes is None or not any(word in attributes for word in (b"filter", b"diff", b"merge"))


def inert(path: str, before_stamps: dict[str, tuple[int, int, int, int]], writable: list[str]) -> bool:
    """Whether `path`, created or changed by the run, can stay: see the module's rules.
    `before_stamps` are the project's runs-later files before the run (their configs were
    held read-only), `writable` the places the run could write."""
    before = _Before(before_stamps, writable)
    name = os.path.basename(path)
    parent = os.path.dirname(path)
    if name in ("config.worktree", "commondir", "attributes"):  # judged with the git dir they belong to
        git_dir = os.path.dirname(parent) if name == "attributes" else parent
        if name != "attributes" and os.path.basename(os.path.dirname(parent)) == "worktrees":
            git_dir = os.path.dirname(os.path.dirname(parent))
        if name == "commondir" and git_dir != parent:
            return _inert_worktree_dir(parent, before)
        return not (is_git_dir_by_content(git_dir) or _is_git_dir(git_dir)) or inert_git_dir(git_dir, before)
    if name == "config" and (os.path.basename(parent) == ".git" or "/.git/modules/" in parent) and _is_git_dir(parent):
        return inert_config(path) and inert_git_dir(parent, before)
    if name == ".git":
        return _inert_pointer(path, before)
    if name == "commondir" and os.path.basename(os.path.dirname(parent)) == "worktrees":
        return _inert_worktree_dir(parent, before)
    if name == "hgrc" and os.path.basename(parent) == ".hg":
        return inert_hgrc(path)
    return _inert_by_content(name, parent, before)


def _inert_by_content(name: str, parent: str, before: _Before) -> bool:
    """HEAD, config and hooks/* anywhere: git takes any folder holding HEAD, objects and refs
    for a git dir (`git init --bare docs/notes`, or those copied into `src/`), and a host
    `git status` there runs what its config names. A file of that name in an ordinary folder
    (`src/hooks/useAuth.ts`, `config`) is ordinary work."""
    hook = os.path.basename(parent) == "hooks" and name not in ("HEAD", "config")
    if not hook and name not in ("HEAD", "config"):
        return False
    git_dir = os.path.dirname(parent) if hook else parent
    if "/.git/" in git_dir + "/":
        return name == "HEAD"  # the project's own repositories: their config and hooks are held read-only
    if not is_git_dir_by_content(git_dir):
        return True
    if hook:
        return name.endswith(".sample")
    return inert_git_dir(git_dir, before)  # HEAD or config: a git dir of another name, judged whole


def is_git_dir_by_content(folder: str) -> bool:
    """What git itself checks: a HEAD file and objects and refs folders."""
    return (
        os.path.isfile(os.path.join(folder, "HEAD"))
        and os.path.isdir(os.path.join(folder, "objects"))
        and os.path.isdir(os.path.join(folder, "refs"))
    )


INERT_HG_SECTIONS = frozenset({"paths"})  # `hg clone` writes [paths] default = URL; hooks and extensions run code


def inert_hgrc(path: str) -> bool:
    """A Mercurial repository config that names no hook, extension or include: only [paths]."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return False
    section = ""
    for line in lines:
        text = line.strip()
        if not text or text.startswith(("#", ";")):
            continue
        if text.startswith("%"):
            return False  # %include, %unset
        if text.startswith("[") and text.endswith("]"):
            section = text[1:-1].strip()
            continue
        if section not in INERT_HG_SECTIONS:
            return False
    return True
