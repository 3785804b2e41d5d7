"""Where a user's day looks different inside the sandbox on purpose, and why.

(scenario, profile or "*") -> the reason. This list may only shrink: test_day.py
fails for a listed scenario that no longer differs.
"""

from __future__ import annotations

OUTSIDE = "it writes outside the project (../): read-only inside, by design; allow_write that place to let it"
GIT_ALIAS = (
    "an alias written inside is not carried to the host's .git/config: even one without '!' can run a program "
    "(`difftool -x CMD`, `submodule foreach CMD`); the run names it, and the rest of the change is kept (bwrap/running/gitstage.py)"
)
LOCAL_URL = (
    "a remote or submodule URL that is a local path (here `./lib`) is not carried to the host's .git/config: a host "
    "`git fetch` or `git submodule update` would copy whatever that path holds then (a later run can make it a link to "
    "a hidden repository); the run names it, and git reads .gitmodules' URL instead (bwrap/running/gitstage.py)"
)
SIGNAL = (
    "a command killed by a signal that did not come through stockade (here its own kill) ends stockade with "
    "128+N, as the README's exit statuses say, not by that signal; one sent to stockade is passed on and ends it by it"
)

DOCUMENTED: dict[tuple[str, str], str] = {
    ("git-config-alias-plain", "*"): GIT_ALIAS,
    ("git-submodule-local", "*"): LOCAL_URL,
    ("git-worktree-add", "*"): OUTSIDE,
    ("git-clone-local", "*"): OUTSIDE,
    ("git-apply-patch", "*"): OUTSIDE,
    ("cwd-through-symlink", "*"): OUTSIDE,
    ("write-outside-project-refused", "*"): OUTSIDE,
    ("sh-exit-by-signal", "*"): SIGNAL,
}
