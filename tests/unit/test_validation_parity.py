"""One corpus, two validators: Spark's column expressions and the intake's Python give identical verdicts."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pyspark.sql import SparkSession

from lineage.events import rules
from lineage.events.validate import split_batch, time_limit, validate
from lineage.ingest import verdicts
from tests.unit.validation_corpus import corpus

KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
# Every message's Kafka timestamp, and how far ahead of it an eventTime may be (a day).
RECEIVED = datetime(2026, 11, 20, 8, 0)
MAX_FUTURE_SECONDS = 86_400
LIMIT = time_limit(RECEIVED, MAX_FUTURE_SECONDS)


@pytest.fixture(scope="module")
def spark_verdicts(spark: SparkSession) -> list[tuple[str | None, str | None]]:
    values = [value for _, value in corpus()]
    rows = [(b"k", v, "t", 0, i, RECEIVED) for i, v in enumerate(values)]
    parsed = verdicts.parse_messages(
        spark.createDataFrame(rows, KAFKA_SCHEMA), max_future_seconds=MAX_FUTURE_SECONDS
    )
    found = parsed.select("kafka_offset", "reason", "detail").orderBy("kafka_offset").collect()
    assert [r["kafka_offset"] for r in found] == list(range(len(values)))
    return [(r["reason"], r["detail"]) for r in found]


def test_python_and_spark_give_every_message_the_same_reason_and_detail(
    spark_verdicts: list[tuple[str | None, str | None]],
) -> None:
    mismatches = []
    for (label, value), expected in zip(corpus(), spark_verdicts, strict=True):
        verdict = validate(value, LIMIT)
        if (verdict.reason, verdict.detail) != expected:
            mismatches.append(f"{label}: spark {expected} python {(verdict.reason, verdict.detail)}")
    assert not mismatches, "\n".join(mismatches)


def test_the_corpus_reaches_every_reason(spark_verdicts: list[tuple[str | None, str | None]]) -> None:
    assert {reason for reason, _ in spark_verdicts} == {*rules.REASONS, None}


def test_an_element_of_a_batch_gets_the_verdict_it_gets_alone() -> None:
    standalone = []
    for _, value in corpus():
        if value is None:
            continue
        try:
            json.loads(value.decode("utf-8"))  # only what can sit in an array as one element
        except (ValueError, RecursionError):
            continue
        standalone.append(value.strip(b" \t\r\n"))
    body = b"[\n" + b" ,\n".join(standalone) + b"\n]"
    for limit in (None, LIMIT):
        elements = split_batch(body, limit)
        assert [raw for raw, _ in elements] == standalone
        assert [(v.reason, v.detail) for _, v in elements] == [
            (validate(raw, limit).reason, validate(raw, limit).detail) for raw in standalone
        ]
