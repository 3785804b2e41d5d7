"""A run's export settings: the policy's collector with the user's own OTEL variables, checked as the daemon receives them."""

from __future__ import annotations

import pytest

from stockade.proxy.export_settings import ExportSettings, parse_headers, settings_for


def test_the_user_s_variables_say_how_to_reach_the_collector() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20general",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "Authorization=Bearer%20logs, X-Team = infra ,broken",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "5000",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
        "OTEL_EXPORTER_OTLP_CERTIFICATE": "/etc/ssl/corp.pem",
    }
    settings = settings_for("https://collector.corp:4318/", env)
    assert settings.endpoint == "https://collector.corp:4318/v1/logs"
    assert settings.headers == (("authorization", "Bearer logs"), ("x-team", "infra"))  # the logs-specific variable first
    assert settings.timeout == 5.0 and settings.compression == "none" and settings.certificate == "/etc/ssl/corp.pem"
    assert "Bearer" not in repr(settings)  # a token never reaches a log line through repr
    assert ExportSettings.from_dict(settings.to_dict()) == settings


def test_without_variables_the_defaults_hold() -> None:
    settings = settings_for("http://127.0.0.1:4318", {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"})
    assert (settings.headers, settings.timeout, settings.compression, settings.certificate) == ((), 10.0, "gzip", "")


@pytest.mark.parametrize(
    "data",
    [
        "x",
        {},
        {"endpoint": "ftp://x/v1/logs"},
        {"endpoint": "http://x/v1/logs", "headers": [["a"]]},
        {"endpoint": "http://x/v1/logs", "timeout": 0},
        {"endpoint": "http://x/v1/logs", "timeout": True},
        {"endpoint": "http://x/v1/logs", "compression": "zstd"},
        {"endpoint": "http://x/v1/logs", "certificate": 5},
        {"endpoint": "http://x/v1/logs", "headers": [["a", "b"]] * 40},
    ],
)
def test_settings_from_the_socket_are_checked(data: object) -> None:
    with pytest.raises(ValueError, match="spec.export"):
        ExportSettings.from_dict(data)


def test_headers_as_the_specification_writes_them() -> None:
    assert parse_headers("a=1,b=x%3Dy,=skip,c") == (("a", "1"), ("b", "x=y"))


def test_a_logs_url_written_in_full_is_not_doubled() -> None:
    assert settings_for("http://127.0.0.1:4318/v1/logs", {}).endpoint == "http://127.0.0.1:4318/v1/logs"
    assert settings_for("http://127.0.0.1:4318/otel", {}).endpoint == "http://127.0.0.1:4318/otel/v1/logs"
