"""The administrator's baseline: a system policy every user and project policy can only narrow.

`/etc/stockade/policy.toml` (root's to write), and the file `STOCKADE_SYSTEM_POLICY`
names (for an administrator's tooling, CI images and tests; applied as well,
never instead: an environment variable cannot take a deployed baseline away),
hold the widest any run may be. Whatever policy a run resolves (the user's
config, a trusted project file, `--policy`, `--profile`, an MCP server's,
`--gpu`, `--stage`) is narrowed by it with the rules an untrusted project file
meets today (profiles/narrow.py), key by key: a key the baseline sets is a
bound, a key it leaves out bounds nothing (a baseline that only lists hosts
leaves the user's writable folders alone). Denials (`deny_read`,
`deny_write`, network and env `deny`) are always added.

A baseline that exists and cannot be read or parsed stops every run: a floor
that cannot be read never turns into no floor. `required = true` also makes
its absence stop every run: stockade remembers, in the user's state folder
(hidden from every sandbox), each required baseline it has read, and refuses
while one of them is gone. The agent hooks then block every shell command with
the reason, instead of wrapping one that cannot run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from stockade.core.errors import PolicyError
from stockade.profiles.loader import Layer, parse_layer, read_policy
from stockade.profiles.model import Policy

SYSTEM_FILE = "/etc/stockade/policy.toml"
VARIABLE = "STOCKADE_SYSTEM_POLICY"
REMEMBERED = "baseline-required"  # in the state folder: the required baselines read before, one path a line
SOURCE_PREFIX = "baseline:"  # how the baseline shows among a policy's sources (check, explain)


@dataclass(frozen=True)
class Baseline:
    """The baseline files read, composed, and which keys they set."""

    files: tuple[str, ...]
    policy: Policy
    said: frozenset[str]  # "table.key" for every key a baseline file sets
    required: bool


def files(env: Mapping[str, str]) -> list[str]:
    """The baseline files this run must honour, the system's first."""
    named = env.get(VARIABLE, "")
    found = [SYSTEM_FILE]
    if named:
        if not os.path.isabs(named):
            raise PolicyError(f"{VARIABLE}={named!r} is not an absolute path; name the baseline file in full")
        if named != SYSTEM_FILE:
            found.append(named)
    return found


def load(env: Mapping[str, str], state: Path, project_dir: Path, home: Path) -> Baseline | None:
    """The baseline for a run in `project_dir`, or None where there is none; PolicyError (exit 2) for
    one that cannot be read or parsed, a named one that is missing, or a required one that is gone."""
    layers: list[Layer] = []
    for path in files(env):
        try:
            text = read_policy(Path(path))
        except PolicyError as exc:
            if path == SYSTEM_FILE and not os.path.lexists(path):
                continue
            why = f"the system baseline cannot be read ({exc.reason}); stockade runs nothing without it: ask your administrator"
            raise PolicyError(why, file=path) from None
        layers.append(parse_layer(text, path, base=project_dir, home=home, system=True))
    _check_remembered(state, [layer.source for layer in layers])
    if not layers:
        return None
    required = any(layer.required for layer in layers)
    if required:
        _remember(state, [layer.source for layer in layers if layer.required])
    from stockade.profiles.merge import compose

    said = frozenset(f"{table}.{key}" for layer in layers for table, values in layer.values.items() for key in values)
    policy = compose(layers, project_dir=project_dir, origin=layers[-1].source)
    return Baseline(tuple(layer.source for layer in layers), policy, said, required)


def problem(env: Mapping[str, str], cwd: str) -> str | None:
    """Why no run can start here under the baseline (for the agent hooks: they block the call with it
    rather than wrap a command that cannot run), or None. Nothing is parsed where there is no baseline."""
    from stockade.core.locations import locate

    locations = locate(env)
    if not (os.path.lexists(SYSTEM_FILE) or env.get(VARIABLE) or os.path.lexists(locations.state / REMEMBERED)):
        return None
    try:
        load(env, locations.state, Path(cwd), locations.home)
    except PolicyError as exc:
        return str(exc)
    return None


def _check_remembered(state: Path, present: list[str]) -> None:
    for path in _remembered(state):
        if path not in present:
            raise PolicyError(
                f"the system baseline {path} is required and is gone (it could not be found); stockade runs nothing without it: "
                f"ask your administrator to restore it (if it was removed on purpose: delete {state / REMEMBERED})"
            )


def _remembered(state: Path) -> list[str]:
    try:
        with open(state / REMEMBERED, encoding="utf-8") as handle:
            return [line.strip() for line in handle.read(65536).splitlines() if line.strip()]
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        why = f"cannot read {state / REMEMBERED} ({exc}), which names the required system baselines"
        raise PolicyError(why, file=str(state / REMEMBERED)) from None


def _remember(state: Path, paths: list[str]) -> None:
    known = _remembered(state)
    if all(path in known for path in paths):
        return
    text = "".join(f"{path}\n" for path in dict.fromkeys([*known, *paths]))
    temporary = state / f"{REMEMBERED}.{os.getpid()}.tmp"
    try:
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, state / REMEMBERED)
    except OSError:
        pass  # it is remembered the next time the state folder can be written; the baseline applies now


def narrowed(baseline: Baseline, policy: Policy) -> tuple[Policy, list[str]]:
    """`policy` within the baseline, and one note per allowance it lost."""
    import re

    from stockade.profiles.narrow import within_bound

    bounded, notes = within_bound(baseline.policy, baseline.said, policy)
    bounded = replace(
        bounded,
        sources=tuple(dict.fromkeys((*(SOURCE_PREFIX + path for path in baseline.files), *policy.sources))),
        protected_files=tuple(dict.fromkeys((*policy.protected_files, *baseline.files))),
    )
    # the narrowing's notes speak of an untrusted project and "your own policy": here the bound is the baseline
    notes = [re.sub(r" \((outside what your own|not a public address|your own policy)[^)]*\)", "", note) for note in notes]
    for name in ("memory", "pids", "wall_time", "file_size", "tmp_size"):
        if getattr(bounded.limits, name) != getattr(policy.limits, name):
            notes.append(f"[limits] {name} lowered to the baseline's")
    for name in ("log", "otlp"):
        if getattr(bounded.audit, name) != getattr(policy.audit, name):
            notes.append(f"[audit] {name}: the baseline's is used")
    return bounded, notes
