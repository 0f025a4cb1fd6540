"""Build the lineage model (``lake.lineage.*``) from ``lake.raw.events``: each event parsed once, every table
maintained by key from the new events.

State lives in the lake: ``lineage.build_state`` records, per build, the raw-table snapshot up to which the
extracted form and the model are complete. A build pins the raw table at its current snapshot C and, with
P the snapshot of the last build:

1. **Extract** the rows appended in (P, C] (Iceberg incremental read), parsing each event's JSON once
   (:mod:`lineage.transforms.extract`): ``event_facts`` (one typed row per event) and ``dataset_mentions``
   (one row per dataset mention). Rows carry the snapshot their range starts after, so a re-run of the same
   range replaces them instead of adding them twice. No later build reads that JSON again.
2. **Maintain** every model table by key from the facts of that range (:meth:`_Build.incremental`):
   jobs and runs touched by the new events are recomputed from their facts and merged; the alias graph is
   re-labelled only for the components the new mentions touch; datasets and schemas whose new mentions are
   all later than anything seen of them are folded, other touched ones recomputed; run_io, job and dataset
   edges are recomputed for the touched runs and jobs (and whatever a relabelled dataset connects) and
   replaced there, rows of merged-away datasets deleted; column edges are folded from per-facet state
   (each distinct column-lineage facet exploded once, ever: :meth:`_Build._fold_column_facets`); the two
   summaries are rewritten whole (:meth:`_Build.maintain_dataset_tables`).
3. Append C to ``build_state`` as the very last commit.

``full_refresh`` recomputes every model table from the whole extracted form (no JSON parsing);
``re_extract`` throws the extracted form away and parses every raw event again first (after a change to
what is extracted). A full recompute and the incremental maintenance give identical tables (tested).

Each step is one atomic Iceberg commit per table and idempotent for the same range. The relabelled datasets
(ids whose aliases an incremental build changes) are written to ``build_pending`` before any model table
changes, and re-read by a re-run of the same range: a build killed at any point and run again leaves the
same tables as an uninterrupted one (a merged-away dataset id is only known before the aliases change).
With no new raw snapshot a build commits nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.batch.maintain import RETIRED_TABLE
from lineage.io import lake
from lineage.io.lease import writer_lease
from lineage.io.scans import ScanTally, describe
from lineage.settings import Settings
from lineage.stopping import StopRequest, stopped_during
from lineage.transforms import columns, model, tags
from lineage.transforms.extract import COORDINATES, FACT_COLUMNS, event_facts, extract_events
from lineage.transforms.model_common import JOB_EVENT, RUN_EVENT, RUNNING

log = logging.getLogger(__name__)

JOB_KEY = ["job_namespace", "job_name"]
NODE_KEY = ["node_namespace", "node_name"]
LINK_KEY = ["src_ns", "src_n", "dst_ns", "dst_n"]
ALIAS_KEY = ["alias_namespace", "alias_name"]

# Tables of lake.lineage written by the build, in build order.
EXTRACTED_TABLES = ("event_facts", "dataset_mentions")
MODEL_TABLES = (
    "job_latest",
    "run_heartbeat_gaps",
    "jobs",
    "runs",
    "job_dependency_runs",
    "job_dependencies",
    "alias_nodes",
    "alias_links",
    "dataset_aliases",
    "datasets",
    "dataset_schemas",
    "run_io",
    "quality_results",
    "quality_metrics",
    "job_edges",
    "dataset_edges",
    "job_summary",
    "dataset_summary",
    "column_facets",
    "column_facet_runs",
    "column_facet_edges",
    "column_edges",
    "column_paths",
    "column_summary",
    "column_tags",
)
# What column_edges is folded from (lineage.transforms.columns), in the incremental build's step order.
COLUMN_STATE_TABLES = ("column_facet_edges", "column_facet_runs", "column_facets")
BUILD_TABLES = EXTRACTED_TABLES + MODEL_TABLES
PENDING_TABLE = "build_pending"
STATE_TABLE = "build_state"

# The columns that identify a row of each table replaced by scope.
ROW_KEYS = {
    "run_heartbeat_gaps": ["run_id", *JOB_KEY, "gap_seconds"],
    "dataset_aliases": ALIAS_KEY,
    "datasets": ["dataset_id"],
    "dataset_schemas": ["dataset_id", "schema_hash"],
    "run_io": ["run_id", "dataset_id", "direction"],
    "quality_results": ["run_id", "dataset_id", "column_name", "assertion"],
    "quality_metrics": ["run_id", "dataset_id", "column_name"],
    "job_edges": [*JOB_KEY, "dataset_id", "direction"],
    "dataset_edges": ["source_dataset_id", "target_dataset_id", *JOB_KEY],
    "job_summary": JOB_KEY,
    "dataset_summary": ["dataset_id"],
    "column_edges": [*columns.EDGE_KEY, "scope"],
    "column_paths": columns.PATH_KEY,
    "column_tags": tags.TAG_KEY,
}

# The mention columns the datasets and dataset_schemas transforms read.
SCHEMA_COLUMNS = (
    "namespace",
    "name",
    "event_time",
    "event_hash",
    "run_id",
    "job_namespace",
    "job_name",
    "schema_fields",
    "tags",
    "field_tags",
)

# A build that touches at most this many runs (or jobs) reads the extracted tables through a literal
# ``run_id IN (...)`` (``job_name IN``) as well as its join: the filter reaches Iceberg's Parquet reader,
# which skips every row group whose dictionary holds none of the values, so a small build decodes only the
# files that hold its runs. A join alone reads every row of the history first (the run_io step of a
# one-event build at tier M: 18.7 s). A longer list is left out: at tier M's history delta (about 3,500
# jobs and their runs) lists of up to 20,000 made the reads of event_facts and the jobs' reads slower (the
# runs step 13.0 -> 17.7 s, the jobs step 9.7 -> 11.6): the touched runs' facts and jobs span the history.
RUN_FILTER_LIMIT = 2000
# The touched runs' mentions (run_io and the quality tables) are the exception: they are the newest rows of
# dataset_mentions, whose older row groups the list skips, so it pays there up to this many runs (the run_io
# step of the history delta at tier M: 12.5 -> 7.5 s).
MENTION_FILTER_LIMIT = 20000

# The mention columns run_io, quality_results and quality_metrics read.
IO_MENTION_COLUMNS = (
    "event_kind",
    "event_time",
    "event_hash",
    "run_id",
    "job_namespace",
    "job_name",
    "namespace",
    "name",
    "role",
    "row_count",
    "size_bytes",
    "file_count",
    "lifecycle",
    "dataset_version",
    "schema_fields",
    "assertions",
    "tests",
    "metrics",
)

RANGE = "after_snapshot_id"  # the snapshot an extracted row's range starts after
FULL_RANGE_START = -1  # RANGE of rows extracted from the whole raw table
# build_state modes (and BuildResult.mode) of a finished build:
FULL = "full"  # every model table recomputed from the whole extracted form
RE_EXTRACT = "re-extract"  # every raw event parsed again into the extracted form, then as FULL
INCREMENTAL = "incremental"  # only the new raw snapshots' events extracted and merged
FINISHED_MODES = (FULL, RE_EXTRACT, INCREMENTAL)
# build_state modes of a build not finished yet:
FULL_PENDING = "full-pending"  # extracted through raw_snapshot_id, the full recompute not finished yet
EXTRACT_PENDING = "re-extract-pending"  # the extracted form is being rebuilt: not usable

# What the last build_state commit says in its snapshot summary, so that "nothing new" is known from two
# tables' metadata (:func:`up_to_date`): the raw snapshot the model is complete up to, the build's mode and
# the shape of the extracted form and model this version writes.
BUILT_SNAPSHOT_PROPERTY = "lineage.raw-snapshot-id"
MODE_PROPERTY = "lineage.build-mode"
FORMAT_PROPERTY = "lineage.build-format"
# The liveness settings the runs' thresholds were computed with (:func:`liveness_settings`): an incremental
# build revisits every running run when they changed.
LIVENESS_PROPERTY = "lineage.liveness-settings"
# The [tags] settings the column tags were computed with: an incremental build recomputes them all when
# they changed.
TAGS_PROPERTY = "lineage.tag-settings"
# Columns of model tables this version writes that an earlier version's did not (or the other way round):
# a lake whose table differs gets a full recompute from its extracted form on its first build. runs: the
# liveness deadline ``lost_after`` replaced ``silent_seconds`` (which grew with the clock). run_io: the
# version and schema each run read or wrote (dataset versions tied to runs). quality_results: which facet
# reported a result and a test's status (the test run facet). datasets: the field entries of the tags
# facet (the seeds of the column tags). runs and run_io: ``run_part``, the partition column below.
MODEL_COLUMNS = {
    "runs": ("lost_after", model.RUN_PART),
    "run_io": ("dataset_version", "schema_hash", model.RUN_PART),
    "quality_results": ("facet", "status"),
    "datasets": ("field_tags",),
}
RETIRED_COLUMNS = {"runs": ("silent_seconds",)}
# Tables keyed by run, identity-partitioned by the run's partition (model.run_part: the day of a UUIDv7
# run id): a build's writes to them read only the partitions of the runs it touches.
RUN_PARTITIONED = ("runs", "run_io", "run_heartbeat_gaps")

# Test-only fault injection: SIGKILL (SIGTERM) this process right after the named step commits.
FAULT_ENV = "LINEAGE_FAULT_KILL_BUILD_AFTER"
FAULT_TERM_ENV = "LINEAGE_FAULT_TERM_BUILD_AFTER"


class BuildError(RuntimeError):
    """The build cannot run (e.g. nothing has been ingested yet)."""


@dataclass
class BuildResult:
    mode: str  # "full", "re-extract", "incremental" or "noop"
    raw_snapshot_id: int | None
    previous_snapshot_id: int | None
    new_events: int  # events extracted by this build (0 for a full refresh with nothing new)
    reference_time: datetime
    seconds: float
    events: int | None = None  # events the model was recomputed from (full modes: all of them)
    # Incremental builds: still-running runs the range did not touch whose rows were re-merged all the same
    # (deadline passed, job touched, or liveness settings changed).
    running_revisited: int | None = None


@dataclass(frozen=True)
class _State:
    snapshot: int  # the extracted form is complete up to this raw snapshot
    full_pending: bool  # a full recompute was started and not finished


@dataclass(frozen=True)
class _AliasDelta:
    """The alias graph's components touched by new mentions, re-labelled (all materialised)."""

    nodes: DataFrame  # alias_nodes rows of every node of the touched components
    links: DataFrame  # alias_links rows of the new mentions
    aliases: DataFrame  # dataset_aliases rows of every alias of the touched components
    relabelled: DataFrame  # dataset_id: every id whose aliases changed (had or now has a changed alias row)


class _Build:
    def __init__(
        self, spark: SparkSession, settings: Settings, now: datetime, stop: StopRequest | None = None
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.now = now
        self.raw = settings.catalog.events_table
        self.rules = sorted(settings.build.alias_rules.items())
        self.stop = stop
        self._fault = os.environ.get(FAULT_ENV) or None
        self._fault_term = os.environ.get(FAULT_TERM_ENV) or None
        self.running_revisited: int | None = None
        # LINEAGE_ICEBERG_SCAN_REPORTS: each step's log line says which data files its scans read.
        self._scans = ScanTally(spark) if ScanTally.enabled() else None
        if self._scans is not None:
            self._scans.take()  # what ran before this build is not its own

    def t(self, name: str) -> str:
        """Full name of a ``lineage`` table, e.g. ``lake.lineage.runs``."""
        return self.settings.catalog.table(self.settings.catalog.lineage_namespace, name)

    def table(self, name: str) -> DataFrame:
        return self.spark.table(self.t(name))

    def step_done(self, step: str, *, last: bool = False) -> None:
        """After each commit: a requested stop ends the build here (not after the ``last`` commit, which
        finished it)."""
        if self._scans is None:
            log.info("build step %s committed", step)
        else:
            log.info("build step %s committed (scans: %s)", step, describe(self._scans.take()))
        if self._fault == step:
            log.warning("fault injection: SIGKILL after build step %s", step)
            os.kill(os.getpid(), signal.SIGKILL)
        if self._fault_term == step:
            log.warning("fault injection: SIGTERM after build step %s", step)
            os.kill(os.getpid(), signal.SIGTERM)
        if self.stop is not None and not last:
            self.stop.check(f"after build step {step}")

    # -- state ---------------------------------------------------------------------------------------
    def last_state(self) -> _State | None:
        """Where the last build left the lake; None when the extracted form must be (re)built."""
        catalog = self.settings.catalog
        existing = lake.tables_in(self.spark, f"{catalog.name}.{catalog.lineage_namespace}")
        if not existing.issuperset((*EXTRACTED_TABLES, STATE_TABLE)):
            return None
        row = (
            self.table(STATE_TABLE)
            .orderBy(F.col("built_at").desc())
            .select("raw_snapshot_id", "mode")
            .first()
        )
        if row is None or row["mode"] == EXTRACT_PENDING or row["raw_snapshot_id"] is None:
            return None
        # A model table this version adds (an upgrade) is computed by a full recompute from the extracted
        # form, as if one had been started: no event is parsed again.
        missing = not existing.issuperset(MODEL_TABLES)
        if missing:
            log.info(
                "lineage tables missing (%s): a full recompute follows", sorted(set(MODEL_TABLES) - existing)
            )
        else:
            # A table of another shape (an upgrade that changed its columns) is replaced the same way.
            stale = [name for name in MODEL_COLUMNS if not self._current_shape(name)]
            if stale:
                log.info("lineage tables of an earlier shape (%s): a full recompute follows", stale)
                missing = True
        return _State(int(row["raw_snapshot_id"]), row["mode"] == FULL_PENDING or missing)

    def _current_shape(self, name: str) -> bool:
        """Whether the model table ``name`` has the columns this version writes (:data:`MODEL_COLUMNS`) and
        none it retired."""
        present = set(self.table(name).columns)
        return set(MODEL_COLUMNS[name]) <= present and not present & set(RETIRED_COLUMNS.get(name, ()))

    def extracted_form_current(self) -> bool:
        """Whether ``event_facts`` and ``dataset_mentions`` hold every column this version extracts (else a
        re-extraction is due: an upgrade that extracts more, e.g. a new facet)."""
        if not all(lake.table_exists(self.spark, self.t(name)) for name in EXTRACTED_TABLES):
            return False
        # Static column lists: planning the extraction only to read its columns took about 4 s a build.
        facts, mentions = (set(self.table(name).columns) for name in EXTRACTED_TABLES)
        return set(FACT_COLUMNS) <= facts and set(model.MENTION_COLUMNS) <= mentions

    def record(
        self, mode: str, previous: int | None, current: int | None, new_events: int, *, last: bool = False
    ) -> None:
        row = self.spark.createDataFrame(
            [(current, previous, mode, new_events, datetime.now(UTC), self.now)],
            "raw_snapshot_id bigint, previous_snapshot_id bigint, mode string, new_events bigint, "
            "built_at timestamp, reference_time timestamp",
        )
        if lake.table_exists(self.spark, self.t(STATE_TABLE)):
            summary = {
                MODE_PROPERTY: mode,
                FORMAT_PROPERTY: build_format(),
                LIVENESS_PROPERTY: liveness_settings(self.settings),
                TAGS_PROPERTY: self.settings.tags.fingerprint(),
            }
            if current is not None:
                summary[BUILT_SNAPSHOT_PROPERTY] = str(current)
            lake.append(row, self.t(STATE_TABLE), summary)
        else:
            lake.replace_table(row, self.t(STATE_TABLE))
        self.step_done(f"{STATE_TABLE}:{mode}", last=last)

    # -- 1. extraction -------------------------------------------------------------------------------
    def extract(self, previous: int | None, current: int) -> int:
        """Parse the events of (``previous``, ``current``] (all events when ``previous`` is None) once into
        ``event_facts`` and ``dataset_mentions``; returns how many events were extracted."""
        if previous is None:
            source, tag = lake.read_at(self.spark, self.raw, current), FULL_RANGE_START
        else:
            source, tag = lake.read_appended(self.spark, self.raw, previous, current), previous
        # Persisted once, written twice: the parse is the expensive part and is done once. All events (a
        # million and more) go to disk only: kept in memory they ran a 3g driver out of heap.
        level = StorageLevel.DISK_ONLY if previous is None else StorageLevel.MEMORY_AND_DISK
        extracted = extract_events(source).persist(level)
        started = time.monotonic()
        count = extracted.count()
        log.info("extraction: %d events read and parsed in %.1f s", count, time.monotonic() - started)
        tagged = F.lit(tag).cast("bigint")
        outputs = {
            "event_facts": event_facts(extracted).withColumn(RANGE, tagged),
            "dataset_mentions": model.dataset_mentions(extracted).withColumn(RANGE, tagged),
        }
        if previous is None:
            # Events that retention removed from the raw table live on in the extracted form only.
            for name, kept in self._retired(outputs["event_facts"], tagged).items():
                frame = outputs[name]
                outputs[name] = frame.unionByName(
                    kept.select(*[c for c in kept.columns if c in frame.columns]), allowMissingColumns=True
                )
        for name, frame in outputs.items():
            if previous is None:
                lake.replace_table(frame, self.t(name))
            else:
                lake.overwrite_where(frame, self.t(name), RANGE, previous)
            self.step_done(name)
        extracted.unpersist()
        return count

    def _retired(self, new_facts: DataFrame, tagged: Column) -> dict[str, DataFrame]:
        """The extracted rows of events retired from the raw table (``lineage.retired_events``), per extracted
        table: rows older than the latest retention cutoff, read at the tables' current snapshots before the
        re-extraction replaces them, of events the raw table no longer holds. An event that arrived more than
        once may have copies on both sides (:func:`carried_over`)."""
        if not lake.table_exists(self.spark, self.t(RETIRED_TABLE)):
            return {}
        before = self.table(RETIRED_TABLE).agg(F.max("event_time_before")).collect()[0][0]
        if before is None:
            return {}
        old = {}
        for name in EXTRACTED_TABLES:
            if lake.table_exists(self.spark, self.t(name)):
                snapshot = lake.current_snapshot_id(self.spark, self.t(name))
                if snapshot is not None:
                    rows = lake.read_at(self.spark, self.t(name), snapshot).drop(RANGE)
                    old[name] = rows.where(F.col("event_time") < F.lit(before))
        if "event_facts" not in old:
            return {}
        kept = {name: rows.withColumn(RANGE, tagged) for name, rows in carried_over(old, new_facts).items()}
        log.info("re-extraction keeps the extracted rows of events retired before %s", before)
        return kept

    # -- 2a. full recompute --------------------------------------------------------------------------
    def full(self) -> int:
        """Every model table recomputed from the whole extracted form; returns the number of events."""
        facts = self.table("event_facts")
        self._put("job_latest", model.job_latest(facts))
        self._put("run_heartbeat_gaps", model.run_heartbeat_gaps(facts))
        heartbeats = model.job_heartbeats(self.table("run_heartbeat_gaps"))
        self._put("jobs", model.jobs_from_latest(self.table("job_latest")).join(heartbeats, JOB_KEY, "left"))
        self._put("runs", self.liveness(model.runs(facts)))
        self._put("job_dependency_runs", model.dependency_runs(facts))
        self._put("job_dependencies", model.dependencies_from_runs(self.table("job_dependency_runs")))
        mentions = self.table("dataset_mentions")
        graph = model.alias_graph(mentions, self.rules)
        edges = graph.edges.localCheckpoint()
        initial = graph.labels.localCheckpoint()
        labels = self._settle(initial, edges)
        self._put("alias_nodes", _node_rows(initial, labels))
        self._put("alias_links", edges.where(~_self_loop()))
        self._put("dataset_aliases", model.resolve_aliases(graph, labels))
        self.all_dataset_tables()
        return int(facts.count())

    # -- 2b. incremental maintenance -----------------------------------------------------------------
    def incremental(self, previous: int) -> None:
        """Maintain every model table from the facts extracted for the range after ``previous``."""
        facts = self.table("event_facts")
        delta = facts.where(F.col(RANGE) == previous)
        # A touched run's parent is touched too, whether the range's events name it or the run's earlier ones
        # do (a child's later events may carry no parent facet): a parent known only from its children gets
        # its row from them, and one with events of its own must not get a row from its children alone.
        named = (
            delta.where(F.col("run_id").isNotNull())
            .select("run_id")
            .unionByName(
                delta.where(F.col("parent_run_id").isNotNull()).select(F.col("parent_run_id").alias("run_id"))
            )
            .distinct()
        )
        runs_touched = (
            named.unionByName(
                _of_runs(facts, named)
                .where(F.col("parent_run_id").isNotNull())
                .select(F.col("parent_run_id").alias("run_id"))
            )
            .distinct()
            .localCheckpoint()
        )
        jobs_touched = (
            delta.where(F.col("event_kind").isin(RUN_EVENT, JOB_EVENT) & F.col("job_name").isNotNull())
            .select(*JOB_KEY)
            .distinct()
            .localCheckpoint()
        )
        new_mentions = self.table("dataset_mentions").where(F.col(RANGE) == previous).localCheckpoint()
        # The relabelled datasets (ids that gained, lost or changed aliases), fixed before any model table
        # changes: after the alias steps commit they can no longer be told, so a re-run reads them back.
        pending = self._pending().where(F.col(RANGE) == previous).select("dataset_id").localCheckpoint()
        graph = model.alias_graph(new_mentions, self.rules)
        # Usually the new mentions name datasets already known, the way they were known: the alias tables
        # stay as they are and no dataset is relabelled (about 20 Spark jobs fewer than re-labelling). A
        # re-run after a crash between the alias steps (pending rows) always takes the long way.
        news = model.alias_graph_news(
            graph, self.table("alias_nodes"), self.table("alias_links"), self.table("dataset_aliases")
        )
        aliases = None if pending.isEmpty() and news.isEmpty() else self._alias_delta(graph)
        if aliases is None:
            log.info("dataset aliases: the new mentions add no name, link or rank: nothing relabelled")
            relabelled = pending
        else:
            relabelled = aliases.relabelled.unionByName(pending).distinct().localCheckpoint()
            lake.overwrite_where(
                relabelled.withColumn(RANGE, F.lit(previous).cast("bigint")),
                self.t(PENDING_TABLE),
                RANGE,
                previous,
            )
        self.step_done(PENDING_TABLE)

        runs_table = self.table("runs")
        # A touched run's row reads its own events; a parent's also those of every child naming it: the
        # children are found on two narrow columns, then every event of the touched runs and of those
        # children is read in one scan. A row depends only on the events of its run and those naming it as
        # parent, so the rows of runs outside the touched set that these events also give are dropped.
        children = _of_runs(facts.select("run_id", "parent_run_id"), runs_touched, "parent_run_id").select(
            "run_id"
        )
        read_runs = runs_touched.unionByName(children).distinct().localCheckpoint()
        run_facts = _of_runs(facts, read_runs).localCheckpoint()
        jobs_changed = self._fold_jobs(delta, run_facts, runs_touched, jobs_touched)

        fresh = model.runs(run_facts).join(F.broadcast(runs_touched), "run_id", "left_semi")
        running = self._running_to_revisit(runs_table, runs_touched, jobs_changed).select(*fresh.columns)
        lake.merge_by_key(
            _with_run_part(self.liveness(fresh.unionByName(running))),
            self.t("runs"),
            ["run_id"],
            self._run_parts("runs", runs_touched.unionByName(running.select("run_id"))),
        )
        self.step_done("runs")
        self._fold_dependencies(delta)
        if aliases is not None:
            lake.merge_by_key(aliases.nodes, self.t("alias_nodes"), NODE_KEY)
        self.step_done("alias_nodes")
        if aliases is not None:
            lake.insert_missing(aliases.links, self.t("alias_links"), LINK_KEY)
        self.step_done("alias_links")
        if aliases is not None:
            lake.merge_by_key(aliases.aliases, self.t("dataset_aliases"), ALIAS_KEY)
        self.step_done("dataset_aliases")
        self.maintain_dataset_tables(new_mentions, relabelled, runs_touched, jobs_touched, previous)

    def _fold_jobs(
        self, delta: DataFrame, run_facts: DataFrame, runs_touched: DataFrame, jobs_touched: DataFrame
    ) -> DataFrame:
        """Fold the range into ``job_latest``, ``jobs`` and ``run_heartbeat_gaps`` without reading any event
        outside the range and the touched runs' (``run_facts``): a job's latest facets and first/last seen
        fold its stored state with the range's, and its median heartbeat gap is taken of its runs' stored
        gap multisets, those of the touched runs recomputed from their events. Returns the jobs whose rows
        were rewritten: the range's, and those a touched run's gaps counted for before or after (a run
        whose events name another job). Commits ``job_latest`` (an idempotent fold), ``jobs``, then the
        touched runs' gaps, which the medians were computed with before they are stored: a re-run after a
        kill between the commits finds the same stored gaps, or the new ones and the jobs already written.
        """
        gaps_name = "run_heartbeat_gaps"
        prune = self._run_parts(gaps_name, runs_touched)
        runs = F.broadcast(runs_touched.select("run_id"))
        new_gaps = model.run_heartbeat_gaps(run_facts).join(runs, "run_id", "left_semi").localCheckpoint()
        old_gaps = self.table(gaps_name).where(prune.on()).join(runs, "run_id", "left_semi")
        named = F.col("job_namespace").isNotNull() & F.col("job_name").isNotNull()
        changed = (
            jobs_touched.select(*JOB_KEY)
            .unionByName(old_gaps.select(*JOB_KEY))
            .unionByName(new_gaps.select(*JOB_KEY))
            .where(named)
            .distinct()
            .localCheckpoint()
        )
        jobs = F.broadcast(changed)
        kept = self.table(gaps_name).join(jobs, JOB_KEY, "left_semi").join(runs, "run_id", "left_anti")
        heartbeats = model.job_heartbeats(kept.drop(model.RUN_PART).unionByName(new_gaps))
        stored = self.table("job_latest").join(jobs, JOB_KEY, "left_semi")
        latest = model.fold_job_latest(model.job_latest(delta), stored).localCheckpoint()
        lake.merge_by_key(latest, self.t("job_latest"), JOB_KEY)
        self.step_done("job_latest")
        lake.merge_by_key(
            model.jobs_from_latest(latest).join(heartbeats, JOB_KEY, "left"), self.t("jobs"), JOB_KEY
        )
        self.step_done("jobs")
        self._put(gaps_name, new_gaps, runs_touched.select("run_id"), prune)
        return changed

    def _running_to_revisit(
        self, runs_table: DataFrame, runs_touched: DataFrame, jobs_touched: DataFrame
    ) -> DataFrame:
        """Stored rows of still-running runs the range did not touch whose liveness columns change now:
        those stored RUNNING whose deadline (``lost_after``) has passed by this build's reference time, and
        those of a touched job whose median heartbeat gap moved (each running row keeps the median its
        threshold was computed from, ``median_heartbeat_seconds``; the ``jobs`` step has already written
        the job's new one, so a re-run after a kill finds the same rows). Every other running run's row is
        what a full recompute would give at this time too, so it is left alone: a build's work follows its
        delta, not the number of open runs, and a new run of a job whose median stays put costs its old
        runs nothing. After a change to the liveness settings (floor, multiplier, overrides) every running
        run is revisited, as a full recompute would."""
        running = runs_table.where(F.col("reported_state") == RUNNING)
        if self._liveness_settings_changed():
            log.info("runs: the liveness settings changed since the last build: every running run revisited")
        else:
            due = (F.col("inferred_state") == RUNNING) & (F.col("lost_after") <= F.lit(_aware(self.now)))
            medians = (
                self.table("jobs")
                .join(F.broadcast(jobs_touched), JOB_KEY, "left_semi")
                .select(*JOB_KEY, F.col("median_gap_seconds").alias("_median"))
            )
            moved = (
                running.join(F.broadcast(jobs_touched), JOB_KEY, "left_semi")
                .join(medians, JOB_KEY, "left")
                .where(~F.col("median_heartbeat_seconds").eqNullSafe(F.col("_median")))
                .drop("_median")
            )
            running = running.where(due).unionByName(moved)
        revisit = running.join(runs_touched, "run_id", "left_anti").dropDuplicates(["run_id"])
        revisit = revisit.localCheckpoint()
        self.running_revisited = revisit.count()
        log.info("runs: %d untouched running runs revisited", self.running_revisited)
        return revisit

    def _liveness_settings_changed(self) -> bool:
        """Whether the last build's ``build_state`` commit recorded other liveness settings than this
        build's (or none: a lake of an earlier version, or a commit a compaction rewrote). Read from the
        commit's summary through pyiceberg (metadata only, no Spark job)."""
        summary = last_state_summary(self.settings)
        recorded = None if summary is None else summary.get(LIVENESS_PROPERTY)
        return recorded != liveness_settings(self.settings)

    def _fold_dependencies(self, delta: DataFrame) -> None:
        """Fold the range's dependency reports into ``job_dependency_runs`` (per pair and run), then
        recompute the touched pairs of ``job_dependencies`` from those state rows: no event outside the
        range is read. A pair never loses its runs, so the touched pairs are upserted (nothing deleted).
        Folding is idempotent, so a re-run of the range gives the same rows."""
        key = [*model.DEPENDENCY_KEY, "run_id"]
        new = model.dependency_runs(delta).localCheckpoint()
        if new.isEmpty():
            log.info("job dependencies: none reported in the range")
            self.step_done("job_dependency_runs")
            self.step_done("job_dependencies")
            return
        # The fold's left join keeps the delta's keys only: the stored rows need no filtering first.
        folded = model.fold_dependency_runs(new, self.table("job_dependency_runs"))
        lake.merge_by_key(folded, self.t("job_dependency_runs"), key)
        self.step_done("job_dependency_runs")
        pairs = new.select(*model.DEPENDENCY_KEY).distinct().alias("p")
        touched = (
            self.table("job_dependency_runs")
            .alias("s")
            .join(pairs, lake.same_keys("s", "p", model.DEPENDENCY_KEY), "left_semi")
        )
        lake.merge_by_key(
            model.dependencies_from_runs(touched), self.t("job_dependencies"), model.DEPENDENCY_KEY
        )
        self.step_done("job_dependencies")

    def _pending(self) -> DataFrame:
        if not lake.table_exists(self.spark, self.t(PENDING_TABLE)):
            empty = self.spark.createDataFrame([], f"dataset_id string, {RANGE} bigint")
            lake.replace_table(empty, self.t(PENDING_TABLE))
        return self.table(PENDING_TABLE)

    def _alias_delta(self, graph: model.AliasGraph) -> _AliasDelta:
        """Re-label the alias components the new mentions (their ``graph``) touch: their nodes (old and new),
        their links (stored and new), label propagation on that subgraph only."""
        new_nodes = graph.labels.select(*NODE_KEY, F.col("label.rank").alias("rank")).localCheckpoint()
        stored = self.table("alias_nodes")
        old_ids = (
            stored.join(new_nodes, NODE_KEY, "left_semi").select("dataset_id").distinct().localCheckpoint()
        )
        members = (
            stored.join(old_ids, "dataset_id", "left_semi")
            .select(*NODE_KEY, "rank")
            .unionByName(new_nodes)
            .groupBy(*NODE_KEY)
            .agg(F.min("rank").alias("rank"))
            .localCheckpoint()
        )
        initial = members.select(*NODE_KEY, _label()).localCheckpoint()
        sources = members.select(F.col("node_namespace").alias("src_ns"), F.col("node_name").alias("src_n"))
        edges = (
            self.table("alias_links")
            .join(sources, ["src_ns", "src_n"], "left_semi")
            .unionByName(graph.edges)
            .unionByName(_self_loops(members))
            .distinct()
            .localCheckpoint()
        )
        labels = self._settle(initial, edges)
        old_rows = self.table("dataset_aliases").join(old_ids, "dataset_id", "left_semi")
        known = model.alias_forms(old_rows.select(*ALIAS_KEY, "alias_kind"), self.rules)
        forms = known.unionByName(graph.forms.select(*known.columns)).distinct()
        aliases = model.resolve_aliases(model.AliasGraph(forms, initial, edges), labels).localCheckpoint()
        nodes = _node_rows(initial, labels).localCheckpoint()
        # An alias row that is new, gone or changed (another canonical id or kind) changes both its datasets.
        old_rows = old_rows.select(*aliases.columns)
        changed = old_rows.exceptAll(aliases).unionByName(aliases.exceptAll(old_rows))
        relabelled = changed.select("dataset_id").distinct()
        return _AliasDelta(nodes, graph.edges.where(~_self_loop()).distinct(), aliases, relabelled)

    # -- the dataset-level tables --------------------------------------------------------------------
    def maintain_dataset_tables(
        self,
        new_mentions: DataFrame,
        relabelled: DataFrame,
        runs_touched: DataFrame,
        jobs_touched: DataFrame,
        previous: int,
    ) -> None:
        """The dataset-level tables maintained by key from the new mentions.

        - ``datasets`` and ``dataset_schemas``: a dataset whose new mentions are all later than everything
          seen of it (``last_seen``) is folded: the new mentions are aggregated and combined with its row
          (first seen kept, last seen and latest schema from the new ones, new schema versions numbered
          after the old). Any other touched dataset, and every relabelled one, is recomputed from all its
          mentions (late or replayed events, merges; exact either way).
        - ``run_io``, ``quality_results`` and ``quality_metrics``: recomputed for the touched runs and the
          runs with io on a relabelled dataset;
          ``job_edges`` and ``dataset_edges`` for the jobs of those runs, the touched jobs and the jobs with
          an edge on a relabelled dataset.
        - ``column_edges``: recomputed for the targets of the new column-lineage facets, the relabelled
          datasets and the targets of their edges; ``column_paths`` for those targets and everything
          downstream of them.
        - ``job_summary`` is rewritten whole (about 5 s at 1M events); ``dataset_summary`` is recomputed for
          the datasets whose rows, schemas, edges or writing runs changed, from those datasets' rows only.
        """
        # The alias steps have committed: the aliases stay as they are until the build's end. Read once
        # here, not once per statement that resolves names (about 50 scans of the table a build, 2 million
        # rows at tier M).
        aliases = self.table("dataset_aliases").localCheckpoint()
        mentions = self.table("dataset_mentions")
        runs = self.table("runs")
        new = model.canonical_mentions(new_mentions, aliases)

        # Which touched datasets fold and which are recomputed.
        # Kept: read for the fold decision and folded with (two scans of the table otherwise).
        old_rows = (
            self.table("datasets")
            .join(new.select("dataset_id").distinct(), "dataset_id", "left_semi")
            .localCheckpoint()
        )
        newest = new.groupBy("dataset_id").agg(F.min("event_time").alias("_new_from"))
        folding = (
            newest.join(old_rows.select("dataset_id", "last_seen"), "dataset_id")
            .where(F.col("_new_from") > F.col("last_seen"))
            .select("dataset_id")
            .join(relabelled, "dataset_id", "left_anti")
            .localCheckpoint()
        )
        recompute = (
            new.select("dataset_id")
            .unionByName(relabelled)
            .distinct()
            .join(folding, "dataset_id", "left_anti")
            .localCheckpoint()
        )
        log.info(
            "dataset tables: %d datasets folded, %d recomputed (%d relabelled)",
            folding.count(),
            recompute.count(),
            relabelled.count(),
        )
        scoped_aliases = aliases.join(recompute, "dataset_id", "left_semi")
        names = scoped_aliases.select(
            F.col("alias_namespace").alias("namespace"), F.col("alias_name").alias("name")
        ).distinct()
        # Kept for two tables, so only the columns they read: the column-lineage entries are most of a
        # mention's bytes. No dataset to recompute (the usual case): no scan of the mentions at all.
        scoped = (
            mentions.select(*SCHEMA_COLUMNS)
            .join(names, ["namespace", "name"], "left_semi")
            .persist(StorageLevel.MEMORY_AND_DISK)
            if not recompute.isEmpty()
            else new_mentions.select(*SCHEMA_COLUMNS).limit(0)
        )
        folded_new = new_mentions.join(
            aliases.join(folding, "dataset_id", "left_semi")
            .select(F.col("alias_namespace").alias("namespace"), F.col("alias_name").alias("name"))
            .distinct(),
            ["namespace", "name"],
            "left_semi",
        )

        # Read before anything below changes them: what the relabelled datasets were connected to.
        old_io = self.table("run_io")
        io_runs = (
            runs_touched.unionByName(_within(old_io, relabelled).select("run_id"))
            .distinct()
            .localCheckpoint()
        )
        io_parts = self._run_parts("run_io", io_runs)
        edge_jobs = (
            jobs_touched.unionByName(
                old_io.where(io_parts.on()).join(io_runs, "run_id", "left_semi").select(*JOB_KEY)
            )
            .unionByName(_within(self.table("job_edges"), relabelled).select(*JOB_KEY))
            .distinct()
            .localCheckpoint()
        )
        # Targets whose column lineage a relabel changes: the relabelled datasets and the targets of their
        # edges (a source id is resolved when its facet is exploded).
        relabel_targets = (
            relabelled.unionByName(
                self.table("column_edges")
                .join(relabelled.withColumnRenamed("dataset_id", "source_dataset_id"), "source_dataset_id")
                .select(F.col("target_dataset_id").alias("dataset_id"))
            )
            .distinct()
            .localCheckpoint()
        )
        target_ids = (
            new.where((F.col("role") == "output") & F.col("column_facet").isNotNull())
            .select("dataset_id")
            .unionByName(relabel_targets)
            .distinct()
            .localCheckpoint()
        )

        scope = recompute.unionByName(folding)
        self._put(
            "datasets",
            model.datasets(scoped, scoped_aliases).unionByName(
                model.fold_datasets(model.datasets(folded_new, aliases), old_rows)
            ),
            scope,
        )
        old_schemas = self.table("dataset_schemas").join(folding, "dataset_id", "left_semi")
        # Kept: the new versions give the step's scope, its rows and the summaries' scope.
        new_schemas = model.dataset_schemas(folded_new, aliases).localCheckpoint()
        schema_scope = recompute.unionByName(new_schemas.select("dataset_id").distinct())
        self._put(
            "dataset_schemas",
            model.dataset_schemas(scoped, scoped_aliases).unionByName(
                model.fold_schemas(new_schemas, old_schemas)
            ),
            schema_scope,
        )
        scoped.unpersist()

        # The touched runs' mentions, read once for the three tables built from them (the columns they
        # read: a mention's column-lineage entries are most of its bytes and none of theirs).
        run_mentions = _of_runs(
            mentions.select(*IO_MENTION_COLUMNS), io_runs, limit=MENTION_FILTER_LIMIT
        ).persist(StorageLevel.MEMORY_AND_DISK)
        self._put("run_io", model.run_io(run_mentions, aliases), io_runs, io_parts)
        # A run's quality results come from the same mentions as its io: the same runs, replaced the same way.
        self._put("quality_results", model.quality_results(run_mentions, aliases), io_runs)
        self._put("quality_metrics", model.quality_metrics(run_mentions, aliases), io_runs)
        run_mentions.unpersist()
        few_jobs = _few(edge_jobs, "job_name", "job_name")
        jobs_io = _of_jobs(self.table("run_io"), edge_jobs, few_jobs)
        static_mentions = _of_jobs(mentions.where(F.col("event_kind") == JOB_EVENT), edge_jobs, few_jobs)
        self._put(
            "job_edges", model.job_edges(jobs_io, runs, model.static_io(static_mentions, aliases)), edge_jobs
        )
        self._put(
            "dataset_edges",
            model.dataset_edges(self.table("job_edges").join(edge_jobs, JOB_KEY, "left_semi")),
            edge_jobs,
        )
        self._put("job_summary", model.job_summary(runs, self.table("job_edges")))
        # A dataset's summary reads its own rows of datasets, schemas, job and dataset edges, and the runs
        # writing it: it changes only for datasets whose row or schemas changed, the datasets of the
        # rewritten jobs' edges (every edge and every io row that changed is one of those, and every run
        # whose state changed is a touched run, so its io is too) and the relabelled ones (deleted).
        summary_scope = (
            scope.unionByName(schema_scope)
            .unionByName(self.table("job_edges").join(edge_jobs, JOB_KEY, "left_semi").select("dataset_id"))
            .unionByName(relabelled)
            .distinct()
            .localCheckpoint()
        )
        self._put("dataset_summary", self._dataset_summary(runs, summary_scope), summary_scope)

        targets = target_ids.withColumnRenamed("dataset_id", "target_dataset_id")
        # Paths into the changed targets and into everything downstream of them.
        downstream = self.table("column_paths").join(
            target_ids.withColumnRenamed("dataset_id", "source_dataset_id"), "source_dataset_id", "left_semi"
        )
        path_targets = (
            targets.unionByName(downstream.select("target_dataset_id")).distinct().localCheckpoint()
        )
        if path_targets.isEmpty():
            # No new column-lineage facet and nothing relabelled: the column tables stay as they are.
            for name in (*COLUMN_STATE_TABLES, "column_edges", "column_paths", "column_summary"):
                self.step_done(name)
            self._maintain_column_tags(summary_scope, relabelled, None)
            return
        self._fold_column_facets(new_mentions, aliases, relabel_targets, previous)
        self._put("column_edges", self._column_edges(targets), targets)
        if self._paths_hold(targets):
            # New runs of known column lineage: the edges' times and run counts moved, no path did.
            log.info("column paths: the edges into the changed targets give the paths already stored")
            self.step_done("column_paths")
        else:
            paths = self._column_paths(self.table("column_edges"), path_targets)
            self._put("column_paths", paths, path_targets)
        self._column_summary()
        self._maintain_column_tags(summary_scope, relabelled, target_ids)

    def _maintain_column_tags(
        self, touched: DataFrame, relabelled: DataFrame, targets: DataFrame | None
    ) -> None:
        """``column_tags`` replaced for the origins whose rows may have changed, each propagated anew over
        every carrying edge (a column's rows of one origin depend on that origin's seeds and the edges
        only, so the rows of every other origin stay exact).

        Those origins: the datasets whose seeds changed (of ``touched``, the datasets with new mentions, and
        of the ends of the edges into ``targets``, the datasets whose column edges this build rewrote), the
        ``relabelled`` ones (an id merged away loses its rows) and every origin with a stored row at an end
        of those edges (an old edge may have carried it, a new one may carry it further; an edge is only
        ever removed by a relabel, whose datasets are in the scope too). With other ``[tags]`` settings
        than the last build's every row is recomputed.
        """
        if self._tag_settings_changed():
            log.info("column tags: the [tags] settings changed since the last build: all recomputed")
            self._put("column_tags", self._propagate_tags(self._tag_seeds(None)))
            self._report_tag_rules()
            return
        stored = self.table("column_tags")
        candidates = touched.unionByName(relabelled)
        crossing = relabelled.limit(0)
        if targets is not None:
            into = self.table("column_edges").join(
                targets.withColumnRenamed("dataset_id", "target_dataset_id"), "target_dataset_id", "left_semi"
            )
            ends = (
                targets.unionByName(into.select(F.col("source_dataset_id").alias("dataset_id")))
                .distinct()
                .localCheckpoint()
            )
            candidates = candidates.unionByName(ends)
            crossing = stored.join(ends, "dataset_id", "left_semi").select(
                F.col("origin_dataset_id").alias("dataset_id")
            )
        candidates = candidates.distinct().localCheckpoint()
        now = self._tag_seeds(candidates).select(*tags.TAG_KEY)
        was = (
            stored.where(F.col("hops") == 0).join(candidates, "dataset_id", "left_semi").select(*tags.TAG_KEY)
        )
        changed = now.exceptAll(was).unionByName(was.exceptAll(now)).select("dataset_id")
        origins = changed.unionByName(relabelled).unionByName(crossing).distinct().localCheckpoint()
        if origins.isEmpty():
            log.info("column tags: no seed and no carrying edge changed")
            self.step_done("column_tags")
            return
        log.info("column tags: the tags of %d origin datasets propagated anew", origins.count())
        rows = self._propagate_tags(self._tag_seeds(origins))
        self._put("column_tags", rows, origins.withColumnRenamed("dataset_id", "origin_dataset_id"))
        self._report_tag_rules()

    def _tag_settings_changed(self) -> bool:
        """Whether the last ``build_state`` commit recorded other ``[tags]`` settings (or none)."""
        summary = last_state_summary(self.settings)
        recorded = None if summary is None else summary.get(TAGS_PROPERTY)
        return recorded != self.settings.tags.fingerprint()

    def _tag_seeds(self, datasets: DataFrame | None) -> DataFrame:
        """The seeds of every dataset, or of ``datasets`` (ids) only."""
        rules = {name: (r.pattern, r.tag, r.value) for name, r in self.settings.tags.rules.items()}
        edges = self.table("column_edges")
        if datasets is None:
            return tags.tag_seeds(self.table("datasets"), edges, rules)
        ids = F.broadcast(datasets)
        near = edges.join(
            ids.withColumnRenamed("dataset_id", "source_dataset_id"), "source_dataset_id", "left_semi"
        ).unionByName(
            edges.join(
                ids.withColumnRenamed("dataset_id", "target_dataset_id"), "target_dataset_id", "left_semi"
            )
        )
        seeds = tags.tag_seeds(_within(self.table("datasets"), datasets), near, rules)
        return seeds.join(ids, "dataset_id", "left_semi")

    def _propagate_tags(self, seeds: DataFrame) -> DataFrame:
        """Rounds of :func:`tags.next_tags` from ``seeds``, each materialised, stopping once a round finds
        nothing (or at ``column_path_max_depth`` hops)."""
        edges = tags.tag_edges(self.table("column_edges"), self.settings.tags.stop_subtypes).localCheckpoint()
        frontier = seeds.select(*tags.TAG_COLUMNS).localCheckpoint()
        found = frontier
        for _ in range(self.settings.build.column_path_max_depth):
            frontier = tags.next_tags(frontier, found, edges).localCheckpoint()
            if frontier.isEmpty():
                break
            found = found.unionByName(frontier)
        return found

    def _report_tag_rules(self) -> None:
        """A warning for every ``[tags.rules]`` rule that matches no field of the lake (never silent)."""
        rules = self.settings.tags.rules
        if not rules:
            return
        matched = {
            row["rule"]
            for row in self.table("column_tags")
            .where((F.col("origin_kind") == tags.RULE) & (F.col("hops") == 0))
            .select("rule")
            .distinct()
            .collect()
        }
        for name in sorted(set(rules) - matched):
            log.warning("tag rule %s (pattern %r) matches no field in the lake", name, rules[name].pattern)

    def _fold_column_facets(
        self, new_mentions: DataFrame, aliases: DataFrame, relabel_targets: DataFrame, previous: int
    ) -> None:
        """Fold the range's column-lineage facets into the three facet tables: a facet seen before costs
        a fold of its times and its new runs; only facets new in this range are exploded. Targets a relabel
        changed are recomputed from all their mentions instead (ids resolved anew).

        A re-run of the range gives the same rows: the facet edges and runs of the range are replaced (tag
        ``RANGE`` = ``previous``), "new" means not seen in an earlier range, and the times fold by min/max.
        """
        relabel = [r["dataset_id"] for r in relabel_targets.collect()]
        outputs = columns.facet_mentions(new_mentions, aliases)
        if relabel:
            outputs = outputs.where(~F.col("target_dataset_id").isin(relabel))
        delta = columns.distinct_facets(outputs).localCheckpoint()
        tag = F.lit(previous).cast("bigint")
        stored = self.table("column_facets")
        earlier = stored.where(F.col(RANGE) != previous).select("_facet")
        fresh = delta.join(earlier, "_facet", "left_anti")
        lake.overwrite_where(
            columns.facet_edges(fresh, aliases, self.rules).withColumn(RANGE, tag),
            self.t("column_facet_edges"),
            RANGE,
            previous,
        )
        known_runs = (
            self.table("column_facet_runs").where(F.col(RANGE) != previous).select("_facet", "run_id")
        )
        lake.overwrite_where(
            columns.facet_runs(outputs)
            .join(known_runs, ["_facet", "run_id"], "left_anti")
            .withColumn(RANGE, tag),
            self.t("column_facet_runs"),
            RANGE,
            previous,
        )
        old = stored.join(delta.select("_facet"), "_facet", "left_semi").alias("o")
        d = delta.alias("d")
        folded = d.join(old, "_facet", "left").select(
            *[F.col(f"d.{c}") for c in columns.FACET_KEY],
            "_facet",
            F.least("d.first_seen", "o.first_seen").alias("first_seen"),
            F.greatest("d.last_seen", "o.last_seen").alias("last_seen"),
            F.coalesce(F.col(f"o.{RANGE}"), tag).alias(RANGE),
        )
        lake.merge_by_key(folded, self.t("column_facets"), ["_facet"])
        if relabel:
            self._recompute_column_facets(aliases, relabel)
        for name in COLUMN_STATE_TABLES:
            self.step_done(name)

    def _column_edges(self, targets: DataFrame | None) -> DataFrame:
        """``column_edges`` from the facet tables: every edge, or the edges into ``targets``."""

        def state(name: str) -> DataFrame:
            rows = self.table(name)
            return (
                rows if targets is None else rows.join(F.broadcast(targets), "target_dataset_id", "left_semi")
            )

        return columns.edges_from_facets(
            state("column_facet_edges"), state("column_facets"), state("column_facet_runs")
        )

    def _recompute_column_facets(self, aliases: DataFrame, targets: list[str]) -> None:
        """The facet tables' rows of ``targets`` (canonical ids, old and new) recomputed from every mention
        of their names: rows of the ids are deleted, then the recomputed rows appended (a re-run of the
        range does both again)."""
        names = (
            aliases.where(F.col("dataset_id").isin(targets))
            .select(F.col("alias_namespace").alias("namespace"), F.col("alias_name").alias("name"))
            .distinct()
        )
        mentions = self.table("dataset_mentions").join(F.broadcast(names), ["namespace", "name"], "left_semi")
        outputs = columns.facet_mentions(mentions, aliases).persist(StorageLevel.MEMORY_AND_DISK)
        facets = columns.distinct_facets(outputs).persist(StorageLevel.MEMORY_AND_DISK)
        tag = F.lit(FULL_RANGE_START).cast("bigint")
        rows = {
            "column_facets": facets.select(*columns.FACET_COLUMNS),
            "column_facet_runs": columns.facet_runs(outputs),
            "column_facet_edges": columns.facet_edges(facets, aliases, self.rules),
        }
        listed = ", ".join("'" + t.replace("'", "''") + "'" for t in targets)
        for name, frame in rows.items():
            self.spark.sql(f"DELETE FROM {self.t(name)} WHERE target_dataset_id IN ({listed})")
            lake.append(frame.withColumn(RANGE, tag), self.t(name))
        facets.unpersist()
        outputs.unpersist()
        log.info("column facets: %d targets recomputed after a relabel", len(targets))

    def _paths_hold(self, targets: DataFrame) -> bool:
        """Whether ``column_paths`` is still what the column edges give, ``targets`` being the only targets
        whose edges this build rewrote.

        The paths depend on the edges only through each (target column, source column) pair's smallest job
        name and whether any of its edges is DIRECT (:func:`columns.next_column_paths` extends a path by the
        smallest job of a pair first), and that is exactly the 1-hop rows of ``column_paths``. So the stored
        1-hop rows of the targets are compared with those the edges give now: not the edges before this
        build's rewrite, which a killed earlier run of the same range may already have rewritten.
        """
        edges = self.table("column_edges").join(targets, "target_dataset_id", "left_semi")
        now = columns.column_paths(edges, max_depth=1)
        stored = (
            self.table("column_paths")
            .join(targets, "target_dataset_id", "left_semi")
            .where(F.col("hops") == 1)
            .select(*now.columns)
        )
        return now.exceptAll(stored).isEmpty() and stored.exceptAll(now).isEmpty()

    def all_dataset_tables(self) -> None:
        """Every dataset-level table recomputed from all mentions."""
        aliases = self.table("dataset_aliases")
        mentions = self.table("dataset_mentions")
        runs = self.table("runs")
        self._put("datasets", model.datasets(mentions, aliases))
        self._put("dataset_schemas", model.dataset_schemas(mentions, aliases))
        self._put("run_io", model.run_io(mentions, aliases))
        self._put("quality_results", model.quality_results(mentions, aliases))
        self._put("quality_metrics", model.quality_metrics(mentions, aliases))
        self._put(
            "job_edges", model.job_edges(self.table("run_io"), runs, model.static_io(mentions, aliases))
        )
        self._put("dataset_edges", model.dataset_edges(self.table("job_edges")))
        self._summaries(runs)
        outputs = columns.facet_mentions(mentions, aliases)
        facets = columns.distinct_facets(outputs).persist(StorageLevel.DISK_ONLY)
        tag = F.lit(FULL_RANGE_START).cast("bigint")
        self._put("column_facets", facets.select(*columns.FACET_COLUMNS).withColumn(RANGE, tag))
        self._put("column_facet_runs", columns.facet_runs(outputs).withColumn(RANGE, tag))
        self._put(
            "column_facet_edges", columns.facet_edges(facets, aliases, self.rules).withColumn(RANGE, tag)
        )
        facets.unpersist()
        self._put("column_edges", self._column_edges(None))
        self._put("column_paths", self._column_paths(self.table("column_edges"), None))
        self._column_summary()
        self._put("column_tags", self._propagate_tags(self._tag_seeds(None)))
        self._report_tag_rules()

    def _column_summary(self) -> None:
        # Rewritten whole, like the other summaries: a column's downstream reach changes with any path below.
        self._put(
            "column_summary", columns.column_summary(self.table("column_edges"), self.table("column_paths"))
        )

    def _summaries(self, runs: DataFrame) -> None:
        # The job summary is rewritten whole in every mode: scoped to the touched jobs (with the jobs of every
        # still-running run and the neighbours of every changed edge), the tier-M incremental build ran out of
        # execution memory in it; whole, it takes about 5 s at 1M events.
        self._put("job_summary", model.job_summary(runs, self.table("job_edges")))
        self._put("dataset_summary", self._dataset_summary(runs, None))

    def _dataset_summary(self, runs: DataFrame, datasets: DataFrame | None) -> DataFrame:
        """``dataset_summary`` rows of every dataset, or of ``datasets`` (ids) from their rows only."""
        edges = self.table("dataset_edges")
        if datasets is not None:
            # The edges into and out of the datasets (an edge between two of them comes twice: the summary
            # counts distinct ends).
            edges = edges.join(
                datasets.withColumnRenamed("dataset_id", "target_dataset_id"),
                "target_dataset_id",
                "left_semi",
            ).unionByName(
                edges.join(
                    datasets.withColumnRenamed("dataset_id", "source_dataset_id"),
                    "source_dataset_id",
                    "left_semi",
                )
            )
        return model.dataset_summary(
            _within(self.table("datasets"), datasets),
            _within(self.table("job_edges"), datasets),
            edges,
            _within(self.table("run_io"), datasets),
            runs,
            _within(self.table("dataset_schemas"), datasets),
        )

    def _put(
        self, name: str, frame: DataFrame, scope: DataFrame | None = None, prune: lake.Prune | None = None
    ) -> None:
        """Write a whole table (no scope), or replace its rows in ``scope`` (an empty scope leaves the table
        as it is, without the MERGE's jobs). A table keyed by run gets its partition column, and its scoped
        write reads only the partitions of the scope's runs (``prune``, else found from the scope)."""
        partitioned = name in RUN_PARTITIONED
        if partitioned:
            frame = _with_run_part(frame)
        if scope is None:
            lake.replace_table(frame, self.t(name), model.RUN_PART if partitioned else None)
        else:
            scope = scope.localCheckpoint()
            if not scope.isEmpty():
                if partitioned and prune is None:
                    prune = self._run_parts(name, scope)
                lake.replace_in_scope(self.spark, frame, self.t(name), ROW_KEYS[name], scope, prune)
        self.step_done(name)

    def _run_parts(self, name: str, runs: DataFrame) -> lake.Prune:
        """The partitions of a run-partitioned table that hold the rows of ``runs`` (a ``run_id`` column),
        as the literal predicate its scoped write carries (one small Spark job: the ids are materialised)."""
        part = model.run_part(F.col("run_id"))
        values = tuple(
            sorted(row[0] for row in runs.select(part.alias("p")).distinct().collect() if row[0] is not None)
        )
        log.info("%s: the write reads %d partitions (%s)", name, len(values), _span(values))
        return lake.Prune(model.RUN_PART, values)

    # -- steps shared by the modes -------------------------------------------------------------------
    def liveness(self, runs: DataFrame) -> DataFrame:
        build = self.settings.build
        heartbeats = (
            self.table("jobs")
            .where(F.col("median_gap_seconds").isNotNull())
            .select(*JOB_KEY, "median_gap_seconds", "gap_count")
        )
        return model.run_liveness(
            runs,
            heartbeats,
            self.now,
            floor_seconds=build.liveness_floor_seconds,
            multiplier=build.liveness_multiplier,
            overrides=build.liveness_overrides or None,
        )

    def _settle(self, labels: DataFrame, edges: DataFrame, rounds: int | None = None) -> DataFrame:
        """Min-label propagation with each round materialised, stopping at the first round that changes no
        label (real components are 2-3 names across, so a few rounds instead of all of them)."""
        limit = self.settings.build.alias_max_iterations if rounds is None else rounds
        for done in range(1, limit + 1):
            nxt = model.propagate_labels(labels, edges).localCheckpoint()
            settled = model.labels_changed(labels, nxt).isEmpty()
            labels = nxt
            if settled:
                log.info("dataset aliases: labels settled after %d rounds", done)
                break
        return labels

    def _aliases(self, mentions: DataFrame, rules: list[tuple[str, str]], rounds: int) -> DataFrame:
        """:func:`model.dataset_aliases` computed the way the build does (rounds materialised, stopping once
        settled)."""
        graph = model.alias_graph(mentions, rules)
        labels = self._settle(graph.labels.localCheckpoint(), graph.edges.localCheckpoint(), rounds)
        return model.resolve_aliases(graph, labels)

    def _column_paths(self, edges: DataFrame, targets: DataFrame | None) -> DataFrame:
        """Breadth-first rounds over the column edges (:func:`columns.next_column_paths`), each round's new
        pairs materialised, stopping once a round finds none (or at ``column_path_max_depth``); with
        ``targets``, only the paths into those datasets."""
        max_depth = self.settings.build.column_path_max_depth
        seeds = edges if targets is None else edges.join(targets, "target_dataset_id", "left_semi")
        frontier = columns.column_paths(seeds, max_depth=1).localCheckpoint()
        found = frontier
        for _ in range(1, max_depth):
            frontier = columns.next_column_paths(frontier, found, edges).localCheckpoint()
            if frontier.isEmpty():
                break
            found = found.unionByName(frontier)
        return found


def _few(keys: DataFrame, source: str, column: str, limit: int = RUN_FILTER_LIMIT) -> Column | None:
    """``column IN (...)`` of the values of ``keys``' column ``source`` when there are at most ``limit`` of
    them (none: a filter that keeps nothing), else None. One small Spark job: the values are collected."""
    values = keys.where(F.col(source).isNotNull()).select(source).distinct()
    found = [row[0] for row in values.limit(limit + 1).collect()]
    if len(found) > limit:
        return None
    return F.col(column).isin(found) if found else F.lit(False)


def _of_runs(
    frame: DataFrame, runs: DataFrame, column: str = "run_id", limit: int = RUN_FILTER_LIMIT
) -> DataFrame:
    """The rows of ``frame`` whose ``column`` is a run id of ``runs``: a broadcast semi-join, after the
    literal filter of :func:`_few` when the runs are at most ``limit`` (what lets Iceberg skip row groups)."""
    few = _few(runs, "run_id", column, limit)
    if few is not None:
        frame = frame.where(few)
    return frame.join(F.broadcast(runs.select(F.col("run_id").alias(column))), column, "left_semi")


def _of_jobs(frame: DataFrame, jobs: DataFrame, few: Column | None) -> DataFrame:
    """The rows of ``frame`` of the jobs of ``jobs`` (:data:`JOB_KEY` columns): a broadcast semi-join, after
    ``few`` (:func:`_few` of the jobs' names) when they are few, which lets Iceberg skip row groups (a
    touched job's run_io rows at tier M: 1.8 s as a join alone, 0.65 s with the list)."""
    if few is not None:
        frame = frame.where(few)
    return frame.join(F.broadcast(jobs.select(*JOB_KEY)), JOB_KEY, "left_semi")


def _with_run_part(frame: DataFrame) -> DataFrame:
    """``frame`` (with a ``run_id``) with its run partition column, the same whether the frame had it."""
    return frame.withColumn(model.RUN_PART, model.run_part(F.col("run_id")))


def _span(values: tuple[int, ...]) -> str:
    """A short text of partition values for a log line: days as dates, hash buckets counted."""
    days = [v for v in values if v >= 0]
    buckets = len(values) - len(days)
    text = []
    if days:
        first, last = (date(1970, 1, 1) + timedelta(days=d) for d in (days[0], days[-1]))
        text.append(f"days {first} to {last}" if first != last else f"day {first}")
    if buckets:
        text.append(f"{buckets} hash buckets")
    return ", ".join(text) or "none"


def _aware(now: datetime) -> datetime:
    # A naive datetime is UTC (as :func:`model.run_liveness` reads it), never the local zone.
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def carried_over(old: dict[str, DataFrame], new_facts: DataFrame) -> dict[str, DataFrame]:
    """Of the old extracted rows (``event_facts``, ``dataset_mentions``), those of raw rows the new facts no
    longer hold, by the raw row's :data:`COORDINATES` (every copy of a replayed event is a row of its own).

    Retention came with the coordinates: an extracted form without them was re-extracted by the first
    build of this version, before any event could be retired."""
    held = new_facts.select(*COORDINATES)
    return {name: rows.join(held, list(COORDINATES), "left_anti") for name, rows in old.items()}


def _within(frame: DataFrame, datasets: DataFrame | None) -> DataFrame:
    return frame if datasets is None else frame.join(datasets, "dataset_id", "left_semi")


def _label() -> Column:
    return F.struct(F.col("rank"), F.col("node_namespace").alias("ns"), F.col("node_name").alias("n")).alias(
        "label"
    )


def _self_loop() -> Column:
    return (F.col("src_ns") == F.col("dst_ns")) & (F.col("src_n") == F.col("dst_n"))


def _self_loops(nodes: DataFrame) -> DataFrame:
    return nodes.select(
        F.col("node_namespace").alias("src_ns"),
        F.col("node_name").alias("src_n"),
        F.col("node_namespace").alias("dst_ns"),
        F.col("node_name").alias("dst_n"),
    )


def _node_rows(initial: DataFrame, labels: DataFrame) -> DataFrame:
    """``alias_nodes`` rows: each node with its own rank and its component's dataset id."""
    return initial.select(*NODE_KEY, F.col("label.rank").alias("rank")).join(
        labels.select(*NODE_KEY, model.dataset_id(F.col("label.ns"), F.col("label.n")).alias("dataset_id")),
        NODE_KEY,
    )


def build_format() -> str:
    """A fingerprint of what this version extracts and builds (the extracted columns and the model's
    tables): a lake last built by a version with another fingerprint is not known to be up to date."""
    shape = "|".join(
        [
            ",".join(sorted(FACT_COLUMNS)),
            ",".join(sorted(model.MENTION_COLUMNS)),
            ",".join(MODEL_TABLES),
            *[f"{name}:{','.join(cols)}" for name, cols in sorted(MODEL_COLUMNS.items())],
        ]
    )
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def liveness_settings(settings: Settings) -> str:
    """The settings a run's liveness threshold is computed from, as one canonical string."""
    build = settings.build
    overrides = ",".join(f"{k}={float(v)!r}" for k, v in sorted((build.liveness_overrides or {}).items()))
    return f"floor={float(build.liveness_floor_seconds)!r};x={float(build.liveness_multiplier)!r};{overrides}"


def up_to_date(settings: Settings) -> int | None:
    """The raw table's current snapshot when the last build finished exactly there with this version's
    format (nothing to build), else None (something may be: the caller finds out the long way).

    Metadata only, through pyiceberg: the raw table's current snapshot and the summary of the last
    ``build_state`` commit (:data:`BUILT_SNAPSHOT_PROPERTY`). No Spark job, no lease: a few tens of
    milliseconds on the embedded catalog. A ``build_state`` commit without the summary (a lake built by an
    earlier version, or rewritten by a compaction) answers None."""
    from lineage.io.catalog import open_catalog

    catalog_settings = settings.catalog
    try:
        catalog = open_catalog(catalog_settings)
        _, namespace, name = catalog_settings.events_table.split(".")  # catalog.namespace.table
        current = catalog.load_table((namespace, name)).metadata.current_snapshot_id
    except Exception as exc:  # no such table, no catalog yet: the long way says what is missing
        log.debug("up-to-date check: %s", exc)
        return None
    summary = last_state_summary(settings, catalog)
    if current is None or summary is None:
        return None
    if (
        summary.get(MODE_PROPERTY) in FINISHED_MODES
        and summary.get(FORMAT_PROPERTY) == build_format()
        and summary.get(BUILT_SNAPSHOT_PROPERTY) == str(current)
    ):
        return int(current)
    return None


def last_state_summary(settings: Settings, catalog: Any = None) -> dict[str, str] | None:
    """The summary properties of ``build_state``'s current snapshot (the last build's commit), through
    pyiceberg (``catalog``, else one opened from the settings); None when there is no such table or
    commit yet."""
    from lineage.io.catalog import open_catalog

    try:
        catalog = catalog or open_catalog(settings.catalog)
        state = catalog.load_table((settings.catalog.lineage_namespace, STATE_TABLE)).current_snapshot()
    except Exception as exc:  # no such table, no catalog yet
        log.debug("build_state summary: %s", exc)
        return None
    if state is None:
        return None
    return dict(state.summary.additional_properties) if state.summary is not None else {}


def has_new_events(spark: SparkSession, settings: Settings) -> bool:
    """Whether a build would do anything: raw snapshots after the last build's, an unfinished build, or an
    extracted form to (re)build. Read-only and cheap: what a continuous build asks before it takes the
    lease. Usually answered from metadata alone (:func:`up_to_date`); otherwise two metadata queries."""
    if up_to_date(settings) is not None:
        return False
    build = _Build(spark, settings, datetime.now(UTC))
    if not lake.table_exists(spark, build.raw):
        return False
    current = lake.current_snapshot_id(spark, build.raw)
    if current is None:
        return False
    state = build.last_state()
    return (
        state is None or state.full_pending or state.snapshot != current or not build.extracted_form_current()
    )


def build_lineage(
    spark: SparkSession,
    settings: Settings,
    *,
    full_refresh: bool = False,
    re_extract: bool = False,
    now: datetime | None = None,
    stop: StopRequest | None = None,
) -> BuildResult:
    """Bring ``lake.lineage.*`` up to date with ``lake.raw.events``.

    Args:
        spark: the session (catalog wired by :func:`lineage.spark.build_session`).
        settings: loaded settings (catalog names, liveness and alias rules).
        full_refresh: recompute every model table from the whole extracted form (no JSON parsing).
        re_extract: parse every raw event again into the extracted form first (after a change to what is
            extracted), then recompute everything.
        now: reference time for run liveness (default: the current time, UTC).
        stop: a stop request (:func:`lineage.stopping.stop_on_signals`), checked after every commit.

    Raises:
        BuildError: ``raw.events`` does not exist yet.
        LakeBusy: a maintenance (or another build) is writing the lineage tables (:mod:`lineage.io.lease`).
        JobStopped: a stop was requested; every table is as some commit left it, the lease is released,
            and the next build finishes the range.
    """
    if not (full_refresh or re_extract):
        # Nothing new (the usual answer of a frequent schedule): said from metadata, without the lease.
        started = time.monotonic()
        current = up_to_date(settings)
        if current is not None:
            log.info("no new raw snapshots since %s: nothing to build", current)
            reference = (now or datetime.now(UTC)).astimezone(UTC)
            return BuildResult("noop", current, current, 0, reference, time.monotonic() - started)
    with writer_lease(settings, "build"), stopped_during(stop, "a build step"):
        return _build_lineage(spark, settings, full_refresh, re_extract, now, stop)


def _build_lineage(
    spark: SparkSession,
    settings: Settings,
    full_refresh: bool,
    re_extract: bool,
    now: datetime | None,
    stop: StopRequest | None,
) -> BuildResult:
    started = time.monotonic()
    reference = (now or datetime.now(UTC)).astimezone(UTC)
    build = _Build(spark, settings, reference, stop)
    catalog = settings.catalog
    if not lake.table_exists(spark, build.raw):
        raise BuildError(f"{build.raw} does not exist: run the ingestion (jobs/ingest_events.py) first")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.{catalog.lineage_namespace}")
    current = lake.current_snapshot_id(spark, build.raw)
    state = None if re_extract else build.last_state()
    if state is not None and not build.extracted_form_current():
        log.warning("the extracted form predates what this version extracts: parsing every raw event again")
        state, re_extract = None, True
    previous = state.snapshot if state else None
    if current is None or (
        state is not None and previous == current and not (full_refresh or state.full_pending)
    ):
        log.info("no new raw snapshots since %s: nothing to build", previous)
        return BuildResult("noop", current, previous, 0, reference, time.monotonic() - started)

    events = None
    if state is None:
        # The extracted form is missing, unfinished or to be rebuilt: parse every raw event.
        mode = RE_EXTRACT if re_extract else FULL
        build.record(EXTRACT_PENDING, previous, None, 0)
        new_events = build.extract(None, current)
    else:
        assert previous is not None
        if not lake.snapshot_exists(spark, build.raw, previous):
            raise BuildError(
                f"raw snapshot {previous} of the last build is no longer in {build.raw} (its snapshots were "
                "expired outside jobs/maintain_lake.py), so the new events cannot be told apart: run "
                "`make build-reextract` (it keeps what retention retired)"
            )
        new_events = build.extract(previous, current) if previous != current else 0
        mode = FULL if full_refresh or state.full_pending else INCREMENTAL
    if mode == INCREMENTAL:
        assert previous is not None
        build.incremental(previous)
    else:
        # Marked first: a full recompute killed half-way is finished by whatever build runs next.
        build.record(FULL_PENDING, previous, current, new_events)
        events = build.full()
    build.record(mode, previous, current, new_events, last=True)
    seconds = time.monotonic() - started
    log.info(
        "%s build: %d events extracted, up to raw snapshot %s, in %.1f s", mode, new_events, current, seconds
    )
    return BuildResult(
        mode, current, previous, new_events, reference, seconds, events, build.running_revisited
    )
