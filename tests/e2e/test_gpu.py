"""GPUs inside the sandbox (`--gpu`, `[devices] gpu = true`): the host's device nodes, nothing else of /dev.

Here (no GPU): a run asking for one says so in one line and goes on; the
device words bwrap gets make a usable device in a read-only /dev; the filter
lets a GPU driver's ioctls through and still refuses io_uring. Where an NVIDIA
GPU exists, the `gpu` tests compare nvidia-smi and a CUDA tensor inside with
outside, and pinned memory against the memory limit.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from stockade.bwrap.parts.args import Dev
from stockade.bwrap.parts.devices import gpu_nodes
from tests.e2e.boxes import Box

HAS_GPU = bool(gpu_nodes()) and shutil.which("nvidia-smi") is not None
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no NVIDIA GPU and driver on this machine")
TORCH_PYTHON = os.environ.get("STOCKADE_TEST_TORCH_PYTHON", "/opt/torch/.venv/bin/python")

IOCTL_PROBE = """
import ctypes, fcntl, os
fd = os.open('/dev/null', os.O_RDWR)
def code(request):
    try:
        fcntl.ioctl(fd, request, bytes(64))
    except OSError as error:
        return error.errno
    return 0
# NVIDIA's control ioctls (type 'F': NV_ESC_RM_ALLOC, NV_ESC_CARD_INFO) and UVM's (UVM_INITIALIZE), then TIOCSTI
print(code(0xC020462B), code(0xC01046C8), code(0x30000001), code(0x5412))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(425, 8, ctypes.create_string_buffer(120))  # io_uring_setup
print(ctypes.get_errno())
"""


def test_without_a_gpu_a_run_asking_for_one_says_so_and_goes_on(vbox: Box) -> None:
    if gpu_nodes():
        pytest.skip("this machine has GPU device nodes")
    plain = vbox.run("ls /dev")
    asked = vbox.run("ls /dev", options=["--gpu"])
    assert asked.returncode == 0 and asked.stdout == plain.stdout, asked  # nothing of /dev added, nothing failed
    assert "GPUs asked for (--gpu or [devices] gpu = true), but this machine has no GPU device nodes" in asked.stderr, asked
    assert "Traceback" not in asked.stderr


def test_the_device_words_make_a_usable_device_in_a_read_only_dev() -> None:
    device = next((path for path in ("/dev/fuse", "/dev/kvm", "/dev/hwrng", "/dev/cpu_dma_latency") if os.path.exists(path)), None)
    bwrap = shutil.which("bwrap")
    if device is None or bwrap is None:
        pytest.skip("no spare device node or no bwrap here")
    script = f"test -c {device} && stat -c %t:%T {device}; touch /dev/planted 2>&1 || echo READ-ONLY"

    def inside(pieces: Dev) -> str:
        words = ["--ro-bind", "/", "/", *pieces.to_args(), "--proc", "/proc", "--unshare-all", "--die-with-parent", "--", "sh", "-c", script]
        return subprocess.run([bwrap, *words], capture_output=True, text=True, timeout=60).stdout

    bound = inside(Dev(devices=(device,)))
    rdev = os.stat(device).st_rdev
    assert f"{os.major(rdev):x}:{os.minor(rdev):x}" in bound, bound
    assert "READ-ONLY" in bound, "/dev stays read-only with a device bound in it"
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert f"{os.major(rdev):x}:{os.minor(rdev):x}" not in inside(Dev()), "the control: bwrap's own /dev lacks it"


def test_a_gpu_run_lets_driver_ioctls_through_and_still_refuses_io_uring(vbox: Box) -> None:
    run = vbox.run(argv=["/usr/bin/python3", "-c", IOCTL_PROBE], options=["--gpu"])  # the system's: seen in every sandbox
    assert run.returncode == 0, run
    ioctls, uring = run.stdout.split("\n")[:2]
    assert ioctls.split() == ["25", "25", "25", "1"], run  # ENOTTY from the device for the driver's, EPERM for TIOCSTI
    assert uring.strip() in ("1", "38"), run  # EPERM (or ENOSYS): refused before the kernel acts


@pytest.mark.gpu
@needs_gpu
def test_nvidia_smi_sees_the_same_gpus_inside(vbox: Box) -> None:
    outside = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=120)
    inside = vbox.run(argv=["nvidia-smi", "-L"], options=["--gpu"], timeout=120)
    assert inside.returncode == 0 and inside.stdout == outside.stdout, (inside, outside)
    plain = vbox.run(argv=["nvidia-smi", "-L"], timeout=120)
    assert plain.returncode != 0 or plain.stdout != outside.stdout, "the control: without --gpu there is no GPU"


@pytest.mark.gpu
@needs_gpu
def test_a_cuda_tensor_operation_runs_inside(vbox: Box) -> None:
    if not os.access(TORCH_PYTHON, os.X_OK):
        pytest.skip(f"no PyTorch at {TORCH_PYTHON} (STOCKADE_TEST_TORCH_PYTHON names one)")
    script = "import torch; x = torch.ones(1024, 1024, device='cuda'); print(torch.cuda.is_available(), float((x @ x).sum()))"
    outside = subprocess.run([TORCH_PYTHON, "-c", script], capture_output=True, text=True, timeout=300)
    inside = vbox.run(argv=[TORCH_PYTHON, "-c", script], options=["--gpu"], timeout=300)
    assert inside.returncode == 0 and inside.stdout == outside.stdout == f"True {1024.0**3}\n", (inside, outside)
    plain = vbox.run(argv=[TORCH_PYTHON, "-c", "import torch; print(torch.cuda.is_available())"], timeout=300)
    assert plain.stdout.strip() == "False", "the control: without --gpu CUDA sees no device"


@pytest.mark.gpu
@needs_gpu
def test_pinned_memory_counts_against_the_memory_limit(vbox: Box) -> None:
    if not os.access(TORCH_PYTHON, os.X_OK):
        pytest.skip(f"no PyTorch at {TORCH_PYTHON}")
    policy = '[filesystem]\nallow_write = ["."]\n[limits]\nmemory = "2G"\n[devices]\ngpu = true\n'
    small = "import torch; t = torch.empty(256 * 2**20, dtype=torch.uint8, pin_memory=True); print('pinned', t.is_pinned())"
    large = "import torch; t = torch.empty(4 * 2**30, dtype=torch.uint8, pin_memory=True); t.fill_(1); print('pinned', t.is_pinned())"
    ok = vbox.run(argv=[TORCH_PYTHON, "-c", small], policy=policy, timeout=300)
    assert ok.returncode == 0 and "pinned True" in ok.stdout, ok
    over = vbox.run(argv=[TORCH_PYTHON, "-c", large], policy=policy, timeout=300)
    assert over.returncode != 0, "4 GB pinned under a 2 GB limit does not fit"
    assert "Traceback (most recent call last)" not in over.stderr.split("stockade:")[-1]
