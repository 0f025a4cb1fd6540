"""Dataset versions tied to runs (lineage.query.history) on a small inline model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lineage.query import answers, history
from lineage.query.errors import LookupError_, UnknownNode
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()
I64 = pa.int64()


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def run_id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


# run, job, state, dataset, direction, first, last, reported version, schema hash, rows
IO = [
    (1, "load", "COMPLETE", "orders", "output", 10, 12, "s1", "h1", 100),
    (2, "load", "COMPLETE", "orders", "output", 30, 32, "s2", "h2", 120),
    # report reads an older snapshot by name (time travel), then writes the summary without a version
    (3, "report", "COMPLETE", "orders", "input", 40, 40, "s1", None, None),
    (3, "report", "COMPLETE", "summary", "output", 41, 41, None, None, 5),
    # the next report names no version: the latest write before its read (run 2's)
    (4, "report", "COMPLETE", "orders", "input", 50, 50, None, None, None),
    (4, "report", "COMPLETE", "summary", "output", 51, 51, None, None, 6),
    # a version nobody reported writing
    (5, "audit", "COMPLETE", "orders", "input", 55, 55, "s9", None, None),
    (6, "load", "FAIL", "orders", "output", 60, 60, None, None, None),  # no schema reported
    # a compaction naming the version run 2 made: not a new version
    (8, "compact", "COMPLETE", "orders", "output", 70, 70, "s2", "h2", 120),
]


def store() -> IndexedStore:
    datasets = pa.Table.from_pylist(
        [
            {"dataset_id": d, "namespace": "ns", "name": d, "first_seen": T0, "last_seen": T0}
            for d in ("orders", "summary")
        ],
        schema=pa.schema(
            [("dataset_id", S), ("namespace", S), ("name", S), ("first_seen", TS), ("last_seen", TS)]
        ),
    )
    jobs = pa.Table.from_pylist(
        [{"job_namespace": "etl", "job_name": j} for j in ("load", "report", "audit", "compact")],
        schema=pa.schema([("job_namespace", S), ("job_name", S)]),
    )
    runs = {n: (job, state, first) for n, job, state, _d, _k, first, *_ in reversed(IO)}
    run_table = pa.Table.from_pylist(
        [
            {"run_id": run_id(n), "job_namespace": "etl", "job_name": job, "reported_state": state,
             "started_at": at(first), "last_event_at": at(first + 2), "parent_run_id": None}
            for n, (job, state, first) in sorted(runs.items())
        ],
        schema=pa.schema(
            [("run_id", S), ("job_namespace", S), ("job_name", S), ("reported_state", S),
             ("started_at", TS), ("last_event_at", TS), ("parent_run_id", S)]
        ),
    )  # fmt: skip
    run_io = pa.Table.from_pylist(
        [
            {"run_id": run_id(n), "job_namespace": "etl", "job_name": job, "dataset_id": d, "direction": kind,
             "first_seen": at(first), "last_seen": at(last), "dataset_version": version,
             "schema_hash": schema, "row_count": rows, "size_bytes": None, "file_count": None,
             "lifecycle_states": ["OVERWRITE"] if kind == "output" else []}
            for n, job, _state, d, kind, first, last, version, schema, rows in IO
        ],
        schema=pa.schema(
            [("run_id", S), ("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S),
             ("first_seen", TS), ("last_seen", TS), ("dataset_version", S), ("schema_hash", S),
             ("row_count", I64), ("size_bytes", I64), ("file_count", I64), ("lifecycle_states", pa.list_(S))]
        ),
    )  # fmt: skip
    field = pa.struct([("name", S), ("type", S), ("description", S)])
    schemas = pa.Table.from_pylist(
        [
            {
                "dataset_id": "orders",
                "schema_hash": h,
                "version": v,
                "first_seen": at(v * 20 - 10),
                "schema_fields": fields,
            }
            for h, v, fields in (
                ("h1", 1, [{"name": "id", "type": "long", "description": None}]),
                (
                    "h2",
                    2,
                    [
                        {"name": "id", "type": "long", "description": None},
                        {"name": "total", "type": "double", "description": None},
                    ],
                ),
            )
        ],
        schema=pa.schema(
            [
                ("dataset_id", S),
                ("schema_hash", S),
                ("version", I64),
                ("first_seen", TS),
                ("schema_fields", pa.list_(field)),
            ]
        ),
    )
    aliases = pa.Table.from_pylist(
        [
            {"alias_namespace": "ns", "alias_name": d, "dataset_id": d, "alias_kind": "self"}
            for d in ("orders", "summary")
        ],
        schema=pa.schema([("alias_namespace", S), ("alias_name", S), ("dataset_id", S), ("alias_kind", S)]),
    )
    tables = {
        "datasets": datasets,
        "dataset_aliases": aliases,
        "jobs": jobs,
        "runs": run_table,
        "run_io": run_io,
    }
    return IndexedStore(Settings(), {**tables, "dataset_schemas": schemas})


def test_a_version_per_write_named_by_the_producer_or_else_by_the_writing_run() -> None:
    s = store()
    found = history.dataset_versions(s, s.dataset_nodes["orders"])
    # newest first; the compaction naming s2 again is no new version: s2 stays run 2's
    assert [(v.version, v.source, v.run_id, v.run_state) for v in found] == [
        (run_id(6), history.RUN, run_id(6), "FAIL"),
        ("s2", history.PRODUCER, run_id(2), "COMPLETE"),
        ("s1", history.PRODUCER, run_id(1), "COMPLETE"),
    ]
    assert [(v.schema_hash, v.schema_version, v.row_count) for v in found] == [
        (None, None, None),
        ("h2", 2, 120),
        ("h1", 1, 100),
    ]
    assert found[1].written_at == at(32) and found[1].lifecycle_states == ["OVERWRITE"]


def test_a_read_is_tied_to_the_version_it_names_else_to_the_last_write_before_it() -> None:
    s = store()
    reads = history.versions_read(s, [run_id(3), run_id(4), run_id(5)])
    got = {
        run: [(r.dataset.name, r.version, r.reported, r.written_by and r.written_by.run_id) for r in rows]
        for run, rows in reads.items()
    }
    assert got == {
        run_id(3): [("orders", "s1", "s1", run_id(1))],  # named: not the later s2
        run_id(4): [("orders", "s2", None, run_id(2))],  # unnamed: the last write at or before the read
        run_id(5): [("orders", "s9", "s9", None)],  # named, but no write reported it
    }


def test_the_versions_a_run_wrote() -> None:
    s = store()
    assert [(v.dataset.name, v.version) for v in history.versions_written(s, run_id(4))] == [
        ("summary", run_id(4))
    ]
    # a write naming an earlier run's version is that version
    assert [(v.version, v.run_id) for v in history.versions_written(s, run_id(8))] == [("s2", run_id(2))]


def test_upstream_versions_follow_each_writer_to_the_versions_it_read() -> None:
    s = store()
    summary = s.dataset_nodes["summary"]
    chain = history.upstream_versions(s, summary, run_id(3), 5)
    assert [(step.version.dataset.name, step.version.version, step.depth) for step in chain] == [
        ("summary", run_id(3), 0),
        ("orders", "s1", 1),
    ]
    assert [r.version for r in chain[0].inputs] == ["s1"] and chain[1].inputs == []
    # depth 0 is the version alone; a run id's prefix names its version only when unique
    assert [step.version.version for step in history.upstream_versions(s, summary, run_id(4), 0)] == [
        run_id(4)
    ]
    with pytest.raises(UnknownNode):  # both summary versions' run ids start so
        history.dataset_version(s, summary, run_id(4)[:30])
    orders = s.dataset_nodes["orders"]
    assert history.dataset_version(s, orders, run_id(6)[:8]).run_id == run_id(6)  # the one run-named version


def test_unknown_versions_and_jobs_are_refused() -> None:
    s = store()
    with pytest.raises(UnknownNode):
        history.dataset_version(s, s.dataset_nodes["orders"], "s7")
    with pytest.raises(LookupError_):
        history.dataset_versions(s, s.job_node("etl", "load"))


def test_answers_give_versions_and_the_chain_as_json() -> None:
    s = store()
    listed = answers.versions_of(s, "dataset:ns/orders")
    assert [v["version"] for v in listed["versions"]] == [run_id(6), "s2", "s1"]
    assert listed["versions"][1] | {"written_at": None} == {
        "dataset": "ns/orders",
        "namespace": "ns",
        "name": "orders",
        "version": "s2",
        "version_source": "producer",
        "run_id": run_id(2),
        "job": "etl/load",
        "run_state": "COMPLETE",
        "first_seen": at(30).isoformat().replace("+00:00", "Z"),
        "written_at": None,
        "schema_hash": "h2",
        "schema_version": 2,
        "row_count": 120,
        "size_bytes": None,
        "file_count": None,
        "lifecycle_states": ["OVERWRITE"],
    }
    chain = answers.version_lineage(s, "dataset:ns/summary", run_id(3), 3)
    assert chain["version"] == run_id(3)
    assert [(step["name"], step["depth"]) for step in chain["steps"]] == [("summary", 0), ("orders", 1)]
    assert chain["steps"][0]["inputs"][0]["written_by_run_id"] == run_id(1)


def test_run_lineage_follows_the_named_version_too() -> None:
    from lineage.query.versions import upstream_runs

    s = store()
    # run 3 named s1 (run 1's) although run 2 wrote later, before the read; run 4 named none
    for reader, writer in ((run_id(3), run_id(1)), (run_id(4), run_id(2))):
        [start, *_] = upstream_runs(s, reader, 1)
        assert [(node.name, producer) for node, _at, producer in start.inputs] == [("orders", writer)]
