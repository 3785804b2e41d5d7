"""Where a user's day looks different inside the sandbox on purpose, and why.

(scenario, profile or "*") -> the reason. This list may only shrink: test_day.py
fails for a listed scenario that no longer differs.
"""

from __future__ import annotations

OUTSIDE = "it writes outside the project (../): read-only inside, by design; allow_write that place to let it"
GIT_CONFIG = (
    "git writes .git/config (git config, submodule add, sparse-checkout): that file can make the host's git "
    "run programs later, so it is read-only inside (git says 'Device or resource busy'); writing its inert keys "
    "through is open work of issue 31"
)
SIGNAL = (
    "a command killed by a signal that did not come through stockade (here its own kill) ends stockade with "
    "128+N, as the README's exit statuses say, not by that signal; one sent to stockade is passed on and ends it by it"
)

DOCUMENTED: dict[tuple[str, str], str] = {
    ("git-config-user-name", "*"): GIT_CONFIG,
    ("git-config-alias-plain", "*"): GIT_CONFIG,
    ("git-sparse-checkout", "*"): GIT_CONFIG,
    ("git-submodule-local", "*"): GIT_CONFIG,
    ("git-worktree-add", "*"): OUTSIDE,
    ("git-clone-local", "*"): OUTSIDE,
    ("git-apply-patch", "*"): OUTSIDE,
    ("cwd-through-symlink", "*"): OUTSIDE,
    ("write-outside-project-refused", "*"): OUTSIDE,
    ("sh-exit-by-signal", "*"): SIGNAL,
}
