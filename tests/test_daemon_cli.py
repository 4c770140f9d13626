"""The daemon's settings and the command-line edges: one clear line for bad input."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from conftest import run_cli

from attrib.daemon.config import settings
from attrib.errors import InputError

SECRET = "cli-secret-0123456789abcdef"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    return path


def test_config_file_with_command_line_over_it(tmp_path: Path, secret: Path):
    cfg = tmp_path / "d.toml"
    cfg.write_text(f'state = "st"\nsecret_file = "{secret}"\nport = 9000\nworkers = 2\nlease_s = 5\n')
    s = settings({"port": 9100, "workers": None}, cfg)
    assert (s.state, s.port, s.workers, s.lease_s, s.secret) == ((tmp_path / "st").resolve(), 9100, 2, 5.0, SECRET)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('stat = "x"', "key 'stat': unknown key"),
        ("port = 'x'", "key 'port': expected int"),
        ("lease_s = true", "key 'lease_s': expected a number"),
        ("workers = -1", "--workers -1: expected at least 0"),
        ('executor = "kubernetes"', "--executor 'kubernetes': expected one of: local, docker, slurm"),
        ("port = [", "not a TOML file"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, secret: Path, text: str, message: str):
    cfg = tmp_path / "d.toml"
    cfg.write_text(f'state = "st"\nsecret_file = "{secret}"\n{text}\n')
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("(", r"\(")):
        settings({}, cfg)


def test_short_or_missing_secret(tmp_path: Path):
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(InputError, match="at least 16 characters"):
        settings({"state": tmp_path, "secret_file": short}, None)
    with pytest.raises(InputError, match="no such file"):
        settings({"state": tmp_path, "secret_file": tmp_path / "nope"}, None)
    with pytest.raises(InputError, match="--secret-file: missing"):
        settings({"state": tmp_path}, None)


def test_clients_fail_with_one_line(tmp_path: Path, secret: Path):
    res = run_cli("jobs", "--url", "http://127.0.0.1:9")
    assert res.code == 2 and "no secret: set ATTRIB_SECRET" in res.stderr
    # A port nobody listens on: bind one and close it without listening.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli("status", "0123456789abcdef", "--url", f"http://127.0.0.1:{port}", "--secret-file", secret)
    assert res.code == 1 and "cannot reach the daemon at" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_daemon_refuses_a_port_in_use(tmp_path: Path, secret: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = run_cli("daemon", "--state", tmp_path / "st", "--secret-file", secret, "--port", str(port), timeout=60)
    assert res.code == 1 and f"--port {port}: cannot listen" in res.stderr
