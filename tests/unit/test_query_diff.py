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
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from lineage.cli import main
from lineage.graph.render import render
from lineage.query import answers
from lineage.query.diff import Window, _Codes, _combine, _Jobs, _last_of_runs, diff, windows
from lineage.query.errors import LookupError_
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()
FIELD = pa.struct([("name", S), ("type", S), ("description", S)])


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def maybe_ago(hours: float | None) -> datetime | None:
    return None if hours is None else ago(hours)


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
DATASETS = ("topic", "orders", "summary", "legacy", "prices", "archive")


FACET_RUNS = [("f1", "b2"), ("f2", "c1")]
# facet, source, field, target, field, job
FACET_EDGES = [
    ("f1", "orders", "id", "summary", "n", "report"),
    ("f2", "hidden", "h", "orders", "total", "load"),  # from a dataset the store does not hold: left out
    ("f2", "prices", "p", "orders", "total", "load"),
]


def store(
    runs_data: list[tuple[Any, ...]] = RUNS,
    io_data: list[tuple[Any, ...]] = IO,
    facet_runs_data: list[tuple[str, str]] = FACET_RUNS,
    facet_edges_data: list[tuple[Any, ...]] = FACET_EDGES,
) -> IndexedStore:
    """The index of a small model: runs (run, job, state, started and last event in hours ago), their
    run_io rows (:data:`IO`'s shape), the column facets they reported."""
    job_of = {r[0]: r[1] for r in runs_data}
    datasets_of = sorted({*DATASETS, *(row[1] for row in io_data)})

    def table(rows: list[dict], fields: list[tuple[str, pa.DataType]]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=pa.schema(fields))

    datasets = table(
        [{"dataset_id": d, "namespace": "ns", "name": d} for d in datasets_of],
        [("dataset_id", S), ("namespace", S), ("name", S)],
    )
    aliases = table(
        [
            {"alias_namespace": "ns", "alias_name": d, "dataset_id": d, "alias_kind": "self"}
            for d in datasets_of
        ],
        [("alias_namespace", S), ("alias_name", S), ("dataset_id", S), ("alias_kind", S)],
    )
    jobs = table(
        [
            {"job_namespace": "etl", "job_name": j, "parent_job_namespace": None, "parent_job_name": None}
            for j in sorted(set(job_of.values()))
        ],
        [("job_namespace", S), ("job_name", S), ("parent_job_namespace", S), ("parent_job_name", S)],
    )
    runs = table(
        [
            {"run_id": r, "job_namespace": "etl", "job_name": j, "reported_state": state,
             "inferred_state": state, "started_at": ago(start),
             "ended_at": None if state == "RUNNING" else ago(last), "last_event_at": ago(last),
             "lost_after": None, "nominal_start_time": None, "error_message": None}
            for r, j, state, start, last in runs_data
        ],
        [("run_id", S), ("job_namespace", S), ("job_name", S), ("reported_state", S), ("inferred_state", S),
         ("started_at", TS), ("ended_at", TS), ("last_event_at", TS), ("lost_after", TS),
         ("nominal_start_time", TS), ("error_message", S)],
    )  # fmt: skip
    run_io = table(
        [
            {"run_id": r, "job_namespace": "etl", "job_name": job_of[r], "dataset_id": d,
             "direction": kind, "first_seen": maybe_ago(first), "last_seen": maybe_ago(last),
             "schema_hash": schema,
             "lifecycle_states": states}
            for r, d, kind, first, last, schema, states in io_data
        ],
        [("run_id", S), ("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S),
         ("first_seen", TS), ("last_seen", TS), ("schema_hash", S), ("lifecycle_states", pa.list_(S))],
    )  # fmt: skip
    edges = {(job_of[r], d, kind): maybe_ago(first) for r, d, kind, first, *_ in io_data}
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
        [{"_facet": f, "run_id": r} for f, r in facet_runs_data], [("_facet", S), ("run_id", S)]
    )
    facet_edges = table(
        [
            {"_facet": f, "source_dataset_id": s, "source_field": sf, "target_dataset_id": t,
             "target_field": tf, "job_namespace": "etl", "job_name": j}
            for f, s, sf, t, tf, j in facet_edges_data
        ],
        [("_facet", S), ("source_dataset_id", S), ("source_field", S), ("target_dataset_id", S),
         ("target_field", S), ("job_namespace", S), ("job_name", S)],
    )  # fmt: skip
    column_edges = table(
        [],
        [*((c, S) for c in facet_edges.column_names[1:]), ("subtypes", pa.list_(S)),
         ("is_direct", pa.bool_()), ("transformations", pa.list_(pa.struct([("type", S)]))),
         ("first_seen", TS)],
    )  # fmt: skip
    summary = table(
        [
            {"job_namespace": "etl", "job_name": j, "last_run_state": None, "last_run_id": None,
             "last_run_reported_state": None, "run_count": 1, "lost_runs": 0, "failed_runs": 0}
            for j in sorted(set(job_of.values()))
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
            "column_edges": column_edges,
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


def test_every_change_is_counted_and_the_first_of_each_kind_listed() -> None:
    base, current = windows(now=NOW)
    whole = diff(store(), base, current, limit=None)
    one = diff(store(), base, current, limit=1)
    assert (
        one.counts
        == whole.counts
        == {
            "job_edges": {"appeared": 3, "stopped": 2},
            "dataset_edges": {"appeared": 1, "stopped": 1},
            "column_edges": {"appeared": 1, "stopped": 1},
            "writers": {"started": 1, "stopped": 2},
            "schemas": 1,
            "outcomes": 1,
        }
    )
    # the first in order: what a longer listing starts with
    assert one.job_edges == (whole.job_edges[0][:1], whole.job_edges[1][:1])
    assert one.writers == ([("etl", "new", "summary")], [("etl", "old", "legacy")])
    assert one.schemas == whole.schemas and one.outcomes == whole.outcomes
    assert whole.complete and not one.complete
    counted = diff(store(), base, current, limit=0)
    assert counted.counts == whole.counts and counted.job_edges == ([], []) and counted.schemas == []


def test_the_cli_lists_the_first_changes_and_counts_the_rest() -> None:
    s = store()
    args = ["diff", "--from", ago(24).isoformat(), "--to", NOW.isoformat()]
    text = _cli(s, [*args, "--limit", "1"]).output.splitlines()
    assert "job edges (+3 -2)" in text
    assert "  + ns/prices -> etl/load" in text and "  + ... 2 more" in text and "  - ... 1 more" in text
    assert "  + etl/new -> ns/summary" not in text
    assert text[-1] == "(the first 1 of each kind listed: --limit N or --all for more)"
    everything = _cli(s, [*args, "--all"]).output.splitlines()
    assert "  + etl/new -> ns/summary" in everything and not any("more" in line for line in everything)
    data = json.loads(_cli(s, [*args, "--limit", "0", "--json"]).output)
    assert data["limit"] == 0 and data["counts"]["job_edges"] == {"appeared": 3, "stopped": 2}
    assert data["job_edges"] == {"appeared": [], "stopped": []}
    assert json.loads(_cli(s, [*args, "--all", "--json"]).output)["limit"] is None


# A reference of the diff's rules, row by row in Python (the way it was computed before it was columnar).
def _reference(
    runs_data: list[tuple[Any, ...]],
    io_data: list[tuple[Any, ...]],
    facet_runs: list[tuple[str, str]],
    facet_edges: list[tuple[Any, ...]],
    frame: Window,
    since: datetime,
) -> dict[str, Any]:
    runs = {r: (job, state, ago(last)) for r, job, state, _start, last in runs_data}
    job_edges, writers, writing = set(), set(), set()
    schemas: dict[str, tuple[datetime, str]] = {}
    for r, dataset, kind, first, last, schema, states in io_data:
        job, _state, run_last = runs[r]
        if run_last < since:
            continue
        end = max(t for t in (maybe_ago(last), run_last) if t is not None)
        begin = maybe_ago(first) or end
        if not (begin < frame.end and end >= frame.start):
            continue
        job_edges.add(("etl", job, dataset, kind))
        if kind == "output":
            writing.add(r)
            if list(states or []) != ["DROP"]:
                writers.add(("etl", job, dataset))
        at = maybe_ago(last) or maybe_ago(first) or datetime(1970, 1, 1, tzinfo=UTC)
        if schema and (dataset not in schemas or schemas[dataset] < (at, schema)):
            schemas[dataset] = (at, schema)
    flows = {
        (source, target, ns, job)
        for ns, job, source, kind in job_edges
        if kind == "input"
        for wns, wjob, target in writers
        if (wns, wjob) == (ns, job) and source != target
    }
    known = {row[1] for row in io_data} | set(DATASETS)
    facets = {f for f, r in facet_runs if r in writing}
    columns = {
        (s, sf, t, tf, "etl", job)
        for f, s, sf, t, tf, job in facet_edges
        if f in facets and s in known and t in known
    }
    outcomes: dict[tuple[str, str], tuple[datetime, str, str]] = {}
    for r, job, state, _start, last in runs_data:
        if (
            ago(last) >= since
            and state in ("COMPLETE", "FAIL", "ABORT")
            and frame.start <= ago(last) < frame.end
        ):
            outcome = (ago(last), r, state)
            outcomes[("etl", job)] = max(outcomes.get(("etl", job), outcome), outcome)
    return {
        "job_edges": job_edges,
        "writers": writers,
        "dataset_edges": flows,
        "column_edges": columns,
        "schemas": {d: h for d, (_at, h) in schemas.items()},
        "outcomes": outcomes,
    }


def _random_model(seed: int) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Runs, run_io rows and column facets drawn at random, ties in time included (whole hours)."""
    import random

    rng = random.Random(seed)
    datasets = ("a", "b", "c", "d", "e")
    runs, io, facet_runs, facet_edges = [], [], [], []
    for i in range(rng.randint(5, 25)):
        run, job = f"r{i:02}", rng.choice(("j1", "j2", "j3", "j4"))
        start = rng.randint(0, 240)
        last = rng.randint(0, start)
        runs.append((run, job, rng.choice(("COMPLETE", "FAIL", "ABORT", "RUNNING")), start, last))
        for _ in range(rng.randint(0, 4)):
            first = rng.randint(last, start)
            seen = rng.randint(last, first)
            io.append(
                (
                    run,
                    rng.choice(datasets),
                    rng.choice(("input", "output")),
                    rng.choice((first, first, None)),
                    rng.choice((seen, seen, None)),
                    rng.choice((None, "", "h1", "h2", "h3")),
                    rng.choice(([], ["DROP"], ["DROP", "CREATE"], None)),
                )
            )
        if rng.random() < 0.5:
            facet = f"f{i}"
            facet_runs.append((facet, run))
            for _ in range(rng.randint(1, 3)):
                source, target = rng.choice((*datasets, "hidden")), rng.choice(datasets)
                field = rng.choice(("x", "y", None))
                facet_edges.append((facet, source, rng.choice(("x", "y")), target, field, job))
    return runs, io, facet_runs, facet_edges


def _sorted(items: set[Any]) -> list[Any]:
    return sorted(items, key=lambda item: tuple("" if v is None else str(v) for v in item))


@pytest.mark.parametrize("seed", range(40))
def test_the_columnar_diff_follows_the_row_by_row_rules(seed: int) -> None:
    runs, io, facet_runs, facet_edges = _random_model(seed)
    s = store(runs, io, facet_runs, facet_edges)
    base, current = windows(ago(48), ago(12))  # the base: the week before
    before, after = (_reference(runs, io, facet_runs, facet_edges, w, base.start) for w in (base, current))
    changes = diff(s, base, current, limit=None)
    for kind in ("job_edges", "writers", "dataset_edges"):
        expected = (_sorted(after[kind] - before[kind]), _sorted(before[kind] - after[kind]))
        assert getattr(changes, kind) == expected, kind
    # a null target field sorts as "" does: compare column edges as sets
    assert tuple(map(set, changes.column_edges)) == (
        after["column_edges"] - before["column_edges"],
        before["column_edges"] - after["column_edges"],
    )
    assert [(d, old, new) for d, old, new, *_ in changes.schemas] == [
        (d, before["schemas"][d], after["schemas"][d])
        for d in sorted(before["schemas"].keys() & after["schemas"].keys())
        if before["schemas"][d] != after["schemas"][d]
    ]
    assert [(ns, job, old, new) for ns, job, old, new in changes.outcomes] == [
        (*job, before["outcomes"][job], after["outcomes"][job])
        for job in sorted(before["outcomes"].keys() & after["outcomes"].keys())
        if before["outcomes"][job][2] != after["outcomes"][job][2]
    ]
    # what the CLI does: the rows its windows can observe read and coded for them, not the index's
    assert diff(_unheld(s), base, current, limit=None) == changes
    assert diff(_encoded(s), base, current, limit=None) == changes
    counted = diff(s, base, current, limit=2)
    assert counted.counts["job_edges"] == {
        "appeared": len(changes.job_edges[0]),
        "stopped": len(changes.job_edges[1]),
    }
    assert counted.job_edges == (changes.job_edges[0][:2], changes.job_edges[1][:2])
    assert counted.counts["outcomes"] == len(changes.outcomes) and counted.outcomes == changes.outcomes[:2]


class _Unheld(IndexedStore):
    """A store that keeps no coded observations (as the CLI's): each diff reads and codes its rows."""

    diff_observations = None


def _unheld(s: IndexedStore) -> IndexedStore:
    return _Unheld(s.settings, s._tables)


class _Encoded(_Unheld):
    """As the lake answers the CLI (lineage.query.tables.LakeTables.arrow): the string columns asked for
    dictionary-encoded, in chunks of two rows, each chunk with its own dictionary of every value of the
    column in reverse order (most entries unused by its rows, none in sorted order)."""

    def arrow(
        self, table: str, columns: Any = None, row_filter: Any = None, dictionary: Any = ()
    ) -> pa.Table:
        data = super().arrow(table, columns, row_filter)
        for name in dictionary:
            column = data.column(name).combine_chunks()
            values = pc.unique(column).drop_null()
            values = values.take(pa.array(range(len(values) - 1, -1, -1), pa.int64()))
            chunks = [
                pa.DictionaryArray.from_arrays(pc.index_in(part, value_set=values), values)
                for part in (column.slice(at, 2) for at in range(0, len(column), 2))
            ]
            kind = pa.dictionary(pa.int32(), pa.string())
            data = data.set_column(data.schema.get_field_index(name), name, pa.chunked_array(chunks, kind))
        return data


def _encoded(s: IndexedStore) -> IndexedStore:
    return _Encoded(s.settings, s._tables)


def test_the_lakes_dictionary_encoded_strings_code_as_plain_ones() -> None:
    base, current = windows(now=NOW)
    plain = diff(_unheld(store()), base, current, limit=None)
    encoded = diff(_encoded(store()), base, current, limit=None)
    assert encoded == plain and encoded.job_edges[0] and encoded.column_edges[0] and encoded.schemas


def test_a_lake_without_the_facet_tables_has_no_column_edges() -> None:
    s = store()
    del s._tables["column_facet_runs"], s._tables["column_facet_edges"]
    base, current = windows(now=NOW)
    changes = diff(s, base, current)
    assert changes.column_edges == ([], []) and changes.counts["column_edges"] == {
        "appeared": 0,
        "stopped": 0,
    }
    assert changes.dataset_edges == diff(store(), base, current).dataset_edges


def test_codes_sort_as_their_strings_with_a_null_first() -> None:
    codes = _Codes(pa.chunked_array([["b", None, "a"], ["c", "b"]]), pa.array(["", "d"]))
    assert codes.values.to_pylist() == [None, "", "a", "b", "c", "d"]
    assert codes(pa.array(["c", None, "a", "zz"])).to_pylist() == [4, 0, 2, 0]  # unknown: as a null
    assert codes.decode(pa.array([3, 0])) == ["b", None]
    jobs = _Jobs([(pa.array(["n2", "n1", "n1"]), pa.array(["x", "y", "x"]))])
    found = jobs(pa.array(["n1", "n2", "n1", "n3"]), pa.array(["x", "x", "y", "x"]))
    assert found.to_pylist() == [0, 2, 1, None]  # (n1, x) < (n1, y) < (n2, x); n3 unknown
    assert jobs.decode(pa.array([2, 1])) == (["n2", "n1"], ["x", "y"])


def test_a_composite_key_sorts_as_its_parts_and_never_wraps_around() -> None:
    import pyarrow.lib

    key = _combine((pa.array([1, 0, 1]), 2), (pa.array([0, 9, 3]), 10))
    assert key.to_pylist() == [10, 9, 13]
    with pytest.raises(pyarrow.lib.ArrowInvalid):
        _combine((pa.array([2**40]), 2**41), (pa.array([1]), 2**40))


def test_the_last_of_each_run_of_equal_keys() -> None:
    import numpy as np

    # rows sorted by (key, then the order compared): the last of each key is its greatest
    assert _last_of_runs(np.array([1, 1, 1, 2, 5, 5])).tolist() == [2, 3, 5]
    assert _last_of_runs(np.array([], np.int64)).tolist() == []


def test_a_jobs_latest_run_is_the_greatest_by_end_then_run_then_state() -> None:
    # a second run of report ends with c2 (FAIL): the greater run id is the job's outcome in the window
    later = diff(store([*RUNS, ("c4", "report", "COMPLETE", 5, 4)], IO), *windows(now=NOW))
    assert later.outcomes == [] and later.counts["outcomes"] == 0  # COMPLETE then, COMPLETE (c4) now
    earlier = diff(store([*RUNS, ("c0", "report", "COMPLETE", 5, 4)], IO), *windows(now=NOW))
    assert [(job, after[1], after[2]) for _ns, job, _before, after in earlier.outcomes] == [
        ("report", "c2", "FAIL")
    ]


def test_a_scoped_key_diffs_only_what_it_may_see() -> None:
    from lineage.serve.auth import Scope
    from lineage.serve.scope import scoped_store

    s = store()
    base, current = windows(now=NOW)
    whole = diff(s, base, current)
    assert diff(scoped_store(s, Scope(("etl", "ns"))), base, current) == whole
    jobs_only = diff(scoped_store(s, Scope(("etl",))), base, current)  # every dataset hidden
    assert jobs_only.job_edges == jobs_only.dataset_edges == jobs_only.column_edges == ([], [])
    assert jobs_only.writers == ([], []) and jobs_only.schemas == []
    assert jobs_only.outcomes == whole.outcomes  # the jobs' runs are visible


def test_the_graph_of_a_longer_diff_says_it_draws_the_first_changes(tmp_path: Path) -> None:
    out = tmp_path / "diff.html"
    args = [
        "diff",
        "--from",
        ago(24).isoformat(),
        "--to",
        NOW.isoformat(),
        "--graph",
        str(out),
        "--limit",
        "1",
    ]
    result = _cli(store(), args)
    assert result.exit_code == 0 and "; the first 1 changes of each kind, --all for all)" in result.output
    assert result.output.startswith(f"wrote {out} (") and "2 edges changed" in result.output


def test_rows_in_group_time_code_order_with_either_sort() -> None:
    import numpy as np

    from lineage.query.diff import _order

    rng = np.random.default_rng(7)
    group, at, then = rng.integers(0, 5, 200), rng.integers(0, 50, 200) * 10**6, rng.integers(0, 3, 200)
    expected = np.lexsort((then, at, group))
    assert (_order(group, 5, at, then) == expected).all()  # group and time as one key
    wide = at * 2**35  # their product past 63 bits: three keys
    assert (_order(group, 5, wide, then) == np.lexsort((then, wide, group))).all()
    assert len(_order(group[:0], 5, at[:0], then[:0])) == 0
