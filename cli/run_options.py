"""The options of `stockade run`, as one table both parsers use.

`stockade run` sits in front of every command an agent runs, so it is parsed
by a small hand-written parser (`run_command`) that imports no Typer or Rich;
the Typer `run` command exists for help text. A test checks they agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunOption:
    dest: str
    flags: tuple[str, ...]
    takes_value: bool
    help: str
    metavar: str = ""


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("policy", ("--policy", "-p"), True, "Policy file to use (trusted: you chose it).", "FILE"),
    RunOption("profile", ("--profile",), True, "Built-in profile to use instead of the project policy.", "NAME"),
    RunOption("shell", ("-c",), True, "Run this shell string with /bin/sh -c inside the sandbox.", "STRING"),
    RunOption("dry_run", ("--dry-run",), False, "Print the exact sandbox plan and exit without running."),
    RunOption("quiet", ("--quiet", "-q"), False, "No end-of-run summary of what was blocked."),
    RunOption("platform", ("--platform",), True, "Plan for this platform (linux or darwin); with --dry-run only.", "NAME"),
    RunOption("max_output", ("--max-output",), True, "Forward at most this much of the command's output (e.g. 1M), then one line saying how much was cut.", "BYTES"),
    RunOption("ci", ("--ci",), False, "CI job mode: a Markdown summary in $GITHUB_STEP_SUMMARY when set, and a one-line result on stderr."),
    RunOption("report", ("--report",), True, "Write a JSON report of the run (exit status, duration, hosts, denials) to FILE.", "FILE"),
)

BY_FLAG: dict[str, RunOption] = {flag: option for option in RUN_OPTIONS for flag in option.flags}
