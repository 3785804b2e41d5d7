"""denials.py: strace's lines read as untrusted text, and each refusal attributed to its wall."""

from __future__ import annotations

import pytest

from stockade.bwrap.after.denials import attribute, denials, parse_line, report, wall_of

WALLS: dict[str, object] = {
    "hidden": [["/h/.ssh", "deny_read ~/.ssh"], ["/p/.env", "deny_read **/.env"], ["/h/.local/state/stockade", "floor: stockade's own state"]],
    "read_only": [["/p/.git/hooks", "floor: .git/hooks runs code later (git)"], ["/p/dist", "deny_write /p/dist"]],
    "home": "/h",
    "shown": ["/h/.gitconfig"],
}
WRITABLE = ["/p"]
ORIGIN = "/p/.stockade.toml"


def rule(line: str, cwd: str = "/p") -> str | None:
    failure = parse_line(line)
    assert failure is not None, line
    return attribute(failure, WALLS, WRITABLE, cwd, ORIGIN)


def test_a_write_outside_allow_write_is_the_read_only_root() -> None:
    line = '12 openat(AT_FDCWD, "/usr/f", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EROFS (Read-only file system)'
    assert rule(line) == f"outside allow_write in {ORIGIN}: everything else is read-only"


def test_a_read_of_a_hidden_folder_names_the_deny_read_entry() -> None:
    line = '7 openat(AT_FDCWD, "/h/.ssh/id_rsa", O_RDONLY) = -1 EACCES (Permission denied)'
    assert rule(line) == "hidden by deny_read ~/.ssh (/h/.ssh)"
    assert rule('7 openat(AT_FDCWD, "/h/.ssh/x/y", O_RDONLY) = -1 ENOENT (No such file or directory)') == "hidden by deny_read ~/.ssh (/h/.ssh)"


def test_a_write_over_a_hidden_file_is_the_hidden_rule_not_the_read_only_one() -> None:
    assert rule('3 openat(AT_FDCWD, ".env", O_WRONLY|O_TRUNC) = -1 EROFS (Read-only file system)') == "hidden by deny_read **/.env (/p/.env)"


def test_a_create_in_a_protected_place_names_the_floor_entry_and_resolves_relative_paths() -> None:
    line = '9 openat(AT_FDCWD, ".git/hooks/pre-commit", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EROFS (Read-only file system)'
    assert rule(line) == "read-only by floor: .git/hooks runs code later (git) (/p/.git/hooks)"
    failure = parse_line(line)
    assert failure is not None and failure.operation == "create" and failure.relative


def test_deny_write_and_the_other_operations() -> None:
    assert rule('1 mkdir("/p/dist/sub", 0777) = -1 EROFS (Read-only file system)') == "read-only by deny_write /p/dist"
    renamed = parse_line('1 renameat2(AT_FDCWD, "/p/a", AT_FDCWD, "/p/dist/a", RENAME_NOREPLACE) = -1 EROFS (Read-only file system)')
    assert renamed is not None and (renamed.path, renamed.operation) == ("/p/dist/a", "rename")
    removed = parse_line('1 unlinkat(AT_FDCWD, "/p/.git/hooks/x", 0) = -1 EROFS (Read-only file system)')
    assert removed is not None and removed.operation == "remove"


def test_the_private_home_explains_an_absent_path_and_other_absences_are_no_refusal() -> None:
    assert rule('4 openat(AT_FDCWD, "/h/.aws/credentials", O_RDONLY) = -1 ENOENT (No such file or directory)').startswith(
        'the private home (home = "private"'
    )
    assert rule('4 openat(AT_FDCWD, "/usr/lib/nothing", O_RDONLY) = -1 ENOENT (No such file or directory)') is None
    assert rule('4 execve("/usr/local/bin/ls", ["ls"], 0x7ffd /* 3 vars */) = -1 ENOENT (No such file or directory)') is None
    assert rule('4 openat(AT_FDCWD, "/p/missing", O_RDONLY) = -1 ENOENT (No such file or directory)') is None


def test_permissions_and_the_seccomp_filter() -> None:
    assert rule('5 openat(AT_FDCWD, "/etc/shadow", O_RDONLY) = -1 EACCES (Permission denied)').startswith("the file's own permissions")
    assert rule('5 chmod("/p/x", 04755) = -1 EPERM (Operation not permitted)') == "the seccomp filter: no setuid or setgid bits"


@pytest.mark.parametrize(
    "line",
    [
        "",
        "garbage",
        "12",
        "12 +++ exited with 0 +++",
        'x openat(AT_FDCWD, "/a", O_RDONLY) = -1 EROFS (x)',
        '12 openat(AT_FDCWD, "/a", O_RDONLY) = 3',
        '12 openat(AT_FDCWD, "/a", O_RDONLY) = -1 (x)',
        '12 openat(AT_FDCWD, "/a',
        '12 openat(AT_FDCWD, "\\',
        "12 getpid() = -1 EPERM (x)",
        '12 openat(3, "rel", O_RDONLY) = -1 EACCES (Permission denied)',
        "12 ()( = -1 EROFS",
    ],
)
def test_lines_that_are_not_a_failed_path_syscall_are_skipped(line: str) -> None:
    assert parse_line(line) is None


def test_short_pids_padded_by_strace_are_read() -> None:
    failure = parse_line('663   openat(AT_FDCWD, "/usr/static-f", O_WRONLY|O_CREAT, 0644) = -1 EROFS (Read-only file system)')
    assert failure is not None and (failure.pid, failure.path, failure.operation) == (663, "/usr/static-f", "create")


def test_escapes_in_paths_are_decoded() -> None:
    failure = parse_line('1 openat(AT_FDCWD, "/p/a\\"b\\\\c\\x0a\\xc3\\xa9\\0", O_RDONLY) = -1 EACCES (Permission denied)')
    assert failure is not None and failure.path == '/p/a"b\\c\né\0'
    cut = parse_line('1 openat(AT_FDCWD, "/p/aaaa"..., O_RDONLY) = -1 EACCES (Permission denied)')
    assert cut is not None and cut.path == "/p/aaaa..."


def test_bwrap_set_up_is_left_out_and_each_refusal_is_said_once() -> None:
    lines = [
        '8 access("/newroot/proc/sys", W_OK) = -1 EACCES (Permission denied)',
        '9 openat(AT_FDCWD, "/usr/f", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EROFS (Read-only file system)',
        '10 openat(AT_FDCWD, "/usr/f", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EROFS (Read-only file system)',
        '11 openat(AT_FDCWD, "/usr/lib/x", O_RDONLY) = -1 ENOENT (No such file or directory)',
    ]
    found = denials(lines, WALLS, WRITABLE, "/p", ORIGIN)
    assert [(d.failure.path, d.failure.operation) for d in found] == [("/usr/f", "create")]
    assert found[0].to_data()["errno"] == "EROFS"


def test_the_report_groups_by_rule_and_stays_short() -> None:
    assert report([]) == ["--trace: no file access was refused"]
    lines = [f'1 openat(AT_FDCWD, "/usr/f{i}", O_WRONLY|O_CREAT, 0666) = -1 EROFS (Read-only file system)' for i in range(30)]
    lines.insert(1, '1 openat(AT_FDCWD, "/h/.ssh/k", O_RDONLY) = -1 EACCES (Permission denied)')
    text = report(denials(lines, WALLS, WRITABLE, "/p", ORIGIN), dropped=5)
    assert text == [
        "--trace: 31 file accesses refused (the trace was cut after 5 lines more):",
        f"  create 30 paths (EROFS): outside allow_write in {ORIGIN}: everything else is read-only (e.g. /usr/f0, /usr/f1, ...)",
        "  read /h/.ssh/k (EACCES): hidden by deny_read ~/.ssh (/h/.ssh)",
    ]
    many = [f'1 mkdir("/h/.ssh/d{i}", 0777) = -1 EACCES (x)' for i in range(2)]
    many += [f'1 {call}("/usr/x{i}", 0) = -1 EROFS (x)' for i, call in enumerate(["unlink", "rmdir", "chmod", "mkdir", "truncate"] * 3)]
    text = report(denials(many, WALLS, WRITABLE, "/p", ORIGIN))
    assert len(text) <= 13


def test_a_line_ends_with_its_fix_and_the_report_with_learn_when_one_exists() -> None:
    line = '1 openat(AT_FDCWD, "/usr/f", O_WRONLY|O_CREAT, 0666) = -1 EROFS (Read-only file system)'
    found = denials([line], WALLS, WRITABLE, "/p", ORIGIN)
    assert found[0].wall == "outside_write" and found[0].to_data()["wall"] == "outside_write"
    text = report(found, fixes={"/usr/f": 'to allow it, add "/usr/x" to [filesystem] allow_write'})
    assert text[1].endswith('; to allow it, add "/usr/x" to [filesystem] allow_write') and "stockade learn" in text[-1]
    assert "stockade learn" not in " ".join(report(found, fixes={"/usr/f": "a secret, never allowed: ..."}))


@pytest.mark.parametrize(
    ("rule", "wall"),
    [("hidden by deny_read ~/.ssh (/h/.ssh)", "deny_read"), ("hidden by floor: stockade's own state (/s)", "floor"),
     ("read-only by deny_write /p/dist", "deny_write"), ("read-only by floor: .git/hooks runs code later (git) (/p/.git/hooks)", "floor"),
     ("outside allow_write in p.toml: everything else is read-only", "outside_write"), ("the private home (...)", "private_home"),
     ("the seccomp filter: no setuid or setgid bits", "seccomp"), ("the file's own permissions (...)", "permissions"),
     ("read-only", "read_only")],
)  # fmt: skip
def test_each_rule_sentence_has_its_kind_of_wall(rule: str, wall: str) -> None:
    assert wall_of(rule) == wall


def test_no_walls_stored_still_reports_without_a_traceback() -> None:
    line = '9 openat(AT_FDCWD, "/usr/f", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EROFS (Read-only file system)'
    assert len(denials([line], None, [], "/", "x")) == 1


def test_a_short_call_padded_by_strace_is_read() -> None:
    """strace pads a short call's `= -1` out to column 40: `mkdir("/etc/qq", 0777)      = -1 EROFS`."""
    line = '12 mkdir("/etc/qq", 0777)                = -1 EROFS (Read-only file system)'
    failure = parse_line(line)
    assert failure is not None and (failure.path, failure.operation, failure.error) == ("/etc/qq", "create", "EROFS")
    assert parse_line('12 rmdir("/etc/ssh")     = -1 EROFS (Read-only file system)') is not None
    assert parse_line('12 mkdir("/etc/qq", 0777) x = -1 EROFS (x)') is None  # control: only spaces may pad
