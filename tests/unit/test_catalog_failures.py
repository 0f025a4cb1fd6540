"""A locked or read-only embedded catalog: one line naming what and where, a documented exit status, no
traceback, from the jobs' preflight (before any JVM) and for errors raised while a job runs.

The lock is a real SQLite transaction (``BEGIN EXCLUSIVE``) held by another process; read-only is the
immutable attribute (``chattr +i``) for root, whom file modes do not stop, else the file mode.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage.io.catalog import open_catalog
from lineage.io.preflight import (
    CONFIG_EXIT,
    LOCKED_EXIT,
    CatalogLocked,
    ConfigError,
    catalog_failure,
    check_catalog,
)
from lineage.jobstart import catalog_failures
from lineage.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]
JOBS = ("build_lineage", "maintain_lake", "ingest_events")


@pytest.fixture
def lake(tmp_path: Path) -> Settings:
    """An embedded catalog whose SQLite file exists (pyiceberg made its tables)."""
    settings = load_settings(
        catalog={
            "sqlite_path": str(tmp_path / "lake" / "catalog.db"),
            "warehouse": str(tmp_path / "lake" / "warehouse"),
            "properties": {},
        }
    )
    settings.catalog.warehouse.mkdir(parents=True)
    open_catalog(settings.catalog).create_namespace("raw")
    return settings


@contextlib.contextmanager
def locked(database: Path) -> Iterator[None]:
    """Another process holds an exclusive SQLite transaction on ``database`` for the block."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(600)\n",
            str(database),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait(timeout=30)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("root, and chattr +i is not available here: nothing can make a file read-only for root")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def run_job(job: str, settings: Settings) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "LINEAGE__CATALOG__SQLITE_PATH": str(settings.catalog.sqlite_path),
        "LINEAGE__CATALOG__WAREHOUSE": str(settings.catalog.warehouse),
        "LINEAGE__CATALOG__PROPERTIES": "{}",
        "LINEAGE__INGEST__CHECKPOINT": str(settings.catalog.warehouse.parent / "ckpt"),
        "LINEAGE__OPENLINEAGE__ENABLED": "false",
    }
    return subprocess.run(
        [sys.executable, f"jobs/{job}.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def test_every_job_started_on_a_locked_catalog_says_so_in_one_line_and_exits_75(lake: Settings) -> None:
    database = lake.catalog.sqlite_path
    with locked(database):
        for job in JOBS:
            result = run_job(job, lake)
            assert result.returncode == LOCKED_EXIT == 75, result.stderr[-3000:]
            assert result.stderr.splitlines() == [
                f"{job}: the catalog database {database} is locked by another process (database is "
                "locked); run again once it is free"
            ]


def test_a_read_only_catalog_database_or_folder_is_one_line_and_exit_2(lake: Settings) -> None:
    database, warehouse = lake.catalog.sqlite_path, lake.catalog.warehouse
    with read_only(database), pytest.raises(ConfigError, match="is read-only") as raised:
        check_catalog(lake.catalog)
    assert str(raised.value) == (
        f"the catalog database {database} (or its folder) is read-only (readonly database)"
    )
    assert raised.value.exit_code == CONFIG_EXIT == 2
    with (
        read_only(warehouse),
        pytest.raises(ConfigError, match=f"^the warehouse {warehouse} is not writable"),
    ):
        check_catalog(lake.catalog)
    with read_only(database):
        result = run_job("build_lineage", lake)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.splitlines() == [f"build_lineage: {raised.value}"]


def test_a_lock_met_while_a_job_runs_is_named_with_its_path(
    lake: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """What pyiceberg (through SQLAlchemy) raises when the lock comes after the preflight, e.g. at the
    writer lease: one line and exit 75 from the jobs' ``catalog_failures``."""
    database = lake.catalog.sqlite_path
    with locked(database), pytest.raises(SystemExit) as exited, catalog_failures("build_lineage", lake):
        open_catalog(lake.catalog).create_namespace("lineage")
    assert exited.value.code == 75
    assert capsys.readouterr().err.splitlines() == [
        f"build_lineage: the catalog database {database} is locked by another process (database is locked); "
        "run again once it is free"
    ]


def test_what_the_jvm_and_the_file_systems_say_is_classified(lake: Settings) -> None:
    catalog = lake.catalog
    database, warehouse = catalog.sqlite_path, catalog.warehouse
    java_busy = RuntimeError(
        "An error occurred while calling o123.sql.\n: org.apache.iceberg.jdbc.UncheckedSQLException: "
        f"Failed to execute: jdbc:sqlite:{database}\nCaused by: org.sqlite.SQLiteException: [SQLITE_BUSY] "
        "The database file is locked (database is locked)"
    )
    assert isinstance(catalog_failure(java_busy, catalog), CatalogLocked)
    java_read_only = RuntimeError(
        "org.sqlite.SQLiteException: [SQLITE_READONLY] Attempt to write a readonly database "
        f"(attempt to write a readonly database) at {warehouse}/lineage/runs/metadata/v2.metadata.json"
    )
    assert str(catalog_failure(java_read_only, catalog)).startswith(f"the catalog database {database} ")
    hadoop = RuntimeError(f"java.io.IOException: Mkdirs failed to create file:{warehouse}/lineage/runs/data")
    assert str(catalog_failure(hadoop, catalog)) == (
        f"the warehouse {warehouse} is not writable (Mkdirs failed)"
    )
    try:
        try:
            raise OSError(30, "Read-only file system", f"{warehouse}/raw/events/data/x.parquet")
        except OSError as inner:
            raise ValueError("writing the batch failed") from inner
    except ValueError as outer:
        assert "the warehouse" in str(catalog_failure(outer, catalog))
    for other in (RuntimeError("Table not found"), OSError(13, "Permission denied", "/etc/elsewhere")):
        assert catalog_failure(other, catalog) is None
    rest = load_settings(catalog={"properties": {"type": "rest", "uri": "http://catalog:8181"}}).catalog
    assert catalog_failure(RuntimeError("the database is locked, says the service"), rest) is None
