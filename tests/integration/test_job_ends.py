"""How the batch jobs end when they are stopped or their catalog fails them, with real Spark.

SIGTERM to a running maintenance job (jobs/maintain_lake.py): it stops before its next table, releases
the writer lease, says so in one line and exits 0 (docs/operations.md, "Stopping a build or a
maintenance"; the build's counterpart is in test_build.py). A catalog database locked by another process
while Spark uses it: one line naming it, exit 75 (the preflight's cases are in
tests/unit/test_catalog_failures.py)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.ingest.stream import run_ingest
from lineage.jobstart import catalog_failures
from lineage.settings import Settings
from tests.integration.test_build import NOW, REPO, _build_env, _lease_row, _wait_for, lab_json, send
from tests.unit.test_catalog_failures import locked

pytestmark = pytest.mark.integration

STOPPED = re.compile(
    r"maintain_lake: stopped by SIGTERM (before maintaining \w+\.\w+|during a maintenance step); "
    r"the lease is released and the next run does the rest"
)


def test_sigterm_stops_a_running_maintenance_cleanly_and_releases_the_lease(
    spark: SparkSession, own_lake: Settings, tmp_path: Path
) -> None:
    send(own_lake, lab_json())
    run_ingest(spark, own_lake, trigger="availableNow")
    build_lineage(spark, own_lake, now=NOW)  # raw and lineage tables: some twenty tables to maintain
    log = tmp_path / "maintain.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "jobs/maintain_lake.py", "--now", NOW.isoformat()],
            cwd=REPO,
            env=_build_env(own_lake),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(log, "maintenance holds the lineage tables' lease", process)
        assert _lease_row(own_lake) is not None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    said = [line for line in text.splitlines() if line.startswith("maintain_lake")]
    assert len(said) == 1 and STOPPED.fullmatch(said[0]), text[-3000:]
    assert "Traceback" not in text
    assert _lease_row(own_lake) is None  # the next build or maintenance may start at once


def test_a_catalog_locked_while_spark_uses_it_ends_the_job_in_one_line_with_75(
    spark: SparkSession, own_lake: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    name, database = own_lake.catalog.name, own_lake.catalog.sqlite_path
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.raw").collect()  # the catalog's file exists
    with locked(database), pytest.raises(SystemExit) as exited, catalog_failures("build_lineage", own_lake):
        spark.sql(f"CREATE NAMESPACE {name}.lineage").collect()  # sqlite-jdbc: SQLITE_BUSY
    assert exited.value.code == 75
    assert capsys.readouterr().err.splitlines() == [
        f"build_lineage: the catalog database {database} is locked by another process (SQLITE_BUSY); "
        "run again once it is free"
    ]
