"""Validate Kafka messages as OpenLineage events and extract their envelope.

Pure DataFrame -> DataFrame functions, no reads, writes or actions. The streaming path stays light: the
JSON is parsed once into a VARIANT (Spark 4) and only the envelope paths are read from it; nested facets
are left to the batch build, which reads the stored JSON. Measured on this machine, parsing to a variant and
reading a dozen paths costs about the same as ``from_json`` with an envelope schema, and unlike
``from_json`` it tells a JSON string from a number, so mistyped fields are reported precisely.

The rules themselves (fields, their order, event types, patterns, detail texts) are data in
:mod:`lineage.events.rules`, shared with the HTTP intake's Python validator; this module only turns them
into column expressions. ``tests/unit/test_validation_parity.py`` checks both give identical verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lineage.events import redact, rules
from lineage.events.rules import (  # re-exported: the reason codes' historical home
    DATASET_EVENT,
    EMPTY_VALUE,
    EVENT_TYPES,
    INVALID_EVENT_TIME,
    INVALID_FIELD_TYPE,
    INVALID_RUN_ID,
    JOB_EVENT,
    MISSING_FIELD,
    NOT_JSON,
    NOT_JSON_OBJECT,
    NOT_UTF8,
    REASONS,
    RUN_EVENT,
    UNKNOWN_EVENT_KIND,
    UNKNOWN_EVENT_TYPE,
    UUID_PATTERN,
)

__all__ = [
    "DATASET_EVENT",
    "EMPTY_VALUE",
    "EVENT_COLUMNS",
    "EVENT_TYPES",
    "INVALID_EVENT_TIME",
    "INVALID_FIELD_TYPE",
    "INVALID_RUN_ID",
    "JOB_EVENT",
    "MISSING_FIELD",
    "NOT_JSON",
    "NOT_JSON_OBJECT",
    "NOT_UTF8",
    "REASONS",
    "REJECTED_COLUMNS",
    "RUN_EVENT",
    "UNKNOWN_EVENT_KIND",
    "UNKNOWN_EVENT_TYPE",
    "UUID_PATTERN",
    "parse_messages",
    "parse_redacted",
    "rejected_messages",
    "valid_events",
]


def _java_anchored(pattern: str) -> str:
    """A rules pattern matched against the whole string (``\\z``: Java's ``$`` also matches before a
    final line terminator, Python's ``re.fullmatch`` does not)."""
    return f"^(?:{pattern})\\z"


_BLANK_CLASS = "".join(f"\\x{ord(c):02X}" for c in rules.BLANK)
# First non-blank character: '' for empty/blank values, '{' for a JSON object.
_FIRST_CHAR = f"^[{_BLANK_CLASS}]*([^{_BLANK_CLASS}])"

# Columns of ``lake.raw.events`` in table order.
EVENT_COLUMNS = (
    "event_kind",
    "event_type",
    "event_time",
    "run_id",
    "job_namespace",
    "job_name",
    "dataset_namespace",
    "dataset_name",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
    "root_run_id",
    "root_job_namespace",
    "root_job_name",
    "producer",
    "schema_url",
    "event_json",
    "payload_bytes",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
    "kafka_key",
    "ingested_at",
    "redactions",
)

# Columns of ``lake.raw.rejected`` in table order.
REJECTED_COLUMNS = (
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
    "kafka_key",
    "value",
    "payload_bytes",
    "reason",
    "detail",
    "ingested_at",
    "redactions",
)


def _path(v: Column, path: str) -> Column:
    return F.try_variant_get(v, path, "variant")


def _is_string(node: Column) -> Column:
    return F.schema_of_variant(node) == F.lit("STRING")


def _as_string(node: Column) -> Column:
    return F.when(_is_string(node), F.try_variant_get(node, "$", "string"))


def _json_type(node: Column) -> Column:
    """``STRING``, ``BIGINT``, ``OBJECT`` ... for messages; only evaluated on rejected rows."""
    return F.regexp_extract(F.schema_of_variant(node), r"^([A-Z]+)", 1)


def _field_problem(fields: list[tuple[str, Column]]) -> tuple[Column, Column]:
    """First required string field that is missing (or JSON null) or not a string -> (reason, detail)."""
    reason = F.lit(None).cast("string")
    detail = F.lit(None).cast("string")
    for name, node in reversed(fields):
        missing = node.isNull() | F.is_variant_null(node)
        reason = (
            F.when(missing, F.lit(MISSING_FIELD))
            .when(~_is_string(node), F.lit(INVALID_FIELD_TYPE))
            .otherwise(reason)
        )
        detail = (
            F.when(missing, F.lit(rules.detail_missing(name)))
            .when(~_is_string(node), F.concat(F.lit(rules.detail_wrong_type_prefix(name)), _json_type(node)))
            .otherwise(detail)
        )
    return reason, detail


def _head(text: Column) -> Column:
    """The first ``DETAIL_VALUE_CHARS`` characters of a value quoted in a detail."""
    return F.substring(text, 1, rules.DETAIL_VALUE_CHARS)


Judge = Callable[[bytes], "tuple[str, str] | None"]
"""A Python check run on a message's (redacted) bytes in the redaction's UDF: (reason, detail) or None."""

_PROBLEM_TYPE = pa.struct([("reason", pa.string()), ("detail", pa.string())])
_PYTHON_TYPE = pa.struct([("value", pa.binary()), ("key", pa.binary()), ("problem", _PROBLEM_TYPE)])
# The same two types as Spark reads them.
_PROBLEM_DDL = "struct<reason:string,detail:string>"
_PYTHON_DDL = f"struct<value:binary,key:binary,problem:{_PROBLEM_DDL}>"
PROBLEM = "_problem"  # the column :func:`redact_messages` adds when given a judge


def _python_udf(redactor: redact.Redactor | None, judge: Judge | None) -> Callable[..., Column]:
    """One Arrow UDF over (value, key, ask): the bytes with their secrets replaced (null where nothing
    was), and ``judge``'s verdict on the messages ``ask`` picks and on every redacted one.

    Python redacts (:meth:`lineage.events.redact.Redactor.redact`, the rules the HTTP intake applies),
    and only the messages in which pyarrow's one-pass search finds a literal some trigger needs. In Spark
    each literal or trigger searched on its own costs a pass over the message (a regular expression also
    decodes it into a Java string again, and Spark evaluates the lower-cased text once per search inside a
    condition): twenty-odd passes cost more than the rest of the parse (docs/benchmark-tuning.md).

    The judge runs in the same UDF, on the raw columns: a second Python UDF reading what the parse gives
    would sit on top of it, and Spark's optimizer then copies the JSON parse into every expression that
    reads it (or the parse must be persisted first, which cost a third of the ingestion's speed). Its
    ``ask`` is computed on the bytes as received; a redacted message is judged whatever ``ask`` says,
    so the verdict is always the judge's on the stored (redacted) bytes.
    """

    def redact_and_judge(values: pa.Array, keys: pa.Array, ask: pa.Array) -> pa.Array:
        size = len(values)
        new_values: list[bytes | None] = [None] * size
        new_keys: list[bytes | None] = [None] * size
        if redactor is not None:
            for column, out in ((values, new_values), (keys, new_keys)):
                for i in redact.flagged(column, redactor):
                    replaced, count = redact.redact_bytes(column[i].as_py(), redactor)
                    if count:
                        out[i] = replaced
        problems: list[dict[str, str] | None] = [None] * size
        if judge is not None:
            picked = {i for i, a in enumerate(ask.to_pylist()) if a}
            picked.update(i for i, v in enumerate(new_values) if v is not None)
            for i in sorted(picked):
                value = new_values[i] if new_values[i] is not None else values[i].as_py()
                found = judge(value) if value is not None else None
                if found is not None:
                    problems[i] = {"reason": found[0], "detail": found[1]}
        return pa.StructArray.from_arrays(
            [
                pa.array(new_values, pa.binary()),
                pa.array(new_keys, pa.binary()),
                pa.array(problems, _PROBLEM_TYPE),
            ],
            fields=list(_PYTHON_TYPE),
        )

    # A scalar Arrow UDF, told by its type hints (pyspark's stubs still ask for the deprecated type).
    udf: Callable[..., Column] = F.arrow_udf(redact_and_judge, _PYTHON_DDL)  # type: ignore[call-overload]
    return udf


def _markers(binary: Column) -> Column:
    """How many redaction markers the bytes hold; 0 for null."""
    text = binary.cast("string")
    marker = F.lit(re.escape(redact.MARKER))
    # UTF-8 or not: an invalid byte is read as U+FFFD, the marker is ASCII.
    counted = F.when(text.contains(redact.MARKER), F.regexp_count(text, marker))
    return F.coalesce(counted, F.lit(0))


def redact_messages(
    messages: DataFrame,
    redactor: redact.Redactor | None,
    judge: Judge | None = None,
    ask: Column | None = None,
) -> DataFrame:
    """Kafka records with secrets in ``value`` and ``key`` replaced and counted (``redactions``).

    The count is the number of markers in the stored value and key, so a value the HTTP intake already
    redacted counts too. With ``redactor=None`` nothing is replaced (markers are still counted).
    With a ``judge`` (and ``ask``, a boolean column on the received messages saying which to judge), a
    column ``_problem`` (:data:`PROBLEM`: struct of reason and
    detail, null where the judge found nothing or was not asked) is added, computed in the same Python
    UDF as the redaction.
    """
    # payload_bytes: the size as received, not as stored.
    messages = messages.withColumn("payload_bytes", F.coalesce(F.length("value"), F.lit(0)))
    if redactor is None and judge is None:
        return messages.withColumn("redactions", _markers(F.col("value")) + _markers(F.col("key")))
    python = _python_udf(redactor, judge)
    asked = F.coalesce(ask, F.lit(False)) if ask is not None else F.lit(False)
    out = messages.withColumn("_python", python(F.col("value"), F.col("key"), asked))
    replaced = out.withColumns(
        {
            "value": F.coalesce(F.col("_python.value"), F.col("value")),
            "key": F.coalesce(F.col("_python.key"), F.col("key")),
            **({PROBLEM: F.col("_python.problem")} if judge is not None else {}),
        }
    ).drop("_python")
    return replaced.withColumn("redactions", _markers(F.col("value")) + _markers(F.col("key")))


def parse_messages(messages: DataFrame, redactor: redact.Redactor | None = redact.DEFAULT) -> DataFrame:
    """Redact secrets, validate Kafka records and extract the OpenLineage envelope.

    Args:
        messages: rows as Spark's Kafka source gives them (``key``, ``value`` binary; ``topic``,
            ``partition``, ``offset``, ``timestamp``).
        redactor: the secret rules (:mod:`lineage.events.redact`), applied before anything else, so the
            envelope, the stored JSON and everything built from it carry only the marker; ``None``
            turns redaction off.

    Returns:
        One row per message with the envelope columns, the (redacted) ``value`` bytes (the event JSON is
        derived from them on write, so a cached batch holds each payload once), ``redactions`` and, for
        invalid messages, a non-null ``reason`` and ``detail`` (:mod:`lineage.events.rules`).
    """
    return parse_redacted(redact_messages(messages, redactor))


def parse_redacted(messages: DataFrame, max_future_seconds: float = 0.0) -> DataFrame:
    """:func:`parse_messages` of what :func:`redact_messages` gives.

    Where the messages have a judge's ``_problem`` (:data:`PROBLEM`), its verdict comes right after
    checks 1 and 2 (blank, not UTF-8) and before the parser's own. With ``max_future_seconds`` (0: no
    limit), a valid event whose eventTime is more than that after the message was received (its Kafka
    timestamp, or the clock if that is earlier) is ``EVENT_TIME_IN_FUTURE``, the last check.
    """
    judged = PROBLEM in messages.columns
    text = F.col("value").cast("string")
    v = F.col("_v")
    event_time_text = F.col("_event_time_text")
    parent = "$.run.facets.parent"
    with_variant = messages.select(
        F.col("key"),
        F.col("value"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("payload_bytes"),
        F.col("redactions"),
        F.coalesce(F.regexp_extract(text, _FIRST_CHAR, 1), F.lit("")).alias("_first"),
        F.is_valid_utf8(text).alias("_utf8"),
        F.try_parse_json(text).alias("_v"),
        *([F.col(PROBLEM)] if judged else []),
    )
    field_names = dict.fromkeys([*rules.COMMON_FIELDS, *(f for k in rules.KINDS for f in k.fields)])
    nodes = {name: _path(v, f"$.{name}") for name in field_names}
    # A marker key counts whatever its value, JSON null included (try_variant_get gives a variant null).
    kind = F.lit(None).cast("string")
    for event_kind in reversed(rules.KINDS):
        present = F.try_variant_get(v, f"$.{event_kind.marker}", "variant").isNotNull()
        kind = F.when(present, F.lit(event_kind.name)).otherwise(kind)
    event_type_node = _path(v, "$.eventType")
    # Only a RunEvent has eventType: one that has it is a RunEvent whatever other keys it has.
    kind = F.when(
        event_type_node.isNotNull() & ~F.is_variant_null(event_type_node), F.lit(RUN_EVENT)
    ).otherwise(kind)
    event_type = F.upper(_as_string(event_type_node))

    extracted = with_variant.select(
        "*",
        kind.alias("event_kind"),
        _as_string(nodes["eventTime"]).alias("_event_time_text"),
        event_type_node.alias("_event_type_node"),
        event_type.alias("event_type"),
        *[_run_id(_as_string(nodes[n]), c).alias(c) for n, c in _STRING_FIELDS],
        *[_run_id(F.try_variant_get(v, p, "string"), c).alias(c) for p, c in _OPTIONAL_STRINGS(parent)],
    ).withColumn(
        # The shared pattern first: Spark's cast alone also takes '2026', '08:00:00' (today) or region ids.
        "event_time",
        F.when(
            event_time_text.rlike(_java_anchored(rules.EVENT_TIME_PATTERN)),
            F.try_to_timestamp(event_time_text),
        ),
    )

    common_reason, common_detail = _field_problem([(n, nodes[n]) for n in rules.COMMON_FIELDS])
    kind_col = F.col("event_kind")
    kind_reason = F.lit(None).cast("string")
    kind_detail = F.lit(None).cast("string")
    for event_kind in reversed(rules.KINDS):
        problem, problem_detail = _field_problem([(n, nodes[n]) for n in event_kind.fields])
        kind_reason = F.when(kind_col == event_kind.name, problem).otherwise(kind_reason)
        kind_detail = F.when(kind_col == event_kind.name, problem_detail).otherwise(kind_detail)
    type_node = F.col("_event_type_node")
    type_given = type_node.isNotNull() & ~F.is_variant_null(type_node)
    bad_type = type_given & (~_is_string(type_node) | ~F.col("event_type").isin(*EVENT_TYPES))
    bad_run_id = (kind_col == RUN_EVENT) & ~F.col("run_id").rlike(_java_anchored(UUID_PATTERN))
    first_second = F.timestamp_micros(F.lit(_epoch_micros(rules.EVENT_TIME_MIN_YEAR)))
    past_last_second = F.timestamp_micros(F.lit(_epoch_micros(rules.EVENT_TIME_MAX_YEAR + 1)))
    out_of_range = (F.col("event_time") < first_second) | (F.col("event_time") >= past_last_second)

    problem = F.col(PROBLEM) if judged else F.lit(None).cast(_PROBLEM_DDL)
    if max_future_seconds > 0:
        received = F.least(F.col("kafka_timestamp"), F.current_timestamp())
        ahead = F.col("event_time") > received + F.make_dt_interval(secs=F.lit(max_future_seconds))
    else:
        ahead = F.lit(False)
    reason = (
        F.when(F.col("_first") == "", F.lit(EMPTY_VALUE))
        .when(~F.col("_utf8"), F.lit(NOT_UTF8))
        .when(problem.isNotNull(), problem.reason)
        .when(v.isNull(), F.lit(NOT_JSON))
        .when(F.col("_first") != "{", F.lit(NOT_JSON_OBJECT))
        .when(common_reason.isNotNull(), common_reason)
        .when(kind_col.isNull(), F.lit(UNKNOWN_EVENT_KIND))
        .when(kind_reason.isNotNull(), kind_reason)
        .when(F.col("event_time").isNull(), F.lit(INVALID_EVENT_TIME))
        .when(out_of_range, F.lit(rules.EVENT_TIME_OUT_OF_RANGE))
        .when(bad_type, F.lit(UNKNOWN_EVENT_TYPE))
        .when(bad_run_id, F.lit(INVALID_RUN_ID))
        .when(ahead, F.lit(rules.EVENT_TIME_IN_FUTURE))
    )
    detail = (
        F.when(F.col("_first") == "", F.lit(rules.DETAIL_EMPTY))
        .when(~F.col("_utf8"), F.lit(rules.DETAIL_NOT_UTF8))
        .when(problem.isNotNull(), problem.detail)
        .when(v.isNull(), F.lit(rules.DETAIL_NOT_JSON))
        .when(F.col("_first") != "{", F.concat(F.lit(rules.DETAIL_NOT_OBJECT_PREFIX), _json_type(v)))
        .when(common_reason.isNotNull(), common_detail)
        .when(kind_col.isNull(), F.lit(rules.DETAIL_UNKNOWN_KIND))
        .when(kind_reason.isNotNull(), kind_detail)
        .when(
            F.col("event_time").isNull(),
            F.concat(F.lit(rules.DETAIL_EVENT_TIME_PREFIX), _head(event_time_text)),
        )
        .when(out_of_range, F.concat(F.lit(rules.DETAIL_EVENT_TIME_RANGE_PREFIX), _head(event_time_text)))
        .when(bad_type, F.concat(F.lit(rules.DETAIL_EVENT_TYPE_PREFIX), _head(F.to_json(type_node))))
        .when(bad_run_id, F.concat(F.lit(rules.DETAIL_RUN_ID_PREFIX), _head(_as_string(nodes["run.runId"]))))
        .when(ahead, F.concat(F.lit(rules.detail_in_future(max_future_seconds)), _head(event_time_text)))
    )
    return extracted.select(
        *[c for c in EVENT_COLUMNS if c not in {"event_json", "kafka_key", "ingested_at", "redactions"}],
        F.col("key").alias("kafka_key"),
        F.col("value"),
        reason.alias("reason"),
        detail.alias("detail"),
        F.col("redactions"),
    )


_RUN_ID_COLUMNS = frozenset({"run_id", "parent_run_id", "root_run_id"})


def _run_id(value: Column, column: str) -> Column:
    """Run ids in lower case (UUID hex is case-insensitive; one run, one key); other columns unchanged."""
    return F.lower(value) if column in _RUN_ID_COLUMNS else value


def _epoch_micros(year: int) -> int:
    """Microseconds from the Unix epoch to the first instant of ``year`` (UTC, proleptic Gregorian)."""
    days = sum(366 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 365 for y in range(1970, year))
    return days * 86_400 * 1_000_000


_STRING_FIELDS = (
    ("run.runId", "run_id"),
    ("job.namespace", "job_namespace"),
    ("job.name", "job_name"),
    ("producer", "producer"),
    ("schemaURL", "schema_url"),
    ("dataset.namespace", "dataset_namespace"),
    ("dataset.name", "dataset_name"),
)


def _OPTIONAL_STRINGS(parent: str) -> tuple[tuple[str, str], ...]:
    return (
        (f"{parent}.run.runId", "parent_run_id"),
        (f"{parent}.job.namespace", "parent_job_namespace"),
        (f"{parent}.job.name", "parent_job_name"),
        (f"{parent}.root.run.runId", "root_run_id"),
        (f"{parent}.root.job.namespace", "root_job_namespace"),
        (f"{parent}.root.job.name", "root_job_name"),
    )


def valid_events(parsed: DataFrame, ingested_at: Column | None = None) -> DataFrame:
    """Rows of ``lake.raw.events`` from :func:`parse_messages` output."""
    stamp = ingested_at if ingested_at is not None else F.current_timestamp()
    derived = {
        "event_json": F.col("value").cast("string"),
        "kafka_key": F.col("kafka_key").cast("string"),
        "ingested_at": stamp,
    }
    return parsed.where(F.col("reason").isNull()).select(
        *[derived[c].alias(c) if c in derived else F.col(c) for c in EVENT_COLUMNS]
    )


def rejected_messages(parsed: DataFrame, ingested_at: Column | None = None) -> DataFrame:
    """Rows of ``lake.raw.rejected`` (original bytes, coordinates, reason) from :func:`parse_messages`."""
    stamp = ingested_at if ingested_at is not None else F.current_timestamp()
    return parsed.where(F.col("reason").isNotNull()).select(
        *[stamp.alias(c) if c == "ingested_at" else F.col(c) for c in REJECTED_COLUMNS]
    )
