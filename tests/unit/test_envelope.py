"""Validation and envelope extraction on small inline DataFrames (no Kafka, no Iceberg)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.ingest import verdicts
from lineage.transforms import envelope as env

KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
RUN_ID = "0b8f6b2e-8a3e-4c7e-9a51-3f3e8f0a1b2c"
RUN_ID_V7 = "019a9f3c-5c00-7a2b-8c3d-1e2f3a4b5c6d"

GOOD: dict[str, Any] = {
    "eventType": "START",
    "eventTime": "2026-11-20T08:00:00.123Z",
    "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.50.0/integration/flink",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": RUN_ID},
    "job": {"namespace": "flink-jobs", "name": "orders"},
}


def event(**changes: Any) -> bytes:
    """GOOD with dotted-path changes; a value of ``...`` deletes the key."""
    data = copy.deepcopy(GOOD)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value is ...:
            node.pop(last, None)
        else:
            node[last] = value
    return json.dumps(data).encode()


def messages(spark: SparkSession, *values: bytes | None) -> DataFrame:
    rows = [(b"k", v, "input.runs", 0, i, datetime(2026, 11, 20, 8, 0)) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def reasons(
    spark: SparkSession, *values: bytes | None, max_future_seconds: float = 86_400
) -> list[str | None]:
    """What the ingestion gives each message: the envelope's checks and the rest of the rules."""
    parsed = verdicts.parse_messages(messages(spark, *values), max_future_seconds=max_future_seconds)
    parsed = parsed.orderBy("kafka_offset")
    return [r["reason"] for r in parsed.select("reason").collect()]


def test_valid_run_event_has_no_reason(spark: SparkSession) -> None:
    assert reasons(spark, event()) == [None]


def test_run_event_envelope_columns(spark: SparkSession) -> None:
    parsed = env.parse_messages(
        messages(
            spark,
            event(
                **{
                    "run.facets": {
                        "parent": {
                            "run": {"runId": "p-1"},
                            "job": {"namespace": "af", "name": "dag"},
                            "root": {"run": {"runId": "r-1"}, "job": {"namespace": "af", "name": "root"}},
                        }
                    },
                }
            ),
        )
    )
    row = parsed.select(
        "event_kind",
        "event_type",
        "event_time",
        "run_id",
        "job_namespace",
        "job_name",
        "parent_run_id",
        "parent_job_name",
        "root_run_id",
        "root_job_name",
    ).first()
    assert row is not None
    assert row.asDict() == {
        "event_kind": "RunEvent",
        "event_type": "START",
        "event_time": datetime(2026, 11, 20, 8, 0, 0, 123000),
        "run_id": RUN_ID,
        "job_namespace": "flink-jobs",
        "job_name": "orders",
        "parent_run_id": "p-1",
        "parent_job_name": "dag",
        "root_run_id": "r-1",
        "root_job_name": "root",
    }


def test_uuid_v7_run_id_is_accepted(spark: SparkSession) -> None:
    assert reasons(spark, event(**{"run.runId": RUN_ID_V7})) == [None]


def test_event_time_with_offset_is_normalised_to_utc(spark: SparkSession) -> None:
    parsed = env.parse_messages(messages(spark, event(eventTime="2026-11-20T10:00:00+02:00")))
    assert parsed.select("event_time").first()[0] == datetime(2026, 11, 20, 8, 0)


def test_nanosecond_event_time_is_accepted(spark: SparkSession) -> None:
    assert reasons(spark, event(eventTime="2026-11-20T08:00:00.123456789Z")) == [None]


def test_missing_event_type_is_allowed_by_the_spec(spark: SparkSession) -> None:
    assert reasons(spark, event(eventType=...)) == [None]


def test_dataset_event_kind(spark: SparkSession) -> None:
    value = json.dumps(
        {
            "eventTime": GOOD["eventTime"],
            "producer": "p",
            "schemaURL": "u",
            "dataset": {"namespace": "kafka://b:9092", "name": "orders"},
        }
    ).encode()
    row = env.parse_messages(messages(spark, value)).first()
    assert (row["event_kind"], row["dataset_name"], row["reason"]) == ("DatasetEvent", "orders", None)


def test_job_event_kind(spark: SparkSession) -> None:
    value = json.dumps(
        {
            "eventTime": GOOD["eventTime"],
            "producer": "p",
            "schemaURL": "u",
            "job": {"namespace": "n", "name": "j"},
        }
    ).encode()
    row = env.parse_messages(messages(spark, value)).first()
    assert (row["event_kind"], row["job_name"], row["reason"]) == ("JobEvent", "j", None)


def test_run_ids_are_lower_case_in_the_envelope_and_as_received_in_the_json(spark: SparkSession) -> None:
    parent_id, root_id = RUN_ID_V7.upper(), "5C2D1A8E-0000-4000-8000-00000000000A"
    facet = {
        "run": {"runId": parent_id},
        "job": {"namespace": "n", "name": "parent"},
        "root": {"run": {"runId": root_id}, "job": {"namespace": "n", "name": "root"}},
    }
    value = event(**{"run": {"runId": RUN_ID.upper(), "facets": {"parent": facet}}})
    parsed = env.parse_messages(messages(spark, value))
    row = env.valid_events(parsed).first()
    assert (row["run_id"], row["parent_run_id"], row["root_run_id"]) == (
        RUN_ID,
        RUN_ID_V7,
        root_id.lower(),
    )
    assert row["event_json"] == value.decode()


def test_a_run_event_without_run_is_not_taken_for_a_job_event(spark: SparkSession) -> None:
    row = env.parse_messages(messages(spark, event(run=...))).first()
    assert (row["event_kind"], row["reason"], row["detail"]) == (
        "RunEvent",
        env.MISSING_FIELD,
        "required field run.runId is missing or null",
    )


@pytest.mark.parametrize(
    ("event_time", "reason"),
    [
        ("9999-12-31T23:59:59-01:00", "EVENT_TIME_OUT_OF_RANGE"),
        ("10000-01-01T00:00:00Z", env.INVALID_EVENT_TIME),
        ("1969-12-31T23:59:59Z", "EVENT_TIME_OUT_OF_RANGE"),
        ("12:34:56", env.INVALID_EVENT_TIME),
        ("2026", env.INVALID_EVENT_TIME),
        ("2026-11-20T12:34:56", env.INVALID_EVENT_TIME),
        ("9999-12-31T23:59:59Z", None),
    ],
)
def test_event_time_is_a_full_date_time_with_offset_within_the_accepted_years(
    spark: SparkSession, event_time: str, reason: str | None
) -> None:
    # With no limit on how far ahead (ingest.max_future_seconds = 0), only the accepted years count.
    assert reasons(spark, event(eventTime=event_time), max_future_seconds=0) == [reason]


@pytest.mark.parametrize(
    ("event_time", "reason"),
    [
        ("2026-11-21T08:00:00Z", None),  # the Kafka timestamp (2026-11-20T08:00) plus a day, exactly
        ("2026-11-21T08:00:00.000001Z", "EVENT_TIME_IN_FUTURE"),
        ("2026-11-21T09:00:00+01:00", None),
        ("2026-11-21T08:30:00-00:30", "EVENT_TIME_IN_FUTURE"),
        ("9999-12-31T23:59:59Z", "EVENT_TIME_IN_FUTURE"),
        ("2026-11-01T00:00:00Z", None),  # the past is fine, however far
    ],
)
def test_an_event_time_more_than_the_allowed_skew_ahead_of_its_kafka_timestamp_is_refused(
    spark: SparkSession, event_time: str, reason: str | None
) -> None:
    parsed = verdicts.parse_messages(messages(spark, event(eventTime=event_time)), max_future_seconds=86_400)
    row = parsed.select("reason", "detail").first()
    assert row["reason"] == reason
    if reason:
        assert row["detail"] == f"eventTime is more than 86400 s after the message was received: {event_time}"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, env.EMPTY_VALUE),
        (b"", env.EMPTY_VALUE),
        (b" \n ", env.EMPTY_VALUE),
        (b"\xc3\x28", env.NOT_UTF8),
        (b"not json", env.NOT_JSON),
        (b'{"eventTime": ', env.NOT_JSON),
        (b"[1, 2]", env.NOT_JSON_OBJECT),
        (b'"START"', env.NOT_JSON_OBJECT),
        (b"42", env.NOT_JSON_OBJECT),
        (b'{"eventTime": "2026-11-20T08:00:00Z", "producer": "p", "schemaURL": "u"}', env.UNKNOWN_EVENT_KIND),
    ],
)
def test_message_level_reasons(spark: SparkSession, value: bytes | None, reason: str) -> None:
    assert reasons(spark, value) == [reason]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"eventTime": ...}, env.MISSING_FIELD),
        ({"eventTime": None}, env.MISSING_FIELD),
        ({"producer": ...}, env.MISSING_FIELD),
        ({"schemaURL": ...}, env.MISSING_FIELD),
        ({"run.runId": ...}, env.MISSING_FIELD),
        ({"job.namespace": ...}, env.MISSING_FIELD),
        ({"job.name": ...}, env.MISSING_FIELD),
        ({"eventTime": 1763625600}, env.INVALID_FIELD_TYPE),
        ({"producer": {"name": "x"}}, env.INVALID_FIELD_TYPE),
        ({"run.runId": 7}, env.INVALID_FIELD_TYPE),
        ({"job.name": ["a"]}, env.INVALID_FIELD_TYPE),
        ({"eventTime": "yesterday"}, env.INVALID_EVENT_TIME),
        ({"eventType": "STARTED"}, env.UNKNOWN_EVENT_TYPE),
        ({"eventType": 1}, env.UNKNOWN_EVENT_TYPE),
        ({"run.runId": "run-42"}, env.INVALID_RUN_ID),
    ],
)
def test_field_level_reasons(spark: SparkSession, changes: dict[str, Any], reason: str) -> None:
    assert reasons(spark, event(**changes)) == [reason]


def test_detail_names_the_field_and_its_type(spark: SparkSession) -> None:
    parsed = env.parse_messages(messages(spark, event(eventTime=1763625600)))
    assert parsed.select("detail").first()[0] == "field eventTime must be a string, got BIGINT"


def test_every_reason_code_is_declared(spark: SparkSession) -> None:
    values = [
        None,
        b"\xc3\x28",
        b"x",
        b"[]",
        event(eventTime=...),
        event(eventTime=1),
        event(eventTime="x"),
        event(eventTime="1969-12-31T23:59:59Z"),
        event(eventType="X"),
        event(**{"run.runId": "r"}),
        b'{"eventTime": "2026-11-20T08:00:00Z", "producer": "p", "schemaURL": "u"}',
        event() + b"\n" + event(),
        b'{"n": ' + b"1" * 1001 + b"}",
        event(eventTime="9999-12-31T23:59:59Z"),
    ]
    assert set(reasons(spark, *values)) == set(env.REASONS)


def test_split_keeps_every_message_exactly_once(spark: SparkSession) -> None:
    parsed = env.parse_messages(messages(spark, event(), b"x", None, event(eventType="RUNNING"), b"[]"))
    ts = F.lit(datetime(2026, 11, 21)).cast("timestamp")
    landed = env.valid_events(parsed, ts).select("kafka_offset")
    rejected = env.rejected_messages(parsed, ts).select("kafka_offset")
    expected = messages(spark, *[b""] * 5).select(F.col("offset").alias("kafka_offset"))
    assert_df_equality(landed.unionByName(rejected), expected, ignore_row_order=True, ignore_nullable=True)


def test_valid_events_keep_the_json_and_coordinates(spark: SparkSession) -> None:
    value = event()
    parsed = env.parse_messages(messages(spark, value))
    row = env.valid_events(parsed).first()
    assert row is not None
    assert list(row.asDict()) == list(env.EVENT_COLUMNS)
    assert (
        row["event_json"],
        row["payload_bytes"],
        row["kafka_topic"],
        row["kafka_offset"],
        row["kafka_key"],
    ) == (value.decode(), len(value), "input.runs", 0, "k")


def test_rejected_rows_keep_the_original_bytes(spark: SparkSession) -> None:
    value = b"\xff\xfe{not utf-8}"
    row = env.rejected_messages(env.parse_messages(messages(spark, value))).first()
    assert row is not None
    assert list(row.asDict()) == list(env.REJECTED_COLUMNS)
    assert (bytes(row["value"]), row["reason"], row["payload_bytes"]) == (value, env.NOT_UTF8, len(value))


def test_a_number_beyond_the_digit_limit_is_told_from_invalid_json(spark: SparkSession) -> None:
    long_number = event(**{"run.facets.n": int("9" * 1001)})
    assert reasons(spark, long_number, event(**{"run.facets.n": 10**900})) == ["JSON_LIMIT_EXCEEDED", None]


def test_a_redacted_message_with_trailing_data_is_judged_on_its_stored_bytes(spark: SparkSession) -> None:
    secret = event(**{"job.facets.sql.query": "jdbc:postgresql://db/app?user=app&password=hunter2"})
    parsed = verdicts.parse_messages(messages(spark, secret + b" " + event(), secret))
    rows = parsed.orderBy("kafka_offset").select("reason", "redactions", "value").collect()
    assert [r["reason"] for r in rows] == ["TRAILING_DATA", None]
    assert rows[0]["redactions"] == rows[1]["redactions"] > 0
    assert all(b"hunter2" not in r["value"] for r in rows)
