"""`stockade explain`: the explanation's data, its table rows in plain words, the JSON form, and exit 2 on bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stockade.cli.explain import explanation
from stockade.cli.main import main
from stockade.core.errors import ExitCode
from stockade.core.locations import Locations
from stockade.profiles.floor import floor_summary
from stockade.profiles.model import EnvRules, FilesystemRules, NetworkMode, NetworkRules, Policy
from stockade.profiles.serialize import policy_to_dict


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """One table row a line: rich wraps at COLUMNS."""
    monkeypatch.setenv("COLUMNS", "4000")


def rows(out: str) -> dict[str, str]:
    """The table's `what` -> `rule` cells."""
    found = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if len(cells) == 2 and line.startswith("│"):
            found[cells[0]] = cells[1]
    return found


def explained(project: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[str, dict[str, str]]:
    (project / "p.toml").write_text("extends = []\n" + text)
    code, out, err = run_cli(capsys, "explain", "--policy", "p.toml")
    assert code == 0 and err == "", err
    return out, rows(out)


# -- explanation(): the data both forms print ---------------------------------------------------


def test_explanation_holds_the_policy_the_floor_and_what_is_withheld(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
    monkeypatch.setenv("MY_TOKEN_X", "t")
    monkeypatch.setenv("PLAIN_VALUE_FOR_TEST", "p")
    policy = Policy(filesystem=FilesystemRules(allow_write=(str(project),)), env=EnvRules(deny=("MY_*",)), project_dir=project)
    data = explanation(policy)
    assert set(data) == {"policy", "floor", "env_withheld", "syscalls_refused"}
    assert data["policy"] == policy_to_dict(policy)
    assert data["floor"]["rules"] == floor_summary()
    assert str(project / ".git/hooks") in data["floor"]["read_only"]
    assert "AWS_SECRET_ACCESS_KEY" in data["env_withheld"] and "MY_TOKEN_X" in data["env_withheld"]
    assert "PLAIN_VALUE_FOR_TEST" not in data["env_withheld"]
    assert data["env_withheld"] == sorted(data["env_withheld"])


def test_nothing_writable_means_no_read_only_carve_outs(project: Path) -> None:
    assert explanation(Policy(project_dir=project))["floor"]["read_only"] == []


@pytest.mark.skipif(sys.platform != "linux", reason="the seccomp filter is Linux's")
def test_the_syscall_refusals_follow_unix_datagram(project: Path) -> None:
    closed = explanation(Policy(project_dir=project))["syscalls_refused"]
    opened = explanation(Policy(network=NetworkRules(unix_datagram=True), project_dir=project))["syscalls_refused"]
    assert any(line.startswith("io_uring_setup") for line in closed) and any(line.startswith("io_uring_setup") for line in opened)
    assert any(line.startswith("socket(AF_UNIX)") for line in closed)
    assert not any(line.startswith("socket(AF_UNIX)") for line in opened)


def test_off_linux_no_syscalls_are_listed(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert explanation(Policy(project_dir=project))["syscalls_refused"] == []


# -- the text form -----------------------------------------------------------------------------


def test_the_default_policy_in_words(project: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, err = run_cli(capsys, "explain")
    assert code == 0 and err == ""
    assert out.splitlines()[0] == "Policy: builtin:default"
    table = rows(out)
    assert table["writable"] == ". (the project)"
    assert table["writable, not there yet"] == "-"
    assert table["read-only inside writable places"].startswith("./.git/hooks, ")
    assert "~/.ssh" in table["unreadable"].split(", ") and "./**/.env" in table["unreadable"].split(", ")
    assert table["home"].startswith("its own, empty and writable, gone after the run; shows read-only the project, the PATH's folders and ~/")
    assert table["everything else"] == "readable, not writable"
    assert table["network"] == "off: no connection can leave the sandbox"
    assert table["unix sockets"] == "none of the host's (the sandbox may make stream sockets of its own)"
    assert table["environment set"] == "-"
    assert table["limits"] == "none set"
    assert "Always, whatever the policy says:" in out
    assert all(f"  - {line}" in out for line in floor_summary())


def test_explain_prints_literal_user_data(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    policy = project / "p.toml"
    policy.write_text('[filesystem]\nallow_write = ["./[red]x[/red]"]\n')
    code, out, _ = run_cli(capsys, "explain", "--policy", str(policy))
    assert code == 0 and "[red]x[/red]" in out and "Always, whatever the policy says" in out


def test_a_policy_from_nothing_gets_its_notes_and_bare_rows(project: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    out, table = explained(project, capsys, "")
    assert out.splitlines()[0] == f"Policy: {project / 'p.toml'}"
    notes = [line for line in out.splitlines() if line.startswith("Note: ")]
    assert len(notes) == 3 and "is read-only" in notes[0] and "remove `extends = []`" in notes[2]
    assert table["writable"] == "nothing but a private /tmp"
    assert table["read-only inside writable places"] == "-"
    assert table["home"] == "its own, empty and writable, gone after the run; shows read-only the project, the PATH's folders"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param('[network]\nmode = "none"\n', "off: no connection can leave the sandbox", id="none"),
        pytest.param('[network]\nmode = "open"\n', "open to any public host through the audited proxy", id="open"),
        pytest.param('[network]\nmode = "open"\ndeny = ["evil.test", "10.0.0.0/8"]\n',
                     "open to any public host through the audited proxy, except evil.test, 10.0.0.0/8", id="open-with-deny"),
        pytest.param('[network]\nmode = "allowlist"\n', "allowlist with nothing on it: every connection is refused", id="empty-allowlist"),
        pytest.param('[network]\nallow = ["pypi.org:443", "*.example.test"]\n',
                     "only pypi.org:443, *.example.test through the audited proxy", id="allowlist"),
        pytest.param('[network]\nallow = ["*.example.test"]\ndeny = ["bad.example.test"]\n',
                     "only *.example.test through the audited proxy; never bad.example.test", id="allowlist-with-deny"),
    ],
)  # fmt: skip
def test_network_in_words(project: Path, capsys: pytest.CaptureFixture[str], wide: None, text: str, words: str) -> None:
    assert explained(project, capsys, text)[1]["network"] == words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("", "none set", id="none"),
        pytest.param('[limits]\nmemory = "2G"\n', "memory 2G", id="memory"),
        pytest.param("[limits]\npids = 64\n", "64 processes", id="pids"),
        pytest.param('[limits]\nwall_time = "90s"\n', "wall time 90s", id="wall-time"),
        pytest.param('[limits]\nmemory = "512M"\npids = 10\nwall_time = "1h"\nfile_size = "1G"\ntmp_size = "64M"\n',
                     "memory 512M, 10 processes, wall time 1h, file size 1G, /tmp 64M", id="all-in-order"),
    ],
)  # fmt: skip
def test_limits_in_words(project: Path, capsys: pytest.CaptureFixture[str], wide: None, text: str, words: str) -> None:
    assert explained(project, capsys, text)[1]["limits"] == words


def test_paths_are_written_as_a_person_would(project: Path, home: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    (project / "build").mkdir()
    (home / "cache").mkdir()
    text = f'[filesystem]\nallow_write = [".", "./build", "~/cache", "/tmp", "{project}x"]\ndeny_read = ["~/.ssh", "/etc/shadow"]\n'
    table = explained(project, capsys, text)[1]
    assert table["writable"].split(", ") == [". (the project)", "./build", "~/cache", "/tmp", f"{project}x"]
    assert table["unreadable"].startswith("~/.ssh, /etc/shadow")


def test_write_places_not_there_yet_say_what_a_run_does(project: Path, home: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    outside = project.parent / "elsewhere" / "new"  # the project itself is outside this test's home too
    text = f'[filesystem]\nallow_write = [".", "~/.cache/tool", "{outside}", "./made-later"]\n'
    table = explained(project, capsys, text)[1]
    assert table["writable, not there yet"] == (
        f"~/.cache/tool (made, 0700, before the run), {outside} (outside your home: skipped), ./made-later (outside your home: skipped)"
    )


def test_a_missing_place_in_a_project_under_home_is_made(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, wide: None
) -> None:
    inside = home / "proj"
    inside.mkdir()
    monkeypatch.chdir(inside)
    table = explained(inside, capsys, '[filesystem]\nallow_write = [".", "./out"]\n')[1]
    assert table["writable, not there yet"] == "./out (made, 0700, before the run)"


def test_home_sockets_and_environment_rows(project: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    text = (
        '[filesystem]\nhome = "host"\n'
        '[network]\nunix_sockets = ["/run/docker.sock", "~/.ssh-agent.sock"]\n'
        '[env]\nset = { ZED = "1", ALPHA = "a b" }\n'
    )
    table = explained(project, capsys, text)[1]
    assert table["home"] == "the real one, read-only outside writable places"
    assert table["unix sockets"] == "/run/docker.sock, ~/.ssh-agent.sock"
    assert table["environment set"] == "ALPHA=a b, ZED=1"


def test_a_private_home_lists_what_it_shows(project: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    table = explained(project, capsys, '[filesystem]\nallow_read = ["~/.gitconfig", "~/.local/bin"]\n')[1]
    assert table["home"].endswith("the PATH's folders and ~/.gitconfig, ~/.local/bin")


def test_withheld_variables_are_listed(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, wide: None) -> None:
    monkeypatch.setenv("MY_TOKEN_X", "t")
    table = explained(project, capsys, '[env]\ndeny = ["MY_*"]\n')[1]
    assert "MY_TOKEN_X" in table["environment withheld"].split(", ")


def test_an_untrusted_project_file_is_marked_and_noted(project: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    policy = project / ".stockade.toml"
    policy.write_text('[network]\nallow = ["pypi.org"]\n')
    code, out, err = run_cli(capsys, "explain")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"Policy: {policy} (untrusted: narrowing only)"
    assert lines[1].startswith(f"stockade: {policy} is not trusted, so it can only narrow your own policy")
    assert rows(out)["network"] == "off: no connection can leave the sandbox"
    assert run_cli(capsys, "trust")[0] == 0
    code, out, _ = run_cli(capsys, "explain")
    assert out.splitlines()[0] == f"Policy: {policy}"
    assert rows(out)["network"] == "only pypi.org through the audited proxy"


# -- JSON ----------------------------------------------------------------------------------------


def test_explain_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "explain", "--json", "--profile", "agent")
    data = json.loads(out)
    assert code == 0 and "api.anthropic.com:443" in data["policy"]["network"]["allow"]
    assert any(path.endswith("/.git/hooks") for path in data["floor"]["read_only"])
    if sys.platform == "linux":
        assert any(line.startswith("io_uring_setup") for line in data["syscalls_refused"])


def test_json_says_trust_and_what_was_ignored(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".stockade.toml").write_text('[network]\nallow = ["pypi.org"]\n')
    code, out, err = run_cli(capsys, "explain", "--json")
    data = json.loads(out)
    assert code == 0 and err == ""
    assert set(data) == {"policy", "floor", "env_withheld", "syscalls_refused", "tool_config", "trusted", "ignored", "baseline"}
    assert data["trusted"] is False and data["ignored"] == ['network mode "allowlist" (yours is "none")']
    assert data["policy"]["network"]["mode"] == NetworkMode.NONE.value
    code, out, _ = run_cli(capsys, "explain", "--json", "--profile", "offline")
    assert json.loads(out)["trusted"] is True and json.loads(out)["ignored"] == []


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--policy", "missing.toml"], "missing.toml: policy file not found", id="missing-file"),
        pytest.param(["--policy", "p.toml", "--profile", "offline"], "give either --policy or --profile, not both", id="file-and-profile"),
        pytest.param(["--profile", "nope"], "no built-in profile named 'nope'", id="bad-profile"),
        pytest.param(["--policy", "bad.toml"], "bad.toml:1: unknown key 'nope'", id="bad-key"),
    ],
)
def test_usage_errors_exit_2_with_one_line(project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    (project / "p.toml").write_text("")
    (project / "bad.toml").write_text("nope = 1\n")
    code, out, err = run_cli(capsys, "explain", *args)
    assert code == ExitCode.USAGE == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("stockade: error: ") and message in err, err


def test_the_untrusted_note_stays_one_line_when_piped(project: Path, locations: Locations, capsys: pytest.CaptureFixture[str]) -> None:
    """Its last words are a command to paste; wrapped at 80 columns, the path fell onto a line of its own."""
    from stockade.cli.main import main

    (project / ".stockade.toml").write_text('[network]\nallow = ["pypi.org"]\n')
    assert main(["explain"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "is not trusted" in line)
    assert line.endswith(f"stockade trust {project / '.stockade.toml'}"), line


def test_http_rules_decrypted_hosts_credentials_and_ssh_each_get_a_row(project: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    text = (
        '[network]\nallow = ["api.test", "git.test:22", "web.test:443"]\n'
        '[network.http."api.test"]\nallow = ["GET /repos/**"]\ndeny = ["* /admin/**"]\n'
        '[credentials.TOK]\nenv = "X"\nhosts = ["api.test"]\n'
    )
    _out, table = explained(project, capsys, text)
    assert table["HTTP requests judged"] == "api.test: allow GET /repos/**; deny * /admin/**"
    assert table["TLS decrypted by the daemon"].startswith("api.test (with your own CA")
    assert table["credential TOK"] == (
        'read outside at each run (env = "X"); inside, a placeholder; the value is sent only to api.test, in the Authorization header'
    )
    assert table["ssh (raw TCP)"].startswith("git.test:22: SSH only")  # not web.test:443, never raw TCP
    _out, plain = explained(project, capsys, '[network]\nallow = ["pypi.org"]\n')
    assert not any(key in plain for key in ("HTTP requests judged", "TLS decrypted by the daemon", "ssh (raw TCP)"))  # control
