"""One writer of the lineage model at a time: the lease the build and the maintenance take in the catalog.

Both rewrite the lineage tables (the build's keyed MERGEs; the maintenance's compaction, manifest rewrites
and snapshot expiry). Run together, one fails the other's commits or expires a snapshot the other still
reads. The lease is the single row of ``<lineage namespace>.writer_lease``, written by a commit that
requires the table's current snapshot to be the one just read: the compare-and-swap every Iceberg catalog
does for a snapshot commit (the SQL catalog's conditional update of the metadata location, the REST
catalog's ``assert-ref-snapshot-id``). Of two jobs that start together exactly one holds it; the other
stops with one line naming the holder.

The holder renews the lease every third of ``[build] lease_minutes`` from a thread. A lease not renewed
for that long (its job was killed) is taken over by the next job, with a warning. On the holder's own host
a dead holder is seen at once: the row names the host, the pid and the process's identity (the boot id and
its start time, from ``/proc``), and a job on that host whose holder's pid is gone, or is now another
process, takes the lease over without waiting, with a warning. The table is written through pyiceberg from
the driver: no Spark job, a few hundred milliseconds per commit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.table import Table
from pyiceberg.types import StringType

from lineage.settings import Settings

log = logging.getLogger(__name__)

LEASE_TABLE = "writer_lease"
BUSY_EXIT = 75  # the jobs' exit status when refused (sysexits' EX_TEMPFAIL: try again later)
ATTEMPTS = 5  # commits lost to another writer of the lease table (a renewal, the maintenance's expiry)
SCHEMA = pa.schema(
    [
        pa.field("holder", pa.string(), nullable=False),
        pa.field("job", pa.string(), nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("pid", pa.int64(), nullable=False),
        pa.field("acquired_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("expires_at", pa.timestamp("us", tz="UTC"), nullable=False),
        # Boot id and start time of the holder's process (Linux): a reused pid is another process.
        pa.field("process", pa.string(), nullable=True),
    ]
)


class LakeBusy(RuntimeError):
    """Another build or maintenance holds the lease: one line saying which and until when."""


class LeaseLost(RuntimeError):
    """The lease this job held was taken over (it had not been renewed in time)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _at(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from a later one that reuses its pid: the boot id and the process's
    start time in clock ticks (``/proc``); None where ``/proc`` does not say (not Linux, no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    # Field 22 of stat is the start time; fields count from 1 and the command (field 2) may hold spaces.
    return f"{boot}:{stat[stat.rindex(')') + 2 :].split()[19]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def gone_holder(row: dict[str, Any]) -> str | None:
    """Why the lease's holder is known to be dead (None: alive, or on another host, where only the lease's
    expiry can tell)."""
    if row["host"] != socket.gethostname():
        return None
    pid = int(row["pid"])
    if not _pid_alive(pid):
        return f"its process {pid} on this host has ended"
    known, now = row.get("process"), process_identity(pid)
    if known and now and known != now:
        return f"pid {pid} on this host is now another process"
    return None


@dataclass
class Lease:
    """The lease of one job (``job``: what it is, e.g. ``build``), on the catalog ``open_catalog`` opens."""

    open_catalog: Callable[[], Catalog]
    namespace: str
    job: str
    ttl: timedelta
    clock: Callable[[], datetime] = _utc_now
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    acquired_at: datetime | None = None

    def _table(self) -> Table:
        catalog = self.open_catalog()
        catalog.create_namespace_if_not_exists(self.namespace)
        # No retry inside pyiceberg: a commit that lost the race must be decided again on what won it.
        table = catalog.create_table_if_not_exists(
            (self.namespace, LEASE_TABLE), SCHEMA, properties={"commit.retry.num-retries": "0"}
        )
        if "process" not in table.schema().column_names:  # a lease table of an earlier version
            try:
                with table.update_schema() as update:
                    update.add_column("process", StringType())
            except (CommitFailedException, ValueError) as exc:  # another job added it meanwhile
                log.info("lease table: adding the process column: %s", exc)
            table = catalog.load_table((self.namespace, LEASE_TABLE))
        return table

    @staticmethod
    def current(table: Table) -> dict[str, Any] | None:
        """The lease row as of the table's current snapshot, None when nobody holds one."""
        rows = table.scan().to_arrow().to_pylist()
        return max(rows, key=lambda r: r["expires_at"]) if rows else None

    def _row(self, now: datetime) -> pa.Table:
        assert self.acquired_at is not None
        return pa.Table.from_pylist(
            [
                {
                    "holder": self.holder,
                    "job": self.job,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "acquired_at": self.acquired_at,
                    "expires_at": now + self.ttl,
                    "process": process_identity(os.getpid()),
                }
            ],
            schema=SCHEMA,
        )

    def _commit(self, decide: Callable[[dict[str, Any] | None, datetime], pa.Table | None]) -> bool:
        """Read the lease, let ``decide`` give the table to write (None: write nothing), write it only if
        nobody wrote the lease table in between; read again after a lost race. True once written."""
        for _ in range(ATTEMPTS):
            table = self._table()
            now = self.clock()
            row = self.current(table)
            rows = decide(row, now)
            if rows is None:
                return False
            try:
                # Either commit requires the snapshot read above to be still the table's current one.
                if row is None:
                    table.append(rows)
                else:
                    table.overwrite(rows)
                return True
            except (CommitFailedException, ValidationException) as exc:
                log.info("the lease table changed while %s wrote it (%s): reading it again", self.job, exc)
        raise LakeBusy(f"{self.job}: the lease table kept changing over {ATTEMPTS} attempts: try again")

    def acquire(self) -> None:
        """Take the lease, or raise :class:`LakeBusy` while another job's lease runs."""

        def take(row: dict[str, Any] | None, now: datetime) -> pa.Table:
            if row is not None and row["holder"] != self.holder:
                gone = gone_holder(row) if row["expires_at"] > now else None
                if gone:
                    log.warning(
                        "taking over the lease of a %s (pid %s on %s, acquired %s) before it expires: %s",
                        row["job"],
                        row["pid"],
                        row["host"],
                        _at(row["acquired_at"]),
                        gone,
                    )
                elif row["expires_at"] > now:
                    raise LakeBusy(
                        f"{self.job} refused: a {row['job']} (pid {row['pid']} on {row['host']}) writes the "
                        f"lineage tables since {_at(row['acquired_at'])}; its lease runs until "
                        f"{_at(row['expires_at'])} unless renewed. Run the {self.job} when it has finished "
                        "(the build and the maintenance must not overlap)"
                    )
                else:
                    log.warning(
                        "taking over the lease of a %s (pid %s on %s) that expired at %s without being "
                        "released: that job was stopped before its end",
                        row["job"],
                        row["pid"],
                        row["host"],
                        _at(row["expires_at"]),
                    )
            self.acquired_at = now
            return self._row(now)

        self._commit(take)
        log.info("%s holds the lineage tables' lease until %s", self.job, _at(self.clock() + self.ttl))

    def renew(self) -> None:
        """Extend the lease by ``ttl`` from now; :class:`LeaseLost` when another job took it over."""

        def extend(row: dict[str, Any] | None, now: datetime) -> pa.Table:
            if row is None or row["holder"] != self.holder:
                raise LeaseLost(f"the {self.job}'s lease was taken over (not renewed within {self.ttl})")
            return self._row(now)

        self._commit(extend)

    def release(self) -> None:
        """Give the lease back (nothing to do when another job took it over meanwhile)."""

        def clear(row: dict[str, Any] | None, now: datetime) -> pa.Table | None:
            if row is None or row["holder"] != self.holder:
                log.warning("the %s's lease was taken over before its end: nothing to release", self.job)
                return None
            return SCHEMA.empty_table()

        self._commit(clear)

    def keep(self, stop: threading.Event) -> None:
        """Renew every third of ``ttl`` until ``stop`` is set (run in a thread beside the job)."""
        while not stop.wait(self.ttl.total_seconds() / 3):
            try:
                self.renew()
            except Exception as exc:  # the job goes on; a lost lease is said loudly
                log.error("%s: the lease could not be renewed: %s", self.job, exc)


@contextlib.contextmanager
def writer_lease(settings: Settings, job: str) -> Iterator[Lease]:
    """Hold the lineage tables' lease for the ``with`` block (acquired before it, released after it, renewed
    while it runs); :class:`LakeBusy` when another build or maintenance holds it."""
    from lineage.io.catalog import open_catalog

    lease = Lease(
        lambda: open_catalog(settings.catalog),
        settings.catalog.lineage_namespace,
        job,
        timedelta(minutes=settings.build.lease_minutes),
    )
    lease.acquire()
    stop = threading.Event()
    keeper = threading.Thread(target=lease.keep, args=(stop,), name=f"{job}-lease", daemon=True)
    keeper.start()
    try:
        yield lease
    finally:
        stop.set()
        keeper.join()
        lease.release()
