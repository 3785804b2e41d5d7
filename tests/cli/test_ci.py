"""The CI job wrapper: step summary, JSON report, tokens withheld, runner channels read-only (ESCAPES 67, 81)."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from stockade.bwrap.plan.mounts import plan_view
from stockade.bwrap.plan.planner import ci_channels
from stockade.cli import ci
from stockade.core.errors import SandboxSetupError, StockadeError
from stockade.core.invocation import Invocation, RunResult
from stockade.core.locations import Locations
from stockade.profiles.envfilter import sandbox_env
from stockade.profiles.model import AuditRules, EnvRules, FilesystemRules, NetworkMode, NetworkRules, Policy
from tests.cli.integration_support import World

RUNNER_SECRETS = {
    "ACTIONS_RUNTIME_TOKEN": "CANARY-RUNTIME",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARY-OIDC",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example/CANARY-URL",
    "ACTIONS_CACHE_URL": "https://cache.example/CANARY-CACHE",
    "ACTIONS_RESULTS_URL": "https://results.example/CANARY-RESULTS",
    "GITHUB_TOKEN": "CANARY-GH",
    "CI_JOB_TOKEN": "CANARY-GL",
    "CI_JOB_JWT_V2": "CANARY-JWT",
    "CI_REPOSITORY_URL": "https://gitlab-ci-token:CANARY-GLURL@gitlab.example/group/repo.git",
    "CI_REGISTRY_PASSWORD": "CANARY-REG",
    "SYSTEM_ACCESSTOKEN": "CANARY-AZ",
}

RECORDS = [
    {"session": "s1", "host": "pypi.org", "port": 443, "decision": "allow", "rule": 'allow "pypi.org"', "bytes_up": 100, "bytes_down": 2000},
    {"session": "s1", "host": "evil.test", "port": 443, "decision": "deny", "rule": "no allow rule matches", "hint": 'allow = ["evil.test"]'},
    {"session": "s1", "host": "pypi.org", "port": 443, "decision": "allow", "rule": 'allow "pypi.org"', "bytes_up": 50, "bytes_down": 3000},
    {"session": "s1", "host": "evil.test", "port": 443, "decision": "deny", "rule": "no allow rule matches", "hint": 'allow = ["evil.test"]'},
    {"session": "s1", "host": "uploads.github.com", "port": 443, "decision": "deny", "rule": 'deny "uploads.github.com"', "hint": ""},
    {"session": "other", "host": "elsewhere.test", "port": 80, "decision": "allow", "rule": "x", "bytes_up": 1, "bytes_down": 1},
]


def _locations(root: Path) -> Locations:
    return Locations(home=root, config=root / "config", state=root / "state", cache=root / "cache", runtime=root / "run")


def _request(root: Path, *, env: dict[str, str] | None = None, session: str = "s1") -> Invocation:
    return Invocation(["/bin/sh", "-c", "pip install -r requirements.txt"], str(root), env or {}, session_id=session, want_findings=True)


def _result(root: Path, *, status: int = 0, network: bool = True, want_findings: bool = False) -> RunResult:
    """A run's result as the backend returns it: its policy and locations read."""
    result = RunResult(want_findings)
    result.status = status
    result.policy = Policy(
        network=NetworkRules(mode=NetworkMode.ALLOWLIST if network else NetworkMode.NONE, allow=("pypi.org",)),
        audit=AuditRules(log=str(root / "audit.jsonl")),
        origin=str(root / ".stockade.toml"),
    )
    result.locations = _locations(root)
    return result


def _write_audit(root: Path) -> None:
    (root / "audit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS) + "not json\n")


# -- report and summary, field by field -------------------------------------------------------------


def test_tally_adds_up_hosts_and_groups_denials() -> None:
    hosts, denials = ci.tally(r for r in RECORDS if r["session"] == "s1")
    assert [(h.host, h.port, h.requests, h.allowed, h.denied, h.bytes_up, h.bytes_down) for h in hosts] == [
        ("pypi.org", 443, 2, 2, 0, 150, 5000),
        ("evil.test", 443, 2, 0, 2, 0, 0),
        ("uploads.github.com", 443, 1, 0, 1, 0, 0),
    ]
    assert [(d.host, d.port, d.rule, d.hint, d.count) for d in denials] == [
        ("evil.test", 443, "no allow rule matches", 'allow = ["evil.test"]', 2),
        ("uploads.github.com", 443, 'deny "uploads.github.com"', "", 1),
    ]


def test_a_run_s_file_and_limit_findings_are_no_host_contacted() -> None:
    findings = [
        {"session": "s1", "kind": "moved", "decision": "deny", "rule": "r", "path": "/p/.envrc", "moved_to": "/p/.envrc.q"},
        {"session": "s1", "kind": "limit", "decision": "deny", "rule": "r", "limit": "pids"},
    ]
    assert ci.tally(r for r in RECORDS if r["session"] == "s1") == ci.tally([*(r for r in RECORDS if r["session"] == "s1"), *findings])


def test_the_sandboxs_own_refusals_are_in_the_report_and_the_summary(tmp_path: Path) -> None:
    _write_audit(tmp_path)
    summary, report = tmp_path / "step_summary.md", tmp_path / "report.json"
    request = _request(tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)})
    refused = {"path": "/home/u/.ssh/id_rsa", "operation": "read", "errno": "EACCES", "rule": "hidden by deny_read ~/.ssh", "wall": "deny_read"}
    moved = {"path": "/p/.git/hooks/pre-commit", "moved_to": "/p/.git/hooks/pre-commit.stockade-x"}

    def execute() -> RunResult:
        result = _result(tmp_path, want_findings=request.want_findings)
        assert result.findings == {}  # asked for (run_command.invocation_of), filled by the backend
        result.findings.update(files=[refused], limits=["pids"], moved=[moved])
        return result

    assert ci.run_ci(request, execute, report=str(report), announce=False) == 0
    data = json.loads(report.read_text())
    assert data["files_traced"] is True and data["files"] == [refused] and data["limits"] == ["pids"] and data["moved"] == [moved]
    text = summary.read_text()
    assert "#### File accesses refused (1)" in text and "<code>/home/u/.ssh/id_rsa</code>" in text
    assert "**limit reached:** pids" in text and "**moved aside:** <code>/p/.git/hooks/pre-commit</code>" in text


def test_run_ci_writes_the_summary_and_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_audit(tmp_path)
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    report = tmp_path / "out" / "report.json"
    request = _request(tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)})
    code = ci.run_ci(request, lambda: _result(tmp_path, status=3), report=str(report), announce=True)
    assert code == 3
    data = json.loads(report.read_text())
    assert data["version"] == 3
    assert data["files_traced"] is False and data["files"] == [] and data["limits"] == [] and data["moved"] == []
    assert data["command"] == ["/bin/sh", "-c", "pip install -r requirements.txt"]
    assert data["cwd"] == str(tmp_path) and data["session"] == "s1"
    assert data["policy"] == str(tmp_path / ".stockade.toml") and data["network"] == "allowlist"
    assert data["audit_log"] == str(tmp_path / "audit.jsonl")
    assert data["exit_status"] == 3 and data["error"] is None and data["notes"] == []
    assert 0 <= data["duration_seconds"] < 5
    assert data["started"].endswith("Z") and data["finished"] >= data["started"]
    assert data["hosts"][0] == {"host": "pypi.org", "port": 443, "requests": 2, "allowed": 2, "denied": 0, "bytes_up": 150, "bytes_down": 5000}
    assert data["denials"] == [
        {"host": "evil.test", "port": 443, "rule": "no allow rule matches", "hint": 'allow = ["evil.test"]', "count": 2},
        {"host": "uploads.github.com", "port": 443, "rule": 'deny "uploads.github.com"', "hint": "", "count": 1},
    ]
    text = summary.read_text()
    assert text.startswith("earlier step\n### stockade: failed (exit 3, ")
    assert "```\npip install -r requirements.txt\n```" in text
    assert "| exit status | 3 |" in text
    assert f"| policy | <code>{tmp_path}/.stockade.toml</code> |" in text
    assert "| <code>pypi.org</code> | 443 | 2 | 2 | 0 | 150 | 5,000 |" in text
    assert "#### Denied (3)" in text
    assert (
        f"| <code>evil.test</code> | 443 | 2 | no allow rule matches | <code>stockade allow evil.test --policy {tmp_path / '.stockade.toml'}</code> |"
        in text
    )
    assert "| <code>uploads.github.com</code> | 443 | 1 | deny &quot;uploads.github.com&quot; | no policy change allows this |" in text
    err = capsys.readouterr().err
    assert "stockade: ci: exit 3 after" in err and "3 hosts contacted, 3 requests denied" in err and "summary appended to $GITHUB_STEP_SUMMARY" in err


@pytest.mark.parametrize("command_status, job_status", [(0, 125), (3, 3)])
def test_an_incomplete_audit_fails_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str], command_status: int, job_status: int) -> None:
    _write_audit(tmp_path)
    summary = tmp_path / "step_summary.md"
    request = _request(tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)})
    trouble = "the audit log could not be written (No space left on device): every request after that was refused"

    def execute() -> RunResult:
        result = _result(tmp_path, status=command_status)
        result.troubles.append(trouble)  # what the backend adds when the daemon reports it
        return result

    assert ci.run_ci(request, execute, report=None, announce=True) == job_status
    assert f"the command exited {command_status}, but {trouble}; the job fails" in capsys.readouterr().err
    assert "**the job fails:**" in summary.read_text()
    # The control: the same run with a whole record keeps the command's status.
    clean = _request(tmp_path, session="s2")
    assert ci.run_ci(clean, lambda: _result(tmp_path, status=command_status), report=None, announce=False) == command_status


def test_hostile_names_cannot_shape_the_summary(tmp_path: Path) -> None:
    result = ci.CiReport(
        command=["/bin/sh", "-c", "echo ```\n# heading\n<img src=x onerror=alert(1)>"], cwd="/p", session="s", policy="p|<b>", network="allowlist",
        audit_log="/a", exit_status=0, duration_seconds=1.0, started="t", finished="t",
        hosts=[ci.HostTally("a|b<script>`x`\n| injected |", 443, 1, 0, 1)],
        denials=[ci.Denial("a|b<script>", 443, "rule *bold* [link](x)", 'allow = ["a|b"]')],
    )  # fmt: skip
    text = ci.markdown(result)
    fenced = "````\necho ```\n# heading\n<img src=x onerror=alert(1)>\n````\n"
    assert fenced in text  # a code block whose fence is longer than any run of backticks inside: shown literally
    outside = text.replace(fenced, "")
    assert "<script>" not in outside and "<img" not in outside and "<b>" not in outside
    rows = [line for line in text.splitlines() if "a&#124;b" in line]
    assert [len(re.findall(r"(?<!\\)\|", line)) for line in rows] == [8, 6]  # 7 and 5 columns: no cell was split
    assert all("injected" not in line or "&#124; injected &#124;" in line for line in rows)
    assert "rule \\*bold\\* \\[link\\](x)" in text


@pytest.mark.parametrize("policy_read", [False, True])
def test_a_setup_failure_is_reported_then_raised(tmp_path: Path, policy_read: bool) -> None:
    """A failure before the policy was read reports the failure alone; one after it names the policy (error.partial)."""
    report = tmp_path / "report.json"

    def failing() -> RunResult:
        error = SandboxSetupError("bwrap is not installed")
        if policy_read:
            error.partial = _result(tmp_path, network=False)
        raise error

    with pytest.raises(SandboxSetupError):
        ci.run_ci(_request(tmp_path), failing, report=str(report), announce=False)
    data = json.loads(report.read_text())
    assert data["exit_status"] == 125 and data["error"] == "bwrap is not installed"
    assert data["audit_log"] is None and data["hosts"] == [] and data["denials"] == []
    assert data["policy"] == (str(tmp_path / ".stockade.toml") if policy_read else "(not read)")


def test_the_report_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "report.json").symlink_to(victim)
    ci.write_report(str(tmp_path / "report.json"), ci.CiReport([], "/", "s", "p", "none", None, 0, 0.0, "t", "t"))
    assert victim.read_text() == "keep me\n" and not (tmp_path / "report.json").is_symlink()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(StockadeError, match="is a symlink"):
        ci.write_report(str(tmp_path / "linked" / "r.json"), ci.CiReport([], "/", "s", "p", "none", None, 0, 0.0, "t", "t"))


# -- secrets and channels ---------------------------------------------------------------------------


def test_runner_tokens_never_pass_unless_the_policy_names_them() -> None:
    env = sandbox_env({**RUNNER_SECRETS, "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_ENV": "/r/env"}, EnvRules())
    assert not set(env) & set(RUNNER_SECRETS)
    assert env["GITHUB_ACTIONS"] == "true" and env["CI"] == "true" and env["GITHUB_ENV"] == "/r/env"
    passed = sandbox_env(RUNNER_SECRETS, EnvRules(passthrough=("GITHUB_TOKEN",)))
    assert set(passed) == {"GITHUB_TOKEN"}


def test_ci_channels_are_read_only_unless_granted_by_name(tmp_path: Path) -> None:
    runner = tmp_path / "runner"
    temp = runner / "_temp"
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True)
    files = {name: commands / f"{name.lower()}_x" for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    for path in files.values():
        path.touch()
    project = runner / "work" / "repo"
    project.mkdir(parents=True)
    env = {**{k: str(v) for k, v in files.items()}, "RUNNER_TEMP": str(temp), "GITHUB_STATE": ""}
    policy = Policy(filesystem=FilesystemRules(allow_write=(str(runner),)), project_dir=project)
    channels = ci_channels(env, policy)
    assert set(channels) == {*map(str, files.values()), str(temp)}
    view = plan_view(policy, _locations(tmp_path / "home"), str(project), (), channels)
    assert {str(temp), *map(str, files.values())} <= set(view.read_only)
    granted = Policy(filesystem=FilesystemRules(allow_write=(str(runner), str(files["GITHUB_OUTPUT"]))), project_dir=project)
    assert str(files["GITHUB_OUTPUT"]) not in ci_channels(env, granted)


# -- a GitHub-style run, end to end ------------------------------------------------------------------


@pytest.fixture
def origin() -> Iterator[int]:
    """A loopback HTTP origin that the proxy reaches as allowed.test through the test resolver."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = b"hello from allowed.test\n" * 40
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.sandbox
@pytest.mark.network
def test_github_style_run_publishes_the_summary_with_the_denials(sandbox: None, world: World, origin: int) -> None:
    runner = world.root / "runner"
    temp = runner / "_temp"
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True)
    channels = {
        name: commands / f"{name.lower()}_0f3c" for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")
    }
    for path in channels.values():
        path.touch()
    (temp / "next-step.sh").write_text("echo later step\n")
    resolver = world.root / "names.json"
    resolver.write_text(json.dumps({"names": {"allowed.test": ["127.0.0.1"]}, "upstreams": [f"127.0.0.1:{origin}"]}))
    policy = world.root / "ci-policy.toml"
    policy.write_text(f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{runner}"]\n[network]\nallow = ["allowed.test"]\n')
    report = world.root / "report.json"
    env = {
        **RUNNER_SECRETS,
        "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKFLOW": "ci", "GITHUB_RUN_ID": "42",
        "RUNNER_TEMP": str(temp), **{name: str(path) for name, path in channels.items()},
        "STOCKADE_PROXY_TEST_RESOLVER": str(resolver),
    }  # fmt: skip
    script = (
        "echo 'BASH_ENV=/tmp/x' >> \"$GITHUB_ENV\" || echo env-refused; "
        'echo "$PWD/bin" >> "$GITHUB_PATH" || echo path-refused; '
        "echo 'evil=1' >> \"$GITHUB_OUTPUT\" || echo output-refused; "
        'echo FORGED >> "$GITHUB_STEP_SUMMARY" || echo summary-refused; '
        "echo 'echo owned' > \"$RUNNER_TEMP/next-step.sh\" || echo temp-refused; "
        'touch "$RUNNER_TEMP/new.sh" || echo new-refused; '
        "env | grep -E '^(ACTIONS_|GITHUB_TOKEN|CI_JOB_|CI_REPOSITORY_URL|SYSTEM_ACCESSTOKEN)' || echo no-tokens; "
        f"curl -s -o /dev/null -w 'allowed %{{http_code}}\\n' http://allowed.test:{origin}/; "
        "curl -s -o /dev/null -w 'denied %{http_code}\\n' https://denied.test/ ; "
        "curl -s -o /dev/null http://denied.test/ ; "
        "exit 4"
    )
    result = world.stockade("run", "--ci", "--report", str(report), "--policy", str(policy), "--", "/bin/sh", "-c", script, env=env)
    assert result.returncode == 4, result.stderr
    for word in ("env", "path", "output", "summary", "temp", "new"):
        assert f"{word}-refused" in result.stdout, result.stdout
    assert "no-tokens" in result.stdout and "CANARY" not in result.stdout
    assert "allowed 200" in result.stdout and "denied 000" in result.stdout
    assert channels["GITHUB_ENV"].read_text() == "" and channels["GITHUB_PATH"].read_text() == ""
    assert (temp / "next-step.sh").read_text() == "echo later step\n" and not (temp / "new.sh").exists()

    summary = channels["GITHUB_STEP_SUMMARY"].read_text()
    assert "FORGED" not in summary.splitlines()
    assert summary.startswith("### stockade: failed (exit 4, ")
    assert "| exit status | 4 |" in summary
    assert f"| <code>allowed.test</code> | {origin} | 1 | 1 | 0 |" in summary
    assert "#### Denied (2)" in summary
    assert "| <code>denied.test</code> | 443 | 1 | no allow rule matches | <code>stockade allow denied.test --policy " in summary
    assert "| <code>denied.test</code> | 80 | 1 | no allow rule matches | <code>stockade allow denied.test --policy " in summary

    data = json.loads(report.read_text())
    assert data["exit_status"] == 4 and data["network"] == "allowlist" and data["policy"] == str(policy)
    allowed = next(h for h in data["hosts"] if h["host"] == "allowed.test")
    assert allowed["port"] == origin and allowed["allowed"] == 1 and allowed["bytes_down"] >= 960 and allowed["bytes_up"] > 0
    assert {(d["host"], d["port"], d["hint"]) for d in data["denials"]} == {
        ("denied.test", 443, 'allow = ["denied.test"]'),
        ("denied.test", 80, 'allow = ["denied.test"]'),
    }
    assert "stockade: ci: exit 4 after" in result.stderr and "2 requests denied" in result.stderr
    assert "network: denied denied.test:443" in result.stderr  # the plain run's own summary still speaks


def test_the_summary_says_what_an_untrusted_policy_file_tried_to_widen(tmp_path: Path) -> None:
    """Issue 33: a pull request's widened --policy file only narrows (profiles/citrust.py); the job's summary says so."""
    _write_audit(tmp_path)
    outcome = _result(tmp_path)
    outcome.policy_note = (
        "stockade: /w/.stockade.toml is not trusted as it is here (the pull request changed it), ... ignored: network allow evil.test"
    )
    result = ci.build_report(_request(tmp_path), outcome, 0, 1.0, 0.0, None)
    assert any("ignored: network allow evil.test" in note for note in result.notes)
    assert "evil.test" in ci.markdown(result)


def test_the_resolvers_queries_are_names_not_hosts_contacted() -> None:
    """A query of the sandbox's resolver (proxy/daemon/inside_dns.py) contacted no host: its answers are
    counted by name, its refusals are denials of the name (port 0), its repeats count once."""
    dns = [
        {"session": "s1", "scheme": "dns", "host": "pypi.org", "port": 53, "decision": "allow", "rule": "A: answered 198.18.0.1"},
        {"session": "s1", "scheme": "dns", "host": "pypi.org", "port": 53, "decision": "allow", "rule": "AAAA: no AAAA answer"},
        {
            "session": "s1",
            "scheme": "dns",
            "host": "evil.test",
            "port": 53,
            "decision": "deny",
            "rule": "A: no allow rule matches",
            "hint": 'allow = ["evil.test"]',
        },
        {"session": "s1", "scheme": "dns", "host": "evil.test", "port": 53, "decision": "deny", "rule": "A: no allow rule matches", "repeats": 4},
        {"session": "s1", "scheme": "dns", "host": "*", "port": 53, "decision": "deny", "rule": "3 queries dropped"},
        {"session": "s1", "scheme": "tls", "host": "pypi.org", "port": 443, "decision": "allow", "rule": 'allow "pypi.org"', "bytes_down": 10},
    ]
    hosts, denials = ci.tally(dns)
    assert [(h.host, h.port) for h in hosts] == [("pypi.org", 443)]
    assert [(d.host, d.port, d.count) for d in denials] == [("evil.test", 0, 1)]
    assert ci.names_asked(dns) == (1, 1)
    report = ci.CiReport([], "/", "s1", "p", "allowlist", "/a", 0, 0.0, "t", "t", hosts=hosts, denials=denials, names_answered=1, names_refused=1)
    text = ci.markdown(report)
    assert "Names the sandbox's resolver answered: 1; refused: 1." in text and "| <code>evil.test</code> | its name | 1 |" in text
