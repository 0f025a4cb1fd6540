"""Our own jobs as OpenLineage producers: what lands in lake.lineage.* about them, and failing transports."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lineage.instrument import BUILD_COLUMNS
from tests.fixtures.pipeline import PARENT_ID, Pipeline

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
OURS = "lineage-lakehouse"


def lineage_table(spark: SparkSession, pipeline: Pipeline, name: str) -> list[dict]:
    catalog = pipeline.settings.catalog
    return [
        r.asDict(recursive=True)
        for r in spark.table(catalog.table(catalog.lineage_namespace, name)).collect()
    ]


def test_our_jobs_and_their_iceberg_tables_are_modelled(spark: SparkSession, lab_pipeline: Pipeline) -> None:
    jobs = {(j["job_namespace"], j["job_name"]): j for j in lineage_table(spark, lab_pipeline, "jobs")}
    assert jobs[(OURS, "ingest_events")]["processing_type"] == "STREAMING"
    assert jobs[(OURS, "build_lineage")]["processing_type"] == "BATCH"
    assert jobs[(OURS, "build_lineage")]["integration"] == "LINEAGE_LAKEHOUSE"

    datasets = {d["dataset_id"]: d for d in lineage_table(spark, lab_pipeline, "datasets")}
    edges = {
        (
            e["job_name"],
            e["direction"],
            datasets[e["dataset_id"]]["namespace"],
            datasets[e["dataset_id"]]["name"],
        )
        for e in lineage_table(spark, lab_pipeline, "job_edges")
        if e["job_namespace"] == OURS
    }
    settings = lab_pipeline.settings
    warehouse = str(settings.catalog.warehouse)
    kafka = f"kafka://{settings.kafka.bootstrap_servers}"
    assert ("ingest_events", "input", kafka, settings.kafka.topic) in edges
    ingest_out = {name for job, d, ns, name in edges if job == "ingest_events" and d == "output"}
    assert ingest_out == {f"{warehouse}/raw/events", f"{warehouse}/raw/rejected"}
    assert ("build_lineage", "input", "file", f"{warehouse}/raw/events") in edges
    build_out = {
        name.rsplit("/", 1)[1] for job, d, ns, name in edges if job == "build_lineage" and d == "output"
    }
    assert {"runs", "jobs", "datasets", "job_edges", "column_edges", "build_state"} <= build_out

    # The catalog table name is a symlink of the location-named dataset: one dataset, two names.
    aliases = {
        (a["alias_name"], a["dataset_name"]) for a in lineage_table(spark, lab_pipeline, "dataset_aliases")
    }
    assert ("raw.events", f"{warehouse}/raw/events") in aliases

    # Column lineage of what we write: raw.events.event_json is the topic's value, unchanged.
    name = {i: d["name"] for i, d in datasets.items()}
    column_edges = {
        (name[c["source_dataset_id"]], c["source_field"], name[c["target_dataset_id"]], c["target_field"])
        for c in lineage_table(spark, lab_pipeline, "column_edges")
        if c["job_namespace"] == OURS
    }
    assert (settings.kafka.topic, "value", f"{warehouse}/raw/events", "event_json") in column_edges
    assert (f"{warehouse}/raw/events", "run_id", f"{warehouse}/lineage/runs", "run_id") in column_edges

    # Every column the declared column lineage names exists in the table it describes.
    catalog = settings.catalog
    for table, mapping in BUILD_COLUMNS.items():
        names = set(spark.table(catalog.table(catalog.lineage_namespace, table)).columns)
        assert set(mapping) <= names, (table, sorted(set(mapping) - names))

    runs = [r for r in lineage_table(spark, lab_pipeline, "runs") if r["job_namespace"] == OURS]
    assert {r["parent_run_id"] for r in runs} == {PARENT_ID.rsplit("/", 1)[1]}
    assert {r["reported_state"] for r in runs if r["job_name"] == "build_lineage"} >= {"COMPLETE"}


def test_streaming_ingestion_sends_running_events_with_progress(
    spark: SparkSession, lab_pipeline: Pipeline
) -> None:
    catalog = lab_pipeline.settings.catalog
    running = (
        spark.table(catalog.events_table)
        .where((F.col("job_namespace") == OURS) & (F.col("job_name") == "ingest_events"))
        .where(F.col("event_type").isin("RUNNING", "COMPLETE"))
        .select("event_type", "event_json")
        .collect()
    )
    assert "RUNNING" in {r["event_type"] for r in running}
    complete = [json.loads(r["event_json"]) for r in running if r["event_type"] == "COMPLETE"]
    progress = complete[0]["run"]["facets"]["lineageLakehouse_progress"]
    assert progress["landed"] > 0 and progress["batches"] >= 1
    stats = {
        o["name"].rsplit("/", 1)[1]: o["outputFacets"]["outputStatistics"]["rowCount"]
        for o in complete[0]["outputs"]
    }
    assert stats["events"] == progress["landed"]
    assert stats["rejected"] == progress["rejected"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_job_with_an_unreachable_transport_still_succeeds(lab_pipeline: Pipeline, tmp_path: Path) -> None:
    yml = tmp_path / "openlineage.yml"
    yml.write_text(f"transport:\n  type: http\n  url: http://127.0.0.1:{closed_port()}\n  timeout: 1\n")
    env = {
        **lab_pipeline.env,
        "OPENLINEAGE_CONFIG": str(yml),
        "LINEAGE__OPENLINEAGE__EMIT_TIMEOUT_SECONDS": "5",
    }
    env["LINEAGE__SPARK__MASTER"] = "local[1]"
    env["LINEAGE__BUILD__ALIAS_RULES"] = json.dumps({"kafka://broker:9092": "kafka://kafka-1:19092"})
    done = subprocess.run(
        [sys.executable, "jobs/build_lineage.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if "could not be emitted" in line]
    assert len(warnings) == 1, done.stderr[-3000:]
    assert "lineage-lakehouse/build_lineage" in warnings[0]
    assert "done:" in done.stderr  # the build itself reported its result
