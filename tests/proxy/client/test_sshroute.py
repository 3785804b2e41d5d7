"""Tests of sshroute.py: which rules open ssh, which host keys go in, the config, and the ProxyCommand itself."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from stockade.proxy.client import sshroute

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def hashed(name: str, salt: bytes = b"0123456789abcdefghij") -> str:
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def test_raw_tcp_rules_are_those_naming_a_port_other_than_80_and_443() -> None:
    rules = sshroute.raw_tcp_rules(["github.com:22", "pypi.org", "api.test:443", "plain.test:80", "10.0.0.5:2222", "*.corp.test:22"])
    assert [str(rule) for rule in rules] == ["github.com:22", "10.0.0.5:2222", "*.corp.test:22"]


def test_known_hosts_keep_only_the_allowed_hosts() -> None:
    text = "\n".join(
        [
            "# a comment",
            f"github.com,140.82.121.4 {KEY}",
            f"{hashed('github.com')} {KEY} hashed",
            f"{hashed('gitlab.com')} {KEY} hashed-other",
            f"[git.test]:2222 {KEY}",
            f"git.test {KEY} port-22-only",
            f"[10.0.0.5]:2222 {KEY}",
            f"box.corp.test {KEY}",
            f"*.github.com {KEY} pattern",
            f"!github.com,*.com {KEY} negated-first",
            f"private.example {KEY}",
            f"@revoked * {KEY}",
            f"@cert-authority *.corp.test {KEY}",
            f"secret-box.internal,GitHub.com,10.9.8.7 {KEY} shared key",  # other hosts on the allowed host's line
            f"@revoked secret-revoked.internal {KEY}",
            "",
        ]
    )
    rules = sshroute.raw_tcp_rules(["github.com:22", "git.test:2222", "10.0.0.5:2222", "*.corp.test:22"])
    kept = sshroute.known_hosts_for(text, rules).splitlines()
    assert kept == [
        f"github.com {KEY}",  # the line's other names are not the sandbox's business
        f"{hashed('github.com')} {KEY} hashed",
        f"[git.test]:2222 {KEY}",
        f"[10.0.0.5]:2222 {KEY}",
        f"box.corp.test {KEY}",
        f"!github.com,*.com {KEY} negated-first",  # *.com names github.com: ssh reads the negation itself
        f"@revoked * {KEY}",
        f"@cert-authority *.corp.test {KEY}",
        f"GitHub.com {KEY} shared key",
    ]
    assert "secret" not in "".join(kept) and "10.9.8.7" not in "".join(kept)


def test_brackets_in_known_hosts_are_literal() -> None:
    """`[git.test]:2222` is no character class: it must not name g:2222 or t:2222."""
    rules = sshroute.raw_tcp_rules(["g:2222"])
    assert sshroute.known_hosts_for(f"[git.test]:2222 {KEY}\n", rules) == ""


def test_config_sets_the_proxy_command_first_and_carries_the_hosts_own_on() -> None:
    text = sshroute.config_text("/run/stockade/ssh-proxy", "/run/stockade/ssh_known_hosts", "Host *\n    SendEnv LANG\n")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines == [
        "Host *",
        "ProxyCommand /bin/bash /run/stockade/ssh-proxy %h %p",
        "UserKnownHostsFile /run/stockade/ssh_known_hosts",
        "CheckHostIP no",
        "Host *",
        "SendEnv LANG",
    ]
    spaced = sshroute.config_text("/Users/a b/ssh-proxy", "/Users/a b/known")
    assert 'ProxyCommand /bin/bash "/Users/a b/ssh-proxy" %h %p' in spaced and "host's" not in spaced


def test_the_hosts_config_is_copied_with_its_includes_expanded(tmp_path: Path) -> None:
    """ssh checks an included file's owner (root or the user); inside a user namespace root's files are nobody's.
    So the host's config is copied whole, each Include replaced by what it names."""
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "20-b.conf").write_text("Host b\n    User bee\n")
    (tmp_path / "conf.d" / "10-a.conf").write_text("Host a\n    User ay\n")
    (tmp_path / "conf.d" / "notes.txt").write_text("Host never\n")
    (tmp_path / "ssh_config").write_text(f"Include {tmp_path}/conf.d/*.conf\nInclude {tmp_path}/absent\nHost *\n    SendEnv LANG\n")
    text = sshroute.expanded(str(tmp_path / "ssh_config"), readable=lambda path: True)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines == ["Host a", "User ay", "Host b", "User bee", "Host *", "SendEnv LANG"]
    assert sshroute.expanded(str(tmp_path / "none"), readable=lambda path: True) == ""
    # By default only files in the host's /etc/ssh are copied: these are elsewhere.
    assert "Host a" not in sshroute.expanded(str(tmp_path / "ssh_config"))


def test_files_are_made_once_under_names_from_their_content(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(f"github.com {KEY}\nprivate.example {KEY}\n")
    rules = sshroute.raw_tcp_rules(["github.com:22"])
    files = sshroute.ssh_files(str(tmp_path / "cache"), str(home), rules, inside=True, system=None)
    again = sshroute.ssh_files(str(tmp_path / "cache"), str(home), rules, inside=True, system=None)
    assert files.paths() == again.paths()
    assert Path(files.known_hosts).read_text() == f"github.com {KEY}\n"
    assert os.stat(files.script).st_mode & 0o777 == 0o755
    assert "ProxyCommand /bin/bash /run/stockade/ssh-proxy %h %p" in Path(files.config).read_text()
    outside = sshroute.ssh_files(str(tmp_path / "cache"), str(home), rules, inside=False, system=None)
    assert f"ProxyCommand /bin/bash {outside.script} %h %p" in Path(outside.config).read_text()
    none = sshroute.ssh_files(str(tmp_path / "cache"), str(tmp_path / "nobody"), rules, inside=True, system=None)
    assert Path(none.known_hosts).read_text() == ""


# -- the ProxyCommand, against a fake proxy on loopback ----------------------------


class FakeProxy:
    """Reads one CONNECT head; answers `answer` and anything after it in one write; echoes what follows."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.head = b""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            while b"\r\n\r\n" not in self.head:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                self.head += chunk
            connection.sendall(self.answer)
            if b" 200 " in self.answer:
                data = connection.recv(4096)  # one echo, then the server closes
                connection.sendall(data.upper())


def script(tmp_path: Path) -> Path:
    path = tmp_path / "ssh-proxy"
    path.write_text(sshroute.SCRIPT_TEXT)
    return path


def test_the_proxy_command_connects_and_reads_no_byte_past_the_answer(tmp_path: Path) -> None:
    proxy = FakeProxy(b"HTTP/1.1 200 Connection established\r\nX-A: b\r\n\r\nSSH-2.0-server\r\n")
    env = {"PATH": os.environ["PATH"], "HTTPS_PROXY": f"http://stockade:s3cret@127.0.0.1:{proxy.port}"}
    done = subprocess.run(["bash", str(script(tmp_path)), "git.test", "2222"], input=b"ssh-2.0-client\n", env=env, capture_output=True, timeout=10)
    assert done.stdout == b"SSH-2.0-server\r\nSSH-2.0-CLIENT\n", done  # the server's first bytes came with the answer's head
    head = proxy.head.decode()
    assert head.startswith("CONNECT git.test:2222 HTTP/1.1\r\nHost: git.test:2222\r\n")
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'stockade:s3cret').decode()}\r\n" in head


def test_the_proxy_command_brackets_ipv6_and_sends_no_credential_it_has_not(tmp_path: Path) -> None:
    proxy = FakeProxy(b"HTTP/1.1 200 OK\r\n\r\n")
    env = {"PATH": os.environ["PATH"], "HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"}
    subprocess.run(["bash", str(script(tmp_path)), "2001:db8::1", "22"], input=b"", env=env, capture_output=True, timeout=10)
    assert proxy.head.startswith(b"CONNECT [2001:db8::1]:22 HTTP/1.1\r\n") and b"Proxy-Authorization" not in proxy.head


def test_a_refusal_ends_the_proxy_command_with_the_daemons_reason(tmp_path: Path) -> None:
    body = b'stockade: git.test:22 refused: no allow rule matches port 22\nallow = ["git.test:22"]\n'
    proxy = FakeProxy(b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    env = {"PATH": os.environ["PATH"], "HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"}
    done = subprocess.run(["bash", str(script(tmp_path)), "git.test", "22"], input=b"SSH-2.0-x\r\n", env=env, capture_output=True, timeout=10)
    assert done.returncode == 1 and done.stdout == b""
    assert b"the proxy refused git.test:22: HTTP/1.1 403 Forbidden" in done.stderr and b'allow = ["git.test:22"]' in done.stderr


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_the_proxy_command_finds_the_proxy_in_any_variable(tmp_path: Path, variable: str) -> None:
    proxy = FakeProxy(b"HTTP/1.1 200 OK\r\n\r\n")
    env = {"PATH": os.environ["PATH"], variable: f"http://127.0.0.1:{proxy.port}/"}
    done = subprocess.run(["bash", str(script(tmp_path)), "h.test", "22"], input=b"x", env=env, capture_output=True, timeout=10)
    assert done.stdout == b"X" and proxy.head.startswith(b"CONNECT h.test:22 ")


def test_the_policys_own_git_ssh_command_wins() -> None:
    assert sshroute.ssh_environment("/run/stockade/ssh_config") == {
        "GIT_SSH_COMMAND": "ssh -F /run/stockade/ssh_config",
        "STOCKADE_SSH_CONFIG": "/run/stockade/ssh_config",
    }
    assert sshroute.ssh_environment("/a b/c", (("GIT_SSH_COMMAND", "ssh -v"),)) == {"STOCKADE_SSH_CONFIG": "/a b/c"}
    assert sshroute.ssh_environment("/a b/c")["GIT_SSH_COMMAND"] == 'ssh -F "/a b/c"'


@pytest.mark.parametrize(
    "host, port",
    [
        ("evil.test:22 HTTP/1.1\r\nX-Injected: 1\r\n\r\nCONNECT other.test:22", "22"),  # CRLF into the CONNECT line
        ("git.test other.test", "22"),
        ("git.test", "22\r\nX-Injected: 1"),
        ("git.test", ""),
        ("-oProxyCommand=x", "22"),
    ],
)
def test_the_proxy_command_refuses_a_host_or_port_that_would_write_more_than_one_connect(tmp_path: Path, host: str, port: str) -> None:
    proxy = FakeProxy(b"HTTP/1.1 200 OK\r\n\r\n")
    env = {"PATH": os.environ["PATH"], "HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"}
    done = subprocess.run(["bash", str(script(tmp_path)), host, port], input=b"x", env=env, capture_output=True, timeout=10)
    assert done.returncode == 1 and b"stockade ssh-proxy: not a" in done.stderr and proxy.head == b""
    # The control: a plain name and port go through.
    good = subprocess.run(["bash", str(script(tmp_path)), "git.test", "2222"], input=b"x", env=env, capture_output=True, timeout=10)
    assert good.stdout == b"X" and proxy.head.startswith(b"CONNECT git.test:2222 HTTP/1.1\r\n")
