"""Python, Node, make, archives and editors inside the sandbox do what they do outside."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.work.realwork import Workplace

PYTHON = "/usr/bin/python3"  # Debian's: readable by every user, and visible inside the sandbox


def _wheel(folder: Path) -> Path:
    """A pure-Python wheel built by hand: no build backend, no network."""
    path = folder / "greet-1.0-py3-none-any.whl"
    files = {
        "greet/__init__.py": "def hello(name):\n    return f'hello {name}'\n",
        "greet-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: greet\nVersion: 1.0\n",
        "greet-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "greet-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {**files, "greet-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return path


@pytest.mark.skipif(
    subprocess.run([PYTHON, "-c", "import ensurepip"], capture_output=True).returncode != 0, reason="Debian's python3-venv is not installed"
)
def test_python_venv_pip_install_of_a_local_wheel_and_a_test_run(work: Workplace) -> None:
    wheels = work.root / "wheels"
    wheels.mkdir()
    _wheel(wheels)

    def make(project: Path) -> None:
        (project / "test_app.py").write_text(
            "import unittest\nfrom greet import hello\n\n"
            "class T(unittest.TestCase):\n    def test_hello(self):\n"
            "        self.assertEqual(hello('x'), 'hello x')\n"
        )

    script = (
        f"{PYTHON} -m venv .venv && .venv/bin/pip install -q --no-index --find-links {wheels} greet && "
        ".venv/bin/python -m unittest -q 2>&1 | tail -1 && .venv/bin/pip list --format=freeze | grep greet"
    )
    bare, boxed = work.twice(make, script)
    assert bare.code == 0, bare
    assert (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err
    assert boxed.tree == bare.tree


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_init_install_of_a_local_tarball_and_npm_test(work: Workplace) -> None:
    package = work.root / "leftpad"
    package.mkdir()
    (package / "package.json").write_text('{"name": "leftpad-local", "version": "1.0.0", "main": "index.js"}\n')
    (package / "index.js").write_text("module.exports = (s, n) => String(s).padStart(n);\n")
    packed = subprocess.run(
        ["npm", "pack", "--silent", "--pack-destination", str(work.root)], cwd=package, env=work.env, capture_output=True, text=True, check=True
    )
    tarball = work.root / packed.stdout.strip().splitlines()[-1]

    def make(project: Path) -> None:
        (project / "test.js").write_text("const pad = require('leftpad-local'); if (pad('x', 3) !== '  x') process.exit(1); console.log('ok');\n")

    script = (
        f"npm init -y >/dev/null && npm pkg set scripts.test='node test.js' && "
        f"npm install --offline --no-audit --no-fund --silent {tarball} && npm test --silent"
    )
    bare, boxed = work.twice(make, script, options=["--profile", "npm"])
    assert bare.code == 0, bare
    assert (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err
    assert boxed.tree == bare.tree
    assert "Traceback" not in boxed.err


def test_make_tar_unzip_and_an_editors_atomic_save(work: Workplace) -> None:
    def make(project: Path) -> None:
        (project / "Makefile").write_text("all: out/hello.txt\nout/hello.txt:\n\tmkdir -p out && echo hello > $@\n")
        (project / "doc ü.txt").write_text("original\n")
        src = project / "src"
        src.mkdir()
        (src / "x.c").write_text("int x;\n")

    script = (
        "make -s && tar czf src.tgz src && mkdir unpacked && tar xzf src.tgz -C unpacked && "
        "python3 -c \"import zipfile; zipfile.ZipFile('a.zip','w').write('Makefile')\" && unzip -q a.zip -d zipped && "
        "printf 'saved\\n' > '.doc ü.txt.swp' && mv '.doc ü.txt.swp' 'doc ü.txt' && cat 'doc ü.txt' && ls -A"
    )
    if shutil.which("unzip") is None:
        pytest.skip("unzip is not installed")
    bare, boxed = work.twice(make, script)
    assert bare.code == 0, bare
    assert (boxed.code, boxed.out) == (bare.code, bare.out), boxed.err

    # Archives hold their members' mtimes, which differ between the two runs; what they unpack to is compared.
    def unpacked(tree: dict) -> dict:
        return {k: v for k, v in tree.items() if not k.endswith((".tgz", ".zip"))}

    assert unpacked(boxed.tree) == unpacked(bare.tree)
    assert os.path.exists(work.project / "out" / "hello.txt")
