"""Entity mapping per producer shape, on the golden events of tests/resources/golden/."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.transforms import model
from tests.unit.model_events import events_df

GOLDEN = Path(__file__).resolve().parents[1] / "resources" / "golden"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def golden(spark: SparkSession, name: str) -> DataFrame:
    lines = (GOLDEN / name).read_text().splitlines()
    return events_df(spark, [json.loads(line) for line in lines])


def by_job(frame: DataFrame) -> dict[str, dict]:
    return {r["job_name"]: r.asDict() for r in frame.collect()}


def test_flink1_job_and_its_unterminated_run(spark: SparkSession) -> None:
    events = golden(spark, "flink1.jsonl")
    job = model.jobs(events).first()
    runs = model.run_liveness(model.runs(events), model.heartbeat_gaps(events), NOW).collect()
    assert (job["processing_type"], job["integration"], job["job_type"]) == (
        "STREAMING",
        "FLINK",
        "DATASTREAM",
    )
    assert len(runs) == 1
    run = runs[0]
    assert (run["reported_state"], run["inferred_state"], run["event_count"]) == ("RUNNING", "LOST", 6)
    assert run["median_heartbeat_seconds"] == 60.0


def test_flink2_run_keeps_the_datasets_sent_on_start_only(spark: SparkSession) -> None:
    events = golden(spark, "flink2.jsonl")
    run = model.runs(events).first()
    mentions = model.dataset_mentions(events).localCheckpoint()
    io = model.run_io(mentions, model.dataset_aliases(mentions, max_iterations=3).localCheckpoint())
    assert (run["job_namespace"], run["reported_state"], run["event_count"]) == (
        "http://jobmanager-2:8081",
        "ABORT",
        5,
    )
    assert run["run_id"][14] == "7"  # UUIDv7
    assert sorted(r["direction"] for r in io.collect()) == ["input", "output"]
    assert io.select("run_id").distinct().first()[0] == run["run_id"]


def test_spark_application_is_parent_and_root_of_its_action_runs(spark: SparkSession) -> None:
    runs = model.runs(golden(spark, "spark.jsonl"))
    app = runs.where(F.col("job_name") == "supplier_stats_app").first()
    children = runs.where(F.col("job_name") != "supplier_stats_app").collect()
    assert app["parent_run_id"] is None and app["reported_state"] == "COMPLETE"
    assert len(children) == 3
    assert {(c["parent_run_id"], c["root_run_id"]) for c in children} == {(app["run_id"], app["run_id"])}
    failed = [c for c in children if c["reported_state"] == "FAIL"]
    assert [c["error_message"] for c in failed] == ["Table default.orders not found"]


def test_airflow_dag_run_is_parent_of_task_runs_and_dag_is_parent_job(spark: SparkSession) -> None:
    events = golden(spark, "airflow.jsonl")
    runs = by_job(model.runs(events))
    jobs = by_job(model.jobs(events))
    dag = runs["daily_orders"]
    assert (dag["reported_state"], dag["parent_run_id"]) == ("COMPLETE", None)
    for task in ("daily_orders.extract", "daily_orders.aggregate"):
        assert (runs[task]["parent_run_id"], runs[task]["root_run_id"]) == (dag["run_id"], dag["run_id"])
        assert (jobs[task]["parent_job_name"], jobs[task]["job_type"]) == ("daily_orders", "TASK")
    assert jobs["daily_orders"]["job_type"] == "DAG"
    assert dag["nominal_start_time"] is not None


def test_python_client_failed_run_and_retry(spark: SparkSession) -> None:
    events = golden(spark, "python.jsonl")
    runs = sorted(model.runs(events).collect(), key=lambda r: r["started_at"])
    assert [r["reported_state"] for r in runs] == ["FAIL", "COMPLETE"]
    assert runs[0]["error_message"] == "PermissionError: s3://exports"
    assert [r["duration_seconds"] for r in runs] == [40.0, 60.0]
    summary = model.job_summary(
        model.run_liveness(model.runs(events), model.heartbeat_gaps(events), NOW),
        model.job_edges(*_io(events)),
    ).first()
    assert (summary["run_count"], summary["success_rate"]) == (2, 0.5)


def _io(events: DataFrame) -> tuple[DataFrame, DataFrame]:
    mentions = model.dataset_mentions(events).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    return model.run_io(mentions, aliases), model.runs(events).localCheckpoint()
