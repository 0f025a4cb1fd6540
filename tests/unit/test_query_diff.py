"""What changed between two windows (lineage.query.diff), on a small inline model: a job changes its
inputs and its output's schema, a job stops writing and another starts, a job's runs start failing, a
streaming run reports its datasets once and keeps running across both windows."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from lineage.cli import main
from lineage.graph.render import render
from lineage.query import answers
from lineage.query.diff import Window, diff, windows
from lineage.query.errors import LookupError_
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()
FIELD = pa.struct([("name", S), ("type", S), ("description", S)])


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


# run, job, state, started (hours ago), last event (hours ago)
RUNS = [
    ("b1", "load", "COMPLETE", 72, 71),
    ("b2", "report", "COMPLETE", 48, 47),
    ("b3", "old", "COMPLETE", 120, 119),
    ("c1", "load", "COMPLETE", 10, 9),
    ("c2", "report", "FAIL", 5, 4),
    ("c3", "new", "COMPLETE", 2, 1),
    ("s1", "stream", "RUNNING", 144, 1),  # reported its datasets at its start only
]
# run, dataset, direction, first and last seen (hours ago), schema hash, lifecycle
IO = [
    ("b1", "topic", "input", 72, 71, None, []),
    ("b1", "orders", "output", 72, 71, "h1", []),
    ("b2", "orders", "input", 48, 48, None, []),
    ("b2", "summary", "output", 47, 47, None, []),
    ("b3", "legacy", "output", 120, 119, None, []),
    ("c1", "topic", "input", 10, 9, None, []),
    ("c1", "prices", "input", 10, 9, None, []),
    ("c1", "orders", "output", 10, 9, "h2", []),
    ("c2", "orders", "input", 5, 5, None, []),
    ("c3", "summary", "output", 2, 1, None, []),
    ("c3", "archive", "output", 2, 1, None, ["DROP"]),  # only dropped: no writer
    ("s1", "topic", "output", 144, 144, None, []),
]
JOB_OF = {r[0]: r[1] for r in RUNS}
DATASETS = ("topic", "orders", "summary", "legacy", "prices", "archive")


def store() -> IndexedStore:
    def table(rows: list[dict], fields: list[tuple[str, pa.DataType]]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=pa.schema(fields))

    datasets = table(
        [{"dataset_id": d, "namespace": "ns", "name": d} for d in DATASETS],
        [("dataset_id", S), ("namespace", S), ("name", S)],
    )
    aliases = table(
        [{"alias_namespace": "ns", "alias_name": d, "dataset_id": d, "alias_kind": "self"} for d in DATASETS],
        [("alias_namespace", S), ("alias_name", S), ("dataset_id", S), ("alias_kind", S)],
    )
    jobs = table(
        [
            {"job_namespace": "etl", "job_name": j, "parent_job_namespace": None, "parent_job_name": None}
            for j in sorted(set(JOB_OF.values()))
        ],
        [("job_namespace", S), ("job_name", S), ("parent_job_namespace", S), ("parent_job_name", S)],
    )
    runs = table(
        [
            {"run_id": r, "job_namespace": "etl", "job_name": j, "reported_state": state,
             "inferred_state": state, "started_at": ago(start),
             "ended_at": None if state == "RUNNING" else ago(last), "last_event_at": ago(last),
             "lost_after": None, "nominal_start_time": None, "error_message": None}
            for r, j, state, start, last in RUNS
        ],
        [("run_id", S), ("job_namespace", S), ("job_name", S), ("reported_state", S), ("inferred_state", S),
         ("started_at", TS), ("ended_at", TS), ("last_event_at", TS), ("lost_after", TS),
         ("nominal_start_time", TS), ("error_message", S)],
    )  # fmt: skip
    run_io = table(
        [
            {"run_id": r, "job_namespace": "etl", "job_name": JOB_OF[r], "dataset_id": d,
             "direction": kind, "first_seen": ago(first), "last_seen": ago(last), "schema_hash": schema,
             "lifecycle_states": states}
            for r, d, kind, first, last, schema, states in IO
        ],
        [("run_id", S), ("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S),
         ("first_seen", TS), ("last_seen", TS), ("schema_hash", S), ("lifecycle_states", pa.list_(S))],
    )  # fmt: skip
    edges = {(JOB_OF[r], d, kind): ago(first) for r, d, kind, first, *_ in IO}
    job_edges = table(
        [
            {"job_namespace": "etl", "job_name": j, "dataset_id": d, "direction": kind, "first_seen": seen}
            for (j, d, kind), seen in edges.items()
        ],
        [("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S), ("first_seen", TS)],
    )
    schemas = table(
        [
            {"schema_hash": "h1", "schema_fields": [{"name": "id", "type": "long", "description": None}]},
            {"schema_hash": "h2", "schema_fields": [
                {"name": "id", "type": "string", "description": None},
                {"name": "total", "type": "double", "description": None},
            ]},
        ],
        [("schema_hash", S), ("schema_fields", pa.list_(FIELD))],
    )  # fmt: skip
    facet_runs = table(
        [{"_facet": "f1", "run_id": "b2"}, {"_facet": "f2", "run_id": "c1"}], [("_facet", S), ("run_id", S)]
    )
    facet_edges = table(
        [
            {"_facet": "f1", "source_dataset_id": "orders", "source_field": "id",
             "target_dataset_id": "summary", "target_field": "n", "job_namespace": "etl",
             "job_name": "report"},
            # from a dataset the store does not hold (a scoped key's store): left out
            {"_facet": "f2", "source_dataset_id": "hidden", "source_field": "h",
             "target_dataset_id": "orders", "target_field": "total", "job_namespace": "etl",
             "job_name": "load"},
            {"_facet": "f2", "source_dataset_id": "prices", "source_field": "p",
             "target_dataset_id": "orders", "target_field": "total", "job_namespace": "etl",
             "job_name": "load"},
        ],
        [("_facet", S), ("source_dataset_id", S), ("source_field", S), ("target_dataset_id", S),
         ("target_field", S), ("job_namespace", S), ("job_name", S)],
    )  # fmt: skip
    summary = table(
        [
            {"job_namespace": "etl", "job_name": j, "last_run_state": None, "last_run_id": None,
             "last_run_reported_state": None, "run_count": 1, "lost_runs": 0, "failed_runs": 0}
            for j in sorted(set(JOB_OF.values()))
        ],
        [("job_namespace", S), ("job_name", S), ("last_run_state", S), ("last_run_id", S),
         ("last_run_reported_state", S), ("run_count", pa.int64()), ("lost_runs", pa.int64()),
         ("failed_runs", pa.int64())],
    )  # fmt: skip
    return IndexedStore(
        Settings(),
        {
            "job_summary": summary,
            "datasets": datasets,
            "dataset_aliases": aliases,
            "jobs": jobs,
            "runs": runs,
            "run_io": run_io,
            "job_edges": job_edges,
            "dataset_schemas": schemas,
            "column_facet_runs": facet_runs,
            "column_facet_edges": facet_edges,
        },
    )


def test_the_default_windows_are_the_last_day_and_the_week_before() -> None:
    base, current = windows(now=NOW)
    assert current == Window(ago(24), NOW) and base == Window(ago(24 * 8), ago(24))
    # a current window given alone is compared with the week before its start
    base, _ = windows(ago(48), ago(24))
    assert base == Window(ago(48 + 24 * 7), ago(48))
    with pytest.raises(LookupError_):
        windows(ago(1), ago(2))


def test_what_appeared_and_what_stopped_being_observed() -> None:
    base, current = windows(now=NOW)
    changes = diff(store(), base, current)
    assert changes.job_edges == (
        [
            ("etl", "load", "prices", "input"),
            ("etl", "new", "archive", "output"),
            ("etl", "new", "summary", "output"),
        ],
        [("etl", "old", "legacy", "output"), ("etl", "report", "summary", "output")],
    )
    # the streaming run's topic edge spans both windows: in neither list
    assert changes.dataset_edges == (
        [("prices", "orders", "etl", "load")],
        [("orders", "summary", "etl", "report")],
    )
    assert changes.column_edges == (
        [("prices", "p", "orders", "total", "etl", "load")],
        [("orders", "id", "summary", "n", "etl", "report")],
    )
    # new only dropped the archive: not a writer of it
    assert changes.writers == (
        [("etl", "new", "summary")],
        [("etl", "old", "legacy"), ("etl", "report", "summary")],
    )
    assert changes.schemas == [("orders", "h1", "h2", ["total"], [], [("id", "long", "string")])]
    assert [(ns, job, before[2], after[2], after[1]) for ns, job, before, after in changes.outcomes] == [
        ("etl", "report", "COMPLETE", "FAIL", "c2")
    ]


def test_a_diff_around_a_node_keeps_what_is_within_its_depth() -> None:
    base, current = windows(now=NOW)
    changes = diff(store(), base, current, node="legacy", depth=1)
    assert changes.job_edges == ([], [("etl", "old", "legacy", "output")])
    assert changes.writers == ([], [("etl", "old", "legacy")])
    assert changes.dataset_edges == ([], []) and changes.schemas == [] and changes.outcomes == []


def test_the_cli_and_json_spell_the_same_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    s = store()
    base, current = windows(now=NOW)
    data = answers.diff_of(s, base, current)
    assert data["schemas"] == [
        {
            "dataset": "ns/orders",
            "before": "h1",
            "after": "h2",
            "fields_added": ["total"],
            "fields_removed": [],
            "fields_retyped": [{"name": "id", "before": "long", "after": "string"}],
        }
    ]
    assert data["outcomes"][0]["job"] == "etl/report" and data["outcomes"][0]["after"]["state"] == "FAIL"
    monkeypatch.setattr(main.Context, "store", property(lambda _self: s))
    args = ["diff", "--from", ago(24).isoformat(), "--to", NOW.isoformat()]
    assert json.loads(CliRunner().invoke(main.cli, [*args, "--json"]).output) == data
    text = CliRunner().invoke(main.cli, args).output.splitlines()
    assert "dataset edges (+1 -1)" in text
    assert "  + ns/prices -> ns/orders (via etl/load)" in text
    assert "  - etl/report -> ns/summary" in text
    assert "  ~ ns/orders: +total ~id long->string" in text
    assert "  ~ etl/report: COMPLETE -> FAIL (run c2)" in text


def test_the_graph_of_a_diff_colours_what_appeared_and_what_stopped(tmp_path: Path) -> None:
    s = store()
    base, current = windows(now=NOW)
    graph = answers.diff_graph(s, diff(s, base, current))
    assert graph["root"] is None
    assert {(e["source"], e["target"], e["change"]) for e in graph["edges"]} == {
        ("dataset:ns/prices", "job:etl/load", "added"),
        ("job:etl/new", "dataset:ns/archive", "added"),
        ("job:etl/new", "dataset:ns/summary", "added"),
        ("job:etl/old", "dataset:ns/legacy", "removed"),
        ("job:etl/report", "dataset:ns/summary", "removed"),
    }
    assert {(e["source_field"], e["target_field"], e["change"]) for e in graph["column_edges"]} == {
        ("p", "total", "added"),
        ("id", "n", "removed"),
    }
    details = {n["id"]: n["details"] for n in graph["nodes"]}
    assert details["dataset:ns/orders"]["schema change"] == "+total ~id long->string"
    assert details["job:etl/report"]["outcome change"] == "COMPLETE -> FAIL (run c2)"
    page = render(graph, "html")
    data = json.loads(
        re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', page, re.S)[1]
    )
    assert data["styles"]["added"] != data["styles"]["removed"]
    assert {e["change"] for e in data["graph"]["edges"]} == {"added", "removed"}
    # the CLI writes the same page
    out = tmp_path / "diff.html"
    args = ["diff", "--from", ago(24).isoformat(), "--to", NOW.isoformat(), "--graph", str(out)]
    result = _cli(s, args)
    assert result.output == f"wrote {out} ({len(graph['nodes'])} nodes, 5 edges changed)\n"
    assert '"change":"added"' in out.read_text().replace(" ", "")


def _cli(s: IndexedStore, args: list[str]) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(main.Context, "store", property(lambda _self: s))
        return CliRunner().invoke(main.cli, args)
