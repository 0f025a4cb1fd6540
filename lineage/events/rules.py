r"""What makes a Kafka message a valid OpenLineage event: the rules as data, in one place.

Two engines apply these rules and must give every message the same verdict:

- the streaming ingestion, as Spark column expressions (:func:`lineage.transforms.envelope.parse_messages`,
  completed by :func:`lineage.ingest.verdicts.parse_messages`, which asks the Python validator's
  :func:`lineage.events.validate.json_problem` about what Spark's parser cannot tell);
- the HTTP intake, in plain Python (:func:`lineage.events.validate.validate`).

Neither spells a rule of its own: field lists, their order, the event types, the two patterns and the
detail texts all come from here, and ``tests/unit/test_validation_parity.py`` runs one corpus of good and
bad messages through both engines and asserts identical reasons and details.

Spec references are to https://openlineage.io/spec/2-0-2/OpenLineage.json: a RunEvent requires
``run.runId`` (UUID) and ``job.namespace``/``job.name``; a DatasetEvent requires ``dataset``; a JobEvent
``job``; all three require ``eventTime``, ``producer`` and ``schemaURL``. ``eventType`` is optional but must
be known if given.

The checks run in this order, the first one that fails gives the reason (``CHECK_ORDER``):

1. ``EMPTY_VALUE``: no bytes other than ``BLANK`` ones (null, empty, whitespace only);
2. ``NOT_UTF8``: not valid UTF-8;
3. ``NOT_JSON``: no JSON value at the start, after JSON whitespace;
   ``JSON_LIMIT_EXCEEDED``: a JSON value, but beyond one of ``JSON_LIMITS`` (Spark's parser refuses it;
   the detail names the limit);
   ``TRAILING_DATA``: a complete first value followed by more than JSON whitespace (a second document,
   ``{...}{...}`` or ``{...}\n{...}``, or anything else): one message is one event, never half of two;
4. ``NOT_JSON_OBJECT``: that value is not an object;
5. ``MISSING_FIELD`` / ``INVALID_FIELD_TYPE``: the first of ``COMMON_FIELDS`` that is absent, JSON null or
   not a string;
6. ``UNKNOWN_EVENT_KIND``: the kind, decided by the spec: an object with ``eventType`` (not null) is a
   RunEvent, the only kind that has one, whatever other keys it has; otherwise the first of the ``KINDS``
   markers that is a key of the object (any value, even null); none of them: this reason. So a START
   without ``run`` is ``MISSING_FIELD run.runId``, not a JobEvent;
7. ``MISSING_FIELD`` / ``INVALID_FIELD_TYPE``: the same for that kind's fields;
8. ``INVALID_EVENT_TIME``: ``eventTime`` does not match ``EVENT_TIME_PATTERN`` (a full date-time with
   seconds and an explicit offset or ``Z``) or names no real instant (month 13, 30 February, hour 24, an
   offset beyond 18:00);
   ``EVENT_TIME_OUT_OF_RANGE``: a real instant, but in UTC before ``EVENT_TIME_MIN_YEAR`` or after
   ``EVENT_TIME_MAX_YEAR`` (``9999-12-31T23:59:59-01:00`` is in year 10000 in UTC);
9. ``UNKNOWN_EVENT_TYPE``: ``eventType`` present, not null, and not a string whose upper case is one of
   ``EVENT_TYPES``;
10. ``INVALID_RUN_ID``: a RunEvent whose ``run.runId`` does not match ``UUID_PATTERN`` as the whole
    string (no surrounding whitespace, no final newline: Spark anchors with ``\z``, Python uses
    ``fullmatch``);
11. ``EVENT_TIME_IN_FUTURE``: an event valid by every check above whose ``eventTime`` is more than
    ``ingest.max_future_seconds`` after the time the message was received: the Kafka record's timestamp,
    or the ingestion's clock if that is earlier (the intake: its clock when the request arrived). A
    producer whose clock runs ahead would otherwise keep its runs RUNNING until that time.

Run ids are case-insensitive hex: the envelope columns ``run_id``, ``parent_run_id`` and ``root_run_id``
hold them in lower case (``event_json`` keeps the event as received).
"""

from __future__ import annotations

from dataclasses import dataclass

# Stable, machine-readable reasons a message is rejected (``lake.raw.rejected.reason`` and the intake's
# 4xx ``code``).
EMPTY_VALUE = "EMPTY_VALUE"
NOT_UTF8 = "NOT_UTF8"
NOT_JSON = "NOT_JSON"
NOT_JSON_OBJECT = "NOT_JSON_OBJECT"
MISSING_FIELD = "MISSING_FIELD"
INVALID_FIELD_TYPE = "INVALID_FIELD_TYPE"
INVALID_EVENT_TIME = "INVALID_EVENT_TIME"
UNKNOWN_EVENT_TYPE = "UNKNOWN_EVENT_TYPE"
INVALID_RUN_ID = "INVALID_RUN_ID"
UNKNOWN_EVENT_KIND = "UNKNOWN_EVENT_KIND"
EVENT_TIME_OUT_OF_RANGE = "EVENT_TIME_OUT_OF_RANGE"
JSON_LIMIT_EXCEEDED = "JSON_LIMIT_EXCEEDED"
TRAILING_DATA = "TRAILING_DATA"
EVENT_TIME_IN_FUTURE = "EVENT_TIME_IN_FUTURE"

REASONS = (
    EMPTY_VALUE,
    NOT_UTF8,
    NOT_JSON,
    NOT_JSON_OBJECT,
    MISSING_FIELD,
    INVALID_FIELD_TYPE,
    INVALID_EVENT_TIME,
    UNKNOWN_EVENT_TYPE,
    INVALID_RUN_ID,
    UNKNOWN_EVENT_KIND,
    EVENT_TIME_OUT_OF_RANGE,
    JSON_LIMIT_EXCEEDED,
    TRAILING_DATA,
    EVENT_TIME_IN_FUTURE,
)

EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
RUN_EVENT, DATASET_EVENT, JOB_EVENT = "RunEvent", "DatasetEvent", "JobEvent"

# Bytes that count as blank: Java's regex ``\s`` (Spark evaluates the check with java.util.regex), which is
# ASCII only. JSON itself allows only space, tab, CR and LF around a value (``JSON_WHITESPACE``).
BLANK = " \t\n\x0b\x0c\r"
JSON_WHITESPACE = " \t\n\r"


@dataclass(frozen=True)
class EventKind:
    """One kind of event: recognised by a top-level ``marker`` key, checked for its ``fields``."""

    name: str
    marker: str
    fields: tuple[str, ...]  # dotted paths of required string fields, checked in this order


# Required string fields of every event, checked in this order.
COMMON_FIELDS = ("eventTime", "producer", "schemaURL")
# In order of precedence: an object with ``run`` is a RunEvent even if it also has ``dataset``.
KINDS = (
    EventKind(RUN_EVENT, "run", ("run.runId", "job.namespace", "job.name")),
    EventKind(DATASET_EVENT, "dataset", ("dataset.namespace", "dataset.name")),
    EventKind(JOB_EVENT, "job", ("job.namespace", "job.name")),
)

# Regular expressions without anchors, in the common subset of Java's and Python's syntax (ASCII classes
# only: no \d or \s, whose meaning differs). Each engine anchors them at both ends of the whole string
# (Spark: ``^(?:...)\z``, Python: ``re.fullmatch``).
#
# Any UUID version (v4 from most clients, v7 from newer Java/Python ones), canonical 8-4-4-4-12 text.
UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# ISO-8601 / RFC 3339 date-time as producers write it: date, 'T' (or a space), time with seconds, up to 9
# fraction digits (Java's nanoseconds), then 'Z', +hh:mm, +hhmm or +hh. The offset is required (the spec's
# eventTime is a date-time with offset): a local time names no instant. What the pattern lets through must
# still name a real instant (``MAX_HOUR`` ...) within the accepted years.
EVENT_TIME_PATTERN = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]{1,9})?"
    r"(?:Z|([+-])([0-9]{2})(?::?([0-9]{2}))?)"
)
# Accepted years of eventTime after conversion to UTC, both included: from the Unix epoch to the last year
# every reader (Python's datetime, pyarrow, the CLI) can represent.
EVENT_TIME_MIN_YEAR, EVENT_TIME_MAX_YEAR = 1970, 9999
# Fields of a matched eventTime beyond which no instant exists: hour, minute, second, and the UTC offset
# (java.time.ZoneOffset allows -18:00 to +18:00). Month and day follow the proleptic Gregorian calendar,
# year 0000 included, as java.time does.
MAX_HOUR, MAX_MINUTE, MAX_SECOND = 23, 59, 59
MAX_OFFSET_MINUTES = 18 * 60


@dataclass(frozen=True)
class JsonLimits:
    """What Spark's JSON parser (Jackson's default ``StreamReadConstraints``) refuses; measured on Spark 4.1.

    A message beyond any of these is ``JSON_LIMIT_EXCEEDED`` (``try_parse_json`` gives null); the Python
    validator applies the same limits. Lengths of names and strings are counted in UTF-16 code units, as
    Java counts them. Spark's parser also refuses duplicate keys in an object (at any depth) and
    NaN/Infinity (``NOT_JSON``).

    They cannot be raised: Spark 4.1's ``parse_json`` builds its Jackson parser with the JVM's default
    constraints and has no option for them. Jackson's JVM-wide override of those defaults would reach the
    driver's JVM only, not the executors of a cluster, and the two would then judge one message
    differently.
    """

    max_depth: int = 1000  # nested objects and arrays, the outermost one counted
    max_number_digits: int = 1000  # digits of one number (integer, fraction and exponent together)
    max_name_length: int = 50_000  # one object key
    max_string_length: int = 20_000_000  # one string value


JSON_LIMITS = JsonLimits()

# Detail texts (``lake.raw.rejected.detail``, the intake's error ``message``). A ``*_PREFIX`` is followed
# by the offending value: at most ``DETAIL_VALUE_CHARS`` characters of it.
DETAIL_VALUE_CHARS = 100
DETAIL_EMPTY = "message value is null, empty or blank"
DETAIL_NOT_UTF8 = "message value is not valid UTF-8"
DETAIL_NOT_JSON = "message value is not valid JSON"
DETAIL_TRAILING_DATA = "message value holds more than its first JSON value: one message must hold one event"
DETAIL_JSON_LIMIT_PREFIX = "message value is beyond the JSON parser's limits: "  # + one of these
DETAIL_LIMIT_DEPTH = f"nested deeper than {JSON_LIMITS.max_depth} levels"
DETAIL_LIMIT_NUMBER = f"a number of more than {JSON_LIMITS.max_number_digits} digits"
DETAIL_LIMIT_NAME = f"an object key longer than {JSON_LIMITS.max_name_length} characters"
DETAIL_LIMIT_STRING = f"a string value longer than {JSON_LIMITS.max_string_length} characters"
DETAIL_EVENT_TIME_FUTURE_PREFIX = "eventTime is more than "  # + N, then the suffix and the value
DETAIL_EVENT_TIME_FUTURE_SUFFIX = " s after the message was received: "
DETAIL_NOT_OBJECT_PREFIX = "JSON value is not an object but "  # + one of JSON_TYPE_NAMES
DETAIL_UNKNOWN_KIND = "JSON object has none of run, job or dataset"
DETAIL_EVENT_TIME_PREFIX = "eventTime is not an ISO-8601 timestamp: "
DETAIL_EVENT_TYPE_PREFIX = "eventType must be one of " + ", ".join(EVENT_TYPES) + ", got "  # + the JSON
DETAIL_RUN_ID_PREFIX = "run.runId is not a UUID: "
DETAIL_EVENT_TIME_RANGE_PREFIX = (
    f"eventTime is outside {EVENT_TIME_MIN_YEAR}-01-01T00:00:00Z..{EVENT_TIME_MAX_YEAR}-12-31T23:59:59Z: "
)


# How a JSON value's type is named in details: Spark's ``schema_of_variant`` names, first word. An integer
# is BIGINT when it fits 64 bits; a number without exponent of at most 38 digits (and scale) is DECIMAL;
# any other number is DOUBLE. JSON null is VOID.
JSON_TYPE_NAMES = ("OBJECT", "ARRAY", "STRING", "BIGINT", "DECIMAL", "DOUBLE", "BOOLEAN", "VOID")
MAX_DECIMAL_DIGITS = 38


def detail_in_future(max_future_seconds: float) -> str:
    """Followed by the eventTime (its first ``DETAIL_VALUE_CHARS`` characters)."""
    return f"{DETAIL_EVENT_TIME_FUTURE_PREFIX}{max_future_seconds:g}{DETAIL_EVENT_TIME_FUTURE_SUFFIX}"


def detail_missing(field: str) -> str:
    return f"required field {field} is missing or null"


def detail_wrong_type_prefix(field: str) -> str:
    """Followed by the JSON type name found (BIGINT, OBJECT, ...)."""
    return f"field {field} must be a string, got "
