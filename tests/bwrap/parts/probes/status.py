"""Inside the sandbox: who am I, and is every visible process filtered? (ESCAPES 49, V11)

Prints {"uid": .., "processes": {pid: {"Seccomp": .., "NoNewPrivs": ..}}} for
every process in /proc: with --unshare-pid, bwrap's pid 1 and this one.
"""

import json
import os

processes = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
    except OSError:
        continue
    processes[pid] = {key: fields.get(key, "").strip() for key in ("Seccomp", "NoNewPrivs")}
print(json.dumps({"uid": os.getuid(), "processes": processes}))
