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
by the hundred thousand. :class:`Observations` codes the rows once with Arrow compute (order-preserving
codes of jobs, datasets, directions and schema hashes; a dense id per job edge, (job, dataset) pair,
possible dataset edge and column edge, in the order of its strings). A window is then a NumPy mask over
the rows, what it observed bitmaps over those ids, a diff ``after & ~before``, and only the changes
listed (the first ``limit`` of each kind: the smallest ids) are decoded into Python values; every kind
is counted in full. The read index keeps the coded rows of its build (``IndexedStore.diff_observations``);
the CLI codes the rows its windows can observe, read from the lake in threads with their repeated strings
dictionary-encoded (coded through each row group's dictionary, not row by row).
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
# The string columns read dictionary-encoded from the lake (LakeTables.arrow): coded through their
# dictionaries. Run ids are read plainly: hardly repeated, their dictionaries are as long as the rows.
_IO_TEXT = (*_JOB, "dataset_id", "direction", "schema_hash")
_RUN_TEXT = (*_JOB, "reported_state")
_FACET_RUN_TEXT = ("_facet", "run_id")
_EDGE_TEXT = ("_facet", *COLUMN_EDGE_KEY)


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


def _lake_table(
    store: LineageStore,
    table: str,
    columns: Sequence[str],
    row_filter: Any = None,
    dictionary: Sequence[str] = (),
) -> Any:
    """A lineage table the store may not hold in memory (the read index holds the tables every question
    needs; the rest are read from Iceberg as of its build). None when the lake lacks the table."""
    try:
        return store.arrow(table, columns, row_filter, dictionary=dictionary)
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


def _lookup(column: Any, value_set: Any, found: bool = False) -> Any:
    """``pc.index_in`` of a string column in ``value_set`` (int32, null where absent), or with ``found``
    ``pc.is_in`` (false where absent or null). A dictionary-encoded chunk is looked up by its dictionary,
    then taken by its indices: each distinct string hashed once, not once per row; every chunk in one
    call, so that the value set is hashed once."""
    return _lookups([column], value_set, found)[0]


def _lookups(columns: Sequence[Any], value_set: Any, found: bool = False) -> list[Any]:
    """:func:`_lookup` of several columns in one value set, hashed once for all of them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = pa.bool_() if found else pa.int32()
    chunks = [chunk for column in columns for chunk in _chunks(column)]
    if not chunks:
        return [pa.chunked_array([], kind) for _column in columns]
    # the chunks of one Parquet row group share its dictionary: each dictionary looked up once
    inputs: list[Any] = []
    source: list[int] = []  # per chunk, its input
    shared: dict[Any, int] = {}
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            key = _same(chunk.dictionary)
            if key not in shared:
                shared[key] = len(inputs)
                inputs.append(chunk.dictionary.cast(pa.string()))
            source.append(shared[key])
        else:
            source.append(len(inputs))
            inputs.append(chunk.cast(pa.string()))
    looked = (pc.is_in if found else pc.index_in)(pa.chunked_array(inputs, pa.string()), value_set=value_set)
    if [len(c) for c in looked.chunks] != [len(c) for c in inputs]:  # chunked as its input, or else split
        whole, looked, at = looked.combine_chunks(), [], 0
        for part in inputs:
            looked.append(whole.slice(at, len(part)))
            at += len(part)
    else:
        looked = looked.chunks
    parts = []
    for chunk, at in zip(chunks, source, strict=True):
        part = looked[at].take(chunk.indices) if pa.types.is_dictionary(chunk.type) else looked[at]
        parts.append(pc.fill_null(part, False) if found else part)
    out, at = [], 0
    for column in columns:
        count = len(_chunks(column))
        out.append(pa.chunked_array(parts[at : at + count], kind))
        at += count
    return out


def _same(array: Any) -> tuple[Any, ...]:
    """What makes two Arrow arrays the same values without comparing them: the same buffers, offset and
    length (batches of one Parquet row group share its dictionary's)."""
    buffers = tuple(None if b is None else (b.address, b.size) for b in array.buffers())
    return (str(array.type), array.offset, len(array), buffers)


def _used_values(*columns: Any) -> Any:
    """The values of some string columns (chunked, nulls and repeats kept; fewer rows than the columns
    when they are dictionary-encoded: each chunk's distinct values in use)."""
    import pyarrow as pa

    parts = []
    for column in columns:
        for chunk in _chunks(column):
            if pa.types.is_dictionary(chunk.type):
                used = chunk.unique()
                parts.append(used.dictionary.cast(pa.string()).take(used.indices))
            else:
                parts.append(chunk.cast(pa.string()))
    return pa.chunked_array(parts, pa.string())


class _Codes:
    """Order-preserving integer codes of some string columns' values: 0 for a null, 1, 2 ... for the
    distinct values in sorted order, so that codes sort as their strings do (a null first, as an empty
    string would in a Python sort key). ``values`` decodes a code (``values[0]`` is null). A value in
    ``blank`` is coded as a null. The columns may be dictionary-encoded."""

    def __init__(self, *columns: Any, blank: str | None = None) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        distinct = _sorted_unique(_used_values(*columns)).drop_null()
        if blank is not None:
            distinct = distinct.filter(pc.not_equal(distinct, blank))
        self.values = pa.concat_arrays([pa.nulls(1, pa.string()), distinct])

    def __len__(self) -> int:
        return len(self.values)

    def __call__(self, column: Any) -> Any:
        """The codes of a string column (int64); a value not among the coder's is coded as a null."""
        import pyarrow as pa
        import pyarrow.compute as pc

        found = _lookup(column, self.values.slice(1))
        return pc.fill_null(pc.add(found.cast(pa.int64()), 1), 0)

    def code(self, value: str) -> int:
        """The code of one value (-1: not among the coder's)."""
        import pyarrow.compute as pc

        found = pc.index_in(value, value_set=self.values.slice(1)).as_py()
        return -1 if found is None else found + 1

    def decode(self, codes: Any) -> list[Any]:
        return self.values.take(codes).to_pylist()


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
        self._made_from = [self._key(ns, name) for ns, name in pairs]
        chunks = [c for k in self._made_from for c in _chunks(k)]
        self.keys = _sorted_unique(pa.chunked_array(chunks, pa.int64()))

    def codes_of(self, source: int) -> Any:
        """The codes of the jobs of the ``source``-th pair of columns it was made from (their keys kept)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.index_in(self._made_from[source], value_set=self.keys).cast(pa.int64())

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
        return (
            self.namespaces.decode(pc.divide(keys, len(self.names))),
            self.names.decode(_remainder(keys, len(self.names))),
        )


def _remainder(values: Any, bound: int) -> Any:
    import pyarrow.compute as pc

    return pc.subtract(values, pc.multiply(pc.divide(values, bound), bound))


def _numpy(values: Any) -> Any:
    """An Arrow integer or boolean column as a NumPy array (nulls as 0 or false)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    if values.null_count:
        values = pc.fill_null(values, False if pa.types.is_boolean(values.type) else 0)
    return values.to_numpy(zero_copy_only=False)


def _ids(keys: Any) -> tuple[Any, Any, Any]:
    """Dense ids of some int64 keys in their order (NumPy), the keys by id (Arrow), and the position of
    each key's first row (NumPy)."""
    import numpy as np
    import pyarrow as pa

    distinct, first, ids = np.unique(_numpy(keys), return_index=True, return_inverse=True)
    return ids.reshape(-1), pa.array(distinct, pa.int64()), first


def _last_of_runs(groups: Any) -> Any:
    """The positions of the last element of each run of equal values in ``groups`` (a NumPy array)."""
    import numpy as np

    if len(groups) == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.append(groups[1:] != groups[:-1], True))


@dataclass
class Observations:
    """What the ``run_io`` rows and column-lineage facets of some runs observed, coded once as integers
    (NumPy arrays) so that a window is a mask over the rows and the sets it observed bitmaps over ids.

    Jobs, datasets, directions and schema hashes have order-preserving codes (:class:`_Codes`); every job
    edge, (job, dataset) pair, possible dataset edge and column edge a dense id in the order of its
    strings, so that the ids of what changed, taken in order, are the changes sorted. The read index
    keeps one per loaded build; the CLI reads the rows its windows can observe."""

    # per run_io row of a known run
    begin: Any  # µs: its first event (or its last)
    end: Any  # µs: its last event, or its run's when later
    run_last: Any  # µs: its run's last event
    edge: Any  # job edge id
    pair: Any  # (job, dataset) id
    reads: Any  # bool: an input
    writes: Any  # bool: an output, not only DROPped
    outputs: Any  # bool: an output
    run: Any  # run id (the run's position among those read)
    # decoding and walks
    jobs: _Jobs
    datasets: _Codes
    directions: _Codes
    schemas: _Codes
    edge_keys: Any  # Arrow: (job, dataset, direction) key by job edge id
    edge_pair: Any  # pair id by job edge id
    pair_keys: Any  # Arrow: (job, dataset) key by pair id
    pair_job: Any  # job code by pair id
    pair_dataset: Any  # dataset code by pair id
    # the io rows reporting a schema, sorted by (dataset, when, schema hash): row, dataset and schema codes
    schema_row: Any
    schema_dataset: Any
    schema_code: Any
    # the runs that ended (a terminal state), sorted by (job, ended, run id, state)
    ended: Any  # Arrow: job, ended, run_last, run_id, state
    ended_job: Any
    ended_at: Any
    ended_run_last: Any
    ended_state: Any  # state codes
    # every dataset edge a window can observe: a job's read and write of two datasets, sorted
    flow_read: Any  # pair id read
    flow_write: Any  # pair id written
    flow_source: Any  # dataset codes
    flow_target: Any
    flow_keys: Any  # Arrow: (source, target, job) key by flow id
    # column lineage: the facets runs reported and the column edges of each
    runs: int
    facet_run: Any  # per column_facet_runs row of a known run: its run id and facet code
    facet_code: Any
    facets: int
    edge_facet: Any  # per exploded edge between known datasets: its facet code and column edge id
    edge_column: Any
    column_rows: Any  # Arrow: COLUMN_EDGE_KEY per exploded edge (taken only for the edges listed)
    column_first: Any  # the exploded edge (row of column_rows) of each column edge id
    column_source: Any  # dataset codes by column edge id
    column_target: Any

    @classmethod
    def read(
        cls, store: LineageStore, since: datetime | None = None, until: datetime | None = None
    ) -> Observations:
        """The observations of every run (``since``, ``until``: only of the rows windows between them
        can observe: runs with an event since ``since``, rows first seen before ``until``)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="diff-code") as pool:
            return cls._code(store, since, until, pool)

    @classmethod
    def _code(
        cls, store: LineageStore, since: datetime | None, until: datetime | None, pool: Any
    ) -> Observations:
        """:meth:`read`'s coding: the column lineage's half (the facets, the column edges' keys and ids)
        in ``pool`` while this thread codes the run_io rows' (Arrow's kernels and NumPy's sorts let go
        of the GIL)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        runs, io, facet_runs, edges, dataset_ids = _read(store, since, until)
        run_ids = runs.column("run_id").combine_chunks()
        run, facet_runs_run = _lookups([io.column("run_id"), facet_runs.column("run_id")], run_ids)
        facets_coded = pool.submit(_facets, facet_runs, facet_runs_run, edges, dataset_ids)
        known = pc.is_valid(run)
        # the run ids are coded (run): not carried through the filter
        io, run = io.drop_columns(["run_id"]).filter(known), run.filter(known)
        facet_run, facet_code, edges, edge_facet, facets = facets_coded.result()
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
        schemas = _Codes(io.column("schema_hash"), blank="")  # an empty hash: no schema reported
        n_datasets, n_directions = len(datasets), len(directions)
        columns_coded = pool.submit(_column_ids, edges, datasets, jobs)
        ended_coded = pool.submit(_ended_runs, runs, jobs.codes_of(1))
        dataset = datasets(io.column("dataset_id"))
        pair_key = _combine((jobs.codes_of(0), len(jobs)), (dataset, n_datasets))
        pair, pair_keys, _ = _ids(pair_key)
        direction = directions(io.column("direction"))
        edge, edge_keys, _ = _ids(_combine((pair_key, len(jobs) * n_datasets), (direction, n_directions)))
        edge_pair = _numpy(pc.index_in(pc.divide(edge_keys, n_directions), value_set=pair_keys))
        pair_job = _numpy(pc.divide(pair_keys, n_datasets))
        pair_dataset = _numpy(_remainder(pair_keys, n_datasets))
        run_last = _micros(runs.column("last_event_at")).take(run)
        last = pc.max_element_wise(_micros(io.column("last_seen")), run_last, skip_nulls=True)
        begin = pc.coalesce(_micros(io.column("first_seen")), last, 0)
        states = io.column("lifecycle_states")
        drop_only = pc.and_(
            pc.equal(pc.list_value_length(states), 1), pc.equal(pc.binary_join(states, ","), "DROP")
        )
        direction_code = _numpy(direction)
        outputs = direction_code == directions.code("output")
        schema_code = _numpy(schemas(io.column("schema_hash")))
        schema_at = _numpy(pc.coalesce(_micros(io.column("last_seen")), _micros(io.column("first_seen")), 0))
        dataset_code = _numpy(dataset)
        schema_row = np.flatnonzero(schema_code > 0)
        schema_row = schema_row[
            _order(dataset_code[schema_row], n_datasets, schema_at[schema_row], schema_code[schema_row])
        ]
        reads, writes = direction_code == directions.code("input"), outputs & ~_numpy(drop_only)
        flows = _flows(pair_job, pair_dataset, np.unique(pair[reads]), np.unique(pair[writes]))
        ended = ended_coded.result()
        column, first, column_ends = columns_coded.result()
        return cls(
            begin=_numpy(begin),
            end=_numpy(pc.coalesce(last, begin)),
            run_last=_numpy(run_last),
            edge=edge,
            pair=pair,
            reads=reads,
            writes=writes,
            outputs=outputs,
            run=_numpy(run.cast(pa.int64())),
            jobs=jobs,
            datasets=datasets,
            directions=directions,
            schemas=schemas,
            edge_keys=edge_keys,
            edge_pair=edge_pair,
            pair_keys=pair_keys,
            pair_job=pair_job,
            pair_dataset=pair_dataset,
            schema_row=schema_row,
            schema_dataset=dataset_code[schema_row],
            schema_code=schema_code[schema_row],
            ended=ended,
            ended_job=_numpy(ended.column("job")),
            ended_at=_numpy(ended.column("ended")),
            ended_run_last=_numpy(ended.column("run_last")),
            ended_state=_numpy(_Codes(ended.column("state"))(ended.column("state"))),
            flow_read=flows["read"],
            flow_write=flows["write"],
            flow_source=flows["source"],
            flow_target=flows["target"],
            flow_keys=pa.array(
                flows["source"] * (n_datasets * len(jobs)) + flows["target"] * len(jobs) + flows["job"],
                pa.int64(),
            ),
            runs=len(run_ids),
            facet_run=facet_run,
            facet_code=facet_code,
            facets=facets,
            edge_facet=edge_facet,
            edge_column=column,
            column_rows=edges.select(list(COLUMN_EDGE_KEY)),
            column_first=first,
            column_source=column_ends[0][first],
            column_target=column_ends[1][first],
        )


def _order(group: Any, groups: int, at: Any, then: Any) -> Any:
    """The positions of some rows in (group, at, then) order (NumPy integers; ``group`` below
    ``groups``): the first two as one key when their product fits in 63 bits, as two weeks of microseconds
    times the datasets of tier M does, a sort of two keys instead of three."""
    import numpy as np

    if not len(at):
        return np.zeros(0, np.int64)
    low, span = int(at.min()), int(at.max()) - int(at.min()) + 1
    if groups * span >= 2**62:
        return np.lexsort((then, at, group))
    return np.lexsort((then, group.astype(np.int64) * span + (at - low)))


def _column_ids(edges: Any, datasets: _Codes, jobs: _Jobs) -> tuple[Any, Any, tuple[Any, Any]]:
    """Each exploded column edge's column edge id, the first edge of each id, and the dataset codes of
    each edge's ends (NumPy)."""
    column_keys, ends = _column_keys(edges, datasets, jobs)
    column, _keys, first = _ids(column_keys)
    return column, first, ends


def _read(store: LineageStore, since: datetime | None, until: datetime | None) -> tuple[Any, ...]:
    """The rows :meth:`Observations.read` codes, read side by side (pyiceberg's scans decode Parquet
    outside the GIL): ``runs`` with an event since ``since``, their ``run_io`` rows first seen before
    ``until``, the column-lineage facet tables (empty on a lake without them) and the ids of the
    datasets the store knows."""
    from concurrent.futures import ThreadPoolExecutor

    ex = expressions()
    recent = None if since is None else ex.GreaterThanOrEqual("last_event_at", since.isoformat())
    # A row first seen after both windows overlaps neither (one without first_seen counts from its last).
    early = (
        None
        if until is None
        else ex.Or(ex.LessThan("first_seen", until.isoformat()), ex.IsNull("first_seen"))
    )

    def facet_tables() -> tuple[Any, Any]:
        facet_runs = _lake_table(store, "column_facet_runs", ("_facet", "run_id"), dictionary=_FACET_RUN_TEXT)
        edges = _lake_table(store, "column_facet_edges", ("_facet", *COLUMN_EDGE_KEY), dictionary=_EDGE_TEXT)
        if facet_runs is None or edges is None:
            return _strings("_facet", "run_id"), _strings("_facet", *COLUMN_EDGE_KEY)
        return facet_runs, edges

    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="diff-read") as pool:
        io = pool.submit(store.arrow, "run_io", _IO_COLUMNS, early, dictionary=_IO_TEXT)
        runs = pool.submit(store.arrow, "runs", _RUN_COLUMNS, recent, dictionary=_RUN_TEXT)
        facets = pool.submit(facet_tables)
        ids = pool.submit(store.dataset_ids)
        return (runs.result(), io.result(), *facets.result(), ids.result())


def _facets(facet_runs: Any, run: Any, edges: Any, ids: Any) -> tuple[Any, Any, Any, Any, int]:
    """The column-lineage facets some runs reported and their exploded edges: per ``column_facet_runs``
    row of those runs (``run``: each row's run's position among them, null for another run), the run's
    position and the facet's code (NumPy); the ``column_facet_edges`` rows of those facets between
    datasets the store knows (``ids``), and each one's facet code; how many facets."""
    import pyarrow.compute as pc

    known = pc.is_valid(run)
    facet_runs, run = facet_runs.filter(known), run.filter(known)
    # facet ids need no order: codes are their positions among the distinct ones
    facets = _unique_values(_used_values(facet_runs.column("_facet")))
    facet = _lookup(edges.column("_facet"), facets)
    # Only edges between datasets this store knows: a scoped key's store holds the datasets it may see,
    # and the facet tables are read whole.
    keep = pc.and_(
        pc.is_valid(facet),
        pc.and_(
            _lookup(edges.column("source_dataset_id"), ids, found=True),
            _lookup(edges.column("target_dataset_id"), ids, found=True),
        ),
    )
    if pc.all(keep).as_py() is not True:  # a filter that keeps every row still copies every string
        edges, facet = edges.filter(keep), facet.filter(keep)
    return (
        _numpy(run.cast("int64")),
        _numpy(_lookup(facet_runs.column("_facet"), facets)),
        edges,
        _numpy(facet),
        len(facets),
    )


def _unique_values(values: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    distinct = pc.unique(values)
    return distinct.combine_chunks() if isinstance(distinct, pa.ChunkedArray) else distinct


def _ended_runs(runs: Any, job: Any) -> Any:
    """The runs that ended (a terminal state), sorted by (job, ended, run id, state): job (code, ``job``
    per run), ended, run_last (µs), run_id, state."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ended = pc.coalesce(_micros(runs.column("ended_at")), _micros(runs.column("last_event_at")))
    terminal = _lookup(runs.column("reported_state"), pa.array(TERMINAL_STATES, pa.string()), found=True)
    keep = pc.and_(pc.and_(terminal, pc.is_valid(runs.column("job_name"))), pc.is_valid(ended))
    table = pa.table(
        {
            "job": job,
            "ended": ended,
            "run_last": _micros(runs.column("last_event_at")),
            "run_id": runs.column("run_id"),
            "state": runs.column("reported_state"),
        }
    ).filter(pc.fill_null(keep, False))
    # the states as plain strings (the lake's are read dictionary-encoded): sorted and listed as such
    table = table.set_column(4, "state", table.column("state").cast(pa.string()))
    return table.sort_by([(c, "ascending") for c in ("job", "ended", "run_id", "state")])


def _flows(pair_job: Any, pair_dataset: Any, read: Any, written: Any) -> dict[str, Any]:
    """Every dataset edge through a job (a pair read and a pair written by one job, two datasets), sorted
    by (source, target, job): NumPy arrays ``read``, ``write`` (pair ids), ``source``, ``target``, ``job``."""
    import numpy as np
    import pyarrow as pa

    reads = pa.table({"job": pair_job[read], "read": read})
    writes = pa.table({"job": pair_job[written], "write": written})
    joined = reads.join(writes, "job", join_type="inner")
    out = {name: _numpy(joined.column(name)) for name in ("job", "read", "write")}
    out["source"], out["target"] = pair_dataset[out["read"]], pair_dataset[out["write"]]
    keep = out["source"] != out["target"]
    order = np.lexsort((out["job"][keep], out["target"][keep], out["source"][keep]))
    return {name: values[keep][order] for name, values in out.items()}


def _column_keys(edges: Any, datasets: _Codes, jobs: _Jobs) -> tuple[Any, tuple[Any, Any]]:
    """One int64 key per exploded column edge, ordered as (source, field, target, field, job) are: each
    end (dataset, field) renumbered densely first, so that the key stays within 64 bits; and the dataset
    codes of each edge's source and target (NumPy)."""
    import pyarrow as pa

    fields = _Codes(edges.column("source_field"), edges.column("target_field"))
    ends, dataset_codes = [], []
    for side in ("source", "target"):
        dataset = datasets(edges.column(f"{side}_dataset_id"))
        dataset_codes.append(_numpy(dataset))
        end = _combine((dataset, len(datasets)), (fields(edges.column(f"{side}_field")), len(fields)))
        ends.append(pa.array(_ids(end)[0], pa.int64()))
    bound = max(len(edges), 1)
    job = jobs.codes_of(2)  # the coder was made of run_io's jobs, then runs', then these edges'
    return _combine((ends[0], bound), (ends[1], bound), (job, len(jobs))), (
        dataset_codes[0],
        dataset_codes[1],
    )


@dataclass
class Seen:
    """What one window observed: bitmaps (NumPy booleans) over the job edge, pair (writers), flow and
    column edge ids; each dataset's latest schema code and each job's latest ended run (its position in
    :attr:`Observations.ended`), -1 for none."""

    job_edges: Any
    writers: Any
    dataset_edges: Any
    column_edges: Any
    schemas: Any
    outcomes: Any


@dataclass
class _Around:
    """The walk a diff is limited to: bitmaps over dataset and job codes."""

    datasets: Any
    jobs: Any


def _bits(size: int, ids: Any) -> Any:
    import numpy as np

    found = np.zeros(size, bool)
    found[ids] = True
    return found


def _seen_in(obs: Observations, frame: Window, since: datetime, around: _Around | None = None) -> Seen:
    """What the runs active in ``frame`` observed (runs with no event since ``since`` left out, as when
    the rows were read), within a walk when ``around`` is given."""
    import numpy as np

    seen = (obs.begin < _at(frame.end)) & (obs.end >= _at(frame.start)) & (obs.run_last >= _at(since))
    n_pairs, n_datasets, n_jobs = len(obs.pair_keys), len(obs.datasets), len(obs.jobs)
    job_edges = _bits(len(obs.edge_keys), obs.edge[seen])
    writers = _bits(n_pairs, obs.pair[seen & obs.writes])
    read = _bits(n_pairs, obs.pair[seen & obs.reads])
    flows = read[obs.flow_read] & writers[obs.flow_write]
    # the column edges of the facets the window's writing runs reported
    writing = _bits(obs.runs, obs.run[seen & obs.outputs])
    facets = _bits(obs.facets, obs.facet_code[writing[obs.facet_run]])
    column_edges = _bits(len(obs.column_first), obs.edge_column[facets[obs.edge_facet]])
    # each dataset's schema, as last reported: the last of its rows in (dataset, when, hash) order
    rows = np.flatnonzero(seen[obs.schema_row])
    last = rows[_last_of_runs(obs.schema_dataset[rows])]
    schemas = np.full(n_datasets, -1, np.int64)
    schemas[obs.schema_dataset[last]] = obs.schema_code[last]
    # each job's latest run that ended in the window: the last of its runs in (job, ended, run, state) order
    ended = np.flatnonzero(
        (obs.ended_at >= _at(frame.start))
        & (obs.ended_at < _at(frame.end))
        & (obs.ended_run_last >= _at(since))
    )
    latest = ended[_last_of_runs(obs.ended_job[ended])]
    outcomes = np.full(n_jobs, -1, np.int64)
    outcomes[obs.ended_job[latest]] = latest
    if around is not None:
        walked_pair = around.datasets[obs.pair_dataset] & around.jobs[obs.pair_job]
        job_edges &= walked_pair[obs.edge_pair]
        writers &= walked_pair
        flows &= around.datasets[obs.flow_source] & around.datasets[obs.flow_target]
        column_edges &= around.datasets[obs.column_source] & around.datasets[obs.column_target]
        schemas[~around.datasets] = -1
        outcomes[~around.jobs] = -1
    return Seen(job_edges, writers, flows, column_edges, schemas, outcomes)


def observe(store: LineageStore, frames: Sequence[Window]) -> Observations:
    """The observations windows need: the read index's, kept for its build, or else read for them."""
    held = getattr(store, "diff_observations", None)
    if held is not None:
        return held
    return Observations.read(store, min(w.start for w in frames), max(w.end for w in frames))


def _split(before: Any, after: Any, limit: int | None) -> tuple[Any, Any, int, int]:
    """The ids set in ``after`` and not in ``before``, and the reverse: the first ``limit`` of each in
    order (every one when None), and how many in all."""
    import numpy as np

    appeared, stopped = np.flatnonzero(after & ~before), np.flatnonzero(before & ~after)
    return appeared[:limit], stopped[:limit], len(appeared), len(stopped)


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
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    obs = observe(store, [base, current])
    n_datasets, n_directions, n_jobs = len(obs.datasets), len(obs.directions), len(obs.jobs)
    around = None
    if node is not None:
        walk = store.traverse(store.resolve(node), BOTH, depth)
        datasets = obs.datasets(pa.array([n.dataset_id for n in walk.hops if n.kind == DATASET], pa.string()))
        jobs = [n for n in walk.hops if n.kind == JOB]
        job_codes = obs.jobs(
            pa.array([n.namespace for n in jobs], pa.string()), pa.array([n.name for n in jobs], pa.string())
        )
        walked_datasets = _bits(n_datasets, _numpy(datasets.filter(pc.greater(datasets, 0))))
        around = _Around(datasets=walked_datasets, jobs=_bits(n_jobs, _numpy(job_codes.drop_null())))
    since = min(base.start, current.start)
    before, after = (_seen_in(obs, w, since, around) for w in (base, current))
    counts: dict[str, Any] = {}

    def split(kind: str, names: tuple[str, str] = ("appeared", "stopped")) -> tuple[Any, Any]:
        appeared, stopped, n_appeared, n_stopped = _split(getattr(before, kind), getattr(after, kind), limit)
        counts[kind] = {names[0]: n_appeared, names[1]: n_stopped}
        return appeared, stopped

    def job_edges(ids: Any) -> list[JobEdge]:
        keys = obs.edge_keys.take(ids)
        pair = pc.divide(keys, n_directions)
        namespaces, names = obs.jobs.decode(pc.divide(pair, n_datasets))
        datasets = obs.datasets.decode(_remainder(pair, n_datasets))
        directions = obs.directions.decode(_remainder(keys, n_directions))
        return list(zip(namespaces, names, datasets, directions, strict=True))

    def writers(ids: Any) -> list[Writer]:
        keys = obs.pair_keys.take(ids)
        namespaces, names = obs.jobs.decode(pc.divide(keys, n_datasets))
        return list(zip(namespaces, names, obs.datasets.decode(_remainder(keys, n_datasets)), strict=True))

    def dataset_edges(ids: Any) -> list[DatasetEdge]:
        keys = obs.flow_keys.take(ids)
        namespaces, names = obs.jobs.decode(_remainder(keys, n_jobs))
        ends = pc.divide(keys, n_jobs)
        sources = obs.datasets.decode(pc.divide(ends, n_datasets))
        targets = obs.datasets.decode(_remainder(ends, n_datasets))
        return list(zip(sources, targets, namespaces, names, strict=True))

    def column_edges(ids: Any) -> list[ColumnEdge]:
        rows = obs.column_rows.take(obs.column_first[ids])
        return list(zip(*(rows.column(c).to_pylist() for c in COLUMN_EDGE_KEY), strict=True))

    listed: dict[str, Any] = {
        "job_edges": tuple(map(job_edges, split("job_edges"))),
        "dataset_edges": tuple(map(dataset_edges, split("dataset_edges"))),
        "column_edges": tuple(map(column_edges, split("column_edges"))),
        "writers": tuple(map(writers, split("writers", ("started", "stopped")))),
    }
    # datasets whose latest reported schema differs (codes: in dataset order)
    old, new = before.schemas, after.schemas
    changed = np.flatnonzero((old >= 0) & (new >= 0) & (old != new))
    counts["schemas"] = len(changed)
    changed = changed[:limit]
    found = list(
        zip(
            obs.datasets.decode(changed),
            obs.schemas.decode(old[changed]),
            obs.schemas.decode(new[changed]),
            strict=True,
        )
    )
    fields = _fields(store, [h for _d, old_hash, new_hash in found for h in (old_hash, new_hash)])
    schemas = [
        (d, old_hash, new_hash, *_changed_fields(fields.get(old_hash, []), fields.get(new_hash, [])))
        for d, old_hash, new_hash in found
    ]
    # jobs whose latest run that ended in each window ended otherwise (codes: in job order)
    old, new = before.outcomes, after.outcomes
    both = np.flatnonzero((old >= 0) & (new >= 0))
    moved = both[obs.ended_state[old[both]] != obs.ended_state[new[both]]]
    counts["outcomes"] = len(moved)
    moved = moved[:limit]
    namespaces, names = obs.jobs.decode(moved)
    sides = []
    for rows in (old[moved], new[moved]):
        runs = obs.ended.take(rows)
        sides.append(
            list(
                zip(
                    _times(runs.column("ended")),
                    runs.column("run_id").to_pylist(),
                    runs.column("state").to_pylist(),
                    strict=True,
                )
            )
        )
    return Diff(
        base=base,
        current=current,
        job_edges=listed["job_edges"],
        dataset_edges=listed["dataset_edges"],
        column_edges=listed["column_edges"],
        writers=listed["writers"],
        schemas=schemas,
        outcomes=list(zip(namespaces, names, *sides, strict=True)),
        counts=counts,
        limit=limit,
    )
