"""Health along lineage (lineage.query.health) on a small inline model held in memory.

raw --load--> clean --agg--> report <--agg-- side <--side_feed--

- clean: written daily by load, whose latest run FAILed (clean is failing, load's last run failed);
- side: written hourly until ten hours ago (late);
- report: written by agg half an hour ago; a newer check failed ``not_null(id)`` (failing);
- raw: nothing known of it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from lineage.cli.main import Context, cli
from lineage.query.answers import graph_dict, impact_of
from lineage.query.errors import LookupError_
from lineage.query.health import FAILING, LATE, OK, UNKNOWN, health_of
from lineage.query.model import COLUMN_EDGE_KEY
from lineage.query.nodes import UPSTREAM
from lineage.serve.index import IndexedStore
from lineage.settings import Settings
from tests.unit.test_read_http import _ask
from tests.unit.test_read_http import settings as http_settings

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()
N = pa.int64()
NS = "etl"


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def rid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _table(rows: list[dict[str, Any]], fields: list[tuple[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


RUN_FIELDS = [
    ("run_id", S), ("job_namespace", S), ("job_name", S), ("reported_state", S), ("inferred_state", S),
    ("started_at", TS), ("last_event_at", TS), ("lost_after", TS), ("ended_at", TS),
    ("nominal_start_time", TS), ("error_message", S),
]  # fmt: skip
IO_FIELDS = [
    ("run_id", S), ("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S),
    ("first_seen", TS), ("last_seen", TS), ("lifecycle_states", pa.list_(S)),
]  # fmt: skip
COLUMN_EDGE_EXTRA = [
    ("transformations", pa.list_(pa.struct([("type", S)]))), ("subtypes", pa.list_(S)),
    ("is_direct", pa.bool_()), ("first_seen", TS),
]  # fmt: skip
QUALITY_FIELDS = [
    ("run_id", S), ("job_namespace", S), ("job_name", S), ("dataset_id", S), ("column_name", S),
    ("assertion", S), ("success", pa.bool_()), ("checked_at", TS), ("problem", S),
]  # fmt: skip


def run(n: int, job: str, state: str, hours_ago: float, **extra: Any) -> dict[str, Any]:
    """A finished (or, with ``state`` RUNNING, a running) run that ended ``hours_ago``."""
    end = ago(hours_ago)
    row = {
        "run_id": rid(n), "job_namespace": NS, "job_name": job, "reported_state": state,
        "inferred_state": state, "started_at": end - timedelta(minutes=5), "last_event_at": end,
        "lost_after": None, "ended_at": None if state == "RUNNING" else end, "nominal_start_time": None,
        "error_message": "boom" if state == "FAIL" else None,
    }  # fmt: skip
    return {**row, **extra}


def store(
    runs: list[dict[str, Any]], io: list[tuple[int, str, str, str]], quality: list[dict[str, Any]]
) -> IndexedStore:
    """``io``: (run, job, dataset, direction); every dataset and job of the picture above."""
    names = ("raw", "clean", "side", "report")
    datasets = _table(
        [{"dataset_id": d, "namespace": "s3://lake", "name": d} for d in names],
        [("dataset_id", S), ("namespace", S), ("name", S)],
    )
    aliases = _table(
        [
            {"alias_namespace": "s3://lake", "alias_name": d, "dataset_id": d, "alias_kind": "name"}
            for d in names
        ],
        [("alias_namespace", S), ("alias_name", S), ("dataset_id", S), ("alias_kind", S)],
    )
    jobs = _table(
        [
            {"job_namespace": NS, "job_name": j, "parent_job_namespace": None, "parent_job_name": None}
            for j in ("load", "agg", "side_feed")
        ],
        [("job_namespace", S), ("job_name", S), ("parent_job_namespace", S), ("parent_job_name", S)],
    )
    edges = [
        ("load", "raw", "input"),
        ("load", "clean", "output"),
        ("agg", "clean", "input"),
        ("agg", "side", "input"),
        ("agg", "report", "output"),
        ("side_feed", "side", "output"),
    ]
    job_edges = _table(
        [
            {"job_namespace": NS, "job_name": j, "dataset_id": d, "direction": k, "first_seen": ago(100)}
            for j, d, k in edges
        ],
        [("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S), ("first_seen", TS)],
    )
    last: dict[str, dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: r["last_event_at"]):
        last[r["job_name"]] = r
    summary = _table(
        [
            {
                "job_namespace": NS,
                "job_name": j,
                "last_run_state": r["inferred_state"],
                "last_run_id": r["run_id"],
            }
            for j, r in last.items()
        ],
        [
            *[(c, S) for c in ("job_namespace", "job_name", "last_run_state", "last_run_id")],
            *[("last_run_reported_state", S), ("run_count", N), ("lost_runs", N), ("failed_runs", N)],
        ],
    )
    by_id = {r["run_id"]: r for r in runs}
    run_io = _table(
        [
            {"run_id": rid(n), "job_namespace": NS, "job_name": j, "dataset_id": d, "direction": k,
             "first_seen": by_id[rid(n)]["started_at"], "last_seen": by_id[rid(n)]["last_event_at"],
             "lifecycle_states": []}
            for n, j, d, k in io
        ],
        IO_FIELDS,
    )  # fmt: skip
    tables = {
        "datasets": datasets,
        "dataset_aliases": aliases,
        "jobs": jobs,
        "job_summary": summary,
        "job_edges": job_edges,
        "runs": _table(runs, RUN_FIELDS),
        "run_io": run_io,
        "quality_results": _table(quality, QUALITY_FIELDS),
        "column_edges": _table([], [(c, S) for c in COLUMN_EDGE_KEY] + COLUMN_EDGE_EXTRA),
    }
    return IndexedStore(Settings(), tables)


def check(
    n: int, dataset: str, column: str | None, assertion: str, success: bool | None, hours_ago: float
) -> dict:
    return {
        "run_id": rid(n), "job_namespace": NS, "job_name": "agg", "dataset_id": dataset,
        "column_name": column, "assertion": assertion, "success": success, "checked_at": ago(hours_ago),
        "problem": None,
    }  # fmt: skip


def picture() -> IndexedStore:
    runs = [
        run(1, "load", "COMPLETE", 72),
        run(2, "load", "COMPLETE", 48),
        run(3, "load", "COMPLETE", 24),
        run(4, "load", "FAIL", 1),
        run(5, "side_feed", "COMPLETE", 12),
        run(6, "side_feed", "COMPLETE", 11),
        run(7, "side_feed", "COMPLETE", 10),
        run(8, "agg", "COMPLETE", 0.5),
    ]
    io = [(n, "load", "clean", "output") for n in (1, 2, 3, 4)]
    io += [(n, "side_feed", "side", "output") for n in (5, 6, 7)]
    io += [(8, "agg", "report", "output"), (8, "agg", "clean", "input"), (8, "agg", "side", "input")]
    quality = [
        check(8, "report", "id", "not_null", True, 0.5),
        check(9, "report", "id", "not_null", False, 0.2),  # a later check of the same assertion
        check(8, "report", "id", "unique", True, 0.5),
    ]
    return store(runs, io, quality)


def test_each_dataset_has_its_own_state() -> None:
    own = picture().own_health(["raw", "clean", "side", "report"], NOW)
    assert {d: h.state for d, h in own.items()} == {
        "raw": UNKNOWN,
        "clean": FAILING,
        "side": LATE,
        "report": FAILING,
    }
    [failed] = own["clean"].problems
    assert (failed["kind"], failed["state"], failed["run_id"], failed["error"]) == (
        "last_write",
        "FAIL",
        rid(4),
        "boom",
    )
    [late] = own["side"].problems
    assert late["kind"] == "late" and late["expected_interval_seconds"] == 3600
    assert late["late_after"] == ago(8).isoformat()
    [failing] = own["report"].problems
    assert (failing["kind"], failing["assertion"], failing["column"], failing["run_id"]) == (
        "assertion",
        "not_null",
        "id",
        rid(9),
    )
    assert [(a["assertion"], a["success"]) for a in own["report"].assertions] == [
        ("not_null", False),
        ("unique", True),
    ]


def test_freshness_needs_enough_successful_writes() -> None:
    """clean: three successful daily writes give 24 h, so it is not late before 48 h after the last one;
    with the minimum raised above what it has, nothing is learned and it is never late."""
    s = picture()
    fresh = s.own_health(["clean"], NOW)["clean"].freshness
    assert fresh is not None and fresh["expected_interval_seconds"] == 86400 and fresh["late"] is False
    assert (
        s.own_health(["clean"], ago(24) + timedelta(hours=48, seconds=1))["clean"].freshness["late"] is True
    )
    s.settings = Settings(health={"min_writes": 4})
    fresh = s.own_health(["clean"], NOW + timedelta(days=30))["clean"].freshness
    assert fresh is not None and fresh["expected_interval_seconds"] is None and fresh["late"] is False


def test_nominal_times_give_the_interval_when_every_write_has_one() -> None:
    """Runs that ended at uneven times for even schedules (nominal starts six hours apart)."""
    runs = [
        run(n, "side_feed", "COMPLETE", hours, nominal_start_time=ago(nominal))
        for n, hours, nominal in ((1, 20, 21), (2, 13, 15), (3, 8, 9))
    ]
    s = store(runs, [(n, "side_feed", "side", "output") for n in (1, 2, 3)], [])
    fresh = s.own_health(["side"], NOW)["side"].freshness
    assert fresh is not None and fresh["expected_interval_seconds"] == 6 * 3600 and fresh["late"] is False


def test_the_last_finished_write_counts_and_a_lost_one_fails() -> None:
    """A write still running is not the last write; one whose deadline passed since the build is LOST."""
    runs = [
        run(1, "load", "FAIL", 3),
        run(2, "load", "COMPLETE", 2),
        run(3, "load", "RUNNING", 1, lost_after=NOW + timedelta(hours=1)),
    ]
    io = [(n, "load", "clean", "output") for n in (1, 2, 3)]
    assert store(runs, io, []).own_health(["clean"], NOW)["clean"].state == OK
    [problem] = store(runs, io, []).own_health(["clean"], NOW + timedelta(hours=2))["clean"].problems
    assert (problem["kind"], problem["state"], problem["run_id"]) == ("last_write", "LOST", rid(3))


def test_an_unreadable_assertion_is_shown_and_fails_nothing() -> None:
    odd = {**check(1, "report", None, '{"assertions":{"x":1}}', None, 1), "problem": "no assertions array"}
    own = store([], [], [odd]).own_health(["report"], NOW)["report"]
    assert own.state == OK and own.problems == []
    assert own.assertions[0]["problem"] == "no assertions array"


def test_health_of_a_dataset_gives_every_upstream_cause_with_its_path() -> None:
    answer = health_of(picture(), "s3://lake/report", NOW)
    assert (answer["node"]["id"], answer["state"], answer["upstream"]) == (
        "dataset:s3://lake/report",
        FAILING,
        FAILING,
    )
    causes = {c["id"]: (c["state"], c["hops"], c["path"]) for c in answer["causes"]}
    assert causes == {
        "dataset:s3://lake/clean": (
            FAILING,
            2,
            ["dataset:s3://lake/clean", "job:etl/agg", "dataset:s3://lake/report"],
        ),
        "dataset:s3://lake/side": (
            LATE,
            2,
            ["dataset:s3://lake/side", "job:etl/agg", "dataset:s3://lake/report"],
        ),
        "job:etl/load": (
            FAILING,
            3,
            ["job:etl/load", "dataset:s3://lake/clean", "job:etl/agg", "dataset:s3://lake/report"],
        ),
    }


def test_health_of_a_job_is_its_last_run_and_its_upstream() -> None:
    answer = health_of(picture(), "etl/load", NOW)
    assert (answer["state"], answer["upstream"], answer["causes"]) == (FAILING, OK, [])
    assert answer["problems"] == [{"kind": "last_run", "state": "FAIL", "run_id": rid(4), "job": "etl/load"}]
    agg = health_of(picture(), "etl/agg", NOW)
    assert (agg["state"], agg["upstream"]) == (OK, FAILING)


def test_health_reads_the_runs_of_its_datasets_and_jobs_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    s = picture()
    reads: list[str] = []
    arrow, arrow_where = s.arrow, s.arrow_where

    def counted(table: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(table)
        return arrow(table, *args, **kwargs)

    def counted_where(table: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(table)
        return arrow_where(table, *args, **kwargs)

    monkeypatch.setattr(s, "arrow", counted)
    monkeypatch.setattr(s, "arrow_where", counted_where)
    answer = health_of(s, "s3://lake/report", NOW)
    assert reads.count("runs") == 1
    assert answer == health_of(picture(), "s3://lake/report", NOW)


def test_an_unknown_node_is_one_clear_error() -> None:
    with pytest.raises(LookupError_):
        health_of(picture(), "s3://lake/nowhere", NOW)


def test_impact_carries_the_health_of_the_root_and_of_what_it_reaches() -> None:
    data = impact_of(picture(), "s3://lake/clean", None, None)
    assert (data["root"]["health"], data["root"]["problems"][0]["kind"]) == (FAILING, "last_write")
    assert [(d["dataset"], d["health"]) for d in data["datasets"]] == [("s3://lake/report", FAILING)]
    assert data["datasets"][0]["problems"][0]["assertion"] == "not_null"


def test_impact_of_a_column_names_the_failing_assertions_of_the_columns_it_reaches() -> None:
    s = picture()
    s._tables["column_edges"] = _table(
        [
            {"source_dataset_id": "clean", "source_field": "key", "target_dataset_id": "report",
             "target_field": field, "job_namespace": NS, "job_name": "agg", "transformations": [],
             "subtypes": [], "is_direct": True, "first_seen": ago(100)}
            for field in ("id", "total")
        ],
        [(c, S) for c in COLUMN_EDGE_KEY] + COLUMN_EDGE_EXTRA,
    )  # fmt: skip
    data = impact_of(s, "s3://lake/clean.key", None, None)
    assert [(c["field"], c["failing"]) for c in data["columns"]] == [("id", ["not_null"]), ("total", [])]


def test_the_health_command_prints_the_causes_and_their_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    s = picture()
    monkeypatch.setattr(Context, "store", property(lambda _self: s))
    text = CliRunner().invoke(cli, ["health", "s3://lake/report"])
    assert text.exit_code == 0, text.output
    assert "health of dataset s3://lake/report" in text.output and ": failing" in text.output
    assert "not_null(id) failed" in text.output
    assert "job:etl/load -> dataset:s3://lake/clean -> job:etl/agg -> dataset:s3://lake/report" in text.output
    assert "last write FAIL" in text.output
    as_json = CliRunner().invoke(cli, ["health", "s3://lake/report", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert {c["id"] for c in json.loads(as_json.output)["causes"]} == {
        "dataset:s3://lake/clean",
        "dataset:s3://lake/side",
        "job:etl/load",
    }


def test_the_graph_input_gives_each_dataset_its_health() -> None:
    s = picture()
    walk = s.traverse(s.resolve("s3://lake/report"), UPSTREAM, None)
    nodes = {n["id"]: n for n in graph_dict(s, walk)["nodes"]}
    assert {i: n["health"] for i, n in nodes.items() if n["kind"] == "dataset"} == {
        "dataset:s3://lake/raw": UNKNOWN,
        "dataset:s3://lake/clean": FAILING,
        "dataset:s3://lake/side": LATE,
        "dataset:s3://lake/report": FAILING,
    }
    assert nodes["dataset:s3://lake/clean"]["details"]["problems"][0] == "last write FAIL"  # judged as of now
    assert "health" not in nodes["job:etl/load"]


def test_the_graph_input_reads_only_its_nodes_rows_and_answers_as_a_warm_store() -> None:
    cold, warm = picture(), picture().warm()  # warm: every dict of the estate built (the read API)
    answers = []
    for s in (cold, warm):
        walk = s.traverse(s.resolve("s3://lake/report"), UPSTREAM, None, columns=True)
        answer = graph_dict(s, walk)
        answer.pop("generated_at")
        answers.append(answer)
    assert answers[0] == answers[1]
    assert not {"datasets", "jobs", "job_summary", "aliases_of", "dataset_nodes"} & set(cold.__dict__)


def test_the_read_api_answers_health_as_the_cli(tmp_path: Path) -> None:
    s = picture()
    [(status, answer), (missing, error)] = asyncio.run(
        _ask(
            http_settings(tmp_path),
            s,
            ("/api/v2/health?node=s3://lake/report", {}),
            ("/api/v2/health?node=s3://lake/nowhere", {}),
        )
    )
    assert status == 200 and answer["state"] == FAILING
    cli_answer = health_of(s, "s3://lake/report")  # as of now too: the same causes and paths
    assert [(c["id"], c["path"]) for c in answer["causes"]] == [
        (c["id"], c["path"]) for c in cli_answer["causes"]
    ]
    assert missing == 404 and "nowhere" in json.dumps(error)
