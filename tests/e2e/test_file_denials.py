"""`stockade run --trace` (issue 18, part 1): every file access the sandbox refused, with the rule that refused it.

Each kind of wall in a real run, as root and (test.sh) as an unprivileged user: a write to a
read-only place, a read of a hidden path (an unreadable empty folder inside: EACCES), a create
in a protected place (the floor's `.git/hooks`), the private home that does not show a path;
and the control, a run that was refused nothing, whose report says so.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.e2e.boxes import Box

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="--trace needs strace (apt-get install strace)")

HOST_HOME = 'extends = ["default"]\n[filesystem]\nhome = "host"\n'


def _report(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("stockade:   ")]


def test_the_issue_example_names_both_refusals_and_their_rules(vbox: Box) -> None:
    result = vbox.run("echo x > ~/f; cat ~/.ssh/id_test; exit 3", policy=HOST_HOME, options=["--trace"])
    assert result.returncode == 3, result  # the command's own exit code, traced or not
    report = _report(result.stderr)
    home = vbox.home
    assert f"stockade:   create {home}/f (EROFS): outside allow_write in {vbox.root}/policy.toml: everything else is read-only" in report, (
        result.stderr
    )
    assert f"stockade:   read {home}/.ssh/id_test (EACCES): hidden by deny_read ~/.ssh ({home}/.ssh); a secret, never allowed: " in " ".join(report)
    assert "stockade: --trace: 2 file accesses refused:" in result.stderr
    assert "CANARY" not in result.stdout


def test_each_line_names_the_entry_that_allows_it_and_the_report_carries_them(vbox: Box) -> None:
    config = vbox.home / ".config" / "suite" / "settings.ini"
    config.parent.mkdir(parents=True)
    config.write_text("level=3\n")
    report = vbox.root / "report.json"
    result = vbox.run(f"cat {config}; echo x > {vbox.outside}/out", options=["--trace", "--report", str(report)])
    lines = _report(result.stderr)
    assert any(line.endswith('to allow it, add "~/.config/suite/settings.ini" to [filesystem] allow_read') for line in lines), result.stderr
    assert any(line.endswith(f'to allow it, add "{vbox.outside}" to [filesystem] allow_write') for line in lines), result.stderr
    assert "stockade learn -- COMMAND` proposes every entry" in result.stderr
    files = json.loads(report.read_text())["files"]
    assert {(item["operation"], item["path"], item["wall"]) for item in files} == {
        ("read", str(config), "private_home"),
        ("create", f"{vbox.outside}/out", "outside_write"),
    }, files
    assert {item["fix"] for item in files} == {
        'to allow it, add "~/.config/suite/settings.ini" to [filesystem] allow_read',
        f'to allow it, add "{vbox.outside}" to [filesystem] allow_write',
    }


def test_a_create_in_a_protected_place_names_the_floor_entry(vbox: Box) -> None:
    (vbox.project / ".git" / "hooks").mkdir(parents=True)
    result = vbox.run("echo evil > .git/hooks/pre-commit", options=["--trace"])
    assert result.returncode != 0, result
    hooks = vbox.project / ".git" / "hooks"
    expected = f"stockade:   create {hooks}/pre-commit (EROFS): read-only by floor: .git/hooks runs code later (git) ({hooks})"
    assert expected in _report(result.stderr), result.stderr
    assert not (hooks / "pre-commit").exists()


def test_a_write_to_a_deny_write_place_names_the_entry(vbox: Box) -> None:
    (vbox.project / "dist").mkdir()
    result = vbox.run("echo x > dist/out", policy=f'extends = ["default"]\n[filesystem]\ndeny_write = ["{vbox.project}/dist"]\n', options=["--trace"])
    report = _report(result.stderr)
    assert any(f"create {vbox.project}/dist/out (EROFS): read-only by deny_write {vbox.project}/dist" in line for line in report), result.stderr


def test_a_read_in_the_private_home_names_home_private(vbox: Box) -> None:
    result = vbox.run("cat ~/.aws/credentials", options=["--trace"])
    assert result.returncode != 0 and "CANARY" not in result.stdout, result
    report = _report(result.stderr)
    assert any(f"read {vbox.home}/.aws/credentials (ENOENT): the private home" in line for line in report), result.stderr


def test_a_run_that_was_refused_nothing_reports_nothing(vbox: Box) -> None:
    result = vbox.run("echo ok > kept.txt && cat kept.txt && ls /nonexistent 2>/dev/null; true", options=["--trace"])
    assert result.returncode == 0 and result.stdout == "ok\n", result
    assert _report(result.stderr) == [], result.stderr
    assert "stockade: --trace: no file access was refused" in result.stderr


def test_without_trace_nothing_is_traced(vbox: Box) -> None:
    result = vbox.run("echo x > ~/f", policy=HOST_HOME)
    assert "--trace" not in result.stderr and "Read-only file system" in result.stderr, result


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a static binary")
def test_a_static_binary_is_traced_too(vbox: Box) -> None:
    """ptrace sees syscalls, not libc: a statically linked program's refusal is reported (an LD_PRELOAD shim would miss it)."""
    import subprocess

    source = vbox.outside / "w.c"
    source.write_text('#include <fcntl.h>\nint main(void) { return open("/usr/stockade-static", O_WRONLY | O_CREAT, 0644) < 0; }\n')
    binary = vbox.outside / "w"
    subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(source)], check=True, capture_output=True)
    result = vbox.run(argv=[str(binary)], options=["--trace"])
    assert result.returncode == 1, result
    assert any("create /usr/stockade-static (EROFS): outside allow_write" in line for line in _report(result.stderr)), result.stderr
