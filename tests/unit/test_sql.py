"""`lineage sql`: snapshot choice, value rendering, the SQL's sources, DuckDB on a small pyiceberg lake."""

from __future__ import annotations

import io
import json
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from pyiceberg.catalog.sql import SqlCatalog

from lineage.cli.main import cli
from lineage.cli.sql import (
    PinnedTable,
    Result,
    SqlError,
    as_csv,
    as_table,
    connect,
    local_path,
    one_line,
    pinned_tables,
    plain,
    read_sql,
    render,
    run_query,
    snapshot_at,
    unique_names,
)
from lineage.query.errors import LookupError_

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


# -- which snapshot -----------------------------------------------------------------------------------------
def test_snapshot_at_takes_the_last_one_made_by_then() -> None:
    log = [(3000, 30), (1000, 10), (2000, 20)]
    assert snapshot_at(log, 999) is None
    assert snapshot_at(log, 1000) == 10
    assert snapshot_at(log, 2500) == 20
    assert snapshot_at(log, 10**12) == 30


def test_snapshot_at_follows_the_log_after_a_rollback() -> None:
    # Snapshot 10 made current again at 4000 (a rollback): it is the one current from then on.
    assert snapshot_at([(1000, 10), (2000, 20), (4000, 10)], 5000) == 10


def test_a_view_is_pinned_to_its_snapshot_or_empty_without_one() -> None:
    pinned = PinnedTable("lineage", "runs", "file:/w/it's/metadata/1.metadata.json", 42)
    assert pinned.view_sql() == (
        "SELECT * FROM iceberg_scan('file:/w/it''s/metadata/1.metadata.json', snapshot_from_id => 42)"
    )
    empty = PinnedTable("lineage", "runs", "/w/m.json", None)
    assert empty.view_sql() == "SELECT * FROM iceberg_scan('/w/m.json') LIMIT 0"


def test_local_path_of_a_location() -> None:
    assert local_path("file:/lake/w/t/metadata/1.json") == "/lake/w/t/metadata/1.json"
    assert local_path("file:///lake/w/t/metadata/1.json") == "/lake/w/t/metadata/1.json"
    assert local_path("/lake/w/t/metadata/1.json") == "/lake/w/t/metadata/1.json"
    assert local_path("s3://bucket/w/t/metadata/1.json") is None


# -- values and output --------------------------------------------------------------------------------------
def test_plain_values_for_json() -> None:
    assert plain(T0) == "2026-11-20T08:00:00Z"
    assert plain(T0.replace(microsecond=5000)) == "2026-11-20T08:00:00.005000Z"
    assert plain(datetime(2026, 11, 20, 8, 0)) == "2026-11-20T08:00:00"  # without a zone: none added
    assert plain(date(2026, 11, 20)) == "2026-11-20"
    assert plain(Decimal("1.10")) == "1.10"
    assert plain(Decimal("240")) == 240  # DuckDB's sum(BIGINT): HUGEINT, DECIMAL(38,0) in Arrow
    assert plain(float("nan")) == "nan"
    assert plain(b"\xffa", for_json=True) == "/2E="
    assert plain(b"\xffa") == "\\xffa"
    # Arrow gives a map as (key, value) pairs: an object when the keys are strings.
    assert plain([("a", 1), ("b", None)]) == {"a": 1, "b": None}
    assert plain([(1, "x")]) == [{"key": 1, "value": "x"}]
    nested = [{"key": "team", "value": "x", "at": T0}]
    assert plain(nested) == [{"key": "team", "value": "x", "at": "2026-11-20T08:00:00Z"}]


def test_repeated_column_names_stay_apart_in_json() -> None:
    assert unique_names(["x", "x", "y", "x", "x_1"]) == ["x", "x_1", "y", "x_2", "x_1_1"]


def result() -> Result:
    return Result(
        ["job", "n", "last", "tags"],
        ["string", "int64", "timestamp[us, tz=UTC]", "list"],
        [
            ("a\x1b[2Jb", 12, T0, [{"key": "k", "value": "v"}]),
            ("x" * 100, None, None, []),
        ],
    )


def test_table_output_shape() -> None:
    from lineage.cli.output import safe_text

    lines = as_table(result(), safe_text).splitlines()
    assert lines[0].split() == ["job", "n", "last", "tags"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].startswith("a\\x1b[2Jb ")  # terminal controls escaped
    assert " 12  2026-11-20T08:00:00Z  " in lines[2]  # numbers right-aligned
    assert lines[2].endswith('[{"key":"k","value":"v"}]')
    assert lines[3].startswith("x" * 79 + "…  NULL  NULL")  # long cells cut in the table only
    assert lines[-1] == "(2 rows)"


def test_csv_and_json_output() -> None:
    text = as_csv(result())
    assert text.splitlines()[0] == "job,n,last,tags"
    assert text.splitlines()[1] == 'a\x1b[2Jb,12,2026-11-20T08:00:00Z,"[{""key"":""k"",""value"":""v""}]"'
    assert text.splitlines()[2] == "x" * 100 + ",,,[]"
    rows = json.loads(render(result(), "json"))
    assert list(rows[0]) == ["job", "n", "last", "tags"]  # the query's column order
    assert rows[0]["last"] == "2026-11-20T08:00:00Z"
    assert rows[1] == {"job": "x" * 100, "n": None, "last": None, "tags": []}
    assert render(result(), "json").isascii()


def test_duckdb_errors_become_one_line() -> None:
    message = 'Parser Error: syntax error at or near "selec"\n\nLINE 1: selec 1\n        ^'
    assert one_line(Exception(message)) == 'Parser Error: syntax error at or near "selec"'
    internal = "INTERNAL Error: Expected vector of type LIST Stack Trace: /x.so(+0x1) [0x2]\n/y.so"
    assert one_line(Exception(internal)) == "INTERNAL Error: Expected vector of type LIST"


# -- where the SQL comes from -------------------------------------------------------------------------------
class _Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool = False) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_sql_from_argument_file_or_stdin(tmp_path: Path) -> None:
    query = tmp_path / "q.sql"
    query.write_text("SELECT 2")
    assert read_sql("SELECT 1", None, _Stdin("")) == "SELECT 1"
    assert read_sql(None, str(query), _Stdin("")) == "SELECT 2"
    assert read_sql(None, "-", _Stdin("SELECT 3")) == "SELECT 3"
    assert read_sql(None, None, _Stdin("SELECT 4")) == "SELECT 4"
    with pytest.raises(LookupError_, match="no SQL: give it"):
        read_sql(None, None, _Stdin("", tty=True))
    with pytest.raises(LookupError_, match="the query is empty"):
        read_sql("  ", None, _Stdin(""))
    with pytest.raises(LookupError_, match="not both"):
        read_sql("SELECT 1", str(query), _Stdin(""))
    with pytest.raises(LookupError_, match="cannot read"):
        read_sql(None, str(tmp_path / "missing.sql"), _Stdin(""))


# -- DuckDB on a small lake written by pyiceberg (no Spark) -------------------------------------------------
SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("tags", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.string())]))),
        pa.field("props", pa.map_(pa.string(), pa.int64())),
    ]
)


def rows(*ids: str) -> pa.Table:
    return pa.table(
        {
            "run_id": list(ids),
            "at": [T0] * len(ids),
            "tags": [[{"key": "team", "value": i}] for i in ids],
            "props": pa.array([[("n", len(i))] for i in ids], pa.map_(pa.string(), pa.int64())),
        },
        schema=SCHEMA,
    )


@pytest.fixture
def small_lake(tmp_path: Path) -> tuple[SqlCatalog, Path, datetime]:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri())
    catalog.create_namespace("lineage")
    catalog.create_namespace("raw")
    runs = catalog.create_table("lineage.runs", SCHEMA)
    runs.append(rows("r1", "r2"))
    time.sleep(0.01)
    between = datetime.now(UTC)
    time.sleep(0.01)
    runs.append(rows("r3"))
    catalog.create_table("raw.events", pa.schema([pa.field("x", pa.int64())]))  # no snapshot
    return catalog, warehouse, between


def session(catalog: SqlCatalog, warehouse: Path, as_of: datetime | None = None) -> Any:
    return connect(pinned_tables(catalog, ["raw", "lineage"], as_of), "lake", [str(warehouse)])


def test_views_read_the_current_snapshot_and_as_of(small_lake: tuple[SqlCatalog, Path, datetime]) -> None:
    catalog, warehouse, between = small_lake
    now = session(catalog, warehouse)
    assert run_query(now, "SELECT count(*) FROM lineage.runs").rows == [(3,)]  # type: ignore[union-attr]
    assert run_query(now, "SELECT count(*) FROM lake.raw.events").rows == [(0,)]  # type: ignore[union-attr]
    before = session(catalog, warehouse, between)
    assert run_query(before, "SELECT count(*) FROM lineage.runs").rows == [(2,)]  # type: ignore[union-attr]
    earliest = session(catalog, warehouse, between - timedelta(days=1))
    empty = run_query(earliest, "SELECT * FROM lineage.runs")
    assert empty is not None and empty.rows == [] and empty.columns == ["run_id", "at", "tags", "props"]


def test_types_come_back_as_iceberg_holds_them(small_lake: tuple[SqlCatalog, Path, datetime]) -> None:
    catalog, warehouse, _ = small_lake
    answer = run_query(session(catalog, warehouse), "SELECT * FROM lineage.runs WHERE run_id = 'r3'")
    assert answer is not None
    assert [plain(v, for_json=True) for v in answer.rows[0]] == [
        "r3",
        "2026-11-20T08:00:00Z",
        [{"key": "team", "value": "r3"}],
        {"n": 2},
    ]


def test_filters_on_nested_columns_are_exact(small_lake: tuple[SqlCatalog, Path, datetime]) -> None:
    # Pushed into the scan, DuckDB 1.4.4's iceberg extension answered 0 rows or an INTERNAL Error here.
    con = session(*small_lake[:2])
    for where in ("tags IS NOT NULL", "len(tags) > 0", "len(tags) = 1", "props['n'] IS NOT NULL"):
        answer = run_query(con, f"SELECT count(*) FROM lineage.runs WHERE {where}")
        assert answer is not None and answer.rows == [(3,)], where


def test_nothing_but_the_lake_can_be_read_nor_the_session_opened_up(
    small_lake: tuple[SqlCatalog, Path, datetime], tmp_path: Path
) -> None:
    catalog, warehouse, _ = small_lake
    con = session(catalog, warehouse)
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    for query in (
        f"SELECT * FROM read_csv('{outside}')",
        "SELECT * FROM read_csv('https://example.invalid/x.csv')",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
    ):
        with pytest.raises(SqlError):
            run_query(con, query)
    with pytest.raises(SqlError, match="Catalog Error"):
        run_query(con, "SELECT * FROM lineage.nope")
    answer = run_query(con, "CREATE VIEW mine AS SELECT 1 AS x; SELECT x FROM mine")  # the last answers
    assert answer is not None and answer.rows == [(1,)]


def test_command_on_an_empty_or_missing_catalog(tmp_path: Path) -> None:
    SqlCatalog(
        "lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=tmp_path.as_uri()
    ).create_namespace("raw")
    runner = CliRunner()
    env = {
        "LINEAGE__CATALOG__SQLITE_PATH": str(tmp_path / "catalog.db"),
        "LINEAGE__CATALOG__WAREHOUSE": str(tmp_path),
    }
    done = runner.invoke(cli, ["sql", "SELECT 1"], env=env)
    assert isinstance(done.exception, LookupError_)
    assert "has no tables in 'raw' or 'lineage'" in str(done.exception)
    env["LINEAGE__CATALOG__SQLITE_PATH"] = str(tmp_path / "none.db")
    done = runner.invoke(cli, ["sql", "SELECT 1"], env=env)
    assert "no catalog at" in str(done.exception)
    assert not (tmp_path / "none.db").exists()
