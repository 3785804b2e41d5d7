"""The private home: when it applies, what a run wants shown, the home's top-level links, and which places are bound read-only."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from stockade.bwrap.parts.private_home import OWN_CODE, Shown, account_home, applies, shown_places, top_level_links, wanted


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / "me"
    folder.mkdir(parents=True)
    return folder


# -- applies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "roots", "denied", "made"),
    [
        pytest.param("private", ["PROJECT"], [], True, id="a-project-inside"),
        pytest.param("private", [], [], True, id="nothing-writable"),
        pytest.param("host", [], [], False, id="the-real-home-asked-for"),
        pytest.param("private", ["HOME"], [], False, id="home-writable"),
        pytest.param("private", ["PARENT"], [], False, id="a-parent-writable"),
        pytest.param("private", [], ["HOME"], False, id="home-hidden-whole"),
        pytest.param("private", [], ["PROJECT"], True, id="a-hidden-place-inside"),
        pytest.param("private", ["/"], [], False, id="root-writable"),
    ],
)
def test_applies(home: Path, mode: str, roots: list[str], denied: list[str], made: bool) -> None:
    names = {"HOME": str(home), "PARENT": str(home.parent), "PROJECT": str(home / "proj")}
    assert applies(mode, str(home), [names.get(r, r) for r in roots], [names.get(d, d) for d in denied]) is made


@pytest.mark.parametrize("where", ["", "/", "MISSING", "FILE"])
def test_no_private_home_without_a_home_folder(home: Path, where: str) -> None:
    (home / "file").write_text("")
    path = {"MISSING": str(home / "missing"), "FILE": str(home / "file")}.get(where, where)
    assert applies("private", path, [], []) is False


# -- account_home ------------------------------------------------------------------------------------


def test_account_home_is_the_real_path_of_the_password_entry(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    link = tmp_path / "link-home"
    link.symlink_to(home)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: SimpleNamespace(pw_dir=str(link)))
    assert account_home() == str(home)


def test_no_password_entry_is_no_home(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    def missing(uid: int) -> None:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", missing)
    assert account_home() == ""


# -- wanted --------------------------------------------------------------------------------------------


def test_wanted_in_order_without_repeats(tmp_path: Path) -> None:
    places = wanted(["/h/.gitconfig", "/h/.config/git/"], ["/usr/bin", "/h/.local/bin", "/usr/bin"], {}, ["/h/proj", "/h/.gitconfig"])
    assert places == ["/h/.gitconfig", "/h/.config/git", "/h/proj", "/usr/bin", "/h/.local/bin"]


@pytest.mark.parametrize("folder", ["bin", "./bin", "", "relative/bin"])
def test_relative_path_folders_are_skipped(folder: str) -> None:
    assert wanted([], [folder], {}, []) == []


def test_a_virtualenvs_bin_brings_the_virtualenv(tmp_path: Path) -> None:
    venv, plain = tmp_path / "venv", tmp_path / "tool"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (plain / "bin").mkdir(parents=True)
    places = wanted([], [f"{venv}/bin/", str(plain / "bin")], {}, [])
    assert places == [str(venv / "bin"), str(venv), str(plain / "bin")]


def test_a_folder_with_pyvenv_cfg_but_not_named_bin_brings_nothing_more(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "pyvenv.cfg").write_text("")
    assert wanted([], [str(tmp_path / "scripts")], {}, []) == [str(tmp_path / "scripts")]


@pytest.mark.parametrize(("venv", "added"), [("/h/.venvs/app", True), ("/h/.venvs/app/", True), ("relative/venv", False), ("", False)])
def test_virtual_env_is_wanted_when_absolute(venv: str, added: bool) -> None:
    assert wanted([], [], {"VIRTUAL_ENV": venv}, []) == (["/h/.venvs/app"] if added else [])


def test_paths_are_normalised(tmp_path: Path) -> None:
    assert wanted(["/h//a/./b/", "/h/a/../c"], [], {}, []) == ["/h/a/b", "/h/c"]


# -- top_level_links --------------------------------------------------------------------------------


def test_top_level_links_are_listed_with_text_and_target(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "data" / "work"
    data.mkdir(parents=True)
    (home / "work").symlink_to(data)
    (home / "dangling").symlink_to("../nowhere")
    (home / "plain").mkdir()
    (home / "plain" / "inner").symlink_to(data)  # not top level
    (home / "file").write_text("")
    found = sorted(top_level_links(str(home)))
    assert found == [
        (str(home / "dangling"), "../nowhere", os.path.realpath(home / "dangling")),
        (str(home / "work"), str(data), str(data)),
    ]


def test_no_links_in_a_missing_home(tmp_path: Path) -> None:
    assert top_level_links(str(tmp_path / "missing")) == []


# -- shown_places -------------------------------------------------------------------------------------


@pytest.fixture
def dotfiles(home: Path) -> Path:
    (home / ".gitconfig").write_text("[user]\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "gh").mkdir()
    (home / ".local" / "bin").mkdir(parents=True)
    (home / "proj").mkdir()
    return home


def shown(home: Path, places: list[str], roots: Sequence[str] = (), denied: Sequence[str] = (), private: Sequence[str] = ()) -> list[Shown]:
    return shown_places(str(home), places, roots, denied, private)


def test_existing_places_inside_home_are_shown_as_themselves(dotfiles: Path) -> None:
    places = [str(dotfiles / ".config/git"), str(dotfiles / ".gitconfig"), str(dotfiles / "missing")]
    assert shown(dotfiles, places) == [
        Shown(str(dotfiles / ".gitconfig"), str(dotfiles / ".gitconfig")),
        Shown(str(dotfiles / ".config/git"), str(dotfiles / ".config/git")),
    ]


def test_home_itself_and_places_outside_are_not_shown(dotfiles: Path, tmp_path: Path) -> None:
    assert shown(dotfiles, [str(dotfiles), "/usr/bin", str(tmp_path), str(dotfiles) + "x"]) == []


def test_a_place_in_a_writable_root_is_left_to_that_root(dotfiles: Path) -> None:
    assert shown(dotfiles, [str(dotfiles / "proj"), str(dotfiles / ".gitconfig")], roots=[str(dotfiles / "proj")]) == [
        Shown(str(dotfiles / ".gitconfig"), str(dotfiles / ".gitconfig"))
    ]


def test_a_denied_place_or_one_inside_it_stays_hidden(dotfiles: Path) -> None:
    places = [str(dotfiles / ".config"), str(dotfiles / ".config/gh"), str(dotfiles / ".gitconfig")]
    assert [s.path for s in shown(dotfiles, places, denied=[str(dotfiles / ".config/gh")])] == [
        str(dotfiles / ".config"),  # shown: mounts.py hides the denied place inside it
        str(dotfiles / ".gitconfig"),
    ]
    assert shown(dotfiles, [str(dotfiles / ".config/gh")], denied=[str(dotfiles / ".config")]) == []


def test_a_link_shows_its_target_at_its_own_path(dotfiles: Path, tmp_path: Path) -> None:
    repo = tmp_path / "dotfiles-repo" / "nvim"
    repo.mkdir(parents=True)
    (dotfiles / ".config" / "nvim").symlink_to(repo)
    assert shown(dotfiles, [str(dotfiles / ".config/nvim")]) == [Shown(str(dotfiles / ".config/nvim"), str(repo))]


def test_a_link_into_a_denied_place_stays_hidden(dotfiles: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secrets"
    secret.mkdir()
    (dotfiles / ".aws").symlink_to(secret)
    assert shown(dotfiles, [str(dotfiles / ".aws")], denied=[str(secret)]) == []


@pytest.mark.parametrize("target", ["HOME", "HOME_PARENT", "/", "PRIVATE", "PRIVATE_CHILD", "PRIVATE_PARENT"])
def test_a_link_to_what_holds_the_home_or_a_private_folder_is_not_shown(dotfiles: Path, tmp_path: Path, target: str) -> None:
    private = tmp_path / "sandbox-tmp"
    (private / "child").mkdir(parents=True)
    resolved = {
        "HOME": dotfiles, "HOME_PARENT": dotfiles.parent, "PRIVATE": private, "PRIVATE_CHILD": private / "child", "PRIVATE_PARENT": tmp_path,
    }.get(target, Path(target))  # fmt: skip
    (dotfiles / ".local" / "lib").symlink_to(resolved)
    assert shown(dotfiles, [str(dotfiles / ".local/lib")], private=[str(private)]) == []


def test_a_dangling_link_is_not_shown(dotfiles: Path) -> None:
    (dotfiles / ".cargo").symlink_to(dotfiles.parent / "gone")
    assert shown(dotfiles, [str(dotfiles / ".cargo")]) == []


def test_only_the_outer_places_are_kept(dotfiles: Path) -> None:
    places = [str(dotfiles / ".config/git"), str(dotfiles / ".config"), str(dotfiles / ".local/bin"), str(dotfiles / ".local")]
    assert [s.path for s in shown(dotfiles, places)] == [str(dotfiles / ".local"), str(dotfiles / ".config")]


def test_a_place_reached_through_a_top_level_link(dotfiles: Path, tmp_path: Path) -> None:
    data = tmp_path / "data" / "work"
    (data / "venv" / "bin").mkdir(parents=True)
    (dotfiles / "work").symlink_to(data)
    place = str(dotfiles / "work" / "venv" / "bin")
    assert shown(dotfiles, [place]) == [Shown(place, str(data / "venv" / "bin"))]


def test_stockades_own_code_is_wanted_and_no_folder_a_pth_file_names(tmp_path: Path) -> None:
    """Installed editable under the home, stockade must import itself inside (cli/nested.py); a .pth file
    of a virtualenv names folders an earlier run may have chosen, so none of those come along."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.tool-1.0.pth").write_text(f"{tmp_path / 'checkout' / 'src'}\n")
    assert wanted([], [f"{venv}/bin"], {}, []) == [str(venv / "bin"), str(venv)]
    assert os.path.isfile(os.path.join(OWN_CODE, "__init__.py")) and os.path.isdir(os.path.join(OWN_CODE, "bwrap"))  # mounts.py adds it
