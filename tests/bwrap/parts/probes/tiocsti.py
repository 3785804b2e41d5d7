"""Inside the sandbox, on a pty that is the controlling terminal: inject a key with TIOCSTI.

The harness puts the pty in raw mode. Prints {"errno": .., "read": ..}:
what the ioctl answered and what then sat in the terminal's input queue.
argv[1] "high" sets bit 32 of the request (the kernel ignores the high half).
"""

import ctypes
import json
import select
import sys
import termios

KEY = b"Q"
request = termios.TIOCSTI | ((1 << 32) if sys.argv[1:] == ["high"] else 0)
libc = ctypes.CDLL(None, use_errno=True)
ctypes.set_errno(0)
answer = libc.ioctl(0, ctypes.c_ulong(request), ctypes.c_char_p(KEY))
err = ctypes.get_errno() if answer < 0 else 0
ready, _, _ = select.select([0], [], [], 0.5)
seen = sys.stdin.buffer.raw.read(16) if ready else b""
print(json.dumps({"errno": err, "read": seen.decode("latin-1")}), flush=True)
