"""Issue 37, "Bad input gets a clear answer" and "Security": out-of-range times and depths are a 400 (the
service) or a usage error (the CLI), a non-UTF-8 API key a 401, the access log one escaped line per request,
and the graph's dot, mermaid and JSON escape C1 controls and bidi overrides as the tables do."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from lineage.cli.main import main
from lineage.graph.render import render
from lineage.query.errors import LookupError_
from lineage.query.params import parse_time
from lineage.serve.app import ACCESS_LOGGER, AccessLog, create_app
from lineage.serve.auth import ApiKeys, hash_key
from lineage.serve.read import READ
from tests.unit.test_read_http import KEY, _ask, settings

HUGE = "9" * 5000
BEYOND_64_BITS = str(2**64)


@pytest.mark.parametrize(
    "text", ["999999999d", "99999999999999999999w", f"{HUGE}d", "0001-01-01T00:00:00+01:00"]
)
def test_a_time_out_of_range_is_a_bad_time_not_an_overflow(text: str) -> None:
    with pytest.raises(LookupError_, match="bad time") as caught:
        parse_time(text)
    assert len(str(caught.value)) < 200  # one short line, even for 5,000 digits


def test_out_of_range_times_and_depths_are_a_400_naming_the_parameter(tmp_path: Path) -> None:
    asked = [
        "/api/v2/runs?since=999999999d",
        "/api/v2/runs?since=99999999999999999999999999d",
        f"/api/v2/runs?since={HUGE}d",
        "/api/v2/upstream?node=job:etl/load&as_of=999999999w",
        f"/api/v2/upstream?node=job:etl/load&depth={BEYOND_64_BITS}",
        f"/api/v2/downstream?node=job:etl/load&depth={HUGE}",
        f"/api/v2/impact?node=kafka://kafka-1:19092/orders&depth={BEYOND_64_BITS}",
        f"/api/v1/lineage?nodeId=job:etl:load&depth={BEYOND_64_BITS}",
        f"/api/v2/runs?limit={BEYOND_64_BITS}",
    ]
    answers = asyncio.run(_ask(settings(tmp_path), True, *((path, {}) for path in asked)))
    for path, (status, body) in zip(asked, answers, strict=True):
        parameter = path.rsplit("&", 1)[-1].split("?")[-1].split("=")[0]
        assert status == 400, (path, body)
        assert body["error"]["code"] == "BAD_PARAMETER"
        assert body["error"]["message"].startswith(parameter), (path, body)
        assert len(body["error"]["message"]) < 200
    within = f"/api/v2/upstream?node=job:etl/load&depth={2**63 - 1}"
    [(status, body)] = asyncio.run(_ask(settings(tmp_path), True, (within, {})))
    assert status == 200 and body["depth"] == 2**63 - 1


def test_a_key_that_is_not_utf8_is_refused() -> None:
    keys = ApiKeys([hash_key(KEY)])
    assert not keys.allows("Bearer \udcff\udcfe")  # what aiohttp makes of the bytes ff fe
    assert not keys.allows("Bearer \ud800")
    assert keys.allows(f"Bearer {KEY}")


def _raw_get(port: int, target: bytes, headers: bytes = b"") -> bytes:
    async def go() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n")
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer

    return asyncio.run(go())


def test_a_non_utf8_authorization_header_is_a_401_over_http(tmp_path: Path) -> None:
    config = settings(tmp_path, api_key_hashes=[hash_key(KEY)])

    async def ask() -> list[tuple[int, Any]]:
        app = create_app(config)
        async with TestServer(app) as server:
            app[READ].current = None
            answers = []
            for value in (b"Bearer \xff\xfe\x80", b"\xc3\x28 \xa0\xa1"):
                raw = await asyncio.to_thread(
                    _raw_get, server.port or 0, b"/api/v2/runs", b"Authorization: " + value + b"\r\n"
                )
                head, _, body = raw.partition(b"\r\n\r\n")
                answers.append((int(head.split()[1]), json.loads(body)))
            return answers

    for status, body in asyncio.run(ask()):
        assert status == 401
        assert body["error"]["code"] == "UNAUTHORIZED"


def test_the_access_log_escapes_what_the_client_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def ask() -> None:
        app = create_app(settings(tmp_path))
        server = TestServer(app)
        await server.start_server(access_log_class=AccessLog, access_log=logging.getLogger(ACCESS_LOGGER))
        async with TestClient(server) as client:
            forged = (
                "/x%0d%0a127.0.0.1%20%22GET%20/admin%22%20200%200%200.0001%0a%1b[2J%07%00%E2%80%AEgnp.exe"
            )
            response = await client.get(URL(forged, encoded=True))
            assert response.status == 404

    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        asyncio.run(ask())
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(lines) == 1
    [line] = lines
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert "\x07" not in line and "\x00" not in line and "\u202e" not in line
    expected = '/x\\x0d\\x0a127.0.0.1 "GET /admin" 200 0 0.0001\\x0a\\x1b[2J\\x07\\x00\\u202egnp.exe'
    assert f'"GET {expected}" 404 ' in line


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    code = exited.value.code
    return code if isinstance(code, int) else 1, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("runs", "--since", "999999999d"), "--since"),
        (("runs", "--since", f"{HUGE}d"), "--since"),
        (("upstream", "job:etl/load", "--as-of", "99999999999999999999999999h"), "--as-of"),
        (("upstream", "job:etl/load", "--depth", BEYOND_64_BITS), "--depth"),
        (("impact", "kafka://x/y", "--depth", HUGE), "--depth"),
        (("graph", "job:etl/load", "--depth", BEYOND_64_BITS), "--depth"),
        (("runs", "--limit", BEYOND_64_BITS), "--limit"),
    ],
)
def test_the_cli_calls_out_of_range_values_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], option: str
) -> None:
    code, err = _cli(capsys, *args)
    assert code == 2, err
    assert "unexpected" not in err
    if option in ("--since", "--as-of"):  # a time: the CLI's own one-line error, like any bad time
        [error] = err.strip().splitlines()
        assert error.startswith("lineage: bad time ") and "too far" in error and len(error) < 200
    else:  # an integer: click's usage error for the option, as for --depth 0
        [error] = [line for line in err.splitlines() if line.startswith("Error:")]
        assert f"Invalid value for '{option}'" in error and len(error) < 200


UNSAFE_NAME = "pay\u202eroll\x9bm\u2066x\u2069\u202a"


def _graph() -> dict[str, Any]:
    node = {
        "id": "job:etl/load",
        "kind": "job",
        "namespace": "etl",
        "name": UNSAFE_NAME,
        "label": UNSAFE_NAME,
    }
    return {
        "root": "job:etl/load",
        "direction": "both",
        "generated_at": "2026-11-26T00:00:00Z",
        "nodes": [node],
        "edges": [],
        "column_edges": [],
    }


@pytest.mark.parametrize("fmt", ["json", "dot", "mermaid"])
def test_graph_text_formats_escape_c1_controls_and_bidi_overrides(fmt: str) -> None:
    text = render(_graph(), fmt)
    raw = [
        c for c in text if 0x80 <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069
    ]
    assert raw == []
    if fmt == "json":
        assert "pay\\u202eroll\\u009bm\\u2066x\\u2069\\u202a" in text
        assert json.loads(text) == _graph()  # the values stay exact
    else:
        if fmt == "dot":  # a DOT string's backslash is escaped, and shown as one backslash
            text = text.replace("\\\\", "\\")
        assert "\\u202eroll" in text and "\\x9bm" in text and "\\u2066x\\u2069\\u202a" in text
