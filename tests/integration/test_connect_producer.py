"""End to end with a real Kafka Connect producer: Debezium's PostgreSQL source connector with Debezium's
built-in OpenLineage integration, on a Kafka Connect standalone worker, against our own PostgreSQL server
-> OpenLineage Kafka transport -> our topic -> ingestion -> build -> ``lake.lineage.*``. One worker start
sends over HTTP to our intake (``lineage serve``) instead, which produces into the same topic.

One scenario per module (``connect_lake``), run once, on the session's broker. Two tables (customers,
orders) in a fresh server; the connector ``shop-cdc`` (topic prefix ``shop``, job ``shop.0`` in namespace
``connect-shop``) captures both. Four runs of its task, one after the other:

* ``first``: snapshot, then inserts and updates on both tables; the connector is stopped and resumed through
  the worker's REST API (PUT /connectors/shop-cdc/stop, /resume), which stops its task;
* ``resumed``: the task the resume started; more changes, then the worker stopped (SIGTERM);
* ``over_http``: the worker started again with the HTTP transport; changes, then SIGTERM;
* ``killed``: the worker started again (Kafka transport), changes, then SIGKILL: no terminal event.

Then a PySpark job with the OpenLineage Spark listener reads the orders change topic into an Iceberg table
(tests/producers/spark_read_changes.py), so the topic has a reader downstream.

Needs `make connect-setup` (.jars/connect, .jars/connect-plugins/debezium, Debian's PostgreSQL). Set
``CONNECT_GOLDEN_DIR`` to also write the captured events there (how tests/resources/golden/connect_real/
was made).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lineage.io.local_kafka import LocalKafka, create_topic
from lineage.serve.auth import hash_key, new_key
from lineage.settings import Settings
from tests.fixtures.connect import REPO, ConnectWorker, render
from tests.fixtures.intake import start_intake
from tests.fixtures.lake import lake_settings
from tests.fixtures.postgres import PostgresServer, running_postgres
from tests.fixtures.topics import ProducerScenario, TopicWatcher, write_events

pytestmark = pytest.mark.integration

CONNECTOR = "shop-cdc"
TOPIC_PREFIX = "shop"
JOB = ("connect-shop", f"{TOPIC_PREFIX}.0")  # openlineage.integration.job.namespace, <topic.prefix>.<task>
DATABASE = "postgres"
TABLES = ("customers", "orders")
PRODUCER = "https://github.com/debezium/debezium/tree/v3.5.0.Final/debezium-openlineage"
EVENT_TIMEOUT_S = 120.0
SPARK_JOB = ("spark-cdc", "orders_from_cdc")  # tests/producers/spark_read_changes.py
SILENCE = timedelta(hours=2)  # the build runs this long after the last event: the killed run is long silent
LINEAGE_TABLES = (  # the tables the tests read, beside the raw events
    "jobs",
    "runs",
    "datasets",
    "dataset_schemas",
    "run_io",
    "job_edges",
    "dataset_edges",
    "job_summary",
)


@dataclass
class Scenario(ProducerScenario):
    pg_namespace: str = ""


def make_tables(pg: PostgresServer) -> None:
    pg.sql(
        "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, email varchar(200));"
        "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers (id),"
        " amount numeric(10, 2) NOT NULL, status text NOT NULL, placed_at timestamptz DEFAULT now());"
        "INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com');"
        "INSERT INTO orders (id, customer_id, amount, status) VALUES (100, 1, 12.50, 'new');"
    )


def change_both_tables(pg: PostgresServer, round_: int) -> None:
    """Inserts and updates on both tables (customer ids 10 * round + 2.., order ids 100 * round + 1..)."""
    customer, order = 10 * round_ + 2, 100 * round_ + 1
    pg.sql(
        f"INSERT INTO customers VALUES ({customer}, 'customer {customer}', NULL);"
        "INSERT INTO orders (id, customer_id, amount, status)"
        f" VALUES ({order}, {customer}, {round_}.25, 'new');"
        f"UPDATE customers SET email = 'c{customer}@example.com' WHERE id = {customer};"
        f"UPDATE orders SET status = 'paid' WHERE id = {order};"
    )


def run_scenario(scenario: Scenario, pg: PostgresServer, work: Path, intake_url: str, api_key: str) -> None:
    settings = scenario.settings
    bootstrap = settings.kafka.bootstrap_servers
    over_kafka = render(
        "openlineage.yml", work / "openlineage.yml", bootstrap_servers=bootstrap, topic=settings.kafka.topic
    )
    over_http = render(
        "openlineage-http.yml", work / "openlineage-http.yml", intake_url=intake_url, api_key=api_key
    )

    def connector(config: Path, name: str) -> Path:
        return render(
            "postgres-source.properties",
            work / f"{name}-connector.properties",
            connector_name=CONNECTOR,
            pg_port=pg.port,
            pg_password="not-needed-trust-auth",
            pg_database=DATABASE,
            topic_prefix=TOPIC_PREFIX,
            slot_name="shop_cdc",
            openlineage_config=config,
            job_namespace=JOB[0],
            bootstrap_servers=bootstrap,
        )

    watcher = TopicWatcher(bootstrap, settings.kafka.topic, 3, EVENT_TIMEOUT_S)
    started: list[ConnectWorker] = []

    def new_run(step: str, worker: ConnectWorker) -> str:
        known = set(scenario.runs.values())
        watcher.wait(f"a new run ({step})", lambda: watcher.new_run(known) is not None, worker.tail)
        run_id = watcher.new_run(known)
        assert run_id is not None
        scenario.runs[step] = run_id
        return run_id

    def wrote_both_topics(run_id: str) -> Callable[[], bool]:
        topics = {(scenario.kafka_namespace(), f"{TOPIC_PREFIX}.public.{t}") for t in TABLES}
        return lambda: topics <= {d for c in watcher.run_events(run_id) for d in c.datasets("outputs")}

    def has(run_id: str, event_type: str) -> Callable[[], bool]:
        return lambda: event_type in [c.type for c in watcher.run_events(run_id)]

    def start(name: str, config: Path) -> ConnectWorker:
        worker = ConnectWorker.start(name, work, bootstrap, connector(config, name))
        started.append(worker)
        worker.wait_running(CONNECTOR)
        return worker

    try:
        t0 = time.monotonic()
        worker = start("worker1", over_kafka)
        run = new_run("first", worker)
        change_both_tables(pg, 1)
        watcher.wait("first: outputs on both change topics", wrote_both_topics(run), worker.tail)
        worker.rest(f"/connectors/{CONNECTOR}/stop", method="PUT")
        watcher.wait("first: COMPLETE after the connector's stop", has(run, "COMPLETE"), worker.tail)
        worker.rest(f"/connectors/{CONNECTOR}/resume", method="PUT")
        worker.wait_running(CONNECTOR)
        run = new_run("resumed", worker)
        change_both_tables(pg, 2)
        watcher.wait("resumed: outputs on both change topics", wrote_both_topics(run), worker.tail)
        worker.stop()
        watcher.wait("resumed: COMPLETE after SIGTERM", has(run, "COMPLETE"), worker.tail)
        scenario.seconds["worker1"] = time.monotonic() - t0

        t0 = time.monotonic()
        worker = start("worker2", over_http)
        run = new_run("over_http", worker)
        change_both_tables(pg, 3)
        watcher.wait("over_http: outputs on both change topics", wrote_both_topics(run), worker.tail)
        worker.stop()
        watcher.wait("over_http: COMPLETE after SIGTERM", has(run, "COMPLETE"), worker.tail)
        scenario.seconds["worker2"] = time.monotonic() - t0

        t0 = time.monotonic()
        worker = start("worker3", over_kafka)
        run = new_run("killed", worker)
        change_both_tables(pg, 4)
        watcher.wait("killed: outputs on both change topics", wrote_both_topics(run), worker.tail)
        worker.kill()
        scenario.seconds["worker3"] = time.monotonic() - t0
        watcher.drain(5)
        assert watcher.run_events(run)[-1].type == "RUNNING"
        scenario.events = list(watcher.seen)
    finally:
        for worker in started:
            worker.kill()
        watcher.close()


def write_golden(directory: Path, scenario: Scenario) -> None:
    """The captured events, one JSON per line, in (partition, offset) order, unchanged."""
    directory.mkdir(parents=True, exist_ok=True)
    write_events(directory / "debezium.jsonl", scenario.events)


@pytest.fixture(scope="module")
def connect_lake(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    """Runs the connector's four runs into a fresh topic, ingests and builds into a fresh catalog (once)."""
    work = tmp_path_factory.mktemp("connect")
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"connect.{uuid.uuid4().hex[:8]}.runs"
    settings = lake_settings(spark, base_settings, work, bootstrap_servers=bootstrap, topic=topic)
    scenario = Scenario(settings)
    create_topic(bootstrap, topic, 3, kafka_broker.max_message_bytes)
    api_key = new_key()
    intake = start_intake(bootstrap, topic, work, api_key_hashes=json.dumps([hash_key(api_key)]))
    try:
        with running_postgres() as pg:
            scenario.pg_namespace = f"postgres://{pg.host}:{pg.port}"
            make_tables(pg)
            run_scenario(scenario, pg, work, intake.url, api_key)
        with urllib.request.urlopen(f"{intake.url}/metrics", timeout=10) as answer:
            scenario.intake_metrics = answer.read().decode()
    finally:
        intake.stop()

    t0 = time.monotonic()
    reader = subprocess.run(
        [
            *(sys.executable, "tests/producers/spark_read_changes.py", "--bootstrap", bootstrap),
            *(
                "--topic",
                topic,
                "--changes",
                f"{TOPIC_PREFIX}.public.orders",
                "--warehouse",
                str(work / "cdc"),
            ),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert reader.returncode == 0, reader.stderr[-3000:]
    scenario.seconds["spark_reader"] = time.monotonic() - t0

    scenario.ingest_and_build(spark, SILENCE, LINEAGE_TABLES)
    golden = os.environ.get("CONNECT_GOLDEN_DIR")
    if golden:
        write_golden(Path(golden), scenario)
    print(f"\nconnect scenario seconds: { {k: round(v, 1) for k, v in scenario.seconds.items()} }")
    yield scenario


def test_every_debezium_event_lands_once_keyed_by_its_job(connect_lake: Scenario) -> None:
    assert connect_lake.rejected == 0 and connect_lake.rows_in == len(connect_lake.tables["raw"])
    raw = [r for r in connect_lake.tables["raw"] if r["job_namespace"] == JOB[0]]
    assert len(raw) == len(connect_lake.events) > 10
    assert {(r["job_namespace"], r["job_name"]) for r in raw} == {JOB}
    assert {r["producer"] for r in raw} == {PRODUCER}
    # openlineage-java's Kafka transport keys by job; the intake keys the HTTP run's events the same way.
    assert {r["kafka_key"] for r in raw} == {"run:connect-shop/shop.0"}
    # Debezium masks the password in its debezium_config run facet itself.
    configs = {
        line for c in connect_lake.events for line in c.event["run"]["facets"]["debezium_config"]["configs"]
    }
    assert "database.password=********" in configs


def test_one_worker_start_sent_over_http_through_the_intake(connect_lake: Scenario) -> None:
    run_id = connect_lake.runs["over_http"]
    over_http = [c for c in connect_lake.events if c.run_id == run_id]
    kinds = [c.type for c in over_http]
    assert (kinds[0], kinds[-1]) == ("START", "COMPLETE")
    accepted = [
        line
        for line in connect_lake.intake_metrics.splitlines()
        if line.startswith("lineage_intake_events_total")
    ]
    assert accepted == [f'lineage_intake_events_total{{outcome="accepted"}} {float(len(over_http))}']
    landed = [r for r in connect_lake.tables["raw"] if r["run_id"] == run_id]
    assert len(landed) == len(over_http)


def test_connector_job_carries_its_configured_metadata(connect_lake: Scenario) -> None:
    (job,) = [j for j in connect_lake.tables["jobs"] if (j["job_namespace"], j["job_name"]) == JOB]
    assert (job["integration"], job["job_type"], job["processing_type"]) == ("DEBEZIUM", "TASK", "STREAMING")
    assert job["description"] == "CDC of the shop database (customers, orders) into Kafka"
    assert [(o["name"], o["type"]) for o in job["owners"]] == [
        ("Lineage Team", "maintainer"),
        ("Data Platform", "owner"),
    ]
    assert {(t["key"], t["value"]) for t in job["tags"]} == {
        ("env", "test"),
        ("team", "lineage"),
        ("source", "postgresql"),
    }


def test_runs_complete_on_stop_and_the_killed_worker_is_lost(connect_lake: Scenario) -> None:
    runs = {step: connect_lake.run(step) for step in connect_lake.runs}
    assert {step: (r["reported_state"], r["inferred_state"]) for step, r in runs.items()} == {
        "first": ("COMPLETE", "COMPLETE"),  # the connector stopped through the REST API
        "resumed": ("COMPLETE", "COMPLETE"),  # the worker stopped with SIGTERM
        "over_http": ("COMPLETE", "COMPLETE"),
        "killed": ("RUNNING", "LOST"),  # SIGKILL: no terminal event
    }
    for step, run in runs.items():
        assert run["run_id"][14] == "7", step  # UUIDv7: every task start is a new run
        assert (run["processing_engine_name"], run["processing_engine_version"]) == (
            "Debezium",
            "3.5.0.Final",
        )
        assert run["openlineage_adapter_version"] == "1.31.0"
        assert run["error_message"] is None
    for step in ("first", "resumed", "over_http"):
        assert runs[step]["started_at"] < runs[step]["ended_at"]
    killed = runs["killed"]
    assert killed["ended_at"] is None
    # LOST from its deadline on (last event + threshold), which the build's reference time had passed.
    assert killed["lost_after"] == killed["last_event_at"] + timedelta(seconds=killed["threshold_seconds"])
    # Debezium sends RUNNING as it handles records, a burst at a time: the median gap is well under a
    # second, so the 900 s floor is the threshold.
    assert killed["threshold_seconds"] == 900.0
    assert "median heartbeat" in killed["liveness_reason"]
    (summary,) = [s for s in connect_lake.tables["job_summary"] if (s["job_namespace"], s["job_name"]) == JOB]
    assert (summary["run_count"], summary["completed_runs"], summary["lost_runs"]) == (4, 3, 1)
    assert summary["last_run_state"] == "LOST"


def test_tables_are_inputs_with_their_schemas_and_change_topics_outputs(connect_lake: Scenario) -> None:
    pg, kafka = connect_lake.pg_namespace, connect_lake.kafka_namespace()
    tables = {t: connect_lake.dataset_id(pg, f"{DATABASE}.public.{t}") for t in TABLES}
    topics = {t: connect_lake.dataset_id(kafka, f"{TOPIC_PREFIX}.public.{t}") for t in TABLES}
    schemas = {d["dataset_id"]: d["schema_fields"] for d in connect_lake.tables["datasets"]}
    assert [(f["name"], f["type"]) for f in schemas[tables["customers"]]] == [
        ("id", "int4"),
        ("name", "text"),
        ("email", "varchar"),
    ]
    assert [(f["name"], f["type"]) for f in schemas[tables["orders"]]] == [
        ("id", "int4"),
        ("customer_id", "int4"),
        ("amount", "numeric"),
        ("status", "text"),
        ("placed_at", "timestamptz"),
    ]
    # A change topic's schema is Debezium's envelope: before/after rows, source metadata, op, times.
    envelope = ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
    assert [f["name"] for f in schemas[topics["customers"]]] == envelope
    history: dict[str, list[tuple[int, list[str], str]]] = {}
    for v in sorted(connect_lake.tables["dataset_schemas"], key=lambda v: v["version"]):
        names = [f["name"] for f in v["schema_fields"]]
        history.setdefault(v["dataset_id"], []).append((v["version"], names, v["first_job_namespace"]))
    assert history[topics["customers"]] == [(1, envelope, JOB[0])]
    # The orders topic is also read by the Spark job, whose listener reports Spark's Kafka source columns
    # (key, value, topic, ...) as the topic's schema: the latest report wins, so the reader's view is the
    # current schema and the writer's envelope stays as version 1 in the history.
    (first, second) = history[topics["orders"]]
    assert first == (1, envelope, JOB[0])
    assert (second[0], second[1][:3], second[2]) == (2, ["key", "value", "topic"], SPARK_JOB[0])
    assert [f["name"] for f in schemas[topics["orders"]]] == second[1]
    assert len([d for d in connect_lake.tables["datasets"] if d["namespace"] in (pg, kafka)]) == 4
    # Every run, the killed one too, read both tables and wrote both topics.
    io = {(r["run_id"], r["dataset_id"], r["direction"]) for r in connect_lake.tables["run_io"]}
    for step, run in connect_lake.runs.items():
        assert {(d, direction) for r, d, direction in io if r == run} == {
            *((t, "input") for t in tables.values()),
            *((t, "output") for t in topics.values()),
        }, step


def test_each_table_feeds_its_change_topic(connect_lake: Scenario) -> None:
    pg, kafka = connect_lake.pg_namespace, connect_lake.kafka_namespace()
    tables = {t: connect_lake.dataset_id(pg, f"{DATABASE}.public.{t}") for t in TABLES}
    topics = {t: connect_lake.dataset_id(kafka, f"{TOPIC_PREFIX}.public.{t}") for t in TABLES}
    edges = {
        (e["source_dataset_id"], e["target_dataset_id"], e["job_namespace"], e["job_name"])
        for e in connect_lake.tables["dataset_edges"]
        if (e["job_namespace"], e["job_name"]) == JOB
    }
    for table in TABLES:
        assert (tables[table], topics[table], *JOB) in edges
    # Debezium reports each table and each topic in events of their own, with nothing pairing them (no
    # column lineage, no symlink): job-level lineage joins every input of the job to every output, so the
    # crossed pairs (customers -> the orders topic and back) are edges too.
    assert edges == {(t, o, *JOB) for t in tables.values() for o in topics.values()}


def test_change_topic_links_to_the_spark_job_that_reads_it(connect_lake: Scenario) -> None:
    kafka = connect_lake.kafka_namespace()
    orders_topic = connect_lake.dataset_id(kafka, f"{TOPIC_PREFIX}.public.orders")
    orders_table = connect_lake.dataset_id(connect_lake.pg_namespace, f"{DATABASE}.public.orders")
    edges = connect_lake.tables["dataset_edges"]
    # The Spark listener names the topic as Debezium does (kafka://<first bootstrap server>, the topic): one
    # dataset, written by the connector and read by the Spark job's runs.
    spark_out = {
        e["target_dataset_id"]
        for e in edges
        if e["source_dataset_id"] == orders_topic and e["job_namespace"] == SPARK_JOB[0]
    }
    assert spark_out, [e for e in edges if e["job_namespace"] == SPARK_JOB[0]]
    names = {d["dataset_id"]: d["name"] for d in connect_lake.tables["datasets"]}
    assert {names[d].rstrip("/").rsplit("/", 2)[-2:] == ["db", "orders_latest"] for d in spark_out} == {True}
    # So the path runs PostgreSQL table -> change topic -> Iceberg table, two jobs.
    assert any(
        e["source_dataset_id"] == orders_table and e["target_dataset_id"] == orders_topic for e in edges
    )
    readers = {(e["job_namespace"], e["job_name"]) for e in edges if e["source_dataset_id"] == orders_topic}
    assert JOB not in readers and {ns for ns, _ in readers} == {SPARK_JOB[0]}
