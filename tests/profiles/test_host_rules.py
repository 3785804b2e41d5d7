"""Host rules as a new user writes them: URLs, paths, public suffixes, international names."""

from __future__ import annotations

from pathlib import Path

import pytest

from stockade.core.errors import PolicyError
from stockade.core.locations import Locations
from stockade.profiles.domains import canonical_name, parse_rule
from stockade.profiles.resolve import resolve

REFUSED = [
    ("https://pypi.org/simple", "write 'pypi.org'"),
    ("http://localhost:8080/x", "write 'localhost:8080'"),
    ("pypi.org/simple", "not paths: write 'pypi.org'"),
    ("*.com", "com is a public suffix"),
    ("*.co.uk", "co.uk is a public suffix"),
    ("*.github.io", "github.io is a public suffix"),  # anyone can publish a site there
    ("*.s3.amazonaws.com", "s3.amazonaws.com is a public suffix"),  # anyone's bucket: an exfiltration path
    ("10.0.0/8x", "not a valid CIDR block"),
]


@pytest.mark.parametrize(("rule", "says"), REFUSED)
def test_a_rule_that_cannot_mean_what_it_says_is_refused_saying_what_to_write(rule: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_rule(rule)
    assert says in str(caught.value), str(caught.value)


@pytest.mark.parametrize("rule", ["pypi.org", "*.example.com", "*.pythonhosted.org", "github.com:443", "10.0.0.0/8", "*.wild.test"])
def test_the_controls_are_accepted(rule: str) -> None:
    assert str(parse_rule(rule)) == rule


def test_international_names_follow_idna_2008() -> None:
    assert canonical_name("faß.de") == "xn--fa-hia.de"  # IDNA 2003 made it fass.de, another domain
    assert canonical_name("Bücher.example") == "xn--bcher-kva.example"
    with pytest.raises(ValueError, match="not a valid international domain name"):
        canonical_name("a\u200db.example")  # a joiner where IDNA 2008 forbids it


def test_in_a_policy_file_the_error_has_its_line(project: Path, locations: Locations) -> None:
    policy = project / "p.toml"
    policy.write_text('[network]\nallow = [\n  "pypi.org",\n  "https://files.pythonhosted.org/packages",\n]\n')
    with pytest.raises(PolicyError) as caught:
        resolve(project, locations, policy_file=policy)
    assert caught.value.line == 4 and "write 'files.pythonhosted.org'" in str(caught.value), str(caught.value)
