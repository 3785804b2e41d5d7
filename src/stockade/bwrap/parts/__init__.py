"""What planning, running and the checks after all build with.

- `args`: bwrap's options as typed pieces.
- `folders`, `globs`: project folders as the walks see them, and deny globs expanded.
- `seccomp`, `seccomp_cache`: the syscall filter, and its compiled BPF cached.
- `limits`: `[limits]` on this machine; `probe`: the machine's facts (doctor).
- `netns`: the sandbox's network namespace; `interception`: every connection and DNS query to the filter;
  `forwards`: the host's loopback ports a policy allows.
- `layers`: writable package caches through a layer of their own.
- `private_home`, `host_sockets`, `hardlinks`, `marker`: the home, the host's sockets hidden,
  hard links made the project's own, the sign of being inside.
"""
