"""Which of the user's tool files a run shows, and how: placeholders made per run, the rest hidden."""

from __future__ import annotations

import os
from pathlib import Path

from stockade.profiles.toolconfig import PLACEHOLDER, candidates, read


def files(home: Path, denied: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    return candidates(str(home), str(home), denied)


def test_candidates_skip_files_under_a_hidden_folder_and_those_the_users_own_deny_names(tmp_path: Path) -> None:
    npmrc, cargo, m2 = str(tmp_path / ".npmrc"), str(tmp_path / ".cargo"), str(tmp_path / ".m2") + "/**"
    shown = {path for _inside, _real, path in candidates(str(tmp_path), str(tmp_path), (npmrc, cargo, "/x/**/.env"), (npmrc, cargo))}
    assert ".npmrc" in shown and ".cargo/config.toml" not in shown and ".config/pip/pip.conf" in shown  # the default's own entry is replaced
    mine = {path for _inside, _real, path in candidates(str(tmp_path), str(tmp_path), (npmrc, m2), ())}
    assert ".npmrc" not in mine and ".m2/settings.xml" not in mine and ".netrc" in mine  # the user's own entries win
    assert candidates("/", "/", ()) == []


def test_each_run_gets_new_placeholders_and_the_daemon_gets_the_values(tmp_path: Path) -> None:
    (tmp_path / ".npmrc").write_text("//r.test/:_authToken=SECRET-one\n")
    first, second = read(files(tmp_path)), read(files(tmp_path))
    assert [shown.path for shown in first.shown] == [str(tmp_path / ".npmrc")]
    assert b"SECRET-one" not in first.shown[0].data and PLACEHOLDER.encode() in first.shown[0].data
    assert first.shown[0].data != second.shown[0].data  # a placeholder is the run's own
    [credential] = first.credentials
    assert credential.value == "SECRET-one" and credential.hosts == ["r.test:443"] and credential.placeholder.encode() in first.shown[0].data
    assert "SECRET-one" not in repr(credential) and "SECRET-one" not in " ".join(first.shown[0].secrets)


def test_a_secret_that_also_appears_elsewhere_in_the_file_hides_the_file(tmp_path: Path) -> None:
    (tmp_path / ".npmrc").write_text("init-author-name=SECRET-two\n//r.test/:_authToken=SECRET-two\n")
    view = read(files(tmp_path))
    assert (
        view.shown == [] and view.credentials == [] and view.hidden == [(str(tmp_path / ".npmrc"), "a secret in it could not be told from the rest")]
    )


def test_files_that_cannot_be_read_are_hidden_with_why_and_a_fifo_never_blocks(tmp_path: Path) -> None:
    (tmp_path / ".netrc").write_bytes(b"machine a password \xff\xfe\n")
    os.mkfifo(tmp_path / ".npmrc")
    (tmp_path / ".gitconfig").symlink_to(tmp_path / "nowhere")
    view = read(files(tmp_path))
    assert dict(view.hidden) == {str(tmp_path / ".netrc"): "it is not UTF-8 text", str(tmp_path / ".npmrc"): "it is not a regular file"}


def test_cargo_and_poetry_tokens_go_to_the_registry_their_other_file_names(tmp_path: Path) -> None:
    (tmp_path / ".cargo").mkdir()
    (tmp_path / ".cargo" / "config.toml").write_text('[registries.corp]\nindex = "sparse+https://crates.corp.test/index/"\n')
    (tmp_path / ".cargo" / "credentials.toml").write_text('[registries.corp]\ntoken = "corp-tok"\n[registry]\ntoken = "cio-tok"\n')
    poetry = tmp_path / ".config" / "pypoetry"
    poetry.mkdir(parents=True)
    (poetry / "config.toml").write_text('[repositories.corp]\nurl = "https://py.corp.test/simple/"\n')
    (poetry / "auth.toml").write_text('[http-basic.corp]\nusername = "u"\npassword = "po-pw"\n[pypi-token]\npypi = "pypi-AgEIcHlwaS5vcmcCJ"\n')
    view = read(files(tmp_path))
    assert sorted((c.value, tuple(c.hosts)) for c in view.credentials) == [
        ("cio-tok", ("crates.io:443",)), ("corp-tok", ("crates.corp.test:443",)), ("po-pw", ("py.corp.test:443",)), ("pypi-AgEIcHlwaS5vcmcCJ", ("upload.pypi.org:443",))
    ]  # fmt: skip
    assert not any(any(secret in shown.data for secret in (b"corp-tok", b"cio-tok", b"po-pw", b"AgEI")) for shown in view.shown)


def test_files_gits_config_names_are_shown_the_same_way(tmp_path: Path) -> None:
    """A review found an include target (~/.gitconfig-work) and a `store --file` helper's file shown raw."""
    (tmp_path / ".gitconfig").write_text("[include]\n\tpath = ~/.gitconfig-work\n[credential]\n\thelper = store --file ~/.my-creds\n")
    (tmp_path / ".gitconfig-work").write_text('[url "https://oauth2:glpat-AbCdEfGhIjKlMnOpQrSt@gitlab.com/"]\n\tinsteadOf = https://gitlab.com/\n')
    (tmp_path / ".my-creds").write_text("https://bob:tok-45678@git.corp.test\n")
    view = read(files(tmp_path))
    shown = {shown.path: shown.data for shown in view.shown}
    assert set(shown) == {str(tmp_path / name) for name in (".gitconfig", ".gitconfig-work", ".my-creds")}
    assert not any(b"glpat" in data or b"tok-45678" in data for data in shown.values())
    assert {credential.name.partition("#")[0] for credential in view.credentials} == {"~/.gitconfig-work", "~/.my-creds"}


def test_a_withheld_registry_is_said_at_the_run(tmp_path: Path) -> None:
    (tmp_path / ".npmrc").write_text("registry=ssh://u:p@r.test/\nfund=false\n")
    [shown] = read(files(tmp_path)).shown
    assert shown.sources and "registry" in shown.sources[0]
