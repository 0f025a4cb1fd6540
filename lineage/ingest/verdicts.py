"""The streaming ingestion's verdict on each Kafka message: the envelope's checks, then the rest of the rules.

:func:`lineage.transforms.envelope.parse_messages` applies checks 1 to 10 of :mod:`lineage.events.rules`
as Spark column expressions. Three answers need more than Spark's parser gives; this module supplies
them, and the envelope's verdict takes them with the precedence the rules give them
(:func:`lineage.transforms.envelope.parse_redacted`):

- ``TRAILING_DATA`` (check 3): Spark's ``try_parse_json`` reads the first JSON value of a message and
  ignores what follows it, so ``{...}{...}`` would land as its first event, the second lost.
- ``JSON_LIMIT_EXCEEDED`` (check 3): ``try_parse_json`` gives null for a message beyond one of Jackson's
  limits as for one that is not JSON at all; the detail names the limit.
- ``EVENT_TIME_IN_FUTURE`` (check 11): an eventTime more than ``ingest.max_future_seconds`` after the
  message was received (its Kafka timestamp, or the ingestion's clock if that is earlier: a replay of old
  messages gets the verdict they got when they were new, and a producer whose clock runs ahead cannot
  vouch for its own eventTime with its record's timestamp).

The first two are decided by :func:`lineage.events.validate.json_problem`, the intake's own Python, for
the few messages that need it, in the same Arrow UDF as the redaction
(:func:`lineage.transforms.envelope.redact_messages`): before the parse, so no Python UDF reads what the
parse gives (with one on top of it, Spark's optimizer copied the JSON parse into every expression reading
it, and persisting the parse in between cost a third of the ingestion's speed). The messages asked are
those Jackson in Spark finds may hold more than one value, exactly enough: a message that is one JSON
value ``V`` is one element when wrapped as ``[V]`` and is a member when wrapped as ``{"k":V}``; data
after ``V`` either breaks a wrap (most data), or makes more elements (``,...``), or closes the array wrap
early (``]...``, which breaks the object wrap). A message that is not JSON at all breaks both wraps, and
so does one nested a level too deep by the wrap, or one with a name or a number beyond its limit
(Jackson checks those while it skips through values). It checks a string's length only when it reads
the string, which the wraps do not: a message longer than a string may be is asked too. The judge also
sees every message the redaction changed. A duplicate key is the one thing Spark's parser refuses that
neither finds, and the judge would say the same of it (``NOT_JSON``). Python's verdict counts only past
checks 1 and 2 (a blank or non-UTF-8 message keeps the envelope's).

Messages that are not valid UTF-8 keep their bytes, secrets aside (:func:`lineage.events.redact.redact_bytes`
reads them leniently), and their ``redactions`` are counted on the bytes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lineage.events import redact
from lineage.events.rules import JSON_LIMITS
from lineage.events.validate import json_problem
from lineage.transforms import envelope


def _may_hold_more(text: Column) -> Column:
    """True for every message holding data after its first JSON value (and for a few others)."""
    as_element = F.json_array_length(F.concat(F.lit("["), text, F.lit("]")))
    as_member = F.json_object_keys(F.concat(F.lit('{"k":'), text, F.lit("}")))
    return F.coalesce(as_element != 1, F.lit(True)) | as_member.isNull()


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
    """
    # Jackson checks the lengths of names and numbers while the wraps skip through values, and those of
    # strings only when it reads them: a string beyond the limit needs more bytes than it may have characters.
    long = F.coalesce(F.length("value") > JSON_LIMITS.max_string_length, F.lit(False))
    ask = _may_hold_more(F.col("value").cast("string")) | long
    redacted = envelope.redact_messages(messages, redactor, judge=json_problem, ask=ask)
    return envelope.parse_redacted(redacted, max_future_seconds)
