"""Jobs, runs and run liveness (lineage.transforms.model) on tiny inline events."""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import Row, SparkSession

from lineage.transforms import model, model_common
from tests.unit.model_events import at, events_df, job_event, job_type, parent, run_event, run_id, utc

FLINK = ("flink", "orders-enrich")
ENGINE = {"processing_engine": {"name": "flink", "version": "1.20.1", "openlineageAdapterVersion": "1.15.0"}}


def one_run(spark: SparkSession, events: list[dict[str, Any]]) -> Row:
    rows = model.runs(events_df(spark, events)).collect()
    assert len(rows) == 1
    return rows[0]


def test_late_running_after_complete_stays_complete(spark: SparkSession) -> None:
    r = run_id(1)
    row = one_run(
        spark,
        [
            run_event("START", at(0), r, FLINK),
            run_event("COMPLETE", at(120), r, FLINK),
            run_event("RUNNING", at(180), r, FLINK),
        ],
    )
    assert (row.reported_state, utc(row.ended_at), utc(row.last_event_at)) == ("COMPLETE", at(120), at(180))
    assert row.duration_seconds == 120.0


def test_terminal_tie_goes_to_the_most_severe_state(spark: SparkSession) -> None:
    r = run_id(1)
    row = one_run(spark, [run_event("COMPLETE", at(60), r, FLINK), run_event("FAIL", at(60), r, FLINK)])
    assert row.reported_state == "FAIL"


def test_latest_terminal_event_wins(spark: SparkSession) -> None:
    r = run_id(1)
    row = one_run(spark, [run_event("COMPLETE", at(200), r, FLINK), run_event("FAIL", at(100), r, FLINK)])
    assert (row.reported_state, utc(row.ended_at)) == ("COMPLETE", at(200))


def test_run_without_terminal_event_is_running_from_its_start(spark: SparkSession) -> None:
    r = run_id(1)
    # A RUNNING stamped before the START (clock skew) does not move started_at.
    row = one_run(
        spark,
        [
            run_event("RUNNING", at(0), r, FLINK),
            run_event("START", at(30), r, FLINK),
            run_event(None, at(90), r, FLINK),
        ],
    )
    assert (row.reported_state, utc(row.started_at), utc(row.ended_at), row.duration_seconds) == (
        "RUNNING",
        at(30),
        None,
        None,
    )


def _mixed_runs() -> list[dict[str, Any]]:
    a, b, c = run_id(1), run_id(2), run_id(3)
    error = {"message": "boom", "stackTrace": "Traceback ...", "programmingLanguage": "python"}
    return [
        run_event("START", at(0), a, FLINK, run_facets=ENGINE),
        run_event("RUNNING", at(60), a, FLINK, run_facets=ENGINE),
        run_event("COMPLETE", at(90), a, FLINK, run_facets=ENGINE),
        run_event("RUNNING", at(120), a, FLINK, run_facets=ENGINE),
        run_event("START", at(10), b, ("spark", "app")),
        run_event("FAIL", at(50), b, ("spark", "app"), run_facets={"errorMessage": error}),
        run_event("ABORT", at(50), b, ("spark", "app")),
        run_event("START", at(5), c, ("spark", "other")),
        run_event("RUNNING", at(7), c, ("spark", "other")),
    ]


def test_duplicated_events_give_identical_runs(spark: SparkSession) -> None:
    events = _mixed_runs()
    expected = model.runs(events_df(spark, events))
    actual = model.runs(events_df(spark, events + events[::2] + events[:3]))
    assert_df_equality(actual, expected, ignore_row_order=True)


def test_shuffled_and_reversed_events_give_identical_runs(spark: SparkSession) -> None:
    events = _mixed_runs()
    shuffled = events[:]
    random.Random(7).shuffle(shuffled)
    expected = model.runs(events_df(spark, events))
    assert_df_equality(model.runs(events_df(spark, events[::-1])), expected, ignore_row_order=True)
    assert_df_equality(model.runs(events_df(spark, shuffled)), expected, ignore_row_order=True)


def test_event_count_counts_distinct_events(spark: SparkSession) -> None:
    r = run_id(1)
    events = [run_event("START", at(0), r, FLINK), run_event("COMPLETE", at(60), r, FLINK)]
    assert one_run(spark, events * 3).event_count == 2


def test_failed_run_has_error_engine_and_nominal_time(spark: SparkSession) -> None:
    r = run_id(1)
    error = {
        "message": "Table not found",
        "stackTrace": "AnalysisException ...",
        "programmingLanguage": "python",
    }
    nominal = {
        "nominalTime": {"nominalStartTime": "2026-11-20T07:00:00Z", "nominalEndTime": "2026-11-20T08:00:00Z"}
    }
    row = one_run(
        spark,
        [
            run_event("START", at(0), r, FLINK, run_facets={**ENGINE, **nominal}),
            run_event("FAIL", at(30), r, FLINK, run_facets={"errorMessage": error}),
        ],
    )
    assert (row.reported_state, row.error_message, row.error_stack_trace, row.error_language) == (
        "FAIL",
        "Table not found",
        "AnalysisException ...",
        "python",
    )
    assert (row.processing_engine_name, row.processing_engine_version, row.openlineage_adapter_version) == (
        "flink",
        "1.20.1",
        "1.15.0",
    )
    assert (utc(row.nominal_start_time), utc(row.nominal_end_time)) == (at(-3600), at(0))


def test_spark_application_is_parent_and_root_of_its_job_runs(spark: SparkSession) -> None:
    app, app_job = run_id(1), ("spark", "stats_app")
    facet = {"parent": parent(app, app_job, root=(app, app_job))}
    children = [run_id(2), run_id(3)]
    events = [run_event("START", at(0), app, app_job), run_event("COMPLETE", at(100), app, app_job)]
    for i, child in enumerate(children):
        job = ("spark", f"stats_app.action_{i}")
        events += [
            run_event("START", at(10 + i), child, job, run_facets=facet),
            run_event("COMPLETE", at(20 + i), child, job, run_facets=facet),
        ]
    rows = {r.run_id: r for r in model.runs(events_df(spark, events)).collect()}
    # A run without a parent is its own root.
    assert [rows[app].parent_run_id, rows[app].root_run_id, rows[app].root_job_name] == [
        None,
        app,
        "stats_app",
    ]
    for child in children:
        assert (rows[child].parent_run_id, rows[child].parent_job_name) == (app, "stats_app")
        assert (rows[child].root_run_id, rows[child].root_job_namespace, rows[child].root_job_name) == (
            app,
            "spark",
            "stats_app",
        )


def test_airflow_dag_run_is_parent_of_task_runs_and_root_without_root_facet(spark: SparkSession) -> None:
    dag_run, dag = run_id(10), ("airflow", "daily_orders")
    task_run = run_id(11)
    events = [
        run_event("START", at(0), dag_run, dag),
        run_event(
            "START",
            at(5),
            task_run,
            ("airflow", "daily_orders.load"),
            run_facets={"parent": parent(dag_run, dag)},
        ),
        run_event("COMPLETE", at(9), dag_run, dag),
    ]
    rows = {r.run_id: r for r in model.runs(events_df(spark, events)).collect()}
    task = rows[task_run]
    assert (task.parent_run_id, task.parent_job_name, task.root_run_id, task.root_job_name) == (
        dag_run,
        "daily_orders",
        dag_run,
        "daily_orders",
    )
    assert rows[dag_run].reported_state == "COMPLETE"


def test_a_parent_known_from_children_keeps_its_job_when_a_later_child_omits_it(spark: SparkSession) -> None:
    """The parent run has no event of its own; the later child's parent facet names only the run: the job
    the earlier child named stays (a struct of two nulls is not "absent" to a null check)."""
    dag_run, dag = run_id(20), ("airflow", "nightly")
    named = parent(dag_run, dag)
    unnamed = {"run": {"runId": dag_run}}
    events = [
        run_event("START", at(5), run_id(21), ("airflow", "nightly.a"), run_facets={"parent": named}),
        run_event("START", at(9), run_id(22), ("airflow", "nightly.b"), run_facets={"parent": unnamed}),
    ]
    rows = {r.run_id: r for r in model.runs(events_df(spark, events)).collect()}
    assert (rows[dag_run].job_namespace, rows[dag_run].job_name, rows[dag_run].reported_state) == (
        "airflow",
        "nightly",
        None,
    )


def test_jobs_take_the_latest_facets_and_keep_absent_ones(spark: SparkSession) -> None:
    r = run_id(1)
    facets_v1 = {
        **job_type("STREAMING", "FLINK", "JOB"),
        "documentation": {"description": "old"},
        "ownership": {"owners": [{"name": "team:data", "type": "TEAM"}]},
        "tags": {"tags": [{"key": "env", "value": "prod", "source": "USER"}]},
        "sourceCodeLocation": {
            "type": "git",
            "url": "https://x/y",
            "repoUrl": "https://x",
            "path": "a.py",
            "version": "abc",
        },
    }
    facets_v2 = {"documentation": {"description": "new"}}
    spark_parent = {"parent": parent(run_id(9), ("spark", "app"))}
    events = [
        run_event("START", at(0), r, FLINK, job_facets=facets_v1, run_facets=spark_parent),
        run_event("RUNNING", at(60), r, FLINK, job_facets=facets_v2),
        run_event("COMPLETE", at(90), r, FLINK),
    ]
    rows = model.jobs(events_df(spark, events)).collect()
    assert len(rows) == 1
    job = rows[0]
    assert (job.integration, job.job_type, job.processing_type, job.description) == (
        "FLINK",
        "JOB",
        "STREAMING",
        "new",
    )
    assert (job.parent_job_namespace, job.parent_job_name) == ("spark", "app")
    assert [tuple(o) for o in job.owners] == [("team:data", "TEAM")]
    assert [tuple(t) for t in job.tags] == [("env", "prod", "USER")]
    assert (
        job.source_code_type,
        job.source_code_url,
        job.source_code_repo_url,
        job.source_code_path,
        job.source_code_version,
    ) == ("git", "https://x/y", "https://x", "a.py", "abc")
    assert (utc(job.first_seen), utc(job.last_seen)) == (at(0), at(90))


def test_jobs_include_jobs_seen_only_in_job_events(spark: SparkSession) -> None:
    events = [job_event(at(0), ("airflow", "static_dag"), job_facets=job_type("BATCH", "AIRFLOW", "DAG"))]
    rows = model.jobs(events_df(spark, events)).collect()
    assert [(r.job_name, r.integration, r.job_type) for r in rows] == [("static_dag", "AIRFLOW", "DAG")]


# ---- liveness ----

STUCK = ("lab", "supplier-stats")  # Flink 1.x: heartbeats every 60 s, then silence (cancelled, no ABORT)
HEALTHY = ("lab", "healthy")  # heartbeats every 60 s, last one 30 s before now
SLOW = ("lab", "slow-beat")  # heartbeats every 600 s: threshold 1800 s, above the floor
OVERRIDDEN = ("lab", "overridden")  # silent 200 s, override 100 s
DONE = ("lab", "done")  # COMPLETE long ago
NOW = at(10_000)


def _beats(run: str, job: tuple[str, str], start: float, period: float, count: int) -> list[dict[str, Any]]:
    return [
        run_event("START" if i == 0 else "RUNNING", at(start + i * period), run, job) for i in range(count)
    ]


@pytest.fixture(scope="module")
def liveness(spark: SparkSession) -> dict[str, Row]:
    last = NOW.timestamp() - at(0).timestamp()
    events = (
        _beats(run_id(1), STUCK, 0, 60, 6)  # last event at 300 s
        + _beats(run_id(2), HEALTHY, last - 30 - 300, 60, 6)
        + _beats(run_id(3), SLOW, last - 1000 - 1800, 600, 4)  # last event 1000 s before now
        + _beats(run_id(4), OVERRIDDEN, last - 200 - 60, 60, 2)
        + [run_event("START", at(0), run_id(5), DONE), run_event("COMPLETE", at(10), run_id(5), DONE)]
    )
    events_frame = events_df(spark, events)
    live = model.run_liveness(
        model.runs(events_frame), model.heartbeat_gaps(events_frame), NOW, overrides={"lab/overridden": 100}
    )
    return {r.job_name: r for r in live.collect()}


def test_stuck_flink_run_is_lost_with_reason(liveness: dict[str, Row]) -> None:
    row = liveness["supplier-stats"]
    assert (row.reported_state, row.inferred_state) == ("RUNNING", "LOST")
    # Deterministic text: when the run turns LOST and why, never how long ago anything was.
    assert row.liveness_reason == (
        "no event since 2026-11-20T08:05:00Z: LOST after 2026-11-20T08:20:00Z "
        "(threshold 900 s: 3 x median heartbeat 60 s, floor 900 s)"
    )
    assert utc(row.lost_after) == at(300 + 900)


def test_recent_heartbeat_keeps_run_running(liveness: dict[str, Row]) -> None:
    row = liveness["healthy"]
    assert (row.inferred_state, row.threshold_seconds) == ("RUNNING", 900.0)
    # Nothing stored grows with the clock: the deadline, not the seconds of silence.
    assert "silent_seconds" not in row.asDict()
    assert utc(row.lost_after) == NOW - timedelta(seconds=30) + timedelta(seconds=900)


def test_threshold_is_a_multiple_of_the_median_heartbeat_above_the_floor(liveness: dict[str, Row]) -> None:
    row = liveness["slow-beat"]
    assert (row.median_heartbeat_seconds, row.threshold_seconds) == (600.0, 1800.0)
    assert utc(row.lost_after) == NOW - timedelta(seconds=1000) + timedelta(seconds=1800)
    assert row.inferred_state == "RUNNING"


def test_liveness_is_lost_from_the_deadline_on(spark: SparkSession) -> None:
    events = events_df(spark, _beats(run_id(1), HEALTHY, 0, 60, 2))  # last event at 60 s, threshold 900 s
    runs, beats = model.runs(events), model.heartbeat_gaps(events)

    def state_at(seconds: float) -> Row:
        (row,) = model.run_liveness(runs, beats, at(seconds)).collect()
        return row

    before, on = state_at(959), state_at(960)
    assert (before.inferred_state, on.inferred_state) == ("RUNNING", "LOST")
    # Only the state depends on the reference time: every other column is the same either way.
    assert {k: v for k, v in before.asDict().items() if k != "inferred_state"} == {
        k: v for k, v in on.asDict().items() if k != "inferred_state"
    }


def test_per_job_override_replaces_the_threshold(liveness: dict[str, Row]) -> None:
    row = liveness["overridden"]
    assert (row.threshold_seconds, row.inferred_state) == (100.0, "LOST")
    assert row.liveness_reason == (
        "no event since 2026-11-20T10:43:20Z: LOST after 2026-11-20T10:45:00Z "
        "(threshold 100 s: override for lab/overridden)"
    )


def test_terminal_run_keeps_its_reported_state(liveness: dict[str, Row]) -> None:
    row = liveness["done"]
    assert (row.reported_state, row.inferred_state) == ("COMPLETE", "COMPLETE")


def test_heartbeat_gaps_median_per_job(spark: SparkSession) -> None:
    events = _beats(run_id(1), STUCK, 0, 60, 4) + _beats(run_id(2), STUCK, 1000, 120, 3)
    rows = model.heartbeat_gaps(events_df(spark, events)).collect()
    # gaps 60, 60, 60, 120, 120 -> median 60
    assert [(r.job_name, r.median_gap_seconds, r.gap_count) for r in rows] == [("supplier-stats", 60.0, 5)]


def test_weighted_median_of_run_gap_multisets_is_the_median_of_the_gaps(spark: SparkSession) -> None:
    """The jobs' medians come from per-run gap multisets (a gap and how often it occurs): the same exact
    median as over the gaps one by one, with an even count interpolated between the middle two."""
    events = (
        _beats(run_id(1), STUCK, 0, 60, 4)  # 60 x3
        + _beats(run_id(2), STUCK, 1000, 120, 2)  # 120
        + _beats(run_id(3), HEALTHY, 0, 10, 2)  # 10
        + _beats(run_id(4), HEALTHY, 0, 30, 2)  # 30
        + _beats(run_id(5), SLOW, 0, 600, 2)  # 600, and the same beats again (duplicates count once)
        + _beats(run_id(5), SLOW, 0, 600, 2)
    )
    frame = events_df(spark, events)
    gaps = model.run_heartbeat_gaps(frame)
    assert sorted((r.run_id, r.gap_seconds, r.gap_count) for r in gaps.collect()) == [
        (run_id(1), 60.0, 3),
        (run_id(2), 120.0, 1),
        (run_id(3), 10.0, 1),
        (run_id(4), 30.0, 1),
        (run_id(5), 600.0, 1),
    ]
    medians = {r.job_name: (r.median_gap_seconds, r.gap_count) for r in model.job_heartbeats(gaps).collect()}
    assert medians == {"supplier-stats": (60.0, 4), "healthy": (20.0, 2), "slow-beat": (600.0, 1)}


def test_job_state_folds_ranges_in_any_order_into_the_state_of_all_events(spark: SparkSession) -> None:
    """``job_latest`` of two ranges folded (overlapping, either order) equals that of all their events: a
    facet an event leaves out is kept, a later one replaces it, first/last seen span both."""
    r1, r2 = run_id(1), run_id(2)
    events = [
        run_event("START", at(0), r1, FLINK, job_facets={**job_type("STREAMING", "FLINK", "JOB")}),
        run_event("RUNNING", at(60), r1, FLINK, job_facets={"documentation": {"description": "old"}}),
        run_event("START", at(100), r2, FLINK, run_facets={"parent": parent(run_id(9), ("spark", "app"))}),
        run_event("RUNNING", at(160), r2, FLINK, job_facets={"documentation": {"description": "new"}}),
        job_event(at(50), ("airflow", "dag"), job_facets=job_type("BATCH", "AIRFLOW", "DAG")),
    ]
    whole = model.job_latest(events_df(spark, events))
    for first, second in ((events[:2], events[2:]), (events[3:], events[:4]), (events[::2], events[1::2])):
        folded = model.fold_job_latest(
            model.job_latest(events_df(spark, first)), model.job_latest(events_df(spark, second))
        )
        assert_df_equality(folded, whole, ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(
        model.jobs_from_latest(whole), model.jobs(events_df(spark, events)), ignore_row_order=True
    )
    job = {r.job_name: r for r in model.jobs_from_latest(whole).collect()}[FLINK[1]]
    assert (job.description, job.job_type, job.parent_job_name) == ("new", "JOB", "app")
    assert (utc(job.first_seen), utc(job.last_seen)) == (at(0), at(160))


def test_run_part_is_the_day_of_a_uuid7_and_a_hash_bucket_otherwise(spark: SparkSession) -> None:
    # A UUIDv7 whose timestamp is 2026-11-27T23:59:59.999Z, and one a millisecond later (the next day).
    last_ms = 1_795_823_999_999
    v7 = [f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7abc-8def-0123456789ab" for ms in (last_ms, last_ms + 1)]
    v4 = "3f2b1c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
    frame = spark.createDataFrame(
        [(v7[0],), (v7[1].upper(),), (v4,), (None,), ("not-a-uuid",)], "run_id string"
    )
    parts = [row[0] for row in frame.select(model.run_part(frame.run_id)).collect()]
    day = last_ms // 86_400_000
    assert parts[:2] == [day, day + 1]
    assert day == (date(2026, 11, 27) - date(1970, 1, 1)).days
    # Ids without a time: one of RUN_PART_BUCKETS negative buckets, the same every time; null stays null.
    assert all(-model_common.RUN_PART_BUCKETS <= part <= -1 for part in (parts[2], parts[4]))
    assert parts[3] is None
    again = [row[0] for row in frame.select(model.run_part(frame.run_id)).collect()]
    assert again == parts
