"""The benchmark suite: stockade against no sandbox, bare bwrap and srt, every figure measured side by side in one run.

    python bench/run_all.py [--with-srt] [--runs N] [--quick] [--only startup,loop,...] [--no-write]

Each contender runs once per round, the rounds interleaved (and the starting contender rotating), so load drifts hit
them all alike; each figure is the median of the rounds, with min and max, and each row is compared with the
baseline of the same run. Prints Markdown tables and writes bench/RESULTS.md and bench/startup.png (unless
--only or --no-write). Asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    MB_S,
    MS,
    MS_FINE,
    SECONDS,
    Contender,
    Section,
    Series,
    first_line,
    machine,
    package_version,
    render,
    rounds,
    run_checked,
    script_python,
    timed_rounds,
)  # fmt: skip
from fixtures import FILES, KEEPALIVE, NAME, Origins  # noqa: E402
from sandboxes import HOST_PYTHON, REPO, TRUE, Srt, Stockade, Tool, World, bare, bare_bwrap, find_srt  # noqa: E402

HERE = Path(__file__).resolve().parent
# The credential row's client sends the placeholder as a bearer token (curl through sh, which expands it inside).
WITH_TOKEN = ["sh", "-c", 'exec "$@" -H "Authorization: Bearer $BENCH_TOKEN"', "sh"]
WORKLOADS = (
    "startup", "terminal", "tools", "git", "place", "caches", "checkpoints", "staging", "mcp", "attribution", "phases", "first", "loop",
    "files", "json", "download", "keepalive",
)  # fmt: skip

BARE = "bare (no sandbox)"
BWRAP = "bare bwrap"
OFF = "stockade, network off"
TRACED = "stockade, network off, --trace"
WARM = "stockade, allowlist, warm daemon"
TRANSPARENT = "stockade, allowlist, a client ignoring the proxy"  # through interception (bwrap/parts/interception.py)
COLD = "stockade, allowlist, cold daemon"
INSPECTED = "stockade, inspected host (HTTP rules)"
CREDENTIAL = "stockade, credential swapped in"
SRT_OFF = "srt, network off"
SRT_NET = "srt, allowlist"


@dataclass(frozen=True)
class Plan:
    """How many samples each workload takes; the defaults keep a full run with srt near five minutes on 2 cores."""

    startup_runs: int = 20
    loop_runs: int = 3
    loop_count: int = 100
    file_runs: int = 3
    file_count: int = 10_000
    download_runs: int = 5
    size_mb: int = 200
    request_runs: int = 3
    request_count: int = 200


def make_plan(runs: int | None, quick: bool) -> Plan:
    """--runs sets the short workloads' rounds; the long ones (a 100-command loop, 200 MB) take a share of it."""
    plan = Plan(size_mb=50, loop_count=20, request_count=50, file_count=2000) if quick else Plan()
    base = runs if runs is not None else (5 if quick else plan.startup_runs)

    def share(n: int, least: int = 1) -> int:
        return max(least, -(-base // n))

    return replace(plan, startup_runs=base, loop_runs=share(7), file_runs=share(7, 3), download_runs=share(4, 2), request_runs=share(7))


@dataclass
class Bench:
    """Everything a workload needs: the folders, the origins, and the tools by row name."""

    world: World
    origins: Origins
    plan: Plan
    tools: dict[str, Tool]

    def contenders(self, workload: str, names: Sequence[str], command: Callable[[Tool, Path], list[str]],
                   before: Callable[[Path], None] | None = None) -> list[Contender]:  # fmt: skip
        """One contender per tool present, each in a fresh project, running `command` as that tool wraps it."""
        made = []
        for name in names:
            tool = self.tools.get(name)
            if tool is None:
                continue
            project = self.world.project(f"{workload} {name}")
            made.append(
                Contender(name, tool.wrap(project, command(tool, project)), project, self.world.env, both(tool.before, before, project), tool.after)
            )
        return made


def both(first: Callable[[], None] | None, second: Callable[[Path], None] | None, project: Path) -> Callable[[], None] | None:
    """The tool's untimed step, then the workload's, as one."""
    if first is None and second is None:
        return None

    def run() -> None:
        if first is not None:
            first()
        if second is not None:
            second(project)

    return run


def count_of(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def startup(bench: Bench) -> list[Section]:
    runs = bench.plan.startup_runs
    progress(f"startup: `true`, {count_of(runs, 'round')}")
    contenders = bench.contenders("startup", [BARE, BWRAP, OFF, WARM, COLD, SRT_OFF, SRT_NET], lambda tool, project: [TRUE])
    note = (f"Wall time of one `true`, from fork to exit, median of {count_of(runs, 'interleaved round')}. Cold daemon: the "
            "daemon is stopped (untimed) before each of its samples, and the one the run started is waited for (untimed) "
            "after it, so its start loads no other sample. srt starts its proxies on every run.")  # fmt: skip
    return [Section("Startup: `true`", note, MS, timed_rounds(contenders, runs), BWRAP, [(OFF, SRT_OFF), (WARM, SRT_NET), (COLD, SRT_NET)])]


def terminal(bench: Bench) -> list[Section]:
    """`true` with a terminal as stdin, as a person at a shell runs it: stockade then gives the sandbox a
    pty of its own and a session holder (bwrap/running/console.py); the same through script(1) for every row."""
    runs = bench.plan.startup_runs
    if shutil.which("script") is None:
        progress("terminal: skipped (no script(1))")
        return []
    progress(f"terminal: `true` at a terminal, {count_of(runs, 'round')}")
    contenders = [
        replace(contender, argv=["script", "-qec", shlex.join(contender.argv), "/dev/null"])
        for contender in bench.contenders("terminal", [BARE, BWRAP, OFF], lambda tool, project: [TRUE])
    ]
    note = (f"Wall time of one `true` run by script(1), which gives it a terminal, median of {count_of(runs, 'interleaved round')}: "
            "script's own cost is in every row.")  # fmt: skip
    return [Section("At a terminal: `true`", note, MS, timed_rounds(contenders, runs), BWRAP, [])]


TOOL_FILES = {  # a developer's home: a private registry and index with their tokens, git's identity (profiles/toolconfig.py)
    ".npmrc": "registry=https://npm.corp.example/\n//npm.corp.example/:_authToken=npm_BenchToken0123456789abcdef\nfund=false\n",
    ".config/pip/pip.conf": "[global]\nindex-url = https://bench:s3cretBench@pypi.corp.example/simple\ntimeout = 60\n",
    ".gitconfig": "[user]\n\tname = Bench\n\temail = bench@example.test\n[init]\n\tdefaultBranch = main\n",
    ".netrc": "machine api.corp.example login bench password benchPassw0rd\n",
}


def tools(bench: Bench) -> list[Section]:
    """`true` offline from a home with the user's tool configuration (shown without its secrets, read at each
    run) against the same from a home without it: the cost of reading and rewriting those files."""
    runs = bench.plan.startup_runs
    progress(f"tools: `true` with and without the user's tool configuration, {count_of(runs, 'round')}")
    plain = bench.contenders("tools", [OFF], lambda tool, project: [TRUE])
    if not plain:
        return []
    home = bench.world.root / "tools-home"
    for name, text in TOOL_FILES.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    with_files = replace(plain[0], name=f"{OFF}, four tool files in the home", env={**plain[0].env, "HOME": str(home)})
    note = (f"Wall time of one cached `true` with the network off, median of {count_of(runs, 'interleaved round')}: from a home "
            "holding ~/.npmrc, pip.conf, ~/.gitconfig and ~/.netrc (each read, its secrets made placeholders, given to the "
            "sandbox as a copy), and from one holding none.")  # fmt: skip
    return [Section("Tool configuration: `true`", note, MS, timed_rounds([*plain, with_files], runs), OFF, [])]


def git(bench: Bench) -> list[Section]:
    """`true` offline in a project that is a git repository (its git dir staged at each run, bwrap/running/gitstage.py)
    against the same in a project that is none: the cost of staging and carrying back."""
    runs = bench.plan.startup_runs
    progress(f"git: `true` in a repository and in a plain folder, {count_of(runs, 'round')}")
    plain = bench.contenders("git plain", [OFF], lambda tool, project: [TRUE])
    repository = bench.contenders("git repository", [OFF], lambda tool, project: [TRUE])
    if not plain or not repository:
        return []
    project = repository[0].cwd
    for words in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@example.test", "commit", "-qm", "one", "--allow-empty"]):
        subprocess.run(["git", *words], cwd=project, check=True, capture_output=True)
    staged = replace(repository[0], name=f"{OFF}, in a git repository")
    note = (f"Wall time of one cached `true` with the network off, median of {count_of(runs, 'interleaved round')}: in a project "
            "that is a git repository (its git dir staged for the run and carried back after it) and in one that is not.")  # fmt: skip
    return [Section("A git repository: `true`", note, MS, timed_rounds([*plain, staged], runs), OFF, [])]


PLACE_FOLDERS, PLACE_FILES = 5_000, 10  # another writable place: 50,000 files, a checkout-filled ~/src (a home's own size)


def place(bench: Bench) -> list[Section]:
    """`true` offline with a second writable place of 50,000 files (walked at planning and, where folders changed,
    after the run: mounts._other_places) against the project alone; cached, and planned at every run."""
    runs = bench.plan.startup_runs
    progress(f"place: `true` with another writable place of {PLACE_FOLDERS * PLACE_FILES:,} files, {count_of(runs, 'round')}")
    plain = bench.contenders("place plain", [OFF], lambda tool, project: [TRUE])
    if not plain:
        return []
    src = bench.world.root / "place-src"
    for number in range(PLACE_FOLDERS):
        folder = src / f"repo{number // 100}" / f"pkg{number % 100}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in range(PLACE_FILES):
            (folder / f"m{name}.py").write_text("x = 1\n")
    policy = bench.world.write("place.toml", f'extends = ["offline"]\n[filesystem]\nallow_write = [".", "{src}"]\n')
    words = plain[0].argv[: plain[0].argv.index("--profile")]
    with_place = replace(plain[0], name=f"{OFF}, + a place of 50,000 files", argv=[*words, "--policy", str(policy), "--", TRUE])
    unplanned = {**plain[0].env, "STOCKADE_NO_PLAN_CACHE": "1"}
    rows = [
        plain[0], with_place,
        replace(plain[0], name=f"{OFF}, planned every run", env=unplanned),
        replace(with_place, name=f"{OFF}, + the place, planned every run", env=unplanned),
    ]  # fmt: skip
    note = (f"Wall time of one `true` with the network off, median of {count_of(runs, 'interleaved round')}: in the project alone, "
            f"and with `allow_write` naming another folder of {PLACE_FOLDERS:,} folders and {PLACE_FOLDERS * PLACE_FILES:,} files, whose "
            "floor is checked as the project's is; with the stored plan, and planned at every run (STOCKADE_NO_PLAN_CACHE).")  # fmt: skip
    return [Section("Another writable place: `true`", note, MS, timed_rounds(rows, runs), OFF, [])]


CHECKPOINT_FOLDERS, CHECKPOINT_FILES = 100, 1000  # a project of 100,000 files
REWRITTEN, REWRITTEN_SIZE = 1000, 100_000
REWRITE = f"""import os, sys
blob = os.urandom({REWRITTEN_SIZE})
for number in range({REWRITTEN}):
    with open(f"big/f{{number}}", "wb") as handle:
        handle.write(blob)
"""


def checkpoints(bench: Bench) -> list[Section]:
    """What every run's checkpoint costs (checkpoints/, bwrap/running/checkpointing.py): `true` in a project of
    100,000 files, a run rewriting 1,000 files of 100 KB, each with checkpoints on and off; and `stockade undo` of it."""
    runs, heavy = bench.plan.startup_runs, bench.plan.file_runs
    files = CHECKPOINT_FOLDERS * CHECKPOINT_FILES
    progress(f"checkpoints: `true` in {files:,} files, {count_of(runs, 'round')}; a rewrite, {count_of(heavy, 'round')}")
    plain = bench.contenders("checkpoints", [OFF], lambda tool, project: [TRUE])
    if not plain:
        return []
    base = plain[0]
    project = base.cwd
    for number in range(CHECKPOINT_FOLDERS):
        folder = project / f"pkg{number}"
        folder.mkdir(exist_ok=True)
        for name in range(CHECKPOINT_FILES):
            (folder / f"m{name}.py").write_text("x = 1\n")
    (project / "big").mkdir(exist_ok=True)
    script = bench.world.write("rewrite.py", REWRITE)
    off_policy = bench.world.write("checkpoints-off.toml", 'extends = ["offline"]\n[checkpoints]\nenabled = false\n')
    words = list(base.argv[: base.argv.index("--profile")])
    stockade_words = words[: words.index("run")]
    store = Path(bench.world.env["HOME"]) / ".local" / "state" / "stockade" / "checkpoints"
    on = replace(base, name=f"{OFF}, checkpoints on")
    off = replace(base, name=f"{OFF}, checkpoints off", argv=[*words, "--policy", str(off_policy), "--", TRUE])

    def fresh(_project: Path | None = None) -> None:
        """The files to rewrite in place, no checkpoint kept, everything on disk: no sample pays for another's."""
        shutil.rmtree(store, ignore_errors=True)
        run_checked([HOST_PYTHON, str(script)], cwd=project)
        os.sync()

    rewrite = [HOST_PYTHON, str(script)]
    rewrite_on = replace(on, name=f"{OFF}, checkpoints on, rewrite", argv=[*words, "--profile", "offline", "--", *rewrite], before=fresh)
    rewrite_off = replace(off, name=f"{OFF}, checkpoints off, rewrite", argv=[*words, "--policy", str(off_policy), "--", *rewrite], before=fresh)

    def rewritten() -> None:
        fresh()
        run_checked(rewrite_on.argv, cwd=project, env=base.env)

    undo = replace(base, name="stockade undo of the rewrite", argv=[*stockade_words, "undo"], before=rewritten)
    note = (f"Wall time, median of {count_of(runs, 'interleaved round')}: one `true` with the network off in a project of "
            f"{files:,} files, with every run's checkpoint on (the default) and off (`[checkpoints] enabled = false`).")  # fmt: skip
    heavy_note = (f"One sandboxed `python3` that rewrites {REWRITTEN:,} files of {REWRITTEN_SIZE // 1000} KB in the same project "
                  f"(each truncated and written again), median of {count_of(heavy, 'round')}; before each sample (untimed) the files are "
                  "written afresh, the checkpoints removed and everything synced. Then `stockade undo` of that run (the run untimed).")  # fmt: skip
    return [
        Section(f"Checkpoints: `true` in {files:,} files", note, MS, timed_rounds([off, on], runs), off.name, []),
        Section(
            f"Checkpoints: a run rewriting {REWRITTEN:,} files of {REWRITTEN_SIZE // 1000} KB, and its undo",
            heavy_note,
            MS,
            timed_rounds([rewrite_off, rewrite_on, undo], heavy, warmup=0),
            rewrite_off.name,
            [],
        ),  # fmt: skip
    ]


def staging(bench: Bench) -> list[Section]:
    """What a staged run costs (checkpoints/stage.py): `true` with and without --stage, the rewrite of 1,000 files of
    100 KB staged and not, and `stockade accept` of the staged rewrite."""
    runs, heavy = bench.plan.startup_runs, bench.plan.file_runs
    progress(f"staging: `true`, {count_of(runs, 'round')}; a rewrite and its accept, {count_of(heavy, 'round')}")
    plain = bench.contenders("staging", [OFF], lambda tool, project: [TRUE])
    if not plain:
        return []
    base = plain[0]
    project = base.cwd
    (project / "big").mkdir(exist_ok=True)
    script = bench.world.write("rewrite-staged.py", REWRITE)
    words = list(base.argv[: base.argv.index("--profile")])
    stockade_words = words[: words.index("run")]
    state = Path(bench.world.env["HOME"]) / ".local" / "state" / "stockade" / "checkpoints"
    staged = replace(base, name=f"{OFF}, --stage", argv=[*words, "--stage", "--profile", "offline", "--", TRUE],
                     after=lambda: shutil.rmtree(state, ignore_errors=True))  # fmt: skip

    def fresh(_project: Path | None = None) -> None:
        """The files to rewrite, no checkpoint or stage kept, everything on disk."""
        shutil.rmtree(state, ignore_errors=True)
        run_checked([HOST_PYTHON, str(script)], cwd=project)
        time.sleep(0.01)  # past the coarse clock's tick: the files are older than the run
        os.sync()

    rewrite = [HOST_PYTHON, str(script)]
    rewrite_plain = replace(base, name=f"{OFF}, rewrite", argv=[*words, "--profile", "offline", "--", *rewrite], before=fresh)
    rewrite_staged = replace(base, name=f"{OFF}, --stage, rewrite", argv=[*words, "--stage", "--profile", "offline", "--", *rewrite], before=fresh)

    def staged_rewrite() -> None:
        fresh()
        run_checked(rewrite_staged.argv, cwd=project, env=base.env)

    accept = replace(base, name="stockade accept of the staged rewrite", argv=[*stockade_words, "accept"], before=staged_rewrite)
    note = f"Wall time, median of {count_of(runs, 'interleaved round')}: one `true` with the network off, staged and not."
    heavy_note = (f"One sandboxed `python3` that rewrites {REWRITTEN:,} files of {REWRITTEN_SIZE // 1000} KB (each truncated and "
                  f"written again), staged and not, median of {count_of(heavy, 'round')}; before each sample (untimed) the files "
                  "are written afresh, checkpoints and stages removed, everything synced. Then `stockade accept` of the staged "
                  "rewrite (the run untimed).")  # fmt: skip
    return [
        Section("Staging: `true`", note, MS, timed_rounds([base, staged], runs), base.name, []),
        Section(
            f"Staging: a run rewriting {REWRITTEN:,} files of {REWRITTEN_SIZE // 1000} KB, and its accept",
            heavy_note,
            MS,
            timed_rounds([rewrite_plain, rewrite_staged, accept], heavy, warmup=0),
            rewrite_plain.name,
            [],
        ),
    ]


MCP_INITIALIZE = '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}'


def mcp_server(bench: Bench) -> list[Section]:
    """An agent's stdio MCP server answering `initialize`, unwrapped and as `stockade mcp wrap` runs it (`stockade run
    --mcp NAME`): with its default policy (network off) and with one allowed host (a warm daemon)."""
    runs = bench.plan.startup_runs
    progress(f"mcp: an MCP server's first answer, {count_of(runs, 'round')}")
    plain = bench.contenders("mcp", [OFF], lambda tool, project: [TRUE])
    if not plain:
        return []
    base = plain[0]
    server = bench.world.write("mcp-server.py", (Path(__file__).resolve().parent.parent / "tests" / "e2e" / "mcp" / "server.py").read_text())
    words = list(base.argv[: base.argv.index("run")])
    config = Path(bench.world.env["HOME"]) / ".config" / "stockade" / "mcp"
    config.mkdir(parents=True, exist_ok=True)
    (config / "bench-net.toml").write_text('extends = ["mcp"]\n[network]\nallow = ["bench.test"]\n')
    feed = ["sh", "-c", f"printf '%s\\n' '{MCP_INITIALIZE}' | exec \"$@\"", "sh"]
    serve = [HOST_PYTHON, str(server)]
    unwrapped = replace(base, name="the server, unwrapped", argv=[*feed, *serve])
    offline = replace(base, name="wrapped, its default policy (network off)", argv=[*feed, *words, "run", "--mcp", "bench", "--", *serve])
    networked = replace(base, name="wrapped, one allowed host (warm daemon)", argv=[*feed, *words, "run", "--mcp", "bench-net", "--", *serve])
    note = (f"Wall time, median of {count_of(runs, 'interleaved round')}: a stdio MCP server started, sent `initialize`, its "
            "answer read and the server ended (stdin closed), unwrapped and wrapped. The goal: within 50 ms of the unwrapped one.")  # fmt: skip
    return [Section("An MCP server's first answer", note, MS, timed_rounds([unwrapped, offline, networked], runs), unwrapped.name, [])]


ATTRIBUTION_CLIENT = """
import socket, subprocess, sys
helpers = [subprocess.Popen(["sleep", "120"]) for _ in range(int(sys.argv[3]))]
held = [open("/dev/null") for _ in range(20)]
sockets = []
for _ in range(int(sys.argv[2])):
    sockets.append(socket.create_connection(("127.0.0.1", int(sys.argv[1]))))
    sockets[-1].recv(1)  # waits for its answer, as a client waits for the proxy's
for helper in helpers:
    helper.kill()
"""


def attribution(bench: Bench) -> list[Section]:
    """What naming the process behind a connection costs the daemon per connection (proxy/daemon/attribution.py):
    the /proc lookup for each accepted connection while its client waits for the answer, in trees of 1 and of 21
    processes, the client keeping every connection open (so its table and its descriptors grow)."""
    import socket as socket_module
    import subprocess

    sys.path.insert(0, str(REPO / "src"))
    from stockade.proxy.daemon.attribution import Attributor

    count = 200
    progress(f"attribution: the process behind {count} connections, trees of 1 and 21 processes")
    series: list[Series] = []
    for extra in (0, 20):
        listener = socket_module.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        root = subprocess.Popen(["/bin/sh", "-c", f'{HOST_PYTHON} -c "$0" {listener.getsockname()[1]} {count} {extra}; true', ATTRIBUTION_CLIENT])
        attributor = Attributor(
            root.pid, socket_module.socket(socket_module.AF_NETLINK, socket_module.SOCK_DGRAM, 4)
        )  # as the sandbox's namespace hands over
        plain, looked = [], []
        accepted = []
        for _ in range(count):
            conn, peer = listener.accept()
            started = time.perf_counter()
            conn.getpeername()
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            found = attributor.who(peer, listener.getsockname())
            looked.append(time.perf_counter() - started)
            assert found is not None
            conn.send(b"x")
            accepted.append(conn)
        root.wait()
        attributor.close()
        for conn in accepted:
            conn.close()
        listener.close()
        label = "the client alone" if not extra else f"the client and {extra} other processes"
        if not series:
            series.append(Series("accepting it (getpeername, no lookup)", tuple(plain)))
        series.append(Series(f"naming its process: {label}", tuple(looked)))
    note = (f"Per connection, median of {count}: the daemon's lookup of the process that opened an accepted connection while "
            "the client waits for its answer (the namespace's TCP table, then the descriptors of the sandbox's processes, "
            "newest first; the tree read again at most once a second), against getpeername alone. The client keeps each "
            f"connection open, so the last lookups search {count} sockets and descriptors. The goal: under 0.2 ms.")  # fmt: skip
    return [Section("Naming the process behind a connection", note, MS_FINE, series, series[0].name, [])]


LAYERED = ("~/.cargo/git", "~/.cargo/registry", "~/.cache/pip")  # seen through layers of the project's (bwrap/parts/layers.py)


def cargo_toolchain() -> str | None:
    """The folder of a real cargo and rustc: rustup's proxies need the user's own RUSTUP_HOME, so ask it here."""
    cargo = shutil.which("cargo") or shutil.which("cargo", path=os.path.expanduser("~/.cargo/bin"))
    if cargo is None:
        return None
    rustup = os.path.join(os.path.dirname(cargo), "rustup")
    found = subprocess.run([rustup, "which", "cargo"], capture_output=True, text=True) if os.path.exists(rustup) else None
    return os.path.dirname(found.stdout.strip()) if found is not None and found.returncode == 0 else os.path.dirname(os.path.realpath(cargo))


def cargo_crate(root: Path, project: Path, env: dict[str, str]) -> None:
    """A crate whose dependency (with a build script) comes from a git repository: fetched once, so the
    home's ~/.cargo/git is warm, as a developer's is."""
    dep = root / "cargo-dep"
    (dep / "src").mkdir(parents=True, exist_ok=True)
    (dep / "Cargo.toml").write_text('[package]\nname = "dep"\nversion = "0.1.0"\nedition = "2021"\n')
    (dep / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    (dep / "build.rs").write_text('fn main() { println!("cargo:rerun-if-changed=build.rs"); }\n')
    if not (dep / ".git").exists():
        for words in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@example.test", "commit", "-qm", "one"]):
            subprocess.run(["git", *words], cwd=dep, check=True, capture_output=True)
    (project / "src").mkdir(exist_ok=True)
    (project / "Cargo.toml").write_text(
        f'[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\ndep = {{ git = "file://{dep}" }}\n'
    )
    (project / "src" / "main.rs").write_text('fn main() { println!("{}", dep::answer()); }\n')
    subprocess.run(["cargo", "fetch", "-q"], cwd=project, env=env, check=True, capture_output=True)


def caches(bench: Bench) -> list[Section]:
    """What the package caches' layers cost: `true` with three writable caches (each an overlay the child mounts
    before bwrap) against the project alone, and a real `cargo build --offline` reading a warm ~/.cargo/git
    through its layer against the same build with no sandbox."""
    runs = bench.plan.startup_runs
    progress(f"caches: `true` with three layered caches, and a cargo build through the layer, {count_of(runs, 'round')}")
    plain = bench.contenders("caches plain", [OFF], lambda tool, project: [TRUE])
    if not plain:
        return []
    listed = ", ".join(f'"{place}"' for place in LAYERED)
    text = f'extends = ["offline"]\n[filesystem]\nallow_write = [".", {listed}]\n'
    here = bench.world.project("caches layered")
    (here / "policy.toml").write_text(text)  # in the project: "." is the project alone, as in the plain row
    words = plain[0].argv[: plain[0].argv.index("--profile")]
    layered = replace(plain[0], name=f"{OFF}, three caches layered", argv=[*words, "--policy", str(here / "policy.toml"), "--", TRUE], cwd=here)
    note = (f"Wall time of one cached `true` with the network off, median of {count_of(runs, 'interleaved round')}: in the project "
            f"alone, and with {', '.join(LAYERED)} writable, each seen through an overlay of the project's.")  # fmt: skip
    sections = [Section("Package caches: `true`", note, MS, timed_rounds([plain[0], layered], runs), OFF, [])]
    toolchain = cargo_toolchain()
    if toolchain is None:
        progress("caches: the cargo build skipped (no cargo)")
        return sections
    env = {**bench.world.env, "PATH": f"{toolchain}:/usr/bin:/bin"}
    project = bench.world.project("caches cargo")
    cargo_crate(bench.world.root, project, env)
    policy_here = project / "policy.toml"  # its folder is the project, and "." in it
    policy_here.write_text(text)
    build = ["cargo", "build", "--offline", "-q"]

    def clean() -> None:
        shutil.rmtree(project / "target", ignore_errors=True)

    rows = [
        Contender(BARE, build, project, env, clean),
        Contender(f"{OFF}, ~/.cargo/git layered", [*words, "--policy", str(policy_here), "--", *build], project, env, clean),
    ]
    runs_build = max(3, runs // 4)
    note = (f"Wall time of `cargo build --offline` of a crate whose git dependency (with a build script) is in a warm "
            f"~/.cargo/git, target removed before each (untimed), median of {count_of(runs_build, 'interleaved round')}; "
            "the sandbox reads the checkout through its layer.")  # fmt: skip
    sections.append(Section("Package caches: a cargo build", note, MS, timed_rounds(rows, runs_build), BARE, []))
    return sections


# The marks a run takes with STOCKADE_PHASES set (core/phases.py), in order, and what lies between them.
PHASES = (
    ("loaded", "plan", "stockade's imports, options, the stored plan read"),
    ("plan", "checks", "checks before the start (journal, limits; the network session's connection)"),
    ("checks", "command", "bwrap and `true` (the network namespace and the daemon's answer included)"),
    ("command", "after", "checks after the run (and the session's end)"),
)


def phases(bench: Bench) -> list[Section]:
    """Where a cached run's milliseconds go, read off its marks and the bench's own clock on either side of it."""
    runs = bench.plan.startup_runs
    progress(f"phases: a cached `true`, offline and warm, {count_of(runs, 'round')}")
    env = {**bench.world.env, "STOCKADE_PHASES": "1"}
    rows: dict[str, list[float]] = {}

    def sample(contender: Contender) -> list[float]:
        started = time.perf_counter()  # CLOCK_MONOTONIC, the clock the run's marks are on
        done = subprocess.run(contender.argv, cwd=contender.cwd, env=env, capture_output=True, text=True, check=True)
        ended = time.perf_counter()
        line = next(line for line in done.stderr.splitlines() if line.startswith("stockade-phases: "))
        words = dict(word.split("=") for word in line.split()[1:])
        clock = float(words.pop("clock"))
        marks = {name: float(ms) / 1000 for name, ms in words.items()}
        label = "offline" if contender.name == OFF else "warm"
        rows.setdefault(f"{label}: the interpreter's start, to stockade's first module", []).append(clock - started)
        for first, last, what in PHASES:
            rows.setdefault(f"{label}: {what}", []).append(marks[last] - marks[first])
        rows.setdefault(f"{label}: the interpreter's exit", []).append(ended - clock - marks["after"])
        return [ended - started]

    quiet = lambda tool, project: [TRUE]  # noqa: E731
    contenders = [c for c in bench.contenders("phases", [OFF, WARM], quiet) if c.name in (OFF, WARM)]
    python = bench.world.stockade_python()
    references = [
        Contender(f"`{python} -c pass` (stockade's interpreter, with site)", [python, "-c", "pass"], bench.world.root, bench.world.env),
        Contender(f"`{python} -I -S -c pass` (no site)", [python, "-I", "-S", "-c", "pass"], bench.world.root, bench.world.env),
    ]
    bare_runs = timed_rounds([*bench.contenders("phases", [BWRAP], quiet), *references], runs)
    wholes = rounds(contenders, runs, sample)
    series = [*bare_runs, *wholes, *(Series(name, tuple(values)) for name, values in rows.items())]
    note = (f"A cached `stockade run -- true` with STOCKADE_PHASES set: the marks it takes (src/stockade/core/phases.py) "
            "and the bench's clock before the fork and after the exit, the same monotonic clock; median of "
            f"{count_of(runs, 'round')}. The interpreter rows show what Python itself costs on this machine.")  # fmt: skip
    return [Section("Where a cached run's time goes", note, MS, series, BWRAP)]


def first_request(bench: Bench) -> list[Section]:
    """The first request of a run: with a cold daemon its connection waits in the sandbox's listener until the daemon is up."""
    runs = bench.plan.startup_runs
    progress(f"first: one small request as a run's first, {count_of(runs, 'round')}")
    port = bench.origins.port("http")
    curl = lambda tool, project: [  # noqa: E731
        "curl", "-sS", "--noproxy", "" if tool.proxied else "*", "-o", "/dev/null", "-w", "%{time_total}\n", f"http://{tool.host}:{port}/small",
    ]  # fmt: skip
    contenders = bench.contenders("first", [BARE, WARM, TRANSPARENT, COLD, SRT_NET], curl)
    walls: dict[str, list[float]] = {}
    seen: dict[str, int] = {}

    def sample(contender: Contender) -> list[float]:
        if contender.before is not None:
            contender.before()
        started = time.perf_counter()
        latency = float(run_checked(contender.argv, cwd=contender.cwd, env=contender.env).split()[-1])
        ended = time.perf_counter()
        if contender.after is not None:
            contender.after()
        seen[contender.name] = seen.get(contender.name, 0) + 1
        if seen[contender.name] > 1:  # the first round is rounds()' warm-up
            walls.setdefault(f"{contender.name}: the whole run", []).append(ended - started)
        return [latency]

    latencies = rounds(contenders, runs, sample)
    series = [*latencies, *(Series(name, tuple(values)) for name, values in walls.items())]
    note = (f"`curl` of a small body from a loopback origin over plain HTTP as the run's only command: curl's own "
            "time_total (connect to last byte), and the whole run's wall time; median of "
            f"{count_of(runs, 'interleaved round')}. Cold daemon: stopped (untimed) before each sample, so the request "
            "waits in the sandbox's listener while the daemon starts.")  # fmt: skip
    return [Section("The first request of a run (plain HTTP)", note, MS, series, BARE, [(WARM, SRT_NET), (COLD, SRT_NET)])]


def loop(bench: Bench) -> list[Section]:
    runs, count = bench.plan.loop_runs, bench.plan.loop_count
    progress(f"loop: {count} sandboxed `true` in a shell loop, {count_of(runs, 'round')}")
    script = f'for i in $(seq {count}); do "$@" || exit 1; done'
    names = [BARE, BWRAP, OFF, WARM, SRT_OFF]
    contenders = [replace(c, argv=["/bin/sh", "-c", script, "loop", *c.argv]) for c in bench.contenders("loop", names, lambda tool, project: [TRUE])]
    note = (f"A shell loop running {count} separate sandboxed `true`, one after another (what an agent does all day), "
            f"timed as a whole; median of {count_of(runs, 'round')}, and the median per command. srt runs with its "
            "network off only: it starts the same proxies either way (see the startup table).")  # fmt: skip
    return [
        Section(
            f"{count} short sandboxed commands in a loop",
            note,
            SECONDS,
            timed_rounds(contenders, runs, warmup=0),
            BWRAP,
            [(OFF, SRT_OFF), (WARM, SRT_OFF)],
            per=count,
        )
    ]


def files(bench: Bench) -> list[Section]:
    runs, count = bench.plan.file_runs, bench.plan.file_count
    progress(f"files: write then read {count} small files, {count_of(runs, 'round')}")
    script = bench.world.write("files.py", FILES)

    def clear(project: Path) -> None:
        """Last sample's files gone and on disk, so no sample pays for another's writeback."""
        run_checked(["sh", "-c", 'rm -rf "$1" && sync', "clear", str(project / "f")])

    contenders = bench.contenders("files", [BARE, BWRAP, OFF, TRACED, SRT_OFF], lambda tool, project: [HOST_PYTHON, str(script), str(count)], clear)
    note = (f"One sandboxed `python3` that writes {count:,} files of 200 bytes into the project, then reads them all "
            f"back; median of {count_of(runs, 'round')}, each in a fresh folder (the last one's removed and synced to disk, untimed).")  # fmt: skip
    return [
        Section(
            f"Write and read {count:,} small files in the project", note, MS, timed_rounds(contenders, runs, warmup=0), BWRAP, [(OFF, SRT_OFF)]
        )  # the --trace row is read against the untraced one in the table (pairs are stockade/srt)
    ]


def import_json(bench: Bench) -> list[Section]:
    runs = bench.plan.startup_runs
    progress(f"json: python -c 'import json', {count_of(runs, 'round')}")
    contenders = bench.contenders("json", [BARE, BWRAP, OFF, SRT_OFF], lambda tool, project: [HOST_PYTHON, "-c", "import json"])
    note = f'`{HOST_PYTHON} -c "import json"`, median of {count_of(runs, "interleaved round")}.'
    return [Section('`python -c "import json"`', note, MS, timed_rounds(contenders, runs), BWRAP, [(OFF, SRT_OFF)])]


def download(bench: Bench) -> list[Section]:
    plan = bench.plan
    progress(f"download: {plan.size_mb} MB, {count_of(plan.download_runs, 'round')} per scheme")
    sections = []
    for scheme in ("http", "https"):
        port = bench.origins.port(scheme)
        curl = lambda tool, project, scheme=scheme, port=port: [  # noqa: E731
            *(WITH_TOKEN if tool.credential else []),
            "curl", "-sS", "--noproxy", "" if tool.proxied else "*", "-o", "/dev/null", "-w", "%{speed_download}\n",
            *([] if tool.inspected else ["--cacert", str(bench.origins.cert)]), f"{scheme}://{tool.host}:{port}/big",
        ]  # fmt: skip
        names = [BARE, WARM, TRANSPARENT, *([INSPECTED, CREDENTIAL] if scheme == "https" else []), SRT_NET]
        contenders = bench.contenders(f"download {scheme}", names, curl)
        speeds = rounds(contenders, plan.download_runs, lambda c: [float(run_checked(c.argv, cwd=c.cwd, env=c.env).split()[-1]) / 1e6], warmup=0)
        how = "plain HTTP: the proxy handles the body" if scheme == "http" else "HTTPS: a CONNECT tunnel"
        note = (f"`curl -o /dev/null` of {plan.size_mb} MB from a loopback origin, {how}; MB/s as curl reports it (the "
                f"sandbox's startup is not in it), median of {count_of(plan.download_runs, 'interleaved round')}.")  # fmt: skip
        sections.append(
            Section(f"{plan.size_mb} MB loopback download, {scheme.upper()} (MB/s, higher is better)", note, MB_S, speeds, BARE, [(WARM, SRT_NET)])
        )
    return sections


def keepalive(bench: Bench) -> list[Section]:
    plan = bench.plan
    progress(f"keepalive: {plan.request_count} requests on one connection, {count_of(plan.request_runs, 'round')} per scheme")
    script = bench.world.write("keepalive.py", KEEPALIVE)
    sections = []
    for scheme in ("http", "https"):
        port = str(bench.origins.port(scheme))
        request = lambda tool, project, scheme=scheme, port=port: [HOST_PYTHON, str(script), scheme, tool.host, port, str(plan.request_count),  # noqa: E731
                                         "" if tool.inspected else str(bench.origins.cert), "proxy" if tool.proxied else "direct"]  # fmt: skip
        names = [BARE, WARM, TRANSPARENT, *([INSPECTED, CREDENTIAL] if scheme == "https" else []), SRT_NET]
        contenders = bench.contenders(f"keepalive {scheme}", names, request)
        latencies = rounds(contenders, plan.request_runs, lambda c: list(json.loads(run_checked(c.argv, cwd=c.cwd, env=c.env))))
        note = (f"{plan.request_count} small GETs on one kept-alive connection ({scheme.upper()}), direct or through the "
                f"sandbox's proxy; the figure is per request, over all requests of {count_of(plan.request_runs, 'round')}.")  # fmt: skip
        sections.append(
            Section(f"{plan.request_count} keep-alive requests, {scheme.upper()} (per request)", note, MS_FINE, latencies, BARE, [(WARM, SRT_NET)])
        )
    return sections


RUNNERS: dict[str, Callable[[Bench], list[Section]]] = {
    "phases": phases, "first": first_request,
    "startup": startup, "terminal": terminal, "tools": tools, "git": git, "place": place, "caches": caches, "checkpoints": checkpoints,
    "staging": staging, "mcp": mcp_server, "attribution": attribution,
    "loop": loop, "files": files, "json": import_json, "download": download, "keepalive": keepalive,
}  # fmt: skip


def make_tools(stockade: Stockade, srt: Srt | None) -> dict[str, Tool]:
    tools = [
        Tool(BARE, bare),
        Tool(BWRAP, bare_bwrap),
        Tool(OFF, stockade.off),
        *([Tool(TRACED, stockade.traced)] if shutil.which("strace") else []),  # --trace runs strace, when installed
        Tool(WARM, stockade.net, host=NAME, proxied=True),
        Tool(TRANSPARENT, stockade.net, host=NAME, proxied=False),
        Tool(COLD, stockade.net, host=NAME, proxied=True, before=stockade.stop_daemon, after=stockade.await_daemon),
        Tool(INSPECTED, stockade.inspected, host=NAME, proxied=True, inspected=True),
        Tool(CREDENTIAL, stockade.credential, host=NAME, proxied=True, inspected=True, credential=True),
    ]
    if srt is not None:
        tools += [Tool(SRT_OFF, srt.off), Tool(SRT_NET, srt.net, proxied=True)]
    return {tool.name: tool for tool in tools}


def versions(stockade: Stockade, srt: Srt | None) -> dict[str, str]:
    """Every version the figures depend on, as they were during this run."""
    found = machine()
    found["workload Python"] = first_line([HOST_PYTHON, "--version"])
    found["stockade"] = f"{stockade.version()} ({stockade.command[0]}; repository at {git_describe()})"
    found["mitmproxy"] = package_version(script_python(stockade.command), "mitmproxy")
    found["srt"] = srt.version() if srt is not None else "not run"
    found["node"] = first_line(["node", "--version"])
    if srt is not None:
        found["socat"] = socat_version()
        found["ripgrep"] = first_line(["rg", "--version"])
    found["curl"] = " ".join(first_line(["curl", "--version"]).split()[:2])
    return found


def socat_version() -> str:
    """socat's version line (its -V prints a banner first)."""
    done = subprocess.run(["socat", "-V"], capture_output=True, text=True)
    line = next((line for line in done.stdout.splitlines() if "socat version" in line), "")
    return " ".join(line.split()[:3]) or "unknown"


def git_describe() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def plot(sections: list[Section], path: Path) -> str:
    """A box plot of the `true` samples per sandbox; returns a line for the report (the image, or why there is none)."""
    startup_section = next((s for s in sections if s.title.startswith("Startup")), None)
    if startup_section is None:
        return ""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return "(no plot: matplotlib was not installed; `pip install matplotlib`)"
    shown = [s for s in startup_section.series if s.name in (BWRAP, OFF, WARM, SRT_OFF, SRT_NET)]
    figure, axes = plt.subplots(figsize=(9, 4.8), dpi=110)
    data = [[v * 1000 for v in s.values] for s in shown]
    try:
        axes.boxplot(data, orientation="horizontal", showfliers=False, widths=0.6)
    except TypeError:  # matplotlib before 3.10
        axes.boxplot(data, vert=False, showfliers=False, widths=0.6)
    axes.set_yticks(range(1, len(shown) + 1), [s.name for s in shown])
    for row, values in enumerate(data, start=1):
        offsets = [row + ((i % 7) - 3) * 0.03 for i in range(len(values))]
        axes.scatter(values, offsets, s=9, alpha=0.5, color="tab:blue", zorder=3)
    axes.invert_yaxis()
    axes.set_xlabel("wall time of `true`, ms (lower is better)")
    axes.set_xlim(left=0)
    axes.grid(axis="x", alpha=0.3)
    axes.set_title(f"Startup, {len(shown[0].values)} runs each, interleaved ({os.cpu_count()} cores)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return f"![startup distribution per tool]({path.name})"


def report(command_line: str, started: datetime.datetime, seconds: float, found: dict[str, str], notes: list[str],
           sections: list[Section], image: str) -> str:  # fmt: skip
    """RESULTS.md: how it was made, on what, and every table of the run."""
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `{command_line}` on {started:%Y-%m-%d %H:%M} UTC ({seconds:.0f} s). Every figure is the median of "
        "several runs (min and max beside it), all contenders interleaved run by run in the same run; ratios are "
        "against the baseline measured in that same run. Rerun the command to regenerate this file.",
        "",
        "| | version |",
        "|---|---|",
        *[f"| {key} | {value} |" for key, value in found.items()],
        "",
        "Notes:",
        "",
        *[f"- {note}" for note in notes],
    ]
    body = "\n\n".join(render(s) for s in sections)
    return "\n".join(lines) + "\n\n" + body + ("\n\n## Startup distribution\n\n" + image if image else "") + "\n"


def policy_notes(srt: Srt | None) -> list[str]:
    notes = [
        "Every contender runs in a fresh project folder under HOME, with the same environment (a HOME of the bench's "
        "own, so stockade gets its own daemon). `bare bwrap` is `bwrap --ro-bind / / --dev /dev --proc /proc --bind "
        "PROJECT PROJECT --unshare-all --die-with-parent`.",
        "stockade: `stockade run --quiet --profile offline` (network off), or `--policy` extending `default` with "
        f'`[network] allow = ["{NAME}"]`; the daemon\'s test resolver maps {NAME} to the loopback origins.',
    ]
    if srt is not None:
        notes.append(
            "srt: `srt --settings FILE -- COMMAND` with `denyRead` = stockade's `default` deny_read list, `allowWrite` = "
            '["."] (the project), and `allowedDomains` = [] or the origins as `127.0.0.1:PORT`: srt\'s proxy refuses names '
            "that resolve to loopback unless that address is itself allowed, and its NO_PROXY names 127.0.0.1, so curl "
            "gets `--noproxy ''` (in both sandboxes) and the keep-alive client uses the proxy from the environment, with "
            "the credentials srt puts in it."
        )
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-srt", action="store_true", help="install srt from npm into ~/.cache/stockade-bench/srt (reused) and compare")
    parser.add_argument("--srt-version", default="latest", help="npm version or tag of srt for --with-srt (default: latest)")
    parser.add_argument("--runs", type=int, help="rounds of the short workloads (default 20; the long ones take a share)")
    parser.add_argument("--quick", action="store_true", help="few rounds, a 20-command loop, 50 MB: a smoke run of well under a minute")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(WORKLOADS)} (writes nothing)")
    parser.add_argument("--no-write", action="store_true", help="print the tables, leave RESULTS.md and the plot alone")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(WORKLOADS)
    unknown = sorted(set(chosen) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)} (choose from {', '.join(WORKLOADS)})")
    for tool in ("bwrap", "curl", "openssl"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            raise SystemExit(f"bench/run_all.py needs {tool}")

    plan = make_plan(args.runs, args.quick)
    started, clock, start_load = datetime.datetime.now(datetime.UTC), time.monotonic(), os.getloadavg()[0]
    srt_binary, srt_notes = find_srt(args.with_srt, args.srt_version)
    world = World.create()
    origins = Origins.start(world.root, plan.size_mb)
    world.env["STOCKADE_PROXY_TEST_UPSTREAM_CA"] = str(origins.cert)  # the daemon verifies the inspected origin against it
    world.env["BENCH_SECRET"] = "bench-secret-value-0123456789abcdef"  # the credential row's value, swapped in by the daemon
    ports = [origins.port("http"), origins.port("https")]
    stockade = Stockade(world)
    stockade.route(ports)
    srt = Srt(srt_binary, world, ports) if srt_binary is not None else None
    bench = Bench(world, origins, plan, make_tools(stockade, srt))
    try:
        sections = [section for name in WORKLOADS if name in chosen for section in RUNNERS[name](bench)]
        found = versions(stockade, srt)
    finally:
        stockade.stop_daemon()
        origins.stop()
        world.remove()

    load = f"load average {start_load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    notes = [*srt_notes, *policy_notes(srt), f"Machine {load} (the bench does not stop other work; rerun on a quiet machine)."]
    command_line = "python bench/run_all.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    write = not (args.only or args.no_write)
    image = plot(sections, HERE / "startup.png") if write else ""
    text = report(command_line, started, time.monotonic() - clock, found, notes, sections, image)
    print(text)
    if write:
        (HERE / "RESULTS.md").write_text(text)
        progress(f"wrote {HERE / 'RESULTS.md'}" + (f" and {HERE / 'startup.png'}" if image.startswith("!") else ""))


if __name__ == "__main__":
    main()
