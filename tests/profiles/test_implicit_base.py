"""A project's policy file builds on the user's own policy unless it says `extends = []`."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.locations import Locations
from stockade.profiles.openings import open_ends
from stockade.profiles.resolve import project_chain, resolve, untrusted_note
from stockade.profiles.trust import TrustStore, chain_digest

HAND_WRITTEN = '[network]\nallow = ["pypi.org", "files.pythonhosted.org"]\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def trust(path: Path, locations: Locations) -> None:
    TrustStore(locations.trust_file).trust(path, chain_digest(project_chain(path, locations)))


# (user config or None, project file, expected sources before the file itself, project writable, .env hidden)
CASES = [
    pytest.param(None, HAND_WRITTEN, ("builtin:default",), True, True, id="no-extends-builds-on-the-built-in-default"),
    pytest.param(
        '[network]\nallow = ["mine.test"]\n', HAND_WRITTEN, ("builtin:default", "CONFIG"), True, True, id="no-extends-builds-on-the-user-config"
    ),  # fmt: skip
    pytest.param(None, "extends = []\n" + HAND_WRITTEN, (), False, False, id="empty-extends-starts-from-nothing"),
    pytest.param(None, 'extends = ["offline"]\n', ("builtin:default", "builtin:offline"), True, True, id="named-extends-as-written"),
]


@pytest.mark.parametrize(("config", "text", "before", "writable", "env_hidden"), CASES)
def test_what_a_project_file_builds_on(project: Path, locations: Locations, config: str | None, text: str,
                                      before: tuple[str, ...], writable: bool, env_hidden: bool) -> None:  # fmt: skip
    if config is not None:
        write(locations.user_config_file, config)
    policy_file = write(project / ".stockade.toml", text)
    trust(policy_file, locations)
    result = resolve(project, locations)
    assert result.trusted
    policy = result.policy
    wanted = tuple(str(locations.user_config_file) if s == "CONFIG" else s for s in before) + (str(policy_file),)
    assert policy.sources == wanted
    assert (str(project) in policy.filesystem.allow_write) is writable
    assert any(rule.endswith("/.env") for rule in policy.filesystem.deny_read) is env_hidden
    if config is not None:
        assert "mine.test" in policy.network.allow and "pypi.org" in policy.network.allow
    # --policy FILE means the same as the discovered file.
    assert resolve(project, locations, policy_file=policy_file).policy.sources == wanted


def test_a_fragment_it_extends_gets_nothing_implicit(project: Path, locations: Locations) -> None:
    write(project / "fragment.toml", "[limits]\npids = 50\n")
    policy_file = write(project / ".stockade.toml", 'extends = ["./fragment.toml"]\n')
    trust(policy_file, locations)
    assert resolve(project, locations).policy.sources == (str(project / "fragment.toml"), str(policy_file))


def test_changing_the_user_config_untrusts_nothing(project: Path, locations: Locations) -> None:
    write(locations.user_config_file, "[limits]\npids = 10\n")
    policy_file = write(project / ".stockade.toml", HAND_WRITTEN)
    trust(policy_file, locations)
    write(locations.user_config_file, "[limits]\npids = 20\n")
    result = resolve(project, locations)
    assert result.trusted and result.policy.limits.pids == 20
    policy_file.write_text(HAND_WRITTEN + "# edited\n")  # the control: the project's own file does untrust it
    assert not resolve(project, locations).trusted


def test_untrusted_it_says_what_it_ignored_and_kept_in_one_line(project: Path, locations: Locations) -> None:
    policy_file = write(project / ".stockade.toml", HAND_WRITTEN + '[filesystem]\ndeny_read = ["./private"]\n')
    result = resolve(project, locations)
    assert not result.trusted and str(project) in result.policy.filesystem.allow_write  # the project stays writable
    note = untrusted_note(result) or ""
    assert note.count("\n") == 0
    assert f"{policy_file} is not trusted" in note and 'ignored: network mode "allowlist"' in note and "kept: 1 deny_read rule" in note
    trust(policy_file, locations)
    policy_file.write_text(policy_file.read_text() + "# edited\n")
    assert "changed since you trusted it" in (untrusted_note(resolve(project, locations)) or "")


def test_no_notice_when_nothing_was_ignored(project: Path, locations: Locations) -> None:
    write(project / ".stockade.toml", '[filesystem]\ndeny_read = ["./private"]\n')
    result = resolve(project, locations)
    assert not result.trusted and untrusted_note(result) is None


def test_starting_from_nothing_is_spelled_out(project: Path, locations: Locations) -> None:
    policy_file = write(project / ".stockade.toml", "extends = []\n" + HAND_WRITTEN)
    trust(policy_file, locations)
    notes = open_ends(resolve(project, locations).policy, str(locations.home))
    assert any("is read-only" in n for n in notes) and any("deny_read is empty" in n for n in notes)
    assert "remove `extends = []`" in notes[-1]
    write(project / ".stockade.toml", HAND_WRITTEN)  # the control: built on the default, nothing to say
    trust(policy_file, locations)
    assert open_ends(resolve(project, locations).policy, str(locations.home)) == []


@pytest.mark.parametrize("rule", ["127.0.0.1", "localhost", "::1", "127.0.0.0/8"])
def test_an_allowed_loopback_endpoint_says_how_it_can_be_reached(project: Path, locations: Locations, rule: str) -> None:
    """The sandbox's NO_PROXY sends loopback names to its own loopback: a rule without a port reaches
    the host's only through the proxy (one with a port is forwarded, bwrap/parts/forwards.py)."""
    policy_file = write(project / ".stockade.toml", f'[network]\nallow = ["{rule}", "pypi.org"]\n')
    trust(policy_file, locations)
    notes = open_ends(resolve(project, locations).policy, str(locations.home))
    assert len(notes) == 1 and "NO_PROXY" in notes[0] and '--noproxy ""' in notes[0], notes
    write(project / ".stockade.toml", '[network]\nallow = ["127.0.0.1.nip.io", "pypi.org"]\n')  # the control: a name
    trust(policy_file, locations)
    assert open_ends(resolve(project, locations).policy, str(locations.home)) == []
