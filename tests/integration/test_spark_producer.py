"""End to end with a real producer: a PySpark job with the OpenLineage Spark listener -> Kafka -> ingestion
-> Iceberg -> build -> column edges and paths, and the versions of its Iceberg tables tied to its runs."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.ingest.stream import run_ingest
from lineage.io.catalog import open_catalog
from lineage.query import history
from lineage.query.store import LineageStore
from lineage.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_spark_listener_events_become_column_lineage(
    spark: SparkSession, own_lake: Settings, tmp_path: Path
) -> None:
    shop = tmp_path / "shop"
    producer = subprocess.run(
        [
            sys.executable,
            "tests/producers/spark_orders_report.py",
            "--bootstrap",
            own_lake.kafka.bootstrap_servers,
            "--topic",
            own_lake.kafka.topic,
            "--warehouse",
            str(shop),
            "--second-round",
        ],
        cwd=REPO,
        capture_output=True,
        timeout=600,
    )
    assert producer.returncode == 0, producer.stderr[-3000:]

    progress = run_ingest(spark, own_lake, trigger="availableNow")
    build_lineage(spark, own_lake, now=NOW)

    assert progress.rows_in > 10 and progress.rejected == 0
    catalog = open_catalog(own_lake.catalog)
    ids = {
        (d["namespace"], d["name"]): d["dataset_id"]
        for d in catalog.load_table("lineage.datasets").scan().to_arrow().to_pylist()
    }
    orders, customers, revenue = (
        ids[("file", str(shop / "db" / t))] for t in ("orders", "customers", "revenue_by_country")
    )
    runs = catalog.load_table("lineage.runs").scan().to_arrow().to_pylist()
    app = next(r for r in runs if r["job_name"] == "orders_report")
    children = [r for r in runs if r["job_name"].startswith("orders_report.")]
    assert app["reported_state"] == "COMPLETE" and children
    assert {(r["parent_run_id"], r["reported_state"]) for r in children} == {(app["run_id"], "COMPLETE")}

    edges = catalog.load_table("lineage.column_edges").scan().to_arrow().to_pylist()
    into_revenue = {
        (e["source_dataset_id"], e["source_field"], e["target_field"]): e
        for e in edges
        if e["target_dataset_id"] == revenue
    }
    aggregated = into_revenue[(orders, "price", "revenue")]
    assert aggregated["is_direct"] and aggregated["subtypes"] == ["AGGREGATION"]
    assert into_revenue[(customers, "country", "country")]["subtypes"] == ["IDENTITY"]
    indirect = {(s, f): sorted(e["subtypes"]) for (s, f, t), e in into_revenue.items() if t is None}
    assert indirect[(orders, "customer_id")] == ["FILTER", "JOIN"]
    assert indirect[(customers, "customer_id")] == ["FILTER", "JOIN"]
    assert indirect[(customers, "country")] == ["GROUP_BY"]
    assert indirect[(orders, "status")] == ["FILTER"]

    paths = catalog.load_table("lineage.column_paths").scan().to_arrow().to_pylist()
    assert {
        (p["source_dataset_id"], p["source_field"], p["hops"], p["all_direct"])
        for p in paths
        if (p["target_dataset_id"], p["target_field"]) == (revenue, "revenue")
    } == {(orders, "price", 1, True)}

    # Two writes of the orders (the Spark integration names each Iceberg snapshot), each read by one build
    # of the report: the runs and versions the queries tie together.
    store = LineageStore(own_lake)
    nodes = store.nodes_of([orders, customers, revenue])

    def shown(found: list[history.DatasetVersion]) -> list[tuple]:
        return [(v.version, v.source, v.job_name, v.lifecycle_states) for v in found]

    order_versions = history.dataset_versions(store, nodes[orders])
    snapshots = [v for v in order_versions if v.source == history.PRODUCER]
    assert len(snapshots) == 2, shown(order_versions)
    newer, older = snapshots
    customer_snapshots = [
        v for v in history.dataset_versions(store, nodes[customers]) if v.source == history.PRODUCER
    ]
    assert len(customer_snapshots) == 1, shown(history.dataset_versions(store, nodes[customers]))
    report_versions = history.dataset_versions(store, nodes[revenue])
    reads = history.versions_read(store, [v.run_id for v in report_versions])
    read_orders = {
        run: (r.version, r.reported, r.written_by and r.written_by.run_id)
        for run, rows in reads.items()
        for r in rows
        if r.dataset.dataset_id == orders
    }
    latest_report = report_versions[0]
    # the rebuild read the second snapshot, the first build the first: named by the reads themselves
    assert read_orders[latest_report.run_id] == (newer.version, newer.version, newer.run_id), shown(
        report_versions
    )
    assert (older.version, older.version, older.run_id) in read_orders.values(), (
        read_orders,
        shown(snapshots),
    )
    chain = history.upstream_versions(store, nodes[revenue], latest_report.version, 1)
    assert [(s.version.version, s.depth) for s in chain][:1] == [(latest_report.version, 0)]
    assert {(s.version.dataset.dataset_id, s.version.version, s.depth) for s in chain[1:]} == {
        (orders, newer.version, 1),
        (customers, customer_snapshots[0].version, 1),
    }
