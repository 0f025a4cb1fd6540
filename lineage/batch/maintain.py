"""Keep the lake healthy for months: retention of raw events, small-file compaction, manifest rewrite,
snapshot expiry and orphan-file removal, with Iceberg's own Spark procedures (docs/operations.md).

What keeps the incremental build exact (:mod:`lineage.batch.build` reads the rows appended to
``raw.events`` after the snapshot of the last build, P):

- **Compaction** commits ``replace`` snapshots: an incremental read takes the files *added* by ``append``
  snapshots only, so a rewrite adds no event twice and loses none (the files it replaced stay referenced by
  their append snapshots until those expire).
- **Expiry** of ``raw.events`` never removes P or anything after it: ``older_than`` is clamped to P's commit
  time. Lineage tables keep the snapshot the read API pins (the one current when the last build finished).
- **Retention** deletes raw events older than the configured age only if they were in snapshot P (their
  ``ingested_at`` is before P's commit: one ingestion query writes ``raw.events``, batch after batch), so
  their facts are extracted already; a full refresh starts from the extracted form and is unchanged, and a
  re-extraction keeps the extracted rows of retired events (``lineage.retired_events`` says which).

Schedule it like the build; the two never overlap (both rewrite lineage tables): whichever starts second
stops with one line while the other holds the lease of :mod:`lineage.io.lease`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lineage.io import lake
from lineage.io.lease import writer_lease
from lineage.settings import Settings
from lineage.stopping import StopRequest, stopped_during

log = logging.getLogger(__name__)

RETIRED_TABLE = "retired_events"  # lineage namespace: one row per retention of raw.events
_BUILD_STATE = "build_state"
MANIFEST_ATTEMPTS = 3
# What Iceberg raises when another commit made an operation's plan stale.
_CONFLICTS = ("ValidationException", "CommitFailedException")
_UNFINISHED_BUILDS = ("full-pending", "re-extract-pending")


@dataclass
class TableMaintenance:
    """What one run did to one table (counts from the procedures' results and metadata tables)."""

    table: str
    files_before: int = 0
    files_after: int = 0
    snapshots_before: int = 0
    snapshots_after: int = 0
    retired_rows: int = 0
    rewritten_files: int = 0
    added_files: int = 0
    rewritten_manifests: int = 0
    expired_files: int = 0  # data, delete and manifest files removed with the expired snapshots
    orphan_files: int = 0
    expire_older_than: datetime | None = None
    manifests_skipped: str | None = None  # why the manifest rewrite was given up (another writer won)


@dataclass
class MaintainResult:
    tables: list[TableMaintenance] = field(default_factory=list)
    seconds: float = 0.0


def _count(spark: SparkSession, sql: str) -> int:
    return int(spark.sql(sql).collect()[0][0])


def _utc(value: datetime | None) -> datetime | None:
    """A timestamp collected from Spark (naive, in this process's local time zone) as an aware UTC one."""
    return None if value is None else value.astimezone(UTC)


def _ts(value: datetime) -> str:
    """A Spark SQL timestamp literal (UTC session time zone)."""
    return "TIMESTAMP '" + value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "'"


class _Maintenance:
    def __init__(self, spark: SparkSession, settings: Settings, now: datetime) -> None:
        self.spark = spark
        self.settings = settings
        self.options = settings.maintain
        self.now = now
        catalog = settings.catalog
        self.catalog = catalog.name
        self.state_table = catalog.table(catalog.lineage_namespace, _BUILD_STATE)

    def ident(self, namespace: str, name: str) -> str:
        return f"{self.catalog}.{namespace}.{name}"

    def call(self, procedure: str, args: str) -> list:
        return self.spark.sql(f"CALL {self.catalog}.system.{procedure}({args})").collect()

    # -- what the last build covers ------------------------------------------------------------------
    def last_build(self) -> tuple[int | None, datetime | None]:
        """(raw snapshot, built_at) of the last build; (None, None) before the first one or while an
        unfinished re-extraction makes the extracted form unusable."""
        if not lake.table_exists(self.spark, self.state_table):
            return None, None
        row = (
            self.spark.table(self.state_table)
            .orderBy(F.col("built_at").desc())
            .select("raw_snapshot_id", "mode", "built_at")
            .first()
        )
        if row is None or row["raw_snapshot_id"] is None or row["mode"] == "re-extract-pending":
            return None, None
        finished = (
            self.spark.table(self.state_table)
            .where(~F.col("mode").isin(*_UNFINISHED_BUILDS))
            .agg(F.max("built_at"))
            .collect()[0][0]
        )
        return int(row["raw_snapshot_id"]), _utc(finished)

    def committed_at(self, table: str, snapshot_id: int) -> datetime | None:
        rows = self.spark.sql(
            f"SELECT committed_at FROM {table}.snapshots WHERE snapshot_id = {snapshot_id}"
        ).collect()
        return _utc(rows[0][0]) if rows else None

    # -- the steps -----------------------------------------------------------------------------------
    def retire_events(
        self,
        report: TableMaintenance,
        table: str,
        build_snapshot: int | None,
        extracted_before: datetime | None,
    ) -> None:
        """``extracted_before``: the commit time of the last build's raw snapshot ``build_snapshot``."""
        days = self.options.raw_retention_days
        if not days:
            return
        if build_snapshot is None:
            log.info("retention: no finished build yet, no raw event is retired")
            return
        if extracted_before is None:
            log.warning(
                "retention: the last build's raw snapshot %s is gone, nothing retired", build_snapshot
            )
            return
        cutoff = self.now - timedelta(days=days)
        where = f"event_time < {_ts(cutoff)} AND ingested_at < {_ts(extracted_before)}"
        report.retired_rows = _count(self.spark, f"SELECT count(*) FROM {table} WHERE {where}")
        if not report.retired_rows:
            return
        # Recorded first: a re-extraction must know these events may be gone before they are.
        row = self.spark.createDataFrame(
            [("events", cutoff, extracted_before, report.retired_rows, self.now)],
            "raw_table string, event_time_before timestamp, ingested_before timestamp, rows bigint, "
            "retired_at timestamp",
        )
        catalog = self.settings.catalog
        retired = catalog.table(catalog.lineage_namespace, RETIRED_TABLE)
        if lake.table_exists(self.spark, retired):
            lake.append(row, retired)
        else:
            lake.replace_table(row, retired)
        self.spark.sql(f"DELETE FROM {table} WHERE {where}")
        log.info("retention: %d raw events before %s retired from %s", report.retired_rows, cutoff, table)

    def retire_rejected(self, report: TableMaintenance, table: str) -> None:
        days = self.options.rejected_retention_days
        if not days:
            return
        where = f"ingested_at < {_ts(self.now - timedelta(days=days))}"
        report.retired_rows = _count(self.spark, f"SELECT count(*) FROM {table} WHERE {where}")
        if report.retired_rows:
            self.spark.sql(f"DELETE FROM {table} WHERE {where}")

    def compact(self, report: TableMaintenance, name: str, has_deletes: bool) -> None:
        options = {
            "min-input-files": str(self.options.compact_min_input_files),
            "partial-progress.enabled": "true",
        }
        if has_deletes:
            # Lineage tables take position deletes from incremental builds: fold them into the data.
            options |= {"delete-file-threshold": "1", "remove-dangling-deletes": "true"}
        pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
        row = self.call("rewrite_data_files", f"table => '{name}', options => map({pairs})")[0].asDict()
        report.rewritten_files = int(row.get("rewritten_data_files_count") or 0)
        report.added_files = int(row.get("added_data_files_count") or 0)
        self.rewrite_manifests(report, name)

    def rewrite_manifests(self, report: TableMaintenance, name: str) -> None:
        """``rewrite_manifests``, planned again when a concurrent commit made its plan stale. Seen with the
        ingestion appending to ``raw.events`` meanwhile: "Deleted manifest ... could not be found in the
        latest snapshot", a ValidationException that Iceberg does not retry. After the last attempt the
        rewrite is left to the next run (the table stays correct, its manifests as they were), and the
        report says why."""
        reason = ""
        for attempt in range(1, MANIFEST_ATTEMPTS + 1):
            try:
                report.rewritten_manifests = int(
                    self.call("rewrite_manifests", f"table => '{name}'")[0][0] or 0
                )
                return
            except Exception as exc:
                conflict = next((c for c in _CONFLICTS if c in str(exc)), None)
                if conflict is None:
                    raise
                reason = f"{conflict} on attempt {attempt} of {MANIFEST_ATTEMPTS}: another writer committed"
                log.warning("manifest rewrite of %s: %s", name, reason)
        report.manifests_skipped = reason

    def expire(self, report: TableMaintenance, table: str, keep_from: datetime | None) -> None:
        older_than = self.now - timedelta(hours=self.options.snapshot_max_age_hours)
        if keep_from is not None:
            older_than = min(older_than, keep_from)
        report.expire_older_than = older_than
        row = self.call(
            "expire_snapshots",
            f"table => '{table}', older_than => {_ts(older_than)}, "
            f"retain_last => {self.options.retain_last_snapshots}",
        )[0]
        report.expired_files = sum(int(v or 0) for v in row.asDict().values())

    def remove_orphans(self, report: TableMaintenance, name: str) -> None:
        older_than = self.now - timedelta(hours=self.options.orphan_min_age_hours)
        report.orphan_files = len(
            self.call("remove_orphan_files", f"table => '{name}', older_than => {_ts(older_than)}")
        )

    def pinned_at(self, table: str, built_at: datetime | None) -> datetime | None:
        """Commit time of the table's snapshot that was current when the last build finished."""
        if built_at is None:
            return None
        return _utc(
            self.spark.sql(
                f"SELECT max(committed_at) FROM {table}.snapshots WHERE committed_at <= {_ts(built_at)}"
            ).collect()[0][0]
        )

    def stats(self, table: str) -> tuple[int, int]:
        return (
            _count(self.spark, f"SELECT count(*) FROM {table}.files"),
            _count(self.spark, f"SELECT count(*) FROM {table}.snapshots"),
        )

    def table(self, namespace: str, name: str, build: tuple[int | None, datetime | None]) -> TableMaintenance:
        table = self.ident(namespace, name)
        report = TableMaintenance(table)
        report.files_before, report.snapshots_before = self.stats(table)
        raw = namespace == self.settings.catalog.raw_namespace
        if raw and name == "events":
            keep_from = self.committed_at(table, build[0]) if build[0] is not None else None
            self.retire_events(report, table, build[0], keep_from)
        elif raw:
            self.retire_rejected(report, table)
            keep_from = None
        else:
            keep_from = self.pinned_at(table, build[1])
        if report.snapshots_before or report.retired_rows:
            self.compact(report, table, has_deletes=not raw)
            self.expire(report, table, keep_from)
        self.remove_orphans(report, table)
        report.files_after, report.snapshots_after = self.stats(table)
        log.info("maintained %s: %s", table, report)
        return report


def maintain_lake(
    spark: SparkSession, settings: Settings, *, now: datetime | None = None, stop: StopRequest | None = None
) -> MaintainResult:
    """Retention, compaction, manifest rewrite, snapshot expiry and orphan removal of every raw and lineage
    table that exists. Each step is an Iceberg commit of its own; a run killed half-way is simply run again.

    Args:
        spark: the session (catalog wired by :func:`lineage.spark.build_session`).
        settings: loaded settings (``[maintain]``).
        now: the reference time for ages (default: the current time, UTC).
        stop: a stop request (:func:`lineage.stopping.stop_on_signals`), checked before every table.

    Raises:
        LakeBusy: a build (or another maintenance) is writing the lineage tables (:mod:`lineage.io.lease`).
        JobStopped: a stop was requested; the tables not reached are maintained by the next run.
    """
    with writer_lease(settings, "maintenance"), stopped_during(stop, "a maintenance step"):
        return _maintain_lake(spark, settings, now, stop)


def _maintain_lake(
    spark: SparkSession, settings: Settings, now: datetime | None, stop: StopRequest | None
) -> MaintainResult:
    started = time.monotonic()
    job = _Maintenance(spark, settings, (now or datetime.now(UTC)).astimezone(UTC))
    catalog = settings.catalog
    result = MaintainResult()
    build = job.last_build()
    for namespace in (catalog.raw_namespace, catalog.lineage_namespace):
        if not spark.catalog.databaseExists(f"{catalog.name}.{namespace}"):
            continue
        for name in sorted(lake.tables_in(spark, f"{catalog.name}.{namespace}")):
            if stop is not None:
                stop.check(f"before maintaining {namespace}.{name}")
            result.tables.append(job.table(namespace, name, build))
    result.seconds = time.monotonic() - started
    return result
