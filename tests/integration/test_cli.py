"""The `lineage` console script, run as a user runs it, on a catalog built by the real pipeline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lineage.batch.build import build_lineage
from lineage.ingest.stream import run_ingest
from tests.fixtures.browser import open_page
from tests.fixtures.pipeline import CLOSE_ME_JOB, PARENT_ID, Pipeline

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).with_name("lineage"))
SUPPLIER_STATS = "s3://warehouse/default.db/supplier_stats"
ICEBERG_ORDERS = "s3://warehouse/default.db/orders"
KAFKA_ORDERS = "kafka://kafka-1:19092/orders"
SPARK_OVERWRITE = "fh-local/supplier_stats_app.overwrite_by_expression_default_supplier_stats"


def run_cli(env: dict[str, str], *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([LINEAGE, *args], env=env, capture_output=True, text=True, timeout=120)
    report = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == expect, report
    return done


def cli_json(env: dict[str, str], *args: str) -> Any:
    return json.loads(run_cli(env, *args, "--json").stdout)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("lineage: ")
    return lines[0]


def by_label(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n["label"]: n for n in nodes}


def test_upstream_resolves_an_alias_to_the_canonical_dataset(lab_pipeline: Pipeline) -> None:
    data = cli_json(lab_pipeline.env, "upstream", "hive://hive-metastore:9083/default.supplier_stats")
    assert data["root"]["label"] == SUPPLIER_STATS
    assert data["root"]["kind"] == "dataset"
    nodes = by_label(data["nodes"])
    assert nodes[SPARK_OVERWRITE]["hops"] == 1
    assert nodes[SPARK_OVERWRITE]["state"] == "FAIL"  # the latest retry failed
    assert nodes[ICEBERG_ORDERS]["hops"] == 2
    assert nodes["http://jobmanager-2:8081/iceberg-ingestion"]["hops"] == 3
    assert nodes[KAFKA_ORDERS]["hops"] == 4
    edge = {"source": nodes[ICEBERG_ORDERS]["id"], "target": nodes[SPARK_OVERWRITE]["id"], "kind": "input"}
    assert edge in data["edges"]


def test_downstream_depth_and_as_of(lab_pipeline: Pipeline) -> None:
    env = lab_pipeline.env
    near = cli_json(env, "downstream", "kafka://broker:9092/orders", "--depth", "1")  # alias rule
    assert near["root"]["label"] == KAFKA_ORDERS
    assert {n["hops"] for n in near["nodes"]} == {1}
    jobs = by_label(near["nodes"])
    assert set(jobs) == {
        "fh-local/orders-s3-sink",
        "fh-local/supplier-stats",
        "http://jobmanager-2:8081/iceberg-ingestion",
    }
    assert jobs["fh-local/supplier-stats"]["state"] == "LOST"  # the stuck Flink 1.x job

    early = cli_json(env, "downstream", KAFKA_ORDERS, "--as-of", "2026-11-20T08:03:00Z")
    assert set(by_label(early["nodes"])) == {"fh-local/orders-s3-sink", "s3://orders-archive/topics/orders"}
    assert early["as_of"] == "2026-11-20T08:03:00Z"


def test_column_lineage_and_impact_of_one_field(lab_pipeline: Pipeline) -> None:
    env = lab_pipeline.env
    up = cli_json(env, "upstream", SUPPLIER_STATS, "--columns")
    edges = {(e["source"], e["source_field"], e["target"], e["target_field"]) for e in up["column_edges"]}
    assert (ICEBERG_ORDERS, "price", SUPPLIER_STATS, "total_price") in edges
    assert (KAFKA_ORDERS, "price", ICEBERG_ORDERS, "price") in edges

    impact = cli_json(env, "impact", f"{KAFKA_ORDERS}.price")
    columns = {(c["dataset"], c["field"]): c["jobs"] for c in impact["columns"]}
    assert columns[(ICEBERG_ORDERS, "price")] == 1
    assert columns[(SUPPLIER_STATS, "total_price")] == 2
    assert (SUPPLIER_STATS, "supplier") not in columns  # price does not flow into supplier
    assert {d["dataset"]: d["hops"] for d in impact["datasets"]} == {ICEBERG_ORDERS: 2, SUPPLIER_STATS: 4}
    assert impact["root"]["field"] == "price"

    text = run_cli(env, "impact", f"{KAFKA_ORDERS}.price").stdout
    assert "supplier_stats.total_price" in text


def test_runs_filters_and_run_details(lab_pipeline: Pipeline) -> None:
    env = lab_pipeline.env
    lost = cli_json(env, "runs", "--state", "lost")
    assert lost and {r["inferred_state"] for r in lost} == {"LOST"}
    assert ("fh-local", "supplier-stats") in {(r["job_namespace"], r["job_name"]) for r in lost}
    assert all(r["reported_state"] == "RUNNING" for r in lost)

    failed = cli_json(env, "runs", "--job", SPARK_OVERWRITE, "--state", "failed")
    assert len(failed) == 1
    assert failed[0]["error_message"] == "Table default.orders not found"

    since = cli_json(env, "runs", "--since", "2026-11-20T10:30:00Z", "--job", "fh-local/supplier_stats_app")
    assert [r["job_name"] for r in since] == ["supplier_stats_app"]

    app = cli_json(env, "run", since[0]["run_id"][:8])  # a unique prefix is enough
    assert app["run_id"] == since[0]["run_id"]
    assert len(app["children"]) >= 2
    assert {c["parent_run_id"] for c in app["children"]} == {app["run_id"]}

    done = cli_json(env, "runs", "--job", SPARK_OVERWRITE, "--state", "complete")
    child = cli_json(env, "run", done[0]["run_id"])
    datasets = {(d["direction"], d["dataset"]) for d in child["datasets"]}
    assert datasets == {("input", ICEBERG_ORDERS), ("output", SUPPLIER_STATS)}
    assert child["parent_run_id"] == app["run_id"]
    # the lab's producers name no versions: the overwrite's is its run; it read the ingestion's write
    assert [(v["dataset"], v["version"]) for v in child["versions_written"]] == [
        (SUPPLIER_STATS, child["run_id"])
    ]
    [read] = child["versions_read"]
    assert (read["dataset"], read["written_by_job"]) == (
        ICEBERG_ORDERS,
        "http://jobmanager-2:8081/iceberg-ingestion",
    )
    assert read["version"] == read["written_by_run_id"]
    versions = cli_json(env, "versions", SUPPLIER_STATS)["versions"]
    assert [(v["run_id"], v["job"].rsplit(".", 1)[1]) for v in versions] == [
        (child["run_id"], "overwrite_by_expression_default_supplier_stats"),
        (versions[1]["run_id"], "create_table_default_supplier_stats"),
    ]
    text = run_cli(env, "run", failed[0]["run_id"]).stdout
    assert "error" in text and failed[0]["run_id"] in text


def test_health_says_the_hourly_table_that_stopped_is_late(lab_pipeline: Pipeline) -> None:
    # The lab's fx-rates-loader wrote fx_rates on four hourly nominal times, then stopped (days ago).
    health = cli_json(lab_pipeline.env, "health", "s3://warehouse/default.db/fx_rates")
    assert health["state"] == "late"
    assert [p["kind"] for p in health["problems"]] == ["late"]
    fresh = health["freshness"]
    assert (fresh["expected_interval_seconds"], fresh["successful_writes"]) == (3600, 4)
    text = run_cli(lab_pipeline.env, "health", "fx_rates").stdout
    assert ": late" in text.splitlines()[0] and "late since" in text


def test_our_own_jobs_are_in_the_lineage(lab_pipeline: Pipeline) -> None:
    env = lab_pipeline.env
    runs = cli_json(env, "runs", "--job", "lineage-lakehouse/build_lineage")
    assert runs and runs[-1]["reported_state"] == "COMPLETE"
    assert runs[-1]["parent_run_id"] == PARENT_ID.rsplit("/", 1)[1]
    assert runs[-1]["processing_engine_name"] == "spark"

    raw_events = lab_pipeline.settings.catalog.warehouse
    down = cli_json(env, "downstream", "lineage-lakehouse/ingest_events", "--depth", "3")
    labels = by_label(down["nodes"])
    raw = [label for label in labels if label.endswith("raw/events")]
    assert raw and str(raw_events) in raw[0]  # the table location, as OpenLineage names Iceberg tables
    assert "lineage-lakehouse/build_lineage" in labels  # reads raw.events (2 hops on)
    # The catalog table name is a symlink of the same dataset.
    assert cli_json(env, "upstream", "raw.events", "--depth", "1")["root"]["label"] == raw[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["upstream", "no-such-dataset"], "unknown node 'no-such-dataset'"),
        (["downstream", KAFKA_ORDERS, "--as-of", "yesterday-ish"], "bad time 'yesterday-ish'"),
        (["runs", "--state", "sleeping"], "unknown state 'sleeping'"),
        (["run", "not-a-run"], "not a run id"),
        (["run", "00000000-0000-0000-0000-000000000000"], "unknown run"),
        (["impact", f"{KAFKA_ORDERS}.no_such_field"], "has no field 'no_such_field'"),
        (["impact", "fh-local/orders-s3-sink"], "is a job"),
    ],
)
def test_errors_are_one_line(lab_pipeline: Pipeline, args: list[str], message: str) -> None:
    assert message in one_line_error(run_cli(lab_pipeline.env, *args, expect=2))


def test_empty_and_unreachable_catalogs(lab_pipeline: Pipeline, tmp_path: Path) -> None:
    missing = {**lab_pipeline.env, "LINEAGE__CATALOG__SQLITE_PATH": str(tmp_path / "nothing.db")}
    assert "no catalog at" in one_line_error(run_cli(missing, "runs", expect=2))
    assert not (tmp_path / "nothing.db").exists()  # a query never creates a catalog

    empty_db = tmp_path / "empty.db"
    shutil.copy(lab_pipeline.settings.catalog.sqlite_path, empty_db)
    empty = {**lab_pipeline.env, "LINEAGE__CATALOG__SQLITE_PATH": str(empty_db)}
    empty["LINEAGE__CATALOG__NAME"] = "another"  # same file, a catalog name with no tables
    assert "does not exist: run the build first" in one_line_error(run_cli(empty, "upstream", "a", expect=2))

    rest = {
        **lab_pipeline.env,
        "LINEAGE__CATALOG__PROPERTIES": '{"type": "rest", "uri": "http://127.0.0.1:9"}',
    }
    assert "cannot open catalog" in one_line_error(run_cli(rest, "runs", expect=2))


def test_close_run_sends_a_real_terminal_event(lab_pipeline: Pipeline, spark: Any) -> None:
    env = lab_pipeline.env
    run_id = lab_pipeline.close_me_run_id
    before = cli_json(env, "run", run_id)
    assert (before["job_namespace"], before["job_name"]) == CLOSE_ME_JOB
    assert before["inferred_state"] == "LOST"

    done = run_cli(env, "close-run", run_id, "--state", "ABORT", "--reason", "operator: job was cancelled")
    assert f"sent ABORT for run {run_id}" in done.stdout

    settings = lab_pipeline.settings
    run_ingest(spark, settings)  # the raw log stays the source of truth: land the event, then build
    build_lineage(spark, settings)
    after = cli_json(env, "run", run_id)
    assert after["reported_state"] == "ABORT"
    assert after["inferred_state"] == "ABORT"
    assert after["error_message"] == "operator: job was cancelled"

    again = run_cli(env, "close-run", run_id, "--state", "FAIL", expect=2)
    assert "already reported ABORT" in one_line_error(again)


def test_close_run_with_an_unreachable_transport_fails(lab_pipeline: Pipeline, tmp_path: Path) -> None:
    yml = tmp_path / "openlineage.yml"
    yml.write_text("transport:\n  type: http\n  url: http://127.0.0.1:9\n  timeout: 1\n")
    env = {**lab_pipeline.env, "OPENLINEAGE_CONFIG": str(yml)}
    lost = cli_json(env, "runs", "--state", "lost", "--job", "fh-local/supplier-stats")
    done = run_cli(env, "close-run", lost[0]["run_id"], "--state", "FAIL", expect=1)
    assert "could not send the FAIL event" in one_line_error(done)


def test_graph_formats(lab_pipeline: Pipeline, tmp_path: Path) -> None:
    env = lab_pipeline.env
    data = json.loads(run_cli(env, "graph", KAFKA_ORDERS, "--format", "json").stdout)
    nodes = {n["id"]: n for n in data["nodes"]}
    assert data["root"] == f"dataset:{KAFKA_ORDERS}"
    assert nodes["job:fh-local/supplier-stats"]["state"] == "LOST"
    assert nodes["job:fh-local/orders-source"]["hops"] == 1  # upstream side of a "both" graph
    assert {"name": "price", "type": "STRING"} in nodes[f"dataset:{KAFKA_ORDERS}"]["fields"]
    assert any(
        "kafka://broker:9092/orders" in a for a in nodes[f"dataset:{KAFKA_ORDERS}"]["details"]["aliases"]
    )

    dot = tmp_path / "g.dot"
    done = run_cli(env, "graph", "orders", "--format", "dot", "-o", str(dot), "--depth", "2", "--columns")
    assert f"wrote {dot}" in done.stdout
    assert dot.read_text().startswith("digraph")
    mermaid = run_cli(env, "graph", KAFKA_ORDERS, "--format", "mermaid", "--direction", "upstream").stdout
    assert (
        mermaid.startswith("flowchart LR") and "orders-source" in mermaid and "supplier-stats" not in mermaid
    )

    bad = run_cli(env, "graph", KAFKA_ORDERS, "--format", "html", "-o", "/proc/nope/graph.html", expect=1)
    assert "cannot write" in one_line_error(bad)


def test_graph_page_of_the_lab_in_chromium(lab_pipeline: Pipeline, tmp_path: Path) -> None:
    html = tmp_path / "lab.html"
    run_cli(lab_pipeline.env, "graph", "kafka://broker:9092/orders", "-o", str(html))
    with open_page(html) as browser:
        ids = set(browser.js("(cy) => cy.nodes().map((n) => n.id())"))
        assert {
            f"dataset:{KAFKA_ORDERS}",
            "job:fh-local/supplier-stats",
            "job:http://jobmanager-2:8081/iceberg-ingestion",
            f"dataset:{SUPPLIER_STATS}",
        } <= ids
        browser.click_node("job:fh-local/supplier-stats")
        details = browser.page.locator("#details").inner_text()
        assert "supplier-stats" in details and "LOST" in details
        browser.page.locator("#columns-toggle").click()
        browser.wait_ready()
        assert browser.js("(cy) => cy.edges('[kind = \"column\"]').length") > 0
        shot = tmp_path / "lab.png"  # kept under the test's tmp dir
        browser.page.screenshot(path=str(shot))
        assert shot.stat().st_size > 20_000
        assert browser.blocked == [] and browser.errors == []
