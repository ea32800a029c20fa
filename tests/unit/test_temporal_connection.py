"""The processes' Temporal connection settings: mutual TLS and the API key come from mounted files,
and a missing file is an error naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.process.settings import WorkerSettings
from fleetwright.process.temporalclient import _tls, connect_with

pytestmark = pytest.mark.unit


def test_no_tls_dir_means_plaintext() -> None:
    assert _tls(WorkerSettings()) is None


def test_the_tls_dir_gives_client_cert_key_ca_and_server_name(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(b"CERT")
    (tmp_path / "tls.key").write_bytes(b"KEY")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    tls = _tls(WorkerSettings(temporal_tls_dir=tmp_path, temporal_tls_server_name="temporal.example"))
    assert tls is not None
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert) == (b"CERT", b"KEY", b"CA")
    assert tls.domain == "temporal.example"


def test_without_ca_the_system_roots_verify_the_server(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(b"CERT")
    (tmp_path / "tls.key").write_bytes(b"KEY")
    tls = _tls(WorkerSettings(temporal_tls_dir=tmp_path))
    assert tls is not None
    assert tls.server_root_ca_cert is None


def test_a_missing_client_key_names_the_setting(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(b"CERT")
    with pytest.raises(ValueError, match=r"temporal_tls_dir: cannot read .*tls\.key"):
        _tls(WorkerSettings(temporal_tls_dir=tmp_path))


async def test_a_missing_api_key_file_names_the_setting(tmp_path: Path) -> None:
    settings = WorkerSettings(temporal_api_key_file=tmp_path / "absent")
    with pytest.raises(ValueError, match="temporal_api_key_file: cannot read"):
        await connect_with(settings)


def test_the_chart_environment_names_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETWRIGHT_TEMPORAL_TLS_DIR", str(tmp_path))
    monkeypatch.setenv("FLEETWRIGHT_TEMPORAL_TLS_SERVER_NAME", "t.example")
    monkeypatch.setenv("FLEETWRIGHT_TEMPORAL_API_KEY_FILE", str(tmp_path / "key"))
    settings = WorkerSettings.load()
    assert settings.temporal_tls_dir == tmp_path
    assert settings.temporal_tls_server_name == "t.example"
    assert settings.temporal_api_key_file == tmp_path / "key"
