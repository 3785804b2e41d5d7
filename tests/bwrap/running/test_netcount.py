"""Counting a sandbox's tries to reach a network it lacks: OutNoRoutes from snmp and snmp6."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stockade.bwrap.running.netcount import FILES, attempts, open_counters

SNMP = """\
Ip: Forwarding DefaultTTL InReceives InHdrErrors OutRequests OutDiscards OutNoRoutes ReasmTimeout
Ip: 2 64 10 0 12 0 {v4} 0
Icmp: InMsgs InErrors
Icmp: 0 0
Udp: InDatagrams NoPorts
Udp: 4 0
"""

SNMP6 = """\
Ip6InReceives                   \t0
Ip6OutRequests                  \t3
Ip6OutNoRoutes                  \t{v6}
Icmp6InMsgs                     \t0
"""


def opened(tmp_path: Path, *texts: str) -> list[int]:
    fds = []
    for number, text in enumerate(texts):
        path = tmp_path / f"counter{number}"
        path.write_text(text)
        fds.append(os.open(path, os.O_RDONLY))
    return fds


def closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


@pytest.mark.parametrize(
    ("texts", "count"),
    [
        pytest.param((SNMP.format(v4=3), SNMP6.format(v6=4)), 7, id="both"),
        pytest.param((SNMP.format(v4=0), SNMP6.format(v6=0)), 0, id="none"),
        pytest.param((SNMP.format(v4=5),), 5, id="ipv4-only"),
        pytest.param((SNMP6.format(v6=2),), 2, id="ipv6-only"),
        pytest.param(("",), 0, id="empty"),
        pytest.param(("Ip: Forwarding OutNoRoutes\nIp: 2 x\n",), 0, id="not-a-number"),
        pytest.param(("Ip: Forwarding OutNoRoutes\nIcmp: 2 9\n",), 0, id="values-of-another-line"),
        pytest.param(("Ip: Forwarding DefaultTTL\nIp: 2 64\n",), 0, id="no-such-counter"),
        pytest.param(("Ip6OutNoRoutes -1\n",), 0, id="negative"),
        pytest.param(("Ip6OutNoRoutes\n",), 0, id="no-value"),
    ],
)
def test_attempts_sums_the_no_route_counters(tmp_path: Path, texts: tuple[str, ...], count: int) -> None:
    fds = opened(tmp_path, *texts)
    assert attempts(fds) == count
    assert all(closed(fd) for fd in fds)


def test_a_long_file_is_read_whole(tmp_path: Path) -> None:
    filler = "".join(f"{f'Ip6Filler{n}':<32}\t{n}\n" for n in range(3_000))  # past one 64 KiB read
    assert len(filler) > 65536
    (fd,) = opened(tmp_path, filler + SNMP6.format(v6=9))
    assert attempts([fd]) == 9


def test_an_unreadable_counter_is_skipped_and_closed(tmp_path: Path) -> None:
    folder_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # read() fails: EISDIR
    (good,) = opened(tmp_path, SNMP6.format(v6=1))
    assert attempts([folder_fd, good]) == 1
    assert closed(folder_fd) and closed(good)


def test_no_files_no_attempts() -> None:
    assert attempts([]) == 0


def test_open_counters_of_a_live_process() -> None:
    fds = open_counters(os.getpid())
    try:
        available = [name for name in FILES if os.path.exists(f"/proc/{os.getpid()}/net/{name}")]
        assert len(fds) == len(available) >= 1
    finally:
        assert attempts(fds) >= 0  # closes them
    assert all(closed(fd) for fd in fds)


def test_open_counters_of_a_gone_process_is_empty() -> None:
    assert open_counters(2**22 + 12345) == []  # above pid_max's ceiling: never a live process


def test_refused_connections_are_tcp_attempt_failures(tmp_path: Path) -> None:
    from stockade.bwrap.running.netcount import read_counts

    path = tmp_path / "snmp"
    path.write_text("Ip: Forwarding OutNoRoutes\nIp: 2 3\nTcp: RtoAlgorithm ActiveOpens AttemptFails EstabResets\nTcp: 1 9 4 0\n")
    assert read_counts([os.open(path, os.O_RDONLY)]) == (3, 4)
