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
rows of the two windows' runs. They are compared as Arrow tables (filters, group-bys, joins), never row
by row in Python: a whole-lake diff at tier M reads about a million ``run_io`` rows, and changes by the
hundred thousand. Only the changes listed (the first ``limit`` of each kind, in order) become Python
values; every kind is counted in full.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage.query.errors import LookupError_
from lineage.query.model import COLUMN_EDGE_KEY
from lineage.query.nodes import BOTH, DATASET, JOB, TERMINAL_STATES
from lineage.query.store import LineageStore
from lineage.query.tables import expressions, python_values

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
DAY = timedelta(days=1)
WEEK = timedelta(days=7)
# Changes listed of each kind unless more are asked for (all are counted): a whole-lake diff of a day
# against a week lists hundreds of thousands of them, tens of megabytes of JSON nobody reads.
DEFAULT_LIMIT = 20

JobEdge = tuple[str, str, str, str]  # job namespace, job name, dataset id, direction
DatasetEdge = tuple[str, str, str, str]  # source dataset id, target dataset id, job namespace, job name
ColumnEdge = tuple[str, str, str, str | None, str, str]  # source id, field, target id, field, job ns, name
Writer = tuple[str, str, str]  # job namespace, job name, dataset id

JOB_KEY = ("job_namespace", "job_name")
JOB_EDGE_KEY = (*JOB_KEY, "dataset_id", "direction")
WRITER_KEY = (*JOB_KEY, "dataset_id")
DATASET_EDGE_KEY = ("source_dataset_id", "target_dataset_id", *JOB_KEY)
_RUN_COLUMNS = ("run_id", *JOB_KEY, "reported_state", "ended_at", "last_event_at")
_IO_COLUMNS = (
    "run_id",
    *JOB_EDGE_KEY,
    "first_seen",
    "last_seen",
    "schema_hash",
    "lifecycle_states",
)


@dataclass(frozen=True)
class Window:
    """A half-open window of time, ``[start, end)``."""

    start: datetime
    end: datetime


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
    """The lineage one window's runs observed, as Arrow tables of distinct rows."""

    job_edges: Any  # JOB_EDGE_KEY
    writers: Any  # WRITER_KEY: every job writing a dataset (not only dropping it)
    dataset_edges: Any  # DATASET_EDGE_KEY
    column_edges: Any  # COLUMN_EDGE_KEY
    schemas: Any  # dataset_id, at (µs), schema_hash: the latest report of each dataset's schema
    outcomes: Any  # job_namespace, job_name, ended (µs), run_id, state: its latest run that ended in it


@dataclass
class Diff:
    """What changed from the base window to the current one: the first ``limit`` changes of each kind
    (all of them when ``limit`` is None), each kind sorted, and how many changed in all (``counts``)."""

    base: Window
    current: Window
    job_edges: tuple[list[JobEdge], list[JobEdge]]  # (appeared, stopped being observed)
    dataset_edges: tuple[list[DatasetEdge], list[DatasetEdge]]
    column_edges: tuple[list[ColumnEdge], list[ColumnEdge]]
    writers: tuple[list[Writer], list[Writer]]  # (started, stopped writing)
    # (dataset id, hash before, hash after, fields added, removed, retyped as (name, before, after))
    schemas: list[tuple[str, str, str, list[str], list[str], list[tuple[str, str | None, str | None]]]]
    # (job namespace, job name, before: (ended, run, state), after)
    outcomes: list[tuple[str, str, tuple[datetime, str, str], tuple[datetime, str, str]]]
    # {"job_edges": {"appeared": n, "stopped": n}, "dataset_edges": ..., "column_edges": ...,
    #  "writers": {"started": n, "stopped": n}, "schemas": n, "outcomes": n}
    counts: dict[str, Any]
    limit: int | None = DEFAULT_LIMIT

    @property
    def complete(self) -> bool:
        """Whether every change is listed (no kind counts more than ``limit``)."""
        if self.limit is None:
            return True
        totals = [self.counts["schemas"], self.counts["outcomes"]]
        for kind in ("job_edges", "dataset_edges", "column_edges", "writers"):
            totals += self.counts[kind].values()
        return max(totals) <= self.limit


def _micros(column: Any) -> Any:
    """A timestamp column as int64 microseconds since the epoch (Arrow's element-wise min and max take no
    timestamps; the integers compare the same)."""
    import pyarrow as pa

    return column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())


def _at(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


def _times(micros: Any) -> list[datetime]:
    import pyarrow as pa

    return python_values(micros.cast(pa.timestamp("us", tz="UTC")))


def _strings(*names: str) -> Any:
    """An empty table of string columns."""
    import pyarrow as pa

    return pa.table({name: pa.array([], pa.string()) for name in names})


def _distinct(table: Any, keys: Sequence[str]) -> Any:
    """The distinct rows of ``keys`` (nulls equal to nulls, as in a Python set)."""
    return table.select(list(keys)).group_by(list(keys), use_threads=False).aggregate([])


def _latest(table: Any, keys: Sequence[str], order: Sequence[str]) -> Any:
    """Per distinct ``keys``, the row greatest by the ``order`` columns (compared as a tuple)."""
    import pyarrow.compute as pc

    ranked = table.sort_by([*((k, "ascending") for k in keys), *((c, "descending") for c in order)])
    # "first" follows the input order only without threads; nulls kept so that one row's values stay together
    every = pc.ScalarAggregateOptions(skip_nulls=False)
    firsts = ranked.group_by(list(keys), use_threads=False).aggregate([(c, "first", every) for c in order])
    return firsts.rename_columns({f"{c}_first": c for c in order}).select([*keys, *order])


def _lake_table(store: LineageStore, table: str, columns: Sequence[str], row_filter: Any = None) -> Any:
    """A lineage table the store may not hold in memory (the read index holds the tables every question
    needs; the rest are read from Iceberg as of its build). None when the lake lacks the table."""
    try:
        return store.arrow(table, columns, row_filter)
    except LookupError_:
        build = getattr(store, "build", None)
        try:
            return store.scan_table(
                store.settings.catalog.lineage_namespace,
                table,
                columns,
                row_filter,
                None if build is None else build.committed_at,
            )
        except LookupError_:
            return None


def _observed_rows(store: LineageStore, frames: Sequence[Window]) -> tuple[Any, Any]:
    """The ``run_io`` rows of the runs active since the first window starts, each with its span
    (``begin``, ``end`` in µs) and whether it writes its dataset; and those runs."""
    import pyarrow.compute as pc

    ex = expressions()
    since, until = min(w.start for w in frames), max(w.end for w in frames)
    runs = store.arrow("runs", _RUN_COLUMNS, ex.GreaterThanOrEqual("last_event_at", since.isoformat()))
    # A row first seen after both windows overlaps neither (one without first_seen counts from its last).
    first_seen_in_time = ex.Or(ex.LessThan("first_seen", until.isoformat()), ex.IsNull("first_seen"))
    io = store.arrow("run_io", _IO_COLUMNS, first_seen_in_time)
    position = pc.index_in(io.column("run_id"), value_set=runs.column("run_id").combine_chunks())
    active = pc.is_valid(position)
    io, position = io.filter(active), position.filter(active)
    run_last = _micros(runs.column("last_event_at")).take(position)
    last = pc.max_element_wise(_micros(io.column("last_seen")), run_last, skip_nulls=True)
    begin = pc.coalesce(_micros(io.column("first_seen")), last, 0)
    states = io.column("lifecycle_states")
    drop_only = pc.fill_null(
        pc.and_(pc.equal(pc.list_value_length(states), 1), pc.equal(pc.binary_join(states, ","), "DROP")),
        False,
    )
    schema_at = pc.coalesce(_micros(io.column("last_seen")), _micros(io.column("first_seen")), 0)
    rows = (
        io.drop_columns(["lifecycle_states", "first_seen", "last_seen"])
        .append_column("begin", begin)
        .append_column("end", pc.coalesce(last, begin))
        .append_column("writes", pc.and_(pc.equal(io.column("direction"), "output"), pc.invert(drop_only)))
        .append_column("schema_at", schema_at)
    )
    return rows, runs


def observe(store: LineageStore, frames: Sequence[Window]) -> list[Observed]:
    """The lineage each window's runs observed (one :class:`Observed` per window, in order)."""
    import pyarrow.compute as pc

    rows, runs = _observed_rows(store, frames)
    ended_runs = _ended_runs(runs)
    seen_rows = []
    for frame in frames:
        overlaps = pc.and_(
            pc.less(rows.column("begin"), _at(frame.end)),
            pc.greater_equal(rows.column("end"), _at(frame.start)),
        )
        seen_rows.append(rows.filter(overlaps))
    writing = [
        pc.unique(seen.filter(pc.equal(seen.column("direction"), "output")).column("run_id").combine_chunks())
        for seen in seen_rows
    ]
    column_edges = _column_edges(store, writing)
    out = []
    for frame, seen, columns in zip(frames, seen_rows, column_edges, strict=True):
        job_edges = _distinct(seen, JOB_EDGE_KEY)
        writers = _distinct(seen.filter(seen.column("writes")), WRITER_KEY)
        reads = job_edges.filter(pc.equal(job_edges.column("direction"), "input"))
        flows = (
            reads.select([*JOB_KEY, "dataset_id"])
            .rename_columns([*JOB_KEY, "source_dataset_id"])
            .join(writers.rename_columns([*JOB_KEY, "target_dataset_id"]), list(JOB_KEY), join_type="inner")
        )
        flows = flows.filter(
            pc.not_equal(flows.column("source_dataset_id"), flows.column("target_dataset_id"))
        )
        reported = seen.filter(pc.fill_null(pc.not_equal(seen.column("schema_hash"), ""), False))
        schemas = _latest(
            reported.select(["dataset_id", "schema_at", "schema_hash"]).rename_columns(
                ["dataset_id", "at", "schema_hash"]
            ),
            ["dataset_id"],
            ["at", "schema_hash"],
        )
        ended = ended_runs.column("ended")
        in_frame = pc.and_(pc.greater_equal(ended, _at(frame.start)), pc.less(ended, _at(frame.end)))
        outcomes = _latest(ended_runs.filter(in_frame), JOB_KEY, ["ended", "run_id", "state"])
        out.append(
            Observed(
                job_edges=job_edges,
                writers=writers,
                dataset_edges=_distinct(flows, DATASET_EDGE_KEY),
                column_edges=columns,
                schemas=schemas,
                outcomes=outcomes,
            )
        )
    return out


def _ended_runs(runs: Any) -> Any:
    """The runs that ended (a terminal state) with their job: job_namespace, job_name, ended (µs), run_id,
    state."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ended = pc.coalesce(_micros(runs.column("ended_at")), _micros(runs.column("last_event_at")))
    terminal = pc.is_in(runs.column("reported_state"), value_set=pa.array(TERMINAL_STATES, pa.string()))
    keep = pc.and_(pc.and_(terminal, pc.is_valid(runs.column("job_name"))), pc.is_valid(ended))
    table = pa.table(
        {
            "job_namespace": runs.column("job_namespace"),
            "job_name": runs.column("job_name"),
            "ended": ended,
            "run_id": runs.column("run_id"),
            "state": runs.column("reported_state"),
        }
    )
    return table.filter(pc.fill_null(keep, False))


def _column_edges(store: LineageStore, writing: Sequence[Any]) -> list[Any]:
    """The column edges of the facets each window's writing runs (``writing``: their ids) reported."""
    import pyarrow as pa
    import pyarrow.compute as pc

    empty = [_strings(*COLUMN_EDGE_KEY) for _ in writing]
    every = pc.unique(pa.chunked_array(writing, pa.string()).combine_chunks())
    if len(every) == 0:
        return empty
    facet_runs = _lake_table(store, "column_facet_runs", ("_facet", "run_id"))
    edges = _lake_table(store, "column_facet_edges", ("_facet", *COLUMN_EDGE_KEY))
    if facet_runs is None or edges is None:
        return empty
    facet_runs = facet_runs.filter(pc.is_in(facet_runs.column("run_id"), value_set=every))
    facets = pc.unique(facet_runs.column("_facet").combine_chunks())
    # Only edges between datasets this store knows: a scoped key's store holds the datasets it may see,
    # and the facet tables are read whole.
    known = store.dataset_ids()
    edges = edges.filter(
        pc.and_(
            pc.is_in(edges.column("_facet"), value_set=facets),
            pc.and_(
                pc.is_in(edges.column("source_dataset_id"), value_set=known),
                pc.is_in(edges.column("target_dataset_id"), value_set=known),
            ),
        )
    )
    out = []
    for ids in writing:
        reported = facet_runs.filter(pc.is_in(facet_runs.column("run_id"), value_set=ids))
        mine = pc.unique(reported.column("_facet").combine_chunks())
        out.append(_distinct(edges.filter(pc.is_in(edges.column("_facet"), value_set=mine)), COLUMN_EDGE_KEY))
    return out


def _fields(store: LineageStore, hashes: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """schema hash -> its fields (``dataset_schemas``), for a few hashes."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    ex = expressions()
    table = _lake_table(
        store, "dataset_schemas", ("schema_hash", "schema_fields"), ex.In("schema_hash", wanted)
    )
    if table is None:
        return {}
    rows = zip(
        table.column("schema_hash").to_pylist(), table.column("schema_fields").to_pylist(), strict=True
    )
    return {schema_hash: list(fields or []) for schema_hash, fields in rows}


def _changed_fields(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[str], list[str], list[tuple[str, str | None, str | None]]]:
    old = {f["name"]: f.get("type") for f in before}
    new = {f["name"]: f.get("type") for f in after}
    added = sorted(n for n in new if n not in old)
    removed = sorted(n for n in old if n not in new)
    retyped = sorted((n, old[n], new[n]) for n in new if n in old and old[n] != new[n])
    return added, removed, retyped


def _first(table: Any, keys: Sequence[str], limit: int | None) -> Any:
    """The first ``limit`` rows of ``table`` (every row when None) in the order of ``keys``, a null as an
    empty string."""
    import pyarrow.compute as pc

    if limit == 0 or table.num_rows == 0:
        return table.slice(0, 0)
    filled = table.select(list(keys))
    for i, key in enumerate(keys):
        if filled.column(key).null_count:
            filled = filled.set_column(i, key, pc.fill_null(filled.column(key), ""))
    order = [(k, "ascending") for k in keys]
    if limit is None or limit >= table.num_rows:
        return table.take(pc.sort_indices(filled, order))
    first = pc.select_k_unstable(filled, limit, order)
    return table.take(first.take(pc.sort_indices(filled.take(first), order)))


def _tuples(table: Any, columns: Sequence[str]) -> list[Any]:
    return list(zip(*(python_values(table.column(c)) for c in columns), strict=True))


def _split(
    before: Any, after: Any, keys: Sequence[str], limit: int | None
) -> tuple[list[Any], list[Any], int, int]:
    """What ``after`` holds and ``before`` does not, and the reverse: the first ``limit`` of each as tuples
    of ``keys``, and how many in all."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sides = pa.concat_tables(
        [
            before.select(list(keys)).append_column(
                "side", pa.repeat(pa.scalar(0, pa.int8()), before.num_rows)
            ),
            after.select(list(keys)).append_column(
                "side", pa.repeat(pa.scalar(1, pa.int8()), after.num_rows)
            ),
        ]
    )
    seen = sides.group_by(list(keys), use_threads=False).aggregate([("side", "min"), ("side", "max")])
    appeared = seen.filter(pc.equal(seen.column("side_min"), 1))
    stopped = seen.filter(pc.equal(seen.column("side_max"), 0))
    return (
        _tuples(_first(appeared, keys, limit), keys),
        _tuples(_first(stopped, keys, limit), keys),
        appeared.num_rows,
        stopped.num_rows,
    )


def diff(
    store: LineageStore,
    base: Window,
    current: Window,
    *,
    node: str | None = None,
    depth: int | None = None,
    limit: int | None = DEFAULT_LIMIT,
) -> Diff:
    """What changed from ``base`` to ``current``; around ``node`` (any name), within ``depth`` hops of it
    either way, when given. The first ``limit`` changes of each kind are listed (all when None), every
    change counted."""
    import pyarrow.compute as pc

    before, after = observe(store, [base, current])
    if node is not None:
        root = store.resolve(node)
        walk = store.traverse(root, BOTH, depth)
        datasets = [n.dataset_id for n in walk.hops if n.kind == DATASET]
        jobs = [(n.namespace, n.name) for n in walk.hops if n.kind == JOB]
        for seen in (before, after):
            _keep_around(seen, datasets, jobs)
    counts: dict[str, Any] = {}
    listed: dict[str, tuple[list[Any], list[Any]]] = {}
    for kind, keys, names in (
        ("job_edges", JOB_EDGE_KEY, ("appeared", "stopped")),
        ("dataset_edges", DATASET_EDGE_KEY, ("appeared", "stopped")),
        ("column_edges", COLUMN_EDGE_KEY, ("appeared", "stopped")),
        ("writers", WRITER_KEY, ("started", "stopped")),
    ):
        appeared, stopped, n_appeared, n_stopped = _split(
            getattr(before, kind), getattr(after, kind), keys, limit
        )
        listed[kind] = (appeared, stopped)
        counts[kind] = dict(zip(names, (n_appeared, n_stopped), strict=True))
    # schemas reported in both windows, the latest of each different
    pairs = (
        before.schemas.select(["dataset_id", "schema_hash"])
        .rename_columns(["dataset_id", "before"])
        .join(
            after.schemas.select(["dataset_id", "schema_hash"]).rename_columns(["dataset_id", "after"]),
            "dataset_id",
            join_type="inner",
        )
    )
    pairs = pairs.filter(pc.not_equal(pairs.column("before"), pairs.column("after")))
    counts["schemas"] = pairs.num_rows
    changed = _tuples(_first(pairs, ["dataset_id"], limit), ("dataset_id", "before", "after"))
    fields = _fields(store, [h for _d, old, new in changed for h in (old, new)])
    schemas = [
        (d, old, new, *_changed_fields(fields.get(old, []), fields.get(new, []))) for d, old, new in changed
    ]
    # jobs whose latest run that ended in each window ended otherwise
    outcome = ["ended", "run_id", "state"]
    runs = before.outcomes.rename_columns([*JOB_KEY, *(f"{c}_before" for c in outcome)]).join(
        after.outcomes.rename_columns([*JOB_KEY, *(f"{c}_after" for c in outcome)]),
        list(JOB_KEY),
        join_type="inner",
    )
    runs = runs.filter(pc.not_equal(runs.column("state_before"), runs.column("state_after")))
    counts["outcomes"] = runs.num_rows
    runs = _first(runs, JOB_KEY, limit)
    outcomes = [
        (ns, name, (ended_before, run_before, state_before), (ended_after, run_after, state_after))
        for ns, name, ended_before, run_before, state_before, ended_after, run_after, state_after in zip(
            python_values(runs.column("job_namespace")),
            python_values(runs.column("job_name")),
            _times(runs.column("ended_before")),
            python_values(runs.column("run_id_before")),
            python_values(runs.column("state_before")),
            _times(runs.column("ended_after")),
            python_values(runs.column("run_id_after")),
            python_values(runs.column("state_after")),
            strict=True,
        )
    ]
    return Diff(
        base=base,
        current=current,
        job_edges=listed["job_edges"],
        dataset_edges=listed["dataset_edges"],
        column_edges=listed["column_edges"],
        writers=listed["writers"],
        schemas=schemas,
        outcomes=outcomes,
        counts=counts,
        limit=limit,
    )


def _keep_around(seen: Observed, datasets: list[str | None], jobs: list[tuple[str, str]]) -> None:
    """Keep only what lies among ``datasets`` and ``jobs`` (a walk's nodes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array([d for d in datasets if d is not None], pa.string())
    walked = pa.table(
        {
            "job_namespace": pa.array([j[0] for j in jobs], pa.string()),
            "job_name": pa.array([j[1] for j in jobs], pa.string()),
        }
    )

    def among(table: Any, *columns: str) -> Any:
        mask = pc.is_in(table.column(columns[0]), value_set=ids)
        for column in columns[1:]:
            mask = pc.and_(mask, pc.is_in(table.column(column), value_set=ids))
        return table.filter(mask)

    def by_walked_jobs(table: Any) -> Any:
        return table.join(walked, list(JOB_KEY), join_type="left semi")

    seen.job_edges = by_walked_jobs(among(seen.job_edges, "dataset_id"))
    seen.writers = by_walked_jobs(among(seen.writers, "dataset_id"))
    seen.dataset_edges = among(seen.dataset_edges, "source_dataset_id", "target_dataset_id")
    seen.column_edges = among(seen.column_edges, "source_dataset_id", "target_dataset_id")
    seen.schemas = among(seen.schemas, "dataset_id")
    seen.outcomes = by_walked_jobs(seen.outcomes)
