"""A command that fails because the sandbox has no network is told so, with the policy line to add.

The probe connects to 192.0.2.1 (TEST-NET-1): inside, the namespace has no
route, so nothing leaves the machine.
"""

from __future__ import annotations

from tests.e2e.boxes import Box

CONNECT = "env -u PYTHONPATH python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), 2)\" 2>/dev/null"
LINE = "the command tried to reach the network, which is off in this sandbox (builtin:default)"


def test_a_failed_network_attempt_names_the_policy_and_the_fix(vbox: Box) -> None:
    result = vbox.run(CONNECT)
    assert result.returncode != 0, result
    assert LINE in result.stderr and "[network] allow" in result.stderr, result
    assert 'extends = ["default"]' in result.stderr, result


def test_a_failure_with_no_network_attempt_says_nothing_of_the_network(vbox: Box) -> None:
    result = vbox.run("exit 3")
    assert result.returncode == 3 and "network" not in result.stderr, result


def test_a_command_that_copes_without_the_network_says_nothing(vbox: Box) -> None:
    result = vbox.run(CONNECT + "; true")
    assert result.returncode == 0 and "network" not in result.stderr, result


def test_loopback_is_not_the_network(vbox: Box) -> None:
    script = (
        "env -u PYTHONPATH python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        'socket.create_connection(s.getsockname())"; exit 4'
    )
    result = vbox.run(script)
    assert result.returncode == 4 and "network" not in result.stderr, result


def test_a_policy_file_is_named_as_the_place_to_add_the_host(vbox: Box) -> None:
    result = vbox.run(CONNECT, policy='extends = ["default"]\n')
    assert f"in {vbox.root / 'policy.toml'}" in result.stderr, result
