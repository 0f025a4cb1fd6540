"""``lineage --api URL``: options become the read API's query parameters, its errors the CLI's exits, and the
query commands never open the lake (the answers themselves: tests/integration/test_read_api.py)."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import urllib.error
from datetime import datetime, timedelta, timezone
from email.message import Message
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from lineage.cli.main import REMOTE_COMMANDS, main
from lineage.cli.remote import KEY_ENV, RemoteAnswers, Unreachable, _refusal
from lineage.query.errors import LookupError_, UnknownNode

# Each command with the arguments it needs (the node names are never looked up: nothing answers).
ARGS = {
    "upstream": ["kafka://k/orders", "--columns", "--tag", "pii", "--tag", "team=core"],
    "downstream": ["kafka://k/orders", "--depth", "2"],
    "impact": ["kafka://k/orders.price"],
    "health": ["kafka://k/orders"],
    "tags": ["kafka://k/orders", "--field", "price"],
    "runs": ["--state", "lost", "--since", "2h"],
    "run": ["0192f3a4-0000-7000-8000-000000000001"],
    "versions": ["kafka://k/orders", "--version", "v1"],
    "diff": ["--from", "2026-11-01", "--to", "2026-11-02"],
    "graph": ["kafka://k/orders", "--format", "dot"],
}


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_query_parameters() -> None:
    remote = RemoteAnswers("http://127.0.0.1:5000/", key="")
    when = datetime(2026, 11, 29, 3, 0, tzinfo=timezone(timedelta(hours=2)))
    url = remote.url(
        "/api/v2/upstream",
        {
            "node": "kafka://k/a b&c",
            "depth": 3,
            "as_of": when,
            "columns": True,
            "limit": None,
            "tag": ["pii", "t=v"],
        },
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "127.0.0.1:5000", "/api/v2/upstream")
    assert parse_qsl(parts.query) == [
        ("node", "kafka://k/a b&c"),
        ("depth", "3"),
        ("as_of", "2026-11-29T01:00:00Z"),
        ("columns", "true"),
        ("tag", "pii"),
        ("tag", "t=v"),
    ]
    assert remote.url("/api/v2/runs/x", {}) == "http://127.0.0.1:5000/api/v2/runs/x"


@pytest.mark.parametrize("base", ["127.0.0.1:5000", "ftp://host/", "http://", ""])
def test_the_api_must_be_an_http_url(base: str) -> None:
    with pytest.raises(LookupError_, match="--api must be an http"):
        RemoteAnswers(base)


def http_error(code: int, body: bytes) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://h/api/v2/health", code, "reason", Message(), io.BytesIO(body))


def test_the_services_errors_become_the_clis(monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = _refusal(
        http_error(
            404, b'{"error": {"code": "NOT_FOUND", "message": "unknown node \'x\'", "suggestions": ["y"]}}'
        ),
        False,
    )
    assert (
        isinstance(unknown, UnknownNode)
        and str(unknown) == "unknown node 'x'"
        and unknown.suggestions == ["y"]
    )
    bad = _refusal(
        http_error(400, b'{"error": {"code": "BAD_PARAMETER", "message": "depth must be <= 9"}}'), False
    )
    assert type(bad) is LookupError_ and str(bad) == "depth must be <= 9"
    # The hint says whether this request carried a key, whatever the environment holds.
    monkeypatch.setenv(KEY_ENV, "set-but-not-sent")
    refused = _refusal(http_error(401, b'{"error": {"code": "UNAUTHORIZED", "message": "no"}}'), False)
    assert type(refused) is LookupError_ and f"401 UNAUTHORIZED (no API key sent: set {KEY_ENV})" in str(
        refused
    )
    monkeypatch.delenv(KEY_ENV)
    assert "(the API key was refused)" in str(_refusal(http_error(403, b""), True))
    failed = _refusal(http_error(500, b'{"error": {"code": "INTERNAL_ERROR", "message": "boom"}}'), False)
    assert isinstance(failed, Unreachable) and str(failed) == "the read API failed: 500 INTERNAL_ERROR: boom"
    assert str(_refusal(http_error(502, b"<html>proxy</html>"), False)) == "the read API failed: 502 reason"


@pytest.mark.parametrize("command", REMOTE_COMMANDS)
def test_every_query_command_asks_the_api_and_not_the_lake(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Settings that cannot load: the command fails on them (exit 2) if it opens the lake at all.
    monkeypatch.setenv("LINEAGE_CONFIG", str(tmp_path / "missing.toml"))
    monkeypatch.delenv("LINEAGE_DEBUG", raising=False)
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(SystemExit) as exited:
        main(["--api", url, command, *ARGS[command]])
    err = capsys.readouterr().err
    assert exited.value.code == 1, err
    assert err.startswith(f"lineage: cannot ask the read API at {url}: "), err
    assert len(err.splitlines()) == 1


def test_lineage_api_from_the_environment_and_a_bad_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LINEAGE_API", "localhost:5000")
    with pytest.raises(SystemExit) as exited:
        main(["health", "kafka://k/orders"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("lineage: --api must be an http(s) URL")


def test_asking_the_api_imports_no_lake_reader() -> None:
    # What the mode is for: none of the lake readers' start-up (pydantic settings, pyiceberg, pyarrow).
    code = (
        "import sys\n"
        "from lineage.cli.main import main\n"
        "try:\n"
        f"    main(['--api', 'http://127.0.0.1:{closed_port()}', 'versions', 'x'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "readers = ('lineage.settings', 'pydantic', 'pyiceberg', 'pyarrow')\n"
        "print(sorted(m for m in readers if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert "cannot ask the read API" in done.stderr
