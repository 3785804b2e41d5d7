"""Run one real agent CLI against a fake model server, both in this process's network namespace.

    python harness.py RESULT.json AGENT_JSON

The test starts this under `unshare --net` (loopback only: agents reach for
their vendors' hosts at start, and no traffic may leave the machine). It
brings the loopback interface up, serves the fake model API on 127.0.0.1,
runs the agent with the given argv, environment and working folder, and
writes what happened (the agent's exit status and output, the tool results the
model saw, the requests it got) to RESULT.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as a script (test_live_agents.py starts it in a namespace of its own)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.agents.models import ModelServer, Script  # noqa: E402

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def drop_ambient_capabilities() -> None:
    """`unshare --keep-caps` (how another user gets a network namespace) hands its capabilities
    down as ambient ones; the agent and the sandbox it starts must run without them, as a user's
    would (bwrap refuses to run with capabilities it did not get from setuid)."""
    import ctypes

    PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
    ctypes.CDLL(None, use_errno=True).prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def main() -> int:
    result_path, spec_path = Path(sys.argv[1]), Path(sys.argv[2])
    spec = json.loads(spec_path.read_text())
    loopback_up()
    if os.geteuid() != 0:
        drop_ambient_capabilities()
    script = Script(command=spec["command"], mcp_tool=spec.get("mcp_tool"), mcp_arguments=spec.get("mcp_arguments") or {})
    with ModelServer(script) as server:
        env = {key: value.replace("{url}", server.url) for key, value in spec["env"].items()}
        argv = [word.replace("{url}", server.url) for word in spec["argv"]]
        for name, text in spec.get("files", {}).items():
            path = Path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("{url}", server.url))
        try:
            done = subprocess.run(
                argv,
                cwd=spec["cwd"],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=spec.get("timeout", 120),
            )
            code, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            code = -1
            out = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
            err = (expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr or "") + "\n[harness: timed out]"
    result_path.write_text(
        json.dumps(
            {"code": code, "stdout": out, "stderr": err, "tool_results": script.tool_results, "requests": script.requests, "asked": script.asked}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
