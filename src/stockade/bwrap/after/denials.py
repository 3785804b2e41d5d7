"""The file accesses a run's sandbox refused, each with the wall that refused it (`stockade run --trace`).

trace.py gives the failed file syscalls as strace wrote them; this module
reads them (as untrusted text: the sandbox chose the paths), keeps those a
wall of the sandbox refused, and names the wall from the plan's view
(backend.walls_of), after the run, in the parent:

- a path inside a hidden place (a deny_read entry, stockade's own state): the
  sandbox sees an empty, unreadable folder there (EACCES, or ENOENT below it)
  or an empty file;
- a write (EROFS) inside a read-only place of a writable one: the floor's files
  that run code later, deny_write entries, PATH folders;
- a write (EROFS) anywhere else: outside allow_write;
- a path in the private home that it does not show (ENOENT): home = "private";
- EACCES or EPERM elsewhere: the file's own permissions (the sandbox has no
  capabilities), or the seccomp filter for setuid bits.

An ENOENT outside hidden places is no refusal (every PATH lookup makes some).
"""

from __future__ import annotations

import os

REFUSALS = {"EROFS", "EACCES", "EPERM"}
# bwrap's own set-up, before the command: the new root is still at /newroot (a path the sandbox
# never has afterwards; one it makes up there only hides its own refusal from this report)
BWRAP_SETUP = ("/newroot/", "/oldroot/")
ABSENT = {"ENOENT", "ENOTDIR"}
MAX_REPORTED = 12  # lines of the report; the rest are counted
GROUPED = 3  # past this many paths of one rule and kind, one line says them all
CREATING = ("O_CREAT", "O_TMPFILE")
WRITING = ("O_WRONLY", "O_RDWR", "O_TRUNC", "O_APPEND")
OPERATIONS = {
    "mkdir": "create", "mkdirat": "create", "mknod": "create", "mknodat": "create", "symlink": "create",
    "symlinkat": "create", "link": "create", "linkat": "create", "creat": "create",
    "unlink": "remove", "unlinkat": "remove", "rmdir": "remove",
    "rename": "rename", "renameat": "rename", "renameat2": "rename",
    "truncate": "write", "chmod": "change", "fchmodat": "change", "chown": "change", "lchown": "change",
    "fchownat": "change", "utimes": "change", "utimensat": "change", "setxattr": "change", "lsetxattr": "change",
    "removexattr": "change", "lremovexattr": "change", "execve": "execute", "execveat": "execute",
    "access": "check", "faccessat": "check", "faccessat2": "check",
}  # fmt: skip
# Two-path syscalls: the path the refusal is about is the one written (the new name).
SECOND_PATH = {"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat"}


class Failure:
    """One failed syscall: which process, what it tried on which path, and the error."""

    __slots__ = ("pid", "syscall", "path", "operation", "error", "relative")

    def __init__(self, pid: int, syscall: str, path: str, operation: str, error: str, relative: bool = False) -> None:
        self.pid = pid
        self.syscall = syscall
        self.path = path
        self.operation = operation  # read, write, create, remove, rename, change, execute, check
        self.error = error  # the errno's name (EROFS)
        self.relative = relative  # the path was relative to the process's folder (taken as the run's cwd)

    def __repr__(self) -> str:
        return f"Failure({self.pid}, {self.syscall!r}, {self.path!r}, {self.operation!r}, {self.error!r})"


class Denial:
    """A refused access, the wall that refused it in words (`rule`), and which kind of wall (`wall`,
    one of WALLS: what stockade learn may propose for it)."""

    __slots__ = ("failure", "rule", "wall", "fix")

    def __init__(self, failure: Failure, rule: str, wall: str = "") -> None:
        self.failure = failure
        self.rule = rule
        self.wall = wall
        self.fix = ""  # the entry that would allow it, or why none does (profiles/learning.fix_of)

    def to_data(self) -> dict[str, object]:
        failure = self.failure
        return {
            "path": failure.path, "operation": failure.operation, "syscall": failure.syscall, "errno": failure.error,
            "rule": self.rule, "wall": self.wall, "fix": self.fix,
        }  # fmt: skip


# The kinds of wall, as stockade learn and the JSON report name them.
WALLS = (
    "deny_read",  # hidden by a deny_read entry (the user's secrets list)
    "floor",  # hidden or read-only by the floor: stockade's state, files that run code later, PATH
    "unreadable",  # a folder its owner may not read, hidden whole
    "deny_write",  # read-only by a deny_write entry
    "outside_write",  # a write outside every allow_write place
    "read_only",  # a write in a read-only place with no named reason
    "private_home",  # absent from the private home: the real one shows only allow_read places
    "seccomp",  # the seccomp filter (setuid and setgid bits)
    "permissions",  # the file's own permissions
)


def wall_of(rule: str) -> str:
    """The kind of wall (WALLS) a rule sentence of `attribute` names."""
    for prefix, kind in (
        ("hidden by deny_read", "deny_read"), ("hidden by the floor", "floor"), ("hidden by floor:", "floor"),
        ("hidden by a folder", "unreadable"), ("read-only by deny_write", "deny_write"), ("read-only by floor:", "floor"),
        ("read-only by the floor", "floor"), ("outside allow_write", "outside_write"), ("the private home", "private_home"),
        ("the seccomp filter", "seccomp"), ("the file's own permissions", "permissions"),
    ):  # fmt: skip
        if rule.startswith(prefix):
            return kind
    return "floor" if rule.startswith("hidden by") else "read_only"


def parse_line(line: str) -> Failure | None:
    """`PID syscall(args) = -1 ERRNO (text)`, as strace -f -x writes it; anything else is None."""
    pid_text, _space, rest = line.partition(" ")
    name, paren, args = rest.lstrip(" ").partition("(")  # strace pads short pids to line them up
    if not pid_text.isdigit() or not paren or not name.isidentifier():
        return None
    result = args.rfind(" = -1 ")
    tail = args.rfind(")", 0, result) if result >= 0 else -1
    if tail < 0 or args[tail + 1 : result].strip(" "):  # strace pads a short call's ") = -1" out to a column
        return None
    error = args[result + len(" = -1 ") :].split(" ", 1)[0]
    if not error.startswith("E") or not error.isalnum():
        return None
    strings, flags = _strings(args[:tail])
    if not strings:
        return None
    path = strings[1] if name in SECOND_PATH and len(strings) > 1 else strings[0]
    relative = not path.startswith("/")
    if relative and not args.startswith(("AT_FDCWD", '"')) and name not in ("symlink", "symlinkat"):
        return None  # relative to a folder the process had open: not knowable after the fact
    return Failure(int(pid_text), name, path, _operation(name, flags), error, relative)


def _operation(name: str, flags: str) -> str:
    if name in ("open", "openat"):
        if any(flag in flags for flag in CREATING):
            return "create"
        return "write" if any(flag in flags for flag in WRITING) else "read"
    return OPERATIONS.get(name, name)


def _strings(text: str) -> tuple[list[str], str]:
    """The quoted strings of an argument list (escapes decoded) and the text outside them."""
    strings: list[str] = []
    outside: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != '"':
            outside.append(char)
            index += 1
            continue
        value, index = _quoted(text, index + 1)
        if text.startswith("...", index):  # strace cut the string: the path is not whole
            index += 3
            value += "..."
        strings.append(value)
    return strings, "".join(outside)


def _quoted(text: str, index: int) -> tuple[str, int]:
    """One C-escaped string from `index` (just past its quote) to its closing quote."""
    out = bytearray()
    simple = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, '"': 34, "\\": 92}
    while index < len(text):
        char = text[index]
        if char == '"':
            return out.decode("utf-8", "replace"), index + 1
        if char == "\\" and index + 1 < len(text):
            code = text[index + 1]
            if code == "x" and _hex(text[index + 2 : index + 4]):
                out.append(int(text[index + 2 : index + 4], 16))
                index += 4
                continue
            if code in "01234567":
                digits = code
                while len(digits) < 3 and index + 1 + len(digits) < len(text) and text[index + 1 + len(digits)] in "01234567":
                    digits += text[index + 1 + len(digits)]
                out.append(int(digits, 8) & 0xFF)
                index += 1 + len(digits)
                continue
            out.append(simple.get(code, ord(code) & 0xFF))
            index += 2
            continue
        out += char.encode("utf-8", "replace")
        index += 1
    return out.decode("utf-8", "replace"), index


def _hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _deepest(path: str, places: list[list[str]] | list[tuple[str, str]]) -> tuple[str, str] | None:
    found = [(place, why) for place, why in places if _within(path, place)]
    return max(found, key=lambda item: len(item[0])) if found else None


def _wall(why: str, place: str) -> str:
    """A wall's rule and the place it covers, the place said once (`deny_write /p/dist`, not `... (/p/dist)`)."""
    if not why:
        return f"the floor ({place})"
    return why if why.endswith(place) else f"{why} ({place})"


def attribute(failure: Failure, walls: dict[str, object], writable: list[str], cwd: str, origin: str) -> str | None:
    """The wall that refused `failure`, in words, or None when it was no refusal of the sandbox's."""
    path = os.path.normpath(os.path.join(cwd, failure.path))
    error = failure.error
    if error not in REFUSALS and error not in ABSENT:
        return None
    hidden = _deepest(path, walls.get("hidden") or [])  # type: ignore[arg-type]
    if hidden is not None:
        place, why = hidden
        return f"hidden by {_wall(why, place)}"
    if error in ABSENT:
        home = walls.get("home")
        shown = walls.get("shown")
        places = [*(shown if isinstance(shown, list) else []), *writable]
        if isinstance(home, str) and _within(path, home) and not any(_within(path, place) for place in places):
            return (
                f'the private home (home = "private", the default; {origin} can set home or allow_read): '
                "it shows only allow_read places of the real one"
            )
        return None
    if error == "EPERM" and failure.operation == "change" and failure.syscall.startswith("chmod"):
        return "the seccomp filter: no setuid or setgid bits"
    read_only = _deepest(path, walls.get("read_only") or [])  # type: ignore[arg-type]
    if error == "EROFS":
        if read_only is not None:
            place, why = read_only
            return f"read-only by {_wall(why, place)}"
        if not any(_within(path, root) for root in writable):
            return f"outside allow_write in {origin}: everything else is read-only"
        return "read-only"
    return "the file's own permissions (the sandbox has no capabilities)"


def denials(lines: list[str], walls: dict[str, object] | None, writable: list[str], cwd: str, origin: str) -> list[Denial]:
    """The refusals among strace's lines, in the order they happened, each path and kind once."""
    found: list[Denial] = []
    seen: set[tuple[str, str, str]] = set()
    for line in lines:
        failure = parse_line(line)
        if failure is None or failure.path.startswith(BWRAP_SETUP):
            continue
        failure.path = os.path.normpath(os.path.join(cwd, failure.path))
        rule = attribute(failure, walls or {}, writable, cwd, origin)
        key = (failure.path, failure.operation, failure.error)
        if rule is None or key in seen:
            continue
        seen.add(key)
        found.append(Denial(failure, rule, wall_of(rule)))
    return found


def report(found: list[Denial], dropped: int = 0, fixes: dict[str, str] | None = None) -> list[str]:
    """The block printed after the run: one line per refused access, grouped by the rule, each with
    the entry that would allow it (`fixes`, by path) where one would; then how to learn them all."""
    if not found:
        return [f"--trace: no file access was refused{_dropped(dropped)}"]
    by_rule: dict[str, list[Denial]] = {}
    for denial in found:
        by_rule.setdefault(denial.rule, []).append(denial)
    lines = [f"--trace: {len(found)} file access{'es' if len(found) != 1 else ''} refused{_dropped(dropped)}:"]
    for rule, group in by_rule.items():
        kinds: dict[tuple[str, str], list[str]] = {}
        for denial in group:
            kinds.setdefault((denial.failure.operation, denial.failure.error), []).append(denial.failure.path)
        for (operation, error), paths in kinds.items():
            if len(paths) <= GROUPED:
                lines += [f"  {operation} {path} ({error}): {rule}{_fix((fixes or {}).get(path))}" for path in paths]
            else:
                lines.append(f"  {operation} {len(paths)} paths ({error}): {rule} (e.g. {', '.join(paths[:2])}, ...)")
    if len(lines) > MAX_REPORTED + 1:
        lines = [*lines[:MAX_REPORTED], f"  ... and {len(lines) - MAX_REPORTED} more"]
    if any(fix.startswith("to allow") for fix in (fixes or {}).values()):
        lines.append("--trace: `stockade learn -- COMMAND` proposes every entry these need, as a diff of the policy")
    return lines


def _fix(fix: str | None) -> str:
    return f"; {fix}" if fix else ""


def _dropped(count: int) -> str:
    return f" (the trace was cut after {count} lines more)" if count else ""
