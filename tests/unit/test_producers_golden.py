"""The lineage model on events captured from a real `dbt-ol run` and a real `airflow dags test`
(tests/resources/golden/producers_real/, made by tests/integration/test_dbt_airflow_producers.py; README
there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.transforms import columns, model
from tests.producers.orchestrators import airflow_task_dependencies
from tests.unit.model_events import events_df

CAPTURE = Path(__file__).resolve().parents[1] / "resources" / "golden" / "producers_real"


def captured(producer: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (CAPTURE / f"{producer}.jsonl").read_text().splitlines()]


def runs_by_job(frame: DataFrame) -> dict[str, dict[str, Any]]:
    rows = [r.asDict() for r in frame.collect()]
    by_job = {r["job_name"]: r for r in rows}
    assert len(by_job) == len(rows), "one run per job in these captures"
    return by_job


def names_by_id(spark: SparkSession, events: DataFrame) -> tuple[DataFrame, DataFrame, dict[str, str]]:
    mentions = model.dataset_mentions(events).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    ids = {r["dataset_id"]: r["name"] for r in model.datasets(mentions, aliases).collect()}
    return mentions, aliases, ids


def field_edges(mentions: DataFrame, aliases: DataFrame, ids: dict[str, str]) -> dict[tuple, dict]:
    edges = columns.column_edges(mentions, aliases).where(F.col("target_field").isNotNull())
    return {
        (ids[e["source_dataset_id"]], e["source_field"], ids[e["target_dataset_id"]], e["target_field"]): e
        for e in (r.asDict() for r in edges.collect())
    }


def test_dbt_run_is_parent_and_root_of_its_model_runs(spark: SparkSession) -> None:
    events = events_df(spark, captured("dbt"))
    runs = runs_by_job(model.runs(events))
    jobs = {r["job_name"]: r.asDict() for r in model.jobs(events).collect()}
    wrapper = runs.pop("dbt-run-shop")
    assert (wrapper["parent_run_id"], wrapper["root_run_id"]) == (None, wrapper["run_id"])
    assert set(runs) == {"shop.main.shop.stg_orders", "shop.main.shop.customer_revenue"}
    for name, run in runs.items():
        assert (run["parent_run_id"], run["root_run_id"]) == (wrapper["run_id"], wrapper["run_id"])
        assert run["reported_state"] == "COMPLETE"
        assert (jobs[name]["integration"], jobs[name]["job_type"]) == ("DBT", "MODEL")
    deps = {
        (d["upstream_job_name"], d["downstream_job_name"], d["source"])
        for d in model.job_dependencies(events).collect()
    }
    assert deps == {("dbt-run-shop", name, "parent") for name in runs}


def test_dbt_datasets_and_column_edges_through_rename_and_aggregates(spark: SparkSession) -> None:
    mentions, aliases, ids = names_by_id(spark, events_df(spark, captured("dbt")))
    assert set(ids.values()) == {"shop.main.raw_orders", "shop.main.stg_orders", "shop.main.customer_revenue"}
    edges = field_edges(mentions, aliases, ids)
    into_mart = {(s, t) for (_, s, target, t) in edges if target == "shop.main.customer_revenue"}
    # COUNT(*) has no source column; dbt leaves it out.
    assert into_mart == {
        ("customer_id", "client_id"),
        ("amount", "total_amount"),
        ("amount", "max_amount_x2"),
    }
    into_staging = {(s, t) for (_, s, target, t) in edges if target == "shop.main.stg_orders"}
    assert into_staging == {(c, c) for c in ("order_id", "customer_id", "amount", "status")}
    # dbt sends empty transformations: the kind is unknown, never DIRECT.
    assert not any(e["is_direct"] for e in edges.values())
    assert {t["type"] for e in edges.values() for t in e["transformations"]} <= {None}


def test_airflow_dag_run_is_parent_and_root_of_its_task_runs(spark: SparkSession) -> None:
    events = events_df(spark, captured("airflow"))
    runs = model.runs(events)
    tasks = {
        r["job_name"]: r.asDict() for r in runs.where(F.col("job_name").startswith("ol_shop.")).collect()
    }
    (dag,) = runs.where(F.col("job_name") == "ol_shop").collect()
    # `airflow dags test` sends no DAG START: the DAG run is seen through its COMPLETE only.
    assert (dag["reported_state"], dag["parent_run_id"], dag["root_run_id"]) == (
        "COMPLETE",
        None,
        dag["run_id"],
    )
    assert dag["started_at"] is None
    for task in ("load_raw", "build_staging", "build_mart"):
        run = tasks[f"ol_shop.{task}"]
        assert (run["parent_run_id"], run["root_run_id"]) == (dag["run_id"], dag["run_id"])
        assert run["reported_state"] == "COMPLETE"


def test_airflow_task_facet_gives_the_task_chain(spark: SparkSession) -> None:
    raw = captured("airflow")
    pairs = airflow_task_dependencies(raw)
    assert {(u[1], d[1]) for u, d in pairs} == {
        ("ol_shop.load_raw", "ol_shop.build_staging"),
        ("ol_shop.build_staging", "ol_shop.build_mart"),
    }
    deps = model.job_dependencies(events_df(spark, raw)).where(F.col("source") == "airflow").collect()
    assert {
        (
            (d["upstream_job_namespace"], d["upstream_job_name"]),
            (d["downstream_job_namespace"], d["downstream_job_name"]),
        )
        for d in deps
    } == pairs


def test_airflow_sql_datasets_and_column_edges(spark: SparkSession) -> None:
    mentions, aliases, ids = names_by_id(spark, events_df(spark, captured("airflow")))
    assert {"shop.main.raw_orders", "shop.main.stg_orders", "shop.main.customer_revenue"} <= set(ids.values())
    edges = field_edges(mentions, aliases, ids)
    into_mart = {(s, t) for (src, s, target, t) in edges if target == "shop.main.customer_revenue"}
    assert {("customer_id", "client_id"), ("amount", "total_amount")} <= into_mart
    assert not any(e["is_direct"] for e in edges.values())
