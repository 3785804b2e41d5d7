"""The asking side of approvals: put each held request of a session to the user, and send the answer.

A run with a terminal starts one `Asker` thread while its command runs
(bwrap/running/execute.py); `stockade approve` (cli/approve.py) uses the same
pieces from another terminal. Both talk to the daemon over its control socket
(proxy/filter/approvals.py holds the question); nothing here is reachable from the
sandbox. "always" is the daemon's "run", and the daemon hands it to the run
when its session ends, which adds the entry to the policy file it used the
way `stockade allow` does (profiles/editing.py), once its sandbox ended: a
policy file changed while the sandbox ran is moved aside by the checks after
it, as one the sandbox planted would be.

The terminal is /dev/tty, opened for each question. While the question is
open the run stops its sandbox and takes the terminal (`Holder`), so nothing
the command writes draws over the question and no key goes to the command;
the prompt counts down the seconds left, and an answer that does not come in
time leaves the refusal standing. A run in the background does not take the
terminal: it shows the question with the `stockade approve` line that answers
it.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from stockade.proxy.control import DaemonFiles


class Holder(Protocol):
    """What the run offers while a question is open (bwrap/foreground.py Hold): its sandbox stopped
    and its terminal taken, so the question stays on screen and the answer is the user's."""

    def hold(self, tty_fd: int) -> bool: ...

    def release(self, tty_fd: int, interrupt: bool = False) -> None: ...


POLL = 5  # seconds one `questions` request waits for news
# Plain, visible text on a fresh line, whatever the command left the terminal in, and nothing of the
# command's below it: the scroll region reset (inside a cursor save and restore, as resetting it homes
# the cursor), colours and the character set reset (a line-drawing set garbles letters), insert mode
# off, wrapping on, the cursor shown, the screen below erased (a question the command drew ahead, to
# stand below stockade's, goes with it). The command is stopped while the question is open.
RESET = "\x1b7\x1b[r\x1b8\r\x1b[0m\x1b(B\x0f\x1b[4l\x1b[?7h\x1b[?25h\x1b[J\n"
CHOICES = {"o": "once", "once": "once", "r": "run", "run": "run", "a": "always", "always": "always"}


def question_text(question: dict[str, Any], seconds: int | None = None) -> list[str]:
    """The two lines that put a question: what wants which host, and the choices (with
    `seconds` left, else the question's own)."""
    import shlex

    from stockade.profiles.text import shown

    words = [str(word) for word in question.get("command") or []]
    command = words[2] if len(words) == 3 and words[1] == "-c" and words[0].endswith("sh") else shlex.join(words)
    if len(command) > 120:
        command = command[:117] + "..."
    origin = question.get("origin") or "the policy"
    return [
        shown(f"stockade: `{command}` wants {question.get('host')}:{question.get('port')}, which {origin} does not allow."),
        shown(
            f"stockade: allow {question.get('rule')}? [o]nce, for this [r]un, [a]lways (adds it to the policy), [N]o "
            f"({question.get('seconds_left') if seconds is None else seconds} s): "
        ),
    ]


def choice(text: str) -> str:
    """A typed answer as once, run, always or deny (anything else, and nothing, is deny)."""
    return CHOICES.get(text.strip().lower(), "deny")


def send_answer(files: DaemonFiles, question: dict[str, Any], answer: str) -> str:
    """Tell the daemon; returns the line to show ("" for none). "always" is written into the policy
    by the run itself when its session ends (the daemon hands it over), not here."""
    from stockade.proxy.client.launch import connect, exchange

    conn = connect(files)
    try:
        reply = exchange(conn, {"op": "answer", "id": str(question.get("id")), "answer": answer})
    finally:
        conn.close()
    if not reply.get("ok"):
        return f"stockade: {reply.get('error')}"
    if answer == "always":
        return f"stockade: {question.get('rule')} is allowed for this run; the run adds it to its policy when it ends"
    return ""


def always(question: dict[str, Any], env: dict[str, str]) -> str:
    """Add the question's rule to the policy file the run used (the project's for a built-in)."""
    from stockade.core.errors import StockadeError
    from stockade.core.locations import locate
    from stockade.profiles.discovery import policy_to_edit
    from stockade.profiles.editing import allow_host

    origin = str(question.get("origin") or "")
    cwd = Path(str(question.get("cwd") or os.getcwd()))
    extends = None
    if origin.startswith("builtin:") or not origin:
        target = policy_to_edit(cwd)
        name = origin.removeprefix("builtin:")
        extends = name if name and name != "default" else None
    else:
        target = Path(origin)
    try:
        return allow_host(str(question.get("rule")), target, locate(env), extends)
    except StockadeError as error:
        return f"stockade: the host is allowed for this run, but not written: {error}"


def _foreground(fd: int) -> bool:
    """Whether this process's group is the terminal's foreground group (else reading it stops us)."""
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False


KEYS_DENY = "\x04"  # Ctrl-D: no
INTERRUPT = "interrupt"  # Ctrl-C: no, and the Ctrl-C goes on to the command, as it would without the question
KEYS_ERASE = "\x7f\x08"


def _answer(fd: int, question: dict[str, Any], stopped: threading.Event) -> str | None:
    """Put the question, and read the answer key by key, redrawing the prompt with the seconds
    left once a second; None when the time runs out or the run ends first.

    "always" writes the host into the policy for good, so it is taken only once the host's name
    is typed: a command that drew a question of its own ahead of stockade's (naming a host the
    user trusts) cannot have "always" given to the host it really asked for. Anything else typed
    there allows the host for this run only."""
    import time

    seconds = float(question.get("seconds_left") or 0)
    deadline = time.monotonic() + max(seconds, 0.0)
    said, _asked = question_text(question)
    saved = _key_mode(fd)  # the command may have left the terminal raw, or its text invisible
    try:
        os.write(fd, (RESET + said + "\n").encode("utf-8", "replace"))
        keys: list[str] = []  # typed ahead of the prompt that takes them
        typed = _typed_line(fd, deadline, stopped, lambda left: question_text(question, seconds=left)[1], 16, keys)
        if typed is None or typed in ("deny", INTERRUPT):
            return typed
        answer = choice(typed[1:])
        if answer != "always":
            return answer
        from stockade.profiles.text import shown

        host = str(question.get("host") or "")

        def confirm(left: int) -> str:
            return shown(f"stockade: to add {host} to the policy for good, type its name (anything else: this run only) ({left} s): ")

        name = _typed_line(fd, deadline, stopped, confirm, 255, keys)
        if name is None or name in ("deny", INTERRUPT):
            return name
        if name[1:].strip().lower().rstrip(".") == host.lower().rstrip(".") and host:
            return "always"
        os.write(fd, f"stockade: not the name asked for: {shown(host)} is allowed for this run only\n".encode("utf-8", "replace"))
        return "run"
    finally:
        _restore(fd, saved)


def _typed_line(fd: int, deadline: float, stopped: threading.Event, prompt: Callable[[int], str], limit: int, keys: list[str]) -> str | None:
    """One line typed at `prompt` (redrawn with the seconds left once a second): ":" + the text,
    "deny" (Ctrl-D), INTERRUPT (Ctrl-C), or None when the time runs out or the run ends first.
    `keys`: typed ahead (keys typed fast arrive together), taken first; what follows the line stays."""
    import time

    typed = ""
    while True:
        left = deadline - time.monotonic()
        os.write(fd, ("\r\x1b[2K" + prompt(max(int(left + 0.999), 0)) + typed).encode("utf-8", "replace"))
        if left <= 0 or stopped.is_set():
            os.write(fd, b"\nstockade: no answer: refused\n")
            return None
        if not keys:
            ready, _w, _x = select.select([fd], [], [], min(1.0, left))
            if not ready:
                continue
            keys += list(os.read(fd, 256).decode("utf-8", "replace") or "\x04")
        while keys:
            key = keys.pop(0)
            if key == "\x03":
                os.write(fd, b"^C\n")
                return INTERRUPT
            if key in KEYS_DENY:
                os.write(fd, b"\n")
                return "deny"
            if key in "\r\n":
                os.write(fd, b"\n")
                return ":" + typed
            if key in KEYS_ERASE:
                typed = typed[:-1]
            elif key == "\x15":  # Ctrl-U
                typed = ""
            elif key.isprintable() and len(typed) < limit:
                typed += key


def _key_mode(fd: int) -> list[Any] | None:
    """Keys one at a time, no echo (the prompt draws what was typed), no signals from Ctrl-C or
    Ctrl-Z (a key here, not a signal to the run), and keys typed before the question thrown away
    (typed for the command, they are no answer); returns the settings to put back, None when not
    a terminal."""
    import termios

    try:
        saved = termios.tcgetattr(fd)
        wanted = termios.tcgetattr(fd)
        wanted[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)  # lflags
        wanted[6][termios.VMIN] = 1
        wanted[6][termios.VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, wanted)
        termios.tcflush(fd, termios.TCIFLUSH)
    except (termios.error, OSError):
        return None
    return saved


def _restore(fd: int, saved: list[Any] | None) -> None:
    if saved is None:
        return
    import termios

    try:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
    except (termios.error, OSError):
        pass


def start_asking(files: Callable[[], DaemonFiles], session_id: str, env: Mapping[str, str], holder: Holder | None = None) -> Asker | None:
    """The thread that asks for the requests the daemon holds for this run: at its terminal, or,
    without one, as desktop notifications where there is a desktop (notify-send); None when neither
    (then `stockade approve` answers from another terminal). Both backends start it; `files` finds
    the daemon's files only when something will ask."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC))
    except OSError:
        import shutil

        desktop = env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")
        notifier = shutil.which("notify-send", path=env.get("PATH")) if desktop else None
        return Asker(files(), session_id, tty=None, notifier=notifier).start() if notifier else None
    return Asker(files(), session_id, holder=holder).start()


class Asker:
    """A thread that asks at the terminal for each question of one session, until `stop`."""

    def __init__(
        self, files: DaemonFiles, session_id: str, tty: str | None = "/dev/tty", notifier: str | None = None, holder: Holder | None = None
    ) -> None:
        self.files = files
        self.holder = holder
        self.session_id = session_id
        self.tty = tty  # None: no terminal; each question is a desktop notification (`notifier`) saying how to answer
        self.notifier = notifier
        self._stopped = threading.Event()
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="stockade-asker", daemon=True)

    def start(self) -> Asker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        conn = self._conn
        if conn is not None:
            try:
                conn.shutdown(2)  # wakes the waiting `questions` request
            except OSError:
                pass
        self._thread.join(timeout=2)

    def _run(self) -> None:
        from stockade.proxy.client.launch import connect, exchange

        known: list[str] = []
        while not self._stopped.is_set():
            try:  # the first run of a daemon starts it while this thread starts: try until it answers
                self._conn = connect(self.files, timeout=POLL + 10)
            except OSError:
                self._stopped.wait(0.2)
                continue
            try:
                while not self._stopped.is_set():
                    reply = exchange(self._conn, {"op": "questions", "session_id": self.session_id, "known": known[-64:], "wait": POLL})
                    for question in reply.get("questions") or []:
                        if self._stopped.is_set() or not isinstance(question, dict):
                            return
                        known.append(str(question.get("id")))
                        if self.tty is None:
                            self._notify(question)
                            continue
                        answer = self._ask(question)
                        if answer is not None:
                            said = send_answer(self.files, question, answer)
                            if said:
                                self._write(said + "\n")
            except (OSError, ValueError):
                self._stopped.wait(0.2)  # a daemon that went away: the run ends, or a new one answers
            finally:
                self._conn.close()

    def _notify(self, question: dict[str, Any]) -> None:
        """A desktop notification (notify-send) with the command that answers it from a terminal."""
        if self.notifier is None:
            return
        import subprocess

        said, _asked = question_text(question)
        answer = f"stockade approve {question.get('id')} once|run|always|deny ({question.get('seconds_left')} s)"
        try:
            subprocess.run(
                [self.notifier, "--app-name=stockade", "stockade: a request waits for you", f"{said.removeprefix('stockade: ')}\n{answer}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            pass

    def _ask(self, question: dict[str, Any]) -> str | None:
        """The user's answer, or None when none came in time (the daemon refuses it then)."""
        assert self.tty is not None
        try:
            fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        interrupted = False
        try:
            readable = self.holder.hold(fd) if self.holder is not None else _foreground(fd)
            if not readable:  # in the background: say it, and let `stockade approve` answer
                said, _asked = question_text(question)
                approve = f"stockade: answer with: stockade approve {question.get('id')} once|run|always|deny"
                os.write(fd, (RESET + said + "\n" + approve + "\n").encode("utf-8", "replace"))
                return None
            answer = _answer(fd, question, self._stopped)
            interrupted = answer == INTERRUPT
            return "deny" if interrupted else answer
        except OSError:
            return None
        finally:
            if self.holder is not None:
                self.holder.release(fd, interrupted)
            os.close(fd)

    def _write(self, text: str) -> None:
        if self.tty is None:
            return
        try:
            fd = os.open(self.tty, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)
