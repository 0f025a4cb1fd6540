"""End to end with real dbt and Airflow producers: `dbt-ol run` and `dbt-ol test` (dbt-core + DuckDB +
openlineage-dbt; a passing unique test and a failing singular test) and `airflow dags test` (Airflow + its
OpenLineage provider, three dependent SQL tasks on SQLite), both through the OpenLineage Kafka transport into
our topic -> ingestion -> build -> ``lake.lineage.*``.

One scenario per module, run once (tests/producers/orchestrators.py). Needs `make producers-setup`
(.venv-dbt, .venv-airflow). Set ``PRODUCERS_GOLDEN_DIR`` to also write the captured events there, one file
per producer (how tests/resources/golden/producers_real/ was made).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.cli.main import Context, cli
from lineage.ingest.stream import run_ingest
from lineage.io.catalog import open_catalog
from lineage.io.local_kafka import LocalKafka, create_topic
from lineage.query.store import LineageStore
from lineage.settings import Settings
from tests.fixtures.lake import lake_settings
from tests.producers import orchestrators as prod

pytestmark = [pytest.mark.integration, pytest.mark.producers]

PARTITIONS = 3
DBT_JOBS = {
    "wrapper": "dbt-run-shop",
    "staging": "shop.main.shop.stg_orders",
    "mart": "shop.main.shop.customer_revenue",
}
DUCKDB = "duckdb://shop.duckdb"  # the profile's relative path
SQLITE = "sqlite://localhost"  # ShopSqliteHook's database info
TASKS = ("load_raw", "build_staging", "build_mart")

Event = dict[str, Any]


@dataclass
class Scenario:
    settings: Settings
    events: dict[str, list[tuple[int, int, Event]]] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    rows_in: int = 0
    rejected: int = 0

    def all_events(self) -> list[Event]:
        return [e for captured in self.events.values() for _, _, e in captured]

    def dataset_id(self, namespace: str, name: str) -> str:
        (found,) = (
            d["dataset_id"]
            for d in self.tables["datasets"]
            if (d["namespace"], d["name"]) == (namespace, name)
        )
        return str(found)

    def runs_of(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [r for r in self.tables["runs"] if (r["job_namespace"], r["job_name"]) == (namespace, name)]

    def run_of(self, namespace: str, name: str) -> dict[str, Any]:
        (run,) = self.runs_of(namespace, name)
        return run


def _timed(scenario: Scenario, step: str, fn: Any, *args: Any) -> Any:
    t0 = time.monotonic()
    result = fn(*args)
    scenario.seconds[step] = time.monotonic() - t0
    return result


def write_golden(directory: Path, scenario: Scenario) -> None:
    """The captured events per producer, one JSON per line, in (partition, offset) order, unchanged."""
    directory.mkdir(parents=True, exist_ok=True)
    for producer, captured in scenario.events.items():
        lines = [json.dumps(e, separators=(",", ":")) for _, _, e in captured]
        (directory / f"{producer}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def producers_lake(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    """Runs dbt into one topic and Airflow into another, then ingests both into one fresh catalog (once)."""
    work = tmp_path_factory.mktemp("producers")
    prefix = f"producers.{uuid.uuid4().hex[:8]}"
    bootstrap = kafka_broker.bootstrap_servers
    settings = lake_settings(spark, base_settings, work, bootstrap_servers=bootstrap, topic=f"{prefix}.runs")
    scenario = Scenario(settings)
    create_topic(bootstrap, settings.kafka.topic, PARTITIONS, kafka_broker.max_message_bytes)
    for producer, run in (("dbt", prod.run_dbt), ("airflow", prod.run_airflow)):
        (work / producer).mkdir()
        _timed(scenario, producer, run, work / producer, bootstrap, settings.kafka.topic)
    # Each producer's events have one key (its root job), so they are in one partition, in arrival order.
    captured = prod.read_topic(bootstrap, settings.kafka.topic, PARTITIONS)
    namespaces = (
        ("dbt", prod.DBT_NAMESPACE),
        ("dbt-test", prod.DBT_TEST_NAMESPACE),
        ("airflow", prod.AIRFLOW_NAMESPACE),
    )
    for producer, namespace in namespaces:
        scenario.events[producer] = [c for c in captured if c[2]["job"]["namespace"] == namespace]
    assert sum(len(e) for e in scenario.events.values()) == len(captured), "an event of another namespace"

    progress = _timed(scenario, "ingest", lambda: run_ingest(spark, settings, trigger="availableNow"))
    scenario.rows_in, scenario.rejected = progress.rows_in, progress.rejected
    last_event = max(
        datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")) for e in scenario.all_events()
    )
    _timed(scenario, "build", lambda: build_lineage(spark, settings, now=last_event + timedelta(minutes=5)))
    catalog = settings.catalog
    lake = open_catalog(catalog)
    names = ("jobs", "runs", "datasets", "run_io", "dataset_edges", "column_edges", "job_dependencies")
    for name in (*names, "quality_results"):
        scenario.tables[name] = (
            lake.load_table(f"{catalog.lineage_namespace}.{name}").scan().to_arrow().to_pylist()
        )
    scenario.tables["raw"] = lake.load_table(f"{catalog.raw_namespace}.events").scan().to_arrow().to_pylist()
    golden = os.environ.get("PRODUCERS_GOLDEN_DIR")
    if golden:
        write_golden(Path(golden), scenario)
    print(f"\nproducers scenario seconds: { {k: round(v, 1) for k, v in scenario.seconds.items()} }")
    yield scenario


def test_every_event_lands_once(producers_lake: Scenario) -> None:
    raw = producers_lake.tables["raw"]
    assert producers_lake.rejected == 0
    assert producers_lake.rows_in == len(raw) == len(producers_lake.all_events())
    # Without messageKey the transport keys every event by its root job: one root run, one partition.
    assert {r["kafka_key"] for r in raw} == {
        f"run:{prod.DBT_NAMESPACE}/{DBT_JOBS['wrapper']}",
        f"run:{prod.DBT_TEST_NAMESPACE}/{prod.DBT_TEST_JOB}",
        f"run:{prod.AIRFLOW_NAMESPACE}/{prod.DAG_ID}",
    }


def test_dbt_run_is_the_parent_of_its_model_runs(producers_lake: Scenario) -> None:
    events = [e for _, _, e in producers_lake.events["dbt"]]
    assert sorted(e["eventType"] for e in events) == ["COMPLETE"] * 3 + ["START"] * 3
    ns = prod.DBT_NAMESPACE
    jobs = {(j["job_namespace"], j["job_name"]): j for j in producers_lake.tables["jobs"]}
    assert (jobs[(ns, DBT_JOBS["wrapper"])]["integration"], jobs[(ns, DBT_JOBS["wrapper"])]["job_type"]) == (
        "DBT",
        "JOB",
    )
    wrapper = producers_lake.run_of(ns, DBT_JOBS["wrapper"])
    assert (wrapper["reported_state"], wrapper["parent_run_id"]) == ("COMPLETE", None)
    assert wrapper["root_run_id"] == wrapper["run_id"]  # a run without a parent is its own root
    for model in ("staging", "mart"):
        assert jobs[(ns, DBT_JOBS[model])]["job_type"] == "MODEL"
        run = producers_lake.run_of(ns, DBT_JOBS[model])
        assert run["reported_state"] == "COMPLETE"
        assert (run["parent_run_id"], run["root_run_id"]) == (wrapper["run_id"], wrapper["run_id"])
        assert run["started_at"] <= run["ended_at"]
    # The dbt run invokes its model jobs: the parent/child dependency.
    deps = {
        (d["upstream_job_name"], d["downstream_job_name"], d["source"])
        for d in producers_lake.tables["job_dependencies"]
        if d["upstream_job_namespace"] == ns
    }
    assert deps == {(DBT_JOBS["wrapper"], DBT_JOBS[m], "parent") for m in ("staging", "mart")}


def test_dbt_datasets_and_edges(producers_lake: Scenario) -> None:
    source, staging, mart = (
        producers_lake.dataset_id(DUCKDB, f"shop.main.{t}")
        for t in ("raw_orders", "stg_orders", "customer_revenue")
    )
    io = {(r["run_id"], r["dataset_id"], r["direction"]) for r in producers_lake.tables["run_io"]}
    ns = prod.DBT_NAMESPACE
    stg_run = producers_lake.run_of(ns, DBT_JOBS["staging"])["run_id"]
    mart_run = producers_lake.run_of(ns, DBT_JOBS["mart"])["run_id"]
    assert {(d, direction) for r, d, direction in io if r == stg_run} == {
        (source, "input"),
        (staging, "output"),
    }
    assert {(d, direction) for r, d, direction in io if r == mart_run} == {
        (staging, "input"),
        (mart, "output"),
    }
    edges = {(e["source_dataset_id"], e["target_dataset_id"]) for e in producers_lake.tables["dataset_edges"]}
    assert {(source, staging), (staging, mart)} <= edges


def test_dbt_column_edges_follow_the_renamed_and_aggregated_columns(producers_lake: Scenario) -> None:
    staging, mart = (
        producers_lake.dataset_id(DUCKDB, f"shop.main.{t}") for t in ("stg_orders", "customer_revenue")
    )
    into_mart = {
        (e["source_field"], e["target_field"]): e
        for e in producers_lake.tables["column_edges"]
        if (e["source_dataset_id"], e["target_dataset_id"]) == (staging, mart)
    }
    assert set(into_mart) == {
        ("customer_id", "client_id"),
        ("amount", "total_amount"),
        ("amount", "max_amount_x2"),
    }
    # dbt sends no transformations: the kind of each edge is unknown, not DIRECT.
    for edge in into_mart.values():
        assert not edge["is_direct"]
        assert {t["type"] for t in edge["transformations"]} <= {None}


def test_dbt_tests_are_quality_results_and_the_failing_one_fails_its_model(
    producers_lake: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging, mart = (
        producers_lake.dataset_id(DUCKDB, f"shop.main.{t}") for t in ("stg_orders", "customer_revenue")
    )
    singular = "assert_every_client_spent_ten"
    results = {
        (
            r["job_name"],
            r["dataset_id"],
            r["column_name"],
            r["assertion"],
            r["success"],
            r["facet"],
            r["status"],
        )
        for r in producers_lake.tables["quality_results"]
        if r["job_namespace"] == prod.DBT_TEST_NAMESPACE
    }
    # Seen from openlineage-dbt 1.54.0: one test job per tested model with the data-quality assertions facet
    # on the model (generic and singular tests), and a job per singular test with the test run facet, whose
    # input is the model it reads.
    assert results == {
        (
            "shop.main.shop.stg_orders.test",
            staging,
            "order_id",
            "unique",
            True,
            "dataQualityAssertions",
            None,
        ),
        ("shop.main.shop.customer_revenue.test", mart, None, singular, False, "dataQualityAssertions", None),
        (f"test.shop.{singular}", mart, None, f"test.shop.{singular}", False, "test", "fail"),
    }
    assert all(r["problem"] is None for r in producers_lake.tables["quality_results"])

    store = LineageStore(producers_lake.settings)
    monkeypatch.setattr(Context, "store", property(lambda _self: store))
    target = f"{DUCKDB}/shop.main.customer_revenue"
    failing = CliRunner().invoke(cli, ["health", target])
    assert failing.exit_code == 0, failing.output
    assert ": failing" in failing.output.splitlines()[0]
    assert f"test.shop.{singular}(*) failed" in failing.output
    as_json = CliRunner().invoke(cli, ["health", target, "--json"])
    health = json.loads(as_json.output)
    assert health["state"] == "failing"
    assert {p["assertion"] for p in health["problems"] if p["kind"] == "assertion"} == {
        singular,
        f"test.shop.{singular}",
    }
    passing = CliRunner().invoke(cli, ["health", f"{DUCKDB}/shop.main.stg_orders", "--json"])
    assert passing.exit_code == 0, passing.output
    assert json.loads(passing.output)["state"] != "failing"


def test_airflow_dag_run_is_the_parent_of_its_task_runs(producers_lake: Scenario) -> None:
    ns = prod.AIRFLOW_NAMESPACE
    dag = producers_lake.run_of(ns, prod.DAG_ID)
    assert (dag["reported_state"], dag["parent_run_id"]) == ("COMPLETE", None)
    assert dag["root_run_id"] == dag["run_id"]
    jobs = {(j["job_namespace"], j["job_name"]): j for j in producers_lake.tables["jobs"]}
    assert (jobs[(ns, prod.DAG_ID)]["integration"], jobs[(ns, prod.DAG_ID)]["job_type"]) == ("AIRFLOW", "DAG")
    for task in TASKS:
        name = f"{prod.DAG_ID}.{task}"
        assert jobs[(ns, name)]["job_type"] == "TASK"
        run = producers_lake.run_of(ns, name)
        assert run["reported_state"] == "COMPLETE"
        assert (run["parent_run_id"], run["root_run_id"]) == (dag["run_id"], dag["run_id"])


def test_airflow_task_dependencies_from_the_task_facet(producers_lake: Scenario) -> None:
    events = [e for _, _, e in producers_lake.events["airflow"]]
    ns = prod.AIRFLOW_NAMESPACE
    captured = prod.airflow_task_dependencies(events)
    chain = {
        ((ns, f"{prod.DAG_ID}.{a}"), (ns, f"{prod.DAG_ID}.{b}"))
        for a, b in (("load_raw", "build_staging"), ("build_staging", "build_mart"))
    }
    assert captured == chain
    table = {
        (
            (d["upstream_job_namespace"], d["upstream_job_name"]),
            (d["downstream_job_namespace"], d["downstream_job_name"]),
        )
        for d in producers_lake.tables["job_dependencies"]
        if d["source"] == "airflow"
    }
    assert table == captured


def test_airflow_sql_tasks_datasets_and_column_lineage(producers_lake: Scenario) -> None:
    raw, staging, mart = (
        producers_lake.dataset_id(SQLITE, f"shop.main.{t}")
        for t in ("raw_orders", "stg_orders", "customer_revenue")
    )
    io = {(r["run_id"], r["dataset_id"], r["direction"]) for r in producers_lake.tables["run_io"]}
    ns = prod.AIRFLOW_NAMESPACE
    mart_run = producers_lake.run_of(ns, f"{prod.DAG_ID}.build_mart")["run_id"]
    stg_run = producers_lake.run_of(ns, f"{prod.DAG_ID}.build_staging")["run_id"]
    assert (staging, "input") in {(d, x) for r, d, x in io if r == mart_run}
    assert (mart, "output") in {(d, x) for r, d, x in io if r == mart_run}
    assert (raw, "input") in {(d, x) for r, d, x in io if r == stg_run}
    into_mart = {
        (e["source_field"], e["target_field"]): e
        for e in producers_lake.tables["column_edges"]
        if (e["source_dataset_id"], e["target_dataset_id"]) == (staging, mart)
        and e["target_field"] is not None
    }
    assert {("customer_id", "client_id"), ("amount", "total_amount")} <= set(into_mart)
    # The provider's SQL parser gives no transformation kind (legacy keys, empty): unknown, not DIRECT.
    assert not any(e["is_direct"] for e in into_mart.values())
