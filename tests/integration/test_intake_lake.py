"""End to end: the lab's events sent over HTTP, then the existing ingestion and build, into lake.lineage.*.

Producers use openlineage-python's HTTP transport (gzip on) against `lineage serve`; the malformed
messages are posted raw. The ingestion (availableNow) and the build then run on the service's topic in the
test session's SparkSession, and the lake must hold what it holds when the same events come by Kafka: every
message in exactly one raw table, each rejection with the reason the HTTP answer gave.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from openlineage.client import OpenLineageClient
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.demo.events import MALFORMED, lab_events
from lineage.ingest.stream import run_ingest
from lineage.io.catalog import open_catalog
from lineage.io.local_kafka import LocalKafka
from lineage.io.publish import topic_message_count
from lineage.settings import Settings
from tests.fixtures.intake import Intake
from tests.fixtures.lake import LAB_ALIAS_RULES, lake_settings

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_events_posted_over_http_reach_the_lineage_tables(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    intake: Intake,
    tmp_path: Path,
) -> None:
    assert "WITHOUT authentication" in intake.log()  # no key configured: it says so at start
    client = OpenLineageClient(
        config={"transport": {"type": "http", "url": intake.url, "compression": "gzip"}}
    )
    lab = [e.event for e in lab_events()]
    for event in lab:
        client.emit(event)
    answered = Counter()
    for value, reason in MALFORMED:
        if value is None:  # a null Kafka value has no HTTP equivalent (an empty body is the empty value)
            continue
        answer = requests.post(
            f"{intake.url}/api/v1/lineage",
            data=value,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, reason)
        answered[reason] += 1
    settings = lake_settings(
        spark,
        base_settings,
        tmp_path,
        bootstrap_servers=kafka_broker.bootstrap_servers,
        topic=intake.topic,
        build=base_settings.build.model_copy(update={"alias_rules": LAB_ALIAS_RULES}),
    )

    progress = run_ingest(spark, settings, trigger="availableNow")
    result = build_lineage(spark, settings, now=NOW)

    messages = topic_message_count(kafka_broker.bootstrap_servers, intake.topic)
    assert (progress.rows_in, progress.landed, progress.rejected) == (
        messages,
        len(lab),
        sum(answered.values()),
    )
    catalog = open_catalog(settings.catalog)
    rejected = catalog.load_table("raw.rejected").scan().to_arrow().to_pylist()
    assert Counter(r["reason"] for r in rejected) == answered
    assert result.new_events == len(lab)
    runs = {r["run_id"]: r for r in catalog.load_table("lineage.runs").scan().to_arrow().to_pylist()}
    assert set(runs) == {e.run.runId for e in lab}
    stuck = next(r for r in runs.values() if r["job_name"] == "supplier-stats")
    assert (stuck["reported_state"], stuck["inferred_state"]) == ("RUNNING", "LOST")
    aliases = catalog.load_table("lineage.dataset_aliases").scan().to_arrow().to_pylist()
    canonical = {
        (a["alias_namespace"], a["alias_name"]): (a["dataset_namespace"], a["dataset_name"]) for a in aliases
    }
    assert canonical[("kafka://broker:9092", "orders")] == ("kafka://kafka-1:19092", "orders")
    assert canonical[("s3a://warehouse", "default.db/orders/")] == ("s3://warehouse", "default.db/orders")


def test_the_intake_and_the_ingestion_give_issue_37_inputs_the_same_reason(
    spark: SparkSession, base_settings: Settings, kafka_broker: LocalKafka, intake: Intake, tmp_path: Path
) -> None:
    """Two events in one body, a value beyond Jackson's limits and an eventTime in year 9999: the HTTP
    answer's code is the reason the lake gives the message the intake produced."""
    run_id = "7b2e9c5a-4d3f-4e0a-9b8c-2f3a4b5c6d7e"
    event = {
        "eventType": "START",
        "eventTime": "2026-11-20T08:00:00Z",
        "producer": "test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id},
        "job": {"namespace": "test", "name": "issue-37-over-http"},
    }
    one = json.dumps(event).encode()
    ahead = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    cases = [
        (one + b"\n" + one, "TRAILING_DATA"),
        (one + one, "TRAILING_DATA"),
        (one[:-1] + b', "n": ' + b"9" * 1001 + b"}", "JSON_LIMIT_EXCEEDED"),
        (json.dumps({**event, "producer": "p" * 20_000_001}).encode(), "JSON_LIMIT_EXCEEDED"),
        (json.dumps({**event, "eventTime": "9999-12-31T23:59:59Z"}).encode(), "EVENT_TIME_IN_FUTURE"),
        (json.dumps({**event, "eventTime": ahead}).encode(), "EVENT_TIME_IN_FUTURE"),
    ]
    offsets = {}
    for value, reason in cases:
        answer = requests.post(
            f"{intake.url}/api/v1/lineage",
            data=value,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["stored"]) == (400, reason, True), error
        offsets[(error["partition"], error["offset"])] = (reason, error["message"])
    settings = lake_settings(
        spark, base_settings, tmp_path, bootstrap_servers=kafka_broker.bootstrap_servers, topic=intake.topic
    )

    run_ingest(spark, settings, trigger="availableNow")

    rejected = open_catalog(settings.catalog).load_table("raw.rejected").scan().to_arrow().to_pylist()
    found = {
        (r["kafka_partition"], r["kafka_offset"]): (r["reason"], r["detail"])
        for r in rejected
        if (r["kafka_partition"], r["kafka_offset"]) in offsets
    }
    assert found == offsets  # the same reason, and the same detail as the answer's message
