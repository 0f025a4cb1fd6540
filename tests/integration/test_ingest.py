"""Kafka -> Structured Streaming -> Iceberg against the real broker, real Spark and a real catalog."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from openlineage.client.serde import Serde
from pyiceberg.expressions import EqualTo
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.batch.maintain import maintain_lake
from lineage.demo.events import MALFORMED, lab_events
from lineage.ingest.stream import FAULT_ENV, TopicRecreated, run_ingest
from lineage.io.catalog import open_catalog
from lineage.io.local_kafka import LocalKafka
from lineage.io.publish import kafka_client, publish_events, publish_raw, topic_message_count
from lineage.io.tables import create_raw_tables
from lineage.settings import RECORD_HEADROOM_BYTES, MaintainSettings, Settings
from tests.fixtures.kafka import recreate_topic, topic_id
from tests.fixtures.lake import lake_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def for_topic(base: Settings, broker: LocalKafka, topic: str, checkpoint: Path, **ingest: object) -> Settings:
    return base.model_copy(
        update={
            "kafka": base.kafka.model_copy(
                update={"bootstrap_servers": broker.bootstrap_servers, "topic": topic}
            ),
            "ingest": base.ingest.model_copy(update={"checkpoint": checkpoint, **ingest}),
        }
    )


def landed(settings: Settings, topic: str) -> tuple[pa.Table, pa.Table]:
    """(raw.events rows, raw.rejected rows) of one topic, read with pyiceberg."""
    catalog = open_catalog(settings.catalog)
    ns = settings.catalog.raw_namespace
    events = catalog.load_table((ns, "events")).scan(row_filter=EqualTo("kafka_topic", topic)).to_arrow()
    rejected = catalog.load_table((ns, "rejected")).scan(row_filter=EqualTo("kafka_topic", topic)).to_arrow()
    return events, rejected


def coordinates(*tables: pa.Table) -> list[tuple[int, int]]:
    return [
        (p, o)
        for t in tables
        for p, o in zip(
            t.column("kafka_partition").to_pylist(), t.column("kafka_offset").to_pylist(), strict=True
        )
    ]


def expected_coordinates(broker: LocalKafka, topic: str) -> list[tuple[int, int]]:
    """Every (partition, offset) in the topic, from the broker's watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        out = []
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out += [(p, o) for o in range(low, high)]
        return sorted(out)
    finally:
        consumer.close()


def read_topic(broker: LocalKafka, topic: str) -> dict[tuple[int, int], bytes | None]:
    """Every message value in the topic by (partition, offset), read back with a plain consumer."""
    from confluent_kafka import Consumer

    expected = expected_coordinates(broker, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"read-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
    )
    consumer.subscribe([topic])
    values: dict[tuple[int, int], bytes | None] = {}
    deadline = time.monotonic() + 60
    try:
        while len(values) < len(expected) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values[(message.partition(), message.offset())] = message.value()
    finally:
        consumer.close()
    return values


def publish_lab(broker: LocalKafka, topic: str) -> None:
    client = kafka_client(broker.bootstrap_servers, topic, broker.max_message_bytes)
    publish_events(client, (e.event for e in lab_events()))
    publish_raw(
        broker.bootstrap_servers, topic, [(b"malformed", v) for v, _ in MALFORMED], broker.max_message_bytes
    )


def test_openlineage_events_land_and_malformed_ones_are_rejected(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    publish_lab(kafka_broker, topic)
    settings = for_topic(base_settings, kafka_broker, topic, tmp_path / "ckpt")

    progress = run_ingest(spark, settings, trigger="availableNow")

    events, rejected = landed(settings, topic)
    lab = [json.loads(Serde.to_json(e.event)) for e in lab_events()]
    assert sorted(
        zip(events.column("run_id").to_pylist(), events.column("event_type").to_pylist(), strict=True)
    ) == sorted((e["run"]["runId"], e["eventType"]) for e in lab)
    sent = read_topic(kafka_broker, topic)
    for row in events.to_pylist():
        assert row["event_json"].encode() == sent[(row["kafka_partition"], row["kafka_offset"])]
    for row in rejected.to_pylist():
        assert row["value"] == sent[(row["kafka_partition"], row["kafka_offset"])]
    by_offset = sorted((r["kafka_offset"], r["reason"]) for r in rejected.to_pylist())
    assert [reason for _, reason in by_offset] == [reason for _, reason in MALFORMED]
    total = topic_message_count(kafka_broker.bootstrap_servers, topic)
    assert (progress.rows_in, progress.landed, progress.rejected) == (total, len(lab), len(MALFORMED))
    assert sorted(coordinates(events, rejected)) == expected_coordinates(kafka_broker, topic)


def test_spark_reads_the_same_rows_as_pyiceberg(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    publish_lab(kafka_broker, topic)
    settings = for_topic(base_settings, kafka_broker, topic, tmp_path / "ckpt")
    run_ingest(spark, settings, trigger="availableNow")

    events, _ = landed(settings, topic)
    from_spark = spark.table(settings.catalog.events_table).where(f"kafka_topic = '{topic}'")
    spark_kinds = Counter((r["event_kind"], r["event_type"]) for r in from_spark.collect())
    iceberg_kinds = Counter(
        zip(events.column("event_kind").to_pylist(), events.column("event_type").to_pylist(), strict=True)
    )
    assert spark_kinds == iceberg_kinds
    assert spark_kinds[("RunEvent", "RUNNING")] == 8


def test_reading_the_same_topic_twice_lands_nothing_new(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    publish_lab(kafka_broker, topic)
    settings = for_topic(base_settings, kafka_broker, topic, tmp_path / "ckpt")
    run_ingest(spark, settings, trigger="availableNow")
    catalog = open_catalog(settings.catalog)
    snapshots = {
        t: catalog.load_table(("raw", t)).current_snapshot().snapshot_id for t in ("events", "rejected")
    }

    again = run_ingest(spark, settings, trigger="availableNow")
    fresh_checkpoint = for_topic(base_settings, kafka_broker, topic, tmp_path / "other-ckpt")
    reread = run_ingest(spark, fresh_checkpoint, trigger="availableNow")

    assert (again.rows_in, again.landed, again.rejected) == (0, 0, 0)
    # The lab's 31 events and 9 malformed messages, every one already landed.
    assert (reread.rows_in, reread.already_landed, reread.landed, reread.rejected) == (40, 40, 0, 0)
    catalog = open_catalog(settings.catalog)
    assert {t: catalog.load_table(("raw", t)).current_snapshot().snapshot_id for t in snapshots} == snapshots
    events, rejected = landed(settings, topic)
    assert sorted(coordinates(events, rejected)) == expected_coordinates(kafka_broker, topic)


def _ingest_process(settings: Settings, trigger: str, **env: str) -> subprocess.Popen[bytes]:
    """jobs/ingest_events.py in its own process group, configured by LINEAGE__* variables only."""
    variables = {
        **os.environ,
        "LINEAGE__KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
        "LINEAGE__KAFKA__TOPIC": settings.kafka.topic,
        "LINEAGE__CATALOG__NAME": settings.catalog.name,  # the JDBC catalog keys its tables by name
        "LINEAGE__CATALOG__SQLITE_PATH": str(settings.catalog.sqlite_path),
        "LINEAGE__CATALOG__WAREHOUSE": str(settings.catalog.warehouse),
        "LINEAGE__INGEST__CHECKPOINT": str(settings.ingest.checkpoint),
        "LINEAGE__SPARK__MASTER": "local[2]",
        "LINEAGE__SPARK__SHUFFLE_PARTITIONS": "2",
        "LINEAGE__SPARK__DRIVER_MEMORY": "1g",
        **env,
    }
    if settings.ingest.max_offsets_per_trigger:
        variables["LINEAGE__INGEST__MAX_OFFSETS_PER_TRIGGER"] = str(settings.ingest.max_offsets_per_trigger)
    return subprocess.Popen(
        [sys.executable, "jobs/ingest_events.py", "--trigger", trigger],
        cwd=REPO,
        env=variables,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _mixed_messages(count: int, job: str = "job") -> list[tuple[bytes, bytes]]:
    """Valid run events with a malformed message every 25th, keyed so they spread over partitions (the
    same partitions and offsets for the same ``count`` in a new topic; ``job`` names their jobs)."""
    messages = []
    for i in range(count):
        if i % 25 == 0:
            messages.append((f"k{i}".encode(), b"{not json"))
            continue
        run_id = str(uuid.UUID(int=i + 1, version=4))
        value = {
            "eventType": "RUNNING",
            "eventTime": "2026-11-20T08:00:00Z",
            "producer": "test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id},
            "job": {"namespace": "test", "name": f"{job}-{i % 7}"},
        }
        messages.append((f"k{i}".encode(), json.dumps(value).encode()))
    return messages


def _wait_for_rows(settings: Settings, topic: str, process: subprocess.Popen[bytes], at_least: int) -> int:
    deadline = time.monotonic() + 240
    seen = 0
    while time.monotonic() < deadline and process.poll() is None:
        events, rejected = landed(settings, topic)
        seen = events.num_rows + rejected.num_rows
        if seen >= at_least:
            break
        time.sleep(1)  # each look scans both tables: often enough, without taking the ingestion's CPU
    return seen


JVM_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|ERROR|INFO) ")
DONE = re.compile(
    r"done: (?P<batches>\d+) batches, (?P<read>\d+) messages read, (?P<landed>\d+) landed, "
    r"(?P<rejected>\d+) rejected, (?P<already>\d+) already landed"
)


def _stopped_cleanly(process: subprocess.Popen[bytes], signum: signal.Signals) -> dict[str, int]:
    """Send ``signum`` to the Python driver only (as a scheduler or Ctrl-C in a terminal would) and check
    the process ended by itself, its last line the summary; returns the summary's counts."""
    os.kill(process.pid, signum)
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 0, output[-3000:]
    assert "reentrant" not in output and "Py4JNetworkError" not in output, output[-3000:]
    # Spark's JVM may still log a line of its own after ours (e.g. "Failed to cancel job group"): the last
    # line of ours is the summary.
    ours = [line for line in output.splitlines() if line.strip() and not JVM_LOG_LINE.match(line)]
    match = DONE.search(ours[-1])
    assert match, output[-3000:]
    return {name: int(value) for name, value in match.groupdict().items()}


def _landed_once(settings: Settings, topic: str) -> tuple[pa.Table, pa.Table]:
    """:func:`landed`, checked that no Kafka message is in the lake twice."""
    events, rejected = landed(settings, topic)
    rows = coordinates(events, rejected)
    assert len(rows) == len(set(rows)), "a Kafka message landed twice"
    return events, rejected


def test_crash_signals_and_sigkill_on_one_topic_land_every_offset_exactly_once(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    """One topic, one checkpoint, five ingestion processes in turn (each a real spark-submit-like job), on a
    lake of its own:

    1. killed between its two commits (the events of its first batch committed, the rejected not yet);
    2. stopped by SIGTERM mid-stream: it replays that batch (its events counted as already landed, not
       written twice) and stops between batches, its summary counting exactly what reached the lake;
    3. stopped by SIGINT the same way;
    4. after a build of what has landed, the lake maintained while it appends (retention of every raw event
       that build extracted, compaction, manifest rewrite, expiry of every snapshot but the last, orphan
       removal of both raw tables), then SIGKILLed mid-stream;
    5. run to the end of the topic: every offset landed exactly once, less the retired events.
    """
    total = 3000
    publish_raw(kafka_broker.bootstrap_servers, topic, _mixed_messages(total), kafka_broker.max_message_bytes)
    own = lake_settings(
        spark,
        base_settings,
        tmp_path / "lake",
        bootstrap_servers=kafka_broker.bootstrap_servers,
        topic=topic,
        maintain=MaintainSettings(
            snapshot_max_age_hours=1e-6,
            retain_last_snapshots=1,
            compact_min_input_files=2,
            raw_retention_days=1,  # the events' eventTime is 2026-11-20: every one is older
        ),
    )
    settings = for_topic(own, kafka_broker, topic, tmp_path / "ckpt", max_offsets_per_trigger=150)

    crashed = _ingest_process(settings, "1 second", **{FAULT_ENV: "0"})
    crashed_output = crashed.communicate(timeout=300)[0].decode()
    assert crashed.returncode == -signal.SIGKILL, crashed_output[-3000:]
    events, rejected = _landed_once(settings, topic)
    first_batch_events = before = events.num_rows
    assert 0 < first_batch_events < 150 and rejected.num_rows == 0  # events committed, rejected not yet

    for signum in (signal.SIGTERM, signal.SIGINT):
        process = _ingest_process(settings, "1 second")
        seen = _wait_for_rows(settings, topic, process, before + 1)
        summary = _stopped_cleanly(process, signum)
        after = sum(table.num_rows for table in _landed_once(settings, topic))
        assert before < seen <= after < total
        replayed = first_batch_events if signum == signal.SIGTERM else 0
        assert summary["already"] == replayed, summary
        # Stopped between batches: what it read and did not find landed is exactly what the lake gained.
        assert summary["read"] - summary["already"] == after - before, (summary, before, after)
        before = after

    # Retention retires only what a finished build has extracted: build what has landed so far.
    assert build_lineage(spark, settings).mode == "full"
    extracted = set(coordinates(_landed_once(settings, topic)[0]))
    assert len(extracted) == before - rejected_count(settings, topic)

    killed = _ingest_process(settings, "1 second")
    seen = _wait_for_rows(settings, topic, killed, before + 1)
    # Maintenance commits between the ingestion's appends (docs/operations.md: it may keep running): the
    # retention's DELETE, whose filter no appended file can match, and the compaction of what is left.
    maintained = {t.table: t for t in maintain_lake(spark, settings).tables}
    during = sum(table.num_rows for table in _landed_once(settings, topic))
    os.killpg(killed.pid, signal.SIGKILL)
    killed_output = killed.communicate(timeout=60)[0].decode()
    # Appends went on while it maintained: more rows after it than before it, the retired ones counted.
    assert before < seen < during + len(extracted) <= total, (seen, during, killed_output[-3000:])
    raw_events = maintained[settings.catalog.events_table]
    assert raw_events.retired_rows == len(extracted), raw_events
    assert raw_events.rewritten_files > 0 and raw_events.expired_files > 0, raw_events
    # A manifest rewrite that lost to the ingestion's commits three times is left to the next run, said so.
    assert raw_events.rewritten_manifests > 0 or raw_events.manifests_skipped, raw_events

    rest = _ingest_process(
        settings.model_copy(
            update={"ingest": settings.ingest.model_copy(update={"max_offsets_per_trigger": None})}
        ),
        "availableNow",
    )
    rest_output = rest.communicate(timeout=300)[0].decode()
    assert rest.returncode == 0, rest_output[-3000:]
    events, rejected = _landed_once(settings, topic)
    # Every offset exactly once, less the retired events: those the build had extracted, and only those.
    landed_now = coordinates(events, rejected)
    assert not extracted & set(landed_now)
    assert sorted([*landed_now, *extracted]) == expected_coordinates(kafka_broker, topic)
    assert (events.num_rows + len(extracted), rejected.num_rows) == (total - total // 25, total // 25)


def rejected_count(settings: Settings, topic: str) -> int:
    return landed(settings, topic)[1].num_rows


def land_cases(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    topic: str,
    tmp_path: Path,
    values: list[bytes],
) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """Publish ``values`` to ``topic`` (keys k0, k1, ...), run the ingestion on it once (availableNow) and
    return its raw.events rows and its raw.rejected rows, each by the index of the value it came from
    (found by the row's Kafka coordinates: a rejected row's value may be redacted)."""
    publish_raw(
        kafka_broker.bootstrap_servers,
        topic,
        [(f"k{i}".encode(), value) for i, value in enumerate(values)],
        kafka_broker.max_message_bytes,
    )
    settings = for_topic(base_settings, kafka_broker, topic, tmp_path / "ckpt")

    run_ingest(spark, settings, trigger="availableNow")

    events, rejected = landed(settings, topic)
    sent = read_topic(kafka_broker, topic)
    index = {value: i for i, value in enumerate(values)}

    def by_case(rows: pa.Table) -> dict[int, dict[str, Any]]:
        found = {index[sent[(r["kafka_partition"], r["kafka_offset"])]]: r for r in rows.to_pylist()}
        assert len(found) == rows.num_rows, "a message landed twice"
        return found

    return by_case(events), by_case(rejected)


def reasons(
    events: dict[int, dict[str, Any]], rejected: dict[int, dict[str, Any]], count: int
) -> list[str | None]:
    """Each case's rejection reason; None for a case that landed in raw.events, NOT LANDED for neither."""
    return [
        rejected[i]["reason"] if i in rejected else None if i in events else "NOT LANDED"
        for i in range(count)
    ]


def test_adversarial_inputs_of_issue_18_are_classified(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    run_id = "5f0c7a3e-2b1d-4c8e-9f6a-0d1e2f3a4b5c"

    def message(**changes: object) -> bytes:
        value: dict[str, object] = {
            "eventType": "START",
            "eventTime": "2026-11-20T08:00:00Z",
            "producer": "test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id},
            "job": {"namespace": "test", "name": "adversarial"},
        }
        for key, change in changes.items():
            if change is None:
                value.pop(key)
            else:
                value[key] = change
        return json.dumps(value).encode()

    cases = [
        (message(eventTime="9999-12-31T23:59:59-01:00"), "EVENT_TIME_OUT_OF_RANGE"),
        (message(eventTime="12:34:56"), "INVALID_EVENT_TIME"),
        (message(eventTime="2026"), "INVALID_EVENT_TIME"),
        (message(run={"runId": run_id + "\n"}), "INVALID_RUN_ID"),
        (message(run=None), "MISSING_FIELD"),
        (message(run={"runId": run_id.upper()}), None),
    ]
    events, rejected = land_cases(
        spark, base_settings, kafka_broker, topic, tmp_path, [value for value, _ in cases]
    )
    assert reasons(events, rejected, len(cases)) == [reason for _, reason in cases]
    assert [(r["run_id"], r["event_json"]) for r in events.values()] == [(run_id, cases[-1][0].decode())]


def test_issue_37_inputs_get_reasons_of_their_own_and_keep_no_secret(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    """Two events in one message, a value beyond Jackson's limits, an eventTime in year 9999, and
    secrets behind a JSON escape or in bytes that are not UTF-8, through the real broker and ingestion."""
    run_id = "6a1d8b4f-3c2e-4d9f-8a7b-1e2f3a4b5c6d"
    event = {
        "eventType": "START",
        "eventTime": "2026-11-20T08:00:00Z",
        "producer": "test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id},
        "job": {"namespace": "test", "name": "issue-37"},
    }
    one = json.dumps(event).encode()
    ahead = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    cases: list[tuple[bytes, str | None]] = [
        (one + one, "TRAILING_DATA"),
        (one + b"\n" + one + b"\n", "TRAILING_DATA"),
        (one + b" x", "TRAILING_DATA"),
        (one[:-1] + b', "n": ' + b"9" * 1001 + b"}", "JSON_LIMIT_EXCEEDED"),
        (json.dumps({**event, "producer": "p" * 20_000_001}).encode(), "JSON_LIMIT_EXCEEDED"),
        (json.dumps({**event, "eventTime": "9999-12-31T23:59:59Z"}).encode(), "EVENT_TIME_IN_FUTURE"),
        (json.dumps({**event, "eventTime": ahead}).encode(), "EVENT_TIME_IN_FUTURE"),
        (b'\xff\xfe{"db.password": "hunter2-not-utf8"}', "NOT_UTF8"),
        (one[:-1] + b', "db.pass\\u0077ord": "s3cret-escaped"}', None),
    ]
    events, rows = land_cases(
        spark, base_settings, kafka_broker, topic, tmp_path, [value for value, _ in cases]
    )
    assert reasons(events, rows, len(cases)) == [reason for _, reason in cases]
    assert rows[4]["detail"].endswith("a string value longer than 20000000 characters")
    assert rows[6]["detail"] == f"eventTime is more than 86400 s after the message was received: {ahead}"
    assert b"hunter2" not in rows[7]["value"] and rows[7]["value"].startswith(b"\xff\xfe{")
    assert rows[7]["redactions"] == 1
    [landed_event] = events.values()
    assert "s3cret" not in landed_event["event_json"] and landed_event["redactions"] == 1
    assert json.loads(landed_event["event_json"])["db.password"] == "***REDACTED***"


def test_a_message_over_the_limit_once_decompressed_is_refused_by_the_broker(
    kafka_broker: LocalKafka, topic: str
) -> None:
    """A zstd-compressed message of a few kilobytes that decompresses to more than ``max_message_bytes``:
    our topics store messages uncompressed, so the broker checks the decompressed size and refuses it; a
    topic that keeps the producer's compression takes it (what the ingestion would otherwise have to hold)."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    limit = kafka_broker.max_message_bytes
    bomb = json.dumps({"eventType": "START", "padding": "x" * (limit + 2 * RECORD_HEADROOM_BYTES)}).encode()
    fits = json.dumps({"eventType": "START", "padding": "x" * (limit // 2)}).encode()
    keeps_compression = f"{topic}.producer"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    config = {"max.message.bytes": str(limit), "compression.type": "producer"}
    for future in admin.create_topics([NewTopic(keeps_compression, 1, 1, config=config)]).values():
        future.result(timeout=30)

    def produce(name: str) -> list[str]:
        # The client lets the message through (its own limit is raised): only the broker can refuse it.
        producer = Producer(
            {
                "bootstrap.servers": kafka_broker.bootstrap_servers,
                "compression.type": "zstd",
                "message.max.bytes": str(4 * limit),
                "acks": "all",
            }
        )
        outcomes: list[str] = []
        for value in (bomb, fits):
            producer.produce(name, value, callback=lambda e, _m: outcomes.append(e.name() if e else "stored"))
            producer.flush(60)
        return outcomes

    assert produce(topic) == [KafkaError(KafkaError.MSG_SIZE_TOO_LARGE).name(), "stored"]
    assert sorted(map(len, read_topic(kafka_broker, topic).values())) == [len(fits)]
    assert produce(keeps_compression) == ["stored", "stored"]


RECREATED = re.compile(r"topic (?P<topic>\S+) was deleted and created again: (?P<n>\d+) offsets")


def _collision_warnings(caplog: pytest.LogCaptureFixture, topic: str) -> list[tuple[int, str]]:
    """(offsets collided, message) of each WARNING of the ingestion about another incarnation of ``topic``."""
    found = []
    for record in caplog.records:
        match = RECREATED.search(record.getMessage())
        if record.levelno == logging.WARNING and match and match["topic"] == topic:
            found.append((int(match["n"]), record.getMessage()))
    return found


def test_a_recreated_topic_lands_its_messages_over_the_old_topics_rows_at_the_same_offsets(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    topic: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 37: a topic deleted and created again starts at offset 0 again. Its messages have the old
    topic's coordinates; they must land all the same (the old rows are another incarnation's, told apart by
    kafka_topic_id), and the job says so. The old checkpoint's offsets are refused."""
    own = lake_settings(
        spark, base_settings, tmp_path / "lake", bootstrap_servers=kafka_broker.bootstrap_servers, topic=topic
    )
    count, valid = 100, 96  # a malformed message every 25th
    publish_raw(kafka_broker.bootstrap_servers, topic, _mixed_messages(count), kafka_broker.max_message_bytes)
    old_id = topic_id(kafka_broker, topic)
    first = run_ingest(
        spark, for_topic(own, kafka_broker, topic, tmp_path / "ckpt-1"), trigger="availableNow"
    )
    assert (first.rows_in, first.landed, first.rejected, first.already_landed) == (count, valid, 4, 0)

    new_id = recreate_topic(kafka_broker, topic)
    new_messages = _mixed_messages(count, job="recreated")
    publish_raw(kafka_broker.bootstrap_servers, topic, new_messages, kafka_broker.max_message_bytes)
    old_coordinates = sorted(coordinates(*landed(own, topic)))
    assert old_coordinates == expected_coordinates(kafka_broker, topic)  # the same offsets, all of them

    # The checkpoint of the old topic: its offsets would skip or misread the new topic's messages.
    with pytest.raises(TopicRecreated, match=f"topic {re.escape(topic)} was deleted and created again"):
        run_ingest(spark, for_topic(own, kafka_broker, topic, tmp_path / "ckpt-1"), trigger="availableNow")

    with caplog.at_level(logging.WARNING, logger="lineage.ingest.stream"):
        second = run_ingest(
            spark, for_topic(own, kafka_broker, topic, tmp_path / "ckpt-2"), trigger="availableNow"
        )

    assert (second.rows_in, second.landed, second.rejected, second.already_landed) == (count, valid, 4, 0)
    events, rejected = landed(own, topic)
    assert (events.num_rows, rejected.num_rows) == (2 * valid, 2 * 4)
    assert Counter(events.column("kafka_topic_id").to_pylist()) == {old_id: valid, new_id: valid}
    assert Counter(rejected.column("kafka_topic_id").to_pylist()) == {old_id: 4, new_id: 4}
    jobs = {r["job_name"].rsplit("-", 1)[0] for r in events.to_pylist() if r["kafka_topic_id"] == new_id}
    assert jobs == {"recreated"}
    warnings = _collision_warnings(caplog, topic)
    assert sum(n for n, _ in warnings) == count, warnings
    assert all(old_id in text and new_id in text for _, text in warnings), warnings


def test_rows_landed_before_topic_ids_count_as_landed_only_when_they_are_the_same_record(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    topic: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A lake of the version before topic ids: its raw tables get the column (null in every old row) when
    the ingestion starts. A null-id row counts as landed when its Kafka timestamp and size are the
    message's (the topic re-read with a new checkpoint lands nothing twice), and not otherwise (a recreated
    topic's messages land, with the warning)."""
    own = lake_settings(
        spark, base_settings, tmp_path / "lake", bootstrap_servers=kafka_broker.bootstrap_servers, topic=topic
    )
    count, valid = 50, 48
    publish_raw(kafka_broker.bootstrap_servers, topic, _mixed_messages(count), kafka_broker.max_message_bytes)
    run_ingest(spark, for_topic(own, kafka_broker, topic, tmp_path / "ckpt-1"), trigger="availableNow")
    for table in (own.catalog.events_table, own.catalog.rejected_table):
        spark.sql(f"ALTER TABLE {table} DROP COLUMN kafka_topic_id")  # as the previous version made them

    reread = run_ingest(
        spark, for_topic(own, kafka_broker, topic, tmp_path / "ckpt-2"), trigger="availableNow"
    )

    assert (reread.rows_in, reread.landed, reread.rejected, reread.already_landed) == (count, 0, 0, count)
    events, rejected = landed(own, topic)
    assert set(
        events.column("kafka_topic_id").to_pylist() + rejected.column("kafka_topic_id").to_pylist()
    ) == {None}

    new_id = recreate_topic(kafka_broker, topic)
    publish_raw(
        kafka_broker.bootstrap_servers,
        topic,
        _mixed_messages(count, "recreated"),
        kafka_broker.max_message_bytes,
    )
    with caplog.at_level(logging.WARNING, logger="lineage.ingest.stream"):
        after = run_ingest(
            spark, for_topic(own, kafka_broker, topic, tmp_path / "ckpt-3"), trigger="availableNow"
        )

    assert (after.rows_in, after.landed, after.rejected, after.already_landed) == (count, valid, 2, 0)
    events, rejected = landed(own, topic)
    assert Counter(events.column("kafka_topic_id").to_pylist()) == {None: valid, new_id: valid}
    warnings = _collision_warnings(caplog, topic)
    assert sum(n for n, _ in warnings) == count and all("null" in text for _, text in warnings), warnings


def test_the_local_broker_creates_no_topic_by_itself(kafka_broker: LocalKafka) -> None:
    """Issue 37: a topic appears only when our code creates it, with its settings; a producer's first
    message (librdkafka asks the broker to create a topic it does not know) creates nothing."""
    from confluent_kafka import Producer

    absent = f"absent.{uuid.uuid4().hex[:10]}"
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "message.timeout.ms": 5000})
    outcomes: list[str] = []
    producer.produce(absent, b"{}", callback=lambda e, _m: outcomes.append(e.name() if e else "stored"))
    producer.flush(30)

    assert len(outcomes) == 1 and outcomes[0] != "stored", outcomes
    assert topic_id(kafka_broker, absent) is None


def test_a_topic_recreated_under_a_running_ingestion_stops_it_before_anything_of_the_new_topic_lands(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, topic: str, tmp_path: Path
) -> None:
    """The running query's offsets belong to the old topic: it must stop (non-zero, saying why), not go on
    reading the new topic from the old offsets (which would skip the new topic's first messages). Either
    Spark's source stops it (offsets that went back, failOnDataLoss) or the batch's topic-id check does."""
    own = lake_settings(
        spark, base_settings, tmp_path / "lake", bootstrap_servers=kafka_broker.bootstrap_servers, topic=topic
    )
    settings = for_topic(own, kafka_broker, topic, tmp_path / "ckpt")
    create_raw_tables(spark, own.catalog, own.ingest.target_file_size_bytes)  # looked at while it runs
    publish_raw(kafka_broker.bootstrap_servers, topic, _mixed_messages(50), kafka_broker.max_message_bytes)
    process = _ingest_process(settings, "1 second")
    try:
        assert _wait_for_rows(settings, topic, process, 50) == 50
        new_id = recreate_topic(kafka_broker, topic)
        publish_raw(
            kafka_broker.bootstrap_servers,
            topic,
            _mixed_messages(150, "recreated"),
            kafka_broker.max_message_bytes,
        )
        output = process.communicate(timeout=240)[0].decode()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=60)

    assert process.returncode not in (0, None), output[-3000:]
    ours = f"topic {topic} was deleted and created again while the ingestion ran"
    spark_data_loss = "may have been missed" in output.lower() or "failondataloss" in output.lower()
    assert ours in output or spark_data_loss, output[-3000:]
    events, rejected = landed(own, topic)
    assert (
        new_id
        not in events.column("kafka_topic_id").to_pylist() + rejected.column("kafka_topic_id").to_pylist()
    )
    assert events.num_rows + rejected.num_rows == 50
