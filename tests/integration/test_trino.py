"""Trino, Spark SQL and pyiceberg give the same answers on the cluster stack's lake (REST catalog + S3 store).

The module builds a lake of its own on the session's stack (namespaces ``trino_raw`` and ``trino_lineage``,
so the other cluster tests' ``raw``/``lineage`` tables are left alone): the lab's events and a stuck run are
ingested by a spark-submitted job in batches of 10 offsets (so raw.events has a history to travel in) and
built by another. Trino (lineage.cluster.trino, from ``make trino-setup``'s pinned artifacts) starts
while the jobs run. The questions of tests/integration/test_sql.py (counts of every table, runs x run_io, a
column's upstream, a time-travel read, zoned timestamps, lists of structs and a map) are asked through
Trino's HTTP protocol, through Spark SQL (one spark-submitted application, tests/fixtures/spark_answers.py)
and, where it can answer, through pyiceberg; the answers are compared value for value after the same
normalisation (test_sql's: values as ``lineage sql --format json`` writes them).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lineage.cli.sql import plain
from lineage.cluster.trino import TrinoOnStack, execute, json_rows
from lineage.io.catalog import open_catalog
from lineage.io.local_kafka import LocalKafka, create_topic
from lineage.io.publish import publish_raw
from lineage.settings import Settings
from tests.fixtures.cluster import REPO, Cluster, free_ports
from tests.fixtures.pipeline import stuck_run_events
from tests.integration.test_ingest import publish_lab
from tests.integration.test_sql import COLUMN_UPSTREAM, JOIN, counts_sql, unordered

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

NOW_ARG = "2026-11-22T12:00:00Z"
RAW, LINEAGE = "trino_raw", "trino_lineage"
SPARK_ANSWERS = REPO / "tests" / "fixtures" / "spark_answers.py"


def on_lake(sql: str) -> str:
    """test_sql's SQL (catalog ``lab``, namespaces raw/lineage) on this module's lake."""
    sql = sql.replace("lab.lineage.", f"lake.{LINEAGE}.").replace("lab.raw.", f"lake.{RAW}.")
    return sql.replace(" FROM lab.", " FROM lake.")  # counts_sql's, given this lake's namespaces


def trino_rows(url: str, sql: str) -> list[dict[str, Any]]:
    """Trino's answer, each value as ``lineage sql --format json`` writes it (lineage.cluster.trino)."""
    return json_rows(*execute(url, sql))


def iceberg_rows(arrow: Any) -> list[dict[str, Any]]:
    return [plain(row, for_json=True) for row in arrow.to_pylist()]


# -- the lake, Trino, and Spark's answers ---------------------------------------------------------------
@dataclass
class TrinoLake:
    settings: Settings
    trino_url: str
    trino_startup_s: float
    first_events_ms: int  # when raw.events' first snapshot (the first micro-batch) was committed
    first_events_snapshot: int  # its id
    tables: list[str]
    spark: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def _first_batch(table: Any) -> Any:
    """The first snapshot of ``table`` holding some but not all of its rows (a batch of only malformed
    messages adds none to raw.events)."""
    total = table.scan().count()
    for snapshot in table.metadata.snapshots:
        records = int((snapshot.summary or {}).get("total-records", "0"))
        if 0 < records < total:
            return snapshot
    return table.metadata.snapshots[0]


def _submit(cluster: Cluster, job: str, *args: str, **env: str) -> None:
    submitted = cluster.run(job, *args, timeout=900, **env)
    assert submitted.returncode == 0, f"{job}:\n{submitted.output[-4000:]}"


def _questions(lake: TrinoLake) -> dict[str, str]:
    """Every question in Spark's dialect (Trino's where it differs: :func:`_trino_questions`)."""
    ms, snapshot = lake.first_events_ms, lake.first_events_snapshot
    return {
        "counts": on_lake(counts_sql(lake.tables)),
        "join": on_lake(JOIN),
        "column_upstream": on_lake(COLUMN_UPSTREAM),
        "events_at": f"SELECT count(*) AS n FROM lake.{RAW}.events TIMESTAMP AS OF timestamp_millis({ms})",
        "events_then": f"SELECT count(*) AS n FROM lake.{RAW}.events VERSION AS OF {snapshot}",
        "column_edges": f"SELECT * FROM lake.{LINEAGE}.column_edges",
        "datasets": f"SELECT * FROM lake.{LINEAGE}.datasets",
        "tag_map": (
            "SELECT run_id, started_at, last_event_at, tags, "
            "map_from_entries(transform(tags, t -> struct(t.key AS k, t.value AS v))) AS tag_map "
            f"FROM lake.{LINEAGE}.runs WHERE size(tags) > 0"
        ),
    }


def _trino_questions(lake: TrinoLake) -> dict[str, str]:
    at = datetime.fromtimestamp(lake.first_events_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    questions = _questions(lake)
    return {
        **questions,
        "events_at": (
            f"SELECT count(*) AS n FROM lake.{RAW}.events FOR TIMESTAMP AS OF TIMESTAMP '{at} UTC'"
        ),
        "events_then": (
            f"SELECT count(*) AS n FROM lake.{RAW}.events FOR VERSION AS OF {lake.first_events_snapshot}"
        ),
        "tag_map": (
            "SELECT run_id, started_at, last_event_at, tags, "
            "map_from_entries(transform(tags, t -> ROW(t.key, t.value))) AS tag_map "
            f"FROM lake.{LINEAGE}.runs WHERE cardinality(tags) > 0"
        ),
    }


@pytest.fixture(scope="module")
def aws_env(cluster: Cluster) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in cluster.stack.credentials().env().items():
            patch.setenv(key, value)  # pyiceberg in this process reads the store like the CLI
        yield


@pytest.fixture(scope="module")
def trino_lake(
    cluster: Cluster, kafka_broker: LocalKafka, aws_env: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrinoLake]:
    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp("trino")
    trino = TrinoOnStack(cluster.stack, port=free_ports(1)[0])
    service = trino.launch()  # its ~50 s start-up overlaps the jobs
    try:
        topic = f"trino.{uuid.uuid4().hex[:8]}"
        create_topic(kafka_broker.bootstrap_servers, topic, 3, kafka_broker.max_message_bytes)
        env = {
            "LINEAGE__KAFKA__TOPIC": topic,
            "LINEAGE__INGEST__CHECKPOINT": f"s3a://{cluster.stack.settings.bucket}/checkpoints/{topic}",
            "LINEAGE__CATALOG__RAW_NAMESPACE": RAW,
            "LINEAGE__CATALOG__LINEAGE_NAMESPACE": LINEAGE,
        }
        settings = cluster.settings(**env)
        # The lab's events and a run that stays stuck, ingested in batches of 10 offsets (so raw.events has
        # a history to travel in), then built.
        publish_lab(kafka_broker, topic)
        batch = [(b"lab", e) for e in stuck_run_events(str(uuid.uuid4()))]
        publish_raw(kafka_broker.bootstrap_servers, topic, batch, kafka_broker.max_message_bytes)
        _submit(
            cluster,
            "ingest",
            "--trigger",
            "availableNow",
            LINEAGE__INGEST__MAX_OFFSETS_PER_TRIGGER="10",
            **env,
        )
        timings["ingest"] = time.monotonic() - started
        mark = time.monotonic()
        _submit(cluster, "build", "--now", NOW_ARG, **env)
        timings["build"] = time.monotonic() - mark
        catalog = open_catalog(settings.catalog)
        first = _first_batch(catalog.load_table((RAW, "events")))
        mark = time.monotonic()
        trino.wait_ready(service, mark + 300)
        trino_startup = trino.reported_startup_s() or 0.0  # as the server logs it
        tables = sorted(f"{ns}.{name}" for ns in (RAW, LINEAGE) for _, name in catalog.list_tables(ns))
        lake = TrinoLake(
            settings, trino.url, trino_startup, first.timestamp_ms, first.snapshot_id, tables, timings=timings
        )
        # Spark SQL's answers: one application on the cluster.
        questions, answers = work / "questions.json", work / "answers.json"
        questions.write_text(json.dumps(_questions(lake)))
        mark = time.monotonic()
        # The jobs' spark-submit command line with our script in place of the build job's.
        command = [*cluster.command("build", **env)[:-1], str(SPARK_ANSWERS), str(questions), str(answers)]
        done = subprocess.run(
            command, cwd=REPO, env=cluster.env(**env), capture_output=True, text=True, timeout=900
        )
        # Spark's own log lines start with the date: the rest (a Python traceback) says what failed.
        said = [line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("26/")]
        assert done.returncode == 0, "\n".join(said[-80:])
        lake.spark = json.loads(answers.read_text())
        failed = {k: v for k, v in lake.spark.items() if isinstance(v, dict)}
        assert not failed, f"Spark SQL failed: {failed}"
        timings["spark answers (one application)"] = time.monotonic() - mark
        print(
            f"\ntrino lake: {time.monotonic() - started:.0f} s; "
            f"trino start-up {trino_startup:.1f} s (its log); "
            + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
        )
        yield lake
        print("\n" + ", ".join(f"{k} {v:.1f} s" for k, v in lake.timings.items()))
    finally:
        trino.stop()


def _ask(lake: TrinoLake, name: str) -> list[dict[str, Any]]:
    started = time.monotonic()
    rows = trino_rows(lake.trino_url, _trino_questions(lake)[name])
    lake.timings[f"trino {name}"] = time.monotonic() - started
    return rows


def test_trino_runs_from_the_pinned_artifacts_on_loopback(trino_lake: TrinoLake, cluster: Cluster) -> None:
    from tests.fixtures.cluster import listening_addresses

    port = int(trino_lake.trino_url.rsplit(":", 1)[1])
    assert listening_addresses(port) == {"127.0.0.1"}
    version = trino_rows(trino_lake.trino_url, "SELECT version() AS v")[0]["v"]
    pinned = (REPO / "conf/maven/pom.xml").read_text().split("<trino.version>", 1)[1].split("<", 1)[0]
    assert version == pinned
    schemas = {r["Schema"] for r in trino_rows(trino_lake.trino_url, "SHOW SCHEMAS FROM lake")}
    assert {RAW, LINEAGE} <= schemas


def test_counts_of_every_table(trino_lake: TrinoLake) -> None:
    lake = trino_lake
    in_trino = {
        f"{ns}.{r['Table']}"
        for ns in (RAW, LINEAGE)
        for r in trino_rows(lake.trino_url, f"SHOW TABLES FROM lake.{ns}")
    }
    assert sorted(in_trino) == lake.tables
    assert {f"{RAW}.events", f"{LINEAGE}.runs", f"{LINEAGE}.run_io", f"{LINEAGE}.column_edges"} <= in_trino
    answer = _ask(lake, "counts")
    assert unordered(answer) == unordered(lake.spark["counts"])
    catalog = open_catalog(lake.settings.catalog)
    in_pyiceberg = {t: catalog.load_table(t).scan().count() for t in lake.tables}
    assert {r["table_name"]: r["n"] for r in answer} == in_pyiceberg
    assert in_pyiceberg[f"{LINEAGE}.runs"] > 0


def test_a_join_of_runs_with_their_datasets(trino_lake: TrinoLake) -> None:
    answer = _ask(trino_lake, "join")
    assert unordered(answer) == unordered(trino_lake.spark["join"])
    jobs = {(r["job_name"], r["direction"]) for r in answer}
    assert ("supplier_stats_app.overwrite_by_expression_default_supplier_stats", "input") in jobs


def test_a_column_lineage_question(trino_lake: TrinoLake) -> None:
    answer = _ask(trino_lake, "column_upstream")
    assert unordered(answer) == unordered(trino_lake.spark["column_upstream"])
    assert ("default.db/orders", "price") in {(r["source_name"], r["source_field"]) for r in answer}


def test_time_travel_reads_the_snapshot_current_then(trino_lake: TrinoLake) -> None:
    """raw.events as its first micro-batch left it: by snapshot id and by commit time."""
    lake = trino_lake
    events = open_catalog(lake.settings.catalog).load_table((RAW, "events"))
    assert len(events.metadata.snapshots) > 1
    then = events.scan(snapshot_id=lake.first_events_snapshot).count()
    at = events.snapshot_as_of_timestamp(lake.first_events_ms)
    assert at is not None and at.snapshot_id == lake.first_events_snapshot
    for name in ("events_then", "events_at"):
        answer = _ask(lake, name)
        assert answer == lake.spark[name] == [{"n": then}], name
    assert 0 < then < events.scan().count()


def test_zoned_timestamps_nested_lists_of_structs_and_maps(trino_lake: TrinoLake) -> None:
    lake = trino_lake
    catalog = open_catalog(lake.settings.catalog)
    for name in ("column_edges", "datasets"):
        answer = _ask(lake, name)
        assert answer and unordered(answer) == unordered(lake.spark[name]), name
        arrow = catalog.load_table((LINEAGE, name)).scan().to_arrow()
        # pyiceberg reads a null list column as an empty list where Spark and Trino read null (seen on
        # lineage.datasets' tags): compared with Trino's nulls of list columns made empty, and counted.
        lists = [f.name for f in arrow.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)]
        nulls = sum(1 for row in answer for c in lists if row.get(c) is None)
        as_pyiceberg = [{k: [] if k in lists and v is None else v for k, v in r.items()} for r in answer]
        assert unordered(iceberg_rows(arrow)) == unordered(as_pyiceberg), f"{name}: pyiceberg"
        print(f"\n{name}: {len(answer)} rows, {nulls} null lists that pyiceberg reads as empty")
    tagged = _ask(lake, "tag_map")
    assert tagged and unordered(tagged) == unordered(lake.spark["tag_map"])
    sample = next(r for r in tagged if r["started_at"])
    assert sample["started_at"].endswith("Z")
    assert isinstance(sample["tag_map"], dict) and isinstance(sample["tags"][0], dict)


def test_the_catalog_file_for_a_teams_own_trino(trino_lake: TrinoLake, cluster: Cluster) -> None:
    """The catalog file the server runs with is the one docs/deployment.md shows: no keys in it."""
    text = (cluster.stack.root / "trino" / "etc" / "catalog" / "lake.properties").read_text()
    assert (
        "iceberg.catalog.type=rest" in text
        and f"iceberg.rest-catalog.uri={cluster.stack.catalog_uri}" in text
    )
    assert "s3.aws-access-key=${ENV:AWS_ACCESS_KEY_ID}" in text
    assert cluster.stack.credentials().secret_access_key not in text
    assert Path(cluster.stack.root / "trino" / "etc" / "config.properties").is_file()
