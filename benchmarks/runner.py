"""The benchmark run of one tier: broker, workload, every stage measured, results to JSON.

Stages (``--stages``, default all), each job a fresh process measured from outside (wall time, peak memory of
its process tree) and from inside (:mod:`benchmarks.stage`: JVM start vs. the measured work):

``ingest``
    per repetition: the read-only bound (the Kafka source alone into the ``noop`` sink), the parse-only bound
    (Kafka source + envelope parsing into the ``noop`` sink), then the real ingestion (``run_ingest``,
    ``availableNow``) into a fresh catalog. All three read the whole topic.
``build``
    full build (``--full-refresh``) of the last ingestion's lake, repeated; as many re-extraction builds
    (``--re-extract``: every raw event parsed again, then everything rebuilt); then per repetition one more
    1% slice of the workload (``delta<k>``) is produced, ingested, and built incrementally; last the
    ``history`` delta (:data:`benchmarks.workload.HISTORY_EVENTS` messages, the same on every tier) is
    produced, ingested once and built incrementally, repeated on a copy of the lake as it was before (and,
    with ``history-warm``, built again in one session); then one event that tags a source column ``pii``
    (``tagged``: :meth:`benchmarks.workload.Workload.tagged_source`), ingested once and built incrementally,
    repeated likewise, with how far the tag reached; last a build with nothing new, repeated (``noop``).
``queries``
    :mod:`benchmarks.queries`: ``lineage upstream/downstream`` at depth 1, 3 and 10 from a hub and a leaf
    dataset of the built lake, every run a new CLI process.
``freshness``
    the ingestion with the configured (default) trigger on an empty topic; probe events are produced at
    random moments and the time until the Iceberg commit that makes each visible in ``raw.events`` is taken
    from the snapshot's commit timestamp (pyiceberg).
``lineage-freshness``
    on this tier's lake (built by the build stage), the ingestion (configured trigger) and the continuous
    build (a check every :data:`LINEAGE_BUILD_EVERY_S`) run together while probe events are produced at
    random moments (:data:`LINEAGE_PROBE_GAP_S` apart on average); each probe's time until ``lineage.runs``
    holds its run, and until the build that committed it finished (:mod:`benchmarks.freshness`).
``rentgen``
    the side by side with Data.Rentgen on a Kafka 3.9 broker (:mod:`benchmarks.rentgen`).

The results go to ``var/bench/results/<tier>.json`` (rewritten after every stage, so a failed run keeps
what it measured) and a copy under ``var/bench/results/history/``. A stage left out of ``--stages`` keeps
its result from the tier's previous results file (same seed and tier), marked with the start of the run
that measured it; ``--seed-lake`` starts from a kept lake, so ``--stages build,queries`` needs no new
ingestion. The seed lake must be one kept after the ingest stage alone (``--stages ingest --keep``): the
build stage appends the deltas and the history delta to the new topic, after its base part, and ingests
them with the lake's checkpoint; a lake that already ingested them is refused at the start (``--stages
queries`` alone takes any kept lake, built ones too).

This module is the top of the harness's import graph (a DAG, checked by tests/unit/test_bench_imports.py):
what the stage modules need of a tier's run is :class:`benchmarks.tier.TierContext`, which
:class:`TierRun` extends; only ``__main__`` imports this module.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import measure
from benchmarks.freshness import measure_freshness, measure_lineage_freshness
from benchmarks.queries import QueryContext, run_queries
from benchmarks.read_api import run_read_api
from benchmarks.rentgen import side_by_side
from benchmarks.tier import (
    CLUSTER_STAGES,
    PARTITIONS,
    RESULTS_SCHEMA,
    BenchConfig,
    Lake,
    StageError,
    TierContext,
    utc_now,
)
from benchmarks.workload import (
    DELTA_PARTS,
    HISTORY_EVENTS,
    Message,
    Workload,
    append_spool,
    produce,
    read_spool,
)
from lineage.cluster.stack import LocalStack, deep_merge
from lineage.cluster.submit import submit_jars
from lineage.ingest.stream import TOPIC_IDS_FILE
from lineage.io.local_kafka import LocalKafka, create_topic, free_port
from lineage.settings import LocalClusterSettings, load_settings, parse_trigger

log = logging.getLogger(__name__)

# The lineage-freshness stage: how often the continuous build checks for new raw snapshots, and the mean
# time between two probe events (20 probes: about three and a half minutes of producing).
LINEAGE_BUILD_EVERY_S = 5.0
LINEAGE_PROBE_GAP_S = 10.0

# What the history delta has in common between tiers (their estates differ, so its bytes do too).
HISTORY_SAME = (
    f"{HISTORY_EVENTS:,} messages; the same seed, run start times and run kinds (batch or Flink) on every "
    "tier; about the same event mix, the same noise rates (duplicates, late, malformed); runs of the "
    "tier's own jobs"
)


@dataclass
class TierRun(TierContext):
    """Everything of one tier's benchmark run: the stages in order, results kept from earlier runs."""

    previous_stages: dict[str, Any] = field(default_factory=dict)
    stack: LocalStack | None = None
    cluster_settings: dict[str, Any] | None = None

    def _previous_stages(self) -> dict[str, Any]:
        """Stage results of the last run of this tier with the same seed (kept for stages not run now)."""
        try:
            previous = json.loads(self.results_file.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        if previous.get("seed") != self.config.seed or previous.get("tier_spec") != vars(self.tier):
            return {}
        stages = previous.get("stages", {})
        for result in stages.values():
            result.setdefault("measured_in_run_started_at", previous.get("started_at"))
            result.setdefault("measured_in_run_label", previous.get("label", ""))
            result.setdefault("measured_in_run_repeat", previous.get("repeat"))
        return {k: v for k, v in stages.items() if v.get("status") == "ok"}

    def lake(self, root: Path) -> Lake:
        return Lake(root, self.cluster_settings)

    def stage_result(self, name: str, fn: Callable[[], dict[str, Any]]) -> None:
        if self.stack is not None and name not in CLUSTER_STAGES:
            self.results["stages"][name] = {"status": "not run", "reason": "measured on the local stack only"}
            return
        if name not in self.config.stages:
            kept = self.previous_stages.get(name)
            self.results["stages"][name] = kept or {"status": "not run", "reason": "not in --stages"}
            return
        log.info("[%s] stage %s", self.tier_name, name)
        started = time.monotonic()
        try:
            outcome = fn()
        except Exception as exc:
            log.error("[%s] stage %s failed: %s", self.tier_name, name, exc)
            outcome = failure(exc)
        outcome.setdefault("status", "ok")
        outcome["stage_seconds"] = round(time.monotonic() - started, 1)
        self.results["stages"][name] = outcome
        self.save()

    # -- the run --------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.previous_stages = self._previous_stages()
        if self.work.exists():
            shutil.rmtree(self.work)
        self.logs.mkdir(parents=True)
        self.results = {
            "schema": RESULTS_SCHEMA,
            "tier": self.tier_name,
            "tier_spec": vars(self.tier),
            "seed": self.config.seed,
            "repeat": self.config.repeat,
            "label": self.config.label,
            "command": self.config.command,
            "started_at": utc_now(),
            "load_average_start": measure.load_average(),
            "machine": measure.machine(),
            "versions": versions(),
            "settings": {
                "spark_master": self.settings.spark.master or "local[*]",
                "driver_memory": self.settings.spark.driver_memory,
                "shuffle_partitions": self.settings.spark.shuffle_partitions,
                "default_trigger": self.settings.ingest.trigger,
                "max_offsets_per_trigger": self.settings.ingest.max_offsets_per_trigger,
                "topic_partitions": PARTITIONS,
                "reference_now": self.reference_now,
            },
            "stages": {},
        }
        self.save()
        try:
            if self.config.stack == "cluster":
                self.start_stack()
            broker = LocalKafka(
                data_dir=self.work / "kafka",
                jars_dir=self.settings.local_kafka.jars_dir,
                port=free_port(),
                controller_port=free_port(),
                max_message_bytes=self.max_message_bytes,
                partitions=PARTITIONS,
                heap=self.settings.local_kafka.heap,
            )
            try:
                broker.start()
                self.results["workload"] = self.load(broker)
                self.save()
                lake = self.lake(self.work / "lake")
                if self.config.seed_lake is not None:
                    # A lake this tier's ingestion landed earlier (raw tables + checkpoint), e.g. kept with
                    # --keep: the build and query stages run on it without ingesting again.
                    shutil.copytree(self.config.seed_lake, lake.root)
                    # This run's broker holds the same base part under a topic of another id: the
                    # checkpoint's offsets fit it, by construction, so its record of the old id goes.
                    (lake.checkpoint / TOPIC_IDS_FILE).unlink(missing_ok=True)
                    self.results["seed_lake"] = str(self.config.seed_lake)
                    if "build" in self.config.stages:
                        check_seed_lake(lake, self.topic, self.results["workload"]["messages"])
                self.stage_result("ingest", lambda: self.ingest_stage(broker, lake))
                self.stage_result("build", lambda: self.build_stage(broker, lake))
                self.stage_result("freshness", lambda: self.freshness_stage(broker))
                self.stage_result("lineage-freshness", lambda: self.lineage_freshness_stage(broker, lake))
            finally:
                broker.stop()
            # The CLI needs no broker: its queries run once the broker (and its flush of the topic) is gone.
            self.stage_result("queries", lambda: self.queries_stage(broker, lake))
            self.stage_result("rentgen", self.rentgen_stage)
        finally:
            if self.stack is not None:
                self.stack.stop()
            self.save()
            self._copy_to_history()
            if not self.config.keep:
                shutil.rmtree(self.work / "lake", ignore_errors=True)
                shutil.rmtree(self.work / "kafka", ignore_errors=True)
                for spool in self.work.glob("*.spool"):
                    spool.unlink()
        return self.results

    def start_stack(self) -> None:
        """A local scale-out stack in the work folder on free ports; the jobs' settings for it.

        The stage processes stay ``python -m benchmarks.stage``: their SparkSession connects to the
        standalone master in client mode (what spark-submit's client mode does too), with the jars of
        ``[spark] submit_jars`` as ``spark.jars``; the object store's keys reach them as AWS_* variables.
        """
        import tomllib

        ports = [free_port() for _ in range(5)]
        local = LocalClusterSettings(
            data_dir=self.work / "stack",
            jars_dir=self.settings.local_cluster.jars_dir,
            workers=self.config.workers,
            worker_cores=self.config.worker_cores,
            worker_memory=self.config.worker_memory,
            master_port=ports[0],
            master_ui_port=ports[1],
            history_port=ports[2],
            s3_port=ports[3],
            catalog_port=ports[4],
            worker_ui_port=free_port(),  # and the next ones: a clash fails the start loudly
        )
        self.stack = LocalStack(local)
        self.stack.start()
        os.environ.update(self.stack.credentials().env())  # inherited by every stage process
        base = tomllib.loads((Path(__file__).resolve().parent.parent / "conf" / "cluster.toml").read_text())
        settings = deep_merge(
            {k: base[k] for k in ("catalog", "spark", "ingest")}, self.stack.client_settings()
        )
        jars = submit_jars(load_settings(spark=settings["spark"]))
        settings["spark"]["conf"]["spark.jars"] = ",".join(jars)
        settings["spark"]["jars_dir"] = ""
        # One executor per worker, as large as the worker (the tiers' data is larger than the demo's).
        settings["spark"]["conf"]["spark.executor.memory"] = self.config.worker_memory
        settings["spark"]["conf"]["spark.executor.cores"] = str(self.config.worker_cores)
        settings["spark"]["driver_memory"] = "2g"
        settings["spark"]["shuffle_partitions"] = 2 * self.config.workers * self.config.worker_cores
        self.cluster_settings = settings
        self.results["settings"].update(
            spark_master=self.stack.master_url,
            driver_memory=settings["spark"]["driver_memory"],
            shuffle_partitions=settings["spark"]["shuffle_partitions"],
            stack={
                "workers": local.workers,
                "worker_cores": local.worker_cores,
                "worker_memory": local.worker_memory,
                "catalog": "Iceberg REST catalog server (JdbcCatalog on SQLite)",
                "object_store": "S3Proxy",
            },
        )
        self.save()

    def spark_stage(self, stage: str, label: str, overrides: dict[str, Any], *extra: str) -> dict[str, Any]:
        """:meth:`TierContext.spark_stage`; on a cluster stack also the executors' task time of the job
        (from the stack's history server), which the report's model for N workers starts from."""
        data = super().spark_stage(stage, label, overrides, *extra)
        if self.stack is not None and data.get("app_id"):
            try:
                data["executors"] = self.stack.application_executors(data["app_id"])
            except Exception as exc:  # the timings stand without it; the report says the model lacks it
                log.warning("[%s] %s: no executor summary: %s", self.tier_name, label, exc)
                data["executors_error"] = str(exc)
        return data

    def _copy_to_history(self) -> None:
        history = self.results_file.parent / "history"
        history.mkdir(parents=True, exist_ok=True)
        stamp = self.results["started_at"].replace(":", "").replace("-", "")[:15]
        shutil.copy(self.results_file, history / f"{self.tier_name}-{stamp}.json")

    def load(self, broker: LocalKafka) -> dict[str, Any]:
        """Produce the base part into the topic; spool the delta parts for the incremental builds."""
        create_topic(broker.bootstrap_servers, self.topic, PARTITIONS, self.max_message_bytes)
        started = time.monotonic()
        stream = self.workload.stream()
        rest: list[tuple[Message, int]] = []

        def base() -> Iterator[Message]:
            for message, part in stream:
                if part:
                    rest.append((message, part))
                    return
                yield message

        counts = produce(broker.bootstrap_servers, self.topic, base(), self.max_message_bytes)
        produced_s = time.monotonic() - started
        paths = {k: self.work / f"delta{k}.spool" for k in range(1, DELTA_PARTS + 1)}
        deltas = {f"delta{k}": 0 for k in paths}
        with contextlib.ExitStack() as files:
            outs = {k: files.enter_context(path.open("wb")) for k, path in paths.items()}
            for message, part in itertools.chain(rest, stream):
                append_spool(outs[part], message)
                deltas[f"delta{part}"] += 1
        shape = describe_estate(self.workload)
        log.info(
            "[%s] workload: %s messages produced in %.1f s",
            self.tier_name,
            f"{counts['messages']:,}",
            produced_s,
        )
        return {**counts, **shape, "deltas": deltas, "generate_and_produce_s": round(produced_s, 1)}

    # -- ingest ---------------------------------------------------------------------------------------
    def ingest_stage(self, broker: LocalKafka, lake: Lake) -> dict[str, Any]:
        read_runs, parse_runs, ingest_runs = [], [], []

        def noop_sink_run(stage: str, i: int) -> dict[str, Any]:
            """The read-only or parse-only bound: the topic into the ``noop`` sink, a scratch checkpoint."""
            scratch = self.lake(self.work / f"{stage}-{i}")
            overrides = scratch.overrides(broker.bootstrap_servers, self.topic)
            run = self.spark_stage(stage, f"{stage}-{i}", overrides, "--checkpoint", str(scratch.checkpoint))
            shutil.rmtree(scratch.root, ignore_errors=True)
            return run

        for i in range(1, self.config.repeat + 1):
            read_runs.append(noop_sink_run("read", i))
            parse_runs.append(noop_sink_run("parse", i))
            target = lake if i == self.config.repeat else self.lake(self.work / f"ingest-{i}")
            ingest_runs.append(
                self.spark_stage(
                    "ingest", f"ingest-{i}", target.overrides(broker.bootstrap_servers, self.topic)
                )
            )
            if target is not lake:
                shutil.rmtree(target.root, ignore_errors=True)
        for run in (*read_runs, *parse_runs):
            run["messages_per_s"] = run["rows_in"] / run["work_s"]
        for run in ingest_runs:
            run["messages_per_s"] = run["rows_in"] / run["work_s"]
            run["events_per_s"] = run["landed"] / run["work_s"]
            run["events_per_s_with_startup"] = run["landed"] / run["wall_s"]
        parse_rate = measure.summarize(r["messages_per_s"] for r in parse_runs)
        ingest_rate = measure.summarize(r["messages_per_s"] for r in ingest_runs)
        return {
            "read_only": {
                "runs": read_runs,
                "messages_per_s": measure.summarize(r["messages_per_s"] for r in read_runs),
                "peak_mib": measure.summarize(r["peak_mib"] for r in read_runs),
            },
            "parse_only": {
                "runs": parse_runs,
                "messages_per_s": parse_rate,
                "startup_s": measure.summarize(r["startup_s"] for r in parse_runs),
                "peak_mib": measure.summarize(r["peak_mib"] for r in parse_runs),
            },
            "ingest": {
                "runs": ingest_runs,
                "messages_per_s": ingest_rate,
                "events_per_s": measure.summarize(r["events_per_s"] for r in ingest_runs),
                "events_per_s_with_startup": measure.summarize(
                    r["events_per_s_with_startup"] for r in ingest_runs
                ),
                "startup_s": measure.summarize(r["startup_s"] for r in ingest_runs),
                "peak_mib": measure.summarize(r["peak_mib"] for r in ingest_runs),
            },
            "ratio_to_parse_only": ingest_rate["median"] / parse_rate["median"],
        }

    # -- build ----------------------------------------------------------------------------------------
    def build_stage(self, broker: LocalKafka, lake: Lake) -> dict[str, Any]:
        if not lake.on_cluster and not (lake.root / "catalog.db").exists():
            raise StageError("no ingested lake: the build stage needs the ingest stage")
        overrides = lake.overrides(broker.bootstrap_servers, self.topic)
        now = ["--now", self.reference_now]
        # The lake's first build extracts every event (what --re-extract measures below); the full refreshes
        # after it start from the extracted form, which is what "full build" means here.
        first = self.spark_stage("build", "build-first", overrides, *now)
        parts = self.config.build_parts
        skipped = {"status": "skipped", "reason": "not in --build-parts"}
        if "full" in parts:
            full = [
                self.spark_stage("build", f"build-full-{i}", overrides, "--full-refresh", *now)
                for i in range(1, self.config.repeat + 1)
            ]
            full_summary = full_builds(full)
        else:
            # The shares of a full build are then taken of the first build (extraction included).
            full_summary = {**full_builds([first]), "from": "build-first"}
        # A failed re-extraction (e.g. a build API without it) is reported and the stage goes on: its
        # process fails before it touches the lake when the keyword is unknown.
        if "re-extract" not in parts:
            re_extract: dict[str, Any] = skipped
        elif self.config.repeat == 1:
            # One run only (a large tier): the lake's first build already parsed every event and recomputed
            # everything, the same code path as --re-extract; it is reported as that run.
            re_extract = {**full_builds([first]), "from": "build-first"}
        else:
            re_extract = self.part(
                "re-extraction builds",
                lambda: full_builds(
                    [
                        self.spark_stage("build", f"build-re-extract-{i}", overrides, "--re-extract", *now)
                        for i in range(1, self.config.repeat + 1)
                    ]
                ),
            )
        increments, delta_ingests = [], []
        for k in range(1, min(self.config.repeat, DELTA_PARTS) + 1 if "incremental" in parts else 1):
            spool = self.work / f"delta{k}.spool"
            produce(broker.bootstrap_servers, self.topic, read_spool(spool), self.max_message_bytes)
            delta_ingests.append(self.spark_stage("ingest", f"ingest-delta{k}", overrides))
            increments.append(self.incremental_build(f"build-incremental-{k}", overrides, now))
        result = {
            "first": first,
            "full": full_summary,
            "re_extract": re_extract,
            "incremental": (
                incremental_builds(increments, delta_ingests, full_summary["seconds"])
                if increments
                else skipped
            ),
        }
        self.results["stages"]["build"] = {**result, "status": "running"}
        self.save()
        result["history"] = (
            self.part(
                "history builds", lambda: self.history_builds(broker, lake, now, full_summary["seconds"])
            )
            if "history" in parts
            else skipped
        )
        result["tagged"] = (
            self.part(
                "tagged source column builds",
                lambda: self.tagged_builds(broker, lake, now, full_summary["seconds"]),
            )
            if "tagged" in parts
            else skipped
        )
        result["noop"] = (
            self.part("builds with nothing new", lambda: self.noop_builds(overrides, now))
            if "noop" in parts
            else skipped
        )
        return result

    def noop_builds(self, overrides: dict[str, Any], now: list[str]) -> dict[str, Any]:
        """A build with nothing new since the last one, repeated: what it costs after the session is up."""
        runs = []
        for i in range(1, self.config.repeat + 1):
            run = self.spark_stage("build", f"build-noop-{i}", overrides, *now)
            if run.get("mode") != "noop":
                raise StageError(
                    f"build-noop-{i} ran as {run.get('mode')!r}, not as a build with nothing new"
                )
            runs.append(run)
        return {"runs": runs, "seconds": measure.summarize(r["work_s"] for r in runs)}

    def incremental_build(self, label: str, overrides: dict[str, Any], now: list[str]) -> dict[str, Any]:
        run = self.spark_stage("build", label, overrides, *now)
        if run.get("mode") != "incremental":
            raise StageError(f"{label} ran as {run.get('mode')!r}, not incremental")
        return run

    def history_builds(
        self, broker: LocalKafka, lake: Lake, now: list[str], full_s: dict[str, Any]
    ) -> dict[str, Any]:
        """The history delta (:meth:`Workload.history`, the same size on every tier), ingested once and built
        incrementally ``repeat`` times, the lake put back as it was before the first build between two runs
        (a copy). With the ``history-warm`` part, then once more in one process that builds it again
        ``repeat`` times, warm (:mod:`benchmarks.stage`'s ``--again``)."""
        overrides = lake.overrides(broker.bootstrap_servers, self.topic)
        produced = produce(
            broker.bootstrap_servers, self.topic, self.workload.history(), self.max_message_bytes
        )
        ingest = self.spark_stage("ingest", "ingest-history", overrides)
        runs, warm, copy_s, _ = self._delta_builds(lake, overrides, now, "history")
        return {
            **incremental_builds(runs, [ingest], full_s),
            "warm": warm,
            "messages": HISTORY_EVENTS,
            "produced": produced,
            "same_on_every_tier": HISTORY_SAME,
            "lake_restored_between_runs": len(runs) > 1,
            "lake_copy_s": copy_s,
        }

    def _delta_builds(
        self,
        lake: Lake,
        overrides: dict[str, Any],
        now: list[str],
        delta: str,
        after_cold: Callable[[], Any] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any], float, Any]:
        """An ingested delta (``history``, ``tagged``) built incrementally ``repeat`` times
        (``build-<delta>-<i>``), the lake put back as it was before the first between two runs (one run on
        a cluster lake: it lives in the stack's catalog and bucket, with no copy to restore);
        ``after_cold`` then reads what the last of them made. With the ``<delta>-warm`` build part, the
        lake is put back once more and the delta built cold and ``repeat`` times again in one session.
        Returns the cold runs, the warm result, the seconds spent copying the lake for the cold runs, and
        ``after_cold``'s answer."""
        repeat = 1 if lake.on_cluster else self.config.repeat
        warm_part = f"{delta}-warm" in self.config.build_parts
        warm: dict[str, Any] = {"status": "skipped", "reason": "not in --build-parts"}
        copied: list[float] = []
        with self._kept_lake(lake, delta, repeat > 1 or warm_part, copied) as restore:
            runs = []
            for i in range(1, repeat + 1):
                if i > 1:
                    restore()
                runs.append(self.incremental_build(f"build-{delta}-{i}", overrides, now))
            seen = after_cold() if after_cold is not None else None
            if warm_part and lake.on_cluster:
                warm = {"status": "skipped", "reason": "a cluster lake is not restored between builds"}
            elif warm_part:
                restore()
                copied.pop()  # the warm run's restore is not one of the cold runs' copies
                warm = self.part(f"warm {delta} builds", lambda: self.warm_builds(overrides, now, delta))
        return runs, warm, round(sum(copied), 1), seen

    @contextlib.contextmanager
    def _kept_lake(
        self, lake: Lake, name: str, needed: bool, copied: list[float]
    ) -> Iterator[Callable[[], None]]:
        """A copy of the local lake as it is now (when ``needed`` and the lake is not on a cluster), and a
        function that puts the lake back to it; each copy's seconds are appended to ``copied``. The copy
        is deleted on the way out."""
        before = self.work / f"lake-before-{name}"
        shutil.rmtree(before, ignore_errors=True)

        def timed(fn: Callable[[], object]) -> None:
            started = time.monotonic()
            fn()
            copied.append(time.monotonic() - started)

        def restore() -> None:
            def back() -> None:
                shutil.rmtree(lake.root)
                shutil.copytree(before, lake.root)

            timed(back)

        try:
            if needed and not lake.on_cluster:
                timed(lambda: shutil.copytree(lake.root, before))
            yield restore
        finally:
            shutil.rmtree(before, ignore_errors=True)

    def tagged_builds(
        self, broker: LocalKafka, lake: Lake, now: list[str], full_s: dict[str, Any]
    ) -> dict[str, Any]:
        """One event that tags a source column (:meth:`Workload.tagged_source`: a new run whose input
        names one of its columns ``pii``), ingested once and built incrementally ``repeat`` times from the
        same lake (put back between runs); then what the last build made of it: the column_tags rows whose
        origin is that column (the columns the tag reached) and their longest path."""
        overrides = lake.overrides(broker.bootstrap_servers, self.topic)
        message, about = self.workload.tagged_source()
        produced = produce(broker.bootstrap_servers, self.topic, iter([message]), self.max_message_bytes)
        ingest = self.spark_stage("ingest", "ingest-tagged", overrides)
        reach = None if lake.on_cluster else (lambda: tag_reach(lake, about))
        runs, warm, copy_s, reached = self._delta_builds(lake, overrides, now, "tagged", reach)
        return {
            **incremental_builds(runs, [ingest], full_s),
            "warm": warm,
            "tagged": about,
            "reached": reached,
            "produced": produced,
            "lake_copy_s": copy_s,
        }

    def warm_builds(
        self, overrides: dict[str, Any], now: list[str], delta: str = "history"
    ) -> dict[str, Any]:
        """A delta (the history, or the tagged event) built cold, then ``repeat`` times again in the same
        session (warm)."""
        label = f"build-{delta}-warm"
        run = self.spark_stage("build", label, overrides, *now, "--again", str(self.config.repeat))
        modes = {run.get("mode"), *run.get("again_modes", [])}
        if modes != {"incremental"}:
            raise StageError(f"{label} ran as {sorted(map(str, modes))}, not incremental only")
        return {
            "run": run,
            "cold_s": run["work_s"],
            "seconds": measure.summarize(run["again_s"]),
        }

    def part(self, what: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """One measurement of a stage that may fail without failing the stage: its error is its result."""
        try:
            return fn()
        except Exception as exc:
            log.error("[%s] %s failed: %s", self.tier_name, what, exc)
            return failure(exc)

    # -- queries -------------------------------------------------------------------------------
    def queries_stage(self, broker: LocalKafka, lake: Lake) -> dict[str, Any]:
        overrides = lake.overrides(broker.bootstrap_servers, self.topic)
        settings_file = self.work / "jobs" / "queries.settings.json"
        settings_file.parent.mkdir(parents=True, exist_ok=True)
        settings_file.write_text(json.dumps(overrides, indent=2))
        env = dict(os.environ)
        env.update(
            {
                "LINEAGE__CATALOG__SQLITE_PATH": overrides["catalog"]["sqlite_path"],
                "LINEAGE__CATALOG__WAREHOUSE": overrides["catalog"]["warehouse"],
                "LINEAGE__KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers,
                "LINEAGE__KAFKA__TOPIC": self.topic,
            }
        )
        ctx = QueryContext(
            tier=self.tier_name,
            repeat=self.config.repeat,
            work_dir=self.work / "queries",
            settings_file=settings_file,
            env=env,
            estate=self.workload.estate,
            run_measured=measure.run_measured,
            python=self.python,
            runs=self.config.query_runs,
        )
        result = run_queries(ctx)
        # The same questions asked of the read API (warm, one keep-alive connection): issue 20.
        result["read_api"] = self.part("read API", lambda: run_read_api(ctx))
        return result

    # -- freshness ------------------------------------------------------------------------------------
    def freshness_stage(self, broker: LocalKafka) -> dict[str, Any]:
        lake = Lake(self.work / "fresh-lake")
        topic = f"{self.topic}.fresh"
        create_topic(broker.bootstrap_servers, topic, PARTITIONS, self.max_message_bytes)
        overrides = lake.overrides(broker.bootstrap_servers, topic)
        trigger = self.settings.ingest.trigger
        interval = parse_trigger(trigger).get("processingTime")
        outcome = measure_freshness(
            run=self,
            overrides=overrides,
            bootstrap=broker.bootstrap_servers,
            topic=topic,
            probes=self.config.freshness_probes,
            trigger=trigger,
            interval_s=_seconds(interval) if interval else 0.0,
        )
        shutil.rmtree(lake.root, ignore_errors=True)
        return outcome

    # -- lineage freshness ----------------------------------------------------------------------------
    def lineage_freshness_stage(self, broker: LocalKafka, lake: Lake) -> dict[str, Any]:
        """Produced -> ``lake.lineage.*`` on this tier's lake (after the build stage: built, history
        included), the ingestion and the continuous build running together (issue 36)."""
        if not (lake.root / "catalog.db").exists():
            raise StageError(
                "no ingested lake: the lineage-freshness stage needs the ingest stage or a seed lake"
            )
        return measure_lineage_freshness(
            run=self,
            overrides=lake.overrides(broker.bootstrap_servers, self.topic),
            bootstrap=broker.bootstrap_servers,
            topic=self.topic,
            probes=self.config.lineage_probes,
            mean_gap_s=LINEAGE_PROBE_GAP_S,
            every_s=LINEAGE_BUILD_EVERY_S,
        )

    # -- Data.Rentgen ---------------------------------------------------------------------------------
    def rentgen_stage(self) -> dict[str, Any]:
        if self.tier_name not in self.config.rentgen_tiers:
            return {"status": "not run", "reason": f"tier {self.tier_name} not in --rentgen-tiers"}
        return side_by_side(self)


def check_seed_lake(lake: Lake, topic: str, base_messages: int) -> None:
    """A seed lake must have read no more of the topic than its base part: the topic is new (base part
    only) and the build stage appends the deltas to it, which an ingestion that had read further would
    refuse (offsets gone back: ``failOnDataLoss``)."""
    read = lake.ingested(topic)
    if read is not None and read > base_messages:
        raise StageError(
            f"--seed-lake: its ingestion read {read:,} messages of {topic}, the base part has "
            f"{base_messages:,}: it holds the deltas of an earlier build stage. Seed from a lake kept after "
            "the ingest stage alone (--stages ingest --keep)."
        )


def failure(exc: Exception) -> dict[str, Any]:
    """The result of a measurement that raised (called in its ``except`` block)."""
    return {"status": "failed", "error": str(exc)[-4000:], "traceback": traceback.format_exc()[-4000:]}


def full_builds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeated builds of everything (``--full-refresh`` or ``--re-extract``): the shape of the build
    stage's ``full`` and ``re_extract`` results."""
    seconds = measure.summarize(r["work_s"] for r in runs)
    events = (runs[0].get("events") or runs[0].get("new_events")) if runs else None
    return {
        "runs": runs,
        "seconds": seconds,
        "events": events,
        "events_per_s": events / seconds["median"] if events and seconds else None,
        "startup_s": measure.summarize(r["startup_s"] for r in runs),
        "peak_mib": measure.summarize(r["peak_mib"] for r in runs),
    }


def incremental_builds(
    runs: list[dict[str, Any]], ingests: list[dict[str, Any]], full_s: dict[str, Any]
) -> dict[str, Any]:
    """Incremental builds and the ingestion of their new events: the shape of the build stage's
    ``incremental`` and ``history`` results."""
    seconds = measure.summarize(r["work_s"] for r in runs)
    return {
        "runs": runs,
        "seconds": seconds,
        "new_events": measure.summarize(r["new_events"] for r in runs),
        "share_of_full": seconds["median"] / full_s["median"] if seconds and full_s else None,
        "peak_mib": measure.summarize(r["peak_mib"] for r in runs),
        "delta_ingest": {
            "runs": ingests,
            "seconds": measure.summarize(r["work_s"] for r in ingests),
        },
    }


def tag_reach(lake: Lake, about: dict[str, Any]) -> dict[str, Any]:
    """What a build made of the tagged column (:meth:`TierRun.tagged_builds`): the ``lineage.column_tags``
    rows of tag ``about["tag"]`` seeded by a tags facet on field ``about["field"]`` (the generated estate
    sends no other field tag), read with the product's own query core."""
    import pyarrow.compute as pc

    from lineage.query.tables import LakeTables

    settings = load_settings(**lake.overrides("127.0.0.1:9092", "unused"))
    rows = LakeTables(settings).arrow(
        "column_tags",
        ["dataset_id", "tag", "origin_kind", "origin_dataset_id", "origin_field", "hops"],
    )
    mine = rows.filter(
        pc.and_(
            pc.and_(pc.equal(rows["tag"], about["tag"]), pc.equal(rows["origin_kind"], "facet")),
            pc.equal(rows["origin_field"], about["field"]),
        )
    )
    return {
        "rows": mine.num_rows,
        "origins": len(set(mine["origin_dataset_id"].to_pylist())),
        "datasets": len(set(mine["dataset_id"].to_pylist())),
        "max_hops": max(mine["hops"].to_pylist(), default=None),
    }


def describe_estate(workload: Workload) -> dict[str, Any]:
    """The estate's shape (what the tier is made of), for the results."""
    estate = workload.estate
    readers = [j for j in estate.jobs if j.inputs]
    hubs = {d.index for d in estate.datasets if d.hub}
    read = {i for j in estate.jobs for i in j.inputs}
    written = {i for j in estate.jobs for i in j.outputs}
    return {
        "jobs": len(estate.jobs),
        "jobs_without_datasets": sum(1 for j in estate.jobs if not j.inputs and not j.outputs),
        "datasets": len(read | written),
        "hub_datasets": len(hubs),
        "hub_reader_share": sum(any(i in hubs for i in j.inputs) for j in readers) / max(len(readers), 1),
        "fan_in_mean": sum(len(j.inputs) for j in readers) / max(len(readers), 1),
        "flink_jobs": sum(1 for j in estate.jobs if j.kind == "flink"),
        "span_days": workload.tier.days,
    }


def versions() -> dict[str, str]:
    """Versions of what is measured and what measures."""
    out: dict[str, str] = {"python": sys.version.split()[0]}
    for dist in ("pyspark", "pyiceberg", "confluent-kafka", "openlineage-python", "psutil", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    out["java"] = measure.command_version(["java", "-version"])
    for folder, prefixes in (
        (Path(".jars/spark"), ("iceberg-spark-runtime", "spark-sql-kafka")),
        (Path(".jars/kafka"), ("kafka_2.13",)),
        (Path(".jars/kafka39"), ("kafka_2.13",)),
    ):
        for jar in sorted(folder.glob("*.jar")):
            for prefix in prefixes:
                if jar.name.startswith(prefix + "-"):
                    key = f"{prefix} ({folder.name})" if folder.name.startswith("kafka") else prefix
                    out[key] = jar.name.removeprefix(prefix + "-").removesuffix(".jar")
    return out


def _seconds(interval: str) -> float:
    amount, unit = interval.split()
    scale = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600}[unit.lower().rstrip("s")]
    return float(amount) * scale


def run_benchmarks(config: BenchConfig) -> list[Path]:
    """Run every requested tier; returns the result files written."""
    written = []
    for tier in config.tiers:
        run = TierRun(config, tier)
        run.run()
        written.append(run.results_file)
    return written
