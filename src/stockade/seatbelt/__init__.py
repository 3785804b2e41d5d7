"""The macOS backend: a `Policy` as a Seatbelt profile, run by `sandbox-exec`.

Public names (import them from their modules on the hot path):

- `backend.SeatbeltPlanner(proxy_port=None, session_id=None, ...)`: the
  `Backend` (build -> `SeatbeltPlan`, explain -> text, run -> exit code);
- `profile.render(ProfileSpec, PathResolver) -> Profile`: pure SBPL text and
  `-D` parameters;
- `violations.parse_lines(lines, tag)`, `violations.summary(violations, index)`:
  denials from `log stream --style ndjson`, and the policy line for each.
"""

from __future__ import annotations

from stockade.seatbelt.backend import SeatbeltPlan, SeatbeltPlanner
from stockade.seatbelt.profile import Profile, ProfileSpec, render

__all__ = ["Profile", "ProfileSpec", "SeatbeltPlanner", "SeatbeltPlan", "render"]
