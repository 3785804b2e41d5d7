"""The command line: a lean `run` path and a Typer application for everything else."""
