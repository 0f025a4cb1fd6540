"""The lineage build on events that went through the real pipeline (Kafka -> ingestion -> Iceberg)."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openlineage.client.serde import Serde
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.batch.build import (
    BUILD_TABLES,
    FAULT_ENV,
    FAULT_TERM_ENV,
    RANGE,
    STATE_TABLE,
    BuildError,
    BuildResult,
    build_lineage,
    up_to_date,
)
from lineage.batch.maintain import maintain_lake
from lineage.demo.events import lab_events
from lineage.ingest.stream import run_ingest
from lineage.io import lake
from lineage.io.catalog import open_catalog
from lineage.io.lease import LEASE_TABLE, LakeBusy, Lease, writer_lease
from lineage.io.publish import publish_raw
from lineage.query.diff import Window, diff
from lineage.query.pin import read_snapshot
from lineage.query.store import LineageStore
from lineage.settings import MaintainSettings, Settings, TagRule, TagSettings
from lineage.stopping import JobStopped, stop_on_signals
from tests.table_rows import TableRows, assert_same_rows, collect_rows
from tests.unit.column_events import column_lineage, direct, input_field
from tests.unit.model_events import at, dataset, iso, run_event, run_id

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
ALL_TABLES = BUILD_TABLES


def send(settings: Settings, events: list[bytes]) -> None:
    publish_raw(
        settings.kafka.bootstrap_servers,
        settings.kafka.topic,
        [(b"lab", e) for e in events],
        settings.kafka.max_message_bytes,
    )


def lab_json() -> list[bytes]:
    return [Serde.to_json(e.event).encode() for e in lab_events()]


def table(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    frame = spark.table(settings.catalog.table(settings.catalog.lineage_namespace, name))
    # Which build range extracted a row is bookkeeping, not lineage.
    return frame.drop(RANGE) if RANGE in frame.columns else frame


def frozen(spark: SparkSession, settings: Settings) -> dict[str, TableRows]:
    """Every build table's rows, collected (later builds replace the tables)."""
    return {name: collect_rows(table(spark, settings, name)) for name in ALL_TABLES}


def assert_same_tables(expected: dict[str, TableRows], actual: dict[str, TableRows]) -> None:
    assert actual.keys() == expected.keys()
    for name in expected:
        assert_same_rows(name, actual[name], expected[name])


def test_lab_scenario_lost_run_merged_dataset_and_chain_then_a_build_without_new_events(
    spark: SparkSession, own_lake: Settings
) -> None:
    send(own_lake, lab_json())
    run_ingest(spark, own_lake, trigger="availableNow")

    result = build_lineage(spark, own_lake, now=NOW)

    assert (result.mode, result.new_events) == ("full", 31)  # the lab events
    catalog = open_catalog(own_lake.catalog)
    runs = {r["job_name"]: r for r in catalog.load_table("lineage.runs").scan().to_arrow().to_pylist()}
    stuck = runs["supplier-stats"]
    assert (stuck["reported_state"], stuck["inferred_state"]) == ("RUNNING", "LOST")
    assert "3 x median heartbeat 60 s" in stuck["liveness_reason"]
    aliases = catalog.load_table("lineage.dataset_aliases").scan().to_arrow().to_pylist()
    canonical = {
        (a["alias_namespace"], a["alias_name"]): (a["dataset_namespace"], a["dataset_name"]) for a in aliases
    }
    iceberg_orders = ("s3://warehouse", "default.db/orders")
    assert canonical[("s3a://warehouse", "default.db/orders/")] == iceberg_orders  # Spark's physical name
    assert canonical[("s3://warehouse", "default.db/orders")] == iceberg_orders  # Flink 2.x output
    assert canonical[("hive://hive-metastore:9083", "default.orders")] == iceberg_orders  # catalog symlink
    assert canonical[("kafka://broker:9092", "orders")] == ("kafka://kafka-1:19092", "orders")  # alias rule
    ids = {
        (d["namespace"], d["name"]): d["dataset_id"]
        for d in catalog.load_table("lineage.datasets").scan().to_arrow().to_pylist()
    }
    edges = {
        (e["source_dataset_id"], e["target_dataset_id"])
        for e in catalog.load_table("lineage.dataset_edges").scan().to_arrow().to_pylist()
    }
    topic, table_id, summary = (
        ids[("kafka://kafka-1:19092", "orders")],
        ids[iceberg_orders],
        ids[("s3://warehouse", "default.db/supplier_stats")],
    )
    assert {(topic, table_id), (table_id, summary)} <= edges
    paths = catalog.load_table("lineage.column_paths").scan().to_arrow().to_pylist()
    total_price = {
        (p["source_dataset_id"], p["source_field"]): (p["hops"], list(p["jobs"]), p["all_direct"])
        for p in paths
        if (p["target_dataset_id"], p["target_field"]) == (summary, "total_price")
    }
    overwrite = "supplier_stats_app.overwrite_by_expression_default_supplier_stats"
    assert total_price[(table_id, "price")] == (1, [overwrite], True)
    assert total_price[(topic, "price")] == (2, ["iceberg-ingestion", overwrite], True)
    column_edges = catalog.load_table("lineage.column_edges").scan().to_arrow().to_pylist()
    group_by = [e for e in column_edges if e["target_dataset_id"] == summary and e["scope"] == "dataset"]
    assert {(e["source_field"], tuple(e["subtypes"])) for e in group_by} == {
        ("supplier", ("GROUP_BY",)),
        ("bid_time", ("FILTER", "GROUP_BY")),
    }

    # Nothing new since: the next build commits nothing, whatever the clock says, and knows it from the
    # metadata alone (not even the lease is taken).
    assert up_to_date(own_lake) == result.raw_snapshot_id
    before = {
        n: catalog.load_table(("lineage", n)).current_snapshot().snapshot_id
        for n in (*ALL_TABLES, LEASE_TABLE)
    }
    assert build_lineage(spark, own_lake, now=datetime(2026, 12, 1, tzinfo=UTC)).mode == "noop"
    catalog = open_catalog(own_lake.catalog)
    assert {
        n: catalog.load_table(("lineage", n)).current_snapshot().snapshot_id
        for n in (*ALL_TABLES, LEASE_TABLE)
    } == before


def _files(spark: SparkSession, table: str) -> list[str]:
    return [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.files").collect()]


def test_a_range_is_replaced_whatever_compaction_merged(spark: SparkSession, own_lake: Settings) -> None:
    """The build writes each range of extracted rows with ``overwrite_where`` (re-runnable). Compaction
    merges files of several ranges; an overwrite by filter is then refused for a file whose statistics
    span the range (the soak's 7th build died of it). Both a first write and a re-run go through."""
    catalog = own_lake.catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.scratch")
    name = f"{catalog}.scratch.ranges"

    def rows(value: int, payload: str) -> DataFrame:
        return spark.createDataFrame([(value, payload), (value, payload + "+")], "r bigint, payload string")

    def contents() -> list[tuple[int, str]]:
        return sorted((row["r"], row["payload"]) for row in spark.table(name).collect())

    def compact() -> None:
        spark.sql(
            f"CALL {catalog}.system.rewrite_data_files(table => 'scratch.ranges', "
            "options => map('min-input-files', '2', 'delete-file-threshold', '1'))"
        )
        files = spark.sql(f"SELECT lower_bounds, upper_bounds FROM {name}.files").collect()
        assert len(files) == 1, files

    lake.replace_table(rows(1, "a"), name)
    lake.append(rows(100, "b"), name)
    compact()  # one file, r from 1 to 100
    with pytest.raises(Exception, match="some, but not all, rows match filter"):
        rows(50, "c").writeTo(name).overwrite(F.col("r") == 50)

    lake.overwrite_where(rows(50, "c"), name, "r", 50)
    lake.overwrite_where(rows(50, "d"), name, "r", 50)  # a re-run: replaced, not added
    compact()  # the re-run's rows merged with the others
    lake.overwrite_where(rows(50, "e"), name, "r", 50)

    assert contents() == [(1, "a"), (1, "a+"), (50, "e"), (50, "e+"), (100, "b"), (100, "b+")]


def test_incremental_builds_equal_a_full_refresh_across_maintenance(
    spark: SparkSession, own_lake: Settings
) -> None:
    """Compaction, snapshot expiry and retention of raw.events between two builds: the incremental build and
    a re-extraction give the same tables, and the model keeps the retired events."""
    settings = own_lake.model_copy(
        update={
            "maintain": MaintainSettings(
                raw_retention_days=1,
                snapshot_max_age_hours=1e-6,
                retain_last_snapshots=1,
                compact_min_input_files=2,
            )
        }
    )
    raw = settings.catalog.events_table
    events = lab_json()
    first, rest = events[:11], events[11:]
    for part in (first[:5], first[5:]):  # two appends: small files to compact
        send(settings, part)
        run_ingest(spark, settings, trigger="availableNow")
    assert build_lineage(spark, settings, now=NOW).mode == "full"
    # The rest arrives shuffled, with duplicates, and with a late RUNNING for a finished run.
    late = [e for e in events if b'"RUNNING"' in e][:2]
    tail = rest + rest[:5] + late
    random.Random(7).shuffle(tail)
    for part in (tail[:9], tail[9:]):
        send(settings, part)
        run_ingest(spark, settings, trigger="availableNow")
    data_dir = Path(_files(spark, raw)[0].removeprefix("file:")).parent
    orphan = data_dir / "left-by-a-killed-writer.parquet"
    orphan.write_bytes(b"PAR1")
    four_days_ago = datetime.now(UTC).timestamp() - 4 * 86400
    os.utime(orphan, (four_days_ago, four_days_ago))

    snapshots = f"SELECT snapshot_id FROM {raw}.snapshots ORDER BY committed_at"
    before = [r[0] for r in spark.sql(snapshots).collect()]
    built = table(spark, settings, "build_state").where("mode = 'full'").first()["raw_snapshot_id"]

    report = {t.table: t for t in maintain_lake(spark, settings).tables}

    # Every lab event is days old; only the 11 the first build extracted are retired, not the new ones.
    assert report[raw].retired_rows == 11
    assert spark.table(raw).count() == len(tail)
    # Compacted; every snapshot older than the build's expired, the build's and the newer ones kept.
    assert report[raw].rewritten_files == 2 and report[raw].files_after == 1
    after = {r[0] for r in spark.sql(snapshots).collect()}
    assert before.index(built) == 1 and before[0] not in after and set(before[1:]) <= after
    assert report[raw].orphan_files == 1 and not orphan.exists()
    assert [name for name, rows in read_compacted(settings) if rows] == ["column_tags"]
    assert build_lineage(spark, settings, now=NOW).mode == "incremental"
    incremental = frozen(spark, settings)
    assert len(incremental["event_facts"]) == len(events) + 5 + 2
    assert len(incremental["runs"]) == 12  # the lab's runs
    # The incremental build's MERGE left position deletes in runs; maintenance's compaction folds them in.
    spark.sql(
        f"CALL {settings.catalog.name}.system.rewrite_data_files(table => 'lineage.runs', options => "
        "map('min-input-files', '2', 'delete-file-threshold', '1', 'remove-dangling-deletes', 'true'))"
    )
    assert [name for name, rows in read_compacted(settings) if rows] == ["runs"]

    # A re-extraction rebuilds everything from the raw events left plus the carried-over extracted rows of
    # the retired ones. (A full refresh from the stored facts equals an incremental build in the late-symlink
    # test below; after maintenance it reads the same facts, so it is not run again here.)
    assert build_lineage(spark, settings, re_extract=True, now=NOW).mode == "re-extract"
    assert_same_tables(incremental, frozen(spark, settings))

    # Snapshots expired behind the build's back: one line says what to run (the re-extraction it names keeps
    # retired events, copy by copy: tests/unit/test_retention_carry_over.py).
    send(settings, late)
    run_ingest(spark, settings, trigger="availableNow")
    spark.sql(
        f"CALL {settings.catalog.name}.system.expire_snapshots(table => 'raw.events', "
        "older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1)"
    )
    with pytest.raises(BuildError, match="make build-reextract"):
        build_lineage(spark, settings, now=NOW)


def read_compacted(settings: Settings) -> list[tuple[str, int]]:
    """The lineage tables a question reads at a later snapshot than the latest finished build's, with their
    rows: those whose files maintenance has rewritten since (lineage.query.pin.read_snapshot). Each is
    checked: a rewrite only (Iceberg's ``replace``), and the same rows as at the build's snapshot."""
    store = LineageStore(settings)
    assert store.pinned_ms is not None
    found = []
    for _, name in open_catalog(settings.catalog).list_tables(settings.catalog.lineage_namespace):
        loaded = store.table(name)
        at_build = loaded.snapshot_as_of_timestamp(store.pinned_ms, inclusive=True)
        read = read_snapshot(loaded, store.pinned_ms)
        if at_build is None or read.snapshot_id == at_build.snapshot_id:
            continue
        assert read.summary.operation.value == "replace", name
        built = loaded.scan(snapshot_id=at_build.snapshot_id).to_arrow().to_pylist()
        assert sorted(map(repr, store.arrow(name).to_pylist())) == sorted(map(repr, built)), name
        found.append((name, len(built)))
    return found


TOPIC, ORDERS, HIVE_ORDERS = (
    ("kafka://k:9092", "orders"),
    ("s3://wh", "orders"),
    ("hive://meta:9083", "db.orders"),
)
REPORT, FINAL = ("s3://wh", "report"), ("s3://wh", "final")
OLD_NAME, NEW_NAME = ("s3://lake", "archive/orders_v1"), ("s3://lake", "archive/orders")


def _checked(ds: dict, *assertions: tuple[str, bool, str | None]) -> dict:
    """``ds`` with a data-quality assertions input facet of (assertion, success, column) entries."""
    entries = [{"assertion": a, "success": ok, **({"column": c} if c else {})} for a, ok, c in assertions]
    ds["inputFacets"] = {"dataQualityAssertions": {"assertions": entries}}
    return ds


def _field_tags(ds: dict, *entries: tuple[str, str]) -> dict:
    """``ds`` with a tags facet of (field, key) entries."""
    ds["facets"]["tags"] = {
        "tags": [{"key": k, "value": "true", "source": "USER", "field": f} for f, k in entries]
    }
    return ds


# [tags] of the merge scenario: ``total`` columns are finance data; a rule that matches nothing is reported.
MERGE_TAGS = TagSettings(
    rules={
        "totals": TagRule(pattern="^total$", tag="finance"),
        "nothing": TagRule(pattern="^ssn$", tag="pii"),
    }
)


def _merge_scenario() -> tuple[list[dict], list[dict]]:
    """Two builds' events. The second brings a symlink that merges two datasets known since the first (and
    changes the canonical name of one: the Hive name sorts first), the COMPLETE of a run whose START came
    in the first, a replayed event and a late RUNNING of a finished run. Quality results: a failed check and
    the metrics of the dataset the merge takes away, and a check and a test (the test run facet) the
    straddling run passes at its START and fails at its COMPLETE. Column tags: the topic's price is ``pii``
    (it flows to the merged orders and stops at the report's AGGREGATION); the catalog run tags the orders'
    price ``certified`` (a seed that changes in the incremental build)."""
    ingest = run_event(
        "COMPLETE",
        at(10),
        run_id(1),
        ("lab", "ingest"),
        inputs=[_field_tags(dataset(*TOPIC, fields=[("price", "double")]), ("price", "pii"))],
        outputs=[
            dataset(
                *ORDERS,
                fields=[("price", "double")],
                column_lineage=column_lineage({"price": [input_field(TOPIC, "price", direct("IDENTITY"))]}),
                version="5001",
            )
        ],
    )
    report = run_event(
        "COMPLETE",
        at(20),
        run_id(2),
        ("lab", "report"),
        inputs=[dataset(*HIVE_ORDERS, version="5001")],  # the version ingest wrote, by its other name
        outputs=[
            dataset(
                *REPORT,
                column_lineage=column_lineage(
                    {"total": [input_field(HIVE_ORDERS, "price", direct("AGGREGATION"))]}
                ),
            )
        ],
    )
    straddle_start = run_event(
        "START",
        at(30),
        run_id(3),
        ("lab", "final"),
        inputs=[_checked(dataset(*REPORT), ("row_count", True, None))],
        run_facets={"test": {"tests": [{"name": "report_fresh", "status": "pass"}]}},
    )
    checked = _checked(dataset(*ORDERS), ("not_null", False, "price"), ("unique", True, "price"))
    checked["inputFacets"]["dataQualityMetrics"] = {
        "rowCount": 4,
        "columnMetrics": {"price": {"nullCount": 1}},
    }
    check = run_event("COMPLETE", at(12), run_id(12), ("lab", "check"), inputs=[checked])
    archive = run_event("COMPLETE", at(35), run_id(7), ("lab", "archive"), outputs=[dataset(*OLD_NAME)])
    # A parent run with events of its own and a child naming it; the child's COMPLETE in the second part
    # carries no parent facet, so only the child's earlier event says whose child it is.
    parent_start = run_event("START", at(36), run_id(10), ("lab", "pipeline"))
    child_start = run_event(
        "START",
        at(37),
        run_id(11),
        ("lab", "pipeline.step"),
        run_facets={
            "parent": {"run": {"runId": run_id(10)}, "job": {"namespace": "lab", "name": "pipeline"}}
        },
    )
    first = [ingest, check, report, straddle_start, archive, parent_start, child_start]
    catalog = run_event(
        "COMPLETE",
        at(40),
        run_id(4),
        ("lab", "catalog"),
        outputs=[_field_tags(dataset(*ORDERS, symlinks=[HIVE_ORDERS]), ("price", "certified"))],
    )
    straddle_end = run_event(
        "COMPLETE",
        at(50),
        run_id(3),
        ("lab", "final"),
        inputs=[_checked(dataset(*REPORT), ("row_count", False, None))],
        run_facets={"test": {"tests": [{"name": "report_fresh", "status": "fail"}]}},
        outputs=[
            dataset(
                *FINAL,
                column_lineage=column_lineage({"x": [input_field(REPORT, "total", direct("IDENTITY"))]}),
            )
        ],
    )
    late = run_event("RUNNING", at(15), run_id(2), ("lab", "report"))
    # A task whose DAG run never reports itself, declaring the job it runs after; a RENAME of a dataset known
    # since the first build; a run that only DROPs the report.
    task = run_event(
        "COMPLETE",
        at(60),
        run_id(5),
        ("lab", "dag.task"),
        run_facets={
            "parent": {"run": {"runId": run_id(6)}, "job": {"namespace": "lab", "name": "dag"}},
            "jobDependencies": {"upstream": [{"job": {"namespace": "lab", "name": "final"}}]},
        },
    )
    renamed = dataset(*NEW_NAME)
    renamed["facets"]["lifecycleStateChange"] = {
        "lifecycleStateChange": "RENAME",
        "previousIdentifier": {"namespace": OLD_NAME[0], "name": OLD_NAME[1]},
    }
    rename = run_event("COMPLETE", at(70), run_id(8), ("lab", "rename"), outputs=[renamed])
    dropped = dataset(*REPORT)
    dropped["facets"]["lifecycleStateChange"] = {"lifecycleStateChange": "DROP"}
    drop = run_event("COMPLETE", at(80), run_id(9), ("lab", "cleanup"), outputs=[dropped])
    # The replayed event is of a run the second part touches anyway: the merged-away dataset's rows (ingest's
    # output) must be found through the alias change alone.
    child_end = run_event("COMPLETE", at(90), run_id(11), ("lab", "pipeline.step"))
    return first, [straddle_end, late, catalog, straddle_start, task, rename, drop, child_end]


def test_late_symlink_merge_and_straddling_run_equal_a_full_refresh(
    spark: SparkSession, own_lake: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    own_lake = own_lake.model_copy(update={"tags": MERGE_TAGS})
    first, second = _merge_scenario()
    send(own_lake, [json.dumps(e).encode() for e in first])
    run_ingest(spark, own_lake, trigger="availableNow")
    assert build_lineage(spark, own_lake, now=NOW).mode == "full"
    catalog = open_catalog(own_lake.catalog)
    ids_before = {
        (d["namespace"], d["name"]): d["dataset_id"]
        for d in catalog.load_table("lineage.datasets").scan().to_arrow().to_pylist()
    }
    assert ORDERS in ids_before and HIVE_ORDERS in ids_before  # two datasets until the symlink arrives
    send(own_lake, [json.dumps(e).encode() for e in second])
    run_ingest(spark, own_lake, trigger="availableNow")

    result = build_lineage(spark, own_lake, now=NOW)

    assert (result.mode, result.new_events) == ("incremental", 8)
    incremental = frozen(spark, own_lake)
    catalog = open_catalog(own_lake.catalog)
    ids = {
        (d["namespace"], d["name"]): d["dataset_id"]
        for d in catalog.load_table("lineage.datasets").scan().to_arrow().to_pylist()
    }
    assert ORDERS not in ids and ids[HIVE_ORDERS] == ids_before[HIVE_ORDERS]  # one dataset, the Hive name
    gone = ids_before[ORDERS]
    for name in (
        "run_io",
        "quality_results",
        "quality_metrics",
        "job_edges",
        "dataset_summary",
        "column_tags",
    ):
        rows = catalog.load_table(("lineage", name)).scan().to_arrow().to_pylist()
        assert all(r["dataset_id"] != gone for r in rows), name
    quality = catalog.load_table("lineage.quality_results").scan().to_arrow().to_pylist()
    assert {
        (r["run_id"], r["dataset_id"], r["column_name"], r["assertion"], r["success"]) for r in quality
    } == {
        (run_id(12), ids[HIVE_ORDERS], "price", "not_null", False),  # moved to the merged dataset
        (run_id(12), ids[HIVE_ORDERS], "price", "unique", True),
        (run_id(3), ids[REPORT], None, "row_count", False),  # the COMPLETE's report wins over the START's
        (run_id(3), ids[REPORT], None, "report_fresh", False),  # the test run facet, on the run's input
    }
    metrics = catalog.load_table("lineage.quality_metrics").scan().to_arrow().to_pylist()
    assert {
        (r["run_id"], r["dataset_id"], r["column_name"], r["row_count"], r["null_count"]) for r in metrics
    } == {
        (run_id(12), ids[HIVE_ORDERS], None, 4, None),  # moved to the merged dataset
        (run_id(12), ids[HIVE_ORDERS], "price", None, 1),
    }
    io = catalog.load_table("lineage.run_io").scan().to_arrow().to_pylist()
    # The version ingest wrote and report read, both now on the merged dataset.
    assert {(r["run_id"], r["direction"]) for r in io if r["dataset_version"] == "5001"} == {
        (run_id(1), "output"),
        (run_id(2), "input"),
    }
    assert {r["dataset_id"] for r in io if r["dataset_version"] == "5001"} == {ids[HIVE_ORDERS]}
    tagged = catalog.load_table("lineage.column_tags").scan().to_arrow().to_pylist()
    assert {
        (r["dataset_id"], r["field"], r["tag"], r["rule"], r["origin_dataset_id"], r["hops"]) for r in tagged
    } == {
        (ids[TOPIC], "price", "pii", None, ids[TOPIC], 0),
        (
            ids[HIVE_ORDERS],
            "price",
            "pii",
            None,
            ids[TOPIC],
            1,
        ),  # on the merged dataset; not past AGGREGATION
        (ids[HIVE_ORDERS], "price", "certified", None, ids[HIVE_ORDERS], 0),
        (ids[REPORT], "total", "finance", "totals", ids[REPORT], 0),
        (ids[FINAL], "x", "finance", "totals", ids[REPORT], 1),  # along the second build's new edge
    }
    [via] = [r["path"] for r in tagged if r["dataset_id"] == ids[FINAL]]
    assert via == [{"job_namespace": "lab", "job_name": "final", "dataset_id": ids[FINAL], "field": "x"}]
    assert "tag rule nothing" in caplog.text and "tag rule totals" not in caplog.text
    paths = catalog.load_table("lineage.column_paths").scan().to_arrow().to_pylist()
    final_x = {
        (p["source_dataset_id"], p["source_field"]): (p["hops"], list(p["jobs"]))
        for p in paths
        if (p["target_dataset_id"], p["target_field"]) == (ids[FINAL], "x")
    }
    # The merge joins ingest's output to report's input: the topic's price now reaches final.x.
    assert final_x[(ids[TOPIC], "price")] == (3, ["ingest", "report", "final"])
    edges = catalog.load_table("lineage.job_edges").scan().to_arrow().to_pylist()
    straddling = [e for e in edges if e["job_name"] == "final"]
    assert {(e["dataset_id"], e["direction"], e["run_count"]) for e in straddling} == {
        (ids[REPORT], "input", 1),
        (ids[FINAL], "output", 1),
    }

    runs = {r["run_id"]: r for r in catalog.load_table("lineage.runs").scan().to_arrow().to_pylist()}
    dag = runs[run_id(6)]  # known only as the task's parent
    assert (dag["job_name"], dag["reported_state"], dag["inferred_state"]) == ("dag", None, "UNKNOWN")
    assert runs[run_id(5)]["root_run_id"] == run_id(6) and runs[run_id(1)]["root_run_id"] == run_id(1)
    # The parent keeps the row of its own events (a row from its child alone broke the runs MERGE).
    assert (runs[run_id(10)]["reported_state"], runs[run_id(10)]["event_count"]) == ("RUNNING", 1)
    assert (runs[run_id(11)]["reported_state"], runs[run_id(11)]["parent_run_id"]) == ("COMPLETE", run_id(10))
    deps = catalog.load_table("lineage.job_dependencies").scan().to_arrow().to_pylist()
    assert {(d["upstream_job_name"], d["downstream_job_name"], d["source"]) for d in deps} == {
        ("final", "dag.task", "jobDependencies"),
        ("dag", "dag.task", "parent"),
        ("pipeline", "pipeline.step", "parent"),
    }
    aliases = catalog.load_table("lineage.dataset_aliases").scan().to_arrow().to_pylist()
    by_name = {(a["alias_namespace"], a["alias_name"]): a["dataset_id"] for a in aliases}
    assert by_name[OLD_NAME] == by_name[NEW_NAME]  # the rename links both names' history
    summary = catalog.load_table("lineage.dataset_summary").scan().to_arrow().to_pylist()
    [report_summary] = [s for s in summary if s["dataset_id"] == ids[REPORT]]
    assert [j["name"] for j in report_summary["producing_jobs"]] == ["report"]  # cleanup only dropped it

    # What the second round's runs observed against the first's, from the incrementally built tables.
    first_round, second_round = Window(at(0), at(39)), Window(at(39), at(100))
    changes = diff(LineageStore(own_lake), first_round, second_round)
    topic, merged, report, final, renamed = (by_name[n] for n in (TOPIC, ORDERS, REPORT, FINAL, NEW_NAME))
    assert changes.dataset_edges == ([(report, final, "lab", "final")], sorted([
        (topic, merged, "lab", "ingest"), (merged, report, "lab", "report")
    ]))  # fmt: skip
    assert (sorted(changes.writers[0]), sorted(changes.writers[1])) == (
        sorted([("lab", "catalog", merged), ("lab", "final", final), ("lab", "rename", renamed)]),
        sorted([("lab", "ingest", merged), ("lab", "report", report), ("lab", "archive", renamed)]),
    )
    # the final run read the report in both rounds (from its START to its COMPLETE): no change there
    assert ("lab", "final", report, "input") not in changes.job_edges[0] + changes.job_edges[1]
    assert ("lab", "cleanup", report, "output") in changes.job_edges[0]  # dropped it: an edge, no writer
    assert set(changes.column_edges[0]) == {(report, "total", final, "x", "lab", "final")}
    assert set(changes.column_edges[1]) == {
        (topic, "price", merged, "price", "lab", "ingest"),
        (merged, "price", report, "total", "lab", "report"),
    }
    assert changes.schemas == [] and changes.outcomes == []

    assert build_lineage(spark, own_lake, full_refresh=True, now=NOW).mode == "full"
    assert_same_tables(incremental, frozen(spark, own_lake))
    assert diff(LineageStore(own_lake), first_round, second_round) == changes  # the full build's: the same


def test_new_runs_of_known_column_lineage_leave_the_paths_as_they_are(
    spark: SparkSession, own_lake: Settings
) -> None:
    """The same jobs run again with the same column-lineage facets: the edges' run counts and times move,
    no path does, so the build commits nothing to ``column_paths`` and still equals a full refresh."""
    first, second = _merge_scenario()
    send(own_lake, [json.dumps(e).encode() for e in first + second])
    run_ingest(spark, own_lake, trigger="availableNow")
    assert build_lineage(spark, own_lake, now=NOW).mode == "full"
    catalog = open_catalog(own_lake.catalog)
    paths_before = catalog.load_table("lineage.column_paths").current_snapshot()
    with_columns = [e for e in first + second if "columnLineage" in json.dumps(e)]
    assert len(with_columns) == 3  # ingest, report, final
    again = []
    for n, event in enumerate(with_columns):
        rerun = copy.deepcopy(event)
        rerun["run"]["runId"] = run_id(100 + n)
        rerun["eventTime"] = iso(at(1000 + n))
        again.append(rerun)
    send(own_lake, [json.dumps(e).encode() for e in again])
    run_ingest(spark, own_lake, trigger="availableNow")

    assert build_lineage(spark, own_lake, now=NOW).mode == "incremental"

    catalog = open_catalog(own_lake.catalog)
    assert catalog.load_table("lineage.column_paths").current_snapshot() == paths_before
    edges = catalog.load_table("lineage.column_edges").scan().to_arrow().to_pylist()
    assert {e["job_name"]: e["run_count"] for e in edges} == {"ingest": 2, "report": 2, "final": 2}
    incremental = frozen(spark, own_lake)
    assert build_lineage(spark, own_lake, full_refresh=True, now=NOW).mode == "full"
    assert_same_tables(incremental, frozen(spark, own_lake))


def test_a_still_running_run_is_rewritten_only_when_its_deadline_passes_or_its_job_moves(
    spark: SparkSession, own_lake: Settings
) -> None:
    """Liveness without rewriting the past: an incremental build re-merges a still-running run the range
    does not touch only when its deadline (``lost_after``) has passed, its job's median heartbeat gap moved,
    or the liveness settings did; each build still equals a full refresh at its time."""

    def runs() -> dict[str, dict]:
        table_ = open_catalog(own_lake.catalog).load_table("lineage.runs")
        return {r["job_name"]: r for r in table_.scan().to_arrow().to_pylist()}

    def run_row(number: int) -> dict:
        table_ = open_catalog(own_lake.catalog).load_table("lineage.runs")
        return table_.scan(row_filter=f"run_id == '{run_id(number)}'").to_arrow().to_pylist()[0]

    def build(
        events: list[dict], now: datetime, settings: Settings = own_lake
    ) -> tuple[BuildResult, dict[str, dict]]:
        """An incremental build of ``events`` at ``now`` (its result and runs), checked against a full one."""
        send(settings, [json.dumps(e).encode() for e in events])
        run_ingest(spark, settings, trigger="availableNow")
        result = build_lineage(spark, settings, now=now)
        assert result.mode == "incremental"
        rows, incremental = runs(), frozen(spark, settings)
        assert build_lineage(spark, settings, full_refresh=True, now=now).mode == "full"
        assert_same_tables(incremental, frozen(spark, settings))
        return result, rows

    soon, late = ("lab", "stream-soon"), ("lab", "stream-late")
    # No heartbeat history: the 900 s floor. soon's deadline is at(900), late's at(5900).
    first = [run_event("START", at(0), run_id(1), soon), run_event("START", at(5000), run_id(2), late)]
    send(own_lake, [json.dumps(e).encode() for e in first])
    run_ingest(spark, own_lake, trigger="availableNow")
    assert build_lineage(spark, own_lake, now=at(100)).mode == "full"
    stored = runs()
    assert {j: (r["inferred_state"], r["lost_after"]) for j, r in stored.items()} == {
        "stream-soon": ("RUNNING", at(900)),
        "stream-late": ("RUNNING", at(5900)),
    }
    assert "silent_seconds" not in stored["stream-soon"]

    # An unrelated batch run, built after soon's deadline and before late's: soon alone is revisited and
    # turns LOST; late's row is left as it was.
    result, after = build([run_event("COMPLETE", at(200), run_id(3), ("lab", "batch"))], at(1000))
    assert result.running_revisited == 1
    assert after["stream-soon"]["inferred_state"] == "LOST"
    assert after["stream-soon"]["liveness_reason"] == stored["stream-soon"]["liveness_reason"]
    assert after["stream-late"] == stored["stream-late"]

    # Nothing due and no running job touched: no running run is revisited.
    result, after = build([run_event("COMPLETE", at(1100), run_id(4), ("lab", "batch"))], at(1200))
    assert result.running_revisited == 0
    assert after["stream-late"] == stored["stream-late"]

    # A new run of late's job that leaves its median heartbeat gap as it was (none: one event): late's row
    # is what a full recompute gives, so it is not revisited.
    result, _ = build([run_event("START", at(1300), run_id(5), late)], at(1400))
    assert result.running_revisited == 0
    assert run_row(2) == stored["stream-late"]

    # A run of late's job with a heartbeat 60 s after its start: the job's median gap moves (none -> 60 s),
    # so its other running runs (late's and run 5) are revisited; soon, stored LOST, is not.
    beats = [run_event(kind, at(t), run_id(8), late) for kind, t in (("START", 1410), ("RUNNING", 1470))]
    result, _ = build(beats, at(1480))
    assert result.running_revisited == 2
    assert [run_row(n)["median_heartbeat_seconds"] for n in (2, 5)] == [60.0, 60.0]

    # Other liveness settings: every running run is revisited, as a full recompute would compute them.
    wider = own_lake.model_copy(
        update={"build": own_lake.build.model_copy(update={"liveness_floor_seconds": 10_000.0})}
    )
    result, after = build([run_event("COMPLETE", at(1500), run_id(6), ("lab", "batch"))], at(1600), wider)
    assert result.running_revisited == 4
    assert after["stream-soon"]["inferred_state"] == "RUNNING"  # its deadline is at(10_000) now

    # A lake an earlier version built: runs with silent_seconds and no deadline, mentions extracted without
    # the data-quality assertions, no quality_results. Its next build parses every raw event again (the
    # extracted form lacks a column this version extracts) and recomputes everything: this version's shapes.
    lineage_ns = own_lake.catalog.lineage_namespace
    runs_table = own_lake.catalog.table(lineage_ns, "runs")
    spark.sql(f"ALTER TABLE {runs_table} DROP COLUMN lost_after")
    spark.sql(f"ALTER TABLE {runs_table} ADD COLUMN silent_seconds double")
    spark.sql(f"ALTER TABLE {own_lake.catalog.table(lineage_ns, 'dataset_mentions')} DROP COLUMN assertions")
    spark.sql(f"DROP TABLE {own_lake.catalog.table(lineage_ns, 'quality_results')}")
    checked = dataset("s3://wh", "checked")
    checked["inputFacets"] = {
        "dataQualityAssertions": {"assertions": [{"assertion": "unique", "success": False}]}
    }
    send(
        wider,
        [json.dumps(run_event("COMPLETE", at(1700), run_id(7), ("lab", "batch"), inputs=[checked])).encode()],
    )
    run_ingest(spark, wider, trigger="availableNow")
    assert build_lineage(spark, wider, now=at(1800)).mode == "re-extract"
    upgraded = table(spark, wider, "runs").columns
    assert "lost_after" in upgraded and "silent_seconds" not in upgraded
    quality = table(spark, wider, "quality_results").collect()
    assert [(r.run_id, r.assertion, r.success) for r in quality] == [(run_id(7), "unique", False)]


def _build_env(settings: Settings, **env: str) -> dict[str, str]:
    return {
        **os.environ,
        "LINEAGE__CATALOG__NAME": settings.catalog.name,
        "LINEAGE__CATALOG__SQLITE_PATH": str(settings.catalog.sqlite_path),
        "LINEAGE__CATALOG__WAREHOUSE": str(settings.catalog.warehouse),
        "LINEAGE__SPARK__MASTER": "local[2]",
        "LINEAGE__SPARK__SHUFFLE_PARTITIONS": "2",
        "LINEAGE__SPARK__DRIVER_MEMORY": "1g",
        **env,
    }


def _build_process(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "jobs/build_lineage.py", "--now", NOW.isoformat(), *args],
        cwd=REPO,
        env=_build_env(settings, **env),
        capture_output=True,
        timeout=600,
    )


def _lease_row(settings: Settings) -> dict | None:
    return Lease.current(open_catalog(settings.catalog).load_table(("lineage", LEASE_TABLE)))


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float = 420) -> None:
    deadline = time.monotonic() + seconds
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, (
            f"ended ({process.returncode}) before {text!r}:\n{log.read_text()[-3000:]}"
        )
        assert time.monotonic() < deadline, f"no {text!r} after {seconds} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.5)


def test_continuous_build_follows_the_ingestion_and_stops_cleanly_between_builds(
    spark: SparkSession, own_lake: Settings, tmp_path: Path
) -> None:
    """``--every``: one session builds each time new raw snapshots land (one line per build) and does
    nothing in between; SIGTERM while it waits ends it with status 0 and one line, the lease free, and
    nothing left for the next build."""
    events = lab_json()
    send(own_lake, events[:11])
    run_ingest(spark, own_lake, trigger="availableNow")
    log = tmp_path / "build.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "jobs/build_lineage.py", "--now", NOW.isoformat(), "--every", "1s"],
            cwd=REPO,
            env=_build_env(own_lake),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(log, "build 1: full, 11 new events", process)
        send(own_lake, events[11:])
        run_ingest(spark, own_lake, trigger="availableNow")
        _wait_for(log, f"build 2: incremental, {len(events) - 11} new events", process)
        builds = table(spark, own_lake, STATE_TABLE).count()
        time.sleep(3)  # three more checks find nothing new: no build, no commit
        assert table(spark, own_lake, STATE_TABLE).count() == builds
        assert _lease_row(own_lake) is None  # held per build only: a maintenance may run in between
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    assert f"stopped by SIGTERM between builds: 2 builds, {len(events)} new events" in text
    assert "build 3:" not in text and "Traceback" not in text
    # What it built is what a build of the same ranges builds (tested above and below): nothing left to do.
    assert build_lineage(spark, own_lake, now=NOW).mode == "noop"


def test_a_stop_during_a_build_ends_it_at_a_step_boundary_and_releases_the_lease(
    spark: SparkSession, own_lake: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (here sent by the build to itself right after a step's commit) ends the build at that
    boundary: the lease is released at once, nothing later is written, and the next build finishes the
    range with the same tables as an uninterrupted one."""
    events = lab_json()
    send(own_lake, events[:11])
    run_ingest(spark, own_lake, trigger="availableNow")
    build_lineage(spark, own_lake, now=NOW)
    states = table(spark, own_lake, STATE_TABLE).count()
    send(own_lake, events[11:])
    run_ingest(spark, own_lake, trigger="availableNow")
    monkeypatch.setenv(FAULT_TERM_ENV, "runs")
    with (
        stop_on_signals(spark) as stop,
        pytest.raises(JobStopped, match=r"^stopped by SIGTERM after build step runs$"),
    ):
        build_lineage(spark, own_lake, now=NOW, stop=stop)
    monkeypatch.delenv(FAULT_TERM_ENV)
    assert _lease_row(own_lake) is None
    assert table(spark, own_lake, STATE_TABLE).count() == states  # the range is not recorded as built
    assert build_lineage(spark, own_lake, now=NOW).mode == "incremental"
    after = frozen(spark, own_lake)
    build_lineage(spark, own_lake, full_refresh=True, now=NOW)
    assert_same_tables(after, frozen(spark, own_lake))


@pytest.mark.slow
def test_killed_incremental_builds_rerun_gives_identical_tables(
    spark: SparkSession, own_lake: Settings
) -> None:
    """The same range's build killed after extraction, then its re-run killed after the jobs (their
    touched runs' heartbeat gaps not stored yet), after the runs, after the dataset edges, then after the
    column edges (the paths of the edges it rewrote are not stored yet): the next run still equals a full
    refresh."""
    events = lab_json()
    send(own_lake, events[:11])
    run_ingest(spark, own_lake, trigger="availableNow")
    build_lineage(spark, own_lake, now=NOW)
    send(own_lake, events[11:])
    run_ingest(spark, own_lake, trigger="availableNow")

    for killed_after in ("dataset_mentions", "jobs", "runs", "dataset_edges", "column_edges"):
        killed = _build_process(own_lake, **{FAULT_ENV: killed_after})
        assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
        assert killed_after in killed.stderr.decode(errors="replace")
    rerun = _build_process(own_lake)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after_rerun = frozen(spark, own_lake)

    build_lineage(spark, own_lake, full_refresh=True, now=NOW)
    assert_same_tables(after_rerun, frozen(spark, own_lake))


def test_a_build_and_a_maintenance_never_overlap(spark: SparkSession, own_lake: Settings) -> None:
    """Whichever starts second stops with one line before touching a table, and the lease is free again
    after the first one ended (here in an error: no raw.events in this lake yet)."""
    busy = r"^build refused: a maintenance \(pid \d+ on "
    with writer_lease(own_lake, "maintenance"), pytest.raises(LakeBusy, match=busy):
        build_lineage(spark, own_lake)
    with writer_lease(own_lake, "build"), pytest.raises(LakeBusy, match=r"^maintenance refused: a build "):
        maintain_lake(spark, own_lake)
    with pytest.raises(BuildError, match="does not exist"):
        build_lineage(spark, own_lake)  # the lease is free again; released after the error too
    # Only the lease table exists: the maintenance keeps its snapshots few like any other table's.
    assert [t.table.split(".")[-2:] for t in maintain_lake(spark, own_lake).tables] == [
        ["lineage", LEASE_TABLE]
    ]
    lease = open_catalog(own_lake.catalog).load_table(("lineage", LEASE_TABLE))
    assert lease.scan().to_arrow().num_rows == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 11])
def test_random_range_splits_equal_a_full_refresh(spark: SparkSession, own_lake: Settings, seed: int) -> None:
    """The lab's events and the merge scenario's (column lineage, a late symlink merging two datasets, a run
    straddling builds), with duplicates and late heartbeats, shuffled and cut into three ranges at random
    points, each ingested and built: the tables equal a full refresh of the whole stream."""
    first, second = _merge_scenario()
    stream = lab_json() + [json.dumps(e).encode() for e in first + second]
    rng = random.Random(seed)
    late = [e for e in stream if b'"RUNNING"' in e]
    stream = stream + rng.sample(stream, 6) + rng.sample(late, min(2, len(late)))
    rng.shuffle(stream)
    cuts = sorted(rng.sample(range(1, len(stream)), 2))
    for part in (stream[: cuts[0]], stream[cuts[0] : cuts[1]], stream[cuts[1] :]):
        send(own_lake, part)
        run_ingest(spark, own_lake, trigger="availableNow")
        build_lineage(spark, own_lake, now=NOW)
    incremental = frozen(spark, own_lake)
    assert build_lineage(spark, own_lake, full_refresh=True, now=NOW).mode == "full"
    assert_same_tables(incremental, frozen(spark, own_lake))
