"""The gate's tables: routes, image names, and the create body key by key (a generator of bodies too)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stockade.containers import api


@pytest.mark.parametrize(
    ("method", "target", "kind"),
    [
        ("GET", "/v1.41/_ping", "pass"),
        ("POST", "/containers/create?name=x", "create"),
        ("POST", "/v1.43/containers/abc123/start", "start"),
        ("PUT", "/v1.41/containers/abc/archive?path=/", "copy-in"),
        ("POST", "/v1.41/containers/abc/attach?stream=1", "hijack"),
        ("POST", "/v1.41/exec/e1/start", "exec-hijack"),
        ("DELETE", "/v1.41/volumes/data", "volume"),
    ],
)
def test_known_calls_have_their_kind(method: str, target: str, kind: str) -> None:
    found = api.route(method, target)
    assert found is not None and found[0].kind == kind


@pytest.mark.parametrize(
    ("method", "target", "why"),
    [
        ("POST", "/v1.41/build", "builds"),
        ("GET", "/v1.41/networks", "networks"),
        ("POST", "/v1.41/plugins/pull", "plugins"),
        ("GET", "/v4.0.0/libpod/info", "not an Engine API call"),
        ("POST", "/v1.41/containers/abc/export", "not an Engine API call"),
        ("GET", "/v1.41/containers/../../info/json", "not an Engine API call"),
    ],
)
def test_other_calls_are_refused_with_a_reason(method: str, target: str, why: str) -> None:
    assert api.route(method, target) is None
    assert why in api.refusal_reason(method, target)


@pytest.mark.parametrize(
    ("reference", "full"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("user/tool:1", "docker.io/user/tool:1"),
        ("localhost/x:2", "localhost/x:2"),
        ("ghcr.io/o/p", "ghcr.io/o/p:latest"),
        ("registry:5000/p", "registry:5000/p:latest"),
        ("busybox@sha256:abc", "docker.io/library/busybox@sha256:abc"),
    ],
)
def test_image_names_are_read_as_the_registry_names_them(reference: str, full: str) -> None:
    assert api.normal_image(reference) == full


def test_image_globs_match_full_names_only() -> None:
    patterns = ("docker.io/library/*", "localhost/mine:*")
    assert api.image_allowed("busybox", patterns) and api.image_allowed("localhost/mine:3", patterns)
    assert not api.image_allowed("evil/busybox", patterns) and not api.image_allowed("ghcr.io/library/busybox", patterns)
    assert not api.image_allowed("localhost/mine-other:1", patterns)


def _never(name: str) -> bool | None:
    return False


def test_a_plain_body_is_forwarded_without_a_network() -> None:
    body = {"Image": "busybox", "Cmd": ["true"], "HostConfig": {"NetworkMode": "default", "Privileged": False, "CapAdd": None, "Binds": None}}
    forwarded = api.check_create(body, _never)
    assert forwarded["HostConfig"]["NetworkMode"] == "none" and forwarded["NetworkingConfig"] is None
    assert body["HostConfig"]["NetworkMode"] == "default"  # the caller's copy is left as it was


def test_volumes_must_be_the_run_s_own_or_new() -> None:
    known = {"mine": True, "new": None, "theirs": False}
    api.check_create({"Image": "x", "HostConfig": {"Binds": ["mine:/a", "new:/b"]}}, known.get)
    with pytest.raises(api.Refused, match="theirs is not one this run made"):
        api.check_create({"Image": "x", "HostConfig": {"Binds": ["theirs:/c"]}}, known.get)
    with pytest.raises(api.Refused, match="bind mount"):
        api.check_create({"Image": "x", "HostConfig": {"Binds": ["./here:/c"]}}, known.get)


# -- a generator of create bodies: whatever passes keeps the container inside -------------------

LOOSE_VALUES: list[Any] = [None, "", False, True, 0, 1, -5, [], {}, ["x"], {"a": "b"}, "host", "private", "container:abc", "/", "none", "json-file"]
HOST_KEYS = sorted({*api.HOST_FREE, *api.HOST_DEFAULT_ONLY, *api.ABSENT_ONLY, *api.NAMESPACES, "NetworkMode", "SecurityOpt", "LogConfig",
                    "Binds", "Mounts", "VolumesFrom", "Isolation", "SomethingNew"})  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(HOST_KEYS), st.sampled_from(LOOSE_VALUES), max_size=8))
def test_no_body_that_passes_reaches_the_host(host: dict[str, Any]) -> None:
    try:
        forwarded = api.check_create({"Image": "x", "HostConfig": host}, _never)
    except api.Refused:
        return
    out = forwarded["HostConfig"]
    assert out["NetworkMode"] == "none"
    for key in api.HOST_DEFAULT_ONLY:
        assert out.get(key) in (None, "", False, 0, [], {}), key
    for key in api.ABSENT_ONLY:
        assert out.get(key) is None, key
    for key in api.NAMESPACES:
        assert out.get(key) in (None, *api.PRIVATE_NAMESPACE), key
    assert not out.get("Binds") and not out.get("Mounts") and not out.get("VolumesFrom")
    assert all(option in api.SECURITY_OPTS for option in out.get("SecurityOpt") or ())
    assert "SomethingNew" not in out


def test_api_versions_before_1_24_are_refused() -> None:
    """1.23 and older read a start's body as the container's whole HostConfig."""
    assert api.route("POST", "/v1.23/containers/abc/start") is None
    assert "older than stockade forwards" in api.refusal_reason("POST", "/v1.23/containers/abc/start")
    assert api.route("POST", "/v1.24/containers/abc/start") is not None


def test_exec_start_is_rebuilt_from_its_keys() -> None:
    assert api.checked_exec_start({"Detach": False, "Tty": True}) == {"Detach": False, "Tty": True}
    for body in ({"Detach": False, "Privileged": True}, {"detach": True, "Detach": False}, {"Tty": "yes"}):
        with pytest.raises(api.Refused):
            api.checked_exec_start(body)
