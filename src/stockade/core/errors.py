"""One exception root for everything stockade reports to a user.

Every layer raises a subclass; `cli` catches `StockadeError` once, prints
`str(error)` as one line and exits with `error.exit_code`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag costs every run its import; type checkers read this one the same
if TYPE_CHECKING:
    from pathlib import Path


class ExitCode:
    """stockade's own exit codes (the README's first section); a command's own code passes through.

    Plain ints, not an IntEnum: this module is on every run's path and enum
    costs a few milliseconds to import.
    """

    OK = 0
    USAGE = 2  # bad usage or bad policy
    SETUP = 125  # the sandbox could not be set up
    CANNOT_EXECUTE = 126
    NOT_FOUND = 127
    SIGNAL_BASE = 128  # a command killed by signal N gives 128 + N


class StockadeError(Exception):
    """A failure stockade explains to its user in one line."""

    exit_code: int = ExitCode.USAGE
    # a run's result so far (core.invocation.RunResult), when a backend failed after reading the policy;
    # untyped here so that this module, under every other, names none of them
    partial: object = None


class UsageError(StockadeError):
    exit_code = ExitCode.USAGE


class PolicyError(StockadeError):
    """A policy file is wrong; the message names the file and line."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, file: Path | str | None = None, line: int | None = None) -> None:
        self.file = file
        self.line = line
        self.reason = message
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line else f"{file}: "
        super().__init__(f"{where}{message}")


class SandboxSetupError(StockadeError):
    exit_code = ExitCode.SETUP


class CommandNotFoundError(StockadeError):
    exit_code = ExitCode.NOT_FOUND


class CannotExecuteError(StockadeError):
    exit_code = ExitCode.CANNOT_EXECUTE
