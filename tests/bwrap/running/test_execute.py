"""execute's pure helpers: the Launch record, finding the command, the args memfd, the summary's lines."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stockade.bwrap.after.sweep import LINK_PIN
from stockade.bwrap.running import execute
from stockade.bwrap.running.execute import Launch
from stockade.core.errors import CannotExecuteError, CommandNotFoundError


def launch(**overrides: object) -> Launch:
    values: dict[str, object] = {name: None for name in Launch.__slots__}
    values.update(
        command=["true"], env={}, project="/p", writable=["/p"], reported={}, swept={}, patterns=((), ()), watch_roots=[],
        unguarded=[], socket_masks=[], notes=[], origin="/p/.stockade.toml", interactive=False, quiet=False,
        allow_unix=False, args=b"",
    )  # fmt: skip
    values.update(overrides)
    return Launch(**values)


def test_launch_needs_every_field_and_no_other() -> None:
    data = launch().to_data()
    with pytest.raises(TypeError, match="missing"):
        Launch(**{k: v for k, v in data.items() if k != "cwd"})
    with pytest.raises(TypeError, match="unknown"):
        Launch(**data, extra=1)
    assert Launch(**data).to_data() == data


def test_launch_watched_is_its_snapshot() -> None:
    snap = launch(reported={"/p/Makefile": (1, 2, 3, 4)}, tree=None).watched
    assert snap.reported == {"/p/Makefile": (1, 2, 3, 4)} and snap.tree is None


def make_program(folder: Path, name: str, mode: int = 0o755) -> Path:
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\n")
    program.chmod(mode)
    return program


def test_resolve_command_walks_the_sandbox_path(tmp_path: Path) -> None:
    make_program(tmp_path / "a", "tool", 0o644)
    found = make_program(tmp_path / "b", "tool")
    env = {"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    assert execute.resolve_command(["tool", "x"], env) == str(found)


def test_resolve_command_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandNotFoundError, match=r"nope: command not found \(PATH=/nowhere\)"):
        execute.resolve_command(["nope"], {"PATH": "/nowhere"})
    with pytest.raises(CommandNotFoundError, match="no such file"):
        execute.resolve_command([str(tmp_path / "missing")], {})
    plain = make_program(tmp_path / "c", "plain", 0o644)
    with pytest.raises(CannotExecuteError, match=r"not executable \(chmod \+x it"):
        execute.resolve_command([str(plain)], {})
    with pytest.raises(CannotExecuteError):
        execute.resolve_command([str(tmp_path)], {})


def test_args_fd_holds_the_words_from_the_start() -> None:
    fd = execute._args_fd(b"--ro-bind\0/\0/\0")
    try:
        assert os.read(fd, 100) == b"--ro-bind\0/\0/\0"
        assert os.get_inheritable(fd) is True  # bwrap reads it after exec
    finally:
        os.close(fd)


def test_environment_clears_then_sets_sorted() -> None:
    words = [w for piece in execute.environment({"B": "2", "A": "1"}) for w in piece.to_args()]
    assert words == ["--clearenv", "--setenv", "A", "1", "--setenv", "B", "2"]


@pytest.mark.parametrize(
    ("writable", "watched"),
    [(["/p"], True), (["/"], True), (["/q", "/p"], True), (["/q"], False), (["/p/sub"], False), (["/pp"], False), ([], False)],
)
def test_project_watch_only_when_writable(writable: list[str], watched: bool) -> None:
    assert execute._watched_roots(launch(project="/p", writable=writable)) == (("/p",) if watched else ())


def test_the_other_writable_places_the_plan_walked_are_watched_too() -> None:
    assert execute._watched_roots(launch(project="/p", writable=["/p", "/q"], watch_roots=["/q"])) == ("/p", "/q")
    assert execute._watched_roots(launch(project="/p", writable=["/q"], watch_roots=["/q"])) == ("/q",)


def test_project_changes_of_an_unwritable_project_are_none() -> None:
    assert execute._project_changes(launch(writable=[]), "s") == ([], [])


def test_put_back_recognises_a_pinned_link(tmp_path: Path) -> None:
    link = tmp_path / ".envrc"
    link.symlink_to("/home/me/envrc")
    assert execute._put_back(str(link), [(str(link), f"{LINK_PIN}/home/me/envrc")]) is True
    assert execute._put_back(str(link), [(str(link), f"{LINK_PIN}/other")]) is False
    assert execute._put_back(str(tmp_path / "nolink"), []) is False


def test_remove_made_mount_points_only_empty_new_files_in_writable_places(tmp_path: Path) -> None:
    made = tmp_path / "w" / "docker.sock"
    made.parent.mkdir()
    made.touch()
    full = tmp_path / "w" / "full.sock"
    full.write_text("x")
    outside = tmp_path / "o.sock"
    outside.touch()
    paths = [str(made), str(full), str(outside), str(tmp_path / "w" / "gone")]
    execute._remove_made_mount_points(paths, [str(tmp_path / "w")], since=0)
    assert not made.exists() and full.exists() and outside.exists()


def test_every_run_gets_a_child_step_for_its_own_mount_namespace() -> None:
    """ESCAPES 96: even a run without limits, network or cache layers enters a private mount namespace."""
    assert callable(execute._preexec(SimpleNamespace(cgroup_procs=[], rlimits=[]), None))  # type: ignore[arg-type]
    assert callable(execute._preexec(SimpleNamespace(cgroup_procs=[], rlimits=[(1, 2)]), None))  # type: ignore[arg-type]
    assert callable(execute._preexec(SimpleNamespace(cgroup_procs=[], rlimits=[]), None, [("/h/c", "/u", "/w", "/m")]))  # type: ignore[arg-type]


def test_no_network_line_for_an_untrusted_file_that_asks_for_hosts_says_trust(tmp_path: Path) -> None:
    policy = tmp_path / ".stockade.toml"
    policy.write_text('[network]\nallow = ["pypi.org"]\n')
    line = execute._no_network_line(launch(origin=str(policy), session_rules=None))
    assert line.endswith(f"read it, then run: stockade trust {policy}") and "add it under" not in line
    policy.write_text("[filesystem]\n")  # control: a file that asks for no host gets the old advice
    line = execute._no_network_line(launch(origin=str(policy), session_rules=None))
    assert f"run: stockade allow HOST --policy {policy} (or add it under [network] allow" in line, line


def test_no_network_line_under_a_builtin_profile_names_the_allow_command() -> None:
    assert "needs, run: stockade allow HOST (or add it under" in execute._no_network_line(launch(origin="builtin:default", session_rules=None))
    line = execute._no_network_line(launch(origin="builtin:offline", session_rules=None))
    assert "run: stockade allow HOST --profile offline (or" in line, line


def test_no_network_line_for_a_file_whose_mode_is_none_names_the_mode_not_trust(tmp_path: Path) -> None:
    """The file `stockade init` writes, with hosts added by hand: trusting it again would change nothing."""
    policy = tmp_path / ".stockade.toml"
    policy.write_text('[network]\nmode = "none"\nallow = ["registry.npmjs.org"]\n')
    line = execute._no_network_line(launch(origin=str(policy), session_rules=None))
    assert 'mode = "none"' in line and 'set mode = "allowlist"' in line and "stockade trust" not in line


def test_no_network_line_for_off_and_for_around_the_proxy() -> None:
    off = execute._no_network_line(launch(origin="builtin:default", session_rules=None))
    assert "network, which is off" in off and 'extends = ["default"]' in off
    around = execute._no_network_line(launch(origin="/p/.stockade.toml", session_rules={}))
    assert "around the proxy" in around and around.endswith("/p/.stockade.toml allows (stockade doctor: interception)")
    ssh = execute._no_network_line(launch(origin="/p/.stockade.toml", session_rules={}, command=["sh", "-c", "git push origin main"]))
    assert 'only to an allow entry that names its port, such as "host:22"' in ssh
    ipv6 = execute._no_network_line(launch(origin="/p/.stockade.toml", session_rules={}), intercepted=True)
    assert "IPv6" in ipv6 and "around the proxy" not in ipv6


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(execute, "say", lines.append)
    return lines


def test_a_quiet_summary_is_empty(said: list[str]) -> None:
    execute._summary(launch(), False, [], [], [], [], 1.0)
    assert said == []


def test_summary_lines(said: list[str]) -> None:
    run = launch(wall_time=2.0, pids=64, notes=["a note"])
    execute._summary(run, True, ["pids", "memory"], [], [], [], 2.04, trouble=["proxy trouble"])
    text = "\n".join(said)
    assert all(line.startswith("stockade: ") for line in said)
    assert "reached after 2.0s" in text and "raise wall_time under [limits] in /p/.stockade.toml" in text
    assert "pids limit 64 reached" in text and "memory limit reached" in text
    assert said[-2:] == ["stockade: a note", "stockade: proxy trouble"]


def test_a_file_size_hit_names_the_limit_and_where_to_raise_it(said: list[str]) -> None:
    execute._summary(launch(file_size=1 << 20), False, ["file_size"], [], [], [], 1.0)
    assert said == [
        "stockade: file_size limit 1M reached: the command was killed writing past it (raise file_size under [limits] in /p/.stockade.toml)"
    ]


def test_a_timeout_without_a_wall_time_says_nothing(said: list[str]) -> None:
    execute._summary(launch(wall_time=None), True, [], [], [], [], 1.0)
    assert said == []


def test_summary_names_files_that_run_later(said: list[str]) -> None:
    execute._summary(launch(), False, [], [], [], [("/p/Makefile", "created")], 1.0)
    assert len(said) == 1 and "Makefile" in said[0] and "review them" in said[0]


def test_execute_refuses_a_missing_command_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("supervised")

    monkeypatch.setattr(execute, "_supervised", never)
    with pytest.raises(CommandNotFoundError):
        execute.execute(launch(command=["no-such-tool-x"], env={"PATH": "/nowhere"}), "s")
