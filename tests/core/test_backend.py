"""RunRequest: an invocation with its policy read, field by field; both backends fit Backend."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from stockade.core.backend import Backend, RunRequest
from stockade.core.invocation import Invocation
from stockade.core.locations import Locations
from stockade.profiles.model import Policy


def invocation(**options: object) -> Invocation:
    return Invocation(["echo", "hi there"], "/work/p", {"HOME": "/home/me", "PATH": "/usr/bin"}, **options)  # type: ignore[arg-type]


def test_of_takes_every_field_from_the_invocation(locations: Locations) -> None:
    asked = invocation(quiet=True, verbose=True, dry_run=True, session_id="abc123def456")
    policy = Policy(project_dir=Path("/work/p"))
    request = RunRequest.of(asked, policy, locations)
    assert request.policy is policy and request.locations is locations
    assert request.command == ("echo", "hi there")
    assert request.cwd == Path("/work/p")
    assert request.host_env is asked.env
    assert (request.quiet, request.verbose, request.dry_run, request.session_id) == (True, True, True, "abc123def456")


@pytest.mark.parametrize("flag", ["quiet", "verbose", "dry_run"])
def test_each_flag_is_passed_alone(locations: Locations, flag: str) -> None:
    request = RunRequest.of(invocation(**{flag: True}), Policy(), locations)
    assert {name: getattr(request, name) for name in ("quiet", "verbose", "dry_run")} == {
        name: name == flag for name in ("quiet", "verbose", "dry_run")
    }


def test_the_command_is_a_copy(locations: Locations) -> None:
    asked = invocation()
    request = RunRequest.of(asked, Policy(), locations)
    asked.command.append("later")
    assert request.command == ("echo", "hi there")


def test_a_fresh_session_id_comes_along(locations: Locations) -> None:
    asked = invocation()
    assert len(asked.session_id) == 12
    assert RunRequest.of(asked, Policy(), locations).session_id == asked.session_id


def test_defaults_and_frozen(locations: Locations) -> None:
    request = RunRequest(policy=Policy(), command=("true",), cwd=Path("/"), host_env={}, locations=locations)
    assert (request.quiet, request.verbose, request.session_id, request.dry_run) == (False, False, "", False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.quiet = True  # type: ignore[misc]


@pytest.mark.parametrize(("module", "name"), [("stockade.bwrap.run", "LinuxBackend"), ("stockade.seatbelt.run", "MacOSBackend")])
def test_each_platforms_backend_has_the_interface(module: str, name: str) -> None:
    import importlib

    backend = getattr(importlib.import_module(module), name)
    assert isinstance(backend.name, str) and backend.name
    for method in ("run", "explain"):
        wanted = inspect.signature(getattr(Backend, method))
        assert list(inspect.signature(getattr(backend, method)).parameters) == list(wanted.parameters), (name, method)
