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

Never row by row in Python: a whole-lake diff at tier M reads about a million ``run_io`` rows and changes
by the hundred thousand. :class:`Observations` codes the rows once as integers (order-preserving codes of
jobs, datasets, directions and schema hashes; each kind of edge one int64 key that sorts as its strings
do); a window is then a few Arrow filters, a diff set operations over keys (``is_in``), and only the
changes listed (the first ``limit`` of each kind, in order) are decoded into Python values; every kind is
counted in full. The read index keeps the coded rows of its build (``IndexedStore.diff_observations``);
the CLI codes the rows its windows can observe.
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

_JOB = ("job_namespace", "job_name")
_RUN_COLUMNS = ("run_id", *_JOB, "reported_state", "ended_at", "last_event_at")
_IO_COLUMNS = (
    "run_id",
    *_JOB,
    "dataset_id",
    "direction",
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


def _chunks(column: Any) -> list[Any]:
    return list(column.chunks) if hasattr(column, "chunks") else [column]


def _sorted_unique(values: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    distinct = pc.unique(values)
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    return distinct.take(pc.sort_indices(distinct))


def _strings(*names: str) -> Any:
    """An empty table of string columns."""
    import pyarrow as pa

    return pa.table({name: pa.array([], pa.string()) for name in names})


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


class _Codes:
    """Order-preserving integer codes of some string columns' values: 0 for a null, 1, 2 ... for the
    distinct values in sorted order, so that codes sort as their strings do (a null first, as an empty
    string would in a Python sort key). ``values`` decodes a code (``values[0]`` is null)."""

    def __init__(self, *columns: Any) -> None:
        import pyarrow as pa

        chunks = [chunk.cast(pa.string()) for column in columns for chunk in _chunks(column)]
        distinct = _sorted_unique(pa.chunked_array(chunks, pa.string())).drop_null()
        self.values = pa.concat_arrays([pa.nulls(1, pa.string()), distinct])

    def __len__(self) -> int:
        return len(self.values)

    def __call__(self, column: Any) -> Any:
        """The codes of a string column (int64); a value not among the coder's is coded as a null."""
        import pyarrow as pa
        import pyarrow.compute as pc

        found = pc.index_in(column, value_set=self.values.slice(1))
        return pc.fill_null(pc.add(found.cast(pa.int64()), 1), 0)

    def decode(self, codes: Any) -> list[Any]:
        return self.values.take(codes).to_pylist()


def _dense(keys: Any) -> Any:
    """Keys renumbered 0, 1 ... in their order (so that a composite key built on them stays small)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.index_in(keys, value_set=_sorted_unique(keys)).cast(pa.int64())


def _combine(*parts: tuple[Any, int]) -> Any:
    """One int64 key per row from several (codes, bound) parts, each code below its bound, ordered as the
    tuple of codes is; it fails rather than wraps around when the bounds multiply past 64 bits."""
    import pyarrow.compute as pc

    key = parts[0][0]
    for codes, bound in parts[1:]:
        key = pc.add_checked(pc.multiply_checked(key, bound), codes)
    return key


class _Jobs:
    """Dense order-preserving codes of jobs, (namespace, name) pairs."""

    def __init__(self, pairs: Sequence[tuple[Any, Any]]) -> None:
        import pyarrow as pa

        self.namespaces = _Codes(*(ns for ns, _name in pairs))
        self.names = _Codes(*(name for _ns, name in pairs))
        keys = [self._key(ns, name) for ns, name in pairs]
        self.keys = _sorted_unique(pa.chunked_array([c for k in keys for c in _chunks(k)], pa.int64()))

    def _key(self, namespaces: Any, names: Any) -> Any:
        return _combine(
            (self.namespaces(namespaces), len(self.namespaces)), (self.names(names), len(self.names))
        )

    def __len__(self) -> int:
        return len(self.keys)

    def __call__(self, namespaces: Any, names: Any) -> Any:
        """The codes of jobs (null: a job not among the coder's)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.index_in(self._key(namespaces, names), value_set=self.keys).cast(pa.int64())

    def decode(self, codes: Any) -> tuple[list[Any], list[Any]]:
        import pyarrow.compute as pc

        keys = self.keys.take(codes)
        bound = len(self.names)
        return (
            self.namespaces.decode(pc.divide(keys, bound)),
            self.names.decode(pc.subtract(keys, pc.multiply(pc.divide(keys, bound), bound))),
        )


def _remainder(values: Any, bound: int) -> Any:
    import pyarrow.compute as pc

    return pc.subtract(values, pc.multiply(pc.divide(values, bound), bound))


@dataclass
class Observations:
    """What the ``run_io`` rows and column-lineage facets of some runs observed, coded as integers once
    (jobs, datasets, directions and schema hashes as order-preserving codes, each edge as one int64 key
    ordered as its strings), so that a window is a few vectorised filters and a diff a few set operations
    over integers. The read index keeps one per loaded build; the CLI reads the rows its windows need."""

    # per run_io row of a known run: begin, end, run_last (µs), edge (job edge key), writes (bool),
    # run (run code), schema_at (µs), schema (code; 0: none reported)
    rows: Any
    jobs: _Jobs
    datasets: _Codes
    directions: _Codes
    schemas: _Codes
    # the runs that ended (a terminal state): job (code), ended, run_last (µs), run_id, state
    ended: Any
    facet_runs: Any  # facet (code), run (code): the facets each run reported
    facet_edges: Any  # facet (code), edge (column edge key), per exploded edge between known datasets
    column_rows: Any  # key, then COLUMN_EDGE_KEY: one row per column edge key, sorted by key

    @classmethod
    def read(
        cls, store: LineageStore, since: datetime | None = None, until: datetime | None = None
    ) -> Observations:
        """The observations of every run (``since``, ``until``: only the rows windows between them can
        observe: runs with an event since ``since``, rows first seen before ``until``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ex = expressions()
        runs = store.arrow(
            "runs",
            _RUN_COLUMNS,
            None if since is None else ex.GreaterThanOrEqual("last_event_at", since.isoformat()),
        )
        # A row first seen after both windows overlaps neither (one without first_seen counts from its last).
        io = store.arrow(
            "run_io",
            _IO_COLUMNS,
            None
            if until is None
            else ex.Or(ex.LessThan("first_seen", until.isoformat()), ex.IsNull("first_seen")),
        )
        run_ids = runs.column("run_id").combine_chunks()
        run = pc.index_in(io.column("run_id"), value_set=run_ids)
        known = pc.is_valid(run)
        io, run = io.filter(known), run.filter(known)
        facet_runs = _lake_table(store, "column_facet_runs", ("_facet", "run_id"))
        edges = _lake_table(store, "column_facet_edges", ("_facet", *COLUMN_EDGE_KEY))
        if facet_runs is None or edges is None:
            facet_runs, edges = _strings("_facet", "run_id"), _strings("_facet", *COLUMN_EDGE_KEY)
        facet_run = pc.index_in(facet_runs.column("run_id"), value_set=run_ids)
        facet_runs = pa.table(
            {"_facet": facet_runs.column("_facet"), "run": facet_run.cast(pa.int64())}
        ).filter(pc.is_valid(facet_run))
        # Only edges between datasets this store knows: a scoped key's store holds the datasets it may see,
        # and the facet tables are read whole.
        ids = store.dataset_ids()
        edges = edges.filter(
            pc.and_(
                pc.is_in(edges.column("_facet"), value_set=pc.unique(facet_runs.column("_facet"))),
                pc.and_(
                    pc.is_in(edges.column("source_dataset_id"), value_set=ids),
                    pc.is_in(edges.column("target_dataset_id"), value_set=ids),
                ),
            )
        )
        jobs = _Jobs(
            [
                (io.column("job_namespace"), io.column("job_name")),
                (runs.column("job_namespace"), runs.column("job_name")),
                (edges.column("job_namespace"), edges.column("job_name")),
            ]
        )
        datasets = _Codes(
            io.column("dataset_id"), edges.column("source_dataset_id"), edges.column("target_dataset_id")
        )
        directions = _Codes(io.column("direction"))
        hashes = pc.if_else(pc.equal(io.column("schema_hash"), ""), None, io.column("schema_hash"))
        schemas = _Codes(hashes)
        edge = _combine(
            (jobs(io.column("job_namespace"), io.column("job_name")), len(jobs)),
            (datasets(io.column("dataset_id")), len(datasets)),
            (directions(io.column("direction")), len(directions)),
        )
        run_last = _micros(runs.column("last_event_at")).take(run)
        last = pc.max_element_wise(_micros(io.column("last_seen")), run_last, skip_nulls=True)
        begin = pc.coalesce(_micros(io.column("first_seen")), last, 0)
        states = io.column("lifecycle_states")
        drop_only = pc.fill_null(
            pc.and_(pc.equal(pc.list_value_length(states), 1), pc.equal(pc.binary_join(states, ","), "DROP")),
            False,
        )
        rows = pa.table(
            {
                "begin": begin,
                "end": pc.coalesce(last, begin),
                "run_last": run_last,
                "edge": edge,
                "writes": pc.and_(pc.equal(io.column("direction"), "output"), pc.invert(drop_only)),
                "run": run.cast(pa.int64()),
                "schema_at": pc.coalesce(
                    _micros(io.column("last_seen")), _micros(io.column("first_seen")), 0
                ),
                "schema": schemas(hashes),
            }
        )
        ended_at = pc.coalesce(_micros(runs.column("ended_at")), _micros(runs.column("last_event_at")))
        terminal = pc.is_in(runs.column("reported_state"), value_set=pa.array(TERMINAL_STATES, pa.string()))
        ended = pa.table(
            {
                "job": jobs(runs.column("job_namespace"), runs.column("job_name")),
                "ended": ended_at,
                "run_last": _micros(runs.column("last_event_at")),
                "run_id": runs.column("run_id"),
                "state": runs.column("reported_state"),
            }
        ).filter(
            pc.fill_null(
                pc.and_(pc.and_(terminal, pc.is_valid(runs.column("job_name"))), pc.is_valid(ended_at)), False
            )
        )
        fields = _Codes(edges.column("source_field"), edges.column("target_field"))
        ends = [
            _dense(
                _combine(
                    (datasets(edges.column(f"{side}_dataset_id")), len(datasets)),
                    (fields(edges.column(f"{side}_field")), len(fields)),
                )
            )
            for side in ("source", "target")
        ]
        column_key = _combine(
            (ends[0], len(edges)),
            (ends[1], len(edges)),
            (jobs(edges.column("job_namespace"), edges.column("job_name")), len(jobs)),
        )
        distinct = _sorted_unique(column_key)
        column_rows = edges.select(list(COLUMN_EDGE_KEY)).take(pc.index_in(distinct, value_set=column_key))
        facets = _Codes(facet_runs.column("_facet"))
        return cls(
            rows=rows,
            jobs=jobs,
            datasets=datasets,
            directions=directions,
            schemas=schemas,
            ended=ended,
            facet_runs=pa.table(
                {"facet": facets(facet_runs.column("_facet")), "run": facet_runs.column("run")}
            ),
            facet_edges=pa.table({"facet": facets(edges.column("_facet")), "edge": column_key}),
            column_rows=column_rows.add_column(0, "key", distinct),
        )


@dataclass
class _Around:
    """The codes of a walk's datasets and jobs (a diff around a node)."""

    datasets: Any
    jobs: Any


@dataclass
class Seen:
    """What one window observed: the distinct keys of each kind of edge (int64 arrays), the latest schema
    of each dataset (dataset, schema codes) and each job's latest run that ended in it (job, ended,
    run_id, state)."""

    job_edges: Any
    writers: Any  # job * datasets + dataset
    dataset_edges: Any  # (source * datasets + target) * jobs + job
    column_edges: Any
    schemas: Any
    outcomes: Any


def _latest(table: Any, key: str, order: Sequence[str]) -> Any:
    """Per distinct ``key``, the row greatest by the ``order`` columns (compared as a tuple)."""
    for column in order:
        best = table.group_by(key, use_threads=False).aggregate([(column, "max")])
        table = table.join(best.rename_columns([key, column]), [key, column], join_type="left semi")
    return (
        table.group_by(key, use_threads=False)
        .aggregate([(c, "max") for c in order])
        .rename_columns([key, *order])
    )


def _unique(values: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    found = pc.unique(values)
    return found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found


def window_sets(obs: Observations, frame: Window, since: datetime, around: _Around | None = None) -> Seen:
    """What the runs active in ``frame`` observed (those with no event since ``since`` left out, as when
    the rows were read), within a walk's nodes when ``around`` is given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = obs.rows
    mask = pc.and_(
        pc.and_(
            pc.less(rows.column("begin"), _at(frame.end)),
            pc.greater_equal(rows.column("end"), _at(frame.start)),
        ),
        pc.greater_equal(rows.column("run_last"), _at(since)),
    )
    rows = rows.filter(mask)
    n_datasets, n_directions = len(obs.datasets), len(obs.directions)
    edge = rows.column("edge")
    pair = pc.divide(edge, n_directions)  # job * datasets + dataset
    dataset = _remainder(pair, n_datasets)
    job = pc.divide(pair, n_datasets)
    direction = _remainder(edge, n_directions)
    output = pc.equal(direction, obs.directions(pa.array(["output"]))[0])
    within = inside = None
    if around is not None:
        inside = pc.is_in(dataset, value_set=around.datasets)
        within = pc.and_(inside, pc.is_in(job, value_set=around.jobs))
    writes = rows.column("writes")
    job_edges = _unique(edge if within is None else edge.filter(within))
    writers = _unique(pair.filter(writes if within is None else pc.and_(writes, within)))
    # dataset -> dataset through a job: what it read joined with what it wrote (its ends within the walk)
    reads = pc.equal(direction, obs.directions(pa.array(["input"]))[0])
    reads = _unique(pair.filter(reads if inside is None else pc.and_(reads, inside)))
    wrote = _unique(pair.filter(writes if inside is None else pc.and_(writes, inside)))
    flows = pa.table({"job": pc.divide(reads, n_datasets), "source": _remainder(reads, n_datasets)}).join(
        pa.table({"job": pc.divide(wrote, n_datasets), "target": _remainder(wrote, n_datasets)}), "job"
    )
    flows = flows.filter(pc.not_equal(flows.column("source"), flows.column("target")))
    dataset_edges = _unique(
        _combine(
            (flows.column("source"), n_datasets),
            (flows.column("target"), n_datasets),
            (flows.column("job"), len(obs.jobs)),
        )
    )
    reported = pc.greater(rows.column("schema"), 0)
    schemas = pa.table(
        {"dataset": dataset, "at": rows.column("schema_at"), "schema": rows.column("schema")}
    ).filter(reported if inside is None else pc.and_(reported, inside))
    ended = obs.ended
    ends = ended.column("ended")
    in_frame = pc.and_(
        pc.and_(pc.greater_equal(ends, _at(frame.start)), pc.less(ends, _at(frame.end))),
        pc.greater_equal(ended.column("run_last"), _at(since)),
    )
    if around is not None:
        in_frame = pc.and_(in_frame, pc.is_in(ended.column("job"), value_set=around.jobs))
    # the column edges of the facets the window's writing runs reported
    writing = _unique(rows.column("run").filter(output))
    facets = obs.facet_runs.filter(pc.is_in(obs.facet_runs.column("run"), value_set=writing)).column("facet")
    edges = obs.facet_edges.filter(pc.is_in(obs.facet_edges.column("facet"), value_set=_unique(facets)))
    column_edges = _unique(edges.column("edge"))
    if around is not None:
        ends_of = obs.column_rows.take(pc.index_in(column_edges, value_set=obs.column_rows.column("key")))
        walked = obs.datasets.values.take(around.datasets)
        column_edges = column_edges.filter(
            pc.and_(
                pc.is_in(ends_of.column("source_dataset_id"), value_set=walked),
                pc.is_in(ends_of.column("target_dataset_id"), value_set=walked),
            )
        )
    return Seen(
        job_edges=job_edges,
        writers=writers,
        dataset_edges=dataset_edges,
        column_edges=column_edges,
        schemas=_latest(schemas, "dataset", ["at", "schema"]).select(["dataset", "schema"]),
        outcomes=_latest(
            ended.filter(in_frame).drop_columns(["run_last"]), "job", ["ended", "run_id", "state"]
        ),
    )


def _smallest(keys: Any, limit: int | None) -> Any:
    """The ``limit`` smallest keys (every one when None), in order."""
    import pyarrow.compute as pc

    if limit is not None and limit < len(keys):
        keys = keys.take(pc.select_k_unstable(keys, limit, [("keys", "ascending")]))
    return keys.take(pc.sort_indices(keys))


def _split(before: Any, after: Any, limit: int | None) -> tuple[Any, Any, int, int]:
    """The keys ``after`` holds and ``before`` does not, and the reverse: the first ``limit`` of each in
    order, and how many in all."""
    import pyarrow.compute as pc

    appeared = after.filter(pc.invert(pc.is_in(after, value_set=before)))
    stopped = before.filter(pc.invert(pc.is_in(before, value_set=after)))
    return _smallest(appeared, limit), _smallest(stopped, limit), len(appeared), len(stopped)


def observe(store: LineageStore, frames: Sequence[Window]) -> Observations:
    """The observations windows need: the read index's, kept for its build, or else read for them."""
    held = getattr(store, "diff_observations", None)
    if held is not None:
        return held
    return Observations.read(store, min(w.start for w in frames), max(w.end for w in frames))


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
    import pyarrow as pa
    import pyarrow.compute as pc

    obs = observe(store, [base, current])
    around = None
    if node is not None:
        walk = store.traverse(store.resolve(node), BOTH, depth)
        datasets = pa.array([n.dataset_id for n in walk.hops if n.kind == DATASET], pa.string())
        jobs = [n for n in walk.hops if n.kind == JOB]
        job_codes = obs.jobs(
            pa.array([n.namespace for n in jobs], pa.string()), pa.array([n.name for n in jobs], pa.string())
        )
        around = _Around(
            datasets=obs.datasets(datasets).filter(pc.greater(obs.datasets(datasets), 0)),
            jobs=job_codes.drop_null(),
        )
    since = min(base.start, current.start)
    before, after = (window_sets(obs, w, since, around) for w in (base, current))
    counts: dict[str, Any] = {}
    n_datasets, n_directions, n_jobs = len(obs.datasets), len(obs.directions), len(obs.jobs)

    def split(kind: str, names: tuple[str, str] = ("appeared", "stopped")) -> tuple[Any, Any]:
        appeared, stopped, n_appeared, n_stopped = _split(getattr(before, kind), getattr(after, kind), limit)
        counts[kind] = {names[0]: n_appeared, names[1]: n_stopped}
        return appeared, stopped

    def job_edges(keys: Any) -> list[JobEdge]:
        pair = pc.divide(keys, n_directions)
        namespaces, names = obs.jobs.decode(pc.divide(pair, n_datasets))
        datasets = obs.datasets.decode(_remainder(pair, n_datasets))
        directions = obs.directions.decode(_remainder(keys, n_directions))
        return list(zip(namespaces, names, datasets, directions, strict=True))

    def writers(keys: Any) -> list[Writer]:
        namespaces, names = obs.jobs.decode(pc.divide(keys, n_datasets))
        return list(zip(namespaces, names, obs.datasets.decode(_remainder(keys, n_datasets)), strict=True))

    def dataset_edges(keys: Any) -> list[DatasetEdge]:
        namespaces, names = obs.jobs.decode(_remainder(keys, n_jobs))
        ends = pc.divide(keys, n_jobs)
        sources = obs.datasets.decode(pc.divide(ends, n_datasets))
        targets = obs.datasets.decode(_remainder(ends, n_datasets))
        return list(zip(sources, targets, namespaces, names, strict=True))

    def column_edges(keys: Any) -> list[ColumnEdge]:
        rows = obs.column_rows.take(pc.index_in(keys, value_set=obs.column_rows.column("key")))
        return list(zip(*(rows.column(c).to_pylist() for c in COLUMN_EDGE_KEY), strict=True))

    listed: dict[str, Any] = {
        "job_edges": tuple(map(job_edges, split("job_edges"))),
        "dataset_edges": tuple(map(dataset_edges, split("dataset_edges"))),
        "column_edges": tuple(map(column_edges, split("column_edges"))),
        "writers": tuple(map(writers, split("writers", ("started", "stopped")))),
    }
    # datasets whose latest reported schema differs
    pairs = before.schemas.rename_columns(["dataset", "before"]).join(
        after.schemas.rename_columns(["dataset", "after"]), "dataset", join_type="inner"
    )
    pairs = pairs.filter(pc.not_equal(pairs.column("before"), pairs.column("after")))
    counts["schemas"] = pairs.num_rows
    pairs = pairs.take(pc.sort_indices(pairs.column("dataset"))).slice(0, limit)
    changed = list(
        zip(
            obs.datasets.decode(pairs.column("dataset")),
            obs.schemas.decode(pairs.column("before")),
            obs.schemas.decode(pairs.column("after")),
            strict=True,
        )
    )
    fields = _fields(store, [h for _d, old, new in changed for h in (old, new)])
    schemas = [
        (d, old, new, *_changed_fields(fields.get(old, []), fields.get(new, []))) for d, old, new in changed
    ]
    # jobs whose latest run that ended in each window ended otherwise
    outcome = ["ended", "run_id", "state"]
    runs = before.outcomes.rename_columns(["job", *(f"{c}_before" for c in outcome)]).join(
        after.outcomes.rename_columns(["job", *(f"{c}_after" for c in outcome)]), "job", join_type="inner"
    )
    runs = runs.filter(pc.not_equal(runs.column("state_before"), runs.column("state_after")))
    counts["outcomes"] = runs.num_rows
    runs = runs.take(pc.sort_indices(runs.column("job"))).slice(0, limit)
    namespaces, names = obs.jobs.decode(runs.column("job"))
    sides = [
        list(zip(_times(runs.column(f"ended_{side}")), runs.column(f"run_id_{side}").to_pylist(),
                 runs.column(f"state_{side}").to_pylist(), strict=True))
        for side in ("before", "after")
    ]  # fmt: skip
    outcomes = list(zip(namespaces, names, *sides, strict=True))
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
