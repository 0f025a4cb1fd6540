"""``lineage sql``: ad-hoc SQL over the lake's Iceberg tables in an embedded DuckDB, offline.

Every table of the raw and lineage namespaces becomes a DuckDB view ``<namespace>.<table>`` (also reachable as
``<catalog>.<namespace>.<table>``) over ``iceberg_scan`` of the table's metadata file, pinned to one snapshot:
the current one, or with ``as_of`` the one that was current then. DuckDB cannot open the embedded SQLite
catalog itself, so the metadata locations and snapshots come from pyiceberg's catalog.

The session never reaches the network: the iceberg and avro extensions are loaded from the files that the
``duckdb-ext-iceberg`` / ``duckdb-ext-avro`` packages install, extension autoinstall and autoload are off,
and once the views exist, file access is limited to the warehouse and the configuration is locked, so a
query can neither install or load an extension nor read any other file or URL.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import click
import orjson

from lineage.cli import output
from lineage.query.errors import LookupError_
from lineage.query.params import parse_time

# avro first: the iceberg extension reads manifests through it and may not autoload it here.
EXTENSIONS = (("avro", "duckdb-ext-avro"), ("iceberg", "duckdb-ext-iceberg"))
FORMATS = ("table", "csv", "json")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CELL = 80  # characters of one cell in the aligned table (csv and json are never cut)
_RESERVED_DATABASES = frozenset({"memory", "system", "temp", "main"})


class SqlError(LookupError_):
    """The SQL cannot be answered (syntax, unknown table or column, a failing cast): one line, exit 2."""


@dataclass(frozen=True)
class PinnedTable:
    """One Iceberg table as a view will read it."""

    namespace: str
    name: str
    metadata_location: str
    snapshot_id: int | None  # None: no snapshot (yet, or at the time asked): the view is empty

    def view_sql(self) -> str:
        scan = f"iceberg_scan({quote_literal(self.metadata_location)}"
        if self.snapshot_id is None:
            # The current schema, no rows: a table without data then (or not yet created) reads empty.
            return f"SELECT * FROM {scan}) LIMIT 0"
        return f"SELECT * FROM {scan}, snapshot_from_id => {int(self.snapshot_id)})"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def snapshot_at(history: Iterable[tuple[int, int]], at_ms: int) -> int | None:
    """The snapshot that was current at ``at_ms`` (milliseconds since the epoch), from a table's snapshot log
    of ``(timestamp_ms, snapshot_id)`` entries: the last one made at or before then; None before the first.

    The log, not the snapshots' own times, says which snapshot was current (as Spark's ``TIMESTAMP AS OF``
    reads it): a rollback makes an older snapshot current again.
    """
    found = None
    for stamp, snapshot_id in sorted(history):
        if stamp > at_ms:
            break
        found = snapshot_id
    return found


def extension_files() -> dict[str, Path]:
    """The DuckDB extension files installed by the extension packages (``duckdb_ext/extensions/v<duckdb
    version>/<platform>/<name>.duckdb_extension`` in site-packages), by extension name."""
    found: dict[str, Path] = {}
    for name, package in EXTENSIONS:
        try:
            files = metadata.files(package) or []
        except metadata.PackageNotFoundError:
            raise LookupError_(
                f"{package} is not installed: pip install the project's pinned version"
            ) from None
        wanted = f"{name}.duckdb_extension"
        paths = [Path(str(metadata.distribution(package).locate_file(f))) for f in files if f.name == wanted]
        if not paths or not paths[0].is_file():
            raise LookupError_(f"{package} installed no {wanted}")
        found[name] = paths[0]
    return found


def local_path(location: str) -> str | None:
    """The local file path of a ``file:`` location (or a plain path); None for anything remote."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    return None


def pinned_tables(catalog: Any, namespaces: Sequence[str], as_of: datetime | None) -> list[PinnedTable]:
    """Every table of ``namespaces`` in the pyiceberg ``catalog``, pinned to its current snapshot or to the
    one current at ``as_of``."""
    at_ms = None if as_of is None else (as_of - EPOCH) // timedelta(milliseconds=1)  # exact, no float
    pinned = []
    for namespace in namespaces:
        try:
            idents = catalog.list_tables(namespace)
        except Exception as exc:
            if type(exc).__name__ == "NoSuchNamespaceError":
                continue
            raise
        for ident in sorted(idents):
            table = catalog.load_table(ident)
            if at_ms is None:
                current = table.metadata.current_snapshot_id
            else:
                log = [(e.timestamp_ms, e.snapshot_id) for e in table.metadata.snapshot_log]
                current = snapshot_at(log, at_ms)
            pinned.append(PinnedTable(namespace, ident[-1], table.metadata_location, current))
    return pinned


def connect(tables: Sequence[PinnedTable], catalog_name: str, warehouse: Sequence[str]) -> Any:
    """A DuckDB session with one view per table, no network, file access limited to ``warehouse``."""
    import duckdb

    files = extension_files()
    directory = next(iter(files.values())).parents[2]  # <dir>/v1.4.4/linux_amd64/iceberg.duckdb_extension
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "extension_directory": str(directory),
        }
    )
    con.execute("SET TimeZone = 'UTC'")  # timestamps with a zone print in UTC, as everywhere in the CLI
    # Filters stay above the scans: the iceberg extension of DuckDB 1.4.4 prunes data files wrongly for
    # some pushed-down filters (IS NOT NULL on a list column returns no rows, len(list) > 0 fails with an
    # INTERNAL Error; duckdb-iceberg issues 760, 782, 791). Exact answers first; every file is read.
    con.execute("SET disabled_optimizers = 'filter_pushdown'")
    for name, _package in EXTENSIONS:
        con.execute(f"LOAD {quote_literal(str(files[name]))}")
    allowed = sorted({form for root in warehouse for form in (root, f"file:{root}", f"file://{root}")})
    con.execute("SET allowed_directories = $1", [allowed])
    con.execute("SET enable_external_access = false")
    database = catalog_name if catalog_name.lower() not in _RESERVED_DATABASES else None
    if database:
        con.execute(f"ATTACH ':memory:' AS {quote_ident(database)}")
        con.execute(f"USE {quote_ident(database)}")
    for namespace in sorted({t.namespace for t in tables}):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(namespace)}")
    for table in tables:
        view = f"{quote_ident(table.namespace)}.{quote_ident(table.name)}"
        con.execute(f"CREATE VIEW {view} AS {table.view_sql()}")
    con.execute("SET lock_configuration = true")
    return con


@dataclass
class Result:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]


def run_query(con: Any, sql: str) -> Result | None:
    """The answer of the last statement of ``sql``; None when it returns no rows (a ``CREATE VIEW``)."""
    import duckdb

    try:
        cursor = con.execute(sql)
        if cursor.description is None:
            return None
        answer = cursor.fetch_arrow_table()
    except duckdb.Error as exc:
        raise SqlError(one_line(exc)) from exc
    columns = [d[0] for d in cursor.description]
    types = [str(f.type) for f in answer.schema]
    rows = list(zip(*(answer.column(i).to_pylist() for i in range(answer.num_columns)), strict=True))
    return Result(columns, types, rows)


def one_line(exc: BaseException) -> str:
    """The first line of DuckDB's message (``Binder Error: ... not found in FROM clause!``), without the
    query excerpt and caret that follow it, nor an internal error's stack trace."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    first = lines[0].split(" Stack Trace:", 1)[0] if lines else ""
    return first or type(exc).__name__


# -- values --------------------------------------------------------------------------------------------------
def plain(value: Any, *, for_json: bool = False) -> Any:
    """A value as JSON holds it: timestamps ISO-8601 (``Z`` for UTC), dates and times ISO, decimals as
    strings (integers when their scale is 0), intervals as strings, bytes base64 (``for_json``) or with
    non-UTF-8 bytes escaped, maps as objects (or ``[{"key", "value"}]`` when a key is not a string),
    structs as objects, lists as lists."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        text = value.isoformat()
        return text.replace("+00:00", "Z") if value.utcoffset() == timedelta(0) else text
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        # Scale 0 (DuckDB's sum of BIGINTs is a HUGEINT, which arrives as DECIMAL(38,0)): an exact integer.
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else str(value)
    if isinstance(value, timedelta):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode() if for_json else value.decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {str(k): plain(v, for_json=for_json) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
        # Arrow's map: a list of (key, value) pairs
        if all(isinstance(k, str) for k, _ in value):
            return {k: plain(v, for_json=for_json) for k, v in value}
        return [{"key": plain(k, for_json=for_json), "value": plain(v, for_json=for_json)} for k, v in value]
    if isinstance(value, list | tuple):
        return [plain(v, for_json=for_json) for v in value]
    return str(value)


def text(value: Any) -> str:
    """A value as one cell of a table or CSV: nested values as compact JSON, NULL as ``NULL`` (table) or
    empty (CSV: see :func:`as_csv`)."""
    shown = plain(value)
    if isinstance(shown, dict | list):
        return orjson.dumps(shown, default=str).decode()
    if isinstance(shown, bool):
        return "true" if shown else "false"
    return str(shown)


def unique_names(columns: Sequence[str]) -> list[str]:
    """Column names with repeats made unique (``x``, ``x_1``) so that JSON objects keep every column."""
    seen: dict[str, int] = {}
    out = []
    for name in columns:
        candidate, n = name, seen.get(name, 0)
        while candidate in out:
            n += 1
            candidate = f"{name}_{n}"
        seen[name] = n
        out.append(candidate)
    return out


def as_json(result: Result) -> list[dict[str, Any]]:
    names = unique_names(result.columns)
    return [{n: plain(v, for_json=True) for n, v in zip(names, row, strict=True)} for row in result.rows]


def as_csv(result: Result) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow(["" if v is None else text(v) for v in row])
    return buffer.getvalue()


def as_table(result: Result, safe: Any = str) -> str:
    """Columns padded to the widest cell (at most :data:`MAX_CELL` characters, longer ones cut with ``…``),
    numbers right-aligned, then ``(N rows)``. ``safe`` escapes terminal controls in every cell."""

    def cell(value: Any) -> str:
        shown = "NULL" if value is None else safe(text(value)).replace("\n", "\\n")
        return shown if len(shown) <= MAX_CELL else shown[: MAX_CELL - 1] + "…"

    headers = [safe(c) for c in result.columns]
    cells = [[cell(v) for v in row] for row in result.rows]
    numeric = [_numeric([row[i] for row in result.rows]) for i in range(len(headers))]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    lines = [line(headers), "  ".join("-" * w for w in widths)] if headers else []
    lines += [line(r) for r in cells]
    count = len(result.rows)
    lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(lines)


def _numeric(values: Sequence[Any]) -> bool:
    """A column of numbers (and NULLs), right-aligned."""
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in present
    )


def render(result: Result, fmt: str, safe: Any = str) -> str:
    """The answer as ``fmt`` (table, csv or json), without a final line break."""
    if fmt == "json":
        # The query's column order (not sorted keys, unlike the other commands' JSON), ASCII only.
        return json.dumps(as_json(result), indent=2, ensure_ascii=True)
    if fmt == "csv":
        return as_csv(result).rstrip("\n")
    return as_table(result, safe)


# -- the command ---------------------------------------------------------------------------------------------
def open_lake(settings: Any, as_of: datetime | None) -> Any:
    """A DuckDB session over every raw and lineage table of the configured catalog (see :func:`connect`).

    Raises:
        LookupError_: no catalog, a catalog without tables, or a table that is not on local files.
    """
    cat = settings.catalog
    if cat.embedded and not Path(cat.sqlite_path).is_file():
        raise LookupError_(
            f"no catalog at {cat.sqlite_path}: run the ingestion and the build first (make demo)"
        )
    from lineage.io.catalog import open_catalog

    try:
        catalog = open_catalog(cat)
        tables = pinned_tables(catalog, [cat.raw_namespace, cat.lineage_namespace], as_of)
    except Exception as exc:
        raise LookupError_(f"cannot read catalog {cat.name!r}: {one_line(exc)}") from exc
    if not tables:
        raise LookupError_(
            f"catalog {cat.name!r} has no tables in {cat.raw_namespace!r} or {cat.lineage_namespace!r}: "
            "run the ingestion and the build first (make demo)"
        )
    roots = {str(Path(cat.warehouse).resolve())} if cat.embedded else set()
    for table in tables:
        path = local_path(table.metadata_location)
        if path is None:
            raise LookupError_(
                f"{table.namespace}.{table.name} is at {table.metadata_location}: lineage sql reads "
                "tables on local files only (the embedded catalog's warehouse)"
            )
        roots.add(str(Path(path).parents[1]))  # <table location>/metadata/<file>.metadata.json
    return connect(tables, cat.name, sorted(roots))


def read_sql(sql: str | None, path: str | None, stdin: Any) -> str:
    """The SQL from the argument, from ``-f FILE`` (``-`` for stdin), or piped on stdin."""
    if sql is not None and path is not None:
        raise LookupError_("give the SQL either as an argument or with -f, not both")
    if path == "-" or (sql is None and path is None):
        if path is None and stdin.isatty():
            raise LookupError_(
                'no SQL: give it as an argument (lineage sql "SELECT ..."), with -f FILE or on stdin'
            )
        text_ = stdin.read()
    elif path is not None:
        try:
            text_ = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise LookupError_(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    else:
        text_ = sql or ""
    if not text_.strip():
        raise LookupError_("no SQL: the query is empty")
    return text_


def _as_of_time(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    """``--as-of`` parsed as every other time option of the CLI (a bad one is one line, exit 2)."""
    return parse_time(value) if value else None


@click.command("sql")
@click.argument("sql", required=False)
@click.option("-f", "--file", "path", metavar="FILE", help="Read the SQL from FILE (- for stdin).")
@click.option(
    "--as-of",
    callback=_as_of_time,
    help="Read every table as it was then: the snapshot current at that time (the lake's commit time, not "
    "the events'; ISO-8601 or 2h, 7d ago).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.pass_obj
def sql_command(obj: Any, sql: str | None, path: str | None, as_of: datetime | None, fmt: str) -> None:
    """Run SQL on the lake in an embedded DuckDB: raw.* and lineage.* are views of the Iceberg tables.

    Each view reads one snapshot (the current one, or the one current at --as-of). No Spark, no network.
    The SQL comes from the argument, -f FILE or stdin. Examples: docs/sql.md.
    """
    query = read_sql(sql, path, sys.stdin)
    con = open_lake(obj.settings(), as_of)
    try:
        result = run_query(con, query)
    finally:
        con.close()
    if result is not None:
        click.echo(render(result, fmt, output.safe_text))
