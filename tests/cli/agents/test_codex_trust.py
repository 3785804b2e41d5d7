"""Talking to `codex app-server`: a fake codex script answers JSON-RPC on stdio, stockade lists and trusts its own hooks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from stockade.cli.agents import codex_trust
from stockade.cli.agents.codex_trust import CodexHook, CodexTalkError

FAKE_CODEX = """#!{python}
import json, pathlib, sys
here = pathlib.Path(__file__).parent
scenario = json.loads((here / "scenario.json").read_text())
hooks = scenario["hooks"]
for line in sys.stdin:
    request = json.loads(line)
    with (here / "calls.jsonl").open("a") as log:
        log.write(line)
    method = request["method"]
    if method == scenario.get("exit_at"):
        sys.exit(1)
    if method == scenario.get("silent_at"):
        continue
    print("not json")
    print(json.dumps({{"method": "notification", "params": {{}}}}))
    print(json.dumps([1, 2]))
    answer = {{"jsonrpc": "2.0", "id": request["id"]}}
    if method in scenario.get("refuse", {{}}):
        answer["error"] = {{"message": scenario["refuse"][method]}}
    elif method == "hooks/list":
        answer["result"] = {{"data": [{{"hooks": hooks, "errors": scenario.get("errors", [])}}]}}
    elif method == "config/value/write":
        for key, value in request["params"]["value"].items():
            for hook in hooks:
                if hook["key"] == key and value["trusted_hash"] == hook["currentHash"]:
                    hook["trustStatus"] = "trusted"
        answer["result"] = {{}}
    else:
        answer["result"] = {{}}
    print(json.dumps(answer), flush=True)
"""


def hook(key: str, command: str, source: str, trust: str = "untrusted", kind: str = "command") -> dict[str, Any]:
    return {
        "key": key, "command": command, "sourcePath": source, "currentHash": f"sha256:{key}",
        "trustStatus": trust, "handlerType": kind,
    }  # fmt: skip


class Codex:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "codex"
        self.path.write_text(FAKE_CODEX.format(python=sys.executable))
        self.path.chmod(0o755)
        self.home = root / "home"
        self.home.mkdir()
        self.project = root / "project"
        self.project.mkdir()
        self.settings = self.project / ".codex" / "hooks.json"

    def scenario(self, **scenario: Any) -> None:
        (self.root / "scenario.json").write_text(json.dumps({"hooks": [], **scenario}))

    def calls(self) -> list[dict[str, Any]]:
        log = self.root / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def codex(tmp_path: Path) -> Codex:
    return Codex(tmp_path)


def test_list_hooks_keeps_only_command_hooks(codex: Codex) -> None:
    codex.scenario(hooks=[hook("a", "stockade hook", "/x/hooks.json", "trusted"), hook("b", "", "/x", kind="prompt")])
    found = codex_trust.list_hooks(str(codex.path), codex.home, codex.project)
    assert found == [CodexHook("a", "stockade hook", "/x/hooks.json", "sha256:a", "trusted")]
    calls = codex.calls()
    assert [c["method"] for c in calls] == ["initialize", "hooks/list"]
    assert calls[1]["params"] == {"cwds": [str(codex.project)]}
    assert [c["id"] for c in calls] == [1, 2]


def test_trust_hooks_trusts_only_stockades_untrusted_entries_in_its_file(codex: Codex) -> None:
    mine = str(codex.settings)
    codex.scenario(
        hooks=[
            hook("ours", "stockade hook", mine),
            hook("ours-done", "stockade hook2", mine, "trusted"),
            hook("theirs", "other tool", mine),
            hook("elsewhere", "stockade hook", "/other/hooks.json"),
        ]
    )
    after = codex_trust.trust_hooks(str(codex.path), codex.home, codex.project, {"stockade hook", "stockade hook2"}, codex.settings)
    assert [(h.key, h.trust) for h in after] == [("ours", "trusted"), ("ours-done", "trusted")]
    writes = [c["params"] for c in codex.calls() if c["method"] == "config/value/write"]
    assert writes == [{"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": {"ours": {"trusted_hash": "sha256:ours"}}}]


def test_already_trusted_hooks_write_nothing(codex: Codex) -> None:
    codex.scenario(hooks=[hook("ours", "stockade hook", str(codex.settings), "trusted")])
    after = codex_trust.trust_hooks(str(codex.path), codex.home, codex.project, {"stockade hook"}, codex.settings)
    assert len(after) == 1
    assert "config/value/write" not in [c["method"] for c in codex.calls()]


def test_no_hook_of_ours_listed_is_an_error(codex: Codex) -> None:
    codex.scenario(hooks=[hook("theirs", "other", str(codex.settings))])
    with pytest.raises(CodexTalkError, match="does not list the hook"):
        codex_trust.trust_hooks(str(codex.path), codex.home, codex.project, {"stockade hook"}, codex.settings)


def test_a_config_error_reported_by_codex_is_raised(codex: Codex) -> None:
    codex.scenario(errors=[{"path": "/h/.codex/config.toml", "message": "bad toml"}])
    with pytest.raises(CodexTalkError, match=r"cannot read /h/.codex/config.toml: bad toml"):
        codex_trust.list_hooks(str(codex.path), codex.home, codex.project)


def test_a_refused_method_names_it(codex: Codex) -> None:
    codex.scenario(refuse={"hooks/list": "unknown method"})
    with pytest.raises(CodexTalkError, match="refused hooks/list: unknown method"):
        codex_trust.list_hooks(str(codex.path), codex.home, codex.project)


def test_a_codex_that_exits_ended_early(codex: Codex) -> None:
    codex.scenario(exit_at="initialize")
    with pytest.raises(CodexTalkError, match="ended early"):
        codex_trust.list_hooks(str(codex.path), codex.home, codex.project)


def test_a_silent_codex_times_out(codex: Codex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codex_trust, "TIMEOUT", 0.5)
    codex.scenario(silent_at="hooks/list")
    with pytest.raises(CodexTalkError, match="did not answer"):
        codex_trust.list_hooks(str(codex.path), codex.home, codex.project)


def test_a_missing_codex_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(CodexTalkError, match="cannot start"):
        codex_trust.list_hooks(str(tmp_path / "no-codex"), tmp_path, tmp_path)


def test_the_child_sees_the_given_home(tmp_path: Path) -> None:
    assert codex_trust._env(tmp_path)["HOME"] == str(tmp_path)
