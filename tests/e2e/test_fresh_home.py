"""A fresh home (a new user, a new CI runner): the policy's caches are made before the run."""

from __future__ import annotations

import stat

from tests.e2e.boxes import Box


def test_absent_cache_folders_under_home_are_created_and_writable(vbox: Box) -> None:
    npm_cache = vbox.home / ".npm"
    assert not npm_cache.exists()
    result = vbox.run("touch ~/.npm/written && echo OK", options=["--profile", "npm"])
    assert "OK" in result.stdout, result
    assert stat.S_IMODE(npm_cache.stat().st_mode) == 0o700
    assert "does not exist" not in result.stderr, result
    # the write went to the project's layer over the cache (bwrap/parts/layers.py), where the next run finds it
    assert not (npm_cache / "written").exists()
    assert vbox.run("test -e ~/.npm/written && echo THERE", options=["--profile", "npm"]).stdout == "THERE\n"


def test_agent_profile_in_a_fresh_home_says_nothing(vbox: Box) -> None:
    result = vbox.run("true", options=["--profile", "agent"])
    assert result.returncode == 0 and result.stderr == "", result


def test_a_folder_that_cannot_be_made_is_said_in_the_plan_not_after_every_run(vbox: Box) -> None:
    (vbox.home / "blocker").write_text("a file where a folder would go\n")
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{vbox.home}/blocker/cache"]\n'
    run = vbox.run("echo ran", policy=policy)
    assert run.returncode == 0 and "ran" in run.stdout and "blocker" not in run.stderr, run
    plan = vbox.run("true", policy=policy, options=["--dry-run"])
    assert "blocker/cache does not exist and could not be created" in plan.stdout, plan
    verbose = vbox.run("true", policy=policy, options=["--verbose"])
    assert verbose.stderr.count("blocker/cache") == 1 and "could not be created" in verbose.stderr, verbose


def test_nothing_is_made_outside_home(vbox: Box) -> None:
    target = vbox.outside / "new-cache"
    policy = f'extends = ["default"]\n[filesystem]\nallow_write = [".", "{target}"]\n'
    run = vbox.run("true", policy=policy)
    assert run.returncode == 0, run
    assert not target.exists()


def test_a_dry_run_makes_nothing_and_says_what_a_run_would(vbox: Box) -> None:
    npm_cache = vbox.home / ".npm"
    plan = vbox.run("true", options=["--profile", "npm", "--dry-run"])
    assert plan.returncode == 0 and not npm_cache.exists(), plan
    assert f"allow_write {npm_cache} does not exist: a run makes it" in plan.stdout, plan.stdout
    ran = vbox.run("true", options=["--profile", "npm"])  # the control: the run itself makes it
    assert ran.returncode == 0 and npm_cache.is_dir(), ran
