"""The read API of `lineage serve` as a real process on a catalog built by the real pipeline, called over
real HTTP with Marquez's own Python client (marquez-python from PyPI) and with plain requests."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from marquez_client import MarquezClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.serde import Serde
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.demo.events import lab_events
from lineage.ingest.stream import run_ingest
from lineage.io.local_kafka import free_port
from lineage.io.publish import publish_raw
from lineage.settings import Settings
from tests.fixtures.pipeline import Pipeline, cli_env

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LINEAGE = str(Path(sys.executable).with_name("lineage"))
KAFKA = "kafka://kafka-1:19092"
WAREHOUSE = "s3://warehouse"
SPARK_OVERWRITE = ("fh-local", "supplier_stats_app.overwrite_by_expression_default_supplier_stats")
INGESTION = ("http://jobmanager-2:8081", "iceberg-ingestion")


class ReadService:
    def __init__(self, env: dict[str, str], log_file: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_file = log_file
        with log_file.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "lineage.cli.main", "serve"],
                cwd=REPO,
                env={**env, "LINEAGE__SERVE__PORT": str(port), "LINEAGE__SERVE__INTAKE": "false"},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def health(self) -> dict[str, Any]:
        return requests.get(f"{self.url}/healthz", timeout=5).json()

    def wait_ready(self, timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_file.read_text()[-3000:]
            with contextlib.suppress(requests.RequestException):
                read = self.health()["read"]
                if read["ready"]:
                    return read
            time.sleep(0.2)
        raise TimeoutError(f"read index not ready:\n{self.log_file.read_text()[-3000:]}")

    def get(self, path: str, **params: Any) -> requests.Response:
        return requests.get(f"{self.url}{path}", params=params, timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


def serving(lab_pipeline: Pipeline, log_dir: Path) -> Iterator[ReadService]:
    """One ``lineage serve`` on the lab's lake, ready; stopped when the generator closes."""
    running = ReadService(lab_pipeline.env, log_dir / "serve.log")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def service(lab_pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadService]:
    yield from serving(lab_pipeline, tmp_path_factory.mktemp("read_api"))


@pytest.fixture(scope="module")
def client(service: ReadService) -> MarquezClient:
    return MarquezClient(service.url)


def test_marquez_client_lists_namespaces_jobs_and_datasets(client: MarquezClient) -> None:
    names = {n["name"] for n in client.list_namespaces()["namespaces"]}
    assert {"fh-local", "flink-jobs", KAFKA, WAREHOUSE, INGESTION[0], "lineage-lakehouse"} <= names

    jobs = {j["name"]: j for j in client.list_jobs("fh-local")["jobs"]}
    overwrite = jobs[SPARK_OVERWRITE[1]]
    assert overwrite["inputs"] == [{"namespace": WAREHOUSE, "name": "default.db/orders"}]
    assert overwrite["outputs"] == [{"namespace": WAREHOUSE, "name": "default.db/supplier_stats"}]
    assert overwrite["latestRun"]["state"] == "FAILED"  # the latest retry failed

    datasets = {d["name"] for d in client.list_datasets(KAFKA)["datasets"]}
    assert "orders" in datasets
    # the Iceberg table under its symlinked Hive name resolves to the canonical dataset
    stats = client.get_dataset("hive://hive-metastore:9083", "default.supplier_stats")
    assert (stats["namespace"], stats["name"]) == (WAREHOUSE, "default.db/supplier_stats")
    assert {"supplier", "total_price"} <= {f["name"] for f in stats["fields"]}
    hive = {"namespace": "hive://hive-metastore:9083", "name": "default.supplier_stats", "kind": "symlink"}
    assert hive in stats["aliases"]


def test_marquez_client_gets_runs_with_the_inferred_lost_state(client: MarquezClient) -> None:
    runs = client.list_job_runs("fh-local", "supplier-stats")["runs"]
    assert len(runs) == 1
    stuck = client.get_job_run(runs[0]["id"])
    assert stuck["state"] == "RUNNING"  # what the producer said, in Marquez's words
    assert stuck["inferredState"] == "LOST"  # what the build inferred
    assert stuck["jobVersion"]["name"] == "supplier-stats"
    assert {"namespace": KAFKA, "name": "orders"} in [
        {"namespace": v["datasetVersionId"]["namespace"], "name": v["datasetVersionId"]["name"]}
        for v in stuck["inputDatasetVersions"]
    ]


def test_lineage_of_the_lab_chain(service: ReadService) -> None:
    answer = service.get("/api/v1/lineage", nodeId=f"dataset:{WAREHOUSE}:default.db/supplier_stats", depth=4)
    assert answer.status_code == 200, answer.text
    graph = {n["id"]: n for n in answer.json()["graph"]}
    chain = [
        f"dataset:{KAFKA}:orders",
        f"job:{INGESTION[0]}:{INGESTION[1]}",
        f"dataset:{WAREHOUSE}:default.db/orders",
        f"job:{SPARK_OVERWRITE[0]}:{SPARK_OVERWRITE[1]}",
        f"dataset:{WAREHOUSE}:default.db/supplier_stats",
    ]
    for origin, destination in itertools.pairwise(chain):
        edge = {"origin": origin, "destination": destination}
        assert edge in graph[origin]["outEdges"], origin
        assert edge in graph[destination]["inEdges"], destination
    assert graph[chain[0]]["type"] == "DATASET" and graph[chain[1]]["type"] == "JOB"
    assert graph[chain[1]]["data"]["id"] == {"namespace": INGESTION[0], "name": INGESTION[1]}


def test_column_lineage_through_the_client(client: MarquezClient) -> None:
    graph = client.get_column_lineage_by_dataset_field(WAREHOUSE, "default.db/supplier_stats", "total_price")
    nodes = {n["id"]: n for n in graph["graph"]}
    total = nodes[f"datasetField:{WAREHOUSE}:default.db/supplier_stats:total_price"]["data"]
    assert [(f["dataset"], f["field"], f["transformationType"]) for f in total["inputFields"]] == [
        ("default.db/orders", "price", "DIRECT")
    ]
    assert total["inputFields"][0]["transformationSubtypes"]  # ours, beyond Marquez's shape
    assert f"datasetField:{KAFKA}:orders:price" in nodes  # two jobs up


def test_search(service: ReadService) -> None:
    found = service.get("/api/v1/search", q="supplier%stats", filter="dataset").json()
    assert {r["nodeId"] for r in found["results"]} >= {f"dataset:{WAREHOUSE}:default.db/supplier_stats"}
    assert all(r["type"] == "DATASET" for r in found["results"])
    assert found["totalCount"] == len(found["results"])


def test_a_hostile_search_is_answered_at_once(service: ReadService) -> None:
    """Issue 37: ten ``%_`` pairs before ``stats`` made the search backtrack for more than a minute on a
    name without it (``http://jobmanager-2:8081/iceberg-ingestion``), the service deaf meanwhile, /healthz
    too. The answer: every job and dataset one of whose names has ``stats`` after its tenth character."""
    found: dict[str, Any] = {}

    def search() -> None:
        started = time.monotonic()
        answer = service.get("/api/v1/search", q="%_%_%_%_%_%_%_%_%_%_STATS", limit=1000)
        found.update(status=answer.status_code, body=answer.json(), seconds=time.monotonic() - started)

    asking = threading.Thread(target=search)
    asking.start()
    started = time.monotonic()
    assert service.health()["read"]["ready"]  # answered while the search runs (or after it: it is quick)
    assert time.monotonic() - started < 2
    asking.join(timeout=30)
    assert found["status"] == 200, found
    assert found["seconds"] < 5, found

    def hit(namespace: str, name: str) -> bool:
        return f"{namespace}/{name}".lower().find("stats", 10) >= 0

    expected = set()
    for namespace in (n["name"] for n in service.get("/api/v1/namespaces", limit=1000).json()["namespaces"]):
        for job in service.get(f"/api/v1/namespaces/{quote(namespace, safe='')}/jobs", limit=1000).json()[
            "jobs"
        ]:
            if hit(namespace, job["name"]):
                expected.add(f"job:{namespace}:{job['name']}")
        listed = service.get(f"/api/v1/namespaces/{quote(namespace, safe='')}/datasets", limit=1000).json()
        for dataset in listed["datasets"]:
            names = [(namespace, dataset["name"])] + [(a["namespace"], a["name"]) for a in dataset["aliases"]]
            if any(hit(*name) for name in names):
                expected.add(f"dataset:{namespace}:{dataset['name']}")
    assert {r["nodeId"] for r in found["body"]["results"]} == expected
    assert f"dataset:{WAREHOUSE}:default.db/supplier_stats" in expected
    assert f"job:{SPARK_OVERWRITE[0]}:{SPARK_OVERWRITE[1]}" in expected
    assert found["body"]["totalCount"] == len(expected)

    too_long = service.get("/api/v1/search", q="a" * 1001)
    assert too_long.status_code == 400
    assert too_long.json()["error"]["code"] == "BAD_PARAMETER"


def same_walk(data: dict[str, Any]) -> dict[str, Any]:
    """A walk's JSON with its column edges in one order (the CLI lists them in the order the walk met them,
    which follows set iteration and so differs between processes)."""
    edges = data.get("column_edges", [])
    return {**data, "column_edges": sorted(edges, key=lambda e: json.dumps(e, sort_keys=True))}


def test_our_endpoints_answer_what_the_cli_answers(service: ReadService, lab_pipeline: Pipeline) -> None:
    node = "hive://hive-metastore:9083/default.supplier_stats"
    api = service.get("/api/v2/upstream", node=node, depth=3, columns="true")
    assert api.status_code == 200, api.text
    cli = subprocess.run(
        [LINEAGE, "upstream", node, "--depth", "3", "--columns", "--json"],
        env=lab_pipeline.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert same_walk(api.json()) == same_walk(json.loads(cli.stdout))

    lost = service.get("/api/v2/runs", state="lost").json()
    assert "supplier-stats" in {r["job_name"] for r in lost}
    assert {r["inferred_state"] for r in lost} == {"LOST"}
    impact = service.get("/api/v2/impact", node=f"{KAFKA}/orders.price").json()
    assert {(c["dataset"], c["field"]) for c in impact["columns"]} >= {
        (f"{WAREHOUSE}/default.db/supplier_stats", "total_price")
    }
    # Health: the API's causes and paths are the CLI's (the lab's Spark writer of the table failed last).
    health = service.get("/api/v2/health", node=node)
    assert health.status_code == 200, health.text
    cli_health = subprocess.run(
        [LINEAGE, "health", node, "--json"],
        env=lab_pipeline.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    causes = [(c["id"], c["state"], c["path"]) for c in health.json()["causes"]]
    assert causes and causes == [
        (c["id"], c["state"], c["path"]) for c in json.loads(cli_health.stdout)["causes"]
    ]
    # Column tags: the topic's supplier (pii) reaches the summary table along IDENTITY edges; its price
    # (confidential) reaches the Iceberg orders through a DIRECT cast but not total_price (an AGGREGATION).
    tags = service.get("/api/v2/tags", dataset=node)
    assert tags.status_code == 200, tags.text
    cli_tags = subprocess.run(
        [LINEAGE, "tags", node, "--json"],
        env=lab_pipeline.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert tags.json()["tags"] == json.loads(cli_tags.stdout)["tags"]
    carried = {
        (t["field"], t["tag"], t["origin"]["dataset"], t["origin"]["field"], t["hops"])
        for t in tags.json()["tags"]
    }
    assert carried == {("supplier", "pii", f"{KAFKA}/orders", "supplier", 2)}
    orders = service.get("/api/v2/tags", dataset=f"{KAFKA}/orders", tag="confidential").json()
    assert [(t["field"], t["hops"]) for t in orders["tags"]] == [("price", 0)]
    page = service.get("/api/v2/graph", node=f"{KAFKA}/orders")
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert "supplier-stats" in page.text


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINEAGE, *args], env=env, capture_output=True, text=True, timeout=120)


# What the reader's clock writes into an answer (a health's "as of", a running run's silence, a page's
# generation time): the two processes ask at different moments.
_CLOCK_TEXT = re.compile(r"(as of |as_of\W+|generated_at\W+|generated )\d{4}-\d\d-\d\dT[\d:.]+(Z|\+00:00)")


def same_answer(args: tuple[str, ...], text: str) -> Any:
    """A command's output with the reader's clock masked; JSON parsed (a walk's column edges in one order)."""
    if "--json" not in args:
        return _CLOCK_TEXT.sub(r"\1<now>", text)
    data = json.loads(_CLOCK_TEXT.sub(r"\1<now>", text))
    for row in data if isinstance(data, list) else [data]:
        row.pop("silent_seconds", None)
    return same_walk(data) if args[0] in ("upstream", "downstream") else data


def test_the_cli_through_the_api_prints_what_it_prints_from_the_lake(
    service: ReadService, lab_pipeline: Pipeline
) -> None:
    node = "hive://hive-metastore:9083/default.supplier_stats"
    done = service.get("/api/v2/runs", state="complete", limit=1).json()
    version = service.get("/api/v2/versions", node=node).json()["versions"][0]["version"]
    windows = (
        "--base-from",
        "2000-01-01",
        "--base-to",
        "2001-01-01",
        "--from",
        "2001-01-01",
        "--to",
        "2100-01-01",
    )
    commands: list[tuple[str, ...]] = [
        ("upstream", node, "--depth", "3", "--columns"),
        ("upstream", node, "--depth", "3", "--columns", "--json"),
        ("downstream", f"{KAFKA}/orders", "--via", "both"),
        ("impact", f"{KAFKA}/orders.price"),
        ("impact", f"{KAFKA}/orders.price", "--json"),
        ("health", node),
        ("health", node, "--json"),
        ("tags", node),
        ("runs", "--state", "lost"),
        ("runs", "--limit", "5", "--json"),
        ("run", done[0]["run_id"]),
        ("versions", node),
        ("versions", node, "--version", version, "--json"),
        ("diff", *windows),
        ("diff", *windows, "--json"),
        ("graph", node, "--format", "dot"),
    ]
    for args in commands:
        lake = run_cli(lab_pipeline.env, *args)
        asked = run_cli(lab_pipeline.env, "--api", service.url, *args)
        assert lake.returncode == 0, (args, lake.stderr)
        assert asked.returncode == 0, (args, asked.stderr)
        assert lake.stdout.strip(), args
        assert same_answer(args, asked.stdout) == same_answer(args, lake.stdout), args
    # Errors: the same line and exit; an unknown node's suggestions come from the service's 404.
    lake = run_cli(lab_pipeline.env, "health", f"{KAFKA}/ordres")
    asked = run_cli(lab_pipeline.env, "--api", service.url, "health", f"{KAFKA}/ordres")
    assert (asked.returncode, asked.stderr) == (lake.returncode, lake.stderr) == (2, lake.stderr)
    assert f"{KAFKA}/orders" in asked.stderr
    # No settings on the asking side at all: the service's URL is enough.
    bare = {k: v for k, v in lab_pipeline.env.items() if not k.startswith(("LINEAGE", "AWS"))}
    asked = run_cli({**bare, "LINEAGE_API": service.url}, "tags", node)
    assert asked.returncode == 0 and asked.stdout == run_cli(lab_pipeline.env, "tags", node).stdout


def test_bad_input(service: ReadService) -> None:
    unknown = service.get("/api/v1/lineage", nodeId=f"dataset:{KAFKA}:ordres")
    assert unknown.status_code == 404
    error = unknown.json()["error"]
    assert error["code"] == "NOT_FOUND"
    assert f"{KAFKA}/orders" in error["suggestions"]
    for params in ({"depth": "-1"}, {"depth": "ten"}):  # depth 0 is Marquez's start job and its datasets
        bad = service.get("/api/v1/lineage", nodeId=f"dataset:{KAFKA}:orders", **params)
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["code"] == "BAD_PARAMETER"
    assert service.get("/api/v1/lineage").status_code == 400  # nodeId is required
    assert service.get("/api/v2/upstream", node=f"{KAFKA}/orders", depth="-1").status_code == 400
    assert service.get("/api/v2/upstream", node=f"{KAFKA}/orders", as_of="someday").status_code == 400
    assert service.get(f"/api/v1/jobs/runs/{uuid.uuid4()}").status_code == 404
    assert service.get("/api/v1/namespaces/fh-local/jobs/no-such-job").status_code == 404
    assert service.get("/api/v2/runs", state="sleeping").status_code == 400
    # read-only: the read half takes no writes (the intake is off here)
    assert requests.post(f"{service.url}/api/v1/lineage", json={}, timeout=5).status_code == 405


def new_job_event(name: str) -> bytes:
    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace="read-api-tests", name=name),
        producer="urn:lineage-tests",
        inputs=[InputDataset(namespace=KAFKA, name="orders")],
        outputs=[OutputDataset(namespace="file", name=f"/tmp/{name}")],
    )
    return Serde.to_json(event).encode()


def test_index_refreshes_after_a_new_build(spark: SparkSession, own_lake: Settings, tmp_path: Path) -> None:
    def land(messages: list[bytes]) -> None:
        publish_raw(
            own_lake.kafka.bootstrap_servers,
            own_lake.kafka.topic,
            [(b"k", m) for m in messages],
            own_lake.kafka.max_message_bytes,
        )
        run_ingest(spark, own_lake)
        build_lineage(spark, own_lake)

    land([Serde.to_json(e.event).encode() for e in lab_events()])
    env = {**cli_env(own_lake, tmp_path / "unused.yml"), "LINEAGE__SERVE__REFRESH_SECONDS": "0.5"}
    running = ReadService(env, tmp_path / "serve.log")
    try:
        first = running.wait_ready()
        assert running.get("/api/v1/namespaces/read-api-tests/jobs").json()["totalCount"] == 0
        land([new_job_event("late-job")])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            read = running.health()["read"]
            if read["build_snapshot_id"] != first["build_snapshot_id"]:
                break
            time.sleep(0.2)
        assert read["build_snapshot_id"] != first["build_snapshot_id"], read
        jobs = running.get("/api/v1/namespaces/read-api-tests/jobs").json()["jobs"]
        assert [j["name"] for j in jobs] == ["late-job"]
        downstream = running.get("/api/v2/downstream", node=f"{KAFKA}/orders", depth=1).json()
        assert "read-api-tests/late-job" in {n["label"] for n in downstream["nodes"]}
    finally:
        running.stop()
