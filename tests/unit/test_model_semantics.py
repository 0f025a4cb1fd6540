"""Run and job semantics on tiny inline events: unknown start times, roots, parents without events of their
own, job-to-job dependencies (OpenLineage's jobDependencies facet, Airflow's task ids, parent/child)."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import SparkSession

from lineage.transforms import columns, model
from tests.unit.model_events import at, dataset, events_df, parent, run_event, run_id, utc

DAG = ("airflow", "daily_orders")


def test_run_seen_only_through_its_complete_has_no_start_and_no_duration(spark: SparkSession) -> None:
    r = run_id(1)
    [row] = model.runs(events_df(spark, [run_event("COMPLETE", at(60), r)])).collect()
    assert (row.reported_state, row.started_at, utc(row.ended_at), row.duration_seconds) == (
        "COMPLETE",
        None,
        at(60),
        None,
    )


def test_run_first_seen_running_starts_at_its_first_non_terminal_event(spark: SparkSession) -> None:
    r = run_id(1)
    events = [
        run_event("RUNNING", at(10), r),
        run_event("RUNNING", at(20), r),
        run_event("COMPLETE", at(50), r),
    ]
    [row] = model.runs(events_df(spark, events)).collect()
    assert (utc(row.started_at), row.duration_seconds) == (at(10), 40.0)


def test_parent_known_only_from_its_children_gets_a_row_of_unknown_state(spark: SparkSession) -> None:
    dag_run, tasks = run_id(10), [run_id(11), run_id(12)]
    events = [
        run_event(
            "START", at(i), task, (DAG[0], f"daily_orders.t{i}"), run_facets={"parent": parent(dag_run, DAG)}
        )
        for i, task in enumerate(tasks)
    ]
    runs = model.runs(events_df(spark, events))
    rows = {r.run_id: r for r in runs.collect()}
    assert set(rows) == {dag_run, *tasks}
    dag = rows[dag_run]
    assert (dag.job_namespace, dag.job_name, dag.reported_state, dag.event_count) == (*DAG, None, 0)
    assert (dag.root_run_id, dag.parent_run_id, dag.started_at) == (dag_run, None, None)
    assert {rows[t].root_run_id for t in tasks} == {dag_run}
    lively = {
        r.run_id: r
        for r in model.run_liveness(
            runs,
            spark.createDataFrame([], "job_namespace string, job_name string, median_gap_seconds double"),
            datetime(2026, 11, 21, tzinfo=UTC),
        ).collect()
    }
    assert lively[dag_run].inferred_state == "UNKNOWN"
    assert "parent" in lively[dag_run].liveness_reason
    assert {lively[t].inferred_state for t in tasks} == {"LOST"}


def test_parent_row_comes_from_its_own_events_once_it_sends_them(spark: SparkSession) -> None:
    dag_run, task = run_id(10), run_id(11)
    events = [
        run_event(
            "START",
            at(5),
            task,
            ("airflow", "daily_orders.load"),
            run_facets={"parent": parent(dag_run, DAG)},
        ),
        run_event("COMPLETE", at(9), dag_run, DAG),
    ]
    rows = {r.run_id: r for r in model.runs(events_df(spark, events)).collect()}
    assert len(rows) == 2
    assert (rows[dag_run].reported_state, rows[dag_run].event_count) == ("COMPLETE", 1)


def _deps(spark: SparkSession, events: list[dict]) -> dict[tuple[str, str, str], object]:
    rows = model.job_dependencies(events_df(spark, events)).collect()
    return {(r.upstream_job_name, r.downstream_job_name, r.source): r for r in rows}


def _declared(direction: str, jobs: list[tuple[str, str]], run: str | None = None, **rules: str) -> dict:
    items = []
    for ns, name in jobs:
        item: dict = {"job": {"namespace": ns, "name": name}, **rules}
        if run:
            item["run"] = {"runId": run}
        items.append(item)
    return {direction: items}


def test_job_dependencies_facet_reported_by_both_ends_is_one_row(spark: SparkSession) -> None:
    extract, transform = ("etl", "extract"), ("etl", "transform")
    a, b = run_id(1), run_id(2)
    events = [
        run_event(
            "COMPLETE",
            at(10),
            a,
            extract,
            run_facets={"jobDependencies": _declared("downstream", [transform])},
        ),
        run_event(
            "START",
            at(20),
            b,
            transform,
            run_facets={
                "jobDependencies": {
                    **_declared("upstream", [extract], run=a, dependency_type="DIRECT_INVOCATION"),
                    "trigger_rule": "ALL_SUCCESS",
                }
            },
        ),
    ]
    deps = _deps(spark, events)
    assert list(deps) == [("extract", "transform", "jobDependencies")]
    row = deps[("extract", "transform", "jobDependencies")]
    assert (row.dependency_type, row.run_count, utc(row.first_seen), utc(row.last_seen)) == (
        "DIRECT_INVOCATION",
        2,
        at(10),
        at(20),
    )


def test_airflow_task_ids_as_python_repr_or_json_array_and_parent_dependency(spark: SparkSession) -> None:
    dag_run = run_id(10)
    airflow = {"dag": {"dag_id": "daily_orders"}}

    def task(n: int, name: str, upstream: object, downstream: object) -> dict:
        facets = {
            "parent": parent(dag_run, DAG),
            "airflow": {
                **airflow,
                "task": {
                    "task_id": name,
                    "upstream_task_ids": upstream,
                    "downstream_task_ids": downstream,
                    "trigger_rule": "all_success",
                },
            },
        }
        return run_event("START", at(n), run_id(n), ("airflow", f"daily_orders.{name}"), run_facets=facets)

    events = [
        task(1, "load", "[]", "['build_mart']"),  # Python list repr (provider 2.x)
        task(2, "build_mart", ["load"], ["publish"]),  # JSON arrays
        task(3, "publish", "['build_mart']", "[]"),
    ]
    deps = _deps(spark, events)
    chain = {(u, d) for u, d, s in deps if s == "airflow"}
    assert chain == {
        ("daily_orders.load", "daily_orders.build_mart"),
        ("daily_orders.build_mart", "daily_orders.publish"),
    }
    assert (
        deps[("daily_orders.load", "daily_orders.build_mart", "airflow")].status_trigger_rule == "all_success"
    )
    parents = {(u, d) for u, d, s in deps if s == "parent"}
    assert parents == {("daily_orders", f"daily_orders.{t}") for t in ("load", "build_mart", "publish")}


def _lifecycle(state: str, previous: tuple[str, str] | None = None) -> dict:
    facet: dict = {"lifecycleStateChange": state}
    if previous:
        facet["previousIdentifier"] = {"namespace": previous[0], "name": previous[1]}
    return {"lifecycleStateChange": facet}


def _with_facets(ds: dict, facets: dict) -> dict:
    return {**ds, "facets": {**ds["facets"], **facets}}


def test_a_run_that_only_drops_a_table_is_not_its_producer(spark: SparkSession) -> None:
    src, table = ("s3://lake", "raw"), ("s3://lake", "mart")
    load, cleanup = ("etl", "load"), ("etl", "cleanup")
    events = [
        run_event(
            "COMPLETE",
            at(10),
            run_id(1),
            load,
            inputs=[dataset(*src)],
            outputs=[_with_facets(dataset(*table), _lifecycle("OVERWRITE"))],
        ),
        run_event(
            "COMPLETE",
            at(99),
            run_id(2),
            cleanup,
            inputs=[dataset(*src)],
            outputs=[_with_facets(dataset(*table), _lifecycle("drop"))],
        ),
    ]
    frame = events_df(spark, events)
    # Each output that later transforms read again is materialised, as the build writes it to a table.
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=2).localCheckpoint()
    runs = model.runs(frame).localCheckpoint()
    io = model.run_io(mentions, aliases).localCheckpoint()
    edges = model.job_edges(io, runs).localCheckpoint()
    flows = model.dataset_edges(edges)
    datasets = model.datasets(mentions, aliases)
    names = {r.dataset_id: r.name for r in datasets.collect()}
    states = {(r.job_name, names[r.dataset_id], r.direction): r for r in edges.collect()}
    assert states[("load", "mart", "output")].lifecycle_states == ["OVERWRITE"]
    assert states[("cleanup", "mart", "output")].lifecycle_states == ["DROP"]
    assert [
        states[("load", "mart", "output")].drop_only,
        states[("cleanup", "mart", "output")].drop_only,
    ] == [
        False,
        True,
    ]
    assert {
        (names[r.source_dataset_id], names[r.target_dataset_id], r.job_name) for r in flows.collect()
    } == {("raw", "mart", "load")}
    summary = {
        names[r.dataset_id]: r
        for r in model.dataset_summary(
            datasets, edges, flows, io, runs, model.dataset_schemas(mentions, aliases)
        ).collect()
    }
    mart = summary["mart"]
    assert [(j.namespace, j.name) for j in mart.producing_jobs] == [load]
    assert (mart.last_write_run_id, utc(mart.last_write_at)) == (run_id(1), at(10))


def test_rename_links_the_old_and_new_names_into_one_dataset(spark: SparkSession) -> None:
    old, new = ("postgres://db:5432", "shop.public.orders_v1"), ("postgres://db:5432", "shop.public.orders")
    events = [
        run_event("COMPLETE", at(0), run_id(1), ("etl", "write_v1"), outputs=[dataset(*old)]),
        run_event(
            "COMPLETE",
            at(50),
            run_id(2),
            ("etl", "rename"),
            outputs=[_with_facets(dataset(*new), _lifecycle("RENAME", previous=old))],
        ),
    ]
    mentions = model.dataset_mentions(events_df(spark, events)).localCheckpoint()
    computed = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    aliases = {(r.alias_namespace, r.alias_name): r for r in computed.collect()}
    assert aliases[old].dataset_id == aliases[new].dataset_id
    assert {aliases[old].alias_kind, aliases[new].alias_kind} <= {"self", "renamed", "symlink"}
    datasets = model.datasets(mentions, computed).collect()
    assert len(datasets) == 1


def test_column_summary_counts_reach_direct_sources_and_masking_upstream(spark: SparkSession) -> None:
    schema = (
        "source_dataset_id string, source_field string, target_dataset_id string, target_field string, "
        "job_namespace string, job_name string, scope string, is_direct boolean, masking boolean, "
        "first_seen timestamp, last_seen timestamp"
    )
    # raw.email -(masked)-> stage.email_hash -> mart.contact ; raw.id -> stage.id -> mart.contact (INDIRECT)
    rows = [
        ("raw", "email", "stage", "email_hash", "ns", "j1", "field", True, True, at(0), at(10)),
        ("raw", "id", "stage", "id", "ns", "j1", "field", True, False, at(0), at(10)),
        ("stage", "email_hash", "mart", "contact", "ns", "j2", "field", True, False, at(20), at(30)),
        ("stage", "id", "mart", "contact", "ns", "j2", "field", False, False, at(20), at(40)),
        ("stage", "region", "mart", None, "ns", "j2", "dataset", False, False, at(20), at(40)),
    ]
    edges = spark.createDataFrame(rows, schema)
    paths = columns.column_paths(edges, max_depth=5)
    got = {(r.dataset_id, r.field): r for r in columns.column_summary(edges, paths).collect()}
    assert set(got) == {
        ("raw", "email"),
        ("raw", "id"),
        ("stage", "email_hash"),
        ("stage", "id"),
        ("mart", "contact"),
    }
    contact = got[("mart", "contact")]
    assert (contact.upstream_column_count, contact.direct_upstream_column_count) == (4, 2)
    assert (contact.downstream_column_count, contact.masked) == (0, True)
    assert (utc(contact.first_seen), utc(contact.last_seen)) == (at(20), at(40))
    email = got[("raw", "email")]
    assert (email.upstream_column_count, email.downstream_column_count, email.downstream_dataset_count) == (
        0,
        2,
        2,
    )
    assert (email.masked, got[("stage", "id")].masked) == (False, False)
    assert got[("stage", "email_hash")].masked is True


def test_tags_facets_of_runs_and_datasets_are_kept(spark: SparkSession) -> None:
    tagged = dataset("s3://lake", "orders")
    tagged["facets"]["tags"] = {"tags": [{"key": "pii", "value": "true", "source": "USER"}]}
    r = run_id(1)
    events = [
        run_event(
            "START",
            at(0),
            r,
            run_facets={"tags": {"tags": [{"key": "env", "value": "prod", "source": "CONFIG"}]}},
        ),
        run_event("COMPLETE", at(9), r, outputs=[tagged]),  # no tags facet: the run keeps the START's
    ]
    frame = events_df(spark, events)
    [run] = model.runs(frame).collect()
    assert [(t.key, t.value, t.source) for t in run.tags] == [("env", "prod", "CONFIG")]
    mentions = model.dataset_mentions(frame).localCheckpoint()
    [ds] = model.datasets(mentions, model.dataset_aliases(mentions, max_iterations=2)).collect()
    assert [(t.key, t.value) for t in ds.tags] == [("pii", "true")]


def _job_lineage_facet() -> dict:
    """A job-level ``lineage`` facet made with openlineage-python's own classes (LineageJobFacet)."""
    from openlineage.client.generated import lineage as ol
    from openlineage.client.serde import Serde

    def ds(namespace: str, name: str, field: str | None = None, *kinds: tuple[str, str]) -> object:
        steps = [ol.LineageTransformation(type=t, subtype=s) for t, s in kinds]
        return ol.LineageDatasetInput(namespace, name, "DATASET", field=field, transformations=steps)

    entries = [
        ol.LineageDatasetEntry(  # the run writes mart from raw (total from price, aggregated)
            namespace="s3://lake",
            name="mart",
            type="DATASET",
            inputs=[ds("s3://lake", "raw")],
            fields={
                "total": ol.LineageFieldEntry(
                    inputs=[ds("s3://lake", "raw", "price", ("DIRECT", "AGGREGATION"))]
                )
            },
        ),
        ol.LineageJobEntry(  # the event's own job (no name): reads customers, fed by etl/extract's run
            type="JOB",
            inputs=[
                ol.LineageJobInput(type="JOB", namespace="etl", name="extract", runId=run_id(7)),
                ds("postgres://db:5432", "shop.public.customers"),
            ],
        ),
        ol.LineageJobEntry(  # about another job: not this run's I/O, not its dependency
            type="JOB",
            namespace="etl",
            name="other",
            inputs=[
                ds("s3://lake", "elsewhere"),
                ol.LineageJobInput(type="JOB", namespace="etl", name="zzz"),
            ],
        ),
    ]
    return Serde.to_dict(ol.LineageJobFacet(entries=entries))


def test_job_level_lineage_facet_feeds_io_column_edges_and_dependencies(spark: SparkSession) -> None:
    job = ("etl", "build_mart")
    events = [run_event("COMPLETE", at(30), run_id(1), job, job_facets={"lineage": _job_lineage_facet()})]
    frame = events_df(spark, events)
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=2).localCheckpoint()
    names = {r.dataset_id: r.name for r in model.datasets(mentions, aliases).collect()}
    io = model.run_io(mentions, aliases).collect()
    assert {(names[r.dataset_id], r.direction) for r in io} == {
        ("mart", "output"),
        ("raw", "input"),
        ("shop.public.customers", "input"),
    }
    edges = columns.column_edges(mentions, aliases).collect()
    assert [
        (names[e.source_dataset_id], e.source_field, names[e.target_dataset_id], e.target_field)
        for e in edges
    ] == [("raw", "price", "mart", "total")]
    assert [(t.type, t.subtype) for t in edges[0].transformations] == [("DIRECT", "AGGREGATION")]
    deps = _deps(spark, events)
    assert list(deps) == [("extract", "build_mart", "lineage")]


def test_job_dependencies_folded_range_by_range_equal_the_whole_aggregate(spark: SparkSession) -> None:
    """The incremental build folds each range's per-(pair, run) statistics into stored state: any split of
    the events into ranges, in any order and folded twice, gives the rows of one aggregate over all of
    them, rules included (the latest report carrying a rule wins, whichever range held it)."""
    import random

    extract, transform, load = ("etl", "extract"), ("etl", "transform"), ("etl", "load")
    a, b, c = run_id(1), run_id(2), run_id(3)
    events = [
        run_event(
            "START", at(10), a, extract, run_facets={"jobDependencies": _declared("downstream", [transform])}
        ),
        run_event(
            "RUNNING",
            at(15),
            b,
            transform,
            run_facets={"jobDependencies": _declared("upstream", [extract], dependency_type="IMPLICIT")},
        ),
        run_event(
            "COMPLETE",
            at(30),
            b,
            transform,
            run_facets={
                "jobDependencies": _declared("upstream", [extract], dependency_type="DIRECT_INVOCATION")
            },
        ),
        run_event(
            "START",
            at(20),
            c,
            load,
            run_facets={
                "parent": parent(b, transform),
                "jobDependencies": _declared("upstream", [transform], sequence_trigger_rule="EXACTLY_ONE"),
            },
        ),
        run_event("COMPLETE", at(40), c, load, run_facets={"parent": parent(b, transform)}),
    ]
    whole = sorted(model.job_dependencies(events_df(spark, events)).collect())
    assert len(whole) == 3
    [explicit] = [r for r in whole if r.upstream_job_name == "extract"]
    assert (explicit.dependency_type, explicit.run_count) == ("DIRECT_INVOCATION", 2)
    rng = random.Random(7)
    for _ in range(3):
        shuffled = events[:]
        rng.shuffle(shuffled)
        cut = sorted(rng.sample(range(1, len(events)), 2))
        ranges = [shuffled[: cut[0]], shuffled[cut[0] : cut[1]], shuffled[cut[1] :]]
        state = model.dependency_runs(events_df(spark, ranges[0]))
        for part in ranges[1:] + ranges[-1:]:  # the last range folded twice: a re-run after a crash
            delta = model.dependency_runs(events_df(spark, part))
            folded = model.fold_dependency_runs(delta, state)
            key = [*model.DEPENDENCY_KEY, "run_id"]
            state = state.join(delta.select(*key), key, "left_anti").unionByName(folded)
            state = spark.createDataFrame(state.collect(), state.schema)
        assert sorted(model.dependencies_from_runs(state).collect()) == whole
