"""The Linux backend: a policy becomes a bubblewrap sandbox with a seccomp filter, run and checked after.

`run.py` (`LinuxBackend`) is one `stockade run` start to end; the rest is in
four packages, each importing only those listed after it (tests/test_layers.py):

- `plan/`: a request becomes a plan (`planner`, the filesystem view in
  `mounts`), stored and used again while it holds (`plan_cache`).
- `running/`: a plan is executed: bwrap started and supervised, signals,
  the terminal, the network bridge, `/tmp`, git's staged config.
- `after/`: the checks after a run: what it changed that runs code later,
  git data, protected paths it made, the sweeps a killed run still owes,
  the refused file accesses, the summary's grouping.
- `parts/`: what all three build with: bwrap's options, folder walks and
  globs, the seccomp filter, limits, namespaces, interception, cache layers,
  the private home, the machine's facts (doctor's probes).

All in the `stockade run` process (or its forked children, before they become
bwrap). Every `__init__` is empty of imports: a cached run imports only what
it uses (tests/cli/test_lean_path.py).
"""
