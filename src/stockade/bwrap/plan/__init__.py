"""Planning a Linux run: what the sandbox sees, and the plan kept for the next run.

- `planner`: a request becomes a `Launch` (bwrap's words, the seccomp filter, limits, network).
- `mounts`: the filesystem view: writable, read-only, hidden, and why.
- `plan_cache`: stored plans, used again while nothing they were made from changed.
- `placeholders`: what stockade 0.1 left in projects, removed before a run.
"""
