"""Job versions and run lineage (lineage.query.versions) on a small inline model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from lineage.query.versions import job_versions, run_versions, upstream_runs, version_id
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def run_id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def store() -> IndexedStore:
    """source (streaming, writes topic) -> load (reads topic, writes table; three runs: two read the topic
    and write the table, the third fails having read only) -> report (reads table, writes summary)."""
    datasets = pa.Table.from_pylist(
        [
            {"dataset_id": d, "namespace": "ns", "name": d, "first_seen": T0, "last_seen": T0}
            for d in ("topic", "table", "summary")
        ],
        schema=pa.schema(
            [("dataset_id", S), ("namespace", S), ("name", S), ("first_seen", TS), ("last_seen", TS)]
        ),
    )
    jobs = pa.Table.from_pylist(
        [
            {"job_namespace": "etl", "job_name": name, "processing_type": kind, "source_code_url": url}
            for name, kind, url in (
                ("source", "STREAMING", None),
                ("load", "BATCH", "git://l"),
                ("report", "BATCH", None),
            )
        ],
        schema=pa.schema(
            [("job_namespace", S), ("job_name", S), ("processing_type", S), ("source_code_url", S)]
        ),
    )
    runs_rows = [
        (1, "source", "RUNNING", 0, 100),
        (2, "load", "COMPLETE", 10, 12),
        (3, "load", "COMPLETE", 30, 32),
        (4, "load", "FAIL", 50, 51),
        (5, "report", "COMPLETE", 40, 41),
        (6, "report", "RUNNING", 60, 60),
    ]
    runs = pa.Table.from_pylist(
        [
            {"run_id": run_id(n), "job_namespace": "etl", "job_name": job, "reported_state": state,
             "started_at": at(start), "last_event_at": at(end)}
            for n, job, state, start, end in runs_rows
        ],
        schema=pa.schema(
            [("run_id", S), ("job_namespace", S), ("job_name", S), ("reported_state", S),
             ("started_at", TS), ("last_event_at", TS)]
        ),
    )  # fmt: skip
    io_rows = [
        (1, "topic", "output", 0, 100),  # still writing when every load read the topic
        (2, "topic", "input", 10, 11),
        (2, "table", "output", 12, 12),
        (3, "topic", "input", 30, 31),
        (3, "table", "output", 32, 32),
        (4, "topic", "input", 50, 50),
        (5, "table", "input", 40, 40),  # after run 3's write (32), before run 4
        (5, "summary", "output", 41, 41),
    ]
    run_io = pa.Table.from_pylist(
        [
            {"run_id": run_id(n), "job_namespace": "etl", "dataset_id": d, "direction": kind,
             "first_seen": at(first), "last_seen": at(last)}
            for n, d, kind, first, last in io_rows
        ],
        schema=pa.schema(
            [("run_id", S), ("job_namespace", S), ("dataset_id", S), ("direction", S), ("first_seen", TS),
             ("last_seen", TS)]
        ),
    )  # fmt: skip
    return IndexedStore(Settings(), {"datasets": datasets, "jobs": jobs, "runs": runs, "run_io": run_io})


def test_version_ids_are_name_based_uuids_of_the_job_and_its_datasets() -> None:
    # The value Java's UUID.nameUUIDFromBytes gives for the same text (jshell, Java 17), as Marquez makes its
    # job versions: namespace:name:inputs:outputs:location, dataset lists sorted.
    text_parts = ("fh-local", "job", ["kafka://k:9092:orders"], ["s3://w:t"], "https://x/y")
    assert version_id(*text_parts) == "75de7757-31df-32bd-b0bf-513547b6da21"
    assert version_id("a", "b", ["x:2", "x:1"], [], None) == version_id("a", "b", ["x:1", "x:2"], [], None)
    assert version_id("a", "b", ["x:1"], [], None) != version_id("a", "b", [], ["x:1"], None)
    assert version_id("a", "b", [], [], None) != version_id("a", "b", [], [], "git://l")


def test_runs_reading_and_writing_the_same_datasets_share_a_version() -> None:
    s = store()
    versions = job_versions(s, s.job_node("etl", "load"))
    # newest first: the failed run read only (a version of its own), then the two complete runs' version
    assert [[r["run_id"] for r in v.runs] for v in versions] == [[run_id(4)], [run_id(3), run_id(2)]]
    assert [([n.name for n in v.inputs], [n.name for n in v.outputs]) for v in versions] == [
        (["topic"], []),
        (["topic"], ["table"]),
    ]
    assert versions[1].location == "git://l" and versions[1].created_at == at(10)
    expected = version_id("etl", "load", ["ns:topic"], ["ns:table"], "git://l")
    assert versions[1].version == expected
    rows = s.rows("runs")
    found = run_versions(s, rows)
    assert found[run_id(2)] == found[run_id(3)] == expected
    # a batch run still running has no version yet; a streaming job's run has one at once
    assert run_id(6) not in found and run_id(1) in found


def test_upstream_runs_follow_the_latest_write_before_each_read() -> None:
    s = store()
    lineage = upstream_runs(s, run_id(5), 5)
    assert [(u.row["run_id"], u.depth) for u in lineage] == [(run_id(5), 0), (run_id(3), 1), (run_id(1), 2)]
    first = lineage[0]
    assert [(n.name, producer) for n, _read, producer in first.inputs] == [("table", run_id(3))]
    # the streaming source began writing before the load read the topic and wrote on after it
    assert [(n.name, producer) for n, _read, producer in lineage[1].inputs] == [("topic", run_id(1))]
    assert lineage[2].inputs == []
    assert [u.row["run_id"] for u in upstream_runs(s, run_id(5), 0)] == [run_id(5)]
    assert [u.row["run_id"] for u in upstream_runs(s, run_id(5), 1)] == [run_id(5), run_id(3)]
