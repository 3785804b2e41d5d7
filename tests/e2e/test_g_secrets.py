"""ESCAPES.md section G (secrets and environment), Linux.

Case 80 here checks that direct connections fail; its proxy-side half (names resolving to inside
addresses) and case 82's proxy records are in tests/e2e/test_b_network.py and tests/proxy.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.e2e.escapes import policy_text, probe, q, start_canary, stop, tcp_listener

# --- case 75 ----------------------------------------------------------------------------------------

SECRET_VARS = [
    pytest.param("AWS_SECRET_ACCESS_KEY", None, id="aws-secret"),
    pytest.param("GITHUB_TOKEN", None, id="github-token"),
    pytest.param("OPENAI_API_KEY", None, id="openai-key"),
    pytest.param("NPM_TOKEN", None, id="npm-token"),
    pytest.param("ANTHROPIC_API_KEY", None, id="anthropic-key"),
    pytest.param("HOMEBREW_GITHUB_API_TOKEN", None, id="homebrew-token"),
    pytest.param("DOCKER_PASSWORD", None, id="docker-password"),
    pytest.param("PGPASSWORD", None, id="pgpassword"),
    pytest.param("MYSQL_PWD", None, id="mysql-pwd"),
    pytest.param("npm_config__authToken", None, id="npm-config-authtoken"),
    pytest.param("github_token", None, id="lowercase-github-token"),
]


@pytest.mark.parametrize(
    ("name", "hole"),
    [pytest.param(*p.values, marks=[pytest.mark.xfail(reason=p.values[1], strict=True)] if p.values[1] else [], id=p.id) for p in SECRET_VARS],
)
def test_case_75_secrets_in_the_inherited_environment(vbox: Box, name: str, hole: str | None) -> None:
    """ESCAPES 75 (V3): a secret variable reaches neither the command's environment nor /proc/*/environ of pid 1."""
    policy = policy_text(extra='[env]\nset = { CI = "1" }\n')
    result = vbox.run(
        "env | grep CANARY; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f | grep -H --label=$f CANARY; done;echo \"CI=${CI:-unset}\"",
        policy=policy,
        env={name: "CANARY-ENV-SECRET"},
    )
    assert "CANARY" not in result.stdout, result
    assert "CI=1" in result.stdout, result  # control: [env] set reaches the command


def test_case_75_agent_socket_variable_is_removed(vbox: Box) -> None:
    """ESCAPES 75: SSH_AUTH_SOCK is not passed in; an ordinary variable is."""
    result = vbox.run(
        'echo "sock=${SSH_AUTH_SOCK:-unset} plain=${PLAIN_SETTING:-unset}"', env={"SSH_AUTH_SOCK": "/tmp/agent.sock", "PLAIN_SETTING": "kept"}
    )
    assert "sock=unset plain=kept" in result.stdout, result


# --- case 77 ----------------------------------------------------------------------------------------


def test_case_77_other_processes_environment_and_arguments(vbox: Box) -> None:
    """ESCAPES 77: a host process's environment (CANARY5) and argv (CANARY6) are invisible from inside."""
    canary = start_canary("stockade-canary-77", env={"SECRETISH": "CANARY5"})
    try:
        assert b"CANARY6" in Path(f"/proc/{canary.pid}/cmdline").read_bytes()  # the host does see it
        result = vbox.run(
            "grep -rs 'CANAR[Y]' /proc/*/environ /proc/*/cmdline; grep -ls 'OWNMAR[K]' /proc/*/environ | sed 's/^/OWN /';"
            "ls -d /proc/[0-9]* | wc -l | sed 's/^/PROCS /'",
            env={"OWNMARK": "1"},
        )
        assert canary.poll() is None
    finally:
        stop(canary)
    assert "CANARY" not in result.stdout, result
    assert "OWN /proc/" in result.stdout, result  # control: the sandbox's own processes are readable
    procs = int(next(line.split()[1] for line in result.stdout.splitlines() if line.startswith("PROCS")))
    assert procs < 10, result


# --- case 78 ----------------------------------------------------------------------------------------

CREDENTIAL_FILES = [
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".config/gh/hosts.yml",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    ".npmrc",
    ".pypirc",
    ".config/gcloud/credentials.db",
    ".azure/accessTokens.json",
    ".password-store/site.gpg",
    ".gnupg/private-keys-v1.d/key.key",
    ".bash_history",
    ".zsh_history",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".local/share/keyrings/login.keyring",
]
PROJECT_SECRETS = [".env", "sub/.env", ".env.local", "deep/er/.env.production"]


@pytest.mark.parametrize(
    ("where", "name"),
    [pytest.param("home", n, id=f"home-{n}") for n in CREDENTIAL_FILES] + [pytest.param("project", n, id=f"project-{n}") for n in PROJECT_SECRETS],
)
def test_case_78_credential_files(vbox: Box, name: str, where: str) -> None:
    """ESCAPES 78: credential files in $H (default deny_read) and .env files in $P are unreadable; README is."""
    base = vbox.project if where == "project" else vbox.home
    target = base / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"CANARY-{name}\n")
    (vbox.project / "README").write_text("CANARY-OK\n")
    result = vbox.run(f"cat {q(str(target))}; grep -rs CANARY {q(str(base))} {q(str(vbox.project))}")
    leaks = [line for line in result.stdout.splitlines() if "CANARY" in line and "CANARY-OK" not in line]
    assert not leaks, leaks
    assert "CANARY-OK" in result.stdout, result  # control
    assert target.read_text() == f"CANARY-{name}\n"


# --- case 79 ----------------------------------------------------------------------------------------

FILL = "printf 'protocol=https\\nhost=github.test\\n\\n' | GIT_TERMINAL_PROMPT=0 git credential fill"


def _git_host(box: Box, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(box.home), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["git", *args], input=stdin, env=env, capture_output=True, text=True, timeout=20)


def test_case_79_git_credential_store_is_no_oracle(vbox: Box) -> None:
    """ESCAPES 79: `git credential fill` inside cannot read ~/.git-credentials through the store helper."""
    (vbox.home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    (vbox.home / ".git-credentials").write_text("https://user:CANARY-GIT-STORE@github.test\n")
    assert "CANARY-GIT-STORE" in _git_host(vbox, "credential", "fill", stdin="protocol=https\nhost=github.test\n\n").stdout  # control
    result = vbox.run(FILL)
    assert "CANARY" not in result.stdout, result


@pytest.fixture
def credential_cache(vbox: Box):
    folder = vbox.home / ".cache" / "git-credential"
    folder.mkdir(parents=True, mode=0o700)  # git refuses a socket folder others can enter
    socket_path = folder / "socket"
    (vbox.home / ".gitconfig").write_text(f"[credential]\n\thelper = cache --timeout=60 --socket={socket_path}\n")
    approved = _git_host(vbox, "credential", "approve", stdin="protocol=https\nhost=github.test\nusername=user\npassword=CANARY-GIT-CACHE\n\n")
    assert approved.returncode == 0, approved
    try:
        yield socket_path
    finally:
        subprocess.run(
            ["git", "credential-cache", "--socket", str(socket_path), "exit"],
            env={"HOME": str(vbox.home), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=10,
        )


def test_case_79_git_credential_cache_daemon_is_no_oracle(vbox: Box, credential_cache: Path) -> None:
    """ESCAPES 79: the host's credential-cache daemon (a Unix socket) does not answer the sandbox."""
    assert "CANARY-GIT-CACHE" in _git_host(vbox, "credential", "fill", stdin="protocol=https\nhost=github.test\n\n").stdout  # control
    result = vbox.run(FILL)
    assert "CANARY" not in result.stdout, result
    assert "CANARY-GIT-CACHE" in _git_host(vbox, "credential", "fill", stdin="protocol=https\nhost=github.test\n\n").stdout  # still cached


# --- case 80 ----------------------------------------------------------------------------------------

CONNECT_PROBE = r"""
import json, socket
out = {}
for host, port in TARGETS:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        out["%s:%d" % (host, port)] = "CONNECTED"
    except OSError as exc:
        out["%s:%d" % (host, port)] = "errno %s" % exc.errno
    finally:
        s.close()
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname(), 2); a, _ = srv.accept(); c.send(b"ok")
out["control-own-loopback"] = a.recv(2).decode()
print("PROBE " + json.dumps(out))
"""


def test_case_80_direct_connections_fail(vbox: Box) -> None:
    """ESCAPES 80 (direct half): metadata, documentation and host-loopback addresses are unreachable; own loopback works."""
    with tcp_listener() as host_service:
        port = host_service.address[1]
        targets = [("169.254.169.254", 80), ("fd00:ec2::254", 80), ("192.0.2.1", 443), ("127.0.0.1", port)]
        seen, _ = probe(vbox, f"TARGETS = {targets!r}\n{CONNECT_PROBE}")
        curl = vbox.run("curl -s -m3 http://169.254.169.254/latest/meta-data/iam/security-credentials/; echo curl=$?")
    assert all(answer.startswith("errno") for key, answer in seen.items() if key != "control-own-loopback"), seen
    assert host_service.connections == 0
    assert seen["control-own-loopback"] == "ok", seen
    assert "curl=0" not in curl.stdout, curl


# --- case 81 ----------------------------------------------------------------------------------------

CI_TOKENS = {
    "ACTIONS_RUNTIME_TOKEN": "CANARY-RT",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARY-OIDC",
    "GITHUB_TOKEN": "CANARY-GH",
    "CI_JOB_TOKEN": "CANARY-GL",
    "SYSTEM_ACCESSTOKEN": "CANARY-AZ",
    "CI_JOB_JWT_V2": "CANARY-JWT",
}


def test_case_81_ci_job_tokens(vbox: Box) -> None:
    """ESCAPES 81: CI job tokens are absent, unless the policy passes one by name."""
    script = "env | grep -E '^(ACTIONS_|GITHUB_TOKEN|CI_JOB_|SYSTEM_ACCESSTOKEN)'; echo ran"
    absent = vbox.run(script, env=CI_TOKENS)
    assert "CANARY" not in absent.stdout and "ran" in absent.stdout, absent
    passed = vbox.run(script, env=CI_TOKENS, policy=policy_text(extra='[env]\npass = ["GITHUB_TOKEN"]\n'))
    assert "GITHUB_TOKEN=CANARY-GH" in passed.stdout, passed  # control: passing by name works
    assert sorted(line.split("=")[0] for line in passed.stdout.splitlines() if "CANARY" in line) == ["GITHUB_TOKEN"], passed


# --- case 82 ----------------------------------------------------------------------------------------


def test_case_82_default_audit_log_is_unreadable(vbox: Box) -> None:
    """ESCAPES 82: the audit log in stockade's state folder cannot be read or rewritten from inside."""
    log = vbox.home / ".local" / "state" / "stockade" / "audit.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"path": "/cb?token=CANARY7"}\n')
    policy = policy_text(allow_write=[vbox.home])
    result = vbox.run(f"cat {q(str(log))}; echo forged >> {q(str(log))} && echo FORGED", policy=policy)
    assert "CANARY7" not in result.stdout and "FORGED" not in result.stdout, result
    assert log.read_text() == '{"path": "/cb?token=CANARY7"}\n'
    control = vbox.run("echo ok > ~/notes.txt", policy=policy)
    assert control.returncode == 0 and (vbox.home / "notes.txt").exists(), control


def test_case_82_configured_audit_log_is_unreadable(vbox: Box) -> None:
    """ESCAPES 82: an audit log configured under [audit] log is unreadable inside too."""
    log = vbox.home / "logs" / "stockade-audit.jsonl"
    log.parent.mkdir()
    log.write_text('{"path": "/cb?token=CANARY7"}\n')
    result = vbox.run(f"cat {q(str(log))}", policy=policy_text(extra=f'[audit]\nlog = "{log}"\n'))
    assert result.returncode != 125, result
    assert "CANARY7" not in result.stdout, result
