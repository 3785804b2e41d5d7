"""What stockade learn proposes from a run's refusals, and what it withholds."""

from __future__ import annotations

import json
from pathlib import Path

from stockade.profiles.editing import Entry
from stockade.profiles.learning import fix_of, propose, spelled

HOME = "/home/u"
SECRETS = ("/home/u/.ssh", "/home/u/.aws", "/p/**/.env")
EXISTING = {"/home/u/.config/tool/settings.ini", "/srv/cache", "/srv/cache/obj", "/home/u/.ssh/id_rsa", "/srv"}


def learned(findings: dict[str, object]) -> tuple[list[tuple[str, str]], list[str]]:
    proposal = propose(findings, home=HOME, secrets=SECRETS, exists=EXISTING.__contains__)
    return [(f"{e.where}", e.value) for e in proposal.entries], proposal.withheld


def file(path: str, operation: str, wall: str, rule: str = "rule") -> dict[str, object]:
    return {"path": path, "operation": operation, "wall": wall, "rule": rule, "errno": "EROFS", "syscall": "openat"}


def test_a_refused_host_becomes_its_exact_allow_entry_and_an_http_rule_its_table() -> None:
    entries, withheld = learned({"network": [
        {"host": "pypi.org", "port": 443, "rule": "not in allow", "hint": 'allow = ["pypi.org"]', "count": 3},
        {"host": "x.test", "port": 8443, "rule": "not in allow", "hint": 'allow = ["x.test:8443"]', "count": 1},
        {"host": "api.test", "port": 443, "rule": "no http rule", "hint": '[network.http."api.test"] allow = ["POST /v1/**"]'},
        {"host": "blocked.test", "port": 443, "rule": 'deny "blocked.test"', "hint": ""},
    ]})  # fmt: skip
    assert entries == [
        ("[network] allow", "pypi.org"), ("[network] allow", "x.test:8443"), ('[network.http."api.test"] allow', "POST /v1/**"),
    ]  # fmt: skip
    assert len(withheld) == 1 and "learn does not undo a deny" in withheld[0]


def test_a_home_read_a_write_outside_and_a_written_file_each_get_their_smallest_entry() -> None:
    entries, withheld = learned({"files": [
        file("/home/u/.config/tool/settings.ini", "read", "private_home"),
        file("/home/u/.config/tool/absent.ini", "read", "private_home"),  # a probe for an optional file
        file("/srv/cache/new.o", "create", "outside_write"),
        file("/srv/cache/obj", "write", "outside_write"),  # inside the folder already proposed
    ]})  # fmt: skip
    assert entries == [("[filesystem] allow_read", "~/.config/tool/settings.ini"), ("[filesystem] allow_write", "/srv/cache")]
    assert withheld == []


def test_a_secret_is_never_proposed_whatever_wall_refused_it() -> None:
    entries, withheld = learned({"files": [
        file("/home/u/.ssh/id_rsa", "read", "private_home"),
        file("/home/u/.aws/credentials", "read", "deny_read", "hidden by deny_read ~/.aws"),
        file("/p/sub/.env", "write", "outside_write"),
    ]})  # fmt: skip
    assert entries == []
    assert [line.split(":")[0] for line in withheld] == ["read ~/.ssh/id_rsa", "read ~/.aws/credentials", "write /p/sub/.env"]
    assert all("[credentials.NAME]" in line for line in withheld)


def test_a_link_in_the_home_to_a_secret_is_the_secret() -> None:
    links = {"/home/u/.config/tool/key": "/home/u/.ssh/id_rsa"}
    findings = {"files": [file("/home/u/.config/tool/key", "read", "private_home")]}
    proposal = propose(findings, home=HOME, secrets=SECRETS, exists=lambda _p: True, realpath=lambda p: links.get(p, p))
    assert proposal.entries == [] and "deny_read ~/.ssh covers it" in proposal.withheld[0]


def test_the_floor_deny_write_and_broad_places_are_withheld_with_the_reason() -> None:
    entries, withheld = learned({"files": [
        file("/p/.git/hooks/pre-commit", "write", "floor"),
        file("/p/dist/x", "write", "deny_write"),
        file("/home/u/newfile", "create", "outside_write"),  # would make the home writable
        file("/opt/x", "create", "outside_write"),  # would make /opt writable
        file("/nowhere/deep/x", "create", "outside_write"),  # its folder does not exist outside the home
        file("/etc/shadow", "read", "permissions"),
    ]})  # fmt: skip
    assert entries == []
    joined = "\n".join(withheld)
    for expected in ("the floor protects it", "deny_write entry", "would make your home writable", "would make /opt writable",
                     "does not exist; make it", "own permissions"):  # fmt: skip
        assert expected in joined, joined


def test_spelling_uses_the_tilde_only_below_the_home() -> None:
    assert spelled("/home/u/.cache/x", HOME) == "~/.cache/x"
    assert spelled("/home/u", HOME) == "/home/u" and spelled("/home/user2/x", HOME) == "/home/user2/x"


def test_bad_findings_are_ignored_not_a_crash() -> None:
    assert propose({"network": "x", "files": [1, None, {"path": "relative"}]}, home=HOME, secrets=()).entries == []
    assert isinstance(Entry(("network",), "allow", "x").where, str)


def test_a_touched_folder_or_a_rewritten_file_never_makes_the_whole_folder_writable() -> None:
    # A malicious command touches ~/.local/lib (shown read-only) and truncates an existing
    # ~/.config/nvim/init.lua (hidden): the next round must not be able to drop a .pth file
    # into ~/.local/lib/... or anything else into ~/.config/nvim.
    folders = {"/home/u/.local/lib", "/home/u/.config/nvim", "/srv/cache"}
    present = {*folders, "/home/u/.config/nvim/init.lua", "/srv/cache/obj"}
    findings = {"files": [
        file("/home/u/.local/lib", "change", "outside_write"),
        file("/home/u/.config/nvim", "write", "private_home"),
        file("/home/u/.config/nvim/init.lua", "create", "private_home"),  # O_CREAT|O_TRUNC of an existing file
        file("/srv/cache/obj", "create", "outside_write"),
    ]}  # fmt: skip
    proposal = propose(findings, home=HOME, secrets=SECRETS, exists=present.__contains__, isdir=folders.__contains__)
    assert [(e.key, e.value) for e in proposal.entries] == [
        ("allow_write", "/srv/cache/obj"), ("allow_write", "~/.config/nvim/init.lua"),
    ]  # fmt: skip
    assert sum("a folder itself" in line for line in proposal.withheld) == 2, proposal.withheld


def test_what_the_floor_protects_is_withheld_whichever_wall_refused_it() -> None:
    protected = ("/home/u/.bashrc", "/home/u/.local/bin", "/home/u/.config/stockade", "/p/.git/hooks")
    present = {"/home/u/.bashrc", "/home/u/.local/bin", "/home/u/.config/stockade", "/home/u/.config/stockade/config.toml"}
    findings = {"files": [
        file("/home/u/.bashrc", "write", "private_home"),
        file("/home/u/.local/bin/tool", "create", "outside_write"),
        file("/home/u/.config/stockade/config.toml", "read", "private_home"),
        file("/p/.git/hooks/x/y", "create", "outside_write"),
    ]}  # fmt: skip
    proposal = propose(
        findings, home=HOME, secrets=SECRETS, exists=lambda p: p in present or p == "/p/.git/hooks/x", protected=protected,
        hidden=("/home/u/.config/stockade",),
    )  # fmt: skip
    assert proposal.entries == []
    assert len(proposal.withheld) == 4 and all("the floor protects" in line for line in proposal.withheld), proposal.withheld


def test_the_home_itself_is_never_proposed_readable() -> None:
    # `stat ~/x/..` fails (x is absent) and reads as the home: all of it must not become readable.
    proposal = propose({"files": [file("/home/u", "read", "private_home")]}, home=HOME, secrets=SECRETS, exists=lambda _p: True)
    assert proposal.entries == [] and "your home" in proposal.withheld[0]


def test_a_private_address_is_withheld_not_opened_for_the_next_round() -> None:
    network = [
        {"host": h, "port": p, "rule": "is loopback", "hint": f"allow = [{json.dumps(rule)}]"}
        for h, p, rule in (
            ("169.254.169.254", 80, "169.254.169.254:80"), ("127.0.0.1", 6379, "127.0.0.1:6379"), ("::1", 80, "[::1]:80"),
            ("db.internal", 5432, "10.1.2.3:5432"),
        )
    ]  # fmt: skip
    proposal = propose({"network": network}, home=HOME, secrets=SECRETS)
    assert proposal.entries == [] and len(proposal.withheld) == 4, proposal
    assert all("not a public address" in line for line in proposal.withheld)


def test_a_path_no_policy_can_spell_is_withheld_not_a_failed_next_round() -> None:
    findings = {"files": [file(f"/srv/cache/{name}/x", "create", "outside_write") for name in ("a*b", "a\nb")]}
    proposal = propose(findings, home=HOME, secrets=SECRETS, exists=lambda _p: True)
    assert proposal.entries == [] and len(proposal.withheld) == 2, proposal
    assert "\n" not in "".join(proposal.withheld)


def test_a_folder_that_holds_a_secret_is_never_proposed_readable() -> None:
    proposal = propose(
        {"files": [file("/home/u/.config/tool", "read", "private_home")]},
        home=HOME, secrets=("/home/u/.config/tool/token.json",), exists=lambda _p: True, isdir=lambda _p: True,
    )  # fmt: skip
    assert proposal.entries == [] and "holds a secret (~/.config/tool/token.json)" in proposal.withheld[0]


def test_a_place_inside_any_git_dir_is_never_proposed() -> None:
    """Issue 32: learn proposed allow_write /data/x/.git/hooks, granted it to its next round, and the
    hook it wrote ran at the next host commit. A git dir of another name counts too."""
    git_dirs = {"/data/x/.git", "/data/x/.git/hooks", "/srv/bare.git", "/srv/bare.git/objects", "/srv/bare.git/refs", "/srv/bare.git/hooks"}
    present = {*git_dirs, "/srv/bare.git/HEAD", "/srv/plain", "/srv/plain/out"}
    findings = {"files": [
        file("/data/x/.git/hooks/pre-commit", "create", "outside_write"),
        file("/srv/bare.git/hooks/post-update", "create", "outside_write"),
        file("/srv/plain/out/a.o", "create", "outside_write"),  # the control: an ordinary folder
    ]}  # fmt: skip
    proposal = propose(findings, home=HOME, secrets=SECRETS, exists=present.__contains__, isdir=lambda p: p in git_dirs or p.startswith("/srv/plain"))
    assert [(e.key, e.value) for e in proposal.entries] == [("allow_write", "/srv/plain/out")]
    assert len(proposal.withheld) == 2 and all("inside the git dir" in line for line in proposal.withheld), proposal.withheld


def test_a_fix_never_names_stockades_own_files(tmp_path: Path) -> None:
    """Issue 33: --trace proposed adding ~/.local/state/stockade/audit.jsonl to allow_read."""
    home = tmp_path / "home"
    own = (str(home / ".local/state/stockade"), str(home / ".config/stockade"))
    for path in (home / ".local/state/stockade/audit.jsonl", home / ".config/tool/settings.json"):
        path.parent.mkdir(parents=True)
        path.write_text("x")
    refused = file(str(home / ".local/state/stockade/audit.jsonl"), "read", "private_home")
    assert fix_of(refused, home=str(home), secrets=()) != ""  # what --trace said before
    assert fix_of(refused, home=str(home), secrets=(), hidden=own) == ""
    control = file(str(home / ".config/tool/settings.json"), "read", "private_home")
    assert fix_of(control, home=str(home), secrets=(), hidden=own) != ""
