"""What changed in the lineage between two windows of time: the lineage each window's runs observed,
compared.

The lineage of a window is what the runs active in it reported: a run's read or write of a dataset
(a ``lineage.run_io`` row) is observed in a window when it overlaps it, from the row's first event to its
last (or the run's last event, later for a streaming run that reported its datasets on START only).
From those rows: job -> dataset and dataset -> job edges, dataset -> dataset edges through a job (what a
job read and wrote in the window, no self-loops, outputs that only DROPped left out), the schema each
dataset was last reported with, the jobs writing each dataset, and each job's last run outcome (its
latest run that ended in the window). Column edges are those of the column-lineage facets the window's
runs reported (``column_facet_runs`` -> ``column_facet_edges``).

Everything is read from rows the build keeps by run (``runs``, ``run_io``, ``column_facet_runs``) and by
facet or schema (``column_facet_edges``, ``dataset_schemas``), never from event history: a diff costs the
rows of the two windows' runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage.query.errors import LookupError_
from lineage.query.nodes import BOTH, DATASET, JOB, TERMINAL_STATES
from lineage.query.store import LineageStore
from lineage.query.tables import expressions

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
WEEK = timedelta(days=7)

JobEdge = tuple[str, str, str, str]  # job namespace, job name, dataset id, direction
DatasetEdge = tuple[str, str, str, str]  # source dataset id, target dataset id, job namespace, job name
ColumnEdge = tuple[str, str, str, str | None, str, str]  # source id, field, target id, field, job ns, name


@dataclass(frozen=True)
class Window:
    """A half-open window of time, ``[start, end)``."""

    start: datetime
    end: datetime

    def overlaps(self, first: datetime | None, last: datetime | None) -> bool:
        begin = first or last or _EPOCH
        return begin < self.end and (last or begin) >= self.start

    def holds(self, moment: datetime | None) -> bool:
        return moment is not None and self.start <= moment < self.end


def windows(
    start: datetime | None = None,
    end: datetime | None = None,
    base_start: datetime | None = None,
    base_end: datetime | None = None,
    now: datetime | None = None,
) -> tuple[Window, Window]:
    """The two windows compared, (base, current): by default the last day, and the week before it. A
    current window given alone is compared with the week before its start.

    Raises:
        LookupError_: a window that ends before it starts.
    """
    end = end or now or datetime.now(UTC)
    start = start or end - DAY
    base_end = base_end or start
    base_start = base_start or base_end - WEEK
    for name, (a, b) in (("--from/--to", (start, end)), ("--base-from/--base-to", (base_start, base_end))):
        if a >= b:
            raise LookupError_(
                f"{name}: the window must end after it starts ({a.isoformat()} >= {b.isoformat()})"
            )
    return Window(base_start, base_end), Window(start, end)


@dataclass
class Observed:
    """The lineage one window's runs observed."""

    job_edges: set[JobEdge] = field(default_factory=set)
    dataset_edges: set[DatasetEdge] = field(default_factory=set)
    column_edges: set[ColumnEdge] = field(default_factory=set)
    # dataset id -> (when, schema hash) of the latest report of its schema
    schemas: dict[str, tuple[datetime, str]] = field(default_factory=dict)
    # job -> (ended, run id, state) of its latest run that ended in the window
    outcomes: dict[tuple[str, str], tuple[datetime, str, str]] = field(default_factory=dict)
    # (job namespace, job name, dataset id) of every job writing a dataset (not only dropping it)
    writers: set[tuple[str, str, str]] = field(default_factory=set)


@dataclass
class Diff:
    """What changed from the base window to the current one."""

    base: Window
    current: Window
    job_edges: tuple[list[JobEdge], list[JobEdge]]  # (appeared, stopped being observed)
    dataset_edges: tuple[list[DatasetEdge], list[DatasetEdge]]
    column_edges: tuple[list[ColumnEdge], list[ColumnEdge]]
    writers: tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]  # (started, stopped writing)
    # (dataset id, hash before, hash after, fields added, removed, retyped as (name, before, after))
    schemas: list[tuple[str, str, str, list[str], list[str], list[tuple[str, str | None, str | None]]]]
    # (job namespace, job name, before: (ended, run, state), after)
    outcomes: list[tuple[str, str, tuple[datetime, str, str], tuple[datetime, str, str]]]


def _rows(
    store: LineageStore, table: str, row_filter: Any, columns: Sequence[str] | None = None
) -> list[dict]:
    """Rows of a lineage table the store may not hold in memory (the read index holds the tables every
    question needs; the rest are read from Iceberg as of its build). Empty when the lake lacks the table."""
    try:
        return store.rows(table, columns, row_filter)
    except LookupError_:
        build = getattr(store, "build", None)
        try:
            from lineage.query.tables import python_rows

            arrow = store.scan_table(
                store.settings.catalog.lineage_namespace,
                table,
                columns,
                row_filter,
                None if build is None else build.committed_at,
            )
        except LookupError_:
            return []
        return python_rows(arrow)


def _drop_only(row: dict[str, Any]) -> bool:
    return list(row.get("lifecycle_states") or []) == ["DROP"]


def observe(store: LineageStore, frames: Sequence[Window]) -> list[Observed]:
    """The lineage each window's runs observed (one :class:`Observed` per window, in order)."""
    ex = expressions()
    since = min(w.start for w in frames)
    runs = store.rows(
        "runs",
        ("run_id", "job_namespace", "job_name", "reported_state", "started_at", "ended_at", "last_event_at"),
        ex.GreaterThanOrEqual("last_event_at", since.isoformat()),
    )
    by_id = {r["run_id"]: r for r in runs}
    io = store.rows("run_io", row_filter=ex.In("run_id", sorted(by_id))) if by_id else []
    out = [Observed() for _ in frames]
    for row in io:
        run = by_id[row["run_id"]]
        last = max(
            (t for t in (row.get("last_seen"), run.get("last_event_at")) if t is not None), default=None
        )
        for frame, seen in zip(frames, out, strict=True):
            if not frame.overlaps(row.get("first_seen"), last):
                continue
            edge = (row["job_namespace"], row["job_name"], row["dataset_id"], row["direction"])
            seen.job_edges.add(edge)
            if row["direction"] == "output" and not _drop_only(row):
                seen.writers.add(edge[:3])
            schema = row.get("schema_hash")
            at = row.get("last_seen") or row.get("first_seen") or _EPOCH
            if schema and (
                row["dataset_id"] not in seen.schemas or seen.schemas[row["dataset_id"]] < (at, schema)
            ):
                seen.schemas[row["dataset_id"]] = (at, schema)
    for seen in out:
        reads: dict[tuple[str, str], set[str]] = {}
        for ns, name, dataset, direction in seen.job_edges:
            if direction == "input":
                reads.setdefault((ns, name), set()).add(dataset)
        for ns, name, target in seen.writers:
            for source in reads.get((ns, name), ()):
                if source != target:
                    seen.dataset_edges.add((source, target, ns, name))
    for run in runs:
        if run.get("reported_state") not in TERMINAL_STATES or run.get("job_name") is None:
            continue
        ended = run.get("ended_at") or run.get("last_event_at")
        if ended is None:
            continue
        for frame, seen in zip(frames, out, strict=True):
            if frame.holds(ended):
                key = (run["job_namespace"], run["job_name"])
                outcome = (ended, run["run_id"], run["reported_state"])
                if key not in seen.outcomes or seen.outcomes[key] < outcome:
                    seen.outcomes[key] = outcome
    _column_edges(store, frames, out, io, by_id)
    return out


def _column_edges(
    store: LineageStore,
    frames: Sequence[Window],
    out: list[Observed],
    io: list[dict[str, Any]],
    runs: dict[str, dict[str, Any]],
) -> None:
    """The column edges of the facets each window's writing runs reported."""
    ex = expressions()
    # The runs whose writes overlap each window (a facet comes with a run's output).
    writing: list[set[str]] = [set() for _ in frames]
    for row in io:
        if row["direction"] != "output":
            continue
        last = max(
            (t for t in (row.get("last_seen"), runs[row["run_id"]].get("last_event_at")) if t), default=None
        )
        for frame, ids in zip(frames, writing, strict=True):
            if frame.overlaps(row.get("first_seen"), last):
                ids.add(row["run_id"])
    every = sorted(set().union(*writing))
    if not every:
        return
    facet_runs = _rows(store, "column_facet_runs", ex.In("run_id", every), ("_facet", "run_id"))
    facets = sorted({r["_facet"] for r in facet_runs})
    if not facets:
        return
    columns = ("_facet", "source_dataset_id", "source_field", "target_dataset_id", "target_field")
    edges: dict[str, set[tuple[str, str, str, str | None]]] = {}
    jobs: dict[str, tuple[str, str]] = {}
    for row in _rows(
        store, "column_facet_edges", ex.In("_facet", facets), (*columns, "job_namespace", "job_name")
    ):
        ends = (row["source_dataset_id"], row["source_field"], row["target_dataset_id"], row["target_field"])
        edges.setdefault(row["_facet"], set()).add(ends)
        jobs[row["_facet"]] = (row["job_namespace"], row["job_name"])
    # Only edges between datasets this store knows: a scoped key's store holds the datasets it may see,
    # and the facet tables are read whole.
    known = store.nodes_of({end for ends in edges.values() for e in ends for end in (e[0], e[2])})
    for ids, seen in zip(writing, out, strict=True):
        for facet_run in facet_runs:
            facet = facet_run["_facet"]
            if facet_run["run_id"] in ids and facet in edges:
                ns, name = jobs[facet]
                seen.column_edges.update(
                    (s, sf, t, tf, ns, name) for s, sf, t, tf in edges[facet] if s in known and t in known
                )


def _fields(store: LineageStore, hashes: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    ex = expressions()
    rows = _rows(store, "dataset_schemas", ex.In("schema_hash", wanted), ("schema_hash", "schema_fields"))
    return {r["schema_hash"]: list(r["schema_fields"] or []) for r in rows}


def _changed_fields(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[str], list[str], list[tuple[str, str | None, str | None]]]:
    old = {f["name"]: f.get("type") for f in before}
    new = {f["name"]: f.get("type") for f in after}
    added = sorted(n for n in new if n not in old)
    removed = sorted(n for n in old if n not in new)
    retyped = sorted((n, old[n], new[n]) for n in new if n in old and old[n] != new[n])
    return added, removed, retyped


def _split(before: set[Any], after: set[Any]) -> tuple[list[Any], list[Any]]:
    def key(item: tuple[Any, ...]) -> tuple[str, ...]:
        return tuple("" if v is None else str(v) for v in item)

    return sorted(after - before, key=key), sorted(before - after, key=key)


def diff(
    store: LineageStore,
    base: Window,
    current: Window,
    *,
    node: str | None = None,
    depth: int | None = None,
) -> Diff:
    """What changed from ``base`` to ``current``; around ``node`` (any name), within ``depth`` hops of it
    either way, when given."""
    before, after = observe(store, [base, current])
    if node is not None:
        root = store.resolve(node)
        walk = store.traverse(root, BOTH, depth)
        datasets = {n.dataset_id for n in walk.hops if n.kind == DATASET}
        jobs = {(n.namespace, n.name) for n in walk.hops if n.kind == JOB}
        for seen in (before, after):
            _keep_around(seen, datasets, jobs)
    changed = []
    for dataset_id in sorted(set(before.schemas) & set(after.schemas)):
        old, new = before.schemas[dataset_id][1], after.schemas[dataset_id][1]
        if old != new:
            changed.append((dataset_id, old, new))
    fields = _fields(store, [h for _d, old, new in changed for h in (old, new)])
    schemas = [
        (d, old, new, *_changed_fields(fields.get(old, []), fields.get(new, []))) for d, old, new in changed
    ]
    outcomes = [
        (ns, name, before.outcomes[(ns, name)], after.outcomes[(ns, name)])
        for ns, name in sorted(set(before.outcomes) & set(after.outcomes))
        if before.outcomes[(ns, name)][2] != after.outcomes[(ns, name)][2]
    ]
    return Diff(
        base=base,
        current=current,
        job_edges=_split(before.job_edges, after.job_edges),
        dataset_edges=_split(before.dataset_edges, after.dataset_edges),
        column_edges=_split(before.column_edges, after.column_edges),
        writers=_split(before.writers, after.writers),
        schemas=schemas,
        outcomes=outcomes,
    )


def _keep_around(seen: Observed, datasets: set[str | None], jobs: set[tuple[str, str]]) -> None:
    seen.job_edges = {e for e in seen.job_edges if e[2] in datasets and (e[0], e[1]) in jobs}
    seen.writers = {e for e in seen.writers if e[2] in datasets and (e[0], e[1]) in jobs}
    seen.dataset_edges = {e for e in seen.dataset_edges if e[0] in datasets and e[1] in datasets}
    seen.column_edges = {e for e in seen.column_edges if e[0] in datasets and e[2] in datasets}
    seen.schemas = {d: s for d, s in seen.schemas.items() if d in datasets}
    seen.outcomes = {j: o for j, o in seen.outcomes.items() if j in jobs}
