"""A user's day as data: each scenario is a starting project and a shell script.

tests/day/test_day.py runs every one bare and under `stockade run` (the default
and the agent profile) on fresh copies at one path, and compares what a user
would see: the exit status, the output and the project afterwards. Offline on
purpose: what crosses the network is tested where its hosts are (tests/e2e).
A scenario names the programs it needs; where one is missing it is skipped.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.work.realwork import FIXED_DATES

# Python scenarios run Debian's python3, with pytest, xdist and pip copied where the sandbox sees them
# (test_day.py: PYTHONPATH): the test venv may be in a folder the sandbox keeps private.
PYTHON_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "xdist", "execnet", "py", "pip")
GIT_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", **FIXED_DATES,
           "GIT_AUTHOR_NAME": "Day", "GIT_AUTHOR_EMAIL": "day@example.test", "GIT_COMMITTER_NAME": "Day",
           "GIT_COMMITTER_EMAIL": "day@example.test"}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    name: str
    script: str
    setup: str = "empty"
    needs: tuple[str, ...] = field(default=())


def _git(project: Path, *words: str) -> None:
    subprocess.run(["git", "-c", "init.defaultBranch=main", *words], cwd=project, env=GIT_ENV, check=True, capture_output=True)


def empty(project: Path) -> None:
    pass


def files(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "main.c").write_text('#include <stdio.h>\nint main(void) { puts("hello from c"); return 0; }\n')
    (project / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (project / "with space.txt").write_text("spaced\n")
    (project / "ünïcode-ñame.txt").write_text("unicode\n")
    (project / "data.csv").write_text("id,name,score\n1,ann,90\n2,bob,85\n3,cy,77\n")
    (project / "script.sh").write_text('#!/bin/sh\necho "script ran with $# args: $*"\n')
    os.chmod(project / "script.sh", 0o755)
    (project / "link-to-notes").symlink_to("notes.txt")


def repo(project: Path) -> None:
    files(project)
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "first")
    (project / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    _git(project, "commit", "-qam", "second")
    _git(project, "checkout", "-qb", "feature")
    (project / "feature.txt").write_text("a feature\n")
    _git(project, "add", "feature.txt")
    _git(project, "commit", "-qm", "feature work")
    _git(project, "checkout", "-q", "main")
    _git(project, "tag", "v1.0")


def pyproj(project: Path) -> None:
    (project / "app").mkdir()
    (project / "app" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_app.py").write_text(
        "import app\n\n\ndef test_add():\n    assert app.add(2, 3) == 5\n\n\ndef test_more():\n    assert app.add(-1, 1) == 0\n"
    )
    (project / "pyproject.toml").write_text('[project]\nname = "dayapp"\nversion = "0.1"\n[tool.pytest.ini_options]\npythonpath = ["."]\n')


def nodeproj(project: Path) -> None:
    (project / "vendor" / "leftpad").mkdir(parents=True)
    (project / "vendor" / "leftpad" / "package.json").write_text('{"name": "leftpad", "version": "1.0.0", "main": "index.js"}\n')
    (project / "vendor" / "leftpad" / "index.js").write_text("module.exports = (s, n) => String(s).padStart(n, '.');\n")
    (project / "package.json").write_text(
        '{"name": "dayapp", "version": "1.0.0", "private": true,\n'
        ' "scripts": {"test": "node test.js", "build": "node build.js", "hello": "echo hello from npm"}}\n'
    )
    (project / "test.js").write_text("const assert = require('assert'); assert.strictEqual(1 + 1, 2); console.log('node tests ok');\n")
    (project / "build.js").write_text(
        "require('fs').mkdirSync('dist', {recursive: true}); require('fs').writeFileSync('dist/out.txt', 'built\\n');\n"
    )


SETUPS: dict[str, Callable[[Path], None]] = {"empty": empty, "files": files, "repo": repo, "pyproj": pyproj, "nodeproj": nodeproj}

S = Scenario
GIT = ("git",)
SCENARIOS: list[Scenario] = [
    # -- git: the first commands of a new project ---------------------------------------------
    S("git-init-add-commit", "git init -q && git add -A && git commit -qm init && git log --oneline && git status --short", "files", GIT),
    S("git-init-then-config-local", "git init -q && git config --local -l | sort", "files", GIT),
    S("git-init-in-subfolder", "mkdir sub && cd sub && git init -q && git status --short && ls -a", "files", GIT),
    S("git-init-bare", "git init -q --bare store.git && git --git-dir=store.git rev-parse --is-bare-repository", "empty", GIT),
    S("git-init-branch-name", "git init -q -b trunk && git symbolic-ref HEAD", "empty", GIT),
    S("git-config-user-name", "git config user.name 'Someone Else' && git config user.name", "repo", GIT),
    S("git-config-alias-plain", "git config alias.st status && git st --short", "repo", GIT),
    S("git-config-unset", "git config --unset user.name; echo $?", "repo", GIT),
    # -- git: everyday history work -----------------------------------------------------------
    S("git-status-clean", "git status --short --branch", "repo", GIT),
    S("git-log-graph", "git log --oneline --graph --all --decorate", "repo", GIT),
    S("git-diff-worktree", "echo more >> notes.txt && git diff --stat", "repo", GIT),
    S("git-add-patch-commit", "echo x > new.txt && git add new.txt && git commit -qm new && git show --stat --oneline HEAD", "repo", GIT),
    S("git-commit-amend", "git commit -q --amend -m 'second, reworded' && git log --format=%s", "repo", GIT),
    S(
        "git-branch-switch",
        "git switch -q -c topic && echo t > t.txt && git add t.txt && git commit -qm t && git switch -q main && git branch",
        "repo",
        GIT,
    ),
    S("git-merge-ff", "git merge -q --ff-only feature && git log --oneline", "repo", GIT),
    S("git-merge-no-ff", "git merge -q --no-ff -m merged feature && git log --oneline --graph", "repo", GIT),
    S(
        "git-merge-conflict",
        "git checkout -q -b other HEAD~1 && echo other > notes.txt && git commit -qam other && git merge main; echo merge=$?; git status --short",
        "repo",
        GIT,
    ),
    S("git-rebase", "git checkout -q feature && git rebase -q main && git log --oneline", "repo", GIT),
    S("git-rebase-interactive-noop", "GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~1 && git log --oneline", "repo", GIT),
    S("git-cherry-pick", "git cherry-pick feature >/dev/null && git log --oneline -2", "repo", GIT),
    S("git-revert", "git revert --no-edit HEAD >/dev/null && git log --format=%s -2", "repo", GIT),
    S("git-reset-hard", "echo junk >> notes.txt && git reset -q --hard && git status --short", "repo", GIT),
    S("git-reset-soft", "git reset -q --soft HEAD~1 && git status --short", "repo", GIT),
    S("git-stash-pop", "echo wip >> notes.txt && git stash -q && git status --short && git stash pop -q && git diff --stat", "repo", GIT),
    S("git-stash-list", "echo wip >> notes.txt && git stash -q && git stash list", "repo", GIT),
    S("git-tag-annotated", "git tag -a v2 -m release && git tag -l && git describe", "repo", GIT),
    S(
        "git-bisect",
        "git bisect start HEAD HEAD~1 >/dev/null && git bisect run sh -c 'grep -q delta notes.txt && exit 1 || exit 0' | tail -3; git bisect reset -q",
        "repo",
        GIT,
    ),
    S("git-blame", "git blame --porcelain notes.txt | grep -c '^author Day'", "repo", GIT),
    S("git-clean", "touch junk.tmp && mkdir junkdir && touch junkdir/x && git clean -fdq && git status --short", "repo", GIT),
    S("git-mv-rm", "git mv notes.txt moved.txt && git rm -q 'with space.txt' && git commit -qm moves && git status --short && ls", "repo", GIT),
    S("git-archive", "git archive --format=tar HEAD | tar -t | sort", "repo", GIT),
    S(
        "git-worktree-add",
        "git worktree add -q ../wt-day feature 2>&1 | tail -1; git worktree list | wc -l; git worktree remove ../wt-day 2>/dev/null; echo done",
        "repo",
        GIT,
    ),
    S("git-worktree-inside", "git worktree add -q wt feature && ls wt && git -C wt log --oneline -1 && git worktree remove wt", "repo", GIT),
    S(
        "git-submodule-local",
        "git init -q lib && git -C lib commit -q --allow-empty -m lib && git -c protocol.file.allow=always submodule add -q ./lib lib 2>&1; git status --short",
        "repo",
        GIT,
    ),
    S("git-clone-local", "git clone -q . ../clone-day && git -C ../clone-day log --oneline | wc -l; rm -rf ../clone-day", "repo", GIT),
    S("git-clone-into-project", "git clone -q --no-local . copy && git -C copy log --oneline | wc -l && git -C copy status --short", "repo", GIT),
    S("git-gc-fsck", "git gc -q && git fsck --no-progress 2>&1 | grep -v dangling; echo ok", "repo", GIT),
    S("git-notes", "git notes add -m 'a note' && git notes show", "repo", GIT),
    S("git-sparse-checkout", "git sparse-checkout set src >/dev/null 2>&1; ls; git sparse-checkout disable", "repo", GIT),
    S("git-hook-sample-untouched", "ls .git/hooks | grep -c sample", "repo", GIT),
    S(
        "git-apply-patch",
        "echo change >> notes.txt && git diff > ../day.patch && git checkout -q notes.txt && git apply ../day.patch && git diff --stat; rm ../day.patch",
        "repo",
        GIT,
    ),
    S("git-format-patch-am", "git format-patch -q -1 feature -o patches && git am -q patches/*.patch && git log --format=%s -1", "repo", GIT),
    S("git-shortlog", "git shortlog -sn --all", "repo", GIT),
    S("git-grep", "git grep -n beta", "repo", GIT),
    S("git-reflog", "git reflog | wc -l", "repo", GIT),
    S("git-rev-parse-toplevel", "mkdir -p deep/er && cd deep/er && git rev-parse --show-toplevel --show-prefix", "repo", GIT),
    S("git-check-ignore", "printf '*.log\\n' > .gitignore && touch a.log && git check-ignore a.log && git status --short", "repo", GIT),
    S(
        "git-attributes-eol",
        "printf '*.txt text eol=lf\\n' > .gitattributes && git add .gitattributes && git commit -qm attrs && git ls-files --eol notes.txt | cut -c1-20",
        "repo",
        GIT,
    ),
    S("git-commit-hook-free", "git commit -q --allow-empty -m empty && git log --format=%s -1", "repo", GIT),
    S("git-switch-detached", "git switch -q --detach v1.0 && git rev-parse --abbrev-ref HEAD", "repo", GIT),
    # -- shell and files -------------------------------------------------------------------------
    S("sh-echo-status", "echo hello; exit 3", "empty"),
    S("sh-stderr", "echo to-err >&2; echo to-out", "empty"),
    S("sh-pipes", "printf 'b\\na\\nc\\n' | sort | uniq | tr a-z A-Z", "empty"),
    S("sh-mkdir-touch-ls", "mkdir -p a/b/c && touch a/b/c/file && find a | sort", "empty"),
    S("sh-symlink", "ln -s notes.txt again && cat again && readlink again", "files"),
    S("sh-hardlink", "ln notes.txt hard && stat -c %h notes.txt", "files"),
    S("sh-chmod", "chmod 600 notes.txt && stat -c %a notes.txt && chmod +x notes.txt && test -x notes.txt && echo exec", "files"),
    S("sh-mv-over", "echo new > new.txt && mv new.txt notes.txt && cat notes.txt", "files"),
    S("sh-cp-a", "cp -a src src-copy && ls -l src-copy | wc -l", "files"),
    S("sh-rm-rf", "rm -rf src && ls", "files"),
    S("sh-sed-inplace", "sed -i 's/beta/BETA/' notes.txt && cat notes.txt", "files"),
    S("sh-perl-inplace", "perl -pi -e 's/alpha/ALPHA/' notes.txt && cat notes.txt", "files", ("perl",)),
    S("sh-awk", "awk -F, 'NR>1 {s+=$3} END {print s}' data.csv", "files"),
    S("sh-find-xargs", "find . -name '*.txt' -print0 | xargs -0 wc -l | sort", "files"),
    S("sh-odd-names", "touch 'a b' \"it's\" '-dash' 'tab\there' && ls | sort", "empty"),
    S("sh-newline-name", "touch \"$(printf 'new\\nline')\" && ls | wc -l", "empty"),
    S("sh-long-path", 'p=$(printf \'segment%.0s/\' $(seq 1 30)) && mkdir -p "$p" && touch "$p/leaf" && find . -name leaf | wc -c', "empty"),
    S("sh-long-name", "n=$(printf 'x%.0s' $(seq 1 250)) && touch \"$n\" && ls | wc -c", "empty"),
    S("sh-script-args", "./script.sh one 'two three'", "files"),
    S("sh-umask", "umask 027 && touch u && stat -c %a u", "empty"),
    S("sh-mktemp-tmp", 'f=$(mktemp) && echo hi > "$f" && cat "$f" && rm "$f"', "empty"),
    S("sh-tmpdir-var", 'f=$(mktemp -p "${TMPDIR:-/tmp}") && test -w "$f" && echo writable && rm "$f"', "empty"),
    S("sh-fifo", "mkfifo pipe && (echo through > pipe &) && cat pipe && rm pipe", "empty"),
    S("sh-flock", "flock lockfile -c 'echo locked' && ls", "empty", ("flock",)),
    S("sh-background-wait", "(sleep 0.2; echo late) & wait; echo done", "empty"),
    S("sh-trap-exit", "trap 'echo trapped' EXIT; exit 4", "empty"),
    S("sh-subshell-cd", "(cd src && pwd | sed 's|.*/||') && pwd | sed 's|.*/||'", "files"),
    S("sh-dev-null-zero", "head -c 4 /dev/zero | od -An -tx1 && echo x > /dev/null && echo ok", "empty"),
    S("sh-urandom", "head -c 16 /dev/urandom | wc -c", "empty"),
    S("sh-ulimit-n", "ulimit -n > /dev/null && echo ok", "empty"),
    S("sh-env-home-user", 'test -n "$HOME" && test -d "$HOME" && echo home-ok; id -un >/dev/null && echo user-ok', "empty"),
    S("sh-whoami-groups", "whoami >/dev/null && id -G | wc -w | grep -q . && echo ok", "empty"),
    S("sh-hostname", "hostname > /dev/null && echo ok", "empty"),
    S("sh-date-tz", "TZ=Asia/Tokyo date -d @0 +%H && TZ=UTC date -d @0 +%H", "empty"),
    S("sh-locale", "LC_ALL=C.UTF-8 printf '%s\\n' 'ünï' | wc -m", "empty"),
    S("sh-nproc", 'test "$(nproc)" -ge 1 && echo ok', "empty"),
    S("sh-df-du", "du -s . > /dev/null && df . > /dev/null && echo ok", "files"),
    S("sh-ps-self", "ps -o comm= -p $$", "empty", ("ps",)),
    # the shell's own "Terminated" notice depends on whether the child died before `wait` ran, bare as
    # inside: kept off the comparison; the status is what the scenario is about
    S("sh-kill-self-child", "{ sleep 5 & kill $! && wait $!; } 2>/dev/null; echo status=$?", "empty"),
    S("sh-exit-by-signal", "kill -TERM $$", "empty"),
    S("sh-command-not-found", "no-such-command-anywhere; echo status=$?", "empty"),
    S("sh-stdin-closed", "cat < /dev/null | wc -c", "empty"),
    S("sh-large-output", "seq 1 200000 | tail -1", "empty"),
    S("sh-write-big-file", "head -c 20000000 /dev/zero > big && stat -c %s big && rm big", "empty"),
    S("sh-proc-self", "test -r /proc/self/status && grep -c '^Name' /proc/self/status", "empty"),
    S("sh-editor-atomic-save", "printf 'edited\\n' > .notes.txt.swp && mv .notes.txt.swp notes.txt && cat notes.txt", "files"),
    S("sh-vim-ex-edit", "vi -u NONE -es -c '%s/gamma/GAMMA/' -c 'wq' notes.txt; cat notes.txt", "files", ("vi",)),
    S("sh-ed-edit", "printf ',s/alpha/ALPHA/\\nw\\nq\\n' | ed -s notes.txt && cat notes.txt", "files", ("ed",)),
    S(
        "sh-patch",
        "printf -- '--- notes.txt\\n+++ notes.txt\\n@@ -1,3 +1,3 @@\\n alpha\\n-beta\\n+BETA\\n gamma\\n' | patch -s -p0 && cat notes.txt",
        "files",
        ("patch",),
    ),
    S("sh-diff", "printf 'alpha\\nBETA\\ngamma\\n' > other && diff notes.txt other; echo status=$?", "files"),
    S("sh-jq", "echo '{\"a\": [1, 2, 3]}' | jq -c '.a | map(. * 2)'", "empty", ("jq",)),
    S("sh-bc", "echo '2^20' | bc", "empty", ("bc",)),
    S("sh-file-cmd", "file -b --mime-type notes.txt", "files", ("file",)),
    # -- archives --------------------------------------------------------------------------------
    S("tar-create-extract", "tar -czf a.tgz src notes.txt && mkdir out && tar -xzf a.tgz -C out && find out | sort && rm a.tgz", "files"),
    S("tar-xz", "tar -cJf a.txz notes.txt && tar -tJf a.txz && rm a.txz", "files", ("xz",)),
    S("tar-zstd", "tar --zstd -cf a.tzst notes.txt && tar --zstd -tf a.tzst && rm a.tzst", "files", ("zstd",)),
    S("zip-unzip", "zip -qr a.zip src notes.txt && mkdir z && cd z && unzip -q ../a.zip && find . | sort && rm ../a.zip", "files", ("zip", "unzip")),
    S("gzip-gunzip", "gzip -kn notes.txt && gunzip -c notes.txt.gz | head -1", "files"),
    S("bzip2", "bzip2 -k notes.txt && bzcat notes.txt.bz2 | wc -l", "files", ("bzip2",)),
    # -- C and make -------------------------------------------------------------------------------
    S("cc-build-run", "cc -o hello src/main.c && ./hello", "files", ("cc",)),
    S(
        "make-build",
        "printf 'all: out.txt\\nout.txt: notes.txt\\n\\tsort -r notes.txt > out.txt\\n' > Makefile && make -s && cat out.txt && make -s && echo again",
        "files",
        ("make",),
    ),
    S("make-parallel", "printf 'all: a b c\\na b c:\\n\\t@echo $@ > $@.out\\n' > Makefile && make -s -j4 && cat *.out | sort", "empty", ("make",)),
    # -- Python ----------------------------------------------------------------------------------
    S("py-hello", "python3 -c 'print(\"hello\")'", "empty", ("python3",)),
    S("py-exit-code", "python3 -c 'import sys; sys.exit(7)'", "empty", ("python3",)),
    S("py-exception", "python3 -c 'raise ValueError(\"boom\")' 2>&1 | tail -1", "empty", ("python3",)),
    S(
        "py-write-files",
        'python3 -c \'import pathlib; pathlib.Path("out/x.txt").parent.mkdir(); pathlib.Path("out/x.txt").write_text("x")\' && cat out/x.txt',
        "empty",
        ("python3",),
    ),
    S(
        "py-atomic-replace",
        'python3 -c \'import os; open("t.tmp","w").write("new"); os.replace("t.tmp","notes.txt")\' && cat notes.txt',
        "files",
        ("python3",),
    ),
    S(
        "py-sqlite",
        'python3 -c \'import sqlite3; c=sqlite3.connect("db.sqlite"); c.execute("create table t(x)"); c.execute("insert into t values (1),(2)"); c.commit(); print(c.execute("select sum(x) from t").fetchone()[0])\'',
        "empty",
        ("python3",),
    ),
    S(
        "py-sqlite-wal",
        'python3 -c \'import sqlite3; c=sqlite3.connect("w.db"); print(c.execute("pragma journal_mode=wal").fetchone()[0]); c.execute("create table t(x)"); c.commit()\'',
        "empty",
        ("python3",),
    ),
    S("py-json-tool", 'echo \'{"b":1,"a":2}\' | python3 -m json.tool --sort-keys', "empty", ("python3",)),
    S(
        "py-venv-create",
        "python3 -m venv --without-pip .venv && .venv/bin/python -c 'import sys; print(sys.prefix != sys.base_prefix)'",
        "empty",
        ("python3",),
    ),
    S("py-compileall", "python3 -m compileall -q app && find app -name '*.pyc' | wc -l", "pyproj", ("python3",)),
    S("py-unittest", "python3 -m unittest discover -q -s tests -t . 2>&1 | tail -1", "pyproj", ("python3",)),
    S("py-pytest", "python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -1", "pyproj", ("python3",)),
    S(
        "py-pytest-fail",
        "echo 'def test_bad(): assert False' > tests/test_bad.py && python3 -m pytest -q -p no:cacheprovider tests >/dev/null; echo status=$?",
        "pyproj",
        ("python3",),
    ),
    S("py-pytest-xdist", "python3 -m pytest -q -p no:cacheprovider -p xdist.plugin -n 2 tests 2>&1 | tail -1", "pyproj", ("python3",)),
    S(
        "py-multiprocessing",
        "python3 -c 'import multiprocessing as m\nif __name__==\"__main__\":\n  print(sum(m.Pool(2).map(abs, [-1,-2,-3])))'",
        "empty",
        ("python3",),
    ),
    S(
        "py-threads",
        "python3 -c 'import concurrent.futures as f; print(sum(f.ThreadPoolExecutor(4).map(lambda x: x*x, range(10))))'",
        "empty",
        ("python3",),
    ),
    S(
        "py-subprocess",
        'python3 -c \'import subprocess; print(subprocess.run(["echo","child"],capture_output=True,text=True).stdout.strip())\'',
        "empty",
        ("python3",),
    ),
    S(
        "py-tempfile",
        'python3 -c \'import tempfile; d=tempfile.mkdtemp(); open(d+"/f","w").write("x"); print(open(d+"/f").read())\'',
        "empty",
        ("python3",),
    ),
    S(
        "py-locale-time",
        'python3 -c \'import time, os; os.environ["TZ"]="Europe/Paris"; time.tzset(); print(time.strftime("%Z", time.localtime(0)))\'',
        "empty",
        ("python3",),
    ),
    S(
        "py-tarfile-zipfile",
        'python3 -c \'import shutil; shutil.make_archive("a", "zip", "src"); shutil.make_archive("b", "gztar", "src")\' && ls a.zip b.tar.gz && rm a.zip b.tar.gz',
        "files",
        ("python3",),
    ),
    S(
        "py-socket-local",
        'python3 -c \'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); c=socket.create_connection(s.getsockname()); a,_=s.accept(); c.send(b"hi"); print(a.recv(2))\'',
        "empty",
        ("python3",),
    ),
    S(
        "py-unix-socket",
        'python3 -c \'import socket; s=socket.socket(socket.AF_UNIX); s.bind("sock"); s.listen(); c=socket.socket(socket.AF_UNIX); c.connect("sock"); a,_=s.accept(); c.send(b"u"); print(a.recv(1))\' && rm sock',
        "empty",
        ("python3",),
    ),
    S(
        "py-http-server-loopback",
        "python3 -m http.server 0 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 0.1; kill $!; echo started",
        "empty",
        ("python3",),
    ),
    S(
        "py-pip-local-wheel",
        "python3 -m pip wheel -q --no-deps --no-build-isolation -w wheels . 2>/dev/null; ls wheels 2>/dev/null | sed 's/-py3.*//'",
        "pyproj",
    ),
    S(
        "py-pip-install-target",
        "python3 -m pip install -q --no-index --no-deps --no-build-isolation --target t . 2>&1 | tail -1; ls t | grep -c app",
        "pyproj",
    ),
    S("py-site-user", "python3 -c 'import site; print(site.ENABLE_USER_SITE in (True, False, None))'", "empty", ("python3",)),
    S("py-getpass-user", "python3 -c 'import getpass; print(bool(getpass.getuser()))'", "empty", ("python3",)),
    S("py-os-walk-home", "python3 -c 'import os; print(os.path.isdir(os.path.expanduser(\"~\")))'", "empty", ("python3",)),
    # -- Node ------------------------------------------------------------------------------------
    S("node-hello", "node -e 'console.log(\"hello\")'", "empty", ("node",)),
    S("node-exit-code", "node -e 'process.exit(5)'", "empty", ("node",)),
    S(
        "node-fs",
        'node -e \'require("fs").writeFileSync("n.txt", "node"); console.log(require("fs").readFileSync("n.txt", "utf8"))\'',
        "empty",
        ("node",),
    ),
    S("node-child-process", 'node -e \'console.log(require("child_process").execSync("echo kid").toString().trim())\'', "empty", ("node",)),
    S(
        "node-os-tmpdir",
        'node -e \'const os=require("os"),fs=require("fs"),p=require("path"); const d=fs.mkdtempSync(p.join(os.tmpdir(),"x")); console.log(fs.existsSync(d))\'',
        "empty",
        ("node",),
    ),
    S(
        "node-worker-threads",
        'node -e \'const {Worker}=require("worker_threads"); new Worker("postMessage(42)",{eval:true}).on("message",m=>console.log(m))\'',
        "empty",
        ("node",),
    ),
    S(
        "node-http-loopback",
        'node -e \'const h=require("http"); const s=h.createServer((q,r)=>r.end("pong")).listen(0,"127.0.0.1",()=>h.get(`http://127.0.0.1:${s.address().port}`,r=>{r.on("data",d=>{console.log(String(d)); s.close()})}))\'',
        "empty",
        ("node",),
    ),
    S("npm-init", "npm init -y >/dev/null && node -p 'require(\"./package.json\").name'", "empty", ("npm",)),
    S("npm-run-scripts", "npm run -s hello && npm test --silent && npm run -s build && cat dist/out.txt", "nodeproj", ("npm",)),
    S(
        "npm-install-local-folder",
        'npm install --no-audit --no-fund --silent ./vendor/leftpad && node -e \'console.log(require("leftpad")("x", 3))\'',
        "nodeproj",
        ("npm",),
    ),
    S("npm-pack", "npm pack --silent ./vendor/leftpad && ls *.tgz", "nodeproj", ("npm",)),
    S("npm-ls", "npm ls --depth=0 2>/dev/null | tail -n +2; echo ok", "nodeproj", ("npm",)),
    S("npm-config-get", "npm config get fund", "empty", ("npm",)),
    S(
        "npx-local-bin",
        "mkdir -p node_modules/.bin && printf '#!/bin/sh\\necho local bin\\n' > node_modules/.bin/daytool && chmod +x node_modules/.bin/daytool && npx --no-install daytool",
        "nodeproj",
        ("npx",),
    ),
    # -- Rust ------------------------------------------------------------------------------------
    S("cargo-new-build", "cargo new -q --vcs none dayrs && cd dayrs && cargo build -q --offline && ./target/debug/dayrs", "empty", ("cargo",)),
    # -- projects reached through links and odd places ------------------------------------------
    S("cwd-through-symlink", 'ln -s "$PWD" ../day-link && cd ../day-link && touch via-link && ls via-link && rm ../day-link', "files"),
    S("read-outside-project", "test -r /etc/passwd && head -c 0 /etc/os-release && echo readable", "empty"),
    S("write-outside-project-refused", "touch ../outside-file 2>/dev/null; echo status=$?; rm -f ../outside-file", "empty"),
    S("home-dotfile-read", "git config --global user.name", "empty", GIT),
    S("home-scratch-write", "mkdir -p ~/.cache/daytool && echo x > ~/.cache/daytool/f && cat ~/.cache/daytool/f", "empty"),
]
