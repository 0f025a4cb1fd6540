"""The lineage tables' lease (lineage.io.lease) on a real SQL catalog in a temporary folder (no Spark)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lineage.io.catalog import open_catalog
from lineage.io.lease import (
    LEASE_TABLE,
    SCHEMA,
    LakeBusy,
    Lease,
    LeaseLost,
    gone_holder,
    process_identity,
    writer_lease,
)
from lineage.settings import Settings

T0 = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
TTL = timedelta(minutes=30)


@pytest.fixture
def settings(empty_catalog: Settings) -> Settings:
    return empty_catalog


def _lease(settings: Settings, job: str, at: list[datetime]) -> Lease:
    """A lease whose clock reads ``at[0]`` (the test moves time by assigning it)."""
    return Lease(lambda: open_catalog(settings.catalog), "lineage", job, TTL, clock=lambda: at[0])


def _row(settings: Settings) -> dict | None:
    return Lease.current(open_catalog(settings.catalog).load_table(("lineage", LEASE_TABLE)))


def test_one_holder_at_a_time_and_released_leases_are_free(settings: Settings) -> None:
    now = [T0]
    build, maintenance = _lease(settings, "build", now), _lease(settings, "maintenance", now)
    build.acquire()
    held = _row(settings)
    assert held is not None
    assert (held["holder"], held["job"], held["expires_at"]) == (build.holder, "build", T0 + TTL)
    now[0] = T0 + timedelta(minutes=29)
    with pytest.raises(LakeBusy) as busy:
        maintenance.acquire()
    message = str(busy.value)
    assert "\n" not in message
    assert message.startswith("maintenance refused: a build (pid ")
    assert "since 2026-11-26 03:00:00 UTC; its lease runs until 2026-11-26 03:30:00 UTC" in message
    build.release()
    assert _row(settings) is None
    maintenance.acquire()
    assert _row(settings)["holder"] == maintenance.holder  # type: ignore[index]


def test_renewal_extends_and_an_expired_lease_is_taken_over(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    now = [T0]
    killed, build = _lease(settings, "maintenance", now), _lease(settings, "build", now)
    killed.acquire()
    now[0] = T0 + timedelta(minutes=20)
    killed.renew()
    assert _row(settings)["expires_at"] == T0 + timedelta(minutes=50)  # type: ignore[index]
    now[0] = T0 + timedelta(minutes=49)
    with pytest.raises(LakeBusy):
        build.acquire()
    now[0] = T0 + timedelta(minutes=51)  # the holder was killed: no renewal came
    with caplog.at_level(logging.WARNING, logger="lineage.io.lease"):
        build.acquire()
    assert "taking over the lease of a maintenance" in caplog.text
    assert _row(settings)["holder"] == build.holder  # type: ignore[index]
    with pytest.raises(LeaseLost):
        killed.renew()
    killed.release()  # not its lease any more: left alone
    assert _row(settings)["holder"] == build.holder  # type: ignore[index]


def test_two_jobs_reading_a_free_lease_at_once_one_gets_it(settings: Settings) -> None:
    """The maintenance reads the lease table (free), then the build takes the lease before the maintenance
    writes: the maintenance's commit is refused by the catalog, it reads again and stops."""
    now = [T0]
    build = _lease(settings, "build", now)
    table_reads: list[int] = []

    def clock() -> datetime:
        # Called after the maintenance loaded the table and before it reads the row: the build wins here.
        if not table_reads:
            table_reads.append(1)
            build.acquire()
        return now[0]

    maintenance = Lease(lambda: open_catalog(settings.catalog), "lineage", "maintenance", TTL, clock=clock)
    with pytest.raises(LakeBusy, match="maintenance refused: a build"):
        maintenance.acquire()
    assert _row(settings)["holder"] == build.holder  # type: ignore[index]


def test_writer_lease_holds_for_the_block_and_refuses_a_second_writer(settings: Settings) -> None:
    with writer_lease(settings, "build") as lease:
        assert _row(settings)["holder"] == lease.holder  # type: ignore[index]
        with (
            pytest.raises(LakeBusy, match=r"^maintenance refused: a build"),
            writer_lease(settings, "maintenance"),
        ):
            pass
    assert _row(settings) is None
    with writer_lease(settings, "maintenance"):  # free again
        pass
    with pytest.raises(RuntimeError, match="boom"), writer_lease(settings, "build"):
        raise RuntimeError("boom")
    assert _row(settings) is None  # released when the job fails


def _killed_holder(settings: Settings) -> None:
    """Another process takes the build's lease and dies without releasing it (as under SIGKILL)."""
    script = (
        "import os, sys\n"
        "from lineage.io.lease import writer_lease\n"
        "from lineage.settings import load_settings\n"
        "settings = load_settings(catalog={'sqlite_path': sys.argv[1], 'warehouse': sys.argv[2], "
        "'properties': {}})\n"
        "with writer_lease(settings, 'build'):\n"
        "    os._exit(0)\n"
    )
    catalog = settings.catalog
    subprocess.run(
        [sys.executable, "-c", script, str(catalog.sqlite_path), str(catalog.warehouse)],
        check=True,
        timeout=120,
    )


def test_a_dead_holder_on_this_host_is_taken_over_before_its_lease_expires(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _killed_holder(settings)
    dead = _row(settings)
    assert dead is not None and dead["expires_at"] > datetime.now(UTC) + timedelta(minutes=20)
    assert dead["host"] == socket.gethostname() and dead["process"]
    with (
        caplog.at_level(logging.WARNING, logger="lineage.io.lease"),
        writer_lease(settings, "build") as lease,
    ):
        assert _row(settings)["holder"] == lease.holder  # type: ignore[index]
    assert f"its process {dead['pid']} on this host has ended" in caplog.text
    assert _row(settings) is None


def test_a_reused_pid_is_not_the_holder_but_the_holder_itself_is(settings: Settings) -> None:
    now = [datetime.now(UTC)]
    holder = _lease(settings, "maintenance", now)
    holder.acquire()
    table = open_catalog(settings.catalog).load_table(("lineage", LEASE_TABLE))
    row = Lease.current(table)
    assert row is not None and row["process"] == process_identity(os.getpid())
    assert gone_holder(row) is None
    with pytest.raises(LakeBusy):  # our own pid, our own process: alive
        _lease(settings, "build", now).acquire()
    # The same pid, but a process that started at another time: the holder's pid was reused.
    table.overwrite(
        pa.Table.from_pylist([{**row, "process": row["process"] + "0"}], schema=table.schema().as_arrow())
    )
    assert (
        gone_holder({**row, "process": row["process"] + "0"})
        == f"pid {os.getpid()} on this host is now another process"
    )
    build = _lease(settings, "build", now)
    build.acquire()
    assert _row(settings)["holder"] == build.holder  # type: ignore[index]
    # A holder on another host is only ever judged by its lease's expiry.
    assert gone_holder({**row, "host": "elsewhere", "pid": 2**22 + 7}) is None


def test_a_lease_table_of_an_earlier_version_gains_the_process_column(settings: Settings) -> None:
    catalog = open_catalog(settings.catalog)
    catalog.create_namespace_if_not_exists("lineage")
    old = pa.schema([f for f in SCHEMA if f.name != "process"])
    catalog.create_table(("lineage", LEASE_TABLE), old)
    with writer_lease(settings, "build"):
        assert _row(settings)["process"] == process_identity(os.getpid())  # type: ignore[index]
