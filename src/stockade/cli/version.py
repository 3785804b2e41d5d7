"""stockade's version, importable without Typer or package metadata (kept equal to pyproject.toml by a test)."""

VERSION = "0.1.0"
