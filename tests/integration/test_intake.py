"""The HTTP intake as producers see it: a real `lineage serve` process, a real broker, HTTP over loopback.

One service per module (an API key required, short body and idle timeouts so the slow-client tests are
quick); what it produced is read back from its topic with a plain consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import parent_run
from openlineage.client.serde import Serde

from lineage.io.local_kafka import LocalKafka
from lineage.serve.app import LINGER_S
from lineage.serve.auth import hash_key, new_key
from tests.fixtures.intake import REPO, Intake, Record, read_topic, serve_env, start_intake

pytestmark = pytest.mark.integration

KEY = new_key()
BODY_TIMEOUT_S = 2
IDLE_TIMEOUT_S = 2
LIMIT = 32 * 1024 * 1024  # kafka.max_message_bytes of the test broker and of conf/lineage.toml


@pytest.fixture(scope="module")
def service(kafka_broker: LocalKafka, intake_topic: str, intake_logs: Path) -> Iterator[Intake]:
    service = start_intake(
        kafka_broker.bootstrap_servers,
        intake_topic,
        intake_logs,
        api_key_hashes=json.dumps([hash_key("an old key"), hash_key(KEY)]),
        body_timeout_seconds=str(BODY_TIMEOUT_S),
        idle_timeout_seconds=str(IDLE_TIMEOUT_S),
    )
    yield service
    service.stop()


def auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def run_event(job: str = "http-job", run_id: str | None = None, **facets: Any) -> RunEvent:
    return RunEvent(
        eventType=RunState.START,
        eventTime="2026-11-20T08:00:00.000Z",
        run=Run(runId=run_id or str(uuid.uuid4()), facets=facets or None),
        job=Job(namespace="intake-tests", name=job),
        producer="urn:lineage-tests",
    )


def raw_event(job: str = "raw-job", run_id: str | None = None) -> bytes:
    return Serde.to_json(run_event(job, run_id)).encode()


_RUN_ID = re.compile(rb'"runId": *"([^"]*)"')


def records_with(service: Intake, *run_ids: bytes) -> list[Record]:
    """Messages of the service's topic whose value carries one of ``run_ids`` as its run.runId."""
    wanted = set(run_ids)
    found = []
    for record in read_topic(service.bootstrap_servers, service.topic):
        if any(run_id in wanted for run_id in _RUN_ID.findall(record.value or b"")):
            found.append(record)
    return found


def post(
    service: Intake, path: str, body: bytes, headers: dict[str, str] | None = None, timeout: float = 30
) -> requests.Response:
    return requests.post(f"{service.url}{path}", data=body, headers=headers or auth(), timeout=timeout)


# --- producers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_openlineage_python_http_transport_lands_events_unchanged(
    service: Intake, compression: str | None
) -> None:
    transport: dict[str, Any] = {
        "type": "http",
        "url": service.url,
        "auth": {"type": "api_key", "apiKey": KEY},
    }
    if compression:
        transport["compression"] = compression
    client = OpenLineageClient(config={"transport": transport})
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=str(uuid.uuid4())),
        job=parent_run.Job(namespace="airflow", name="dag.task"),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=str(uuid.uuid4())),
            job=parent_run.RootJob(namespace="airflow", name="dag"),
        ),
    )
    events = [run_event("plain"), run_event("child", parent=parent)]
    for event in events:
        client.emit(event)  # raises on a non-2xx answer

    by_run = {r.value: r for r in records_with(service, *(e.run.runId.encode() for e in events))}
    sent = [Serde.to_json(e).encode() for e in events]
    assert sorted(by_run) == sorted(sent)  # byte for byte what the client sent
    assert by_run[sent[0]].key == b"run:intake-tests/plain"
    assert by_run[sent[1]].key == b"run:airflow/dag"  # the root job, as the Kafka transport keys it


def test_batch_produces_each_element_as_its_own_bytes(service: Intake) -> None:
    run_ids = [str(uuid.uuid4()) for _ in range(3)]
    first = raw_event("batch-a", run_ids[0])
    # Pretty-printed, non-ASCII, other key order: each element keeps its exact bytes.
    second = json.dumps(json.loads(raw_event("batch-é", run_ids[1])), indent=2, ensure_ascii=False).encode()
    invalid = raw_event("batch-c", run_ids[2]).replace(b'"START"', b'"STARTED"')
    body = b"[\n  " + first + b" ,\r\n\t" + second + b",  " + invalid + b"  ]\n"

    answer = post(service, "/api/v1/lineage/batch", body)

    assert answer.status_code == 207, answer.text
    result = answer.json()
    assert (result["accepted"], result["rejected"], result["failed"]) == (2, 1, 0)
    assert [r["status"] for r in result["results"]] == [200, 200, 400]
    assert result["results"][2]["code"] == "UNKNOWN_EVENT_TYPE"
    found = {r.value: r for r in records_with(service, *(i.encode() for i in run_ids))}
    assert set(found) == {first, second, invalid}
    assert found[first].key == b"run:intake-tests/batch-a"
    assert found[second].key == "run:intake-tests/batch-é".encode()
    assert found[invalid].key is None
    for element, outcome in zip((first, second, invalid), result["results"], strict=True):
        assert (found[element].partition, found[element].offset) == (outcome["partition"], outcome["offset"])


def test_batch_statuses(service: Intake) -> None:
    valid = post(service, "/api/v1/lineage/batch", b"[" + raw_event() + b"," + raw_event() + b"]")
    invalid = post(service, "/api/v1/lineage/batch", b'[1, {"eventTime": "x"}]')
    empty = post(service, "/api/v1/lineage/batch", b"[]")
    not_array = post(service, "/api/v1/lineage/batch", raw_event())
    broken = post(service, "/api/v1/lineage/batch", b"[" + raw_event() + b", {")

    assert (valid.status_code, valid.json()["accepted"]) == (200, 2)
    assert invalid.status_code == 400
    assert invalid.json()["error"]["code"] == "BATCH_HAS_INVALID_EVENTS"
    assert [r["code"] for r in invalid.json()["results"]] == ["NOT_JSON_OBJECT", "MISSING_FIELD"]
    assert (empty.status_code, empty.json()["results"]) == (200, [])
    for answer in (not_array, broken):
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "INVALID_BATCH"


# --- bad input ---------------------------------------------------------------------------------------------


def test_invalid_event_is_answered_with_its_reason_and_kept_as_evidence(service: Intake) -> None:
    run_id = "run-42-" + uuid.uuid4().hex
    body = json.dumps({**json.loads(raw_event("bad-run-id")), "run": {"runId": run_id}}).encode()

    answer = post(service, "/api/v1/lineage", body)

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["stored"]) == ("INVALID_RUN_ID", True)
    assert error["message"] == f"run.runId is not a UUID: {run_id}"
    [record] = records_with(service, run_id.encode())
    assert (record.value, record.key, record.partition, record.offset) == (
        body,
        None,
        error["partition"],
        error["offset"],
    )


@pytest.mark.parametrize(
    ("body", "headers", "status", "code", "stored"),
    [
        (b"{not json", {}, 400, "NOT_JSON", True),
        (b"", {}, 400, "EMPTY_VALUE", True),
        (b"[1]", {}, 400, "NOT_JSON_OBJECT", True),
        (gzip.compress(b'{"a": 1}')[:-6], {"Content-Encoding": "gzip"}, 400, "INVALID_GZIP", False),
        (b"not gzip at all", {"Content-Encoding": "gzip"}, 400, "INVALID_GZIP", False),
        (b"{}", {"Content-Encoding": "br"}, 415, "UNSUPPORTED_CONTENT_ENCODING", False),
        (b"{}", {"Content-Type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE", False),
        (b"{}", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE", False),
        (b"{}", {"Content-Type": "application/json; charset=latin-1"}, 415, "UNSUPPORTED_MEDIA_TYPE", False),
    ],
    ids=["not-json", "empty", "array", "truncated-gzip", "not-gzip", "brotli", "text", "form", "latin-1"],
)
def test_bad_input(
    service: Intake, body: bytes, headers: dict[str, str], status: int, code: str, stored: bool
) -> None:
    answer = post(service, "/api/v1/lineage", body, {**auth(), **headers})

    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code
    assert answer.json()["error"].get("stored", False) is stored


def _raw_request(service: Intake, head: bytes, body_parts: list[bytes], read_timeout_s: float = 30) -> bytes:
    """Send a request over a plain socket, stopping early when the server answers; returns the answer."""
    port = int(service.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout_s) as sock:
        sock.sendall(head)
        for part in body_parts:
            try:
                sock.sendall(part)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server answered and closed: read what it said
        answer = b""
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            while chunk := sock.recv(65536):
                answer += chunk
        return answer


def _head(length: int | None, *extra: str) -> bytes:
    lines = ["POST /api/v1/lineage HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
             f"Authorization: Bearer {KEY}", "Connection: close", *extra]  # fmt: skip
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_40_mb_body_is_refused_with_413(service: Intake) -> None:
    size = 40 * 1000 * 1000
    declared = _raw_request(service, _head(size), [b"x" * (1 << 20)] * 40)
    chunk = b"x" * (1 << 20)
    chunked = _raw_request(
        service, _head(None), [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 40 + [b"0\r\n\r\n"]
    )
    bomb = gzip.compress(b" " * size, compresslevel=9)  # about 40 kB on the wire
    inflated = post(service, "/api/v1/lineage", bomb, {**auth(), "Content-Encoding": "gzip"})

    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    assert chunked.startswith(b"HTTP/1.1 413"), chunked[:200]
    assert b'"PAYLOAD_TOO_LARGE"' in declared and b'"PAYLOAD_TOO_LARGE"' in chunked
    assert inflated.status_code == 413
    assert inflated.json()["error"]["message"] == f"the decompressed body is larger than {LIMIT} bytes"


def test_body_at_the_limit_is_accepted(service: Intake) -> None:
    event = json.loads(raw_event("at-the-limit"))
    base = json.dumps({**event, "pad": ["", ""]}).encode()
    half = (LIMIT - len(base)) // 2  # two strings: one string of 32 MB is beyond Spark's JSON limits
    body = json.dumps({**event, "pad": ["p" * half, "p" * (LIMIT - len(base) - half)]}).encode()
    assert len(body) == LIMIT

    answer = post(
        service,
        "/api/v1/lineage",
        gzip.compress(body, compresslevel=1),
        {**auth(), "Content-Encoding": "gzip"},
        timeout=300,  # 32 MB validated and produced: 28 s on a quiet run here, over 30 s under load
    )

    assert answer.status_code == 200, answer.text[:500]


def test_slow_loris_headers_are_cut_off(service: Intake) -> None:
    port = int(service.url.rsplit(":", 1)[1])
    started = time.monotonic()
    closed_after = None
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(160):  # one header byte every 0.25 s for up to 40 s, never the blank line
            try:
                sock.sendall(b"X")
                sock.settimeout(0.25)
                if sock.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "the server kept a never-ending request open"
    # Cut off at the idle timeout, long before the client gives up (7 s seen on a loaded machine).
    assert closed_after < IDLE_TIMEOUT_S + 13


def test_slow_body_is_answered_408_and_closed(service: Intake) -> None:
    started = time.monotonic()
    answer = _raw_request(service, _head(1000) + b'{"eventTime": ', [], read_timeout_s=BODY_TIMEOUT_S + 10)

    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"BODY_TIMEOUT"' in answer
    assert time.monotonic() - started < BODY_TIMEOUT_S + LINGER_S + 2


# --- load ------------------------------------------------------------------------------------------------


@pytest.fixture
def patient_service(kafka_broker: LocalKafka, intake_topic: str, intake_logs: Path) -> Iterator[Intake]:
    """The same service with the configured idle timeout (15 s), not the module's 2 s: that timeout also
    bounds how long a new connection may wait before its request head, and a client opening a thousand
    connections at once on a loaded machine can take longer than 2 s to write some of them."""
    service = start_intake(
        kafka_broker.bootstrap_servers,
        intake_topic,
        intake_logs,
        api_key_hashes=json.dumps([hash_key(KEY)]),
    )
    yield service
    service.stop()


def test_a_thousand_concurrent_connections(patient_service: Intake) -> None:
    import aiohttp

    service = patient_service

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    run_ids = [str(uuid.uuid4()) for _ in range(1000)]

    async def send_all() -> list[int]:
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            start = asyncio.Event()

            async def one(run_id: str) -> int:
                await start.wait()
                async with session.post(
                    f"{service.url}/api/v1/lineage", data=raw_event("concurrent", run_id), headers=auth()
                ) as answer:
                    await answer.read()
                    return answer.status

            tasks = [asyncio.create_task(one(r)) for r in run_ids]
            await asyncio.sleep(0.1)
            start.set()
            return await asyncio.gather(*tasks)

    statuses = asyncio.run(send_all())

    assert statuses == [200] * len(run_ids)
    found = records_with(service, *(r.encode() for r in run_ids))
    assert sorted(json.loads(r.value or b"")["run"]["runId"] for r in found) == sorted(run_ids)


# --- worker processes -------------------------------------------------------------------------------------


def _accepted_in_metrics(service: Intake) -> float:
    text = requests.get(f"{service.url}/metrics", timeout=10).text
    found = re.search(r'^lineage_intake_events_total\{outcome="accepted"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def two_workers(kafka_broker: LocalKafka, intake_topic: str, intake_logs: Path) -> Iterator[Intake]:
    """The service as two worker processes on one port (``serve.workers = 2``); stopped at the end."""
    service = start_intake(
        kafka_broker.bootstrap_servers,
        intake_topic,
        intake_logs,
        api_key_hashes=json.dumps([hash_key(KEY)]),
        workers="2",
    )
    yield service
    service.stop()


def test_worker_processes_share_the_port_the_load_and_the_metrics(two_workers: Intake) -> None:
    import psutil

    service = two_workers
    workers = psutil.Process(service.process.pid).children()
    run_ids = [str(uuid.uuid4()) for _ in range(400)]

    def send(run_id: str) -> int:  # a new connection each: the workers take turns accepting
        return post(service, "/api/v1/lineage", raw_event("workers", run_id)).status_code

    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(send, run_ids))
    # Whichever worker answers /metrics counts every worker's events.
    counts = [_accepted_in_metrics(service) for _ in range(8)]
    service.stop()

    assert len(workers) == 2
    assert statuses == [200] * len(run_ids)
    assert counts == [len(run_ids)] * 8
    found = records_with(service, *(r.encode() for r in run_ids))
    assert sorted(json.loads(r.value or b"")["run"]["runId"] for r in found) == sorted(run_ids)
    assert service.process.returncode == 0
    log = service.log()
    answered = [int(n) for n in re.findall(r"stopped after answering (\d+) requests", log)]
    assert len(answered) == 2 and min(answered) > 0, log[-2000:]
    assert sum(answered) >= len(run_ids) + 8


def test_a_worker_that_dies_stops_the_service(two_workers: Intake) -> None:
    import psutil

    service = two_workers
    first, second = psutil.Process(service.process.pid).children()
    first.kill()
    service.process.wait(timeout=60)
    second.wait(timeout=5)

    assert service.process.returncode == 1
    assert f"(pid {first.pid}) ended (signal 9); stopping" in service.log()
    assert not second.is_running()


# --- authentication, TLS, operations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Basic {KEY}", "Bearer", f"Bearer {KEY}x", f"bearer{KEY}"],
    ids=["missing", "wrong", "basic", "empty", "longer", "no-space"],
)
def test_wrong_or_missing_key_is_401_without_saying_why(service: Intake, authorization: str | None) -> None:
    run_id = str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        **({"Authorization": authorization} if authorization else {}),
    }

    answer = post(service, "/api/v1/lineage", raw_event("unauthorized", run_id), headers)

    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert answer.json() == {"error": {"code": "UNAUTHORIZED", "message": "a valid API key is required"}}
    assert not records_with(service, run_id.encode())


def test_health_metrics_and_a_log_without_bodies_or_keys(service: Intake) -> None:
    marker = uuid.uuid4().hex
    post(service, "/api/v1/lineage", json.dumps({"secret": marker}).encode())
    health = requests.get(f"{service.url}/healthz", timeout=10)
    metrics = requests.get(f"{service.url}/metrics", timeout=10).text

    assert health.status_code == 200
    assert health.json()["kafka"] == {"topic": service.topic, "reachable": True, "partitions": 3}
    for line in (
        'lineage_intake_requests_total{endpoint="lineage",status="400"}',
        'lineage_intake_events_total{outcome="accepted"}',
        'lineage_intake_rejected_events_total{reason="MISSING_FIELD"}',
        'lineage_intake_refused_requests_total{code="UNAUTHORIZED"}',
        "lineage_intake_received_bytes_total",
        'lineage_intake_request_duration_seconds_bucket{endpoint="lineage",le="0.05"}',
    ):
        assert line in metrics or pytest.fail(f"{line} not in /metrics")
    log = service.log()
    assert '"POST /api/v1/lineage" 400' in log
    assert marker not in log
    assert KEY not in log
    assert "API keys required" in log


def test_no_key_means_loopback_only(kafka_broker: LocalKafka, intake_topic: str) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "lineage.cli.main", "serve", "--host", "0.0.0.0"],
        cwd=REPO,
        env=serve_env(kafka_broker.bootstrap_servers, intake_topic, 0),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert refused.returncode == 1
    assert "refusing to listen on 0.0.0.0 without an API key" in refused.stderr


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the test certificate")
def test_tls(kafka_broker: LocalKafka, intake_topic: str, tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    service = start_intake(
        kafka_broker.bootstrap_servers,
        intake_topic,
        tmp_path,
        scheme="https",
        tls_cert_file=str(cert),
        tls_key_file=str(key),
        api_key_hashes=json.dumps([hash_key(KEY)]),
    )
    try:
        run_id = str(uuid.uuid4())
        answer = requests.post(
            f"{service.url}/api/v1/lineage",
            data=raw_event("tls", run_id),
            headers=auth(),
            verify=str(cert),
            timeout=30,
        )
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.post(
                f"{service.url.replace('https', 'http')}/api/v1/lineage",
                data=b"{}",
                headers=auth(),
                timeout=5,
            )
    finally:
        service.stop()
    assert answer.status_code == 200, answer.text
    assert len(records_with(service, run_id.encode())) == 1
