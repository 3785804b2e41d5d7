"""Whether a policy file a CI workflow names is the one the workflow's owners meant (ESCAPES 88).

`--policy FILE` is the user's explicit choice, so it is trusted as written.
In CI that choice is the workflow's, but the file's content is the pull
request's: a pull request that edits `.stockade.toml` would get the network
it writes for itself (the hole under `pull_request_target`, and in any
repository whose workflows are protected but whose policy file is not).

So a named file is trusted as it is only when one of these holds, and
otherwise it can only narrow the built-in default, like an untrusted
project file on a developer's machine:
- `STOCKADE_POLICY_SHA256` is set (the workflow pins the policy) and equals
  `content_digest` of the file and every file it extends (`stockade check
  --json` prints it as "digest");
- in a pull request (GITHUB_EVENT_NAME pull_request or pull_request_target),
  each of those files is byte for byte the base branch's copy (read with
  git from `origin/$GITHUB_BASE_REF`, else the merge commit's first parent).
Outside a pull request, with no pin, nothing changes. What the untrusted
file narrows is the base branch's copy of it when that copy extends only
built-in profiles (what the owners reviewed), else the built-in default.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping

from stockade.profiles.loader import Layer

PIN_VARIABLE = "STOCKADE_POLICY_SHA256"
# Events whose runs commonly check out a pull request's code (its head, or a merge with it).
PULL_REQUEST_EVENTS = (
    "pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment", "issue_comment",
    "workflow_run", "merge_group",
)  # fmt: skip


def content_digest(layers: list[Layer]) -> str:
    """The policy files' contents in order, whatever path they were checked out at."""
    digest = hashlib.sha256()
    for layer in layers:
        if layer.implicit or layer.is_builtin:
            continue
        digest.update(layer.text.encode() + b"\0")
    return digest.hexdigest()


def doubt(layers: list[Layer], env: Mapping[str, str]) -> str | None:
    """Why the named policy file is not trusted as it is here (see the module), or None."""
    pin = env.get(PIN_VARIABLE, "").strip().lower()
    if pin:
        return None if content_digest(layers) == pin else f"its digest is not the {PIN_VARIABLE} the workflow pins"
    if env.get("GITHUB_EVENT_NAME") not in PULL_REQUEST_EVENTS:
        return None
    for layer in layers:
        if layer.implicit or layer.is_builtin:
            continue
        if _linked(layer.source):
            return f"{layer.source} is a link, or lies behind one, so what it names could be any file of the pull request's"
        base = _base_copy(layer.source, env.get("GITHUB_BASE_REF", ""))
        if base is None:
            return (
                f"the base branch's copy of {layer.source} could not be read (fetch the base branch, "
                f"actions/checkout's fetch-depth: 0, or pin the policy with {PIN_VARIABLE})"
            )
        if base != layer.text.encode():
            return f"the pull request changed {layer.source}"
    return None


def base_text(layers: list[Layer], env: Mapping[str, str]) -> str | None:
    """The base branch's copy of the named file (the first of `layers` not implicit), in a pull request."""
    if env.get("GITHUB_EVENT_NAME") not in PULL_REQUEST_EVENTS:
        return None
    named = next((layer for layer in layers if not layer.implicit and not layer.is_builtin), None)
    if named is None or _linked(named.source):
        return None
    data = _base_copy(named.source, env.get("GITHUB_BASE_REF", ""))
    return None if data is None else data.decode("utf-8", "replace")


def _linked(path: str) -> bool:
    """Whether the file, or a folder on its way inside its repository, is a link: compared by the
    path it names, a link the pull request made would send the comparison to another file. (Links
    above the repository, /home on some systems, are the machine's.)"""
    path = os.path.normpath(path)
    top = os.path.dirname(path)
    while top != "/" and not os.path.lexists(os.path.join(top, ".git")):
        top = os.path.dirname(top)
    current = top
    for part in os.path.relpath(path, top).split("/"):
        current = os.path.join(current, part)
        if os.path.islink(current):
            return True
    return False


def _base_copy(path: str, base_ref: str) -> bytes | None:
    """The file's content on the base branch, or None when git cannot say. The merge commit's
    first parent stands for the base only when HEAD is a merge (a head checkout's parent is the
    pull request's own commit)."""
    folder = os.path.dirname(path)
    top = _git(["rev-parse", "--show-toplevel"], folder)
    if top is None:
        return None
    relative = os.path.relpath(os.path.normpath(path), top.decode().strip())
    if relative.startswith(".."):
        return None
    commits = [f"origin/{base_ref}"] if base_ref else []
    if _git(["rev-parse", "--verify", "--quiet", "HEAD^2"], folder) is not None:
        commits.append("HEAD^1")
    for commit in commits:
        found = _git(["show", f"{commit}:{relative}"], folder)
        if found is not None:
            return found
    return None


def _git(args: list[str], cwd: str) -> bytes | None:
    """git's output, or None; with nothing of the repository's config that runs a program."""
    try:
        done = subprocess.run(
            ["git", "-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*", *args],
            cwd=cwd, capture_output=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
