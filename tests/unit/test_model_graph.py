"""run_io, job_edges, dataset_edges and the summaries (lineage.transforms.model), plus the demo event set."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from lineage.transforms import model
from tests.unit.model_events import (
    at,
    dataset,
    dataset_event,
    demo_event_dicts,
    events_df,
    job_event,
    run_event,
    run_id,
    utc,
)

HIVE = "hive://hive-metastore:9083"
FLINK2, STATS, EXPORT, COMPACT = (
    ("flink2", "ingest"),
    ("spark", "stats"),
    ("airflow", "export"),
    ("spark", "compact"),
)
TOPIC = ("kafka://kafka-1:19092", "orders")
ORDERS = ("s3://warehouse", "default.db/orders")
STATS_TABLE = ("s3://warehouse", "default.db/stats")
PG = ("postgres://db:5432", "shop.public.stats")
F_RUN, S_RUN, S_FAILED, C_RUN = run_id(1), run_id(2), run_id(3), run_id(4)


def _scenario() -> list[dict[str, Any]]:
    flink_out = dataset(*ORDERS, symlinks=[(HIVE, "default.orders")])
    spark_in = dataset("s3a://warehouse", "default.db/orders/", symlinks=[(HIVE, "default.orders")])
    return [
        # Flink 2.x: datasets on START only, then RUNNING and ABORT without any.
        run_event("START", at(0), F_RUN, FLINK2, inputs=[dataset(*TOPIC)], outputs=[flink_out]),
        run_event("RUNNING", at(60), F_RUN, FLINK2),
        run_event("ABORT", at(3600), F_RUN, FLINK2),
        run_event(
            "START",
            at(100),
            S_RUN,
            STATS,
            inputs=[spark_in],
            outputs=[dataset(*STATS_TABLE, output_stats={"rowCount": 10})],
        ),
        run_event(
            "COMPLETE",
            at(160),
            S_RUN,
            STATS,
            inputs=[spark_in],
            outputs=[dataset(*STATS_TABLE, output_stats={"rowCount": 240, "size": 1024, "fileCount": 2})],
        ),
        run_event("START", at(500), S_FAILED, STATS, inputs=[spark_in]),
        run_event("FAIL", at(520), S_FAILED, STATS),
        # Compaction reads and writes the same table: no dataset self-loop.
        run_event("COMPLETE", at(700), C_RUN, COMPACT, inputs=[dataset(*ORDERS)], outputs=[dataset(*ORDERS)]),
        # Static lineage: a JobEvent and a DatasetEvent, no run.
        job_event(at(200), EXPORT, inputs=[dataset(*STATS_TABLE)], outputs=[dataset(*PG)]),
        dataset_event(at(210), dataset(*PG, fields=[("supplier", "string")])),
    ]


def _ids(frame: DataFrame) -> dict[str, tuple[str, str]]:
    return {r.dataset_id: (r.namespace, r.name) for r in frame.collect()}


@pytest.fixture(scope="module")
def built(spark: SparkSession) -> Iterator[dict[str, Any]]:
    """The whole model on the scenario, each output collected once (persisted inputs, like the build job)."""
    events = events_df(spark, _scenario())
    mentions = model.dataset_mentions(events).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    runs = model.runs(events).localCheckpoint()
    live = model.run_liveness(runs, model.heartbeat_gaps(events), at(4000))
    datasets = model.datasets(mentions, aliases).localCheckpoint()
    schemas = model.dataset_schemas(mentions, aliases)
    io = model.run_io(mentions, aliases).localCheckpoint()
    edges = model.job_edges(io, runs, model.static_io(mentions, aliases)).localCheckpoint()
    flows = model.dataset_edges(edges).localCheckpoint()
    names = _ids(datasets)
    yield {
        "names": names,
        "run_io": io.collect(),
        "job_edges": edges.collect(),
        "dataset_edges": flows.collect(),
        "job_summary": {(r.job_namespace, r.job_name): r for r in model.job_summary(live, edges).collect()},
        "dataset_summary": {
            names[r.dataset_id]: r
            for r in model.dataset_summary(datasets, edges, flows, io, runs, schemas).collect()
        },
    }
    for frame in (mentions, aliases, runs, datasets, io, edges, flows):
        frame.unpersist()


def test_flink2_datasets_sent_on_start_only_are_in_run_io(built: dict[str, Any]) -> None:
    names = built["names"]
    got = {
        (names[r.dataset_id], r.direction, utc(r.first_seen)) for r in built["run_io"] if r.run_id == F_RUN
    }
    assert got == {(TOPIC, "input", at(0)), (ORDERS, "output", at(0))}


def test_run_io_keeps_latest_output_statistics(built: dict[str, Any]) -> None:
    [row] = [r for r in built["run_io"] if r.run_id == S_RUN and r.direction == "output"]
    assert (row.row_count, row.size_bytes, row.file_count) == (240, 1024, 2)
    assert (utc(row.first_seen), utc(row.last_seen)) == (at(100), at(160))


def test_run_io_uses_canonical_dataset_for_every_name(built: dict[str, Any]) -> None:
    names = built["names"]
    [row] = [r for r in built["run_io"] if r.run_id == S_RUN and r.direction == "input"]
    assert names[row.dataset_id] == ORDERS


def test_job_edges_count_runs_and_extend_to_the_runs_last_event(built: dict[str, Any]) -> None:
    names = built["names"]
    got = {((r.job_namespace, r.job_name), names[r.dataset_id], r.direction): r for r in built["job_edges"]}
    assert got[(STATS, ORDERS, "input")].run_count == 2
    assert got[(STATS, STATS_TABLE, "output")].run_count == 1
    flink_out = got[(FLINK2, ORDERS, "output")]
    assert (utc(flink_out.first_seen), utc(flink_out.last_seen)) == (at(0), at(3600))


def test_job_event_gives_static_job_edges_without_runs(built: dict[str, Any]) -> None:
    names = built["names"]
    got = {
        (names[r.dataset_id], r.direction, r.run_count)
        for r in built["job_edges"]
        if (r.job_namespace, r.job_name) == EXPORT
    }
    assert got == {(STATS_TABLE, "input", 0), (PG, "output", 0)}


def test_dataset_edges_through_jobs_without_self_loops(built: dict[str, Any]) -> None:
    names = built["names"]
    got = {
        (names[r.source_dataset_id], names[r.target_dataset_id], (r.job_namespace, r.job_name)): (
            utc(r.first_seen),
            utc(r.last_seen),
        )
        for r in built["dataset_edges"]
    }
    assert got == {
        (TOPIC, ORDERS, FLINK2): (at(0), at(3600)),
        (ORDERS, STATS_TABLE, STATS): (at(100), at(520)),
        (STATS_TABLE, PG, EXPORT): (at(200), at(200)),
    }


def test_job_summary_counts(built: dict[str, Any]) -> None:
    row = built["job_summary"][STATS]
    assert (row.run_count, row.completed_runs, row.failed_runs, row.success_rate) == (2, 1, 1, 0.5)
    assert (row.last_run_id, row.last_run_state) == (S_FAILED, "FAIL")
    assert (row.median_duration_seconds, row.input_count, row.output_count) == (40.0, 1, 1)
    assert (row.upstream_job_count, row.downstream_job_count) == (2, 1)  # flink2 + compact write orders
    static = built["job_summary"][EXPORT]
    assert (static.run_count, static.input_count, static.output_count, static.upstream_job_count) == (
        0,
        1,
        1,
        1,
    )


def test_dataset_summary_producers_consumers_and_freshness(built: dict[str, Any]) -> None:
    orders = built["dataset_summary"][ORDERS]
    assert [tuple(j) for j in orders.producing_jobs] == [FLINK2, COMPACT]
    assert [tuple(j) for j in orders.consuming_jobs] == [COMPACT, STATS]
    # The aborted Flink run kept writing until its ABORT at 3600, after the compaction run (COMPLETE at 700).
    assert (utc(orders.last_write_at), orders.last_write_run_id) == (at(3600), F_RUN)
    assert (orders.upstream_dataset_count, orders.downstream_dataset_count) == (1, 1)
    pg = built["dataset_summary"][PG]
    assert (pg.producer_count, pg.last_write_at, pg.schema_version_count, pg.upstream_dataset_count) == (
        1,
        None,
        1,
        1,
    )


def test_demo_events_merge_names_and_flag_the_stuck_flink_run(spark: SparkSession) -> None:
    events = events_df(spark, demo_event_dicts())
    mentions = model.dataset_mentions(events).localCheckpoint()
    # The demo's components have diameter <= 2; 4 rounds keep the test fast.
    aliases = model.dataset_aliases(
        mentions, [("kafka://broker:9092", "kafka://kafka-1:19092")], max_iterations=4
    )
    got = {
        (r.alias_namespace, r.alias_name): (r.dataset_namespace, r.dataset_name) for r in aliases.collect()
    }
    iceberg, topic = ("s3://warehouse", "default.db/orders"), ("kafka://kafka-1:19092", "orders")
    for alias in [("s3a://warehouse", "default.db/orders/"), (HIVE, "default.orders"), iceberg]:
        assert got[alias] == iceberg
    for alias in [
        ("kafka://broker:9092", "orders"),
        ("kafka://kafka-1:19092", "default_catalog.default_database.orders"),
    ]:
        assert got[alias] == topic
    assert len(set(got.values())) == 6  # with fx_rates, written by the hourly loader alone
    runs = model.runs(events)
    live = model.run_liveness(runs, model.heartbeat_gaps(events), at(4 * 3600)).where(
        "inferred_state = 'LOST'"
    )
    assert [(r.job_name, r.reported_state) for r in live.collect()] == [("supplier-stats", "RUNNING")]
    mentions.unpersist()


def test_run_io_keeps_the_version_and_schema_each_run_read_or_wrote(spark: SparkSession) -> None:
    fields = [("id", "long"), ("total", "double")]
    events = events_df(
        spark,
        [
            # The writer names the version on its terminal event only, and a schema on both.
            run_event("START", at(0), run_id(1), STATS, outputs=[dataset(*ORDERS, fields=fields[:1])]),
            run_event(
                "COMPLETE", at(10), run_id(1), STATS, outputs=[dataset(*ORDERS, fields=fields, version="101")]
            ),
            run_event(
                "COMPLETE",
                at(20),
                run_id(2),
                EXPORT,
                inputs=[dataset(*ORDERS, version="101")],
                outputs=[dataset(*PG)],
            ),
        ],
    )
    # Materialised once, as the build does: three outputs below read them.
    mentions = model.dataset_mentions(events).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    names = _ids(model.datasets(mentions, aliases))
    got = {
        (r.run_id, names[r.dataset_id], r.direction): (r.dataset_version, r.schema_hash)
        for r in model.run_io(mentions, aliases).collect()
    }
    schemas = {
        (names[r.dataset_id], r.version): r.schema_hash
        for r in model.dataset_schemas(mentions, aliases).collect()
    }
    assert got == {
        (run_id(1), ORDERS, "output"): ("101", schemas[(ORDERS, 2)]),  # the latest schema of the run
        (run_id(2), ORDERS, "input"): ("101", None),
        (run_id(2), PG, "output"): (None, None),
    }
