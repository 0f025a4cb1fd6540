"""API keys scoped to namespaces, through real `lineage serve` processes: the intake on a real broker (an
out-of-scope event is refused and not in the topic, an in-scope one is), and the read API on the lab's lake
built by the real pipeline (a scoped key's answers never hold a hidden name, walks say what they withheld,
a hidden node is a 404 like an absent one)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from lineage.io.local_kafka import LocalKafka
from lineage.serve.auth import hash_key, new_key
from tests.fixtures.intake import Intake, read_topic, start_intake
from tests.fixtures.pipeline import Pipeline
from tests.integration.test_read_api import ReadService

pytestmark = pytest.mark.integration

FULL, WRITER, READER, READ_ONLY = new_key(), new_key(), new_key(), new_key()
WRITER_SCOPE = ["scoped-tests", "s3://scoped-*"]
# The lab's namespaces a reader of fh-local's jobs and the Kafka topics may see.
READER_SCOPE = ["fh-local", "kafka://*"]
WAREHOUSE, ELSEWHERE = "s3://warehouse", "s3://elsewhere"


def _keys() -> str:
    return json.dumps(
        [
            {"digest": hash_key(FULL)},  # no namespaces, no access list: everything, as an api_key_hashes key
            {"digest": hash_key(WRITER), "name": "writer", "namespaces": WRITER_SCOPE, "access": ["write"]},
            {"digest": hash_key(READER), "name": "reader", "namespaces": READER_SCOPE, "access": ["read"]},
            {"digest": hash_key(READ_ONLY), "access": ["read"]},
        ]
    )


# --- the intake ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def intake(kafka_broker: LocalKafka, intake_topic: str, intake_logs: Path) -> Iterator[Intake]:
    service = start_intake(
        kafka_broker.bootstrap_servers, intake_topic, intake_logs, read="false", api_keys=_keys()
    )
    yield service
    service.stop()


def _event(job_namespace: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "eventType": "START",
        "eventTime": "2026-11-20T08:00:00.000Z",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": job_namespace, "name": "scoped-job"},
        "inputs": [{"namespace": n, "name": "in"} for n in inputs],
        "outputs": [{"namespace": n, "name": "out"} for n in outputs],
        "producer": "urn:lineage-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def _post(service: Intake, path: str, body: Any, key: str) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return requests.post(f"{service.url}{path}", data=json.dumps(body), headers=headers, timeout=30)


def _in_topic(service: Intake, *events: dict[str, Any]) -> set[str]:
    """The run ids of ``events`` that are in the service's topic."""
    wanted = {e["run"]["runId"] for e in events}
    found = set()
    for record in read_topic(service.bootstrap_servers, service.topic):
        found |= {run_id for run_id in wanted if run_id.encode() in (record.value or b"")}
    return found


def test_a_scoped_intake_key_writes_only_in_its_namespaces(intake: Intake) -> None:
    inside = _event("scoped-tests", ("s3://scoped-lake",), ("s3://scoped-lake",))
    other_job = _event("team-b")
    other_output = _event("scoped-tests", ("s3://scoped-lake",), ("s3://elsewhere",))
    batch_inside = _event("scoped-tests")

    accepted = _post(intake, "/api/v1/lineage", inside, WRITER)
    assert accepted.status_code == 200, accepted.text
    refused = _post(intake, "/api/v1/lineage", other_job, WRITER)
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "code": "FORBIDDEN",
        "message": "nothing was stored: namespace outside this key's scope: team-b",
    }
    refused_output = _post(intake, "/api/v1/lineage", other_output, WRITER)
    assert refused_output.status_code == 403
    assert "s3://elsewhere" in refused_output.json()["error"]["message"]
    # a batch holding one event out of scope is refused whole: its in-scope element is not stored either
    batch = _post(intake, "/api/v1/lineage/batch", [batch_inside, other_output], WRITER)
    assert batch.status_code == 403
    assert batch.json()["error"]["message"].startswith(
        "nothing was stored, 1 of 2 events refused: element 1: "
    )
    # the same events with a key without namespaces, and a key that may not write
    assert _post(intake, "/api/v1/lineage", other_job, FULL).status_code == 200
    read_only = _post(intake, "/api/v1/lineage", inside, READ_ONLY)
    assert read_only.status_code == 403 and read_only.json()["error"]["code"] == "FORBIDDEN"

    assert _in_topic(intake, inside, other_job, other_output, batch_inside) == {
        inside["run"]["runId"],
        other_job["run"]["runId"],  # sent again with the unscoped key
    }
    metrics = requests.get(f"{intake.url}/metrics", timeout=10).text
    assert 'lineage_intake_refused_requests_total{code="FORBIDDEN"} 4.0' in metrics


# --- the read API ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reader(lab_pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadService]:
    log = tmp_path_factory.mktemp("scoped_read") / "serve.log"
    running = ReadService({**lab_pipeline.env, "LINEAGE__SERVE__API_KEYS": _keys()}, log)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def _get(service: ReadService, path: str, key: str, **params: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return requests.get(f"{service.url}{path}", params=params, headers=headers, timeout=60)


def _allowed(namespace: str) -> bool:
    from fnmatch import fnmatchcase

    return any(fnmatchcase(namespace, pattern) for pattern in READER_SCOPE)


def _leaks(answer: requests.Response, hidden: set[str]) -> list[str]:
    """The hidden names an answer says: in its text, or for JSON in its values and as whole keys. A key is
    matched whole, not as a part: a field of the shape such as ``file_count`` holds the hidden namespace
    ``file`` without saying it."""
    try:
        data = answer.json()
    except ValueError:
        return [name for name in hidden if name in answer.text]
    values: list[str] = []
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            values.append(node)

    walk(data)
    text = "\n".join(values)
    return [name for name in hidden if name in text or name in keys]


def test_a_scoped_read_key_sees_only_its_namespaces(reader: ReadService) -> None:
    # What exists, as the unscoped key sees it.
    namespaces = [n["name"] for n in _get(reader, "/api/v1/namespaces", FULL).json()["namespaces"]]
    hidden_namespaces = [n for n in namespaces if not _allowed(n)]
    assert hidden_namespaces and len(hidden_namespaces) < len(namespaces)
    jobs = _get(reader, "/api/v1/jobs", FULL).json()["jobs"]
    datasets = [
        d
        for n in namespaces
        for d in _get(reader, f"/api/v1/namespaces/{quote(n, safe='')}/datasets", FULL).json()["datasets"]
    ]
    visible = [j["name"] for j in jobs if _allowed(j["namespace"])] + [
        d["name"] for d in datasets if _allowed(d["namespace"])
    ]
    visible += [a["name"] for d in datasets if _allowed(d["namespace"]) for a in d["aliases"]]
    hidden_names = [j["name"] for j in jobs if not _allowed(j["namespace"])] + [
        d["name"] for d in datasets if not _allowed(d["namespace"])
    ]
    aliases = [a for d in datasets for a in d["aliases"]]  # other names of datasets: symlinks, s3a:// ...
    hidden_namespaces += [a["namespace"] for a in aliases if not _allowed(a["namespace"])]
    hidden_names += [a["name"] for a in aliases if not _allowed(a["namespace"])]
    # a hidden name that is also part of a visible one (orders, in kafka and in s3) cannot be told apart
    hidden = set(hidden_namespaces) | {n for n in hidden_names if not any(n in v for v in visible)}
    assert {"s3://warehouse", "s3a://warehouse", "hive://hive-metastore:9083", "iceberg-ingestion"} <= hidden

    orders = "kafka://kafka-1:19092/orders"
    runs = _get(reader, "/api/v2/runs", READER).json()
    assert runs and all(_allowed(r["job_namespace"]) for r in runs)
    paths: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/namespaces", {}),
        ("/api/v1/jobs", {}),
        ("/api/v1/sources", {}),
        ("/api/v1/tags", {}),
        ("/api/v1/search", {"q": "%", "limit": 1000}),
        ("/api/v1/search", {"q": "orders"}),
        ("/api/v1/events/lineage", {"limit": 10000}),
        ("/api/v1/stats/jobs", {"period": "DAY"}),
        ("/api/v1/stats/lineage-events", {"period": "DAY"}),
        ("/api/v2/runs", {}),
        ("/api/v1/lineage", {"nodeId": "dataset:kafka://kafka-1:19092:orders", "depth": 20}),
        (
            "/api/v1/column-lineage",
            {"nodeId": "dataset:kafka://kafka-1:19092:orders", "withDownstream": "true"},
        ),
        ("/api/v2/downstream", {"node": orders, "columns": "true"}),
        ("/api/v2/upstream", {"node": "kafka://kafka-1:19092/supplier-stats"}),
        ("/api/v2/impact", {"node": f"{orders}.price"}),
        ("/api/v2/graph", {"node": orders, "format": "json"}),
    ]
    for n in namespaces:
        paths += [
            (f"/api/v1/namespaces/{quote(n, safe='')}/jobs", {}),
            (f"/api/v1/namespaces/{quote(n, safe='')}/datasets", {}),
            (f"/api/v1/events/{quote(n, safe='')}", {}),
        ]
    for run in runs:
        paths += [
            (f"/api/v2/runs/{run['run_id']}", {}),
            (f"/api/v1/jobs/runs/{run['run_id']}", {}),
            (f"/api/v1/jobs/runs/{run['run_id']}/facets", {"type": "run"}),
            (f"/api/v1/jobs/runs/{run['run_id']}/facets", {"type": "job"}),
        ]
    answers = {}
    for path, params in paths:
        answer = _get(reader, path, READER, **params)
        assert answer.status_code == 200, (path, params, answer.text)
        leaked = _leaks(answer, hidden)
        assert not leaked, (path, params, leaked)
        answers[(path, json.dumps(params))] = answer
    listed = {n["name"] for n in answers[("/api/v1/namespaces", "{}")].json()["namespaces"]}
    assert listed == {n for n in namespaces if _allowed(n)} and "fh-local" in listed
    events = answers[("/api/v1/events/lineage", json.dumps({"limit": 10000}))].json()
    assert events["totalCount"] > 0 and all(_allowed(e["job"]["namespace"]) for e in events["events"])
    # the same events, whole for the unscoped key: the Spark application's lost their s3 inputs and outputs
    whole_events = _get(reader, "/api/v1/events/lineage", FULL, limit=10000).json()["events"]

    def datasets_of(event: dict[str, Any]) -> int:
        return len(event.get("inputs") or []) + len(event.get("outputs") or [])

    by_id = {(e["run"]["runId"], e["eventTime"], e["eventType"]): e for e in whole_events}
    pruned = [
        e
        for e in events["events"]
        if datasets_of(e) < datasets_of(by_id[(e["run"]["runId"], e["eventTime"], e["eventType"])])
    ]
    assert pruned and all(e["job"]["namespace"] == "fh-local" for e in pruned)

    # walks: the scoped answer plus what it withheld is the unscoped answer
    for path, params in (
        ("/api/v2/downstream", {"node": orders}),
        ("/api/v2/upstream", {"node": "kafka://kafka-1:19092/supplier-stats"}),
    ):
        scoped = _get(reader, path, READER, **params)
        whole = _get(reader, path, FULL, **params).json()
        assert "withheld" not in whole  # unscoped answers are as before
        assert int(scoped.headers["X-Lineage-Withheld-Nodes"]) == scoped.json()["withheld"]
        assert len(scoped.json()["nodes"]) + scoped.json()["withheld"] == len(whole["nodes"]), path
    down = answers[("/api/v2/downstream", json.dumps({"node": orders, "columns": "true"}))].json()
    assert down["withheld"] >= 1  # the Flink ingestion into the Iceberg table on s3://warehouse
    graph = answers[("/api/v1/lineage", json.dumps(paths[10][1]))].json()
    assert graph["withheld"] >= 1 and all(_allowed(n["data"]["namespace"]) for n in graph["graph"])

    # a hidden node, dataset, job or run answers as an absent one: the same status, code and message but
    # for the name asked, and suggestions only among the visible names
    hidden_run = next(
        r for r in _get(reader, "/api/v2/runs", FULL).json() if not _allowed(r["job_namespace"])
    )
    absent_run = str(uuid.uuid4())
    for path, params, asked, absent in (
        ("/api/v2/upstream", {"node": "{}/default.db/orders"}, WAREHOUSE, ELSEWHERE),
        (
            "/api/v1/lineage",
            {"nodeId": "job:{}:iceberg-ingestion"},
            "http://jobmanager-2:8081",
            "http://jobmanager-9:8081",
        ),
        (
            "/api/v1/namespaces/{}/datasets/default.db%2Forders",
            {},
            quote(WAREHOUSE, safe=""),
            quote(ELSEWHERE, safe=""),
        ),
        ("/api/v1/namespaces/{}", {}, "flink-jobs", "flunk-jobs"),
        ("/api/v2/runs/{}", {}, hidden_run["run_id"], absent_run),
        ("/api/v1/jobs/runs/{}/facets", {}, hidden_run["run_id"], absent_run),
    ):
        pair = [
            _get(reader, path.format(name), READER, **{k: v.format(name) for k, v in params.items()})
            for name in (asked, absent)
        ]
        assert [a.status_code for a in pair] == [404, 404], (path, pair[0].text)
        refused, missing = (a.json()["error"] for a in pair)
        assert refused["code"] == missing["code"] == "NOT_FOUND"
        shown = lambda text: text.replace("%3A%2F%2F", "://")  # noqa: E731
        assert refused["message"].replace(shown(asked), shown(absent)) == missing["message"], refused
        for suggestion in refused.get("suggestions") or []:
            assert not [name for name in hidden if name in suggestion], refused

    # a key that may only write, and no key at all
    assert _get(reader, "/api/v1/namespaces", WRITER).status_code == 403
    assert requests.get(f"{reader.url}/api/v1/namespaces", timeout=30).status_code == 401
