"""Inside the sandbox: try each syscall and print {case id: errno} as JSON (0 = success).

bubblewrap's try-syscall trick: arguments are deliberately bad (pointer 16,
fd -1, impossible flag mixes), so a call that reaches the kernel fails
harmlessly with EFAULT, EBADF or EINVAL, while the seccomp filter answers with
its own errno. argv[1] is a JSON list of {"id", "nr", "args"} cases, numbers
resolved by the test on the host; the word "buf" stands for a writable
buffer. Cases with "special" run a small Python action instead.
Runs under Debian's /usr/bin/python3, so it imports nothing from stockade.
"""

import ctypes
import errno
import json
import os
import subprocess
import sys
import threading

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def raw(nr, args):
    buffer = ctypes.create_string_buffer(4096)
    words = [ctypes.addressof(buffer) if a == "buf" else a for a in args]
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *(ctypes.c_ulong(w & (2**64 - 1)) for w in words))
    return ctypes.get_errno() if result < 0 else 0


def oserror(action):
    try:
        action()
    except OSError as exc:
        return exc.errno
    return 0


def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    return 0 if os.waitstatus_to_exitcode(status) == 7 else errno.ECHILD


def thread():
    seen = []
    worker = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
    worker.start()
    worker.join()
    return 0 if seen and seen[0] != threading.get_native_id() else errno.ESRCH


def spawn():
    return subprocess.run(["/bin/true"], check=False).returncode


def fionread_pipe():
    import fcntl
    import termios

    read_end, write_end = os.pipe()
    os.write(write_end, b"abc")
    count = ctypes.c_int(0)
    fcntl.ioctl(read_end, termios.FIONREAD, count)
    return 0 if count.value == 3 else errno.EIO


SPECIAL = {
    "fork": lambda: oserror(fork),
    "thread": lambda: oserror(thread),
    "spawn": lambda: oserror(spawn),
    "fionread_pipe": lambda: oserror(fionread_pipe),
}


def main():
    results = {}
    for case in json.loads(sys.argv[1]):
        special = case.get("special")
        results[case["id"]] = SPECIAL[special]() if special else raw(case["nr"], case["args"])
    print(json.dumps(results))


main()
