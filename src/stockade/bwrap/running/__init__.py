"""Running a plan: bwrap started, supervised and ended, in the `stockade run` process.

- `execute`: one run start to finish, from descriptors to the summary.
- `supervise`: bwrap under a relay of signals, wall time, the exit status.
- `signal_reset`: bwrap kept alive through signals meant for the command.
- `console`: the sandbox's own pty; `freeze`: a sandbox stopped while a question is asked.
- `network`: the proxy variables inside and the door outside; `netcount`: refused network attempts.
- `scratch`: `/tmp` inside; `gitstage`: git's own config writes, staged and carried back.
- `trace`: `--trace`'s strace outside the sandbox.
"""
