"""The validation rules of :mod:`lineage.events.rules` in plain Python, for the HTTP intake (no JVM).

:func:`validate` gives one message (bytes, exactly as they would sit in Kafka) the verdict the streaming
ingestion gives it: the same reason and detail (``tests/unit/test_validation_parity.py`` runs both on one
corpus). :func:`split_batch` cuts a JSON array into its elements' bytes and validates each of them as if
it had been sent alone.

Where Python's ``json`` and Spark's ``try_parse_json`` (Jackson) differ, this module follows Spark:

- Spark reads the first JSON value and ignores what follows it (``{"a":1} x`` is an object); the rules
  refuse what follows (``TRAILING_DATA``), and :func:`json_problem` is what the ingestion asks about the
  messages Spark's parser refuses or that may hold more than one value, so that reason (and which of
  Jackson's limits a message is beyond) comes from this module in both engines;
- Spark refuses duplicate keys, NaN and Infinity, which Python accepts; both are refused here;
- Jackson's size limits (:data:`lineage.events.rules.JSON_LIMITS`) are checked after parsing, only when
  cheap pre-checks on the text say a limit could be reached (most events are far below all of them).

Python's decoder with a duplicate-key hook costs a Python call per object, so a message goes first
through orjson (:func:`_fast_document`): it is taken from there only when orjson's reading provably equals
the strict one's and the event is valid; anything else (an invalid event, a reading orjson refuses or that
could differ) gets the strict decoder's verdict, so both paths give every message the same verdict.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson

from lineage.events import rules
from lineage.events.rules import (
    EMPTY_VALUE,
    EVENT_TIME_IN_FUTURE,
    EVENT_TIME_OUT_OF_RANGE,
    INVALID_EVENT_TIME,
    INVALID_FIELD_TYPE,
    INVALID_RUN_ID,
    JSON_LIMIT_EXCEEDED,
    JSON_LIMITS,
    MISSING_FIELD,
    NOT_JSON,
    NOT_JSON_OBJECT,
    NOT_UTF8,
    RUN_EVENT,
    TRAILING_DATA,
    UNKNOWN_EVENT_KIND,
    UNKNOWN_EVENT_TYPE,
)

# The C JSON scanner recurses once per nesting level and honours the interpreter's recursion limit; Spark
# accepts JSON_LIMITS.max_depth levels, so leave room for those on top of the caller's own stack.
_RECURSION_NEEDED = JSON_LIMITS.max_depth + 2000
if sys.getrecursionlimit() < _RECURSION_NEEDED:
    sys.setrecursionlimit(_RECURSION_NEEDED)

_NON_BLANK = re.compile(b"[^" + re.escape(rules.BLANK.encode()) + b"]")
_JSON_SPACE = re.compile("[" + re.escape(rules.JSON_WHITESPACE) + "]*")
_UUID = re.compile(rules.UUID_PATTERN)
_EVENT_TIME = re.compile(rules.EVENT_TIME_PATTERN)
# A number token with more than max_number_digits digits is a run of at least that many characters of
# this set; its absence rules the limit out without looking at every number.
_LONG_NUMBER = re.compile(f"[0-9][-+.eE0-9]{{{JSON_LIMITS.max_number_digits},}}")
_LONG_MAX = 2**63
_EVENT_TYPES = frozenset(rules.EVENT_TYPES)
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of validating one message: ``reason`` is None for a valid event."""

    reason: str | None
    detail: str | None = None
    document: dict[str, Any] | None = None  # the parsed object, when the message is a JSON object
    kind: str | None = None  # RunEvent, DatasetEvent or JobEvent, when recognised

    @property
    def valid(self) -> bool:
        return self.reason is None


class BatchError(ValueError):
    """A batch body that cannot be cut into elements (not UTF-8, not one JSON array)."""


class _LimitError(ValueError):
    """A JSON value beyond one of Jackson's limits; the message is the detail naming it."""


# --- JSON as Spark reads it --------------------------------------------------------------------------


class _Decimal(float):
    """A JSON number Spark stores as DECIMAL (no exponent, at most 38 digits and 38 decimals)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("duplicate key")
    return document


def _float(text: str) -> float:
    if "e" in text or "E" in text:
        return float(text)
    whole, _, fraction = text.lstrip("-").partition(".")
    precision = len((whole + fraction).lstrip("0")) or 1
    if precision <= rules.MAX_DECIMAL_DIGITS and len(fraction) <= rules.MAX_DECIMAL_DIGITS:
        return _Decimal(text)
    return float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _digits(text: str) -> int:
    return sum(c.isdigit() for c in text)


def _counted_int(text: str) -> int:
    if _digits(text) > JSON_LIMITS.max_number_digits:
        raise _LimitError(rules.DETAIL_LIMIT_NUMBER)
    return int(text)


def _counted_float(text: str) -> float:
    if _digits(text) > JSON_LIMITS.max_number_digits:
        raise _LimitError(rules.DETAIL_LIMIT_NUMBER)
    return _float(text)


def _decoder(**hooks: Callable[[str], Any]) -> json.JSONDecoder:
    options: dict[str, Any] = {"parse_float": _float, **hooks}
    return json.JSONDecoder(object_pairs_hook=_object, parse_constant=_no_constant, strict=True, **options)


_STRICT = _decoder()
_COUNTING = _decoder(parse_int=_counted_int, parse_float=_counted_float)
_LENIENT = json.JSONDecoder()  # only to find where an element the strict one refuses ends


# Where orjson's reading may differ from the strict one's, or the duplicate-key count below would not be
# exact: a \\u escape (it can hide a quote or a colon, or be a lone surrogate) or a key spaced from its colon.
_ESCAPE_U = b"\\u"
_SPACED_KEY = re.compile(rb'"[ \t\n\r]+:')
# A number of more than max_number_digits digits is a run of more of these bytes (marked "x" by the table).
_NUMBER_BYTES = bytes(0x78 if chr(i) in "0123456789+-.eE" else 0x20 for i in range(256))
_NUMBER_RUN = b"x" * (JSON_LIMITS.max_number_digits + 1)
_JSON_SPACE_BYTES = re.compile(b"[" + re.escape(rules.JSON_WHITESPACE.encode()) + b"]*")
_KEY_END = b'":'
_SLOW = object()  # what the fast reading gives when only the strict decoder can judge
_OPEN, _CLOSE = ord("{"), ord("}")


def _orjson_safe(raw: bytes) -> bool:
    """No text in ``raw`` on which orjson's reading and the duplicate-key count could go wrong."""
    return _ESCAPE_U not in raw and _SPACED_KEY.search(raw) is None


def _may_hold_long_number(raw: bytes) -> bool:
    return _NUMBER_RUN in raw.translate(_NUMBER_BYTES)


def _fast_document(raw: bytes) -> Any:
    """The JSON value ``raw`` holds (one complete value, JSON whitespace around it at most) as orjson reads
    it, when that reading is the strict decoder's; :data:`_SLOW` when it may not be.

    orjson refuses what the strict decoder refuses (NaN, control characters, bad UTF-8, a BOM, content
    after the value) but for duplicate keys, which it drops silently, and Jackson's limits. Duplicates:
    with no ``\\u`` escape and every key touching its colon, each ``":`` of the text ends a key or is a
    quote followed by a colon inside a string, and orjson writes the same for what it kept; a duplicate
    drops a key (and perhaps strings), so the two counts differ exactly when there is one. Numbers may
    come back as floats: only an invalid event's detail depends on them, and that is the strict
    decoder's.
    """
    if not _orjson_safe(raw):
        return _SLOW
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _SLOW
    if raw.count(_KEY_END) != _key_ends(document):
        return _SLOW  # a duplicate key, or too deep for orjson to write
    if len(raw) > JSON_LIMITS.max_number_digits and _may_hold_long_number(raw):
        return _SLOW
    return document if _within_limits(raw, document) else _SLOW


def _key_ends(value: Any) -> int:
    """How many ``":`` orjson writes for ``value``; -1 when it cannot write it (nested too deep)."""
    try:
        return orjson.dumps(value).count(_KEY_END)
    except TypeError:
        return -1


def _within_limits(raw: bytes, document: Any) -> bool:
    """Jackson's depth and length limits, on orjson's reading (numbers are checked on the text)."""
    try:
        if len(raw) > 2 * JSON_LIMITS.max_depth and raw.count(b"[") + raw.count(b"{") > JSON_LIMITS.max_depth:
            _check_depth(document)
        if len(raw) * 2 > JSON_LIMITS.max_name_length:
            _check_lengths(document)
    except ValueError:
        return False
    return True


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _check_limits(text: str, start: int, end: int, value: Any, raw: bytes) -> None:
    """Raise :class:`_LimitError` when the value parsed from ``text[start:end]`` is beyond Spark's limits.

    ``raw`` is the value's UTF-8 bytes (at least one byte a character): counting on bytes is C speed.
    """
    if len(raw) <= JSON_LIMITS.max_number_digits:
        return  # too short to reach any limit (depth needs 2 characters a level)
    digits = len(raw) - len(raw.translate(None, b"0123456789"))
    if digits > JSON_LIMITS.max_number_digits and _LONG_NUMBER.search(text, start, end):
        _COUNTING.raw_decode(text[:end], start)
    if raw.count(b"[") + raw.count(b"{") > JSON_LIMITS.max_depth:
        _check_depth(value)
    if len(raw) * 2 > JSON_LIMITS.max_name_length:  # a character is at most 2 UTF-16 units
        _check_lengths(value)


def _check_depth(value: Any) -> None:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > JSON_LIMITS.max_depth:
            raise _LimitError(rules.DETAIL_LIMIT_DEPTH)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _check_lengths(value: Any) -> None:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                if (
                    len(key) * 2 > JSON_LIMITS.max_name_length
                    and _utf16_length(key) > JSON_LIMITS.max_name_length
                ):
                    raise _LimitError(rules.DETAIL_LIMIT_NAME)
                stack.append(child)
        elif isinstance(node, list):
            stack.extend(node)
        elif (
            isinstance(node, str)
            and len(node) * 2 > JSON_LIMITS.max_string_length
            and _utf16_length(node) > JSON_LIMITS.max_string_length
        ):
            raise _LimitError(rules.DETAIL_LIMIT_STRING)


def json_type(value: Any) -> str:
    """The type name Spark's ``schema_of_variant`` gives a parsed JSON value (first word)."""
    if isinstance(value, dict):
        return "OBJECT"
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, bool):
        return "BOOLEAN"
    if value is None:
        return "VOID"
    if isinstance(value, int):
        if -_LONG_MAX <= value < _LONG_MAX:
            return "BIGINT"
        return "DECIMAL" if len(str(abs(value))) <= rules.MAX_DECIMAL_DIGITS else "DOUBLE"
    return "DECIMAL" if isinstance(value, _Decimal) else "DOUBLE"


_ESCAPE = re.compile(r"\\(u[0-9a-f]{4}|.)")


def _spark_text(text: str) -> str:
    """A string as Spark holds it: a lone surrogate (valid in a JSON escape) becomes '?'."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


def to_json(value: Any) -> str:
    """JSON text of a value as Spark's ``to_json`` writes a variant (sorted keys, \\u escapes upper case).

    Exact for strings, integers, booleans, null and containers of them; decimals and doubles are written
    as Python writes them, which can differ from Java's formatting.
    """
    if isinstance(value, str):
        value = _spark_text(value)
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return _ESCAPE.sub(_upper_hex, text)


def _upper_hex(match: re.Match[str]) -> str:
    escape = match.group(1)
    return "\\" + ("u" + escape[1:].upper() if escape.startswith("u") else escape)


def _head(text: str) -> str:
    return _spark_text(text)[: rules.DETAIL_VALUE_CHARS]


# --- the checks ---------------------------------------------------------------------------------------


def _field(document: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = document
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _paths(fields: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((name, tuple(name.split("."))) for name in fields)


_COMMON_PATHS = _paths(rules.COMMON_FIELDS)
_KIND_PATHS = tuple((kind, _paths(kind.fields)) for kind in rules.KINDS)


def _field_problem(
    document: dict[str, Any], fields: tuple[tuple[str, tuple[str, ...]], ...]
) -> tuple[str, str] | None:
    for name, path in fields:
        value = _field(document, path)
        if value is None:
            return MISSING_FIELD, rules.detail_missing(name)
        if not isinstance(value, str):
            return INVALID_FIELD_TYPE, rules.detail_wrong_type_prefix(name) + json_type(value)
    return None


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _event_time_reason(text: str) -> str | None:
    """None for an ``eventTime`` both valid (``EVENT_TIME_PATTERN`` matched, a real instant: what
    ``try_to_timestamp`` then accepts) and in range (its UTC year within the accepted years); else the
    reason."""
    match = _EVENT_TIME.fullmatch(text)
    if match is None:
        return INVALID_EVENT_TIME
    year, month, day, hour, minute, second = map(int, match.group(1, 2, 3, 4, 5, 6))
    sign, offset_hours, offset_minutes = match.group(7, 8, 9)
    extra = int(offset_minutes or 0)
    offset_total = int(offset_hours or 0) * 60 + extra
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        return INVALID_EVENT_TIME
    if hour > rules.MAX_HOUR or minute > rules.MAX_MINUTE or second > rules.MAX_SECOND:
        return INVALID_EVENT_TIME
    if sign is not None and (extra > rules.MAX_MINUTE or offset_total > rules.MAX_OFFSET_MINUTES):
        return INVALID_EVENT_TIME
    if year < rules.EVENT_TIME_MIN_YEAR - 1:
        return EVENT_TIME_OUT_OF_RANGE
    local = datetime(max(year, 1), month, day, hour, minute, second)
    offset = timedelta(minutes=offset_total)
    try:
        utc = local - offset if sign == "+" else local + offset
    except OverflowError:  # beyond year 9999
        return EVENT_TIME_OUT_OF_RANGE
    # The fraction of a second never moves an instant across a year boundary that whole seconds do not.
    if utc >= _FIRST_SECOND and utc.year <= rules.EVENT_TIME_MAX_YEAR:
        return None
    return EVENT_TIME_OUT_OF_RANGE


_FIRST_SECOND = datetime(rules.EVENT_TIME_MIN_YEAR, 1, 1)


def valid_event_time(text: str) -> bool:
    """``EVENT_TIME_PATTERN`` matched, and a real instant (what ``try_to_timestamp`` then accepts)."""
    return _event_time_reason(text) != INVALID_EVENT_TIME


def event_time_in_range(text: str) -> bool:
    """A valid eventTime (:func:`valid_event_time`) whose UTC year is within the accepted years."""
    return _event_time_reason(text) is None


# An eventTime this matches is valid and in range (what :func:`_event_time_reason` says with more work):
# a year from 2000 to 2099 (no offset up to 18:00 moves it out of the accepted years), a day that every
# such month has (29 February is left to the full check), a time of day and an offset within bounds.
_USUAL_EVENT_TIME = re.compile(
    r"20[0-9]{2}-"
    r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
    r"[T ](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?"
    r"(?:Z|[+-](?:0[0-9]|1[0-7])(?::?[0-5][0-9])?|[+-]18(?::?00)?)"
)


def _usual_run_event(document: dict[str, Any]) -> Verdict | None:
    """The verdict of a valid RunEvent of the usual shape, in a few lookups; None for any other object
    (the full checks then decide, the same way for every object this accepts)."""
    event_type = document.get("eventType")
    run = document.get("run")
    job = document.get("job")
    if (
        type(event_type) is str
        and type(run) is dict
        and type(job) is dict
        and type(document.get("producer")) is str
        and type(document.get("schemaURL")) is str
        and type(job.get("namespace")) is str
        and type(job.get("name")) is str
    ):
        event_time = document.get("eventTime")
        run_id = run.get("runId")
        if (
            type(event_time) is str
            and type(run_id) is str
            and event_type.upper() in _EVENT_TYPES
            and _USUAL_EVENT_TIME.fullmatch(event_time) is not None
            and _UUID.fullmatch(run_id) is not None
        ):
            return Verdict(None, None, document, RUN_EVENT)
    return None


def validate_document(document: Any) -> Verdict:
    """Checks 4 to 10 of :mod:`lineage.events.rules` on a parsed JSON value."""
    if type(document) is dict:
        usual = _usual_run_event(document)
        if usual is not None:
            return usual
    return _checked_document(document)


def _checked_document(document: Any) -> Verdict:
    """:func:`validate_document` check by check, in the rules' order."""
    if not isinstance(document, dict):
        return Verdict(NOT_JSON_OBJECT, rules.DETAIL_NOT_OBJECT_PREFIX + json_type(document))
    problem = _field_problem(document, _COMMON_PATHS)
    if problem is not None:
        return Verdict(*problem, document=document)
    found: tuple[Any, Any] | None
    if document.get("eventType") is not None:  # only a RunEvent has eventType (the spec's kinds)
        found = next((k, paths) for k, paths in _KIND_PATHS if k.name == RUN_EVENT)
    else:
        found = next(((k, paths) for k, paths in _KIND_PATHS if k.marker in document), None)
    if found is None:
        return Verdict(UNKNOWN_EVENT_KIND, rules.DETAIL_UNKNOWN_KIND, document)
    kind, paths = found
    problem = _field_problem(document, paths)
    if problem is not None:
        return Verdict(*problem, document=document, kind=kind.name)
    event_time = document["eventTime"]
    reason = _event_time_reason(event_time)
    if reason is not None:
        prefix = (
            rules.DETAIL_EVENT_TIME_PREFIX
            if reason == INVALID_EVENT_TIME
            else rules.DETAIL_EVENT_TIME_RANGE_PREFIX
        )
        return Verdict(reason, prefix + _head(event_time), document, kind.name)
    event_type = document.get("eventType", _ABSENT)
    if (
        event_type is not _ABSENT
        and event_type is not None
        and (not isinstance(event_type, str) or event_type.upper() not in _EVENT_TYPES)
    ):
        detail = rules.DETAIL_EVENT_TYPE_PREFIX + _head(to_json(event_type))
        return Verdict(UNKNOWN_EVENT_TYPE, detail, document, kind.name)
    if kind.name == RUN_EVENT:
        run_id = document["run"]["runId"]
        if _UUID.fullmatch(run_id) is None:
            return Verdict(INVALID_RUN_ID, rules.DETAIL_RUN_ID_PREFIX + _head(run_id), document, kind.name)
    return Verdict(None, None, document, kind.name)


_EMPTY = Verdict(EMPTY_VALUE, rules.DETAIL_EMPTY)
_NOT_UTF8 = Verdict(NOT_UTF8, rules.DETAIL_NOT_UTF8)
_NOT_JSON = Verdict(NOT_JSON, rules.DETAIL_NOT_JSON)
_TRAILING = Verdict(TRAILING_DATA, rules.DETAIL_TRAILING_DATA)


def validate(value: bytes | None, limit: TimeLimit | None = None) -> Verdict:
    """The verdict of the streaming ingestion on a Kafka message value (``None``: a null value).

    ``limit``: the latest eventTime accepted (:func:`time_limit`); None: no such check.
    """
    if value is None or _NON_BLANK.search(value) is None:
        return _EMPTY
    document = _fast_document(value)
    if document is not _SLOW:
        verdict = validate_document(document)
        if verdict.valid:
            return in_time(verdict, limit)
    return in_time(_strict_verdict(value), limit)


def _strict_verdict(value: bytes) -> Verdict:
    parsed = _parse_strict(value)
    return parsed if isinstance(parsed, Verdict) else validate_document(parsed)


def _parse_strict(value: bytes) -> Any:
    """The one JSON value of a message as the strict decoder reads it, or the verdict of checks 2 and 3."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return _NOT_UTF8
    start = _JSON_SPACE.match(text).end()  # type: ignore[union-attr]
    try:
        document, end = _STRICT.raw_decode(text, start)
        raw = value if (start, end) == (0, len(text)) else text[start:end].encode("utf-8")
        _check_limits(text, start, end, document, raw)
    except _LimitError as exc:
        return _limit_verdict(exc)
    except json.JSONDecodeError:
        return _NOT_JSON
    except ValueError:
        # A duplicate key, NaN, or an integer beyond Python's own conversion limit: the counting decoder
        # tells the last (a number beyond Jackson's limit) from the others.
        try:
            _COUNTING.raw_decode(text, start)
        except _LimitError as exc:
            return _limit_verdict(exc)
        except (ValueError, RecursionError):
            pass
        return _NOT_JSON
    except RecursionError:
        # The decoder went deeper than max_depth (the recursion limit leaves it room for that) through
        # valid JSON: Jackson stops at the first level too deep, before anything after it.
        return _limit_verdict(_LimitError(rules.DETAIL_LIMIT_DEPTH))
    if _JSON_SPACE.match(text, end).end() != len(text):  # type: ignore[union-attr]
        return _TRAILING
    return document


def _limit_verdict(exc: _LimitError) -> Verdict:
    return Verdict(JSON_LIMIT_EXCEEDED, rules.DETAIL_JSON_LIMIT_PREFIX + str(exc))


def json_problem(value: bytes) -> tuple[str, str] | None:
    """The reason and detail of checks 2 and 3 (``NOT_UTF8``, ``NOT_JSON``, ``JSON_LIMIT_EXCEEDED``,
    ``TRAILING_DATA``) for a message that is not blank; None when it holds exactly one JSON value the
    parser takes. The streaming ingestion asks this for the messages Spark's parser refuses and for those
    that may hold more than one value, so both engines give these reasons from this one function."""
    parsed = _parse_strict(value)
    return (parsed.reason, parsed.detail) if isinstance(parsed, Verdict) else None  # type: ignore[return-value]


# --- check 11: eventTime in the future ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """The latest eventTime accepted for a message: when it was received plus ``max_future_seconds``."""

    latest: datetime  # naive, UTC
    max_future_seconds: float


def time_limit(received: datetime, max_future_seconds: float) -> TimeLimit | None:
    """The limit for a message received at ``received`` (aware, or naive UTC); None when
    ``max_future_seconds`` is 0 (``ingest.max_future_seconds``: no limit)."""
    if max_future_seconds <= 0:
        return None
    if received.tzinfo is not None:
        received = received.astimezone(UTC).replace(tzinfo=None)
    return TimeLimit(received + timedelta(seconds=max_future_seconds), max_future_seconds)


_FRACTION = re.compile(r"\.([0-9]{1,9})")


def event_instant(text: str) -> datetime:
    """A valid, in-range eventTime as a naive UTC datetime, to the microsecond (the nanoseconds are
    dropped, as Spark drops them)."""
    match = _EVENT_TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"not an eventTime: {text[:40]!r}")
    year, month, day, hour, minute, second = map(int, match.group(1, 2, 3, 4, 5, 6))
    sign, offset_hours, offset_minutes = match.group(7, 8, 9)
    fraction = _FRACTION.match(text, match.end(6))
    micros = int((fraction.group(1) + "00000")[:6]) if fraction else 0
    local = datetime(year, month, day, hour, minute, second, micros)
    offset = timedelta(hours=int(offset_hours or 0), minutes=int(offset_minutes or 0))
    return local - offset if sign == "+" else local + offset


def in_time(verdict: Verdict, limit: TimeLimit | None) -> Verdict:
    """``verdict``, or ``EVENT_TIME_IN_FUTURE`` for a valid event whose eventTime is after the limit."""
    if limit is None or not verdict.valid or verdict.document is None:
        return verdict
    event_time = verdict.document["eventTime"]
    if event_instant(event_time) <= limit.latest:
        return verdict
    detail = rules.detail_in_future(limit.max_future_seconds) + _head(event_time)
    return Verdict(EVENT_TIME_IN_FUTURE, detail, verdict.document, verdict.kind)


def split_batch(body: bytes, limit: TimeLimit | None = None) -> list[tuple[bytes, Verdict]]:
    """Cut a JSON array into its elements, each with its verdict as a message of its own.

    An element's bytes are exactly those of the body from its first to its last character (the
    whitespace and commas around it are not part of it), so an element sent alone and the same element
    in a batch give the same message. An element the rules refuse as JSON (a duplicate key, NaN, a limit)
    is still an element: ``NOT_JSON``.

    ``limit``: as for :func:`validate`.

    Raises:
        BatchError: the body is not valid UTF-8, or not exactly one JSON array.
    """
    elements = _split_objects(body)
    if elements is None:
        elements = _split_strict(body)
    return elements if limit is None else [(raw, in_time(verdict, limit)) for raw, verdict in elements]


def _split_objects(body: bytes) -> list[tuple[bytes, Verdict]] | None:
    """:func:`split_batch` for the usual batch, a non-empty array of objects that orjson reads as the strict
    decoder would; None for any other body (the strict split then decides).

    Each element's end is where the braces counted from the body's start balance again; a brace inside a
    string can only make a wrong cut, which orjson then refuses to read as one value (or the separators
    after it are not ',' and ']'). Duplicate keys are counted over the whole body at once (see
    :func:`_fast_document`); a body with one gets each element judged alone.
    """
    space = _JSON_SPACE_BYTES.match
    position = space(body).end()  # type: ignore[union-attr]
    if body[position : position + 1] != b"[":
        return None
    position = space(body, position + 1).end()  # type: ignore[union-attr]
    if body[position : position + 1] != b"{" or not _orjson_safe(body):
        return None
    if _may_hold_long_number(body):
        return None
    codes = np.frombuffer(body, dtype=np.uint8)
    braces = np.flatnonzero((codes == _OPEN) | (codes == _CLOSE))
    depth = np.cumsum(np.where(codes[braces] == _OPEN, 1, -1))
    cuts: list[tuple[bytes, Any]] = []
    for end in (braces[depth == 0] + 1).tolist():
        raw = body[position:end]
        try:
            cuts.append((raw, orjson.loads(raw)))
        except orjson.JSONDecodeError:
            return None  # a wrong cut, or an element only the strict decoder can judge
        position = space(body, end).end()  # type: ignore[union-attr]
        separator = body[position : position + 1]
        position = space(body, position + 1).end()  # type: ignore[union-attr]
        if separator == b"]":
            return _judged(body, cuts) if position == len(body) else None
        if separator != b"," or body[position : position + 1] != b"{":
            return None
    return None


def _judged(body: bytes, cuts: list[tuple[bytes, Any]]) -> list[tuple[bytes, Verdict]]:
    """The verdicts of the elements :func:`_split_objects` cut (their bytes and orjson's reading)."""
    documents = [document for _, document in cuts]
    duplicates = body.count(_KEY_END) != _key_ends(documents)
    elements = []
    for raw, document in cuts:
        unique = not duplicates or raw.count(_KEY_END) == _key_ends(document)
        verdict = validate_document(document) if unique and _within_limits(raw, document) else None
        elements.append((raw, verdict if verdict is not None and verdict.valid else _strict_verdict(raw)))
    return elements


def _split_strict(body: bytes) -> list[tuple[bytes, Verdict]]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BatchError("the body is not valid UTF-8") from None
    space = _JSON_SPACE.match
    position = space(text).end()  # type: ignore[union-attr]
    if text[position : position + 1] != "[":
        raise BatchError("the body is not a JSON array")
    position = space(text, position + 1).end()  # type: ignore[union-attr]
    elements: list[tuple[bytes, Verdict]] = []
    ascii_only = len(text) == len(body)
    last_char, last_byte = 0, 0  # char -> byte offset bookkeeping for non-ASCII bodies
    if text[position : position + 1] != "]":
        while True:
            start = position
            try:
                document, end = _STRICT.raw_decode(text, start)
                strict = True
            except (ValueError, RecursionError):
                try:
                    _, end = _LENIENT.raw_decode(text, start)
                except (ValueError, RecursionError):
                    raise BatchError(f"element {len(elements)} is not JSON") from None
                strict = False
            if ascii_only:
                raw = body[start:end]
            else:
                byte_start = last_byte + len(text[last_char:start].encode("utf-8"))
                byte_end = byte_start + len(text[start:end].encode("utf-8"))
                last_char, last_byte = end, byte_end
                raw = body[byte_start:byte_end]
            verdict = None
            if strict:
                try:
                    _check_limits(text, start, end, document, raw)
                    verdict = validate_document(document)
                except (ValueError, RecursionError):
                    pass
            # An element the strict reading refuses gets the verdict it gets alone (NOT_JSON, or a limit).
            elements.append((raw, verdict if verdict is not None else _strict_verdict(raw)))
            position = space(text, end).end()  # type: ignore[union-attr]
            separator = text[position : position + 1]
            position = space(text, position + 1).end()  # type: ignore[union-attr]
            if separator == "]":
                break
            if separator != ",":
                raise BatchError(f"expected ',' or ']' after element {len(elements) - 1}")
    else:
        position = space(text, position + 1).end()  # type: ignore[union-attr]
    if position != len(text):
        raise BatchError("data after the JSON array")
    return elements
