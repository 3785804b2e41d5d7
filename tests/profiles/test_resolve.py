"""Choosing and merging policies: extends, discovery, trust and narrowing."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.core.locations import Locations
from stockade.profiles.model import NetworkMode
from stockade.profiles.resolve import project_chain, resolve
from stockade.profiles.trust import TrustStore, chain_digest


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_no_policy_means_builtin_default(project: Path, locations: Locations) -> None:
    result = resolve(project, locations)
    policy = result.policy
    assert policy.origin == "builtin:default"
    assert policy.filesystem.allow_write == (str(project),)
    assert policy.network.mode is NetworkMode.NONE
    assert str(locations.home / ".ssh") in policy.filesystem.deny_read


def test_extends_merges_lists_and_later_scalars_win(project: Path, locations: Locations) -> None:
    write(project / "base.toml", '[network]\nmode = "open"\nallow = ["a.test"]\n[limits]\npids = 10\n')
    policy_file = write(
        project / "p.toml", 'extends = ["./base.toml", "default"]\n[network]\nmode = "allowlist"\nallow = ["b.test", "a.test"]\n[limits]\npids = 20\n'
    )
    policy = resolve(project, locations, policy_file=policy_file).policy
    assert policy.network.allow == ("a.test", "b.test")
    assert policy.network.mode is NetworkMode.ALLOWLIST
    assert policy.limits.pids == 20
    assert policy.sources == (str(project / "base.toml"), "builtin:default", str(policy_file))


def test_allow_without_mode_means_allowlist(project: Path, locations: Locations) -> None:
    policy_file = write(project / "p.toml", '[network]\nallow = ["a.test"]\n')
    assert resolve(project, locations, policy_file=policy_file).policy.network.mode is NetworkMode.ALLOWLIST


def test_extends_cycle_is_reported(project: Path, locations: Locations) -> None:
    write(project / "a.toml", 'extends = ["./b.toml"]\n')
    write(project / "b.toml", '# b\nextends = ["./a.toml"]\n')
    with pytest.raises(PolicyError, match=r"b\.toml:2: extends cycle: .*a\.toml -> .*b\.toml -> .*a\.toml"):
        resolve(project, locations, policy_file=project / "a.toml")


def test_unknown_builtin_in_extends_names_the_line(project: Path, locations: Locations) -> None:
    write(project / "p.toml", '\nextends = ["defualt"]\n')
    with pytest.raises(PolicyError, match=r"p\.toml:2: no built-in profile named 'defualt' \(did you mean 'default'\?\)"):
        resolve(project, locations, policy_file=project / "p.toml")


def test_missing_extends_file(project: Path, locations: Locations) -> None:
    write(project / "p.toml", 'extends = ["./nope.toml"]\n')
    with pytest.raises(PolicyError, match=r"p\.toml:1: extends './nope.toml': no such file"):
        resolve(project, locations, policy_file=project / "p.toml")


def test_discovery_walks_up(project: Path, locations: Locations) -> None:
    write(project / ".stockade.toml", 'extends = ["default"]\n')
    sub = project / "a" / "b"
    sub.mkdir(parents=True)
    result = resolve(sub, locations)
    assert result.project_file == project / ".stockade.toml"
    assert result.policy.project_dir == project


UNTRUSTED = """extends = ["default"]
[filesystem]
allow_write = [".", "/etc", "~"]
deny_read = ["./secrets"]
[network]
mode = "open"
[env]
pass = ["GITHUB_TOKEN"]
set = { CI = "1" }
[limits]
pids = 50
[audit]
log = "~/.bashrc"
"""


def test_untrusted_project_policy_only_narrows(project: Path, locations: Locations) -> None:
    write(project / ".stockade.toml", UNTRUSTED)
    result = resolve(project, locations)
    policy = result.policy
    assert not result.trusted
    assert policy.filesystem.allow_write == (str(project),)
    assert str(project / "secrets") in policy.filesystem.deny_read
    assert policy.network.mode is NetworkMode.NONE
    assert policy.env.passthrough == ()
    assert policy.env.set == (("CI", "1"),)
    assert policy.limits.pids == 50
    assert policy.audit.log is None
    dropped = " | ".join(result.dropped)
    for expected in ("allow_write /etc", f"allow_write {locations.home}", 'network mode "open"', "env pass GITHUB_TOKEN", "audit log"):
        assert expected in dropped


def test_trusted_project_policy_applies_until_it_changes(project: Path, locations: Locations) -> None:
    policy_file = write(project / ".stockade.toml", UNTRUSTED)
    TrustStore(locations.trust_file).trust(policy_file, chain_digest(project_chain(policy_file, locations)))
    trusted = resolve(project, locations)
    assert trusted.trusted and trusted.policy.network.mode is NetworkMode.OPEN
    policy_file.write_text(UNTRUSTED + "\n# changed\n")
    assert not resolve(project, locations).trusted


def test_trust_covers_extended_files(project: Path, locations: Locations) -> None:
    base = write(project / "base.toml", '[network]\nallow = ["a.test"]\n')
    policy_file = write(project / ".stockade.toml", 'extends = ["./base.toml"]\n')
    TrustStore(locations.trust_file).trust(policy_file, chain_digest(project_chain(policy_file, locations)))
    assert resolve(project, locations).trusted
    base.write_text('[network]\nmode = "open"\n')
    assert not resolve(project, locations).trusted


def test_untrusted_allowlist_keeps_only_hosts_the_user_allows(project: Path, locations: Locations) -> None:
    write(locations.user_config_file, 'extends = ["default"]\n[network]\nallow = ["*.example.test", "pypi.org:443"]\n')
    write(project / ".stockade.toml", '[network]\nallow = ["api.example.test", "evil.test", "pypi.org", "pypi.org:443"]\ndeny = ["x.test"]\n')
    result = resolve(project, locations)
    # The file builds on the user's default, so the user's own hosts stay; of its own, only those the user allows.
    assert result.policy.network.allow == ("*.example.test", "pypi.org:443", "api.example.test")
    assert result.policy.network.deny == ("x.test",)
    assert "network allow evil.test" in result.dropped and "network allow pypi.org" in result.dropped


def test_user_config_relative_paths_mean_the_project(project: Path, locations: Locations) -> None:
    write(locations.user_config_file, '[filesystem]\nallow_write = ["."]\n')
    assert resolve(project, locations).policy.filesystem.allow_write == (str(project),)


def test_policy_and_profile_are_exclusive(project: Path, locations: Locations) -> None:
    with pytest.raises(PolicyError, match="either --policy or --profile"):
        resolve(project, locations, policy_file=Path("x"), profile="default")


def test_untrusted_policy_cannot_set_loader_or_secret_variables(project: Path, locations: Locations) -> None:
    """Found by the escape hunt: [env] set LD_PRELOAD in a cloned repository's policy."""
    write(project / ".stockade.toml", '[env]\nset = { LD_PRELOAD = "./evil.so", BASH_ENV = "x", MY_TOKEN = "t", CI = "1" }\n')
    result = resolve(project, locations)
    assert result.policy.env.set == (("CI", "1"),)
    for name in ("LD_PRELOAD", "BASH_ENV", "MY_TOKEN"):
        assert f"env set {name}" in result.dropped


def test_the_default_home_is_private_and_shows_git_identity(project: Path, locations: Locations) -> None:
    policy = resolve(project, locations).policy
    assert policy.filesystem.home == "private"
    assert str(locations.home / ".gitconfig") in policy.filesystem.allow_read
    assert not any(entry in policy.filesystem.allow_read for entry in (str(locations.home), str(locations.home / ".ssh")))


def test_untrusted_project_policy_cannot_show_the_real_home(project: Path, locations: Locations) -> None:
    text = 'extends = ["default"]\n[filesystem]\nhome = "host"\nallow_read = ["~", "~/.ssh", "~/.config/git/ignore"]\n'
    write(project / ".stockade.toml", text)
    result = resolve(project, locations)
    policy = result.policy
    assert not result.trusted
    assert policy.filesystem.home == "private"
    assert str(locations.home / ".ssh") not in policy.filesystem.allow_read
    assert str(locations.home) not in policy.filesystem.allow_read
    assert str(locations.home / ".config/git/ignore") in policy.filesystem.allow_read  # inside ~/.config/git: kept
    dropped = " | ".join(result.dropped)
    assert 'home = "host"' in dropped and f"allow_read {locations.home}/.ssh" in dropped


def test_a_trusted_project_policy_may_show_the_real_home(project: Path, locations: Locations) -> None:
    write(project / ".stockade.toml", 'extends = ["default"]\n[filesystem]\nhome = "host"\n')
    TrustStore(locations.trust_file).trust(project / ".stockade.toml", chain_digest(project_chain(project / ".stockade.toml", locations)))
    assert resolve(project, locations).policy.filesystem.home == "host"
