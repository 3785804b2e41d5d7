"""Checkpoints: the state before a run of every path the run changed, and undo.

`store` records one run's checkpoint as the run goes (each path's state taken
just before its first change), `history` lists and prunes a project's
checkpoints, `restore` puts one back. Both backends record through `store`;
the Linux side learns of each change from a seccomp user notification
(bwrap/running/checkpointing.py).
"""
