"""A policy written by hand, as a new user would, keeps the defaults it did not mention."""

from __future__ import annotations

import os
import subprocess

from tests.work.realwork import STOCKADE, Workplace


def test_a_file_with_only_hosts_keeps_secrets_hidden_and_the_project_writable(work: Workplace) -> None:
    (work.home / ".ssh").mkdir()
    (work.home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-CANARY\n")
    work.project.mkdir()
    policy = work.project / ".stockade.toml"
    policy.write_text('[network]\nallow = ["pypi.org", "files.pythonhosted.org"]\n')
    script = "touch written && echo wrote; cat ~/.ssh/id_rsa; true"

    untrusted = work.shell(script, sandboxed=True)
    assert "wrote" in untrusted.stdout and "PRIVATE-KEY-CANARY" not in untrusted.stdout, untrusted
    notes = [line for line in untrusted.stderr.splitlines() if "is not trusted" in line]
    assert len(notes) == 1 and 'ignored: network mode "allowlist"' in notes[0] and "stockade trust" in notes[0], untrusted.stderr

    subprocess.run([*STOCKADE, "trust"], cwd=work.project, env=work.env, check=True, capture_output=True)
    trusted = work.shell(script, sandboxed=True)
    assert "wrote" in trusted.stdout and "PRIVATE-KEY-CANARY" not in trusted.stdout, trusted
    assert "is not trusted" not in trusted.stderr

    # The control: the same file starting from nothing on purpose is read-only, and says so at trust.
    policy.write_text('extends = []\n[network]\nallow = ["pypi.org"]\n')
    said = subprocess.run([*STOCKADE, "trust"], cwd=work.project, env=work.env, check=True, capture_output=True, text=True)
    assert "is read-only" in said.stdout and "deny_read is empty" in said.stdout, said.stdout
    bare = work.shell(script, sandboxed=True)
    assert "wrote" not in bare.stdout and "Read-only file system" in bare.stderr, bare


def test_deny_write_holds_where_its_parent_folders_do_not_exist_yet(work: Workplace) -> None:
    work.project.mkdir()
    (work.project / ".stockade.toml").write_text('[filesystem]\ndeny_write = ["nonexistent-dir/settings.json", "a/b/c/file.txt"]\n')
    subprocess.run([*STOCKADE, "trust"], cwd=work.project, env=work.env, check=True, capture_output=True)
    done = work.shell("mkdir -p nonexistent-dir a/b/c && echo x > nonexistent-dir/settings.json && echo y > a/b/c/file.txt "
                      "&& echo z > a/b/c/other.txt", sandboxed=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (work.project / "nonexistent-dir" / "settings.json").exists()
    assert not (work.project / "a" / "b" / "c" / "file.txt").exists()
    assert done.stderr.count("renamed to") == 2, done.stderr
    assert (work.project / "a" / "b" / "c" / "other.txt").read_text() == "z\n"  # the control: its neighbour stays


def test_protected_names_behind_symlinks_are_protected_at_their_targets(work: Workplace) -> None:
    """deny_write spelled through a symlinked folder, and a floor folder that is itself a link
    (.claude kept in a dotfiles folder), made every run refuse to start; the targets are now
    protected, whichever spelling a write uses, and a link the run replaces is put back."""
    project = work.project
    (project / "real").mkdir(parents=True)
    (project / "link").symlink_to("real")
    (project / "real" / "settings.json").write_text("orig\n")
    (project / "dotfiles" / "claude").mkdir(parents=True)
    (project / "dotfiles" / "claude" / "settings.json").write_text("{}\n")
    (project / ".claude").symlink_to("dotfiles/claude")
    (project / ".stockade.toml").write_text('[filesystem]\ndeny_write = ["link/settings.json", "link/absent.json"]\n')
    subprocess.run([*STOCKADE, "trust"], cwd=project, env=work.env, check=True, capture_output=True)
    script = ("for f in real/settings.json link/settings.json .claude/settings.json dotfiles/claude/settings.json; do "
              "(echo hacked > $f) 2>/dev/null && echo WROTE $f; done; echo new > real/absent.json; echo ok > real/other.txt; "
              "rm .claude && mkdir .claude && echo evil > .claude/settings.json; echo DONE")  # fmt: skip
    done = work.shell(script, sandboxed=True)
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr
    assert "WROTE" not in done.stdout, done.stdout
    assert (project / "real" / "settings.json").read_text() == "orig\n"
    assert (project / "dotfiles" / "claude" / "settings.json").read_text() == "{}\n"
    assert not (project / "real" / "absent.json").exists()
    assert os.readlink(project / ".claude") == "dotfiles/claude"  # the user's link, put back
    assert [p.name for p in project.iterdir() if p.name.startswith(".claude.stockade-quarantine-")]
    assert (project / "real" / "other.txt").read_text() == "ok\n"  # the control: the rest stays writable


def test_every_link_on_the_way_to_a_protected_name_is_pinned(work: Workplace) -> None:
    """.claude -> mid -> dotfiles/claude: only the first link was pinned, so a run that pointed
    `mid` at a folder of its own left the user's .claude (its hooks run outside any sandbox)
    reading the run's settings. The same for a link inside the first link's target."""
    project = work.project
    (project / "dotfiles" / "claude").mkdir(parents=True)
    (project / "dotfiles" / "claude" / "settings.json").write_text("{}\n")
    (project / "mid").symlink_to("dotfiles/claude")
    (project / ".claude").symlink_to("mid")
    (project / "real-vscode").mkdir()
    (project / "real-vscode" / "settings.json").write_text("{}\n")
    (project / "vsdots").symlink_to(".")  # .vscode -> vsdots/real-vscode: a link inside the target
    (project / ".vscode").symlink_to("vsdots/real-vscode")
    (project / "evil" / "real-vscode").mkdir(parents=True)
    (project / "evil" / "settings.json").write_text('{"hooks": "pwned"}\n')
    (project / "evil" / "real-vscode" / "settings.json").write_text('{"hooks": "pwned"}\n')
    subprocess.run([*STOCKADE, "trust"], cwd=project, env=work.env, check=False, capture_output=True)
    script = "rm mid && ln -s evil mid && rm vsdots && ln -s evil vsdots && echo DONE"
    done = work.shell(script, sandboxed=True)
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr
    assert (project / ".claude" / "settings.json").read_text() == "{}\n"
    assert (project / ".vscode" / "settings.json").read_text() == "{}\n"
    assert os.readlink(project / "mid") == "dotfiles/claude" and os.readlink(project / "vsdots") == "."
    assert os.readlink(project / ".claude") == "mid"  # the control: the first link was never touched


def test_a_pinned_link_the_run_repointed_is_put_back_and_kept(work: Workplace) -> None:
    """The run swapped the user's .claude link for a link of its own: the sweep moved the run's
    link aside and put the user's back, then the change check took the put-back link (a new
    inode) for a planting and renamed it over the first, under the same name: the user was
    left with no .claude and the run's link was gone."""
    project = work.project
    (project / "dotfiles" / "claude").mkdir(parents=True)
    (project / "dotfiles" / "claude" / "settings.json").write_text("{}\n")
    (project / ".claude").symlink_to("dotfiles/claude")
    (project / "evil").mkdir()
    done = work.shell("rm .claude && ln -s evil .claude && echo DONE", sandboxed=True)
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr
    assert os.readlink(project / ".claude") == "dotfiles/claude", done.stderr
    aside = [p for p in project.iterdir() if p.name.startswith(".claude.stockade-quarantine-")]
    assert [os.readlink(p) for p in aside] == ["evil"], done.stderr


def test_a_run_does_not_start_while_a_running_run_s_pinned_link_is_changed(work: Workplace) -> None:
    """Run B repoints .claude and keeps running; run C, planned meanwhile, followed the run's
    link: the real dotfiles/claude was writable in C, and C pinned the run's link, so C's sweep
    (after B's had put the user's back) put the run's link back again."""
    import time

    project = work.project
    (project / "dotfiles" / "claude").mkdir(parents=True)
    (project / "dotfiles" / "claude" / "settings.json").write_text("{}\n")
    (project / ".claude").symlink_to("dotfiles/claude")
    (project / "evil").mkdir()
    b = subprocess.Popen([*STOCKADE, "run", "--", "/bin/sh", "-c", "rm .claude && ln -s evil .claude && touch swapped && "
                          "while [ ! -e go ]; do sleep 0.1; done"], cwd=project, env=work.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for _ in range(300):
            if (project / "swapped").exists() or b.poll() is not None:
                break
            time.sleep(0.1)
        assert (project / "swapped").exists(), b.communicate()
        c = work.shell('echo \'{"hooks": "pwned"}\' > dotfiles/claude/settings.json; echo C-RAN', sandboxed=True)
    finally:
        (project / "go").touch()
        b.communicate(timeout=60)
    assert "C-RAN" not in c.stdout and c.returncode != 0 and "running" in c.stderr, (c.stdout, c.stderr)
    assert (project / "dotfiles" / "claude" / "settings.json").read_text() == "{}\n"
    assert os.readlink(project / ".claude") == "dotfiles/claude"
    later = work.shell("echo C-RAN", sandboxed=True)  # the control: once B is done, runs start again
    assert "C-RAN" in later.stdout, later.stderr


def test_a_custom_audit_log_s_rotated_generations_are_hidden_too(work: Workplace) -> None:
    """Only the log itself was hidden: in a writable folder the sandbox wrote audit.jsonl.1 with
    records of its own (`stockade audit` and CI summaries read the generations) and made
    audit.jsonl.2 a FIFO that hung every reader. Now the log's whole folder is hidden (a rotation
    left a new log unmasked), while the rest of the project stays writable."""
    project = work.project
    project.mkdir(parents=True)
    (project / ".stockade.toml").write_text('[audit]\nlog = "./logs/audit.jsonl"\n')
    subprocess.run([*STOCKADE, "trust"], cwd=project, env=work.env, check=True, capture_output=True)
    script = "for g in 1 2; do (echo forged > logs/audit.jsonl.$g) 2>/dev/null && echo WROTE $g; done; ls logs >/dev/null 2>&1 && echo SEEN; echo ok > other; echo DONE"
    done = work.shell(script, sandboxed=True)
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr
    assert "WROTE" not in done.stdout and "SEEN" not in done.stdout, done.stdout
    assert (project / "other").read_text() == "ok\n"  # the control: the project is writable
    assert all("forged" not in (project / "logs" / f"audit.jsonl.{g}").read_text() for g in (1, 2))


def test_a_project_glob_reaches_every_place_the_users_policy_opens(work: Workplace) -> None:
    """`deny_read = ["**/secret.txt"]` matched only under the project, so the same name in a
    writable or shown folder elsewhere stayed readable; now each `**/` rule is copied to those
    places (and `check` lists the copies). Package caches only a built-in profile opens are not walked."""
    shared, notes, npm = work.home / "shared", work.home / "notes", work.home / ".npm"
    for place in (shared / "deep" / "er", notes, npm, work.project):
        place.mkdir(parents=True)
    for place in (shared / "deep" / "er", notes, npm, work.project):
        (place / "secret.txt").write_text("SECRET-CANARY\n")
        (place / "plain.txt").write_text("plain\n")
    (shared / "keep.cfg").write_text("kept\n")
    (work.project / ".stockade.toml").write_text(
        'extends = ["npm"]\n[filesystem]\nallow_write = [".", "~/shared"]\nallow_read = ["~/notes"]\n'
        'deny_read = ["**/secret.txt"]\ndeny_write = ["**/keep.cfg"]\n'
    )
    subprocess.run([*STOCKADE, "trust"], cwd=work.project, env=work.env, check=True, capture_output=True)
    shown = subprocess.run([*STOCKADE, "check"], cwd=work.project, env=work.env, check=True, capture_output=True, text=True)
    assert f'"{work.home}/shared/**/secret.txt"' in shown.stdout and f'"{work.home}/notes/**/secret.txt"' in shown.stdout, shown.stdout
    assert f'"{work.home}/shared/**/keep.cfg"' in shown.stdout and f"{work.home}/notes/**/keep.cfg" not in shown.stdout
    assert "/.npm/**/" not in shown.stdout
    script = ("for f in secret.txt ~/shared/deep/er/secret.txt ~/notes/secret.txt; do cat $f 2>/dev/null && echo READ $f; done; "
              "cat plain.txt ~/shared/deep/er/plain.txt ~/notes/plain.txt ~/.npm/plain.txt; "
              "(echo x > ~/shared/keep.cfg) 2>/dev/null && echo WROTE; echo y > ~/shared/other.cfg; echo DONE")  # fmt: skip
    done = work.shell(script, sandboxed=True)
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr
    assert "READ" not in done.stdout and "WROTE" not in done.stdout and "SECRET-CANARY" not in done.stdout, done.stdout
    assert done.stdout.count("plain\n") == 4, done.stdout  # the control: neighbours stay readable
    assert (shared / "keep.cfg").read_text() == "kept\n"
    assert (shared / "other.cfg").read_text() == "y\n"  # the control: the place stays writable
