"""Reading the lake's Iceberg tables with pyiceberg (no JVM): the catalog, one table, Arrow rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import closing
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.query.errors import LookupError_
from lineage.query.nodes import Node
from lineage.query.pin import STATE_TABLE, empty_arrow, finished_build, read_snapshot

if TYPE_CHECKING:  # the settings (pydantic) load when a lake is opened, not for `lineage --api`
    from lineage.settings import Settings


class LakeTables:
    """The tables of one catalog, opened on use: the lineage tables by name, any other by namespace."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._catalog: Any = None
        self._job_nodes: dict[tuple[str, str], Node] = {}
        self._job_states: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        self.node_payloads: dict[Node, dict[str, Any]] = {}  # lineage.query.answers.node_json's, per node

    # -- loading -----------------------------------------------------------------------------------------
    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            cat = self.settings.catalog
            if cat.embedded and not Path(cat.sqlite_path).is_file():
                raise LookupError_(_no_catalog(cat.sqlite_path))
            from lineage.io.catalog import open_catalog

            try:
                self._catalog = open_catalog(cat)
            except Exception as exc:
                where = cat.sqlite_path if cat.embedded else cat.properties.get("uri", "?")
                raise LookupError_(f"cannot open catalog {cat.name!r} at {where}: {first_line(exc)}") from exc
        return self._catalog

    def _embedded_table(self, ident: tuple[str, str]) -> Any:
        """A table of the embedded catalog, read-only and without SQLAlchemy: its current metadata file is
        looked up in the JDBC catalog's ``iceberg_tables`` (the schema Spark and pyiceberg share) and opened
        as a static table. Half of a short query's start-up was importing and opening the SQL catalog.
        None when the file has no such catalog table (the full catalog then answers, or fails clearly)."""
        import sqlite3

        cat = self.settings.catalog
        path = Path(cat.sqlite_path)
        if not path.is_file():
            raise LookupError_(_no_catalog(cat.sqlite_path))
        try:
            with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
                found = db.execute(
                    "SELECT metadata_location FROM iceberg_tables "
                    "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                    (cat.name, *ident),
                ).fetchone()
        except sqlite3.Error:
            return None
        if found is None or not found[0]:
            raise LookupError_(_missing_table(cat.name, ident))
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(found[0])

    def rows(self, table: str, columns: Sequence[str] | None = None, row_filter: Any = None) -> list[dict]:
        """Rows of ``lineage.<table>`` as dicts (optionally only some columns, filtered by pyiceberg)."""
        return python_rows(self.arrow(table, columns, row_filter))

    def arrow_where(
        self,
        table: str,
        columns: Sequence[str] | None,
        key: str,
        values: Iterable[str],
        row_filter: Any = None,
    ) -> Any:
        """:meth:`arrow` of the rows whose ``key`` is one of ``values`` (and that pass ``row_filter``): an
        ``In`` filter here; the read index looks them up by key (lineage.serve.index.KeyIndex)."""
        ex = expressions()
        match = ex.In(key, sorted(set(values)))
        return self.arrow(table, columns, match if row_filter is None else ex.And(row_filter, match))

    def table(self, table: str) -> Any:
        """The pyiceberg table ``lineage.<table>`` at its current metadata."""
        return self.open_table(self.settings.catalog.lineage_namespace, table)

    def open_table(self, namespace: str, table: str) -> Any:
        """The pyiceberg table ``<namespace>.<table>`` (``raw.events`` too) at its current metadata."""
        ident = (namespace, table)
        try:
            loaded = self._embedded_table(ident) if self.settings.catalog.embedded else None
            if loaded is None:
                loaded = self.catalog.load_table(ident)
        except LookupError_:
            raise
        except Exception as exc:
            if type(exc).__name__ in ("NoSuchTableError", "NoSuchNamespaceError"):
                raise LookupError_(_missing_table(self.settings.catalog.name, ident)) from exc
            raise LookupError_(f"cannot read {'.'.join(ident)}: {first_line(exc)}") from exc
        return loaded

    def scan_table(
        self,
        namespace: str,
        table: str,
        columns: Sequence[str] | None = None,
        row_filter: Any = None,
        as_of: datetime | None = None,
    ) -> Any:
        """Arrow rows of ``<namespace>.<table>``, read from Iceberg whatever this store holds in memory:
        at its snapshot as of ``as_of`` (Iceberg time travel by commit time; empty if it had none yet), or
        its current one. For the tables the read index does not hold (schema history, raw events)."""
        loaded = self.open_table(namespace, table)
        kwargs: dict[str, Any] = {}
        if columns:
            kwargs["selected_fields"] = tuple(columns)
        if row_filter is not None:
            kwargs["row_filter"] = row_filter
        if as_of is not None:
            pinned = loaded.snapshot_as_of_timestamp(round(as_of.timestamp() * 1000), inclusive=True)
            if pinned is None:
                return empty_arrow(loaded, columns)
            kwargs["snapshot_id"] = pinned.snapshot_id
        return loaded.scan(**kwargs).to_arrow()

    @cached_property
    def pinned_ms(self) -> int | None:
        """Commit time (ms) of the latest finished build's ``build_state`` commit: every lineage table is
        read as of it (:mod:`lineage.query.pin`). None (read the current snapshots) before any build, or
        for a lake without ``build_state``."""
        try:
            state = self.table(STATE_TABLE)
        except LookupError_:
            return None
        build = finished_build(state)
        return None if build is None else int(build.timestamp_ms)

    def arrow(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        row_filter: Any = None,
        dictionary: Sequence[str] = (),
    ) -> Any:
        """Arrow rows of ``lineage.<table>`` as the latest finished build left it (:attr:`pinned_ms`,
        :func:`lineage.query.pin.read_snapshot`); the string columns named in ``dictionary`` as Parquet
        keeps them, dictionary-encoded (each chunk its own dictionary): repeated strings are neither copied
        nor hashed row by row."""
        loaded = self.table(table)
        kwargs: dict[str, Any] = {}
        if columns:
            kwargs["selected_fields"] = tuple(columns)
        if row_filter is not None:
            kwargs["row_filter"] = row_filter
        if self.pinned_ms is not None:
            pinned = read_snapshot(loaded, self.pinned_ms)
            if pinned is None:  # created after that build
                return empty_arrow(loaded, columns)
            kwargs["snapshot_id"] = pinned.snapshot_id
        if dictionary:
            _quiet_dictionary_warning()
            return loaded.scan(**kwargs).to_arrow(dictionary_columns=tuple(dictionary))
        return loaded.scan(**kwargs).to_arrow()


class _NoDictionaryWarning:
    """Drops pyiceberg's warning that Iceberg has no dictionary type, logged for every file read with
    dictionary columns asked for: the columns are strings in Iceberg, read dictionary-encoded on purpose."""

    def filter(self, record: Any) -> bool:
        return not str(record.msg).startswith("Iceberg does not have a dictionary type")


_NO_DICTIONARY_WARNING = _NoDictionaryWarning()


def _quiet_dictionary_warning() -> None:
    import logging

    logger = logging.getLogger("pyiceberg.io.pyarrow")
    if _NO_DICTIONARY_WARNING not in logger.filters:
        logger.addFilter(_NO_DICTIONARY_WARNING)


def rows_in(table: Any, key: str, values: set[str], columns: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    """The ``columns`` of the rows of an Arrow table whose string column ``key`` is in ``values``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = table.filter(pc.is_in(table.column(key), value_set=pa.array(sorted(values), pa.string())))
    return zip(*(python_values(found.column(c)) for c in columns), strict=True)


def python_values(column: Any) -> list[Any]:
    """An Arrow column as Python values; timestamps beyond Python's range are clamped to it.

    The lake can hold times Python's ``datetime`` cannot (year 10000 from an offset like
    ``9999-12-31T23:59:59-01:00``, landed before ingestion bounded eventTime); such a value reads as
    ``datetime.max`` (or ``datetime.min``) instead of failing the whole command.
    """
    return clamped_times(column).to_pylist()


def clamped_times(column: Any) -> Any:
    """A timestamp column with its times beyond Python's range clamped to it (:func:`python_values`), in
    microseconds; any other column as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    # Nanosecond timestamps (years 1677..2262) always fit; Iceberg's timestamps are microseconds.
    if pa.types.is_timestamp(kind) and kind.unit != "ns":
        micros = pa.timestamp("us", tz=kind.tz)
        ints = column.cast(micros).cast(pa.int64())
        clamped = pc.min_element_wise(
            pc.max_element_wise(ints, _PY_MIN_MICROS, skip_nulls=False), _PY_MAX_MICROS, skip_nulls=False
        )
        return clamped.cast(micros)
    return column


def joined(table: Any, columns: Sequence[str], separator: str, null: str | None = None) -> Any:
    """One key column of ``table``: the ``columns`` joined by ``separator`` (a null read as ``null``; with
    None, a null makes the key null). The columns are made plain strings first: pyiceberg may read a column
    as large_string, which the join has no kernel for beside the separator's string."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [table.column(c).cast(pa.string()) for c in columns]
    if null is not None:
        parts = [pc.fill_null(part, null) for part in parts]
    return pc.binary_join_element_wise(*parts, separator)


def python_rows(table: Any) -> list[dict[str, Any]]:
    """An Arrow table as dicts, top-level timestamps clamped as in :func:`python_values`."""
    values = {name: python_values(table.column(name)) for name in table.column_names}
    return (
        [dict(zip(values, row, strict=True)) for row in zip(*values.values(), strict=True)] if values else []
    )


# datetime.min / datetime.max as microseconds since the epoch (UTC).
_PY_MIN_MICROS = -62135596800 * 1_000_000
_PY_MAX_MICROS = 253402300799 * 1_000_000 + 999_999


def expressions() -> Any:
    """pyiceberg's row filter expressions (imported on use; typed loosely: their stubs are pydantic)."""
    import pyiceberg.expressions

    return pyiceberg.expressions


def _no_catalog(path: Path) -> str:
    return f"no catalog at {path}: run the ingestion and the build first (make demo)"


def _missing_table(catalog: str, ident: tuple[str, str]) -> str:
    table = f"{catalog}.{'.'.join(ident)}"
    return f"{table} does not exist: run the build first (jobs/build_lineage.py or make build)"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
