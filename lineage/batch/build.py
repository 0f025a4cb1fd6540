"""Build the lineage model (``lake.lineage.*``) from ``lake.raw.events``, incrementally by default.

State lives in the lake: ``lineage.build_state`` records, per build, the raw-table snapshot it processed.
An incremental build reads only the rows appended since that snapshot and

1. replaces this range's rows in ``dataset_mentions`` (every dataset mention of every event, the compact
   input of the dataset-level tables; the rows carry the snapshot the range starts after, so a re-run of the
   same range replaces them instead of adding them twice);
2. recomputes the jobs and runs those new events touch, from *all* their raw events (a run's row is a
   function of all its events, so recomputing it gives exactly what a full refresh gives), and merges them
   by key; every still-running run gets its liveness re-evaluated at the build's reference time;
3. rebuilds the dataset-level tables (aliases, datasets, schemas, run_io, edges, summaries) from
   ``dataset_mentions`` and ``runs``: no JSON is parsed again for them;
4. appends the processed snapshot to ``build_state`` as the very last commit.

Each step is one atomic Iceberg commit per table and idempotent for the same range, so a build killed at
any point and run again leaves the same tables as an uninterrupted one. ``full_refresh`` rebuilds every
table from all raw events; both modes give identical tables for the same reference time (tested).
With no new raw snapshot a build commits nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.io import lake
from lineage.settings import Settings
from lineage.transforms import columns, model

log = logging.getLogger(__name__)

JOB_KEY = ["job_namespace", "job_name"]
# Tables of lake.lineage written by the build, in build order.
INCREMENTAL_TABLES = ("dataset_mentions", "jobs", "runs")
DERIVED_TABLES = (
    "dataset_aliases",
    "datasets",
    "dataset_schemas",
    "run_io",
    "job_edges",
    "dataset_edges",
    "job_summary",
    "dataset_summary",
    "column_edges",
    "column_paths",
)
STATE_TABLE = "build_state"
FULL_RANGE_START = -1  # after_snapshot_id of mentions written by a full refresh

# Test-only fault injection: SIGKILL this process right after the named step commits.
FAULT_ENV = "LINEAGE_FAULT_KILL_BUILD_AFTER"


class BuildError(RuntimeError):
    """The build cannot run (e.g. nothing has been ingested yet)."""


@dataclass
class BuildResult:
    mode: str  # "full", "incremental" or "noop"
    raw_snapshot_id: int | None
    previous_snapshot_id: int | None
    new_events: int
    reference_time: datetime
    seconds: float


class _Build:
    def __init__(self, spark: SparkSession, settings: Settings, now: datetime) -> None:
        self.spark = spark
        self.settings = settings
        self.now = now
        self.raw = settings.catalog.events_table
        self._fault = os.environ.get(FAULT_ENV) or None

    def t(self, name: str) -> str:
        """Full name of a ``lineage`` table, e.g. ``lake.lineage.runs``."""
        return self.settings.catalog.table(self.settings.catalog.lineage_namespace, name)

    def step_done(self, step: str) -> None:
        log.info("build step %s committed", step)
        if self._fault == step:
            log.warning("fault injection: SIGKILL after build step %s", step)
            os.kill(os.getpid(), signal.SIGKILL)

    # -- state ---------------------------------------------------------------------------------------
    def last_processed(self) -> int | None:
        state = self.t(STATE_TABLE)
        if not lake.table_exists(self.spark, state):
            return None
        if not all(lake.table_exists(self.spark, self.t(n)) for n in INCREMENTAL_TABLES + DERIVED_TABLES):
            return None
        row = (
            self.spark.table(state)
            .orderBy(F.col("built_at").desc(), F.col("raw_snapshot_id").desc())
            .select("raw_snapshot_id")
            .first()
        )
        return int(row[0]) if row else None

    def record(self, mode: str, previous: int | None, current: int, new_events: int) -> None:
        row = self.spark.createDataFrame(
            [(current, previous, mode, new_events, datetime.now(UTC), self.now)],
            "raw_snapshot_id bigint, previous_snapshot_id bigint, mode string, new_events bigint, "
            "built_at timestamp, reference_time timestamp",
        )
        if mode == "full" or not lake.table_exists(self.spark, self.t(STATE_TABLE)):
            lake.replace_table(row, self.t(STATE_TABLE))
        else:
            lake.append(row, self.t(STATE_TABLE))
        self.step_done(STATE_TABLE)

    # -- steps ---------------------------------------------------------------------------------------
    def liveness(self, runs: DataFrame, heartbeats: DataFrame) -> DataFrame:
        build = self.settings.build
        return model.run_liveness(
            runs,
            heartbeats,
            self.now,
            floor_seconds=build.liveness_floor_seconds,
            multiplier=build.liveness_multiplier,
            overrides=build.liveness_overrides or None,
        )

    def full(self, events: DataFrame) -> None:
        mentions = model.dataset_mentions(events).withColumn(
            "after_snapshot_id", F.lit(FULL_RANGE_START).cast("bigint")
        )
        lake.replace_table(mentions, self.t("dataset_mentions"))
        self.step_done("dataset_mentions")
        jobs = model.jobs(events).join(model.heartbeat_gaps(events), JOB_KEY, "left")
        lake.replace_table(jobs, self.t("jobs"))
        self.step_done("jobs")
        lake.replace_table(self.liveness(model.runs(events), self._heartbeats()), self.t("runs"))
        self.step_done("runs")

    def incremental(self, everything: DataFrame, new: DataFrame, previous: int) -> None:
        mentions = model.dataset_mentions(new).withColumn("after_snapshot_id", F.lit(previous).cast("bigint"))
        lake.overwrite_where(mentions, self.t("dataset_mentions"), "after_snapshot_id", previous)
        self.step_done("dataset_mentions")

        touched_jobs = new.where(F.col("job_name").isNotNull()).select(*JOB_KEY).distinct()
        job_events = everything.join(F.broadcast(touched_jobs), JOB_KEY, "left_semi")
        jobs = model.jobs(job_events).join(model.heartbeat_gaps(job_events), JOB_KEY, "left")
        lake.merge_by_key(jobs, self.t("jobs"), JOB_KEY)
        self.step_done("jobs")

        touched_runs = new.where(F.col("run_id").isNotNull()).select("run_id").distinct()
        fresh = model.runs(everything.join(F.broadcast(touched_runs), "run_id", "left_semi"))
        # Still-running runs nobody touched: their liveness changes with time and with their job's cadence.
        running = (
            self.spark.table(self.t("runs"))
            .where(F.col("reported_state") == "RUNNING")
            .join(touched_runs, "run_id", "left_anti")
            .select(*fresh.columns)
        )
        live = self.liveness(fresh.unionByName(running), self._heartbeats())
        lake.merge_by_key(live, self.t("runs"), ["run_id"])
        self.step_done("runs")

    def _heartbeats(self) -> DataFrame:
        return (
            self.spark.table(self.t("jobs"))
            .where(F.col("median_gap_seconds").isNotNull())
            .select(*JOB_KEY, "median_gap_seconds", "gap_count")
        )

    def derived(self) -> None:
        rules = sorted(self.settings.build.alias_rules.items())
        rounds = self.settings.build.alias_max_iterations
        # Read from the table each time, not cached: at a million events the mentions (schemas of up to
        # hundreds of fields, column-lineage JSON) do not fit the driver; the compressed table reads fast.
        mentions = self.spark.table(self.t("dataset_mentions"))
        runs = self.spark.table(self.t("runs"))
        self._write("dataset_aliases", self._aliases(mentions, rules, rounds))
        aliases = self.spark.table(self.t("dataset_aliases"))
        self._write("datasets", model.datasets(mentions, aliases))
        self._write("dataset_schemas", model.dataset_schemas(mentions, aliases))
        self._write("run_io", model.run_io(mentions, aliases))
        io = self.spark.table(self.t("run_io"))
        self._write("job_edges", model.job_edges(io, runs, model.static_io(mentions, aliases)))
        edges = self.spark.table(self.t("job_edges"))
        self._write("dataset_edges", model.dataset_edges(edges))
        self._write("job_summary", model.job_summary(runs, edges))
        self._write(
            "dataset_summary",
            model.dataset_summary(
                self.spark.table(self.t("datasets")),
                edges,
                self.spark.table(self.t("dataset_edges")),
                io,
                runs,
                self.spark.table(self.t("dataset_schemas")),
            ),
        )
        self._write("column_edges", columns.column_edges(mentions, aliases, alias_rules=rules))
        self._write("column_paths", self._column_paths(self.spark.table(self.t("column_edges"))))

    def _aliases(self, mentions: DataFrame, rules: list[tuple[str, str]], rounds: int) -> DataFrame:
        """:func:`model.dataset_aliases` with each label round materialised, stopping at the first round that
        changes no label (real components are 2-3 names across, so a few rounds instead of all of them)."""
        graph = model.alias_graph(mentions, rules)
        edges = graph.edges.localCheckpoint()
        labels = graph.labels.localCheckpoint()
        for done in range(1, rounds + 1):
            nxt = model.propagate_labels(labels, edges).localCheckpoint()
            settled = model.labels_changed(labels, nxt).isEmpty()
            labels = nxt
            if settled:
                log.info("dataset aliases: labels settled after %d rounds", done)
                break
        return model.resolve_aliases(graph, labels)

    def _column_paths(self, edges: DataFrame) -> DataFrame:
        """Breadth-first rounds over the column edges, each materialised, stopping once a round adds
        nothing (or at ``column_path_max_depth``): the lazily unrolled 20-round plan would be re-planned
        whole, and most estates are a few hops deep."""
        max_depth = self.settings.build.column_path_max_depth
        paths = columns.column_paths(edges, max_depth=1).localCheckpoint()
        for hops in range(1, max_depth):
            longer = columns.extend_column_paths(paths, edges, hops=hops).localCheckpoint()
            if longer.where(F.col("hops") == hops + 1).isEmpty():
                break
            paths = longer
        return paths

    def _write(self, name: str, frame: DataFrame) -> None:
        lake.replace_table(frame, self.t(name))
        self.step_done(name)


def build_lineage(
    spark: SparkSession, settings: Settings, *, full_refresh: bool = False, now: datetime | None = None
) -> BuildResult:
    """Bring ``lake.lineage.*`` up to date with ``lake.raw.events``.

    Args:
        spark: the session (catalog wired by :func:`lineage.spark.build_session`).
        settings: loaded settings (catalog names, liveness and alias rules).
        full_refresh: rebuild everything from all raw events instead of the new snapshots only.
        now: reference time for run liveness (default: the current time, UTC).

    Raises:
        BuildError: ``raw.events`` does not exist yet.
    """
    started = time.monotonic()
    reference = (now or datetime.now(UTC)).astimezone(UTC)
    build = _Build(spark, settings, reference)
    catalog = settings.catalog
    if not lake.table_exists(spark, build.raw):
        raise BuildError(f"{build.raw} does not exist: run the ingestion (jobs/ingest_events.py) first")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.{catalog.lineage_namespace}")
    current = lake.current_snapshot_id(spark, build.raw)
    previous = None if full_refresh else build.last_processed()
    if current is None or (previous is not None and previous == current):
        log.info("no new raw snapshots since %s: nothing to build", previous)
        return BuildResult("noop", current, previous, 0, reference, time.monotonic() - started)

    everything = lake.read_at(spark, build.raw, current)
    if previous is None:
        mode = "full"
        # Not persisted: at a million events the JSON alone is gigabytes (a cache of it ran a 2 GB driver out
        # of memory); each step reads the compressed columns it needs from the table instead.
        new_events = everything.count()
        if lake.table_exists(spark, build.t(STATE_TABLE)):
            # Forget the old state first: a full refresh killed half-way is then finished by any next build.
            spark.sql(f"DROP TABLE {build.t(STATE_TABLE)}")
        build.full(everything)
    else:
        mode = "incremental"
        new = lake.read_appended(spark, build.raw, previous, current).persist(StorageLevel.MEMORY_AND_DISK)
        new_events = new.count()
        build.incremental(everything, new, previous)
    build.derived()
    build.record(mode, previous, current, new_events)
    everything.unpersist()
    seconds = time.monotonic() - started
    log.info("%s build of %d new events up to raw snapshot %s in %.1f s", mode, new_events, current, seconds)
    return BuildResult(mode, current, previous, new_events, reference, seconds)
