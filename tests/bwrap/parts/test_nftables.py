"""The namespace's table as one netlink batch (bwrap/parts/nftables.py): the very ruleset nft's own text makes.

Each test loads into a fresh user and network namespace of a forked child,
never into the host's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest

from stockade.bwrap.parts import interception, netns, nftables


def listed_after(load: Callable[[], object]) -> str:
    """`nft list ruleset` in a fresh namespace once `load()` ran there ("error: ..." if it raised)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read)
            netns.enter_user_namespace(netns.CLONE_NEWNET, os.getuid(), os.getgid())
            load()
            listed = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True, check=True).stdout
            os.write(write, listed.encode())
        except BaseException as error:  # noqa: BLE001 - reported, whatever it is
            os.write(write, f"error: {error!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as said:
        text = said.read()
    os.waitpid(pid, 0)
    return text


@pytest.mark.skipif(shutil.which("nft") is None, reason="the nft command is not installed (Debian: nftables)")
def test_the_batch_makes_the_ruleset_that_nft_makes_of_the_rules_text() -> None:
    ours = listed_after(lambda: interception.table().send())
    theirs = listed_after(lambda: subprocess.run(["nft", "-f", "-"], input=interception.RULES, check=True))
    assert not ours.startswith("error") and "table inet stockade" in ours, ours
    assert ours == theirs


@pytest.mark.skipif(shutil.which("nft") is None, reason="the nft command is not installed (Debian: nftables)")
def test_the_comparison_can_fail() -> None:
    """Control: one rule changed in the text gives another listing."""
    changed = interception.RULES.replace(b"burst 200 packets", b"burst 201 packets", 1)
    ours = listed_after(lambda: interception.table().send())
    theirs = listed_after(lambda: subprocess.run(["nft", "-f", "-"], input=changed, check=True))
    assert ours != theirs


def test_a_batch_the_kernel_refuses_raises_with_its_reason() -> None:
    batch = nftables.Batch("stockade")
    batch.rule("no-such-chain", nftables.accept())
    said = listed_after(batch.send)
    assert said.startswith("error: ") and "nftables refused the sandbox's table" in said and "No such file or directory" in said, said


def test_each_message_asks_for_its_acknowledgement_between_the_batch_markers() -> None:
    encoded = interception.table().encoded()
    kinds, offset = [], 0
    while offset < len(encoded):
        length, kind, flags = int.from_bytes(encoded[offset : offset + 4], "little"), encoded[offset + 4], encoded[offset + 6]
        kinds.append((kind, bool(flags & nftables.NLM_F_ACK)))
        offset += length
    assert kinds[0] == (nftables.NFNL_MSG_BATCH_BEGIN, False) and kinds[-1] == (nftables.NFNL_MSG_BATCH_END, False)
    assert all(ack for _kind, ack in kinds[1:-1]) and len(kinds) == len(interception.table().messages) + 2
