"""The lean `stockade run` parser: options up to the command, values, -c, --platform and --max-output."""

from __future__ import annotations

import pytest

from stockade.cli import run_options
from stockade.cli.run_options import BY_FLAG, RUN_OPTIONS, RunArgs, host_platform, limited, max_output_bytes, parse_run_args
from stockade.core.errors import UsageError


def test_parsed_from_the_option_table() -> None:
    args = parse_run_args(["--max-output", "1M", "--", "yes"])
    assert args.max_output == "1M" and args.command == ["yes"]
    assert max_output_bytes("1M") == 1 << 20 and max_output_bytes("100") == 100
    with pytest.raises(UsageError, match="--max-output 'lots'"):
        max_output_bytes("lots")


@pytest.mark.parametrize(
    ("argv", "command", "field", "value"),
    [
        pytest.param(["--", "ls", "-la"], ["ls", "-la"], "dry_run", False, id="dashdash"),
        pytest.param(["ls", "--help"], ["ls", "--help"], "dry_run", False, id="options-after-command-belong-to-it"),
        pytest.param(["--profile=pypi", "pip"], ["pip"], "profile", "pypi", id="equals-form"),
        pytest.param(
            ["-p", "x.toml", "--dry-run", "--", "--dev-bind", "/", "/"],
            ["--dev-bind", "/", "/"],
            "policy",
            "x.toml",
            id="option-injection-is-the-command",
        ),
        pytest.param(["-q", "-c", "echo hi"], ["/bin/sh", "-c", "echo hi"], "quiet", True, id="shell-string"),
    ],
)
def test_parse_run_args(argv: list[str], command: list[str], field: str, value: object) -> None:
    args = parse_run_args(argv)
    assert args.command == command and getattr(args, field) == value


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus", "x"], "unknown option '--bogus'"),
        (["--profile"], "--profile needs a value"),
        (["-c", "x", "--", "y"], "not both"),
        (["--dry-run=1", "x"], "takes no value"),
        (["--platform", "windows", "--dry-run", "x"], "linux or darwin"),
    ],
)
def test_parse_run_args_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_run_args(argv)


def test_the_table_and_the_args_agree() -> None:
    blank = RunArgs()
    assert [o.dest for o in RUN_OPTIONS if not hasattr(blank, o.dest)] == []
    assert all(getattr(blank, o.dest) is (False if not o.takes_value else None) for o in RUN_OPTIONS)
    assert [o.dest for o in RUN_OPTIONS if o.takes_value and not o.metavar] == []
    assert len(BY_FLAG) == sum(len(o.flags) for o in RUN_OPTIONS)  # no flag twice


def test_every_option_at_once() -> None:
    args = parse_run_args(
        [
            "-p",
            "x.toml",
            "--profile",
            "pypi",
            "--dry-run",
            "-q",
            f"--platform={host_platform()}",
            "--max-output",
            "1K",
            "--ci",
            "--report",
            "r.json",
            "--verbose",
            "make",
        ]
    )
    assert (args.policy, args.profile, args.platform, args.max_output, args.report) == ("x.toml", "pypi", host_platform(), "1K", "r.json")
    assert args.dry_run and args.quiet and args.ci and args.verbose
    assert args.command == ["make"]


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        pytest.param(["-"], ["-"], id="a-lone-dash-is-a-command"),
        pytest.param(["--", "--"], ["--"], id="dashdash-after-dashdash"),
        pytest.param(["--policy", "--", "ls"], ["ls"], id="a-value-may-look-like-dashdash"),
        pytest.param(["--policy=", "ls"], ["ls"], id="empty-inline-value"),
        pytest.param(["-c", "", "--quiet"], ["/bin/sh", "-c", ""], id="empty-shell-string"),
    ],
)
def test_edges(argv: list[str], command: list[str]) -> None:
    assert parse_run_args(argv).command == command


def test_the_last_of_a_repeated_option_wins() -> None:
    assert parse_run_args(["--profile", "a", "--profile=b", "x"]).profile == "b"


def test_short_flags_take_no_inline_value() -> None:
    with pytest.raises(UsageError, match="unknown option '-p=x.toml'"):
        parse_run_args(["-p=x.toml", "ls"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param([], "no command given", id="nothing"),
        pytest.param(["--dry-run"], "no command given", id="options-only"),
        pytest.param(["--"], "no command given", id="empty-after-dashdash"),
        pytest.param(["-x", "ls"], r"unknown option '-x'; put the command after '--' \(stockade run -- -x ls\)", id="unknown-short"),
        pytest.param(["--dryrun", "--", "true"], r"unknown option '--dryrun' \(did you mean --dry-run\?\)$", id="typo-missing-dash"),
        pytest.param(["--quite", "--", "true"], r"\(did you mean --quiet\?\)$", id="typo-swapped-letters"),
        pytest.param(["--polic=x", "--", "true"], r"\(did you mean --policy\?\)$", id="typo-with-value"),
        pytest.param(["--bogus", "--", "ls"], r"unknown option '--bogus'; `stockade run --help` lists the options$", id="dashdash-already-there"),
        pytest.param(["-c"], r"-c needs a value \(STRING\)", id="shell-without-string"),
        pytest.param(["-c", "x", "y"], "not both", id="shell-and-command"),
    ],
)
def test_more_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_run_args(argv)


def test_another_platform_is_for_dry_runs_only() -> None:
    other = "darwin" if host_platform() == "linux" else "linux"
    assert parse_run_args(["--platform", other, "--dry-run", "x"]).platform == other
    with pytest.raises(UsageError, match=f"--platform {other} is for --dry-run inspection only"):
        parse_run_args(["--platform", other, "x"])
    assert parse_run_args(["--platform", host_platform(), "x"]).platform == host_platform()


@pytest.mark.parametrize(("platform", "host"), [("linux", "linux"), ("darwin", "darwin"), ("freebsd14", "linux")])
def test_host_platform(monkeypatch: pytest.MonkeyPatch, platform: str, host: str) -> None:
    monkeypatch.setattr(run_options.sys, "platform", platform)
    assert host_platform() == host


@pytest.mark.parametrize(("value", "size"), [("65536", 65536), ("1K", 1024), ("2m", 2 << 20), ("1.5KiB", 1536)])
def test_max_output_bytes(value: str, size: int) -> None:
    assert max_output_bytes(value) == size


@pytest.mark.parametrize("value", ["0", "", "-1", "1X"])
def test_max_output_bytes_refuses(value: str) -> None:
    with pytest.raises(UsageError, match="run: --max-output"):
        max_output_bytes(value)


def test_limited_without_a_limit_just_runs() -> None:
    assert limited(None, lambda: 7) == 7


def test_limited_refuses_a_bad_limit_before_running() -> None:
    ran: list[bool] = []
    with pytest.raises(UsageError):
        limited("lots", lambda: ran.append(True) or 0)
    assert ran == []
