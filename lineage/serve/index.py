"""The read API's in-memory index: the lineage tables of one finished build, held as Arrow tables.

:class:`IndexedStore` is the CLI's :class:`~lineage.query.store.LineageStore` (same name resolution, same
walks) whose table reads answer from memory instead of scanning Iceberg. :class:`ReadIndex` keeps the
current one and replaces it, in one reference assignment, when a newer finished build appears: a request
takes the current store once and answers from it alone, so no answer mixes two builds.

A build commits each table on its own and appends its row to ``build_state`` as its very last commit
(lineage.batch.build). The index therefore reads every table as of the ``build_state`` snapshot of the
latest *finished* build (Iceberg time travel by commit time), never a table a build in progress has already
rewritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from lineage.query.errors import LookupError_
from lineage.query.nodes import DATASET, Node
from lineage.query.pin import STATE_TABLE, commit_mode, empty_arrow, finished_build, read_snapshot
from lineage.query.store import LineageStore
from lineage.settings import Settings

log = logging.getLogger(__name__)

# The tables the CLI's questions and the Marquez mapping read.
TABLES = (
    "datasets",
    "dataset_aliases",
    "jobs",
    "job_summary",
    "job_edges",
    "column_edges",
    "runs",
    "run_io",
    "job_dependencies",
    "quality_results",
    "column_tags",
)
# Tables a lake built by an earlier version may not have: the index answers without them.
OPTIONAL_TABLES = ("job_dependencies", "quality_results", "column_tags")
# Columns questions pick a few rows of a large table by (a dataset's writes, a run's rows): the index keeps
# their rows' positions by value (:class:`KeyIndex`), so such a filter costs what it finds instead of a pass
# over every row (run_io holds 1.1M rows at tier M, runs 425,000: the hub's warm health answer took 86 ms of
# CPU with those passes, 33 ms without, on a loaded machine).
KEYED_COLUMNS = {"run_io": ("dataset_id", "run_id"), "runs": ("run_id",), "quality_results": ("dataset_id",)}


@dataclass(frozen=True)
class BuildMark:
    """The finished build an index holds."""

    state_snapshot_id: int  # the build_state snapshot its last commit made
    committed_at: datetime
    mode: str
    loaded_at: datetime
    load_seconds: float
    index_bytes: int

    def json(self) -> dict[str, Any]:
        return {
            "build_snapshot_id": self.state_snapshot_id,
            "build_committed_at": _iso(self.committed_at),
            "build_mode": self.mode,
            "loaded_at": _iso(self.loaded_at),
            "load_seconds": round(self.load_seconds, 3),
            "index_bytes": self.index_bytes,
        }


class IndexedStore(LineageStore):
    """A :class:`LineageStore` over Arrow tables held in memory (row filters applied with Arrow compute)."""

    def __init__(
        self, settings: Settings, tables: dict[str, Any], schemas: dict[str, Any] | None = None
    ) -> None:
        super().__init__(settings)
        self._tables = tables
        self._schemas = dict(schemas or {})
        self._keys: dict[tuple[str, str], KeyIndex] = {}
        self.build: BuildMark | None = None

    def table(self, table: str) -> Any:  # pragma: no cover - never scanned: arrow() answers from memory
        raise LookupError_(f"lineage.{table} is not held by the read index")

    def arrow(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        row_filter: Any = None,
        dictionary: Sequence[str] = (),
    ) -> Any:
        """Rows of a table held in memory: its strings as they are held (``dictionary`` is a reading hint of
        :meth:`LakeTables.arrow`, not needed here)."""
        if table not in self._tables:
            raise LookupError_(f"lineage.{table} is not held by the read index")
        data = self._tables[table]
        if row_filter is not None:
            picked, row_filter = self._keyed(table, row_filter)
            if picked is not None:
                data = picked
        return self._rest(table, data, columns, row_filter)

    def arrow_where(
        self,
        table: str,
        columns: Sequence[str] | None,
        key: str,
        values: Iterable[str],
        row_filter: Any = None,
    ) -> Any:
        if key not in KEYED_COLUMNS.get(table, ()) or table not in self._tables:
            return super().arrow_where(table, columns, key, values, row_filter)
        # No In expression is made: for the 700 runs of a health answer at tier M, making and binding one
        # took 13 ms of its 30.
        data = self.key_index(table, key).rows(values)
        return self._rest(table, data, columns, row_filter)

    def _rest(self, table: str, data: Any, columns: Sequence[str] | None, row_filter: Any) -> Any:
        """``data`` (rows of ``table``) kept by ``row_filter``, then ``columns`` (None: every one)."""
        if row_filter is not None:
            from pyiceberg.expressions.visitors import bind
            from pyiceberg.io.pyarrow import expression_to_pyarrow

            bound = bind(self._schema(table), row_filter, case_sensitive=True)
            data = data.filter(expression_to_pyarrow(bound))
        return data.select(list(columns)) if columns else data

    def _keyed(self, table: str, row_filter: Any) -> tuple[Any, Any]:
        """(the rows one term of ``row_filter`` picks by a :data:`KEYED_COLUMNS` column, in table order; the
        rest of the filter, None when nothing is left), or (None, ``row_filter``) when no term does. A term
        is an ``In`` or ``EqualTo`` of strings, alone or as a conjunct of ``And``."""
        from pyiceberg.expressions import And, EqualTo, In

        terms = _conjuncts(row_filter)
        for i, term in enumerate(terms):
            if isinstance(term, In):
                values = [literal.value for literal in term.literals]
            elif isinstance(term, EqualTo):
                values = [term.literal.value]
            else:
                continue
            name = term.term.name
            if name not in KEYED_COLUMNS.get(table, ()) or not all(isinstance(v, str) for v in values):
                continue
            rest = terms[:i] + terms[i + 1 :]
            left = None if not rest else rest[0] if len(rest) == 1 else And(*rest)
            return self.key_index(table, name).rows(values), left
        return None, row_filter

    def key_index(self, table: str, column: str) -> KeyIndex:
        """The :class:`KeyIndex` of one column of a table, built on first use (:meth:`warm` builds those
        of :data:`KEYED_COLUMNS`; two requests building it at once build the same one)."""
        key = (table, column)
        index = self._keys.get(key)
        if index is None:
            index = self._keys[key] = KeyIndex(self._tables[table], column)
        return index

    def _schema(self, table: str) -> Any:
        """The Iceberg schema a row filter binds to (derived from the Arrow schema when not loaded)."""
        if table not in self._schemas:
            from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
            from pyiceberg.schema import assign_fresh_schema_ids

            arrow_schema = self._tables[table].schema
            self._schemas[table] = assign_fresh_schema_ids(_pyarrow_to_schema_without_ids(arrow_schema))
        return self._schemas[table]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self._tables.values())

    def warm(self) -> IndexedStore:
        """Build every lazily computed lookup now, in the loader, not in the first requests."""
        for name in ("datasets", "dataset_nodes", "aliases", "aliases_of", "job_keys", "jobs", "job_summary"):
            getattr(self, name)
        for name in (
            "column_edge_rows",
            "_names",
            "_short_names",
            "_tail_names",
            "by_marquez_name",
            "job_io",
        ):
            getattr(self, name)
        self.index_walks()
        for table, columns in KEYED_COLUMNS.items():
            for column in columns:
                if table in self._tables:
                    self.key_index(table, column)
        return self

    @cached_property
    def diff_observations(self) -> Any:
        """What every run observed, coded for :func:`lineage.query.diff.diff` and kept with the build: a
        diff then costs filters and set operations over integers, not the coding of every run_io row."""
        from lineage.query.diff import Observations

        return Observations.read(self)

    @cached_property
    def by_marquez_name(self) -> dict[tuple[str, str], Node]:
        """(namespace, name) of every dataset (canonical or alias) and job -> its node."""
        found: dict[tuple[str, str], Node] = {}
        for alias in self.aliases:
            node = self.dataset_nodes.get(alias["dataset_id"])
            if node is not None:
                found[(alias["alias_namespace"], alias["alias_name"])] = node
        for node in self.dataset_nodes.values():
            found[(node.namespace, node.name)] = node
        return found

    @cached_property
    def job_io(self) -> dict[tuple[str, str], tuple[list[Node], list[Node]]]:
        """(job namespace, name) -> (datasets it reads, datasets it writes), canonical datasets only."""
        found: dict[tuple[str, str], tuple[list[Node], list[Node]]] = {}
        edges = self._edge_columns
        names = ("job_namespace", "job_name", "dataset_id", "direction")
        for namespace, name, dataset_id, direction in zip(
            *(edges.column(c).to_pylist() for c in names), strict=True
        ):
            node = self.dataset_nodes.get(dataset_id)
            if node is not None:
                inputs, outputs = found.setdefault((namespace, name), ([], []))
                (inputs if direction == "input" else outputs).append(node)
        return found

    def dataset_named(self, namespace: str, name: str) -> Node | None:
        node = self.by_marquez_name.get((namespace, name))
        return node if node is not None and node.kind == DATASET else None


class KeyIndex:
    """The rows of an Arrow table by the value of one of its string columns: the table's positions sorted by
    that column, and for each value where its run of positions ends. Nulls are left out (no equality or
    membership filter picks them)."""

    def __init__(self, table: Any, column: str) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        values = table.column(column)
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        self._order = pc.array_sort_indices(values)  # nulls last
        runs = pc.run_end_encode(values.take(self._order))
        self._ends = runs.run_ends.to_numpy()  # not a list: a Python int per run is 28 bytes more
        self._run_of = {value: i for i, value in enumerate(runs.values.to_pylist()) if value is not None}
        # Rows are taken batch by batch: Table.take first joins every column's chunks into one array (3 ms a
        # column of run_io at tier M), a take from one batch does not.
        self._schema = table.schema
        self._batches = table.to_batches()
        self._starts = np.cumsum([0] + [b.num_rows for b in self._batches])

    def positions(self, values: Iterable[str]) -> Any:
        """The positions of the rows holding one of ``values``, ascending (the table's order)."""
        import pyarrow as pa

        picked = []
        for value in set(values):
            run = self._run_of.get(value)
            if run is not None:
                start = int(self._ends[run - 1]) if run else 0
                picked.append(self._order.slice(start, int(self._ends[run]) - start))
        if not picked:
            return pa.array([], self._order.type)
        return pa.concat_arrays(picked).sort()

    def rows(self, values: Iterable[str]) -> Any:
        """The rows holding one of ``values``, in the table's order."""
        import numpy as np
        import pyarrow as pa

        positions = self.positions(values).to_numpy().astype(np.int64)
        batch_of = np.searchsorted(self._starts, positions, side="right") - 1
        parts = [
            self._batches[b].take(pa.array(positions[batch_of == b] - self._starts[b]))
            for b in np.unique(batch_of)
        ]
        return pa.Table.from_batches(parts, schema=self._schema)


def _conjuncts(expression: Any) -> list[Any]:
    """The terms of a (nested) ``And``; any other expression is its own one term."""
    from pyiceberg.expressions import And

    if isinstance(expression, And):
        return [*_conjuncts(expression.left), *_conjuncts(expression.right)]
    return [expression]


def state_snapshot_id(settings: Settings) -> int | None:
    """The current snapshot of ``build_state`` (cheap: one catalog lookup and one metadata file)."""
    snapshot = LineageStore(settings).table(STATE_TABLE).current_snapshot()
    return None if snapshot is None else snapshot.snapshot_id


def load_index(settings: Settings) -> IndexedStore:
    """Read the tables of the latest finished build into memory.

    Raises:
        LookupError_: no catalog, no lineage tables or no finished build yet.
    """
    started = time.monotonic()
    reader = LineageStore(settings)
    state = reader.table(STATE_TABLE)
    build = finished_build(state)
    if build is None:
        raise LookupError_("no finished build yet: run the build first (jobs/build_lineage.py or make build)")
    mode = commit_mode(state, build) or "?"  # a finished build has a mode
    tables: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for name in TABLES:
        try:
            table = reader.table(name)
        except LookupError_:
            if name in OPTIONAL_TABLES:
                continue
            raise
        pinned = read_snapshot(table, build.timestamp_ms)
        if pinned is None:  # created after that build: empty as of it
            tables[name] = empty_arrow(table)
            schemas[name] = table.schema()
            continue
        schema = table.schemas().get(pinned.schema_id) if pinned.schema_id is not None else None
        schemas[name] = schema or table.schema()
        tables[name] = table.scan(snapshot_id=pinned.snapshot_id).to_arrow()
    store = IndexedStore(settings, tables, schemas).warm()
    store.diff_observations  # noqa: B018 - coded once here, not in the first diff request (a scoped view: in its first)
    store.build = BuildMark(
        state_snapshot_id=build.snapshot_id,
        committed_at=datetime.fromtimestamp(build.timestamp_ms / 1000, UTC),
        mode=mode,
        loaded_at=datetime.now(UTC),
        load_seconds=time.monotonic() - started,
        index_bytes=store.nbytes,
    )
    return store


class ReadIndex:
    """The current :class:`IndexedStore`, refreshed every ``serve.refresh_seconds`` when a build finished."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.current: IndexedStore | None = None
        self.error: str | None = None
        self._seen_state: int | None = None

    def refresh(self) -> bool:
        """Load a newer finished build if there is one; True when the index changed. Blocking."""
        token = state_snapshot_id(self.settings)
        if token is not None and token == self._seen_state and self.current is not None:
            return False
        store = load_index(self.settings)
        self._seen_state = token
        old = self.current.build if self.current is not None else None
        if old is not None and store.build and old.state_snapshot_id == store.build.state_snapshot_id:
            return False  # the newer state row is a build still under way
        self.current = store  # one reference assignment: requests see the old index or the new one
        build = store.build
        assert build is not None
        log.info(
            "read index: build snapshot %d (%s, committed %s) loaded in %.2f s, %d bytes",
            build.state_snapshot_id,
            build.mode,
            _iso(build.committed_at),
            build.load_seconds,
            build.index_bytes,
        )
        return True

    async def run(self) -> None:
        """Refresh forever (the app's lifespan cancels it)."""
        while True:
            try:
                await asyncio.to_thread(self.refresh)
                self.error = None
            except LookupError_ as exc:
                if self.error != str(exc):
                    log.warning("read index not refreshed: %s", exc)
                self.error = str(exc)
            except Exception as exc:  # keep serving the last good index
                log.exception("read index refresh failed")
                self.error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(self.settings.serve.refresh_seconds)

    def health(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ready": self.current is not None}
        if self.current is not None and self.current.build is not None:
            data.update(self.current.build.json())
        if self.error:
            data["error"] = self.error[:300]
        return data


async def lifespan(index: ReadIndex) -> AsyncIterator[None]:
    task = asyncio.create_task(index.run(), name="read-index-refresh")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")
