"""The macOS backend: a policy as a Seatbelt profile, run by `sandbox-exec`; all in the `stockade run` process.

- `run`: `MacOSBackend`, one run start to end (policy, proxy session, run, report).
- `planner`: `SeatbeltPlanner`, a request becomes a `SeatbeltPlan` (build, explain, run).
- `profile`, `sbpl`: the profile's text, pure (`profile.render(ProfileSpec, PathResolver)`),
  from `base.sb` and the policy; `sbpl` quotes and spells SBPL.
- `supervise`: `sandbox-exec` started, signals relayed, the status passed on.
- `logstream`, `violations`: the sandbox's denials from `log stream`, and the policy line for each.

No imports here: a run imports only the modules it uses.
"""
