"""The checks after a run, before its status is passed on.

- `changes`: what the run created or changed among files that run code later.
- `gitcheck`: git data the run made where nothing protected it.
- `sweep`: protected paths that were absent at planning and exist now.
- `journal`: sweeps a killed run still owes, for the next run.
- `denials`: the file accesses the sandbox refused (`--trace`).
- `summary`: the end-of-run report, grouped and bounded.
"""
