"""Kafka -> Iceberg landing with Spark Structured Streaming, exactly once per Kafka offset.

Every micro-batch is validated (:mod:`lineage.ingest.verdicts`) and split: valid events are appended to
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

Topic incarnations: a topic deleted and created again under the same name starts its offsets at 0 again, so
its messages have the coordinates of the old topic's. Every row therefore also records the topic's Kafka id
(``kafka_topic_id``, looked up with the admin API: Spark's source does not expose it), and a row counts as
already landed only if it is of the same incarnation. Rows landed before the id was recorded (null id)
count as landed when their Kafka timestamp and size equal the message's (the same record read again);
anything else at the same coordinates is another incarnation's, and the batch lands its own rows and logs a
WARNING. The id is looked up at start, where it must match the one the checkpoint was written for, and
before and after each batch is read: a topic recreated under a running ingestion stops it with
:class:`TopicRecreated` before anything of that batch is written (the checkpoint's offsets belong to the old
topic; restart with a new checkpoint).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.ingest.verdicts import parse_messages
from lineage.io.tables import create_raw_tables
from lineage.settings import KafkaSettings, Settings, is_uri, parse_trigger
from lineage.transforms.envelope import rejected_messages, valid_events

log = logging.getLogger(__name__)

COORDINATES = ["kafka_topic", "kafka_partition", "kafka_offset"]
TOPIC_ID = "kafka_topic_id"
# What tells the same record from another one at the same coordinates when a row has no topic id.
RECORD_FINGERPRINT = ["kafka_timestamp", "payload_bytes"]
# In the checkpoint folder: the id of each topic the checkpoint's offsets were read from.
TOPIC_IDS_FILE = "lineage-topic-ids.json"

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


def subscribed_topics(kafka: KafkaSettings) -> list[str]:
    """The topics of ``kafka.topic`` (Spark's ``subscribe`` takes a comma-separated list)."""
    return [t.strip() for t in kafka.topic.split(",") if t.strip()]


class TopicRecreated(RuntimeError):
    """A topic's id is not the one its offsets were read under: it was deleted and created again."""


def topic_id_text(topic_id: Any) -> str:
    """A Kafka topic id (confluent-kafka's ``Uuid``) as Kafka prints it (``kafka-topics.sh --describe``):
    URL-safe base64 of its 16 bytes, unpadded (librdkafka's own text uses the standard alphabet)."""
    mask = (1 << 64) - 1
    raw = (topic_id.get_most_significant_bits() & mask).to_bytes(8, "big") + (
        topic_id.get_least_significant_bits() & mask
    ).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class TopicIds:
    """Kafka's id of each topic's current incarnation, from the admin API (one client, reused)."""

    def __init__(self, kafka: KafkaSettings, timeout_s: float = 30.0) -> None:
        self._config: dict[str, Any] = {
            "bootstrap.servers": kafka.bootstrap_servers,
            **kafka.security.librdkafka(),
        }
        self._timeout_s = timeout_s
        self._admin: Any = None

    def lookup(self, topics: Iterable[str]) -> dict[str, str | None]:
        """``{topic: id}``, the id as Kafka prints it (:func:`topic_id_text`); None for a topic that does not
        exist. Raises on any other error (the broker does not answer, no DESCRIBE permission ...)."""
        from confluent_kafka import KafkaError, KafkaException, TopicCollection
        from confluent_kafka.admin import AdminClient

        names = sorted(set(topics))
        if not names:
            return {}
        if self._admin is None:
            self._admin = AdminClient(self._config)
        futures = self._admin.describe_topics(TopicCollection(names), request_timeout=self._timeout_s)
        ids: dict[str, str | None] = {}
        for name, future in futures.items():
            try:
                ids[name] = topic_id_text(future.result(timeout=self._timeout_s).topic_id)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    ids[name] = None
                else:
                    raise
        return ids


def _checkpoint_file(spark: SparkSession, checkpoint: str) -> tuple[Any, Any]:
    """(Hadoop FileSystem, Path) of the topic-id file in the checkpoint folder (local, s3a://, hdfs://...)."""
    jvm: Any = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{TOPIC_IDS_FILE}")
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def read_checkpoint_topic_ids(spark: SparkSession, checkpoint: str) -> dict[str, str]:
    """The topic ids a checkpoint's offsets were read under ({} for a new checkpoint, or one written before
    the ids were recorded)."""
    fs, path = _checkpoint_file(spark, checkpoint)
    if not fs.exists(path):
        return {}
    jvm: Any = spark.sparkContext._jvm
    stream = fs.open(path)
    try:
        text = str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()
    return {str(k): str(v) for k, v in json.loads(text).items()}


def write_checkpoint_topic_ids(spark: SparkSession, checkpoint: str, ids: dict[str, str]) -> None:
    fs, path = _checkpoint_file(spark, checkpoint)
    out = fs.create(path, True)
    try:
        out.write(bytearray(json.dumps(ids, sort_keys=True).encode()))
    finally:
        out.close()


class StopRequested(RuntimeError):
    """Raised by a batch that starts after a stop was requested, before it writes anything."""


def _not_a_requested_stop(record: logging.LogRecord) -> bool:
    """Py4J logs every exception of a callback as an error; a refused batch after a stop is not one."""
    return not (record.exc_info and isinstance(record.exc_info[1], StopRequested))


class BatchWriter:
    """The ``foreachBatch`` function: validate, skip what already landed, append to both raw tables."""

    def __init__(
        self,
        settings: Settings,
        progress: IngestProgress,
        *,
        topic_ids: TopicIds | None = None,
        known_ids: dict[str, str] | None = None,
        on_new_ids: Callable[[dict[str, str]], None] | None = None,
    ) -> None:
        self._topics = subscribed_topics(settings.kafka)
        self._topic_ids = topic_ids or TopicIds(settings.kafka)
        # The id each topic had when this checkpoint's offsets were read; a topic absent so far gets it at
        # its first batch (and ``on_new_ids`` records it in the checkpoint).
        self._known = dict(known_ids or {})
        self._on_new_ids = on_new_ids
        self._events = settings.catalog.events_table
        self._rejected = settings.catalog.rejected_table
        self._progress = progress
        self._redactor = settings.redact.redactor()
        self._max_future_seconds = settings.ingest.max_future_seconds
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
            try:
                self._run(batch, batch_id)
            except TopicRecreated as exc:
                log.error("%s", exc)  # one readable line; the query then fails with it
                raise

    def _current_ids(self, batch_id: int) -> dict[str, str]:
        """The subscribed topics' ids now, checked against the ids their offsets were read under."""
        ids = self._topic_ids.lookup(self._topics)
        found = {topic: topic_id for topic, topic_id in ids.items() if topic_id is not None}
        for topic, topic_id in found.items():
            known = self._known.get(topic)
            if known is not None and known != topic_id:
                raise TopicRecreated(
                    f"topic {topic} was deleted and created again while the ingestion ran (id {known}, "
                    f"now {topic_id}); batch {batch_id} is not written. The checkpoint's offsets belong to "
                    "the old topic: restart with a new checkpoint (ingest.checkpoint) and --starting-offsets "
                    "earliest to land the new topic's messages (rows of the old one are told apart by "
                    "kafka_topic_id)"
                )
        new = {t: i for t, i in found.items() if t not in self._known}
        if new:
            self._known.update(new)
            if self._on_new_ids is not None:
                self._on_new_ids(dict(self._known))
        return found

    def _run(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        ids = self._current_ids(batch_id)  # before Spark reads the batch's messages (on the first action)
        # Persisted: the batch is read by several actions (its ranges, the replay check, both appends).
        parsed = parse_messages(batch, self._redactor, self._max_future_seconds)
        parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = self._write(parsed, batch_id, started, ids)
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

    def _write(self, parsed: DataFrame, batch_id: int, started: float, ids: dict[str, str]) -> BatchStats:
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
        # The messages are read (and cached) now: the topics must still be the incarnations looked up before.
        after = self._current_ids(batch_id)
        for topic in {r["kafka_topic"] for r in ranges}:
            if topic not in ids or after.get(topic) != ids[topic]:
                raise TopicRecreated(
                    f"topic {topic} changed while batch {batch_id} was read (id {ids.get(topic)}, now "
                    f"{after.get(topic)}): nothing of the batch is written; restart with a new checkpoint"
                )
        topic_id = F.create_map(*[F.lit(x) for item in sorted(ids.items()) for x in item])[
            F.col("kafka_topic")
        ]

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
        columns = [*COORDINATES, TOPIC_ID, *RECORD_FINGERPRINT]
        existing = (
            spark.table(self._events)
            .where(in_batch)
            .select(*columns)
            .unionByName(spark.table(self._rejected).where(in_batch).select(*columns))
        )
        rows = parsed.select(*COORDINATES, *RECORD_FINGERPRINT, topic_id.alias("_id"))
        same_record = reduce(
            lambda a, b: a & b, [F.col(f"e.{c}").eqNullSafe(F.col(f"m.{c}")) for c in RECORD_FINGERPRINT]
        )
        # One row per coordinate of the batch found in either table: ``same`` when one of the rows there is
        # this message (same topic id; without an id, the same Kafka timestamp and size), else the ids of
        # the other incarnation(s) found there.
        matched = (
            rows.alias("m")
            .join(existing.alias("e"), COORDINATES)
            .select(
                *COORDINATES,
                F.coalesce(F.col("e.kafka_topic_id"), F.lit("null")).alias("landed_id"),
                F.when(F.col("e.kafka_topic_id").isNotNull(), F.col("e.kafka_topic_id") == F.col("m._id"))
                .otherwise(same_record)
                .cast("int")
                .alias("same"),
            )
            .groupBy(*COORDINATES)
            .agg(F.max("same").alias("same"), F.collect_set("landed_id").alias("landed_ids"))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        found = (
            matched.groupBy("kafka_topic", "same")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.array_distinct(F.flatten(F.collect_list("landed_ids"))).alias("ids"),
            )
            .collect()
        )
        already = sum(r["n"] for r in found if r["same"])
        for r in sorted((r for r in found if not r["same"]), key=lambda r: r["kafka_topic"]):
            log.warning(
                "batch %d: topic %s was deleted and created again: %d offsets of its incarnation %s collide "
                "with rows of another incarnation (topic id %s; null: landed before topic ids were "
                "recorded, and not the same record); those rows are not these messages, which land now",
                batch_id,
                r["kafka_topic"],
                r["n"],
                ids.get(r["kafka_topic"]),
                ", ".join(sorted(r["ids"])),
            )
        if already:
            # A replayed batch (crash between commits, or a topic re-read with a fresh checkpoint).
            landed = matched.where(F.col("same") == 1).select(*COORDINATES)
            todo = parsed.join(landed, COORDINATES, "left_anti").persist(StorageLevel.MEMORY_AND_DISK)
            valid = todo.where(F.col("reason").isNull()).count()
            invalid = todo.count() - valid
        else:
            todo = parsed
            valid = sum(r["valid"] for r in ranges)
            invalid = rows_in - valid

        ingested_at = F.lit(datetime.now(UTC)).cast("timestamp")
        props = {"snapshot-property.lineage.ingest.batch-id": str(batch_id)}
        if valid:
            events = valid_events(todo, ingested_at).withColumn(TOPIC_ID, topic_id)
            events.writeTo(self._events).options(**props).append()
        if self._fault_batch == batch_id:
            log.warning("fault injection: SIGKILL after the events commit of batch %d", batch_id)
            os.kill(os.getpid(), signal.SIGKILL)
        if invalid:
            rejected = rejected_messages(todo, ingested_at).withColumn(TOPIC_ID, topic_id)
            rejected.writeTo(self._rejected).options(**props).append()
        if already:
            todo.unpersist()
        matched.unpersist()
        return BatchStats(batch_id, rows_in, valid, invalid, already, time.monotonic() - started)


def check_checkpoint_topics(
    spark: SparkSession, checkpoint: str, current: dict[str, str | None]
) -> dict[str, str]:
    """The topic ids the checkpoint's offsets are read under, recorded in it; raises
    :class:`TopicRecreated` when a topic now has another id (its offsets would skip or misread messages of
    the new topic)."""
    stored = read_checkpoint_topic_ids(spark, checkpoint)
    for topic, topic_id in sorted(current.items()):
        if topic_id is None:
            log.warning("topic %s does not exist: nothing to read until it is created", topic)
        elif stored.get(topic, topic_id) != topic_id:
            raise TopicRecreated(
                f"topic {topic} was deleted and created again since checkpoint {checkpoint} read it (id "
                f"{stored[topic]}, now {topic_id}): its offsets belong to the old topic. Start with a new "
                "checkpoint (ingest.checkpoint) and --starting-offsets earliest; rows of the old topic are "
                "told apart by kafka_topic_id"
            )
    known = {**stored, **{t: i for t, i in current.items() if i is not None}}
    if known != stored:
        write_checkpoint_topic_ids(spark, checkpoint, known)
    log.info("topic ids: %s", ", ".join(f"{t} {i}" for t, i in sorted(current.items())))
    return known


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
    topic_ids = TopicIds(settings.kafka)
    known = check_checkpoint_topics(spark, checkpoint, topic_ids.lookup(subscribed_topics(settings.kafka)))
    writer = BatchWriter(
        settings,
        progress,
        topic_ids=topic_ids,
        known_ids=known,
        on_new_ids=lambda ids: write_checkpoint_topic_ids(spark, checkpoint, ids),
    )
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
