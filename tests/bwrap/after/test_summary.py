"""The end-of-run summary stays short whatever the run did."""

from __future__ import annotations

from stockade.bwrap.after.summary import MAX_LINES, bounded, grouped_files, grouped_moves


def test_many_package_files_become_one_group() -> None:
    touched = [(f"/p/node_modules/m{i}/package.json", "created") for i in range(68)] + [("/p/Makefile", "changed")]
    line = grouped_files(touched, "/p")
    assert line.startswith("node_modules/: 68 package.json created (node_modules/m0/package.json, ")
    assert "Makefile (changed)" in line and len(line) < 300


def test_a_few_files_are_each_named() -> None:
    assert grouped_files([("/p/a.sh", "created"), ("/p/sub/b.sh", "changed")], "/p") == "a.sh (created), sub/b.sh (changed)"


def test_many_groups_are_cut_with_a_count() -> None:
    touched = [(f"/p/d{i}/x{i}.sh", "created") for i in range(20)]
    assert grouped_files(touched, "/p").endswith("and 14 more in 14 other groups")


def test_moves_past_a_few_are_one_line() -> None:
    moved = [(f"/p/r{i}/.git/hooks/pre-commit", f"/p/r{i}/.git/hooks/pre-commit.stockade-quarantine-abc") for i in range(9)]
    lines = grouped_moves(moved)
    assert len(lines) == 1 and lines[0].startswith("9 files") and "NAME.stockade-quarantine-abc" in lines[0]
    assert len(grouped_moves(moved[:2])) == 2


def test_whole_summary_is_bounded() -> None:
    lines = [f"line {i}" for i in range(40)]
    out = bounded(lines)
    assert len(out) == MAX_LINES and out[-1].startswith("... and 31 more lines")
    assert bounded(lines[:5]) == lines[:5]
