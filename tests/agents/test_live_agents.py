"""The real Claude Code, Codex and Gemini CLIs, with stockade's hook, against fake model servers.

Each test installs the hook the way a user does (`stockade install AGENT
--user` and nothing else), runs the agent non-interactively in a fresh HOME
with a loopback-only network namespace (harness.py), and lets a fake model
(models.py) ask for one shell command. What the test checks happens on the
host: where the command's writes landed, whether a secret was read, what the
tool result the model got back says. Each security check has its control: the
same agent and command without the hook reaches what the hook keeps it from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agents import install as agents_install
from tests.sandboxed import require_sandbox
from tests.visible import VISIBLE_BASE, force_rmtree

HERE = Path(__file__).resolve().parent
MCP_SERVER = HERE.parent / "e2e" / "mcp" / "server.py"

STOCKADE = Path(sys.executable).with_name("stockade")
WORK = VISIBLE_BASE / "agents"
SECRET = "live-agent-secret-3f9c1e"
PROMPT = "run the command the test asks for"
AGENTS = ["claude", "codex", "gemini"]


def _programs() -> dict[str, Path]:
    require_sandbox()
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed to give each agent a loopback-only network")
    try:
        return {name: agents_install.ensure(agent) for name, agent in agents_install.AGENTS.items()}
    except (agents_install.InstallError, OSError, subprocess.SubprocessError) as error:
        if os.environ.get("STOCKADE_MUST_SANDBOX") == "1":
            pytest.fail(f"cannot install the agent CLIs from npm: {error}")
        pytest.skip(f"cannot install the agent CLIs from npm: {error}")


@pytest.fixture(scope="module")
def programs() -> dict[str, Path]:
    return _programs()


@dataclass
class Outcome:
    """What one agent run did."""

    code: int
    stdout: str
    stderr: str
    tool_results: list[str]
    requests: list[str]
    asked: int

    @property
    def tool_result(self) -> str:
        assert self.asked == 1, f"the model never handed out the tool call:\n{self.stderr[-3000:]}\n{self.stdout[-2000:]}"
        assert len(self.tool_results) == 1, f"no tool result came back:\n{self.stderr[-3000:]}\n{self.stdout[-2000:]}"
        return self.tool_results[0]


@dataclass
class Desk:
    """A fresh home, project and outside folder for one agent, all on the host's visible disk."""

    agent: str
    program: Path
    root: Path
    home: Path = field(init=False)
    project: Path = field(init=False)
    outside: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home, self.project, self.outside = self.root / "home", self.root / "project", self.root / "outside"
        for folder in (self.home, self.project, self.outside):
            folder.mkdir(parents=True)
        (self.home / ".ssh").mkdir(mode=0o700)
        (self.home / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
        (self.home / ".gitconfig").write_text("[user]\n\tname = Live Test\n\temail = live@example.test\n")
        subprocess.run(["git", "init", "-q", str(self.project)], check=True, env=self.env())
        if self.agent == "gemini":  # an API key (no login flow) and no folder-trust prompt
            self.merge_settings(
                ".gemini/settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}}
            )

    def env(self, **extra: str) -> dict[str, str]:
        path = f"{self.program.parent}:{STOCKADE.parent}:/usr/local/bin:/usr/bin:/bin"
        return {"HOME": str(self.home), "PATH": path, "LANG": "C.UTF-8", **extra}

    def merge_settings(self, relative: str, data: dict[str, Any]) -> None:
        path = self.home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        current = json.loads(path.read_text()) if path.exists() else {}
        current.update(data)
        path.write_text(json.dumps(current, indent=2) + "\n")

    def install_hook(self, *options: str, stockade: Path = STOCKADE) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(stockade), "install", self.agent, "--user", *options], cwd=self.project, env=self.env(), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def add_mcp_server(self) -> None:
        """The test's stdio MCP server (tests/e2e/mcp/server.py) in the agent's own user config, as `claude mcp add` and the like write it."""
        server = self.root / "mcp-server.py"  # where a sandbox sees it (never /var/tmp or /tmp)
        shutil.copyfile(MCP_SERVER, server)
        command, args = "/usr/bin/python3", [str(server)]
        if self.agent == "claude":
            self.merge_settings(".claude.json", {"mcpServers": {"probe": {"type": "stdio", "command": command, "args": args, "env": {}}}})
        elif self.agent == "gemini":
            self.merge_settings(".gemini/settings.json", {"mcpServers": {"probe": {"command": command, "args": args, "trust": True}}})
        else:
            config = self.home / ".codex" / "config.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            with config.open("a") as handle:
                handle.write(f"\n[mcp_servers.probe]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")

    def run(
        self, command: str, *, codex_sandbox: str = "danger-full-access", timeout: int = 120, mcp: tuple[str, dict[str, str]] | None = None
    ) -> Outcome:
        spec = {"command": command, "cwd": str(self.project), "argv": self._argv(codex_sandbox), "env": self._agent_env(), "timeout": timeout}
        if mcp is not None:
            spec.update(mcp_tool=mcp[0], mcp_arguments=mcp[1])
        spec_path, result_path = self.root / "spec.json", self.root / "result.json"
        spec_path.write_text(json.dumps(spec))
        result_path.unlink(missing_ok=True)
        # Loopback only. As root a network namespace is enough; another user needs a user namespace
        # for it, mapping only itself, with the capabilities to bring loopback up (harness.py).
        unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-current-user", "--keep-caps", "--net"]
        done = subprocess.run(
            [*unshare, sys.executable, str(HERE / "harness.py"), str(result_path), str(spec_path)],
            capture_output=True,
            text=True,
            timeout=timeout + 60,
        )
        assert done.returncode == 0 and result_path.exists(), f"the harness failed: {done.stdout}{done.stderr}"
        return Outcome(**json.loads(result_path.read_text()))

    def _argv(self, codex_sandbox: str) -> list[str]:
        program = str(self.program)
        if self.agent == "claude":
            return [program, "-p", PROMPT, "--output-format", "json", "--allowedTools", "Bash,mcp__probe"]
        if self.agent == "codex":
            sandbox = ["--dangerously-bypass-approvals-and-sandbox"] if codex_sandbox == "danger-full-access" else ["--sandbox", codex_sandbox]
            provider = 'model_providers.fake={name="fake",base_url="{url}/v1",wire_api="responses",env_key="FAKE_API_KEY"}'
            return [
                program,
                "exec",
                "--skip-git-repo-check",
                *sandbox,
                "-c",
                'model="test-model"',
                "-c",
                'model_provider="fake"',
                "-c",
                provider,
                PROMPT,
            ]
        return [program, "-p", PROMPT, "--yolo", "-m", "gemini-2.5-pro", "--output-format", "json"]

    def _agent_env(self) -> dict[str, str]:
        if self.agent == "claude":
            return self.env(
                ANTHROPIC_BASE_URL="{url}",
                ANTHROPIC_API_KEY="sk-live-test",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_AUTOUPDATER="1",
                ENABLE_TOOL_SEARCH="false",  # every MCP tool offered at once, not behind a search
            )
        if self.agent == "codex":
            return self.env(FAKE_API_KEY="sk-live-test")
        return self.env(GEMINI_API_KEY="live-test", GOOGLE_GEMINI_BASE_URL="{url}", GEMINI_CLI_NO_RELAUNCH="true")


@pytest.fixture
def desk_for(programs: dict[str, Path]):
    made: list[Path] = []

    def make(agent: str) -> Desk:
        root = WORK / f"{agent}-{uuid.uuid4().hex[:8]}"
        made.append(root)
        return Desk(agent, programs[agent], root)

    yield make
    for root in made:
        force_rmtree(root)


def _exit_status_shown(agent: str, text: str, status: int) -> bool:
    shown = {"claude": f"Exit code {status}", "codex": f"exited with code {status}", "gemini": f"Exit Code: {status}"}[agent]
    return shown in text


ESCAPE = "echo tool-ran; cat ~/.ssh/id_ed25519; touch {outside}/written-outside; touch written-inside; exit 3"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_hooked_command_runs_sandboxed_and_its_result_comes_back(desk_for, agent: str) -> None:
    desk = desk_for(agent)
    said = desk.install_hook()
    if agent == "codex":
        assert "Codex trusts the hook now" in said.stdout, said.stdout
    outcome = desk.run(ESCAPE.format(outside=desk.outside))
    result = outcome.tool_result
    assert "tool-ran" in result, result
    assert SECRET not in result, result
    assert not (desk.outside / "written-outside").exists(), "a write outside the project reached the host"
    assert (desk.project / "written-inside").exists(), "the write inside the project did not land"
    assert _exit_status_shown(agent, result, 3), result
    assert "Traceback" not in result


@pytest.mark.parametrize("agent", AGENTS)
def test_control_without_the_hook_the_same_command_escapes(desk_for, agent: str) -> None:
    desk = desk_for(agent)
    outcome = desk.run(ESCAPE.format(outside=desk.outside))
    result = outcome.tool_result
    assert SECRET in result, result
    assert (desk.outside / "written-outside").exists()
    assert _exit_status_shown(agent, result, 3), result


def _write_rule(desk: Desk, decision: str, command: str) -> None:
    """The agent's own rule, in its own format, giving `decision` for `command`."""
    if desk.agent == "claude":
        desk.merge_settings(".claude/settings.json", {"permissions": {decision: [f"Bash({command})"]}})
    elif desk.agent == "codex":
        rules = desk.home / ".codex" / "rules"
        rules.mkdir(parents=True, exist_ok=True)
        (rules / "default.rules").write_text(f"prefix_rule(pattern={json.dumps(command.split())}, decision={json.dumps(decision)})\n")
    else:
        policies = desk.home / ".gemini" / "policies"
        policies.mkdir(parents=True, exist_ok=True)
        (policies / "mine.toml").write_text(
            f'[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = {json.dumps(command)}\ndecision = {json.dumps(decision)}\npriority = 100\n'
        )


RULES = [("claude", "deny"), ("claude", "ask"), ("codex", "forbidden"), ("codex", "prompt"), ("gemini", "deny"), ("gemini", "ask_user")]


@pytest.mark.parametrize(("agent", "decision"), RULES, ids=[f"{a}-{d}" for a, d in RULES])
def test_the_agents_own_deny_and_ask_rules_still_stop_the_command(desk_for, agent: str, decision: str) -> None:
    """Each agent checks its rules against the command it finally runs, which after the hook is
    `stockade run ...`; without stockade applying them, every rule stopped applying."""
    desk = desk_for(agent)
    desk.install_hook()
    _write_rule(desk, decision, "touch ruled-marker")
    outcome = desk.run("true && touch ruled-marker")
    assert not (desk.project / "ruled-marker").exists(), f"a command the user's {decision} rule names ran: {outcome.tool_results}"
    control = desk_for(agent)
    control.install_hook()
    _write_rule(control, decision, "touch other-marker")
    control.run("true && touch ruled-marker")
    assert (control.project / "ruled-marker").exists(), "control: a command no rule names did not run"


def test_codex_keeps_trusting_the_hook_after_it_changes(desk_for) -> None:
    desk = desk_for("codex")
    desk.install_hook()
    said = desk.install_hook("--max-output", "4M")
    assert "Codex trusts the hook now" in said.stdout, said.stdout
    desk.run(f"touch {desk.outside}/written-outside")
    assert not (desk.outside / "written-outside").exists(), "the changed hook was skipped: the command ran unwrapped"


def test_under_codexs_own_sandbox_the_tool_result_has_one_line_not_a_traceback(desk_for) -> None:
    desk = desk_for("codex")
    desk.install_hook()
    result = desk.run("echo tool-ran", codex_sandbox="workspace-write").tool_result
    assert "Traceback" not in result, result
    assert "stockade:" in result, result


@pytest.mark.parametrize("agent", AGENTS)
def test_the_tool_result_says_the_policy_refused_the_network(desk_for, agent: str) -> None:
    desk = desk_for(agent)
    desk.install_hook()
    fetch = "python3 -c \"import urllib.request; urllib.request.urlopen('http://example.com/', timeout=5)\""
    result = desk.run(fetch).tool_result
    assert "network, which is off in this sandbox" in result, result
    assert "[network] allow" in result, result


@pytest.mark.parametrize("agent", AGENTS)
def test_a_hook_whose_stockade_is_gone_blocks_the_command(desk_for, agent: str) -> None:
    """The hook names a stockade that was since removed: the agent must not run the command unwrapped."""
    desk = desk_for(agent)
    moved = desk.root / "bin" / "stockade"
    moved.parent.mkdir()
    shutil.copy2(STOCKADE, moved)  # a console script: its first line names the venv's Python
    desk.install_hook(stockade=moved)
    moved.unlink()
    outcome = desk.run(f"touch {desk.outside}/written-outside")
    assert not (desk.outside / "written-outside").exists(), f"the command ran unwrapped: {outcome.tool_results}"
    assert "the stockade hook could not run (exit 127)" in outcome.tool_result, outcome.tool_result


def test_doctor_reports_a_codex_hook_codex_does_not_trust(desk_for) -> None:
    desk = desk_for("codex")
    desk.install_hook()
    doctor = [str(STOCKADE), "doctor"]  # wide, so no detail is wrapped
    desk_env = desk.env(COLUMNS="400")
    trusted = subprocess.run(doctor, cwd=desk.project, env=desk_env, capture_output=True, text=True, timeout=120)
    assert "codex hook trust" in trusted.stdout and "trusted" in trusted.stdout and "skips it" not in trusted.stdout, trusted.stdout
    hooks = desk.home / ".codex" / "hooks.json"
    hooks.write_text(hooks.read_text().replace(" hook codex ", " hook codex --max-output 2048 "))  # a hand edit changes the hash
    changed = subprocess.run(doctor, cwd=desk.project, env=desk_env, capture_output=True, text=True, timeout=120)
    assert "Codex reports the hook modified, so it skips it" in changed.stdout, changed.stdout


@pytest.mark.parametrize("agent", AGENTS)
def test_an_mcp_server_the_agent_starts_runs_in_a_sandbox_of_its_own(desk_for, agent: str) -> None:
    desk = desk_for(agent)
    desk.add_mcp_server()
    (desk.project / "notes.txt").write_text("project notes\n")
    secret = {"path": str(desk.home / ".ssh" / "id_ed25519")}
    control = desk.run("", mcp=("read", secret))
    assert SECRET in control.tool_result, control.tool_result  # unwrapped, the server reads the key: what wrapping stops
    said = desk.install_hook()
    assert "MCP server probe now runs sandboxed" in said.stdout, said.stdout
    read = desk.run("", mcp=("read", secret)).tool_result
    assert SECRET not in read and "refused" in read, read
    planted = desk.outside / "planted.txt"
    wrote = desk.run("", mcp=("write", {"path": str(planted)})).tool_result
    assert "refused" in wrote and not planted.exists(), wrote
    fetched = desk.run("", mcp=("fetch", {"url": "http://127.0.0.1:9/"})).tool_result
    assert "refused" in fetched, fetched
    own = desk.home / ".config" / "stockade" / "mcp"
    own.mkdir(parents=True, exist_ok=True)
    (own / "probe.toml").write_text('extends = ["mcp"]\n[network]\nallow = ["allowed.test"]\n')  # a network, and a host it may not reach
    blocked = desk.run("", mcp=("fetch", {"url": "http://blocked.test/"})).tool_result
    assert "refused" in blocked and "403" in blocked, blocked
    audit = subprocess.run([str(STOCKADE), "audit", "--mcp", "probe", "--json"], env=desk.env(), capture_output=True, text=True, timeout=60)
    records = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    assert any(r["host"] == "blocked.test" and r["decision"] == "deny" for r in records), audit.stdout + audit.stderr
    allowed = desk.run("", mcp=("read", {"path": str(desk.project / "notes.txt")})).tool_result
    assert "read: project notes" in allowed, allowed  # the control: what the server may do still works, through the agent
