"""Inside the sandbox: make one syscall through a non-native ABI; print what came back.

argv[1]: "x32" (x86_64 number | 0x40000000), "i386" (int $0x80 from 64-bit
code), or "x32-thread" (the x32 call from a second thread, so a filter that
kills only the thread would let the main thread print "survived").
A filter doing its job kills the process with SIGSYS before anything prints.
"""

import ctypes
import json
import mmap
import resource
import sys
import threading
import time

X32_SYSCALL_BIT = 0x40000000
X86_64_GETPID = 39
# mov eax, 20 (i386 getpid); int 0x80; ret
I386_GETPID = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])


def x32_getpid():
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(ctypes.c_long(X32_SYSCALL_BIT | X86_64_GETPID))
    return {"result": result, "errno": ctypes.get_errno()}


def i386_getpid():
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(I386_GETPID)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return {"result": ctypes.CFUNCTYPE(ctypes.c_int)(address)(), "errno": 0}


def from_thread():
    worker = threading.Thread(target=x32_getpid)
    worker.start()
    worker.join()
    time.sleep(0.2)
    return {"result": "thread returned", "errno": 0}


resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGSYS would dump core
MODES = {"x32": x32_getpid, "i386": i386_getpid, "x32-thread": from_thread}
outcome = MODES[sys.argv[1]]()
print(json.dumps({"survived": True, **outcome}), flush=True)
