"""The lineage model on events captured from real Flink jobs with the OpenLineage integration
(tests/resources/golden/flink_real/, made by tests/integration/test_flink_producers.py; README there)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from lineage.transforms import model
from tests.unit.model_events import events_df, utc

CAPTURE = Path(__file__).resolve().parents[1] / "resources" / "golden" / "flink_real"


def captured(version: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (CAPTURE / f"{version}.jsonl").read_text().splitlines()]


def last_event_time(events: list[dict[str, Any]]) -> datetime:
    # Flink writes nanoseconds; Python parses up to microseconds.
    return max(datetime.fromisoformat(e["eventTime"][:26]).replace(tzinfo=UTC) for e in events)


def kafka_namespace(events: list[dict[str, Any]]) -> str:
    (namespace,) = {d["namespace"] for e in events for d in e.get("inputs", [])}
    return str(namespace)


def topic(events: list[dict[str, Any]], direction: str) -> str:
    (name,) = {d["name"] for e in events for d in e.get(direction, [])}
    return str(name)


def runs_by_state(frame: DataFrame) -> dict[str, dict[str, Any]]:
    rows = [r.asDict() for r in frame.collect()]
    by_state = {r["reported_state"]: r for r in rows}
    assert len(by_state) == len(rows), "one run per reported state in these captures"
    return by_state


@pytest.fixture(scope="module")
def flink2(spark: SparkSession) -> tuple[list[dict[str, Any]], DataFrame]:
    events = captured("flink2")
    return events, events_df(spark, events).localCheckpoint()


@pytest.fixture(scope="module")
def flink1(spark: SparkSession) -> tuple[list[dict[str, Any]], DataFrame]:
    events = captured("flink1")
    return events, events_df(spark, events).localCheckpoint()


def test_flink2_runs_complete_and_abort_in_the_default_namespace(flink2: tuple[list, DataFrame]) -> None:
    events, frame = flink2
    runs = runs_by_state(model.runs(frame))
    assert set(runs) == {"COMPLETE", "ABORT"}
    for run in runs.values():
        assert (run["job_namespace"], run["job_name"]) == ("flink-jobs", "supplier-stats-sql")
        assert run["run_id"][14] == "7"  # UUIDv7
        assert run["processing_engine_version"] == "2.0.2"
        starts = [e for e in events if e["run"]["runId"] == run["run_id"] and e["eventType"] == "START"]
        assert [utc(run["started_at"])] == [
            datetime.fromisoformat(s["eventTime"][:26]).replace(tzinfo=UTC) for s in starts
        ]
    # The client-side listener sends START, the JobManager-side one RUNNING and the terminal event, each
    # through its own Kafka producer: in the capture a RUNNING came before its START. The fold does not care.
    cancelled = [e["eventType"] for e in events if e["run"]["runId"] == runs["ABORT"]["run_id"]]
    assert cancelled.index("RUNNING") < cancelled.index("START")
    jobs = model.jobs(frame).collect()
    assert [(j["integration"], j["job_type"]) for j in jobs] == [("FLINK", "JOB")]


def test_flink2_datasets_only_on_start_and_sql_tables_are_symlinks(flink2: tuple[list, DataFrame]) -> None:
    events, frame = flink2
    assert {e["eventType"] for e in events if e.get("inputs") or e.get("outputs")} == {"START"}
    kafka, source, sink = kafka_namespace(events), topic(events, "inputs"), topic(events, "outputs")
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    canonical = {
        (a["alias_namespace"], a["alias_name"]): (a["dataset_name"], a["alias_kind"])
        for a in aliases.collect()
    }
    assert canonical == {
        (kafka, source): (source, "self"),
        (kafka, sink): (sink, "self"),
        (kafka, "default_catalog.default_database.orders"): (source, "symlink"),
        (kafka, "default_catalog.default_database.supplier_stats"): (sink, "symlink"),
    }
    io = model.run_io(mentions, aliases).collect()
    per_run: dict[str, set[str]] = {}
    for row in io:
        per_run.setdefault(row["run_id"], set()).add(row["direction"])
    assert list(per_run.values()) == [{"input", "output"}] * 2


def test_flink1_complete_fail_and_unterminated_run(flink1: tuple[list, DataFrame]) -> None:
    events, frame = flink1
    runs = runs_by_state(model.runs(frame))
    assert set(runs) == {"COMPLETE", "FAIL", "RUNNING"}
    assert {(r["job_namespace"], r["job_name"]) for r in runs.values()} == {("flink1-lab", "supplier-stats")}
    failed = runs["FAIL"]
    assert (failed["error_message"], failed["error_language"]) == ("Job was cancelled.", "JAVA")
    assert failed["error_stack_trace"].startswith("org.apache.flink.runtime.client.JobCancellationException")
    stuck = runs["RUNNING"]
    assert stuck["ended_at"] is None and stuck["event_count"] == 4
    # 1.x sends its datasets on every START and RUNNING, never on the terminal event.
    with_datasets = {e["eventType"] for e in events if e.get("inputs")}
    assert with_datasets == {"START", "RUNNING"}
    jobs = model.jobs(frame).collect()
    assert [(j["job_type"], j["processing_type"]) for j in jobs] == [("JOB", "STREAMING")]


def test_flink1_killed_run_is_lost_only_after_the_floor(flink1: tuple[list, DataFrame]) -> None:
    events, frame = flink1
    last = last_event_time(events)
    runs, beats = model.runs(frame), model.heartbeat_gaps(frame)
    (gap,) = beats.collect()
    assert 1 <= gap["median_gap_seconds"] <= 10  # the REST poll saw a new checkpoint every few seconds

    def stuck_at(now: datetime) -> dict[str, Any]:
        rows = model.run_liveness(runs, beats, now).where("reported_state = 'RUNNING'").collect()
        (row,) = rows
        return dict(row.asDict())

    soon = stuck_at(last + timedelta(seconds=60))
    assert (soon["inferred_state"], soon["threshold_seconds"]) == ("RUNNING", 900.0)
    late = stuck_at(last + timedelta(seconds=900))
    assert late["inferred_state"] == "LOST"
    # The deadline and the reason are those of the run, whatever the reference time.
    assert {k: v for k, v in late.items() if k != "inferred_state"} == {
        k: v for k, v in soon.items() if k != "inferred_state"
    }
    assert late["liveness_reason"].startswith("no event since ")
    assert ": LOST after " in late["liveness_reason"]
    assert "(threshold 900 s: 3 x median heartbeat" in late["liveness_reason"]


def test_both_versions_read_one_orders_topic(
    spark: SparkSession, flink1: tuple[list, DataFrame], flink2: tuple[list, DataFrame]
) -> None:
    events = flink1[0] + flink2[0]
    frame = events_df(spark, events)
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    datasets = {r["name"]: r["dataset_id"] for r in model.datasets(mentions, aliases).collect()}
    orders = datasets[topic(flink1[0], "inputs")]
    assert topic(flink1[0], "inputs") == topic(flink2[0], "inputs")
    edges = model.dataset_edges(model.job_edges(model.run_io(mentions, aliases), model.runs(frame))).collect()
    assert {(e["source_dataset_id"], e["job_name"]) for e in edges} == {
        (orders, "supplier-stats"),
        (orders, "supplier-stats-sql"),
    }
