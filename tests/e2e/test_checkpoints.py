"""Every run can be undone: real sandboxes change a real project, `stockade undo` puts it back exactly.

Each test snapshots the project (every entry's kind, mode, content or link
target, and a file's mtime), runs real tools in the sandbox, checks that they
did what they do (the control), then undoes and compares the snapshot byte for
byte. The security tests show a checkpoint never changes what the sandbox
could not, and that the sandbox cannot reach the checkpoints.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.boxes import Box
from tests.treesnap import snapshot


def stockade(box: Box, *words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stockade.cli.main", *words], cwd=cwd or box.project, env=box.env, capture_output=True, text=True, timeout=120
    )


def _project(box: Box) -> None:
    src = box.project / "src"
    (src / "pkg" / "empty").mkdir(parents=True)
    (src / "main.py").write_text("print('hello')\n")
    (src / "pkg" / "data.bin").write_bytes(bytes(range(256)) * 40)
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    (src / "run.sh").chmod(0o755)
    (src / "readonly.txt").write_text("keep\n")
    (src / "readonly.txt").chmod(0o444)
    os.symlink("main.py", src / "link-to-main")
    os.symlink("../nowhere", src / "dangling")
    (box.project / "README").write_text("readme\n")


def test_rm_rf_is_undone_byte_for_byte(vbox: Box) -> None:
    _project(vbox)
    before = snapshot(vbox.project)
    run = vbox.run("rm -rf src && echo GONE")
    assert "GONE" in run.stdout and not (vbox.project / "src").exists(), run
    assert "stockade: this run removed 9 paths; `stockade undo` puts back everything it changed" in run.stderr, run
    undo = stockade(vbox, "undo")
    assert undo.returncode == 0, undo
    assert snapshot(vbox.project) == before


def test_an_editor_s_atomic_save_is_undone(vbox: Box) -> None:
    _project(vbox)
    before = snapshot(vbox.project)
    script = "printf 'print(1)\\n' > src/.main.py.swp && mv src/.main.py.swp src/main.py && cat src/main.py"
    run = vbox.run(script)
    assert run.stdout == "print(1)\n", run
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before


def test_writes_in_place_truncations_and_mode_changes_are_undone(vbox: Box) -> None:
    _project(vbox)
    before = snapshot(vbox.project)
    script = (
        "python3 -c \"f=open('src/pkg/data.bin','r+b'); f.seek(10); f.write(b'XYZ'); f.close()\" && "
        ": > README && echo more >> src/run.sh && chmod 600 src/main.py && truncate -s 5 src/main.py && echo DONE"
    )
    run = vbox.run(script)
    assert "DONE" in run.stdout, run
    assert (vbox.project / "README").read_text() == "" and stat.S_IMODE((vbox.project / "src/main.py").stat().st_mode) == 0o600
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before


def test_a_large_truncated_file_keeps_its_content_and_the_run_sees_its_write(vbox: Box) -> None:
    big = vbox.project / "big.bin"
    content = os.urandom(5 * 1024 * 1024)
    big.write_bytes(content)
    run = vbox.run("printf new > big.bin && cat big.bin")
    assert run.stdout == "new", run
    assert big.read_bytes() == b"new"
    assert stockade(vbox, "undo").returncode == 0
    assert big.read_bytes() == content


def test_a_hard_linked_file_written_through_its_other_name_is_undone(vbox: Box) -> None:
    first = vbox.project / "a.txt"
    first.write_text("original\n")
    os.link(first, vbox.project / "b.txt")
    before = snapshot(vbox.project)
    run = vbox.run("rm a.txt && python3 -c \"f=open('b.txt','r+'); f.write('CHANGED'); f.close()\" && cat b.txt")
    assert run.stdout.startswith("CHANGED"), run
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before
    assert os.stat(first).st_ino == os.stat(vbox.project / "b.txt").st_ino  # one file with two names again


def test_a_git_checkout_of_another_branch_is_undone_with_git_s_own_state(vbox: Box) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    env = {**vbox.env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}

    def host_git(*words: str) -> str:
        return subprocess.run([git, *words], cwd=vbox.project, env=env, check=True, capture_output=True, text=True).stdout

    host_git("init", "-q", "-b", "main")
    (vbox.project / "app.py").write_text("version = 1\n")
    (vbox.project / "only-main.txt").write_text("main\n")
    host_git("add", "-A")
    host_git("commit", "-qm", "one")
    host_git("checkout", "-qb", "feature")
    (vbox.project / "app.py").write_text("version = 2\n")
    host_git("rm", "-q", "only-main.txt")
    (vbox.project / "new.txt").write_text("feature\n")
    host_git("add", "-A")
    host_git("commit", "-qm", "two")
    host_git("checkout", "-q", "main")
    (vbox.project / "notes.txt").write_text("untracked work\n")
    before = snapshot(vbox.project, times=False)
    run = vbox.run("git checkout -q feature && git branch --show-current", env={k: v for k, v in env.items() if k.startswith("GIT_")})
    assert run.stdout.strip() == "feature", run
    assert host_git("branch", "--show-current").strip() == "feature"
    undo = stockade(vbox, "undo")
    assert undo.returncode == 0, undo
    assert snapshot(vbox.project, times=False) == before  # before git status, which refreshes the index
    assert host_git("branch", "--show-current").strip() == "main"
    assert host_git("status", "--porcelain") == "?? notes.txt\n"


def test_a_build_s_new_folder_is_removed(vbox: Box) -> None:
    (vbox.project / "package.json").write_text('{"name": "demo"}\n')
    before = snapshot(vbox.project)
    script = (
        "python3 -c \"\nimport os\nfor i in range(300):\n    d = f'node_modules/pkg{i}/lib'\n    os.makedirs(d)\n"
        "    open(f'{d}/index.js', 'w').write('module.exports = %d' % i)\nos.symlink('pkg1', 'node_modules/.bin')\n\" && echo BUILT"
    )
    run = vbox.run(script)
    assert "BUILT" in run.stdout and (vbox.project / "node_modules/pkg299/lib/index.js").exists(), run
    listed = stockade(vbox, "runs")
    assert "1 new" in listed.stdout, listed
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before


def test_undo_keeps_the_user_s_other_edits_and_undo_twice_walks_back(vbox: Box) -> None:
    _project(vbox)
    before = snapshot(vbox.project)
    assert vbox.run("echo one > src/main.py").returncode == 0
    after_first = snapshot(vbox.project)
    assert vbox.run("rm src/run.sh").returncode == 0
    (vbox.project / "mine.txt").write_text("the user's own file\n")  # made on the host between the runs
    assert stockade(vbox, "undo").returncode == 0
    assert (vbox.project / "src/run.sh").exists() and (vbox.project / "mine.txt").read_text() == "the user's own file\n"
    assert snapshot(vbox.project) == {**after_first, "mine.txt": snapshot(vbox.project)["mine.txt"]}
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == {**before, "mine.txt": snapshot(vbox.project)["mine.txt"]}
    third = stockade(vbox, "undo")
    assert third.returncode == 1 and "nothing left to undo" in third.stdout, third


def test_a_path_changed_since_the_run_stops_undo_and_force_keeps_it(vbox: Box) -> None:
    (vbox.project / "notes.txt").write_text("first\n")
    assert vbox.run("echo agent > notes.txt").returncode == 0
    (vbox.project / "notes.txt").write_text("the user's edit after the run\n")
    refused = stockade(vbox, "undo")
    assert refused.returncode == 1 and "notes.txt: changed since the run" in refused.stdout, refused
    assert (vbox.project / "notes.txt").read_text() == "the user's edit after the run\n"
    forced = stockade(vbox, "undo", "--force")
    assert forced.returncode == 0 and (vbox.project / "notes.txt").read_text() == "first\n", forced
    number = forced.stdout.split("`stockade undo ")[1].split("`")[0]
    assert stockade(vbox, "undo", number).returncode == 0  # the undo of the undo: the user's edit is back
    assert (vbox.project / "notes.txt").read_text() == "the user's edit after the run\n"


def test_undo_of_an_older_run_names_the_later_run_that_changed_its_paths(vbox: Box) -> None:
    (vbox.project / "a.txt").write_text("a\n")
    (vbox.project / "b.txt").write_text("b\n")
    assert vbox.run("echo 1 > a.txt").returncode == 0
    assert vbox.run("echo 2 > a.txt; echo 2 > b.txt").returncode == 0
    listed = stockade(vbox, "runs")
    first = listed.stdout.splitlines()[1].split()[0]
    refused = stockade(vbox, "undo", first)
    assert refused.returncode == 1 and "a.txt: changed again by run" in refused.stdout, refused
    assert stockade(vbox, "undo").returncode == 0  # the last one first
    assert stockade(vbox, "undo").returncode == 0
    assert (vbox.project / "a.txt").read_text() == "a\n" and (vbox.project / "b.txt").read_text() == "b\n"


def test_a_run_killed_halfway_leaves_a_checkpoint_undo_can_use(vbox: Box) -> None:
    files = vbox.project / "files"
    files.mkdir()
    for number in range(400):
        (files / f"f{number:03}").write_text(f"content {number}\n")
    before = snapshot(vbox.project)
    script = 'for f in files/*; do rm "$f"; sleep 0.005; done'
    process = subprocess.Popen([*vbox.command_words(), "--", "/bin/sh", "-c", script], cwd=vbox.project, env=vbox.env, start_new_session=True)
    deadline = time.monotonic() + 30
    while len(os.listdir(files)) > 300 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)  # stockade and bwrap at once, as an agent's timeout does
    process.wait(timeout=30)
    time.sleep(0.5)  # the sandbox dies with its parent
    left = len(os.listdir(files))
    assert 0 < left < 400, left
    listed = stockade(vbox, "runs")
    assert "killed" in listed.stdout, listed
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before


def test_the_sandbox_can_neither_read_nor_write_the_checkpoints(vbox: Box) -> None:
    (vbox.project / "secret-before.txt").write_text("kept in a checkpoint\n")
    assert vbox.run("rm secret-before.txt").returncode == 0
    store = vbox.home / ".local/state/stockade/checkpoints"
    kept = [path for path in store.rglob("*") if path.is_file() and path.name == "records"]
    assert kept, "control: the checkpoint exists on the host"
    probe = vbox.run(f"ls {store} 2>&1; cat {kept[0]} 2>&1; touch {store}/planted 2>&1; echo END")
    assert "secret-before" not in probe.stdout and "END" in probe.stdout, probe
    assert not (store / "planted").exists()


def test_a_checkpoint_never_empties_a_file_the_sandbox_could_not_write(vbox: Box) -> None:
    protected = vbox.project / "protected.bin"
    content = os.urandom(5 * 1024 * 1024)  # large: the path that swaps in an empty file, were it allowed
    protected.write_bytes(content)
    readonly = vbox.project / "readonly.bin"
    readonly.write_bytes(content)
    readonly.chmod(0o444)
    policy = f'[filesystem]\ndeny_write = ["{protected}"]\n'
    script = "(: > protected.bin); echo $?; (: > readonly.bin); echo $?; printf ok > other.txt; echo $?"
    run = vbox.run(script, policy=policy)
    codes = run.stdout.split()
    assert codes[0] != "0" and codes[1] != "0", run  # both refused inside
    assert codes[2] == "0" and (vbox.project / "other.txt").read_text() == "ok"  # control: the run could write
    assert protected.read_bytes() == content and readonly.read_bytes() == content


def test_checkpoints_off_leave_nothing(vbox: Box) -> None:
    (vbox.project / "a.txt").write_text("a\n")
    run = vbox.run("rm a.txt", policy="[checkpoints]\nenabled = false\n")
    assert run.returncode == 0, run
    listed = stockade(vbox, "runs")
    assert "no run has changed" in listed.stdout, listed
    control = vbox.run("echo b > b.txt")
    assert control.returncode == 0
    assert "1 new" in stockade(vbox, "runs").stdout


def test_a_file_over_the_size_limit_is_named_not_kept(vbox: Box) -> None:
    (vbox.project / "large.bin").write_bytes(os.urandom(300_000))
    (vbox.project / "small.txt").write_text("small\n")
    run = vbox.run("rm large.bin small.txt", policy='[checkpoints]\nmax_size = "100K"\n')
    assert run.returncode == 0, run
    listed = stockade(vbox, "runs")
    assert "1 not kept" in listed.stdout, listed
    undo = stockade(vbox, "undo")
    assert undo.returncode == 0 and "could not put back large.bin" in undo.stdout, undo
    assert (vbox.project / "small.txt").read_text() == "small\n"


def test_runs_and_undo_say_what_is_wrong_in_one_line(vbox: Box) -> None:
    nothing = stockade(vbox, "undo")
    assert nothing.returncode == 1 and "nothing to undo" in nothing.stdout, nothing
    assert vbox.run("echo x > x.txt").returncode == 0
    unknown = stockade(vbox, "undo", "999")
    assert unknown.returncode == 2 and "no run 999" in unknown.stderr and "Traceback" not in unknown.stderr, unknown
    details = stockade(vbox, "runs", stockade(vbox, "runs").stdout.splitlines()[1].split()[0])
    assert "new        x.txt" in details.stdout, details


def test_a_file_bound_on_its_own_takes_the_write_and_is_undone(vbox: Box) -> None:
    single = vbox.outside / "shared.bin"
    content = os.urandom(5 * 1024 * 1024)  # large: a new inode in its place would never reach the sandbox's bind
    single.write_bytes(content)
    run = vbox.run(f"printf new > {single} && cat {single}", policy=f'[filesystem]\nallow_write = ["{single}"]\n')
    assert run.stdout == "new", run
    assert single.read_bytes() == b"new"  # the write reached the host's file
    assert stockade(vbox, "undo").returncode == 0
    assert single.read_bytes() == content


def test_a_file_linked_during_the_run_and_written_through_the_new_name_is_undone(vbox: Box) -> None:
    (vbox.project / "b.txt").write_text("bravo\n")
    (vbox.project / "c.txt").write_text("charlie\n")
    os.link(vbox.project / "c.txt", vbox.project / "c2.txt")  # two names before the run
    before = snapshot(vbox.project)
    run = vbox.run("ln b.txt a.txt && echo CHANGED > a.txt && echo CHANGED > c2.txt && cat b.txt c.txt")
    assert run.stdout == "CHANGED\nCHANGED\n", run  # control: both writes reached every name
    assert stockade(vbox, "undo").returncode == 0
    assert snapshot(vbox.project) == before


def test_undo_never_moves_or_writes_through_a_link_a_later_run_put_in_a_folder_s_place(vbox: Box) -> None:
    key = vbox.home / ".ssh" / "id_test"  # the user's, hidden from every sandbox
    (vbox.project / "src").mkdir()
    (vbox.project / "src" / "id_test").write_text("the project's file of that name\n")
    assert vbox.run("rm -rf src").returncode == 0
    planted = vbox.run(f"ln -s {vbox.home}/.ssh src && echo PLANTED")
    assert "PLANTED" in planted.stdout, planted  # a later run (an agent's) leaves a link where src was
    first = stockade(vbox, "runs").stdout.splitlines()[1].split()[0]
    refused = stockade(vbox, "undo", first)
    assert refused.returncode == 1 and "src: changed again by run" in refused.stdout, refused
    forced = stockade(vbox, "undo", first, "--force")
    assert forced.returncode == 0, forced
    assert key.read_text() == "CANARY-SSH\n" and sorted(os.listdir(vbox.home / ".ssh")) == ["id_test"]
    assert not (vbox.project / "src").is_symlink()  # control: undo did put the folder back, as a folder
    assert (vbox.project / "src" / "id_test").read_text() == "the project's file of that name\n"


PLANTED = "echo PWNED\n"


@pytest.mark.parametrize(
    "plant",
    [
        "echo 'echo PWNED' > /proc/self/cwd/.envrc",  # a path through /proc's link to the cwd
        "echo 'echo PWNED' > /proc/$$/cwd/.envrc",  # through another process's, by its pid inside
        "ln -s .envrc l && echo 'echo PWNED' > l && rm l",  # through a link to nothing
        "mkdir -p .claude && echo 'echo PWNED' > /proc/self/root$PWD/.claude/settings.json && mv .claude/settings.json .envrc",
    ],
)
def test_undo_never_puts_back_a_file_that_runs_code_later_which_the_run_planted(vbox: Box, plant: str) -> None:
    run = vbox.run(f"{plant}; cat .envrc; chmod 600 .envrc; rm .envrc; rm -rf .claude; echo DONE")
    assert "PWNED" in run.stdout and "DONE" in run.stdout, run  # control: the run did write it, and hid it from the sweep
    assert not (vbox.project / ".envrc").exists()
    undo = stockade(vbox, "undo")
    assert not (vbox.project / ".envrc").exists(), undo
    assert not (vbox.project / ".claude" / "settings.json").exists(), undo


def test_undo_puts_back_git_s_config_that_stockade_carried_back(vbox: Box) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q"], cwd=vbox.project, check=True)
    before = (vbox.project / ".git" / "config").read_text()
    run = vbox.run("git remote add origin https://example.invalid/repo.git && git remote")
    assert run.stdout == "origin\n", run
    assert "origin" in (vbox.project / ".git" / "config").read_text()  # carried back to the host
    assert stockade(vbox, "undo").returncode == 0
    assert (vbox.project / ".git" / "config").read_text() == before


def test_a_failed_rmdir_records_nothing_and_undo_keeps_later_work(vbox: Box) -> None:
    (vbox.project / "src").mkdir()
    (vbox.project / "src" / "main.py").write_text("main\n")
    run = vbox.run("rmdir . 2>/dev/null; rmdir src 2>/dev/null; echo changed > notes; true")
    assert run.returncode == 0, run
    (vbox.project / "src" / "added.py").write_text("the user's later work\n")
    (vbox.project / "NEW_WORK.md").write_text("more of it\n")
    assert stockade(vbox, "undo").returncode == 0
    assert not (vbox.project / "notes").exists()  # control: the run's own change is undone
    assert (vbox.project / "src" / "added.py").exists() and (vbox.project / "NEW_WORK.md").exists()
    assert (vbox.project / "src" / "main.py").read_text() == "main\n"


def test_a_bwrap_the_command_runs_is_watched_like_any_program(vbox: Box) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the preloaded library")
    source = vbox.project / "evil.c"
    source.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void plant(void) {\n"
        '  const char *where = getenv("PLANT"); if (!where) return;\n'
        '  FILE *f = fopen(where, "w"); if (f) { fputs("planted\\n", f); fclose(f); } exit(0); }\n'
    )
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(vbox.project / "evil.so"), str(source)], check=True, capture_output=True)
    bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
    run = vbox.run(f'PLANT="$PWD/planted.txt" LD_PRELOAD="$PWD/evil.so" {bwrap} --version; echo DONE')
    assert "DONE" in run.stdout and (vbox.project / "planted.txt").read_text() == "planted\n", run
    assert "1 new" in stockade(vbox, "runs").stdout  # recorded: that bwrap is the command's, not the sandbox's own
    assert stockade(vbox, "undo").returncode == 0
    assert not (vbox.project / "planted.txt").exists()


def test_a_small_file_renamed_or_chmodded_keeps_its_link_count_inside(vbox: Box) -> None:
    (vbox.project / "a.txt").write_text("a\n")
    run = vbox.run("mv a.txt b.txt && chmod +x b.txt && ln b.txt c.txt && stat -c %h b.txt")
    assert run.stdout == "2\n", run  # as without a sandbox: the checkpoint's copies are no links
    assert stockade(vbox, "undo").returncode == 0
    assert (vbox.project / "a.txt").read_text() == "a\n" and not (vbox.project / "b.txt").exists()


def test_a_file_a_checkpoint_shares_is_not_taken_for_a_link_elsewhere(vbox: Box) -> None:
    large = "a\n" * (1 << 20)  # over LINK_ABOVE: a rename keeps its inode by a link
    (vbox.project / "a.txt").write_text(large)
    (vbox.project / "run.sh").write_text("echo hi\n")
    assert vbox.run("mv a.txt b.txt && chmod +x run.sh").returncode == 0
    assert os.stat(vbox.project / "b.txt").st_nlink == 2  # its old name's record shares the inode
    second = vbox.run("true")
    assert "its own" not in second.stderr, second  # not a uv store's link: nothing copied, nothing said
    assert os.stat(vbox.project / "b.txt").st_nlink == 2
    write = vbox.run("echo changed > b.txt")  # a write in place: the checkpoint's copy is its own first
    assert write.returncode == 0
    assert stockade(vbox, "undo").returncode == 0 and stockade(vbox, "undo").returncode == 0
    assert (vbox.project / "a.txt").read_text() == large and not (vbox.project / "b.txt").exists()


def test_undo_never_plants_a_file_brought_under_a_protected_name_by_its_folder(vbox: Box) -> None:
    hook = '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch PWNED"}]}]}}'
    assert vbox.run(f"mkdir stash && printf '%s' '{hook}' > stash/settings.json").returncode == 0
    time.sleep(0.05)
    run = vbox.run("ln -s /proc/self/cwd /tmp/l && mv /tmp/l/stash /tmp/l/.claude && rm .claude/settings.json && rmdir .claude; echo DONE")
    assert "DONE" in run.stdout, run
    stockade(vbox, "undo")
    assert not (vbox.project / ".claude" / "settings.json").exists()


def test_undo_works_with_the_checkpoints_on_another_filesystem(vbox: Box) -> None:
    state = Path("/dev/shm") / f"stockade-test-state-{os.getpid()}-{vbox.root.name}"
    if not Path("/dev/shm").is_dir() or os.stat("/dev/shm").st_dev == os.stat(vbox.project).st_dev:
        pytest.skip("no second filesystem here")
    try:
        vbox.env["XDG_STATE_HOME"] = str(state)
        _project(vbox)
        before = snapshot(vbox.project)
        run = vbox.run("rm -rf src && mkdir made && echo x > made/f && echo new > README")
        assert run.returncode == 0, run
        undo = stockade(vbox, "undo")
        assert undo.returncode == 0, undo
        assert snapshot(vbox.project) == before
        redo = stockade(vbox, "undo", undo.stdout.split("`stockade undo ")[1].split("`")[0])
        assert redo.returncode == 0 and (vbox.project / "made" / "f").read_text() == "x\n", redo
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_a_write_through_a_link_into_proc_is_followed(vbox: Box) -> None:
    (vbox.project / "keep.txt").write_text("mine\n")
    run = vbox.run("ln -s /proc/self/cwd /tmp/l && printf hacked > /tmp/l/keep.txt && ln -s /proc/self/root/proc/self/cwd /tmp/m && touch /tmp/m/new")
    assert run.returncode == 0 and (vbox.project / "keep.txt").read_text() == "hacked", run
    assert stockade(vbox, "undo").returncode == 0
    assert (vbox.project / "keep.txt").read_text() == "mine\n" and not (vbox.project / "new").exists()


DEEP = """
import os
near, far = ["d" * 100] * 30, ["e" * 100] * 15
os.makedirs("/".join(near))
os.rename("big.bin", "/".join(near) + "/moved.bin")  # recorded: its path is under 4096 bytes
for name in near:
    os.chdir(name)
os.makedirs("/".join(far))
os.rename("moved.bin", "/".join(far) + "/moved.bin")  # relative: fine for the kernel, past 4096 bytes in full
for name in far:
    os.chdir(name)
with open("moved.bin", "r+b") as handle:  # its folder's name is past 4096 bytes: the thread cannot follow
    handle.write(b"XXXX")
print("DONE")
"""


def test_a_change_the_checkpoint_cannot_follow_is_counted_and_a_spoiled_copy_is_not_handed_back(vbox: Box) -> None:
    big = vbox.project / "big.bin"
    content = os.urandom(2 << 20)  # kept by a link when renamed
    big.write_bytes(content)
    run = vbox.run(None, argv=["python3", "-c", DEEP])
    assert "DONE" in run.stdout, run
    listed = stockade(vbox, "runs")
    assert "not followed" in listed.stdout, listed
    undo = stockade(vbox, "undo")
    assert "its checkpoint could not follow" in undo.stdout, undo
    assert "could not put back big.bin: its kept copy was changed after it was kept" in undo.stdout, undo
    assert not big.exists() or big.read_bytes() == content  # never the spoiled bytes as the user's
