"""Package caches the sandbox writes through a layer of its own (issue 32, item 4; ESCAPES 93).

A cache a policy makes writable holds code the host runs later (a `build.rs` in
a cargo checkout, a wheel pip built, a hook pre-commit cloned). Each attack
writes, adds or removes there and checks the host's cache as the host's next
`cargo build` would find it; each control checks the sandbox's work still
works: it reads the host's cache, its writes are there for it, and for its next
run in the same project.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from stockade.bwrap.parts import layers
from tests.e2e.boxes import Box

pytestmark = pytest.mark.e2e

BUILD_RS = "fn main() {}\n"


def _policy(box: Box, *places: str) -> str:
    """The project and `places` writable (the policy file lies in the box's root, above the home)."""
    listed = ", ".join(f'"{place}"' for place in (str(box.project), *places))
    return f'extends = ["default"]\n[filesystem]\nallow_write = [{listed}]\n'


def _checkout(box: Box) -> Path:
    """A dependency cargo fetched on the host: ~/.cargo/git/checkouts/dep-1/abc/build.rs."""
    checkout = box.home / ".cargo" / "git" / "checkouts" / "dep-1" / "abc"
    checkout.mkdir(parents=True)
    (checkout / "build.rs").write_text(BUILD_RS)
    (checkout / "Cargo.toml").write_text('[package]\nname = "dep"\n')
    return checkout


def _layer_files(box: Box) -> list[Path]:
    return [p for p in (box.home / ".cache" / "stockade" / "layers").rglob("*") if "/upper/" in str(p)]


def test_a_build_script_rewritten_in_a_cargo_checkout_never_reaches_the_host(vbox: Box) -> None:
    checkout = _checkout(vbox)
    inside = "~/.cargo/git/checkouts/dep-1/abc"
    attack = vbox.run(
        f"echo 'evil' > {inside}/build.rs && mkdir -p ~/.cargo/git/checkouts/dep-2/def "
        f"&& echo evil > ~/.cargo/git/checkouts/dep-2/def/build.rs && rm {inside}/Cargo.toml && cat {inside}/build.rs "
        f"&& test ! -e {inside}/Cargo.toml && echo DONE",
        policy=_policy(vbox, "~/.cargo/git"),
    )
    assert attack.returncode == 0 and "evil\nDONE" in attack.stdout, attack  # the sandbox's own view has its writes
    assert (checkout / "build.rs").read_text() == BUILD_RS, "the host's next cargo build would run the sandbox's build.rs"
    assert (checkout / "Cargo.toml").exists(), "the sandbox removed a file of the host's cache"
    assert not (vbox.home / ".cargo" / "git" / "checkouts" / "dep-2").exists()
    # Control: the next run of this project sees what the last one wrote; the host's other files read through.
    again = vbox.run(
        f"cat {inside}/build.rs ~/.cargo/git/checkouts/dep-2/def/build.rs; test ! -e {inside}/Cargo.toml && echo GONE",
        policy=_policy(vbox, "~/.cargo/git"),
    )
    assert again.stdout == "evil\nevil\nGONE\n", again


def test_another_project_sees_the_hosts_cache_not_this_ones_layer(vbox: Box) -> None:
    checkout = _checkout(vbox)
    first = vbox.run("echo mine > ~/.cargo/git/checkouts/dep-1/abc/build.rs", policy=_policy(vbox, "~/.cargo/git"))
    assert first.returncode == 0, first
    other = vbox.outside / "other-project"
    other.mkdir()
    (other / "policy.toml").write_text(_policy(vbox, "~/.cargo/git"))  # its folder is that run's project
    seen = vbox.run("cat ~/.cargo/git/checkouts/dep-1/abc/build.rs", options=["--policy", str(other / "policy.toml")], cwd=other)
    assert seen.stdout == BUILD_RS, seen
    assert (checkout / "build.rs").read_text() == BUILD_RS


def test_every_cache_a_policy_can_open_is_layered(vbox: Box) -> None:
    """Every cache of layers.LAYERED_CACHES, made writable by name: a file written in each stays in the layer."""
    names = [entry[2:] for entry in layers.LAYERED_CACHES]
    for name in names:
        (vbox.home / name).mkdir(parents=True, exist_ok=True)
    script = " && ".join(f"echo planted > ~/{name}/planted" for name in names) + " && echo DONE"
    attack = vbox.run(script, policy=_policy(vbox, *layers.LAYERED_CACHES))
    assert attack.returncode == 0 and "DONE" in attack.stdout, attack
    reached = [name for name in names if (vbox.home / name / "planted").exists()]
    assert reached == [], f"written on the host: {reached}"
    assert len([p for p in _layer_files(vbox) if p.name == "planted"]) == len(names)


def test_a_writable_home_layers_the_caches_inside_it_and_nothing_else(vbox: Box) -> None:
    (vbox.home / ".cache" / "pip").mkdir(parents=True)
    attack = vbox.run(
        "echo planted > ~/.cache/pip/wheel.whl && mkdir -p ~/.cargo/registry/src/x && echo planted > ~/.cargo/registry/src/x/build.rs "
        "&& echo notes > ~/notes.txt && echo DONE",
        policy=_policy(vbox, "~"),
    )
    assert attack.returncode == 0 and "DONE" in attack.stdout, attack
    assert not (vbox.home / ".cache" / "pip" / "wheel.whl").exists()
    assert not (vbox.home / ".cargo" / "registry" / "src").exists()  # a cache the host had not made: layered too
    assert (vbox.home / "notes.txt").read_text() == "notes\n"  # control: the home itself is writable as the policy says


def test_a_writable_folder_inside_a_cache_is_layered(vbox: Box) -> None:
    wheels = vbox.home / ".cache" / "pip" / "wheels"
    wheels.mkdir(parents=True)
    (wheels / "host.whl").write_text("host\n")
    attack = vbox.run(
        "cat ~/.cache/pip/wheels/host.whl && echo planted > ~/.cache/pip/wheels/x.whl && echo DONE", policy=_policy(vbox, "~/.cache/pip/wheels")
    )
    assert attack.stdout == "host\nDONE\n", attack
    assert sorted(p.name for p in wheels.iterdir()) == ["host.whl"]


def test_a_cache_under_deny_write_stays_read_only(vbox: Box) -> None:
    checkout = _checkout(vbox)
    policy = _policy(vbox, "~/.cargo/git") + 'deny_write = ["~/.cargo/git/checkouts"]\n'
    attack = vbox.run("echo evil > ~/.cargo/git/checkouts/dep-1/abc/build.rs; echo rc=$?; echo ok > ~/.cargo/git/top && echo TOP", policy=policy)
    assert "rc=0" not in attack.stdout and "Read-only file system" in attack.stderr and "TOP" in attack.stdout, (
        attack
    )  # refused where denied, written (to the layer) elsewhere
    assert (checkout / "build.rs").read_text() == BUILD_RS and not (vbox.home / ".cargo" / "git" / "top").exists()


def test_where_overlay_cannot_be_mounted_the_sandbox_gets_a_private_cache(vbox: Box) -> None:
    """stockade's cache at a path overlay's options cannot spell (a comma): the layer's upper folder
    alone is bound, so the sandbox still writes, and still never to the host's cache."""
    checkout = _checkout(vbox)
    cache = vbox.root / "cache,odd"
    attack = vbox.run(
        "ls ~/.cargo/git; echo evil > ~/.cargo/git/planted && cat ~/.cargo/git/planted",
        policy=_policy(vbox, "~/.cargo/git"),
        env={"XDG_CACHE_HOME": str(cache)},
    )
    assert attack.returncode == 0 and attack.stdout == "evil\n", attack  # private and empty: the host's checkouts are not shown
    assert not (vbox.home / ".cargo" / "git" / "planted").exists() and (checkout / "build.rs").read_text() == BUILD_RS
    assert [p.name for p in cache.rglob("planted")] == ["planted"]


def test_a_cache_made_a_link_after_planning_is_refused(vbox: Box) -> None:
    """A stored plan names ~/.cargo/git; a link put there since (by another run of a writable home)
    would make the overlay show the link's target: the run stops, and the next one plans again."""
    _checkout(vbox)
    policy = _policy(vbox, "~/.cargo/git")
    assert vbox.run("true", policy=policy).returncode == 0  # the plan is stored
    cargo_git = vbox.home / ".cargo" / "git"
    shutil.move(str(cargo_git), str(vbox.home / ".cargo" / "git.old"))
    os.symlink(vbox.home / ".ssh", cargo_git)
    result = vbox.run("cat ~/.cargo/git/id_test", policy=policy)
    assert "CANARY-SSH" not in result.stdout, result
    assert result.returncode != 0, result


def _toolchain() -> str | None:
    """The folder of a real cargo and rustc (rustup's proxies need the user's own RUSTUP_HOME: asked here)."""
    import subprocess

    cargo = shutil.which("cargo") or shutil.which("cargo", path=os.path.expanduser("~/.cargo/bin"))
    if cargo is None:
        return None
    found = subprocess.run([cargo, "--version"], capture_output=True, text=True)
    if found.returncode != 0:
        return None
    which = subprocess.run([os.path.join(os.path.dirname(cargo), "rustup"), "which", "cargo"], capture_output=True, text=True)
    return os.path.dirname(which.stdout.strip()) if which.returncode == 0 else os.path.dirname(os.path.realpath(cargo))


def test_a_real_cargo_build_uses_the_warm_git_checkout_through_its_layer(vbox: Box) -> None:
    """A crate whose dependency (with a build script) cargo fetched from git on the host: `cargo build
    --offline` in the sandbox builds it from ~/.cargo/git, and the host's checkout is as cargo left it."""
    import subprocess

    toolchain = _toolchain()
    if toolchain is None:
        pytest.skip("no cargo here")
    env = {**vbox.env, "PATH": f"{toolchain}:/usr/bin:/bin"}
    dep = vbox.outside / "dep"
    (dep / "src").mkdir(parents=True)
    (dep / "Cargo.toml").write_text('[package]\nname = "dep"\nversion = "0.1.0"\nedition = "2021"\n')
    (dep / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    (dep / "build.rs").write_text('fn main() { println!("cargo:rerun-if-changed=build.rs"); }\n')
    for words in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-qm", "one"]):
        subprocess.run(["git", *words], cwd=dep, check=True, env=env, capture_output=True)
    (vbox.project / "src").mkdir()
    (vbox.project / "Cargo.toml").write_text(
        f'[package]\nname = "proj"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\ndep = {{ git = "file://{dep}" }}\n'
    )
    (vbox.project / "src" / "main.rs").write_text('fn main() { println!("{}", dep::answer()); }\n')
    fetched = subprocess.run(["cargo", "fetch", "-q"], cwd=vbox.project, env=env, capture_output=True, text=True, timeout=120)
    assert fetched.returncode == 0, fetched.stderr
    before = {p: p.stat().st_mtime_ns for p in (vbox.home / ".cargo" / "git").rglob("*")}
    built = vbox.run(
        "cargo build --offline -q && ./target/debug/proj", policy=_policy(vbox, "~/.cargo/git", "~/.cargo/registry"), env=env, timeout=300
    )
    assert built.returncode == 0 and built.stdout == "42\n", built
    assert {p: p.stat().st_mtime_ns for p in (vbox.home / ".cargo" / "git").rglob("*")} == before


def _module(box: Box) -> Path:
    module = box.home / "go" / "pkg" / "mod" / "example.com" / "m@v1"
    module.mkdir(parents=True)
    (module / "a.go").write_text("package m\n")
    return module


def test_the_folders_above_a_cache_cannot_be_renamed_to_plant_one_in_its_place(vbox: Box) -> None:
    """The cache's own folder is a mount point; the folders between the writable place and it are
    pinned too, so a run cannot move them away and make a plain folder where the cache was."""
    module = _module(vbox)
    attack = vbox.run(
        "mv ~/go/pkg ~/go/pkg.x; mkdir -p ~/go/pkg/mod/example.com/m@v1; echo EVIL > ~/go/pkg/mod/example.com/m@v1/a.go; echo DONE",
        policy=_policy(vbox, "~/go"),
    )
    assert "DONE" in attack.stdout, attack
    assert (module / "a.go").read_text() == "package m\n" and not (vbox.home / "go" / "pkg.x").exists()
    checkout = _checkout(vbox)
    home_wide = vbox.run(
        "mv ~/.cargo ~/.cargo.x; mkdir -p ~/.cargo/git/checkouts/dep-1/abc; echo EVIL > ~/.cargo/git/checkouts/dep-1/abc/build.rs; echo DONE",
        policy=_policy(vbox, "~"),
    )
    assert "DONE" in home_wide.stdout, home_wide
    assert (checkout / "build.rs").read_text() == BUILD_RS and not (vbox.home / ".cargo.x").exists()
    # control: the folders above are still writable as the policy says
    made = vbox.run("echo notes > ~/go/NOTES && cat ~/go/NOTES", policy=_policy(vbox, "~/go"))
    assert made.stdout == "notes\n" and (vbox.home / "go" / "NOTES").exists(), made


def test_a_cache_that_is_a_link_or_absent_is_kept_by_the_floor(vbox: Box) -> None:
    """A cache the host has not made, or one that is a link out of every writable place, is not
    layered: what the run makes there is moved aside after it, so the host never builds from it."""
    elsewhere = vbox.outside / "registry"
    (elsewhere / "src").mkdir(parents=True)
    (vbox.home / ".cargo").mkdir()
    (vbox.home / ".cargo" / "registry").symlink_to(elsewhere)
    attack = vbox.run(
        "rm ~/.cargo/registry && mkdir -p ~/.cargo/registry/src && echo EVIL > ~/.cargo/registry/src/build.rs; "
        "mkdir -p ~/.cargo/git/checkouts/x && echo EVIL > ~/.cargo/git/checkouts/x/build.rs; echo DONE",
        policy=_policy(vbox, "~/.cargo"),
    )
    assert "DONE" in attack.stdout, attack
    assert os.readlink(vbox.home / ".cargo" / "registry") == str(elsewhere), attack  # put back
    assert not (elsewhere / "src" / "build.rs").exists()
    assert not (vbox.home / ".cargo" / "git").exists(), attack  # made during the run: moved aside
    assert "stockade-quarantine" in attack.stderr, attack


def test_deny_write_over_a_cache_holds(vbox: Box) -> None:
    checkout = _checkout(vbox)
    policy = _policy(vbox, "~") + 'deny_write = ["~/.cargo"]\n'
    attack = vbox.run("echo evil > ~/.cargo/git/checkouts/dep-1/abc/build.rs; echo rc=$?; echo ok > ~/notes && echo NOTES", policy=policy)
    assert "rc=0" not in attack.stdout and "NOTES" in attack.stdout, attack
    assert (checkout / "build.rs").read_text() == BUILD_RS


def test_a_writable_place_inside_a_hidden_folder_of_a_cache_is_seen_through_the_layer(vbox: Box) -> None:
    crate = vbox.home / ".cargo" / "registry" / "src" / "x"
    crate.mkdir(parents=True)
    (crate / "f").write_text("host\n")
    (vbox.home / ".cargo" / "registry" / "src" / "secret").write_text("CANARY-SRC\n")
    policy = _policy(vbox, "~/.cargo/registry", "~/.cargo/registry/src/x") + 'deny_read = ["~/.cargo/registry/src"]\n'
    result = vbox.run("cat ~/.cargo/registry/src/x/f && echo mine > ~/.cargo/registry/src/x/f && cat ~/.cargo/registry/src/secret", policy=policy)
    assert result.stdout.startswith("host\n") and "CANARY-SRC" not in result.stdout, result
    assert (crate / "f").read_text() == "host\n"
