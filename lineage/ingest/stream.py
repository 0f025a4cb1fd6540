"""Kafka -> Iceberg landing with Spark Structured Streaming, exactly once per Kafka offset.

Every micro-batch is validated (:mod:`lineage.transforms.envelope`) and split: valid events are appended to
``raw.events``, everything else to ``raw.rejected``; so for every message read there is exactly one row in
exactly one of the two tables.

Exactly once: Structured Streaming records a batch's offsets in the checkpoint before running it and marks
it committed afterwards; after a crash it re-runs the last uncommitted batch with the same offsets. The two
Iceberg appends of a batch are separate atomic commits, so a crash can land between them. Before writing,
each batch therefore looks up which of its (topic, partition, offset) coordinates are already in either table
and writes only the others. The lookup filters on the batch's offset range per partition, which Iceberg
answers from file statistics, so for a normal batch it reads no data files at all. The same check makes
re-reading a topic with a fresh checkpoint land nothing twice. Only one query may ingest a given topic at a
time (two concurrent queries could both pass the check).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

from pyspark import StorageLevel
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.io.tables import create_raw_tables
from lineage.settings import Settings, is_uri, parse_trigger
from lineage.transforms.envelope import parse_messages, rejected_messages, valid_events

log = logging.getLogger(__name__)

COORDINATES = ["kafka_topic", "kafka_partition", "kafka_offset"]

# Test-only fault injection: when set to a batch id, the process kills itself (SIGKILL) right after that
# batch's events commit and before its rejected commit, to prove the replay path.
FAULT_ENV = "LINEAGE_FAULT_KILL_AFTER_EVENTS_COMMIT"

STOP_MARKER = "lineage: ingestion stop requested"


@dataclass
class BatchStats:
    batch_id: int
    rows_in: int
    landed: int
    rejected: int
    already_landed: int
    seconds: float


@dataclass
class IngestProgress:
    """Running totals over the micro-batches of one ingestion process."""

    batches: int = 0
    rows_in: int = 0
    landed: int = 0
    rejected: int = 0
    already_landed: int = 0
    listeners: list[Callable[[BatchStats], None]] = field(default_factory=list)

    def add(self, stats: BatchStats) -> None:
        self.batches += 1
        self.rows_in += stats.rows_in
        self.landed += stats.landed
        self.rejected += stats.rejected
        self.already_landed += stats.already_landed
        for listener in self.listeners:
            listener(stats)


def kafka_source(spark: SparkSession, settings: Settings, starting_offsets: str | None = None) -> DataFrame:
    """The topic as a streaming DataFrame (Spark's Kafka source, size limits raised)."""
    kafka = settings.kafka
    limit = str(kafka.max_message_bytes)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", kafka.topic)
        .option("startingOffsets", starting_offsets or settings.ingest.starting_offsets)
        # A gap in the topic (retention ran out before we read it) must stop ingestion loudly.
        .option("failOnDataLoss", "true")
        .option("kafka.max.partition.fetch.bytes", limit)
        .option("kafka.fetch.max.bytes", limit)
    )
    if settings.ingest.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.ingest.max_offsets_per_trigger))
    for key, value in {**kafka.security.java(), **kafka.consumer}.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load()


class StopRequested(RuntimeError):
    """Raised by a batch that starts after a stop was requested, before it writes anything."""


def _not_a_requested_stop(record: logging.LogRecord) -> bool:
    """Py4J logs every exception of a callback as an error; a refused batch after a stop is not one."""
    return not (record.exc_info and isinstance(record.exc_info[1], StopRequested))


class BatchWriter:
    """The ``foreachBatch`` function: validate, skip what already landed, append to both raw tables."""

    def __init__(self, settings: Settings, progress: IngestProgress) -> None:
        self._events = settings.catalog.events_table
        self._rejected = settings.catalog.rejected_table
        self._progress = progress
        self._redactor = settings.redact.redactor()
        fault = os.environ.get(FAULT_ENV)
        self._fault_batch = int(fault) if fault else None
        self._busy = threading.Lock()  # held while a batch writes
        self.stopping = threading.Event()
        self.refused = False  # a batch was refused because a stop was requested

    def request_stop(self) -> None:
        """Wait for the batch being written (if any) to finish; no later batch writes anything."""
        with self._busy:
            self.stopping.set()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self._busy:
            if self.stopping.is_set():
                # Nothing of this batch is written and Spark does not mark it committed: the next run
                # reads the same offsets again.
                self.refused = True
                raise StopRequested(f"{STOP_MARKER} before batch {batch_id}")
            self._run(batch, batch_id)

    def _run(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        parsed = parse_messages(batch, self._redactor).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = self._write(parsed, batch_id, started)
        finally:
            parsed.unpersist()
        self._progress.add(stats)
        log.info(
            "batch %d: %d in, %d landed, %d rejected, %d already landed, %.0f rows/s",
            stats.batch_id,
            stats.rows_in,
            stats.landed,
            stats.rejected,
            stats.already_landed,
            stats.rows_in / stats.seconds if stats.seconds > 0 else 0.0,
        )

    def _write(self, parsed: DataFrame, batch_id: int, started: float) -> BatchStats:
        ranges = (
            parsed.groupBy("kafka_topic", "kafka_partition")
            .agg(
                F.min("kafka_offset").alias("lo"),
                F.max("kafka_offset").alias("hi"),
                F.count(F.lit(1)).alias("n"),
                F.count_if(F.col("reason").isNull()).alias("valid"),
            )
            .collect()
        )
        rows_in = sum(r["n"] for r in ranges)
        if rows_in == 0:
            return BatchStats(batch_id, 0, 0, 0, 0, time.monotonic() - started)

        in_batch = reduce(
            lambda a, b: a | b,
            [
                (F.col("kafka_topic") == r["kafka_topic"])
                & (F.col("kafka_partition") == r["kafka_partition"])
                & F.col("kafka_offset").between(r["lo"], r["hi"])
                for r in ranges
            ],
        )
        spark = parsed.sparkSession  # the query's session, which also writes below
        existing = (
            spark.table(self._events)
            .where(in_batch)
            .select(*COORDINATES)
            .unionByName(spark.table(self._rejected).where(in_batch).select(*COORDINATES))
        )
        already = existing.count()
        if already:
            # A replayed batch (crash between commits, or a topic re-read with a fresh checkpoint).
            todo = parsed.join(existing, COORDINATES, "left_anti").persist(StorageLevel.MEMORY_AND_DISK)
            valid = todo.where(F.col("reason").isNull()).count()
            invalid = todo.count() - valid
        else:
            todo = parsed
            valid = sum(r["valid"] for r in ranges)
            invalid = rows_in - valid

        ingested_at = F.lit(datetime.now(UTC)).cast("timestamp")
        props = {"snapshot-property.lineage.ingest.batch-id": str(batch_id)}
        if valid:
            valid_events(todo, ingested_at).writeTo(self._events).options(**props).append()
        if self._fault_batch == batch_id:
            log.warning("fault injection: SIGKILL after the events commit of batch %d", batch_id)
            os.kill(os.getpid(), signal.SIGKILL)
        if invalid:
            rejected_messages(todo, ingested_at).writeTo(self._rejected).options(**props).append()
        if already:
            todo.unpersist()
        return BatchStats(batch_id, rows_in, valid, invalid, already, time.monotonic() - started)


def run_ingest(
    spark: SparkSession,
    settings: Settings,
    *,
    trigger: str | None = None,
    starting_offsets: str | None = None,
    progress: IngestProgress | None = None,
) -> IngestProgress:
    """Create the raw tables if needed and run the streaming query.

    With an ``availableNow`` trigger this returns once everything in the topic at start has landed;
    with a processing-time trigger it runs until the query is stopped (SIGTERM/SIGINT stop it cleanly).
    """
    progress = progress or IngestProgress()
    create_raw_tables(spark, settings.catalog, settings.ingest.target_file_size_bytes)
    trigger_args = parse_trigger(trigger or settings.ingest.trigger)
    checkpoint = str(settings.ingest.checkpoint)
    if not is_uri(checkpoint):
        Path(checkpoint).mkdir(parents=True, exist_ok=True)
    writer = BatchWriter(settings, progress)
    query = (
        kafka_source(spark, settings, starting_offsets)
        .writeStream.queryName(f"ingest-{settings.kafka.topic}")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(writer)
        .trigger(**trigger_args)
        .start()
    )
    log.info(
        "ingesting %s from %s into %s / %s (trigger %s, checkpoint %s)",
        settings.kafka.topic,
        settings.kafka.bootstrap_servers,
        settings.catalog.events_table,
        settings.catalog.rejected_table,
        trigger_args,
        checkpoint,
    )

    def _stop_between_batches() -> None:
        writer.request_stop()
        # The batch that was being written has returned; let Spark finish its trigger (the commit-log
        # entry) before interrupting, so the stop lands between batches. A trigger that starts meanwhile
        # is refused by the writer before it writes anything.
        deadline = time.monotonic() + 60
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
        query.stop()

    def _stop(signum: int, _frame: object) -> None:
        if writer.stopping.is_set():
            return
        log.info("signal %d: stopping the ingestion between batches", signum)
        # Not query.stop() here: the handler runs on the main thread, whose Py4J connection is busy with
        # awaitTermination; a second call on it breaks the connection (seen under spark-submit). Another
        # thread gets a connection of its own, and awaitTermination returns once the query has stopped.
        threading.Thread(target=_stop_between_batches, name="stop-ingestion", daemon=True).start()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    py4j_log = logging.getLogger("py4j.clientserver")
    py4j_log.addFilter(_not_a_requested_stop)
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        if not (writer.refused and STOP_MARKER in str(exc)):
            raise
        log.info("stopped before a new batch wrote anything; it is read again by the next run")
    finally:
        py4j_log.removeFilter(_not_a_requested_stop)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return progress
