"""Which data files each Iceberg table scan of a Spark job read, how many pruning skipped, how much it read.

Iceberg's Spark source reports, per scan, the data files it planned ("number of result data files"), those
its filters skipped by partition or column statistics ("number of skipped data files"), their bytes and
the rows the scan returned as custom SQL metrics. Spark keeps them in its SQL status store (with or
without the web UI), so a job can tally them per step: :class:`ScanTally` sums what the SQL executions
since its last call read, per table. Off unless ``LINEAGE_ICEBERG_SCAN_REPORTS`` is set (reading the store
costs a few py4j calls per execution).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import SparkSession

SCAN_REPORTS_ENV = "LINEAGE_ICEBERG_SCAN_REPORTS"
_READ = "number of result data files"
_SKIPPED = "number of skipped data files"
_BYTES = "total data file size (bytes)"
_ROWS = "number of output rows"
_SCAN_PREFIX = "BatchScan "


@dataclass
class Files:
    read: int = 0
    skipped: int = 0
    rows: int = 0  # rows the scans returned (after the Parquet reader's row-group filters and deletes)
    bytes: int = 0  # size of the data files read


class ScanTally:
    """Data files read and skipped per table by the SQL executions since the last :meth:`take`."""

    def __init__(self, spark: SparkSession) -> None:
        self._store = spark._jsparkSession.sharedState().statusStore()
        # The store is filled by a listener on Spark's event bus, after the statement returned.
        self._bus = spark.sparkContext._jsc.sc().listenerBus()
        self._last = -1  # the newest execution counted

    @staticmethod
    def enabled() -> bool:
        return bool(os.environ.get(SCAN_REPORTS_ENV))

    def take(self) -> dict[str, Files]:
        """Per table (the scan node's table name), the files read and skipped by the executions since the
        last call (each execution counted once; call it between statements)."""
        tally: dict[str, Files] = {}
        self._bus.waitUntilEmpty()
        executions = self._store.executionsList()
        # Newest last: walk back to the last one already counted (a long-lived session keeps thousands).
        # Called between statements, so every execution listed has returned (the store may not have
        # marked it complete yet: it waits for the end of its jobs).
        fresh: list[int] = []
        for i in range(executions.size() - 1, -1, -1):
            number = int(executions.apply(i).executionId())
            if number <= self._last:
                break
            fresh.append(number)
        self._last = max([self._last, *fresh])
        for number in fresh:
            values = self._store.executionMetrics(number)
            nodes = self._store.planGraph(number).allNodes()
            for j in range(nodes.size()):
                node = nodes.apply(j)
                name = str(node.name())
                if not name.startswith(_SCAN_PREFIX):
                    continue
                files = tally.setdefault(name[len(_SCAN_PREFIX) :].split(" ")[0], Files())
                metrics = node.metrics()
                for k in range(metrics.size()):
                    metric = metrics.apply(k)
                    value = values.get(metric.accumulatorId())
                    if value.isEmpty():
                        continue
                    count = _number(str(value.get()))
                    if metric.name() == _READ:
                        files.read += count
                    elif metric.name() == _SKIPPED:
                        files.skipped += count
                    elif metric.name() == _ROWS:
                        files.rows += count
                    elif metric.name() == _BYTES:
                        files.bytes += count
        return tally


def _number(text: str) -> int:
    """A metric's display value as a number (Spark shows a sum like ``1,234``; a size, in bytes here,
    as digits only)."""
    digits = "".join(c for c in text if c.isdigit())
    return int(digits) if digits else 0


def describe(tally: dict[str, Files]) -> str:
    """``table read/total files, rows, MiB`` per table, by table name: e.g. ``lake.lineage.column_paths
    4/56 files 120,301 rows 3.2 MiB``."""
    parts = [
        f"{table} {files.read}/{files.read + files.skipped} files {files.rows:,} rows "
        f"{files.bytes / 2**20:.1f} MiB"
        for table, files in sorted(tally.items())
    ]
    return "; ".join(parts) or "no Iceberg scan"
