"""The streaming ingestion's verdict on each Kafka message: the envelope's checks, then the rest of the rules.

:func:`lineage.transforms.envelope.parse_messages` applies checks 1 to 10 of :mod:`lineage.events.rules`
as Spark column expressions. Three answers need more than Spark's parser gives, and this module adds them
to its output with the precedence the rules give them:

- ``TRAILING_DATA`` (check 3): Spark's ``try_parse_json`` reads the first JSON value of a message and
  ignores what follows it, so ``{...}{...}`` would land as its first event, the second lost.
- ``JSON_LIMIT_EXCEEDED`` (check 3): ``try_parse_json`` gives null for a message beyond one of Jackson's
  limits as for one that is not JSON at all; the detail names the limit.
- ``EVENT_TIME_IN_FUTURE`` (check 11): an eventTime more than ``ingest.max_future_seconds`` after the
  message was received (its Kafka timestamp, or the ingestion's clock if that is earlier: a replay of old
  messages gets the verdict they got when they were new, and a producer whose clock runs ahead cannot
  vouch for its own eventTime with its record's timestamp).

The first two are decided by :func:`lineage.events.validate.json_problem`, the intake's own Python, in an
Arrow UDF, for the few messages that need it: those Spark's parser refused (``NOT_JSON`` so far), and those
that may hold more than one value. The second set is found by Jackson in Spark, exactly enough: a message
that is one JSON value ``V`` is one element when wrapped as ``[V]`` and is a member when wrapped as
``{"k":V}``; data after ``V`` either breaks a wrap (most data), or makes more elements (``,...``), or
closes the array wrap early (``]...``, which breaks the object wrap). Nesting one level deeper can refuse
a message at the depth limit: it is asked about too, and Python decides.

Messages that are not valid UTF-8 keep their bytes, secrets aside (:func:`lineage.events.redact.redact_bytes`
reads them leniently); their ``redactions`` count is taken here, on the bytes.
"""

from __future__ import annotations

import re

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lineage.events import redact, rules
from lineage.events.validate import json_problem
from lineage.transforms import envelope

_PROBLEM = "struct<reason:string,detail:string>"
_ASK = "_ask"  # a column of the envelope stage: the message goes to json_problem


def _json_problems(values: pa.Array) -> pa.Array:
    """:func:`json_problem` of each non-null message (null: one JSON value the parser takes)."""
    out: list[dict[str, str] | None] = [None] * len(values)
    for i in range(len(values)):
        value = values[i].as_py()
        if value is not None:
            found = json_problem(value)
            if found is not None:
                out[i] = {"reason": found[0], "detail": found[1]}
    return pa.array(out, pa.struct([("reason", pa.string()), ("detail", pa.string())]))


def _may_hold_more(text: Column) -> Column:
    """True for every message holding data after its first JSON value (and for a few others)."""
    as_element = F.json_array_length(F.concat(F.lit("["), text, F.lit("]")))
    as_member = F.json_object_keys(F.concat(F.lit('{"k":'), text, F.lit("}")))
    return F.coalesce(as_element != 1, F.lit(True)) | as_member.isNull()


def _markers(binary: Column) -> Column:
    """Redaction markers in bytes, UTF-8 or not (an invalid byte is read as U+FFFD, the marker is ASCII)."""
    return F.coalesce(F.regexp_count(binary.cast("string"), F.lit(re.escape(redact.MARKER))), F.lit(0))


def parse_messages(
    messages: DataFrame,
    redactor: redact.Redactor | None = redact.DEFAULT,
    max_future_seconds: float = 0.0,
) -> DataFrame:
    """:func:`lineage.transforms.envelope.parse_messages` (same columns), with every rule applied.

    Args:
        messages: rows as Spark's Kafka source gives them.
        redactor: the secret rules, or None (no redaction).
        max_future_seconds: ``ingest.max_future_seconds``; 0: no limit on eventTime ahead of the clock.

    The ingestion runs the two halves itself (:func:`envelope_stage`, persisted, then :func:`judged`):
    with the judging UDF straight on top of the envelope's (a second Python UDF in a row), Spark's
    optimizer inlines the envelope's ``parse_json`` into every expression that reads it, which made the
    whole parse about three times as slow; a persisted stage in between keeps it from doing so.
    """
    return judged(envelope_stage(messages, redactor), max_future_seconds)


def envelope_stage(messages: DataFrame, redactor: redact.Redactor | None = redact.DEFAULT) -> DataFrame:
    """The envelope's verdict, and which messages :func:`judged` must ask :func:`json_problem` about."""
    parsed = envelope.parse_messages(messages, redactor)
    reason = F.col("reason")
    text = F.col("value").cast("string")
    past_the_parser = reason.isNull() | ~reason.isin(rules.EMPTY_VALUE, rules.NOT_UTF8, rules.NOT_JSON)
    ask = (reason == rules.NOT_JSON) | (past_the_parser & _may_hold_more(text))
    return parsed.withColumn(_ASK, ask)


def judged(stage: DataFrame, max_future_seconds: float = 0.0) -> DataFrame:
    """The verdict of every rule on the rows of :func:`envelope_stage` (the envelope's columns)."""
    reason, detail = F.col("reason"), F.col("detail")
    text = F.col("value").cast("string")
    judge = F.arrow_udf(_json_problems, _PROBLEM)  # type: ignore[call-overload]
    problem = judge(F.when(F.col(_ASK), F.col("value")))
    with_problem = stage.withColumn("_problem", problem)
    reason = F.coalesce(F.col("_problem.reason"), reason)
    detail = F.when(F.col("_problem").isNotNull(), F.col("_problem.detail")).otherwise(detail)
    if max_future_seconds > 0:
        received = F.least(F.col("kafka_timestamp"), F.current_timestamp())
        latest = received + F.make_dt_interval(secs=F.lit(max_future_seconds))
        ahead = reason.isNull() & (F.col("event_time") > latest)
        event_time = F.get_json_object(text, "$.eventTime")
        future_detail = F.concat(
            F.lit(rules.detail_in_future(max_future_seconds)),
            F.substring(event_time, 1, rules.DETAIL_VALUE_CHARS),
        )
        reason, detail = (
            F.when(ahead, F.lit(rules.EVENT_TIME_IN_FUTURE)).otherwise(reason),
            F.when(ahead, future_detail).otherwise(detail),
        )
    not_utf8 = ~F.is_valid_utf8(text) | ~F.is_valid_utf8(F.col("kafka_key").cast("string"))
    redactions = F.when(
        F.coalesce(not_utf8, F.lit(False)), _markers(F.col("value")) + _markers(F.col("kafka_key"))
    ).otherwise(F.col("redactions"))
    return with_problem.select(
        *[
            reason.alias(c)
            if c == "reason"
            else detail.alias(c)
            if c == "detail"
            else redactions.alias(c)
            if c == "redactions"
            else F.col(c)
            for c in stage.columns
            if c != _ASK
        ]
    )
