"""Which host device nodes `--gpu` binds: NVIDIA's and the render nodes, character devices only, never a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.bwrap.parts.devices import gpu_environment, gpu_nodes


def _node(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, 0o20600, os.makedev(0, 0))  # a character device anyone may make (overlay's whiteout)


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    root = tmp_path / "dev"
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps/nvidia-cap1",
                 "dri/renderD128", "dri/card0", "sda", "kvm"):  # fmt: skip
        _node(root / name)
    (root / "nvidia7").write_text("a plain file, not a device")
    os.symlink("sda", root / "nvidia9")
    return root


def test_every_gpu_s_nodes_and_nothing_else_of_dev(dev: Path) -> None:
    found = [os.path.relpath(path, dev) for path in gpu_nodes((), str(dev))]
    assert found == [
        "dri/renderD128", "nvidia-caps/nvidia-cap1", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidiactl",
    ]  # fmt: skip
    assert "sda" not in found and "kvm" not in found and "dri/card0" not in found  # the control: other devices stay out
    assert "nvidia7" not in found and "nvidia9" not in found, "a plain file or a link is never bound"


def test_chosen_gpus_bind_only_theirs_and_no_render_node(dev: Path) -> None:
    found = [os.path.relpath(path, dev) for path in gpu_nodes(("1",), str(dev))]
    assert "nvidia1" in found and "nvidia0" not in found and "nvidiactl" in found
    assert not any(path.startswith("dri/") for path in found)
    assert gpu_nodes(("5",), str(dev)) == [], "a GPU the machine lacks binds nothing, not the control nodes alone"


def test_a_machine_without_a_gpu_has_nothing_to_bind(tmp_path: Path) -> None:
    assert gpu_nodes((), str(tmp_path)) == []


def test_render_nodes_alone_are_a_gpu_too(tmp_path: Path) -> None:
    _node(tmp_path / "dri" / "renderD128")
    assert gpu_nodes((), str(tmp_path)) == [str(tmp_path / "dri" / "renderD128")]


def test_chosen_gpus_are_counted_as_nvidia_smi_counts_them() -> None:
    assert gpu_environment(("0", "2"), {}) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,2"}
    assert gpu_environment(("0",), {"CUDA_VISIBLE_DEVICES": "0"}) == {}, "the user's own choice stands"
    assert gpu_environment((), {}) == {}


def test_a_folder_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    other = tmp_path / "other"
    _node(other / "kmsg")
    _node(other / "nvidia-cap9")
    root = tmp_path / "dev"
    _node(root / "nvidia0")
    _node(root / "nvidiactl")
    os.symlink(other, root / "nvidia-caps")
    os.symlink(other, root / "dri")
    found = [os.path.relpath(path, root) for path in gpu_nodes((), str(root))]
    assert found == ["nvidia0", "nvidiactl"], found
    (root / "nvidia-caps").unlink()
    _node(root / "nvidia-caps" / "nvidia-cap1")
    _node(root / "nvidia-caps" / "kmsg")  # only MIG's capability nodes, whatever else the folder holds
    assert "nvidia-caps/kmsg" not in [os.path.relpath(path, root) for path in gpu_nodes((), str(root))]
