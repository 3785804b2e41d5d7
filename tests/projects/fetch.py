"""Fetch and set up the real projects once (PyPI and npm only), into a cache beside this file.

    python tests/projects/fetch.py [NAME ...]

For a PyPI project: its sdist unpacked as the template the tests copy, and a
virtualenv (from Debian's /usr/bin/python3, which every user can run) holding
the pinned test dependencies and the project itself. For an npm project: the
package tarball unpacked, with its pinned test tools installed in it. A set-up
project is marked ready and skipped next time. The cache is under the checkout,
never under /tmp or a home: inside the sandbox both are private.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

if not __package__:  # run as a script: python tests/projects/fetch.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.projects.catalog import PROJECTS, Project  # noqa: E402


def _cache() -> Path:
    """Beside this file, unless the checkout is under /tmp or /var/tmp (the unprivileged test
    run's copy), which every sandbox has private: then in the user's home."""
    chosen = os.environ.get("STOCKADE_PROJECTS_CACHE")
    if chosen:
        return Path(chosen)
    here = Path(__file__).resolve().parent
    if any(str(here).startswith(folder) for folder in ("/tmp/", "/var/tmp/")):
        return Path.home() / ".stockade-projects"
    return here / ".cache"


CACHE = _cache()
PYTHON = "/usr/bin/python3"


class FetchError(Exception):
    """A project could not be fetched or set up (no network, a registry error)."""


def template(project: Project) -> Path:
    return CACHE / project.name / "src"


def venv(project: Project) -> Path:
    return CACHE / project.name / "venv"


def ensure(project: Project) -> None:
    """Fetch and set up `project` unless it is ready with the same spec and dependencies."""
    folder = CACHE / project.name
    ready = folder / ".ready"
    stamp = "\n".join((project.spec, *project.deps)) + "\n"
    if ready.exists() and ready.read_text() == stamp:
        return
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if project.kind == "pypi":
        _pypi(project, folder)
    else:
        _npm(project, folder)
    ready.write_text(stamp)


def _run(words: list[str], cwd: Path | None = None) -> None:
    result = subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise FetchError(f"{' '.join(words[:6])} ...: exit {result.returncode}: {(result.stderr or result.stdout)[-800:]}")


def _pypi(project: Project, folder: Path) -> None:
    downloads = folder / "download"
    _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", project.spec, "-d", str(downloads)])
    (archive,) = list(downloads.iterdir())
    _unpack(archive, folder / "src")
    _run([PYTHON, "-m", "venv", str(folder / "venv")])
    pip = [str(folder / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, *project.deps])
    _run([*pip, "--no-deps", str(archive)])


def _npm(project: Project, folder: Path) -> None:
    downloads = folder / "download"
    downloads.mkdir()
    _run(["npm", "pack", "--silent", project.spec], cwd=downloads)
    (archive,) = list(downloads.glob("*.tgz"))
    _unpack(archive, folder / "src")
    _run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--no-save", "--ignore-scripts", *project.deps], cwd=folder / "src")


def _unpack(archive: Path, target: Path) -> None:
    """The archive's single top folder becomes `target`."""
    staging = target.with_name("unpacking")
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: no member may leave the folder
            tar.extractall(staging, filter="data")
        else:
            tar.extractall(staging)
    (top,) = list(staging.iterdir())
    top.rename(target)
    staging.rmdir()


def main(names: list[str]) -> int:
    chosen = [p for p in PROJECTS if not names or p.name in names]
    for project in chosen:
        try:
            ensure(project)
            print(f"ready: {project.name}")
        except FetchError as error:
            print(f"cannot set up {project.name}: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
