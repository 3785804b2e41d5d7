"""The host's GPUs inside the sandbox (`[devices] gpu = true`, `--gpu`): device nodes, nothing else of /dev.

bwrap's /dev holds only null, zero, full, random, urandom, tty and the pty
multiplexer, so CUDA inside finds no device and ML code falls back to the CPU.
With gpu on, the NVIDIA nodes the host has are bound as they are: the control
nodes every CUDA process opens (nvidiactl, nvidia-uvm, nvidia-uvm-tools,
nvidia-modeset), one node per GPU (nvidia0, nvidia1, ...), and the capability
nodes of MIG (nvidia-caps/*); and the DRM render nodes (dri/renderD*) that
ROCm, Vulkan and VA-API use. Only character devices are taken, never through
a link. The driver's libraries are under /usr, already readable, and
/proc/driver/nvidia is readable in the sandbox's /proc.

`gpus = ["0"]` takes only those GPUs' nodes (nvidia-smi's numbers, which are
the nodes' minor numbers), and tells CUDA to count in the same order
(CUDA_DEVICE_ORDER=PCI_BUS_ID); render nodes belong to no number stockade
can tell, so a chosen set binds none.
"""

from __future__ import annotations

import os
import stat

NVIDIA_CONTROL = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
NVIDIA_CAPS = "nvidia-caps"
RENDER_FOLDER = "dri"


def gpu_nodes(gpus: tuple[str, ...] = (), dev: str = "/dev") -> list[str]:
    """The host's GPU device nodes to bind, as paths under `dev` (sorted, each once)."""
    found: list[str] = []
    per_gpu = [
        name for name in _names(dev) if name[:6] == "nvidia" and name[6:].isascii() and name[6:].isdigit() and _is_device(os.path.join(dev, name))
    ]
    chosen = [name for name in per_gpu if not gpus or _gpu_number(name) in gpus]
    if chosen:
        found += [os.path.join(dev, name) for name in (*NVIDIA_CONTROL, *chosen) if _is_device(os.path.join(dev, name))]
        caps = os.path.join(dev, NVIDIA_CAPS)
        found += [os.path.join(caps, name) for name in _names(caps) if name.startswith("nvidia-cap") and _is_device(os.path.join(caps, name))]
    if not gpus:
        found += render_nodes(dev)
    return sorted(dict.fromkeys(found))


def render_nodes(dev: str = "/dev") -> list[str]:
    """The host's DRM render nodes (a GPU of another maker, or one without NVIDIA's driver)."""
    render = os.path.join(dev, RENDER_FOLDER)
    return [os.path.join(render, name) for name in _names(render) if name.startswith("renderD") and _is_device(os.path.join(render, name))]


def gpu_environment(gpus: tuple[str, ...], host_env: dict[str, str]) -> dict[str, str]:
    """The variables that make CUDA use the chosen GPUs (none for all of them, or where the user set them)."""
    if not gpus or "CUDA_VISIBLE_DEVICES" in host_env:
        return {}
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(gpus)}


def _gpu_number(name: str) -> str:
    """The GPU's number in a node's name (nvidia0 -> "0"), or ""."""
    number = name[len("nvidia") :] if name.startswith("nvidia") else ""
    return number if number.isascii() and number.isdigit() else ""


def _names(folder: str) -> list[str]:
    """The names in `folder` when it is a real folder (a link there is never followed)."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _is_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.lstat(path).st_mode)
    except OSError:
        return False
