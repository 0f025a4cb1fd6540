"""Small column helpers shared by the lineage model transforms (``lineage.transforms.model``).

Facets are read from ``event_json`` through a VARIANT (``try_parse_json`` + ``try_variant_get``): each path
is cast on its own, so one mistyped facet field (a ``rowCount`` sent as a string, an unexpected nested
object) only nulls that field instead of the whole event, which ``from_json`` with a struct schema would do.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from lineage.transforms.envelope import DATASET_EVENT, JOB_EVENT, RUN_EVENT

__all__ = ["DATASET_EVENT", "JOB_EVENT", "RUN_EVENT"]

TERMINAL_STATES = ("COMPLETE", "FAIL", "ABORT")
RUNNING = "RUNNING"
LOST = "LOST"
UNKNOWN = "UNKNOWN"  # a parent run known only from its children

# Spark DDL types of the facet parts the model keeps.
SCHEMA_FIELDS_TYPE = "array<struct<name:string,type:string,description:string>>"
IDENTIFIERS_TYPE = "array<struct<namespace:string,name:string,type:string>>"
OWNERS_TYPE = "array<struct<name:string,type:string>>"
TAGS_TYPE = "array<struct<key:string,value:string,source:string>>"
# The entries of a dataset's tags facet that name a field (TagsDatasetFacet: ``field`` "identifies the field
# in a dataset if a tag applies to one").
FIELD_TAGS_TYPE = "array<struct<field:string,key:string,value:string,source:string>>"
# One entry of the data-quality assertions facet (``column`` null: the whole dataset). ``problem`` says why
# an entry of another shape could not be read (its JSON text is then kept as ``assertion``).
ASSERTIONS_TYPE = "array<struct<assertion:string,success:boolean,column:string,problem:string>>"
# One entry of the test run facet, attributed to each input of the run: ``status`` as sent (pass, fail or
# skip), ``success`` true for pass, false for fail, null otherwise; ``column`` from ``params.column_name``.
TESTS_TYPE = "array<struct<name:string,status:string,success:boolean,column:string,problem:string>>"
# The data-quality metrics facet of a mention: the dataset's counts and one entry per column of
# ``columnMetrics``. ``problem`` names each value that is not a number, with its JSON text (nothing is lost).
# Quantiles are (quantile, value) pairs sorted by quantile, not a map: Spark cannot sort or compare maps.
COLUMN_METRICS_TYPE = (
    "struct<column:string,null_count:bigint,distinct_count:bigint,sum:double,count:double,min:double,"
    "max:double,quantiles:array<struct<quantile:string,value:double>>,problem:string>"
)
METRICS_TYPE = (
    "struct<row_count:bigint,bytes:bigint,file_count:bigint,problem:string,columns:array<"
    + COLUMN_METRICS_TYPE
    + ">>"
)


def parsed_event() -> Column:
    """The event JSON as a VARIANT (null when it is not JSON, which ``raw.events`` never holds)."""
    return F.try_parse_json(F.col("event_json"))


def get(node: Column, path: str, type_: str = "string") -> Column:
    """``path`` of a VARIANT cast to ``type_``; null when missing or not castable."""
    return F.try_variant_get(node, path, type_)


def present(node: Column, path: str) -> Column:
    """True when ``path`` exists and is not JSON null."""
    value = F.try_variant_get(node, path, "variant")
    return value.isNotNull() & ~F.is_variant_null(value)


def event_hash() -> Column:
    """SHA-256 of the event JSON: identifies duplicates and breaks event-time ties by content.

    Ties are broken by content, never by Kafka coordinates or arrival order, so a replayed or reordered topic
    gives the same rows.
    """
    return F.sha2(F.col("event_json"), 256)


def latest_key() -> Column:
    """Ordering of events for "latest wins": event time, then content hash (needs ``event_hash`` column)."""
    return F.struct(F.col("event_time"), F.col("event_hash"))


def latest(value: Column, when_present: Column | None = None) -> Column:
    """Aggregate: ``value`` of the latest event where it is present (``when_present``, default not null).

    ``max_by`` skips rows whose ordering is null, which is how absent facets are left out.
    """
    condition = value.isNotNull() if when_present is None else when_present
    return F.max_by(value, F.when(condition, latest_key()))


def seconds_between(start: Column, end: Column) -> Column:
    """``end - start`` in seconds as a double (microsecond precision)."""
    return (F.unix_micros(end) - F.unix_micros(start)) / F.lit(1_000_000.0)


def short_hash(*cols: Column) -> Column:
    """First 16 hex characters of SHA-256 over the columns joined by a control character (never in names)."""
    return F.substring(F.sha2(F.concat_ws("\u0001", *cols), 256), 1, 16)


def dataset_id(namespace: Column, name: Column) -> Column:
    """Stable id of a canonical dataset: 16 hex characters of SHA-256 of namespace and name."""
    return short_hash(namespace, name)


# A run's partition in the tables keyed by run (``runs``, ``run_io``): the UTC day of a UUIDv7 run id's
# timestamp (what current OpenLineage clients send), else one of a few hash buckets (negative numbers).
# A function of the id alone, so a run's rows never move between partitions and a build knows from the ids
# it touches which partitions its writes read.
RUN_PART = "run_part"
RUN_PART_BUCKETS = 16
_UUID7 = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_DAY_MS = 86_400_000


def run_part(run_id: Column) -> Column:
    """The partition of a run id (int): days since 1970-01-01 of a UUIDv7's 48-bit millisecond timestamp,
    else ``-1 - (xxhash64(run_id) mod RUN_PART_BUCKETS)``; null for a null id."""
    millis = F.conv(F.concat(F.substring(run_id, 1, 8), F.substring(run_id, 10, 4)), 16, 10).cast("bigint")
    bucket = F.lit(-1) - F.pmod(F.xxhash64(run_id), F.lit(RUN_PART_BUCKETS))
    return (
        F.when(run_id.isNull(), F.lit(None))
        .when(run_id.rlike(_UUID7), F.floor(millis / F.lit(_DAY_MS)))
        .otherwise(bucket)
        .cast("int")
    )
