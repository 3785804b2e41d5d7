"""The last resort: an error stockade did not foresee still ends in one line and a code.

A traceback tells a user nothing they can act on, and an agent treats an odd
exit code as "run it without the sandbox". Errors from the operating system
get a line that names the path and the usual fix; anything else says it is
stockade's fault, with the traceback behind --debug.
"""

from __future__ import annotations

import errno

from stockade.profiles.text import say

HINTS = {
    errno.EROFS: "the file system is read-only (another sandbox?): give stockade writable state and cache folders "
    "(set XDG_STATE_HOME and XDG_CACHE_HOME to writable folders), or run it outside that sandbox",
    errno.ENOSPC: "the disk is full: free some space, or point XDG_STATE_HOME and XDG_CACHE_HOME elsewhere",
    errno.EDQUOT: "the disk quota is used up: free some space, or point XDG_STATE_HOME and XDG_CACHE_HOME elsewhere",
    errno.EACCES: "permission denied: check who owns that folder (stockade keeps its files under ~/.local/state, ~/.cache and ~/.config)",
    errno.EPERM: "operation not permitted (another sandbox's restrictions?): run stockade where it may create namespaces",
}


def describe(error: BaseException) -> str:
    """One line for an unexpected error."""
    if isinstance(error, FileNotFoundError) and error.filename is None:
        return "the working directory no longer exists: cd to a folder that does, then run it again"
    if isinstance(error, OSError):
        where = f" ({error.filename})" if error.filename else ""
        hint = HINTS.get(error.errno or 0, "see the message, fix what it names, and run it again")
        return f"{error.strerror or error}{where}: {hint}"
    if isinstance(error, RecursionError):
        return "the input is nested too deeply to read"
    if isinstance(error, MemoryError):
        return "out of memory"
    return f"internal error ({type(error).__name__}: {error}); run with --debug for the traceback, and please report it"


def report(error: BaseException, debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exception(error)
    line = describe(error).replace("\n", " ")
    say(f"stockade: error: {line}")
