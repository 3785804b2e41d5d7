"""Generated SBPL as text: golden files for every built-in profile, and structure checks.

Regenerate the golden files with `STOCKADE_UPDATE_GOLDEN=1 pytest tests/seatbelt`
and review the diff: every change in them is a change in what the sandbox allows.
"""

from __future__ import annotations

import re

import pytest

from stockade.profiles.floor import floor_for
from stockade.profiles.loader import builtin_names
from stockade.profiles.model import NetworkMode
from stockade.seatbelt import sbpl
from stockade.seatbelt.profile import NEVER_EXEC, SENSITIVE_MACH_SERVICES, LexicalPaths, ProfileSpec, render
from tests.seatbelt import seatbelt_support as sup

CASES = sup.all_cases()
IDS = [case.name for case in CASES]


@pytest.fixture(params=CASES, ids=IDS)
def case(request: pytest.FixtureRequest) -> sup.Case:
    return request.param


def test_every_builtin_has_a_case() -> None:
    assert {f"builtin-{name}" for name in builtin_names()} <= set(IDS)
    assert any(name.startswith("fixture-") for name in IDS)


def test_golden(case: sup.Case, update_golden: bool) -> None:
    path = sup.GOLDEN / f"{case.name}.sb"
    text = sup.golden_text(case.profile)
    if update_golden:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run STOCKADE_UPDATE_GOLDEN=1 pytest tests/seatbelt"
    assert text == path.read_text(encoding="utf-8"), f"{path.name} changed: review, then regenerate"


def test_no_stale_golden_files() -> None:
    assert {p.stem for p in sup.GOLDEN.glob("*.sb")} <= set(IDS)


def test_golden_files_are_readable_sbpl() -> None:
    for path in sup.GOLDEN.glob("*.sb"):
        sup.forms(path.read_text(encoding="utf-8"))


# ---- structure ----


def test_starts_closed(case: sup.Case) -> None:
    top = sup.forms(case.profile.text)
    assert top[0] == ["version", "1"]
    assert top[1] == ["deny", "default", ["with", "message", f'"{sup.TAG}"']]
    assert all(form[0] in ("version", "allow", "deny") for form in top)


def test_parameters_match_references(case: sup.Case) -> None:
    used = set(re.findall(r'\(param "([^"]*)"\)', case.profile.text))
    given = dict(case.profile.params)
    assert used == set(given)
    assert all(sbpl.PARAM_NAME.match(name) for name in given)
    args = case.profile.sandbox_exec_args()
    assert args[:2] == ["-p", case.profile.text]
    assert args[2::2] == ["-D"] * len(given)
    assert args[3::2] == [f"{k}={v}" for k, v in case.profile.params]


def test_every_floor_path_is_a_parameter(case: sup.Case) -> None:
    floor = floor_for(case.policy.filesystem.allow_write, sup.locations(), case.policy.protected_files)
    values = set(dict(case.profile.params).values())
    assert floor.hidden and (floor.read_only or not case.policy.filesystem.allow_write)  # nothing writable: nothing to hold
    assert set(floor.read_only) <= values
    assert set(floor.hidden) <= values


def test_policy_paths_are_parameters_never_text(case: sup.Case) -> None:
    fs = case.policy.filesystem
    plain = [p for p in (*fs.allow_write, *fs.deny_read, *fs.deny_write, *case.policy.network.unix_sockets) if not sbpl.is_glob(p)]
    values = set(dict(case.profile.params).values())
    outside_regexes = sup.without_regexes(case.profile.text)
    host_paths = [str(sup.HOME), sup.TEMP_DIR, *case.floor.read_only, *case.floor.hidden]
    for path in [*plain, *host_paths]:
        assert path not in outside_regexes, path
    mode_none = case.policy.network.mode is NetworkMode.NONE
    expected = [p for p in plain if not (mode_none and p in case.policy.network.unix_sockets)]
    assert set(expected) <= values


def test_regexes_stay_in_the_encoded_alphabet(case: sup.Case) -> None:
    for literal in re.findall(r'#"([^"]*)"', case.profile.text):
        assert literal.isascii() and literal.isprintable()
        assert "\\" not in literal
        re.compile(literal)  # and they are valid (Python reads this subset like POSIX ERE)


def test_private_spellings_come_in_pairs(case: sup.Case) -> None:
    values = set(dict(case.profile.params).values())
    for value in values:
        for link in sbpl.PRIVATE_LINKS:
            if value == link or value.startswith(link + "/"):
                assert "/private" + value in values, value
            if value.startswith("/private" + link + "/"):
                assert value[len("/private") :] in values, value


def _first(text: str, needle: str) -> int:
    where = text.find(needle)
    assert where >= 0, needle
    return where


def test_denies_come_after_the_allows_they_narrow(case: sup.Case) -> None:
    text = case.profile.text
    broad_read = _first(text, "\n(allow file-read*)\n")
    first_deny_read = _first(text, "(deny file-read* file-write*")
    assert broad_read < first_deny_read
    assert "(allow file-read" not in text[first_deny_read:]
    last_write_allow = text.rfind("(allow file-write*")
    for deny in ("(deny file-write*", "(deny file-write-unlink", "(deny file-write-create"):
        if deny in text:
            assert last_write_allow < _first(text, deny)


def test_deny_read_blocks_reads_and_writes(case: sup.Case) -> None:
    """A rename is a write: denying reads alone lets `mv` carry a secret out (ESCAPES 7)."""
    for form in sup.forms(case.profile.text):
        if form[:2] == ["deny", "file-read*"]:
            assert form[2] == "file-write*"


def test_network(case: sup.Case) -> None:
    text = case.profile.text
    top = sup.forms(text)
    outbound = [f for f in top if f[:2] == ["allow", "network-outbound"]]
    if case.policy.network.mode is NetworkMode.NONE:
        assert not any(f[1].startswith("network") for f in top if f[0] == "allow")
        assert "AF_INET" not in text
        assert "trustd" not in text
        return
    assert outbound[0] == ["allow", "network-outbound", ["remote", "tcp", f'"localhost:{sup.PROXY_PORT}"']]
    for form in outbound[1:]:
        assert all(f[:2] == ["remote", "unix-socket"] for f in form[2:])
    assert len(outbound) == (2 if case.policy.network.unix_sockets else 1)
    assert "(allow network*" not in text and "(allow network-inbound" not in text and "(allow network-bind" not in text


def test_host_reach_is_limited(case: sup.Case) -> None:
    top = sup.forms(case.profile.text)
    allows = [f for f in top if f[0] == "allow"]
    for form in allows:
        assert form[1] not in ("default", "appleevent-send", "lsopen", "mach-register", "iokit-open", "user-preference-write")
        if form[1] in ("signal", "process-info*"):
            assert form[2:] == [["target", "same-sandbox"]]
        if form[1] == "mach-lookup":
            names = {f[1].strip('"') for f in form[2:]}
            assert not names & set(SENSITIVE_MACH_SERVICES)
        if form[1] == "sysctl-read":
            assert "kern.procargs" not in str(form)
    denied = {f[1] for f in top if f[0] == "deny"}
    assert {"appleevent-send", "lsopen", "job-creation", "user-preference-write", "mach-lookup", "sysctl-read", "process-exec"} <= denied
    text = case.profile.text
    assert text.rfind("(deny process-exec") > text.rfind("(allow process-exec)")
    assert all(f'(literal "{p}")' in text for p in NEVER_EXEC)


def test_unix_sockets_need_the_network(case: sup.Case) -> None:
    index = case.profile.index
    if case.policy.network.mode is NetworkMode.NONE:
        assert index.unix_sockets == () and index.ignored_unix_sockets == case.policy.network.unix_sockets
    else:
        assert [e.text for e in index.unix_sockets] == list(case.policy.network.unix_sockets)


# ---- specific rules ----


def test_absent_parents_of_protected_paths_cannot_be_created() -> None:
    case = sup.builtin_case("default")
    guarded = {e.text for e in case.profile.index.no_create}
    assert f"{sup.PROJECT}/.git" in guarded
    assert str(sup.PROJECT) not in guarded  # the writable root itself stays creatable
    existing = frozenset({f"{sup.PROJECT}/.git", f"{sup.PROJECT}/.github"})
    spec = ProfileSpec(case.policy, case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, None)
    again = render(spec, LexicalPaths(existing=existing))
    assert f"{sup.PROJECT}/.git" not in {e.text for e in again.index.no_create}
    assert f"{sup.PROJECT}/.git" in {e.text for e in again.index.no_rename}


def test_rename_guards_only_where_the_parent_is_writable() -> None:
    case = sup.fixture_case("offline-writable-home")
    guarded = {e.text for e in case.profile.index.no_rename}
    assert str(sup.HOME) not in guarded  # /Users is not writable: home cannot be renamed anyway
    assert f"{sup.HOME}/.config" in guarded  # holds ~/.config/git etc.
    assert f"{sup.PROJECT}" in guarded  # holds the **/.env glob's base


def test_writable_home_protects_the_whole_home_floor() -> None:
    case = sup.fixture_case("offline-writable-home")
    values = set(dict(case.profile.params).values())
    for name in (".bashrc", ".zshenv", ".ssh", ".config/git", "Library/LaunchAgents", ".config/stockade"):
        assert f"{sup.HOME}/{name}" in values


def test_proxy_port_is_required_for_proxied_modes() -> None:
    case = sup.builtin_case("npm")
    spec = ProfileSpec(case.policy, case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, None)
    with pytest.raises(ValueError, match="port"):
        render(spec)
    placeholder = render(ProfileSpec(case.policy, case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, 0))
    assert '(remote tcp "localhost:0")' in placeholder.text


def test_host_spellings_are_used_for_every_rule() -> None:
    """A resolver that knows a symlink adds the target's spelling to the rule."""

    class Linked(LexicalPaths):
        def deny_spellings(self, path: str) -> tuple[str, ...]:
            extra = ("/Volumes/keys/ssh",) if path == f"{sup.HOME}/.ssh" else ()
            return (*sbpl.private_aliases(path), *extra)

    case = sup.builtin_case("default")
    spec = ProfileSpec(case.policy, case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, None)
    profile = render(spec, Linked())
    params = dict(profile.params)
    assert params["DENY_READ_0"] == f"{sup.HOME}/.ssh"
    assert params["DENY_READ_0_1"] == "/Volumes/keys/ssh"
    assert '(subpath (param "DENY_READ_0_1"))' in profile.text


def test_a_moved_audit_log_is_hidden_too() -> None:
    from dataclasses import replace

    from stockade.profiles.model import AuditRules

    case = sup.builtin_case("default")
    policy = replace(case.policy, audit=AuditRules(log=f"{sup.HOME}/logs/audit.jsonl"))
    profile = render(ProfileSpec(policy, case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, None))
    assert f"{sup.HOME}/logs/audit.jsonl" in {e.text for e in profile.index.hidden}
    inside = replace(case.policy, audit=AuditRules(log=f"{sup.HOME}/.local/state/stockade/audit.jsonl"))
    profile = render(ProfileSpec(inside, case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, None))
    assert len(profile.index.hidden) == len(case.floor.hidden)


def test_a_writable_place_inside_a_hidden_folder_is_allowed_again_after_the_denies() -> None:
    """A carve-out (issue 33): the last matching rule wins in SBPL, so the place's allow comes after the
    deny_read that hides its folder, and the denies that reach inside it (globs such as **/.env whatever
    their base, and stockade's own state) come after that; outer places first, as on Linux."""
    from dataclasses import replace

    case = sup.builtin_case("default")
    fs = case.policy.filesystem
    p = sup.PROJECT
    data, out, ro, inner, deep = f"{p}/data", f"{p}/data/out", f"{p}/data/ro", f"{p}/data/out/inner", f"{p}/data/out/inner/deep"
    filesystem = replace(fs, allow_write=(*fs.allow_write, out, ro, deep), deny_read=(*fs.deny_read, data, f"{out}/secret", f"{p}/**/secret", inner),
                         deny_write=(*fs.deny_write, ro))  # fmt: skip
    profile = render(ProfileSpec(replace(case.policy, filesystem=filesystem), case.floor, str(sup.HOME), sup.TEMP_DIR, sup.TAG, None))
    text = profile.text

    def at(value: str, prefix: str) -> int:
        name = next(name for name, given in profile.params if given == value and name.startswith(prefix))
        return text.index(f'(param "{name}")')

    def rule_before(position: int) -> str:
        return text[text.rfind("(allow", 0, position) : position] if text.rfind("(allow", 0, position) > text.rfind("(deny", 0, position) else "deny"

    hide = at(data, "DENY_READ_")
    allow_out = at(out, "CARVE_OUT")
    assert allow_out > hide and "file-write*" in rule_before(allow_out)  # seen and writable again, after
    assert at(f"{out}/secret", "DENY_READ_IN") > allow_out  # a deny inside it, once more after it
    globbed = [text.index(f'(param "{name}")') for name, _v in profile.params if name.startswith("DENY_READ_IN")]
    assert any(position > allow_out for position in globbed) and "(regex" in text[allow_out:]  # **/secret and **/.env again
    assert "file-write*" not in rule_before(at(ro, "CARVE_OUT"))  # deny_write over allow_write: seen, not writable
    assert at(deep, "CARVE_OUT") > at(inner, "DENY_READ_IN")  # the inner place after the deny that holds it
    own = [text.index(f'(param "{name}")') for name, _value in profile.params if name.startswith("HIDDEN_AGAIN")]
    assert own and min(own) > at(deep, "CARVE_OUT")  # stockade's state is never carved
