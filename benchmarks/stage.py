"""One measured Spark stage in its own process (fresh JVM): what the benchmark runner starts and times.

``python -m benchmarks.stage STAGE --settings overrides.json --out result.json`` (STAGE: one of those below)

- ``ingest``: :func:`lineage.ingest.stream.run_ingest` with an ``availableNow`` trigger (what
  ``jobs/ingest_events.py --trigger availableNow`` runs inside its self-instrumentation wrapper
  ``observed_ingest``, left out here): every message in the topic lands in the raw tables.
- ``parse``: the parse-only bound. The same Kafka source (:func:`lineage.ingest.stream.kafka_source`) and the
  same validation as the ingestion (:func:`lineage.ingest.verdicts.parse_messages`) into Spark's ``noop``
  sink from ``foreachBatch``,
  ``availableNow``: read the topic, parse every envelope, write nothing.
- ``read``: the read-only bound: the same Kafka source into the ``noop`` sink, nothing parsed (what
  reading the topic alone costs on this machine).
- ``build``: :func:`lineage.batch.build.build_lineage` (what ``jobs/build_lineage.py`` runs inside
  ``observed_build``); ``--full-refresh`` rebuilds every lineage table from the extracted form of the raw
  events, ``--re-extract`` (``jobs/build_lineage.py --re-extract``) first throws that form away and parses
  every raw event again. ``--again N`` then builds the same range N more times in the same session, each
  after putting every lineage table back at the snapshot it had before the first build (and dropping the
  tables that build made): the same work in a warm JVM, as the continuous build's second and later builds
  do it (``again_s``: each one's seconds).
- ``stream``: ``run_ingest`` with the configured (default) trigger until SIGTERM, for the freshness and
  soak stages.
- ``build-every``: the continuous build (:func:`lineage.batch.schedule.build_every`, what
  ``jobs/build_lineage.py --every`` runs) checking every ``--every`` seconds until SIGTERM, for the
  lineage-freshness stage.
- ``maintain``: :func:`lineage.batch.maintain.maintain_lake` (what ``jobs/maintain_lake.py`` runs inside
  ``observed_maintenance``), for the soak stage.

Times are wall-clock (``time.time()``) so the runner can relate them to its own: ``process_start`` (from
the OS), ``session_ready`` (SparkSession built: JVM started, jars loaded), ``work_start`` / ``work_end``
around the measured call only. For ``ingest`` the raw tables are created before ``work_start`` (on a fresh
catalog that is a one-off cost, not throughput).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from lineage.settings import Settings, load_settings

# ``benchmarks`` is not installed (pyproject.toml packages ``lineage*`` only): it is imported from the
# repository root. A stage process gets that root on PYTHONPATH, so it imports whatever its working directory.
REPO_ROOT = Path(__file__).resolve().parent.parent


def command(python: list[str], stage: str, *args: str) -> list[str]:
    """The command line of one stage process (``python -m benchmarks.stage STAGE ...``)."""
    return [*python, "-m", "benchmarks.stage", stage, *args]


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the repository root first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    paths = [str(REPO_ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _settings(path: Path) -> Settings:
    return load_settings(**json.loads(path.read_text()))


def _ingest(settings: Settings, result: dict[str, Any], trigger: str | None) -> None:
    from lineage.ingest.stream import run_ingest
    from lineage.io.tables import create_raw_tables
    from lineage.spark import build_session

    spark = build_session(settings, "bench-ingest")
    result["session_ready"] = time.time()
    result["app_id"] = spark.sparkContext.applicationId
    create_raw_tables(spark, settings.catalog, settings.ingest.target_file_size_bytes)
    result["work_start"] = time.time()
    progress = run_ingest(spark, settings, trigger=trigger, starting_offsets="earliest")
    result["work_end"] = time.time()
    result.update(
        batches=progress.batches,
        rows_in=progress.rows_in,
        landed=progress.landed,
        rejected=progress.rejected,
        already_landed=progress.already_landed,
    )
    result["table_events"] = spark.table(settings.catalog.events_table).count()
    result["table_rejected"] = spark.table(settings.catalog.rejected_table).count()
    spark.stop()


def _parse(settings: Settings, result: dict[str, Any], checkpoint: Path, parse: bool = True) -> None:
    from pyspark.sql import DataFrame

    from lineage.ingest.stream import kafka_source
    from lineage.ingest.verdicts import parse_messages
    from lineage.spark import build_session

    spark = build_session(settings, "bench-parse" if parse else "bench-read")
    result["session_ready"] = time.time()
    result["app_id"] = spark.sparkContext.applicationId
    result["work_start"] = time.time()
    source = kafka_source(spark, settings, "earliest")
    max_future_seconds = settings.ingest.max_future_seconds

    def parse_batch(batch: DataFrame, _batch_id: int) -> None:
        parsed = parse_messages(batch, max_future_seconds=max_future_seconds)
        parsed.write.format("noop").mode("overwrite").save()

    writer = source.writeStream.foreachBatch(parse_batch) if parse else source.writeStream.format("noop")
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    result["work_end"] = time.time()
    progress = query.recentProgress
    result["batches"] = sum(1 for p in progress if p["numInputRows"])
    result["rows_in"] = sum(int(p["numInputRows"]) for p in progress)
    spark.stop()


def _build(
    settings: Settings,
    result: dict[str, Any],
    full_refresh: bool,
    re_extract: bool,
    now: datetime | None,
    again: int = 0,
) -> None:
    from lineage.batch.build import build_lineage
    from lineage.spark import build_session

    options: dict[str, Any] = {"full_refresh": full_refresh, "now": now}
    if re_extract:
        # Passed only when asked: a build API without the keyword still runs every other build.
        options["re_extract"] = True
    spark = build_session(settings, "bench-build")
    result["session_ready"] = time.time()
    result["app_id"] = spark.sparkContext.applicationId
    before = _lineage_snapshots(spark, settings) if again else {}
    result["work_start"] = time.time()
    built = build_lineage(spark, settings, **options)
    result["work_end"] = time.time()
    result.update(
        mode=built.mode,
        new_events=built.new_events,
        # Events the model was recomputed from (a full refresh extracts none: new_events is 0 there).
        events=getattr(built, "events", None),
        raw_snapshot_id=built.raw_snapshot_id,
        build_seconds=built.seconds,
    )
    result["again_s"], result["again_modes"] = [], []
    for _ in range(again):
        _put_back(spark, settings, before)
        started = time.monotonic()
        rebuilt = build_lineage(spark, settings, **options)
        result["again_s"].append(round(time.monotonic() - started, 3))
        result["again_modes"].append(rebuilt.mode)
    spark.stop()


def _lineage_snapshots(spark: Any, settings: Settings) -> dict[str, int | None]:
    """Every lineage table and its current snapshot (None: a table without one)."""
    from lineage.io import lake

    catalog = settings.catalog
    namespace = f"{catalog.name}.{catalog.lineage_namespace}"
    names = [r.tableName for r in spark.sql(f"SHOW TABLES IN {namespace}").collect()]
    return {name: lake.current_snapshot_id(spark, f"{namespace}.{name}") for name in names}


def _put_back(spark: Any, settings: Settings, before: dict[str, int | None]) -> None:
    """The lineage tables as ``before`` found them: each at its snapshot then (a replaced table's too,
    which a rollback refuses: not an ancestor; one without a snapshot then emptied), a table made since
    dropped (its files stay)."""
    catalog = settings.catalog
    namespace = f"{catalog.name}.{catalog.lineage_namespace}"
    for name, snapshot in _lineage_snapshots(spark, settings).items():
        if name not in before:
            spark.sql(f"DROP TABLE {namespace}.{name}")
        elif snapshot != before[name] and before[name] is None:
            spark.sql(f"DELETE FROM {namespace}.{name}")  # it had no rows then
        elif snapshot != before[name]:
            spark.sql(
                f"CALL {catalog.name}.system.set_current_snapshot('{namespace}.{name}', {before[name]})"
            )


def _build_every(settings: Settings, result: dict[str, Any], seconds: float) -> None:
    from lineage.batch.schedule import build_every
    from lineage.spark import build_session
    from lineage.stopping import JobStopped, stop_on_signals

    spark = build_session(settings, "bench-build-every")
    result["session_ready"] = time.time()
    result["app_id"] = spark.sparkContext.applicationId
    result["work_start"] = time.time()
    with stop_on_signals(spark) as stop:
        try:
            done = build_every(spark, settings, seconds, stop)
            result.update(builds=done.builds, busy=done.busy, events=done.events, stopped="between builds")
        except JobStopped:
            result["stopped"] = "during a build"
    result["work_end"] = time.time()
    spark.stop()


def _maintain(settings: Settings, result: dict[str, Any]) -> None:
    from lineage.batch.maintain import maintain_lake
    from lineage.spark import build_session

    spark = build_session(settings, "bench-maintain")
    result["session_ready"] = time.time()
    result["app_id"] = spark.sparkContext.applicationId
    result["work_start"] = time.time()
    done = maintain_lake(spark, settings)
    result["work_end"] = time.time()
    result["tables"] = {
        t.table: {
            "files_before": t.files_before,
            "files_after": t.files_after,
            "snapshots_before": t.snapshots_before,
            "snapshots_after": t.snapshots_after,
            "expired_files": t.expired_files,
        }
        for t in done.tables
    }
    spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.stage",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "stage", choices=["ingest", "parse", "read", "build", "build-every", "stream", "maintain"]
    )
    parser.add_argument("--settings", type=Path, required=True, help="JSON overrides for load_settings")
    parser.add_argument("--out", type=Path, required=True, help="where the timings go (JSON)")
    parser.add_argument("--checkpoint", type=Path, help="parse: checkpoint of the noop query")
    parser.add_argument("--full-refresh", action="store_true", help="build: full refresh")
    parser.add_argument(
        "--re-extract", action="store_true", help="build: parse every raw event again, then rebuild all"
    )
    parser.add_argument("--now", help="build: reference time (ISO-8601)")
    parser.add_argument(
        "--again", type=int, default=0, help="build: the same range N times more, warm (tables put back)"
    )
    parser.add_argument("--every", type=float, default=5.0, help="build-every: seconds between checks")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    result: dict[str, Any] = {"stage": args.stage, "process_start": psutil.Process().create_time()}
    settings = _settings(args.settings)
    if args.stage == "ingest":
        _ingest(settings, result, "availableNow")
    elif args.stage == "stream":
        _ingest(settings, result, None)
    elif args.stage == "maintain":
        _maintain(settings, result)
    elif args.stage == "build-every":
        _build_every(settings, result, args.every)
    elif args.stage in ("parse", "read"):
        if args.checkpoint is None:
            parser.error(f"{args.stage} needs --checkpoint")
        _parse(settings, result, args.checkpoint, parse=args.stage == "parse")
    else:
        now = datetime.fromisoformat(args.now.replace("Z", "+00:00")) if args.now else None
        _build(settings, result, args.full_refresh, args.re_extract, now, args.again)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
