"""The lineage model on events captured from Debezium's PostgreSQL connector with its OpenLineage integration,
on a real Kafka Connect worker (tests/resources/golden/connect_real/, made by
tests/integration/test_connect_producer.py; README there)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from lineage.transforms import model
from tests.unit.model_events import events_df, utc

CAPTURE = Path(__file__).resolve().parents[1] / "resources" / "golden" / "connect_real"
JOB = ("connect-shop", "shop.0")
TABLES = ("customers", "orders")

Event = dict[str, Any]


def captured() -> list[Event]:
    return [json.loads(line) for line in (CAPTURE / "debezium.jsonl").read_text().splitlines()]


def event_time(event: Event) -> datetime:
    # Debezium writes nanoseconds; Python parses up to microseconds.
    return datetime.fromisoformat(event["eventTime"][:26]).replace(tzinfo=UTC)


def namespace(events: list[Event], direction: str) -> str:
    (found,) = {d["namespace"] for e in events for d in e.get(direction) or []}
    return str(found)


def run_order(events: list[Event]) -> list[str]:
    """Run ids in the order of their START (the capture's order: one key, one partition)."""
    return [e["run"]["runId"] for e in events if e["eventType"] == "START"]


@pytest.fixture(scope="module")
def debezium(spark: SparkSession) -> tuple[list[Event], DataFrame]:
    events = captured()
    return events, events_df(spark, events).localCheckpoint()


def test_four_task_runs_three_complete_and_one_unterminated(debezium: tuple[list[Event], DataFrame]) -> None:
    events, frame = debezium
    runs = {r["run_id"]: r.asDict() for r in model.runs(frame).collect()}
    order = run_order(events)
    assert len(order) == 4 and set(order) == set(runs)
    assert [runs[r]["reported_state"] for r in order] == ["COMPLETE", "COMPLETE", "COMPLETE", "RUNNING"]
    for run_id, run in runs.items():
        assert (run["job_namespace"], run["job_name"]) == JOB
        assert run_id[14] == "7"  # UUIDv7
        assert (run["processing_engine_name"], run["processing_engine_version"]) == (
            "Debezium",
            "3.5.0.Final",
        )
        starts = [event_time(e) for e in events if e["run"]["runId"] == run_id and e["eventType"] == "START"]
        assert [utc(run["started_at"])] == starts
    killed = runs[order[-1]]
    assert killed["ended_at"] is None
    # START, then RUNNING events only: the worker was killed.
    assert {e["eventType"] for e in events if e["run"]["runId"] == order[-1]} == {"START", "RUNNING"}


def test_job_facets_from_the_connector_configuration(debezium: tuple[list[Event], DataFrame]) -> None:
    _, frame = debezium
    (job,) = [j.asDict(recursive=True) for j in model.jobs(frame).collect()]
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


def test_killed_run_is_lost_only_after_the_floor(debezium: tuple[list[Event], DataFrame]) -> None:
    events, frame = debezium
    last = max(event_time(e) for e in events)
    runs, beats = model.runs(frame), model.heartbeat_gaps(frame)
    (gap,) = beats.collect()
    # RUNNING events come in bursts as records are handled (one per table, one per topic), not on a timer.
    assert gap["median_gap_seconds"] < 1

    def killed_at(now: datetime) -> dict[str, Any]:
        (row,) = model.run_liveness(runs, beats, now).where("reported_state = 'RUNNING'").collect()
        return dict(row.asDict())

    soon = killed_at(last + timedelta(seconds=60))
    assert (soon["inferred_state"], soon["threshold_seconds"]) == ("RUNNING", 900.0)
    late = killed_at(last + timedelta(seconds=900))
    assert late["inferred_state"] == "LOST"
    # The deadline and the reason are those of the run, whatever the reference time.
    assert {k: v for k, v in late.items() if k != "inferred_state"} == {
        k: v for k, v in soon.items() if k != "inferred_state"
    }
    assert late["liveness_reason"].startswith("no event since ")
    assert ": LOST after " in late["liveness_reason"]
    assert "(threshold 900 s: 3 x median heartbeat" in late["liveness_reason"]


def test_tables_in_topics_out_in_separate_events(debezium: tuple[list[Event], DataFrame]) -> None:
    events, frame = debezium
    # Inputs and outputs never share an event: a table on RUNNING as the connector reads it, a topic on
    # RUNNING from the OpenLineage SMT as records go out.
    assert not [e for e in events if e.get("inputs") and e.get("outputs")]
    assert {e["eventType"] for e in events if e.get("inputs") or e.get("outputs")} == {"RUNNING"}
    postgres, kafka = namespace(events, "inputs"), namespace(events, "outputs")
    assert postgres.startswith("postgres://127.0.0.1:") and kafka.startswith("kafka://127.0.0.1:")
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    datasets = {
        (d["namespace"], d["name"]): d.asDict(recursive=True)
        for d in model.datasets(mentions, aliases).collect()
    }
    tables = {t: datasets[(postgres, f"postgres.public.{t}")] for t in TABLES}
    topics = {t: datasets[(kafka, f"shop.public.{t}")] for t in TABLES}
    assert len(datasets) == 4
    assert [(f["name"], f["type"]) for f in tables["customers"]["schema_fields"]] == [
        ("id", "int4"),
        ("name", "text"),
        ("email", "varchar"),
    ]
    assert [f["name"] for f in tables["orders"]["schema_fields"]] == [
        "id",
        "customer_id",
        "amount",
        "status",
        "placed_at",
    ]
    envelope = ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
    for topic in topics.values():
        assert [f["name"] for f in topic["schema_fields"]] == envelope

    io = model.run_io(mentions, aliases).localCheckpoint()
    per_run: dict[str, set[tuple[str, str]]] = {}
    for row in io.collect():
        per_run.setdefault(row["run_id"], set()).add((row["dataset_id"], row["direction"]))
    expected = {(d["dataset_id"], "input") for d in tables.values()} | {
        (d["dataset_id"], "output") for d in topics.values()
    }
    assert list(per_run.values()) == [expected] * 4

    edges = model.dataset_edges(model.job_edges(io, model.runs(frame))).collect()
    pairs = {(e["source_dataset_id"], e["target_dataset_id"]) for e in edges}
    for table in TABLES:
        assert (tables[table]["dataset_id"], topics[table]["dataset_id"]) in pairs
    # Nothing in the events pairs a table with its topic, so job-level lineage crosses them too.
    assert len(pairs) == 4
