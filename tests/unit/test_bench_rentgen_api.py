"""The client side of the Data.Rentgen lineage-endpoint measurement (the server itself runs in the bench)."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks import rentgen_api
from benchmarks.rentgen_api import Answer, EndpointError

SINCE = datetime(2026, 9, 1, tzinfo=UTC)


def test_dataset_lookup_accepts_both_s3_spellings_and_quotes_names() -> None:
    sql = rentgen_api.dataset_id_sql("s3a://lake-prod", "warehouse/o'brien.db/t")
    assert "location.type IN ('s3', 's3a')" in sql
    assert "location.name = 'lake-prod'" in sql
    assert "dataset.name = 'warehouse/o''brien.db/t'" in sql
    assert "IN ('hive')" in rentgen_api.dataset_id_sql("hive://metastore:9083", "db.t")


def test_lineage_url_asks_for_job_granularity_in_the_direction_given() -> None:
    url = rentgen_api.lineage_url("http://h:1", 42, "upstream", 3, SINCE)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert urllib.parse.urlsplit(url).path == "/v1/datasets/lineage"
    assert query == {
        "start_node_id": ["42"],
        "direction": ["UPSTREAM"],
        "depth": ["3"],
        "granularity": ["JOB"],
        "since": [SINCE.isoformat()],
    }


def test_count_answer_counts_nodes_and_io_relations() -> None:
    answer = {
        "relations": {"inputs": [{}, {}], "outputs": [{}], "symlinks": [{}], "parents": [{}]},
        "nodes": {"datasets": {"1": {}, "2": {}}, "jobs": {"7": {}}, "runs": {}},
    }
    assert rentgen_api.count_answer(answer) == {"datasets": 2, "jobs": 1, "relations": 3}
    assert rentgen_api.count_answer({}) == {"datasets": 0, "jobs": 0, "relations": 0}


def test_measure_endpoint_times_every_query_after_an_untimed_check() -> None:
    calls: list[str] = []
    ticks = itertools.count()

    def fetch(url: str, headers: dict[str, str]) -> Answer:
        assert headers == {"Authorization": "Bearer tok"}
        calls.append(url)
        body = {"nodes": {"datasets": {"1": {}}, "jobs": {}}, "relations": {"inputs": [{}]}}
        return Answer(200, json.dumps(body).encode())

    # The clock ticks once per reading, so every request takes exactly one second.
    result = rentgen_api.measure_endpoint(
        "http://h:1", "tok", {"hub": ("dataset:s3a://b/t", 5)}, SINCE, runs=4, fetch=fetch,
        clock=lambda: float(next(ticks)),
    )  # fmt: skip
    assert len(result["rows"]) == 6  # 2 directions x 3 depths
    assert len(calls) == 6 * 5  # one check + 4 timed each
    row = result["rows"][0]
    assert (row["query"], row["node"], row["depth"], row["dataset_id"]) == ("upstream", "hub", 1, 5)
    assert (row["datasets"], row["jobs"], row["relations"], row["runs"]) == (1, 0, 1, 4)
    assert row["p50_s"] == row["p95_s"] == row["min_s"] == row["max_s"] == 1.0
    assert result["p95_max_s"] == 1.0


def test_measure_endpoint_fails_on_an_error_answer() -> None:
    def fetch(url: str, headers: dict[str, str]) -> Answer:
        return Answer(422, b'{"error": "depth"}')

    with pytest.raises(EndpointError, match="HTTP 422"):
        rentgen_api.measure_endpoint("http://h:1", "t", {"leaf": ("x", 1)}, SINCE, runs=1, fetch=fetch)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/monitoring/ping":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        if self.path == "/v1/auth/token" and form.get("username") == ["bench"]:
            self._send(200, {"access_token": "access_token_x", "token_type": "bearer"})
        else:
            self._send(401, {"error": "no"})


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_http_client_waits_for_the_ping_and_gets_a_token(server: str) -> None:
    assert rentgen_api.wait_ready(server, alive=lambda: True, timeout_s=10) < 10
    assert rentgen_api.token(server) == "access_token_x"
    assert rentgen_api.http(server + "/nowhere").status == 404
    with pytest.raises(EndpointError, match="HTTP 401"):
        rentgen_api.token(server, user="someone")


def test_wait_ready_stops_when_the_server_process_died() -> None:
    with pytest.raises(EndpointError, match="exited"):
        rentgen_api.wait_ready("http://127.0.0.1:9", alive=lambda: False, timeout_s=10)
