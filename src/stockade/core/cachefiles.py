"""Files stockade writes once into its own cache, named by their content, and reuses only when intact.

The CA bundle a sandbox trusts (proxy/client/cabundle.py) and ssh's files
(proxy/client/sshroute.py) are bound read-only into sandboxes: a file under the
expected name that is not exactly what stockade would write (planted, a
link, another owner's, writable by others) must be replaced, never trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat


def write_once(folder: str, name: str, content: bytes, mode: int = 0o644, suffix: str = "") -> str:
    """`content` in `folder` under a name made from it (written atomically); its path.

    A file already there under that name is used only if it is this user's regular file, writable by
    no one else, holding exactly `content`: anything else (another content under the expected name,
    a link, another owner's file) is replaced, never trusted or written through. The folder must be
    this user's and closed to others' writes (SandboxSetupError otherwise)."""
    path = os.path.join(folder, f"{name}-{hashlib.sha256(content).hexdigest()[:16]}{suffix}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        from stockade.core.errors import SandboxSetupError

        raise SandboxSetupError(f"{folder} must be a folder of this user's that no one else can write to (it holds files sandboxes trust)")
    if _holds(path, content, mode):
        return path
    temporary = f"{path}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            os.fchmod(fd, mode)  # whatever the umask
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def _holds(path: str, content: bytes, mode: int) -> bool:
    """Whether `path` is this user's regular file (not a link), writable by no one else, holding `content`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o7777 != mode or info.st_size != len(content):
            return False
        found = b""
        while len(found) <= len(content):
            chunk = os.read(fd, len(content) + 1 - len(found))
            if not chunk:
                break
            found += chunk
        return found == content
    finally:
        os.close(fd)
