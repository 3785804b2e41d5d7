"""git over smart HTTP through the daemon: clone and fetch pass, a push passes only for the refs `push` lists.

The origin is real `git http-backend` (as CGI behind a small HTTPS server with a
test CA) serving bare repositories; the sandboxed `git` talks to it through the
daemon, which inspects git.test with the rules of the built-in `git` profile.
Every refusal is checked where it matters, in the server's repository, with a
control showing the allowed command works.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from stockade.profiles.loader import load_builtin
from tests.e2e.netfixtures import make_box, state_dir
from tests.netkit import make_certificate, stop_daemon
from tests.visible import force_rmtree, visible_root

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not os.path.exists("/usr/lib/git-core/git-http-backend"), reason="no git http-backend")]

HOST = "git.test"
BACKEND = "/usr/lib/git-core/git-http-backend"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


class GitOrigin(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext, root: Path) -> None:
        self.root = root
        self.seen: list[tuple[str, str, int]] = []  # method, path, body bytes handed to http-backend
        super().__init__(("127.0.0.1", 0), CgiHandler)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class CgiHandler(http.server.BaseHTTPRequestHandler):
    """Runs git http-backend for each request with the CGI environment, passing on whatever body arrived."""

    protocol_version = "HTTP/1.1"
    server: GitOrigin

    def answer(self) -> None:
        path, _, query = self.path.partition("?")
        env = {
            "PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": str(self.server.root), "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query, "REMOTE_USER": "tester",
            "REMOTE_ADDR": "127.0.0.1", "CONTENT_TYPE": self.headers.get("content-type", ""), "GATEWAY_INTERFACE": "CGI/1.1",
        }  # fmt: skip
        if self.headers.get("content-encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["content-encoding"]
        if self.headers.get("git-protocol"):
            env["GIT_PROTOCOL"] = self.headers["git-protocol"]
        body = self.body()
        if "content-length" in self.headers:
            # What arrived, with its own length: a cut body is the backend's EOF, as a streaming CGI
            # server would give it (a larger CONTENT_LENGTH left http-backend spinning on the pipe).
            env["CONTENT_LENGTH"] = str(min(len(body), int(self.headers["content-length"])))
        self.server.seen.append((self.command, path, len(body)))
        # Under coreutils' timeout: a backend left reading a cut body must not outlive the test
        # run (this thread's own timeout dies with the process, leaving it spinning).
        done = subprocess.run(["timeout", "-s", "KILL", "50", BACKEND], input=body, env=env, capture_output=True, timeout=60)
        head, _, out = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = done.stdout.partition(b"\n\n")
        headers = [line.split(":", 1) for line in head.decode("latin-1").splitlines() if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.send_response(status)
        for name, value in headers:
            if name.lower() != "status":
                self.send_header(name, value.strip())
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def body(self) -> bytes:
        """The request body as far as it came (a cut request: what arrived, as a CGI server would pass it)."""
        data = bytearray()
        try:
            if "chunked" in self.headers.get("transfer-encoding", ""):
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    data += self.rfile.read(size)
                    self.rfile.readline()
            else:
                data += self.rfile.read(int(self.headers.get("content-length") or 0))
        except (OSError, ValueError, ssl.SSLError):
            self.close_connection = True
        return bytes(data)

    do_GET = do_POST = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = visible_root("g")
    scratch = tmp_path_factory.mktemp("git")
    cert, key = make_certificate(root, [HOST])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    repos = root / "repos"
    repos.mkdir()
    origin = GitOrigin(context, repos)
    names = scratch / "names.json"
    names.write_text(json.dumps({"names": {HOST: ["127.0.0.1"]}, "upstreams": [f"127.0.0.1:{origin.server_address[1]}"]}))
    box = make_box(root / "box")
    box.env.update(STOCKADE_PROXY_TEST_RESOLVER=str(names), STOCKADE_PROXY_TEST_UPSTREAM_CA=str(cert), STOCKADE_PROXY_IDLE="60")
    yield SimpleNamespace(box=box, origin=origin, port=origin.server_address[1], repos=repos, root=root)
    stop_daemon(state_dir(box) / "run")
    origin.shutdown()
    force_rmtree(root)


def fresh_repo(world: SimpleNamespace, name: str) -> str:
    """A bare repository on the server with `main` and `keep` at one commit; its URL as the sandbox uses it."""
    seed = world.root / f"seed-{name}"
    git("init", "-q", str(seed))
    (seed / "README").write_text("hello\n")
    git("add", "README", cwd=seed)
    git("commit", "-qm", "first", cwd=seed)
    git("branch", "keep", cwd=seed)
    bare = world.repos / f"{name}.git"
    git("clone", "-q", "--bare", str(seed), str(bare))
    git("config", "http.receivepack", "true", cwd=bare)
    shutil.rmtree(seed)
    return f"https://{HOST}:{world.port}/{name}.git"


def server_refs(world: SimpleNamespace, name: str) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", cwd=world.repos / f"{name}.git")
    return dict(tuple(line.split(" ", 1)) for line in out.splitlines())  # type: ignore[misc]


def policy(push: list[str] | None = None) -> str:
    """git.test limited by the rules the built-in `git` profile gives github.com, and `push` if given."""
    builtin = load_builtin("git", project_dir=Path("/"), home=Path("/"))
    allow = builtin.values["network"]["http"]["github.com"][0]
    text = f'extends = ["default"]\n[network]\nallow = ["{HOST}"]\n[network.http."{HOST}"]\nallow = {json.dumps(list(allow))}\n'
    return text + (f"push = {json.dumps(push)}\n" if push is not None else "")


def audit(world: SimpleNamespace) -> list[dict[str, object]]:
    path = state_dir(world.box) / "audit.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return [r for r in lines if r.get("phase") == "end" and r.get("host") == HOST]


def pushes(world: SimpleNamespace, before: int) -> list[tuple[object, object]]:
    """The decisions on pushes since `before`, each once (curl sends a POST again when its connection is cut)."""
    return list(
        dict.fromkeys(
            [(r["decision"], r["rule"]) for r in audit(world)[before:] if str(r.get("path", "")).split("?")[0].endswith("git-receive-pack")]
        )
    )


PRELUDE = 'set -u; W=$(mktemp -d -p . w.XXXXXX); export GIT_TERMINAL_PROMPT=0; g() { git -c user.name=a -c user.email=a@a "$@"; }; '


def commit(name: str, size: int = 0) -> str:
    """Shell: a new commit in ./w (with `size` random bytes in a file)."""
    data = f"head -c {size} /dev/urandom > $W/{name}.bin && g -C $W add {name}.bin && " if size else ""
    return f"echo {name} > $W/{name} && g -C $W add {name} && {data}g -C $W commit -qm {name} && "


def test_clone_and_fetch_pass_and_a_push_is_refused_by_default(world: SimpleNamespace) -> None:
    url = fresh_repo(world, "plain")
    before_refs = server_refs(world, "plain")
    before = len(audit(world))
    script = (
        PRELUDE
        + f"g clone -q {url} $W && echo cloned && g -C $W fetch -q origin && echo fetched && "
        + commit("a")
        + "{ g -C $W push origin HEAD:main; echo main=$?; g -C $W push origin HEAD:refs/heads/agent/x; echo agent=$?; "
        + "g -C $W push origin :refs/heads/keep; echo delete=$?; }"
    )
    result = world.box.run(script, policy=policy())
    assert "cloned" in result.stdout and "fetched" in result.stdout, result  # control: clone and fetch work
    assert "main=0" not in result.stdout and "agent=0" not in result.stdout and "delete=0" not in result.stdout, result
    assert server_refs(world, "plain") == before_refs  # the attack failed where it counts: nothing changed on the server
    assert all(size == 0 for method, path, size in world.origin.seen if path.endswith("git-receive-pack")), world.origin.seen
    decided = pushes(world, before)
    assert [d for d, _ in decided] == ["deny"] * 3, decided
    assert "git push refs/heads/main: no push rule covers refs/heads/main" in str(decided[0][1])
    assert "refs/heads/keep (delete)" in str(decided[2][1])
    fetches = [r for r in audit(world)[before:] if str(r.get("path", "")).split("?")[0].endswith("git-upload-pack")]
    assert fetches and all(r["decision"] == "allow" and r["rule"] == "http allow POST /**/git-upload-pack" for r in fetches)
    assert 'add "refs/heads/main" to push under [network.http."git.test"]' in result.stderr, result.stderr  # the summary
    shown = subprocess.run([sys.executable, "-m", "stockade.cli.main", "audit", "--json"], cwd=world.box.project, env=world.box.env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "no push rule covers refs/heads/main" in shown.stdout and "git-upload-pack" in shown.stdout, shown  # `stockade audit`


def test_push_patterns_allow_only_the_refs_they_name(world: SimpleNamespace) -> None:
    url = fresh_repo(world, "agent")
    start = server_refs(world, "agent")
    before = len(audit(world))
    script = (
        PRELUDE
        + f"g clone -q {url} $W && "
        + commit("a")
        + "{ g -C $W push -q origin HEAD:refs/heads/agent/x; echo agent=$?; g -C $W push -q origin HEAD:main; echo main=$?; "
        + "g -C $W push -q origin HEAD:refs/heads/agent/y HEAD:refs/heads/keep; echo mixed=$?; "
        + "g -C $W push -q origin :refs/heads/keep; echo delete-keep=$?; g -C $W rev-parse HEAD; }"
    )
    result = world.box.run(script, policy=policy(["refs/heads/agent/*"]))
    head = result.stdout.split()[-1]
    refs = server_refs(world, "agent")
    assert "agent=0" in result.stdout and refs.get("refs/heads/agent/x") == head, (result, refs)  # control: allowed push landed
    assert "main=0" not in result.stdout and refs["refs/heads/main"] == start["refs/heads/main"], result
    assert "mixed=0" not in result.stdout and "refs/heads/agent/y" not in refs, refs  # refused as a whole
    assert "delete-keep=0" not in result.stdout and refs["refs/heads/keep"] == start["refs/heads/keep"], result
    decided = pushes(world, before)
    assert decided[0] == ("allow", "http push refs/heads/agent/* (refs/heads/agent/x)"), decided
    assert [d for d, _ in decided[1:]] == ["deny"] * 3, decided
    assert "refs/heads/agent/y" in str(decided[2][1]) and "covers refs/heads/keep" in str(decided[2][1])


def test_a_large_push_is_streamed_and_still_judged(world: SimpleNamespace) -> None:
    """A push of a few MiB goes chunked (git's postBuffer is 1 MiB) and through mitmproxy's streaming."""
    url = fresh_repo(world, "large")
    start = server_refs(world, "large")
    before = len(audit(world))
    script = (
        PRELUDE
        + f"g clone -q {url} $W && "
        + commit("big", 3 << 20)
        + "{ g -C $W push -q origin HEAD:main; echo main=$?; g -C $W push -q origin HEAD:refs/heads/agent/big; echo agent=$?; "
        + "g -C $W rev-parse HEAD; }"
    )
    result = world.box.run(script, policy=policy(["refs/heads/agent/*"]))
    refs = server_refs(world, "large")
    assert "main=0" not in result.stdout and refs["refs/heads/main"] == start["refs/heads/main"], result  # refused
    assert "agent=0" in result.stdout and refs["refs/heads/agent/big"] == result.stdout.split()[-1], result  # control
    big = [size for method, path, size in world.origin.seen if path == "/large.git/git-receive-pack"]
    assert max(big) > 3 << 20 and min(big) == 0, big  # the refused one sent nothing of its body, the allowed one all
    decided = pushes(world, before)
    assert [d for d, rule in decided if "probe" not in str(rule)] == ["deny", "allow"], decided
    up = [r for r in audit(world)[before:] if str(r.get("path", "")).endswith("git-receive-pack") and r["decision"] == "allow"]
    assert max(int(str(r["bytes_up"])) for r in up) > 3 << 20  # (the other allowed one is the probe)


RAW_PUSH = r"""
import http.client, ssl, sys
port, body_file, encoding = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = open(body_file, "rb").read()
connection = http.client.HTTPSConnection("127.0.0.1", 3128, context=ssl.create_default_context())
connection.set_tunnel("git.test", port)
headers = {"Content-Type": "application/x-git-receive-pack-request"}
if encoding != "-":
    headers["Content-Encoding"] = encoding
try:
    connection.request("POST", "/raw.git/git-receive-pack", body, headers)
    print("status", connection.getresponse().status)
except (OSError, http.client.HTTPException) as exc:
    print("cut", type(exc).__name__)
"""


def pkt(text: bytes) -> bytes:
    return b"%04x" % (len(text) + 4) + text


def test_handmade_push_bodies_are_judged_as_git_would_read_them(world: SimpleNamespace) -> None:
    """A delete-only push is nothing but commands; hidden behind a shallow line, a second command or a
    compressed body it must still be refused (and a well-formed one to agent/* still passes)."""
    fresh_repo(world, "raw")
    start = server_refs(world, "raw")
    zero, keep = "0" * 40, start["refs/heads/keep"]
    (world.box.project / "raw.py").write_text(RAW_PUSH)
    cases = {
        "delete": pkt(f"{keep} {zero} refs/heads/keep\0report-status\n".encode()) + b"0000",
        "second": pkt(f"{zero} {keep} refs/heads/agent/z\0report-status\n".encode()) + pkt(f"{keep} {zero} refs/heads/keep\n".encode()) + b"0000",
        "shallow": pkt(f"shallow {keep}\n".encode()) + pkt(f"{keep} {zero} refs/heads/keep\0report-status\n".encode()) + b"0000",
        "unended": pkt(f"{keep} {zero} refs/heads/keep\0report-status\n".encode()),
    }
    import gzip

    for name, body in cases.items():
        (world.box.project / f"{name}.pkt").write_bytes(body)
    (world.box.project / "gz.pkt").write_bytes(gzip.compress(cases["delete"]))
    import hashlib

    empty_pack = b"PACK\0\0\0\x02\0\0\0\0"
    ok = pkt(f"{zero} {keep} refs/heads/agent/ok\0report-status\n".encode()) + b"0000" + empty_pack + hashlib.sha1(empty_pack).digest()
    (world.box.project / "ok.pkt").write_bytes(ok)
    runs = " ".join(f"{n}.pkt:-" for n in cases) + " gz.pkt:gzip ok.pkt:-"
    script = f'for c in {runs}; do echo "$c $(env -u PYTHONPATH /usr/bin/python3 raw.py {world.port} ${{c%%:*}} ${{c##*:}})"; done'
    result = world.box.run(script, policy=policy(["refs/heads/agent/*"]))
    refs = server_refs(world, "raw")
    assert refs["refs/heads/keep"] == keep and "refs/heads/agent/z" not in refs, (result, refs)  # every attack failed
    assert refs.get("refs/heads/agent/ok") == keep, (result, refs)  # control: the well-formed push to agent/* landed
    assert "ok.pkt:- status 200" in result.stdout, result


FORGE_HOOK = """#!/bin/sh
# What a forge does with push options (GitLab: merge_request.target=main, merge_when_pipeline_succeeds): main moves.
target=""
i=0
while [ "$i" -lt "${GIT_PUSH_OPTION_COUNT:-0}" ]; do
    eval "option=\\$GIT_PUSH_OPTION_$i"
    case "$option" in merge_request.target=*) target="${option#merge_request.target=}";; esac
    i=$((i + 1))
done
while read -r old new ref; do
    [ -n "$target" ] && git update-ref "refs/heads/$target" "$new"
done
exit 0
"""


def test_push_options_cannot_move_refs_no_pattern_names(world: SimpleNamespace) -> None:
    """Push options update no ref themselves, but a forge acts on them: a merge request merged into main."""
    url = fresh_repo(world, "options")
    bare = world.repos / "options.git"
    git("config", "receive.advertisePushOptions", "true", cwd=bare)
    hook = bare / "hooks" / "post-receive"
    hook.write_text(FORGE_HOOK)
    hook.chmod(0o755)
    start = server_refs(world, "options")
    before = len(audit(world))
    script = (
        PRELUDE
        + f"g clone -q {url} $W && "
        + commit("a")
        + "{ g -C $W push -q -o merge_request.create -o merge_request.target=main -o merge_request.merge_when_pipeline_succeeds "
        + "origin HEAD:refs/heads/agent/mr; echo options=$?; "
        + commit("b")
        + "g -C $W push -q origin HEAD:refs/heads/agent/plain; echo plain=$?; g -C $W rev-parse HEAD; }"
    )
    result = world.box.run(script, policy=policy(["refs/heads/agent/*"]))
    refs = server_refs(world, "options")
    assert refs["refs/heads/main"] == start["refs/heads/main"], (result, refs)  # the attack failed: main did not move
    assert "options=0" not in result.stdout and "refs/heads/agent/mr" not in refs, (result, refs)
    assert "plain=0" in result.stdout and refs.get("refs/heads/agent/plain") == result.stdout.split()[-1], result  # control
    decided = pushes(world, before)
    assert any(d == "deny" and "push options" in str(rule) for d, rule in decided), decided
