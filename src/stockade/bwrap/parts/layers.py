"""Package caches the sandbox may write, seen through a layer of their own.

A package cache holds code the host runs later: cargo builds a `build.rs`
from ~/.cargo/git/checkouts or ~/.cargo/registry/src without checking it
again, Go links objects from ~/.cache/go-build, pip installs the wheels it
built once, pre-commit runs the hooks it cloned. A sandbox that writes there
plants code as surely as one that writes a git hook (docs/escapes.md, case 93).

So each such cache the sandbox could write is shown to it as an overlay: the
host's cache is the lower layer, read as it is; the upper layer is a folder of
this project's in stockade's cache (hidden from every sandbox), which the host
never runs. Whatever the sandbox adds, changes or removes lands there, and the
next run of the same project sees it again; the host's cache stays as the host
left it.

bwrap 0.8 (Debian 12's) has no overlay option, so the child mounts the layers
between fork and exec, in a mount namespace inside a user namespace of its own
(the one the network's namespace is made in, netns.py, when the run has one),
and bwrap binds each mount where the cache is. Root's runs make the user
namespace too, so a layer's markers are always `user.overlay.*` attributes
(`userxattr`) whoever mounts it.

Where overlay cannot be mounted (a file system that refuses to be an upper
layer, a path overlay's options cannot spell), the upper folder is bound
alone: a private cache, empty at first, and still never the host's.
"""

from __future__ import annotations

import os

from stockade.bwrap.parts.netns import enter_private_mounts, libc_call

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# The package caches built-in profiles make writable (tests/bwrap/plan/test_mounts.py holds this to their TOML).
BUILTIN_CACHES = (
    "~/.npm", "~/.cache/yarn", "~/.cache/pnpm", "~/.local/share/pnpm", "~/.cache/pip", "~/.cache/uv",
    "~/.cache/go-build", "~/go/pkg/mod", "~/.cargo/registry", "~/.cargo/git",
)  # fmt: skip

# Each cache a tool on the host runs or builds from, wherever a policy makes it writable: the
# built-in profiles' and these (what each holds that runs: docs/research/runs-later-candidates.md).
LAYERED_CACHES = (
    *BUILTIN_CACHES,
    "~/.m2/repository", "~/.gradle/caches", "~/.gradle/wrapper", "~/.rustup", "~/.cache/pre-commit",
    "~/.cache/bazel", "~/.cache/deno", "~/.bun/install/cache", "~/.nuget/packages", "~/.cache/composer",
    "~/.cache/ms-playwright", "~/.cache/huggingface", "~/.gem", "~/.local/share/gem",
)  # fmt: skip

# A layer: (the cache's real path, where the sandbox sees it too; its upper folder; overlay's work
# folder; the mount point bwrap binds from). Plain lists in a stored plan (plan_cache.py).
Layer = tuple[str, str, str, str]

UNSPELLABLE = (",", ":", "\\", "\n")  # overlay's option separators and escape
MS_BIND = 0x1000


def candidates(writable: Sequence[str], home: str) -> tuple[list[str], list[str]]:
    """(the folders to layer: each known cache that is a real folder inside a place bound writable,
    and each such place inside a known cache (`allow_write = ["~/.cache/pip/wheels"]`); the known
    caches inside a writable place that are absent or links, which the floor keeps instead: what
    a run makes there is moved aside after it). `writable` and `home` are real paths."""
    from stockade.profiles.paths import is_within  # planning's; the child's path (enter) imports nothing heavy

    places: list[str] = []
    unmade: list[str] = []
    for entry in LAYERED_CACHES:
        cache = os.path.join(home, entry[2:])
        real = os.path.realpath(cache)
        for root in writable:
            if is_within(root, real) and os.path.isdir(root):
                places.append(root)
            elif is_within(cache, root):
                if real == cache and os.path.isdir(cache) and not os.path.islink(cache):
                    places.append(cache)
                else:
                    unmade.append(cache)
    return sorted(set(places)), sorted(set(unmade))


def layer_of(place: str, store: str, project: str) -> Layer:
    """The layer of `place` for `project`: its folders under `store`."""
    return _layer(place, os.path.join(store, _project_key(project)))


def _project_key(project: str) -> str:
    import hashlib

    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in os.path.basename(project))[:40] or "root"
    return f"{name}-{hashlib.sha256(project.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


def _layer(place: str, base: str) -> Layer:
    import hashlib

    slug = "".join(c if c.isalnum() else "-" for c in place.strip("/"))[-48:]
    folder = os.path.join(base, f"{slug}-{hashlib.sha256(place.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}")
    return (place, f"{folder}/upper", f"{folder}/work", f"{folder}/mount")


def enter(layers: Sequence[Layer], uid: int, gid: int, *, in_own_user_namespace: bool, stage: Layer | None = None) -> list[str]:
    """In the child, before exec: a mount namespace of its own (and a user namespace, unless the
    network's was made already), where each layer's mount point shows its overlay. Runs as the
    user, so every folder it makes is the user's own; any failure but overlay's refusal raises.
    Returns why each layer that is not an overlay is not (its upper folder is bound alone).
    `stage`, a staged run's project (checkpoints/stage.py), is an overlay or the run does not start."""
    enter_private_mounts(uid, gid, in_own_user_namespace=in_own_user_namespace)  # nothing mounted here reaches the host
    if stage is not None:
        place, upper, work, mount_point = stage
        lower = _open_lower(place)
        why = "it is no longer a folder of its own" if lower is None else _overlay(f"/proc/self/fd/{lower}", upper, work, mount_point)
        if lower is not None:
            os.close(lower)
        if why is not None:
            raise OSError(f"cannot stage the project {place}: {why}; run it without --stage (or [checkpoints] stage = false)")
    refused: list[str] = []
    for place, upper, work, mount_point in layers:
        for folder in (upper, work, mount_point):
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError as error:
                raise OSError(error.errno, f"cannot make {folder} for the cache layer of {place} ({error.strerror}): "
                              f"stockade's cache folder must be yours and writable") from None  # fmt: skip
        lower = _open_lower(place)
        why = "it is no longer a folder of its own" if lower is None else _overlay(f"/proc/self/fd/{lower}", upper, work, mount_point)
        if lower is not None:
            os.close(lower)
        if why is not None:
            refused.append(f"{place}: {why}")
            libc_call("mount", "zzzLz", os.fsencode(upper), os.fsencode(mount_point), None, MS_BIND, None)
    return refused


def _open_lower(place: str) -> int | None:
    """The cache folder, held open (O_PATH) so that the overlay is made of the folder planning saw
    and not of whatever a link swapped in since; None when it is gone, or no longer the real
    folder at that path (a link on the way)."""
    try:
        fd = os.open(place, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if os.readlink(f"/proc/self/fd/{fd}") != place:
        os.close(fd)
        return None
    return fd


def _overlay(lower: str, upper: str, work: str, mount_point: str) -> str | None:
    """Mount the overlay; where overlay refuses it, why (then the caller binds the upper folder alone)."""
    if any(mark in path for path in (lower, upper, work) for mark in UNSPELLABLE):
        return f"stockade's cache folder {os.path.dirname(upper)} holds a character overlay's options cannot spell (, : \\)"
    options = os.fsencode(f"userxattr,lowerdir={lower},upperdir={upper},workdir={work}")
    try:
        libc_call("mount", "zzzLz", b"overlay", os.fsencode(mount_point), b"overlay", 0, options)
    except OSError as error:
        return f"the kernel refused an overlay there ({error.strerror})"
    return None


def probe(store: str) -> str | None:
    """Whether a layer can be an overlay under `store` (`stockade doctor`): None when it can, else why
    not. Tried as a run does it, in a child of its own, on an empty cache of the probe's own."""
    from stockade.bwrap.parts.netns import in_child

    base = os.path.join(os.path.realpath(store), ".probe")
    layer = (os.path.join(base, "lower"), os.path.join(base, "upper"), os.path.join(base, "work"), os.path.join(base, "mount"))

    def attempt() -> str | None:
        os.makedirs(layer[0], mode=0o700, exist_ok=True)
        refused = enter([layer], os.getuid(), os.getgid(), in_own_user_namespace=False)
        return "; ".join(why.split(": ", 1)[-1] for why in refused) or None

    return in_child(attempt)
