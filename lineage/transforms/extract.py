"""Extract, once per event, everything the lineage model reads from an event's JSON. Pure, no I/O, no actions.

``lake.raw.events`` keeps each event exactly as received (``event_json``) plus its envelope columns. The
model needs a few more values from inside the JSON: job facets, run facets (error, nominal time,
processing engine) and every dataset mention with its symlinks, schema, statistics and column-lineage
facets. :func:`extract_events` parses each event once into a VARIANT and reads all of them in the same
pass; the build stores the result as two compact typed tables (``lineage.event_facts``: one row per event,
``lineage.dataset_mentions``: one row per mention), so no later build parses that event again.

Facets are read one path at a time (``try_variant_get``), so a mistyped value nulls that value only, not
the event (``from_json`` with a struct schema would null the whole event).
"""

from __future__ import annotations

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lineage.transforms.column_facets import ENTRY_TYPE, column_entries, facet_digest, lineage_entries
from lineage.transforms.envelope import EVENT_COLUMNS
from lineage.transforms.model_common import (
    ASSERTIONS_TYPE,
    COLUMN_METRICS_TYPE,
    DATASET_EVENT,
    FIELD_TAGS_TYPE,
    IDENTIFIERS_TYPE,
    JOB_EVENT,
    METRICS_TYPE,
    OWNERS_TYPE,
    RUN_EVENT,
    SCHEMA_FIELDS_TYPE,
    TAGS_TYPE,
    TESTS_TYPE,
    event_hash,
    get,
    parsed_event,
    present,
)

# Envelope columns of raw.events carried into the facts unchanged (no parsing needed for them): the event's
# own columns up to ``producer``, less the DatasetEvent's dataset (read with the mentions).
ENVELOPE = tuple(
    c for c in EVENT_COLUMNS[: EVENT_COLUMNS.index("producer") + 1] if not c.startswith("dataset_")
)

# Where the event's raw row came from: its identity in ``raw.events`` (one row per Kafka offset), which
# lets a re-extraction tell the extracted rows of events retention removed from the raw table.
COORDINATES = ("kafka_topic", "kafka_partition", "kafka_offset")

# Columns of ``lineage.event_facts`` (besides the build's bookkeeping column), in table order.
FACT_COLUMNS = (
    *ENVELOPE,
    "event_hash",
    *COORDINATES,
    "job_type",
    "job_description",
    "job_source_code",
    "job_owners",
    "job_tags",
    "run_error",
    "run_nominal_time",
    "run_processing_engine",
    "run_dependencies",
    "run_tags",
)

# One declared job dependency of a run, relative to the run's own job (``direction`` upstream: the named job
# runs before this one). ``source``: ``jobDependencies`` (the OpenLineage run facet), ``airflow`` (the task
# facet's upstream/downstream task ids) or ``lineage`` (JOB inputs of the job-level lineage facet).
DEPENDENCY_TYPE = (
    "struct<direction:string,job_namespace:string,job_name:string,run_id:string,dependency_type:string,"
    "sequence_trigger_rule:string,status_trigger_rule:string,source:string>"
)

MENTION_TYPE = (
    "struct<role:string,namespace:string,name:string,symlinks:"
    + IDENTIFIERS_TYPE
    + ",schema_fields:"
    + SCHEMA_FIELDS_TYPE
    + ",column_facet:string,column_entries:array<"
    + ENTRY_TYPE
    + ">,row_count:bigint,size_bytes:bigint,file_count:bigint,lifecycle:string,previous_namespace:string,"
    "previous_name:string,tags:"
    + TAGS_TYPE
    + ",field_tags:"
    + FIELD_TAGS_TYPE
    + ",assertions:"
    + ASSERTIONS_TYPE
    + ",tests:"
    + TESTS_TYPE
    + ",metrics:"
    + METRICS_TYPE
    + ",dataset_version:string>"
)

SOURCE_CODE_FIELDS = (
    ("type", "type"),
    ("url", "url"),
    ("repoUrl", "repo_url"),
    ("path", "path"),
    ("version", "version"),
)


def _facet(v: Column, path: str, /, **fields: str | tuple[str, str]) -> Column:
    """The facet at ``path`` as a struct of ``name=key`` (string) or ``name=(key, type)`` fields; null when
    the facet is absent (a facet present with every field null is a struct of nulls, not null)."""
    typed = {name: (spec, "string") if isinstance(spec, str) else spec for name, spec in fields.items()}
    struct = F.struct(*[get(v, f"{path}.{key}", type_).alias(name) for name, (key, type_) in typed.items()])
    return F.when(present(v, path), struct)


def _assertions(node: Column) -> Column:
    """The data-quality assertions facet of a mention (spec/facets/DataQualityAssertionsDatasetFacet.json:
    an input dataset facet, ``assertions[]`` of ``assertion``, ``success`` and an optional ``column``), read
    from ``inputFacets`` and, where a producer puts it there, ``facets``; null without the facet.

    Nothing of another shape is dropped: an entry without a readable name keeps its JSON text as
    ``assertion``, one whose ``success`` is not a boolean keeps a null ``success``, and a facet without an
    ``assertions`` array becomes one entry holding the facet's text; ``problem`` says which."""
    facet = F.coalesce(
        get(node, "$.inputFacets.dataQualityAssertions", "variant"),
        get(node, "$.facets.dataQualityAssertions", "variant"),
    )
    items = get(facet, "$.assertions", "array<variant>")

    def one(item: Column) -> Column:
        name = get(item, "$.assertion")
        success = get(item, "$.success", "boolean")
        return F.struct(
            F.coalesce(name, F.to_json(item)).alias("assertion"),
            success.alias("success"),
            get(item, "$.column").alias("column"),
            F.when(name.isNull(), F.lit("assertion without a name"))
            .when(success.isNull(), F.lit("success is not true or false"))
            .alias("problem"),
        )

    unreadable = F.array(
        F.struct(
            F.to_json(facet).alias("assertion"),
            F.lit(None).cast("boolean").alias("success"),
            F.lit(None).cast("string").alias("column"),
            F.lit("no assertions array").alias("problem"),
        )
    )
    return (
        F.when(facet.isNull() | F.is_variant_null(facet), F.lit(None).cast(ASSERTIONS_TYPE))
        .when(items.isNull(), unreadable)
        .otherwise(F.transform(items, one))
    )


def _problems(*checks: Column) -> Column:
    """The messages of the failed checks joined by "; ", null when every check passed."""
    joined = F.concat_ws("; ", *checks)
    return F.when(joined != "", joined)


def _number(node: Column, key: str, type_: str) -> tuple[Column, Column]:
    """``key`` of an object as ``type_`` and the message saying it is not a number (null when it is or when
    it is absent); the message holds the value's JSON text."""
    value = get(node, f"$.{key}", type_)
    raw = get(node, f"$.{key}", "variant")
    bad = raw.isNotNull() & ~F.is_variant_null(raw) & value.isNull()
    return value, F.when(bad, F.concat(F.lit(f"{key} is not a number: "), F.to_json(raw)))


def _metrics(node: Column) -> Column:
    """The data-quality metrics facet of a mention (spec/facets/DataQualityMetricsInputDatasetFacet.json, an
    input dataset facet: ``rowCount``, ``bytes``, ``fileCount`` and ``columnMetrics``, an object keyed by
    column name of ``nullCount``, ``distinctCount``, ``sum``, ``count``, ``min``, ``max`` and ``quantiles``),
    read from ``inputFacets`` and, where a producer puts it there, ``facets``; null without the facet.

    A value that is not a number is kept as null and named, with its JSON text, in ``problem`` (of the
    dataset or of its column); so is a ``columnMetrics`` or a column entry that is not an object."""
    facet = F.coalesce(
        get(node, "$.inputFacets.dataQualityMetrics", "variant"),
        get(node, "$.facets.dataQualityMetrics", "variant"),
    )
    row_count, bad_rows = _number(facet, "rowCount", "bigint")
    size, bad_size = _number(facet, "bytes", "bigint")
    files, bad_files = _number(facet, "fileCount", "bigint")
    raw_columns = get(facet, "$.columnMetrics", "variant")
    by_column = get(facet, "$.columnMetrics", "map<string,variant>")
    columns_problem = F.when(
        raw_columns.isNotNull() & ~F.is_variant_null(raw_columns) & by_column.isNull(),
        F.concat(F.lit("columnMetrics is not an object: "), F.to_json(raw_columns)),
    )

    def column(entry: Column) -> Column:
        value = entry["value"]
        counts = {
            "null_count": _number(value, "nullCount", "bigint"),
            "distinct_count": _number(value, "distinctCount", "bigint"),
            **{k: _number(value, k, "double") for k in ("sum", "count", "min", "max")},
            "quantiles": _number(value, "quantiles", "map<string,double>"),
        }
        by_quantile = counts["quantiles"][0]
        counts["quantiles"] = (
            F.array_sort(
                F.transform(
                    F.map_entries(by_quantile),
                    lambda q: F.struct(q["key"].alias("quantile"), q["value"].alias("value")),
                )
            ),
            counts["quantiles"][1],
        )
        not_object = F.when(
            ~F.is_variant_null(value) & get(value, "$", "map<string,variant>").isNull(),
            F.concat(F.lit("not an object: "), F.to_json(value)),
        )
        return F.struct(
            entry["key"].alias("column"),
            *[v.alias(name) for name, (v, _) in counts.items()],
            _problems(not_object, *[bad for _, bad in counts.values()]).alias("problem"),
        )

    return F.when(facet.isNull() | F.is_variant_null(facet), F.lit(None).cast(METRICS_TYPE)).otherwise(
        F.struct(
            row_count.alias("row_count"),
            size.alias("bytes"),
            files.alias("file_count"),
            _problems(bad_rows, bad_size, bad_files, columns_problem).alias("problem"),
            F.coalesce(
                F.transform(F.map_entries(by_column), column), F.array().cast(f"array<{COLUMN_METRICS_TYPE}>")
            ).alias("columns"),
        )
    )


TEST_STATUSES = ("pass", "fail", "skip")


def _tests(v: Column) -> Column:
    """The test run facet of an event (``run.facets.test``, OpenLineage TestRunFacet 1-0-1: ``tests[]`` of
    ``name``, ``status`` pass, fail or skip, and optional ``severity``, ``type``, ``expected``, ``actual``,
    ``params``...), null without the facet. The facet names no dataset: the build attributes each test to
    the run's inputs (dbt-ol sends one run per singular test, with the models it reads as inputs).

    Nothing of another shape is dropped: a test without a readable name keeps its JSON text as ``name``, a
    status other than pass, fail or skip keeps a null ``success`` (the status's text is in ``problem``), and
    a facet without a ``tests`` array becomes one entry holding the facet's text; ``problem`` says which."""
    facet = get(v, "$.run.facets.test", "variant")
    items = get(facet, "$.tests", "array<variant>")

    def one(item: Column) -> Column:
        name = get(item, "$.name")
        status = F.lower(F.trim(get(item, "$.status")))
        known = F.coalesce(status.isin(*TEST_STATUSES), F.lit(False))
        return F.struct(
            F.coalesce(name, F.to_json(item)).alias("name"),
            F.when(known, status).alias("status"),
            F.when(status == "pass", True).when(status == "fail", False).alias("success"),
            get(item, "$.params.column_name").alias("column"),
            F.when(name.isNull(), F.lit("test without a name"))
            .when(
                ~known,
                F.concat(
                    F.lit("status is not pass, fail or skip: "),
                    F.coalesce(F.to_json(get(item, "$.status", "variant")), F.lit("none")),
                ),
            )
            .alias("problem"),
        )

    unreadable = F.array(
        F.struct(
            F.to_json(facet).alias("name"),
            *[F.lit(None).cast(t).alias(c) for c, t in (("status", "string"), ("success", "boolean"))],
            F.lit(None).cast("string").alias("column"),
            F.lit("no tests array").alias("problem"),
        )
    )
    return (
        F.when(facet.isNull() | F.is_variant_null(facet), F.lit(None).cast(TESTS_TYPE))
        .when(items.isNull(), unreadable)
        .otherwise(F.transform(items, one))
    )


def _tags(node: Column) -> tuple[Column, Column]:
    """The dataset tags facet split in two: the entries about the dataset (no ``field``) and those about one
    of its fields; null without the facet. Entries are kept as given (any key, value or field text, an empty
    key too), each read on its own: an entry that is not an object is kept as a dataset tag whose key is its
    JSON text, and a number where text is expected reads as its text, so one odd entry loses nothing else."""

    def read(e: Column) -> Column:
        is_object = F.schema_of_variant(e).startswith("OBJECT")
        return F.struct(
            get(e, "$.field").alias("field"),
            F.when(is_object, get(e, "$.key")).otherwise(F.to_json(e)).alias("key"),
            get(e, "$.value").alias("value"),
            get(e, "$.source").alias("source"),
        )

    entries = F.transform(get(node, "$.facets.tags.tags", "array<variant>"), read)

    def own(e: Column) -> Column:
        return F.struct(e["key"].alias("key"), e["value"].alias("value"), e["source"].alias("source"))

    return (
        F.transform(F.filter(entries, lambda e: e["field"].isNull()), own),
        F.filter(entries, lambda e: e["field"].isNotNull()),
    )


def _mention(node: Column, role: str, statistics: str | None, tests: Column | None = None) -> Column:
    def stat(key: str) -> Column:
        return get(node, f"{statistics}.{key}", "bigint") if statistics else F.lit(None).cast("bigint")

    column_lineage = get(node, "$.facets.columnLineage", "variant")
    # The newer LineageDatasetFacet (spec/facets/LineageDatasetFacet.json), read where present.
    lineage = get(node, "$.facets.lineage", "variant")
    tags, field_tags = _tags(node)
    return F.struct(
        F.lit(role).alias("role"),
        get(node, "$.namespace").alias("namespace"),
        get(node, "$.name").alias("name"),
        get(node, "$.facets.symlinks.identifiers", IDENTIFIERS_TYPE).alias("symlinks"),
        get(node, "$.facets.schema.fields", SCHEMA_FIELDS_TYPE).alias("schema_fields"),
        facet_digest(column_lineage, lineage).alias("column_facet"),
        column_entries(column_lineage, lineage).alias("column_entries"),
        stat("rowCount").alias("row_count"),
        stat("size").alias("size_bytes"),
        stat("fileCount").alias("file_count"),
        # lifecycleStateChange (CREATE, DROP, OVERWRITE, TRUNCATE, ALTER, RENAME with previousIdentifier).
        F.upper(F.trim(get(node, "$.facets.lifecycleStateChange.lifecycleStateChange"))).alias("lifecycle"),
        get(node, "$.facets.lifecycleStateChange.previousIdentifier.namespace").alias("previous_namespace"),
        get(node, "$.facets.lifecycleStateChange.previousIdentifier.name").alias("previous_name"),
        tags.alias("tags"),
        field_tags.alias("field_tags"),
        _assertions(node).alias("assertions"),
        (F.lit(None).cast(TESTS_TYPE) if tests is None else tests).alias("tests"),
        _metrics(node).alias("metrics"),
        # The dataset version facet (DatasetVersionDatasetFacet): the producer's own id of the version read
        # or written, e.g. an Iceberg snapshot id from the Spark integration, on inputs and outputs alike.
        get(node, "$.facets.version.datasetVersion").alias("dataset_version"),
    )


# The job-level ``lineage`` facet (OpenLineage LineageJobFacet, spec/facets/LineageFacet.json): ``entries[]``
# of target DATASETs (``inputs[]`` and ``fields.<f>.inputs[]``) and target JOBs (``inputs[]``; a JOB entry
# or input without namespace and name is the event's own job). Inputs are DATASETs or JOBs.
JOB_LINEAGE = "$.job.facets.lineage.entries"


def _typed(node: Column, kind: str) -> Column:
    return F.coalesce(F.upper(F.trim(get(node, "$.type"))) == kind, F.lit(False))


def _own_job(node: Column) -> Column:
    """Whether a JOB entry or input of the job-level ``lineage`` facet is the event's own job."""
    namespace, name = get(node, "$.namespace"), get(node, "$.name")
    unnamed = namespace.isNull() & name.isNull()
    return unnamed | ((namespace == F.col("job_namespace")) & (name == F.col("job_name")))


def _named_mention(node: Column, role: str, entries: Column | None = None) -> Column:
    """A mention known only by its name (and, for a target dataset, its column-lineage entries)."""
    none = F.lit(None)
    digest = none.cast("string") if entries is None else facet_digest(none.cast("variant"), node)
    return F.struct(
        F.lit(role).alias("role"),
        get(node, "$.namespace").alias("namespace"),
        get(node, "$.name").alias("name"),
        none.cast(IDENTIFIERS_TYPE).alias("symlinks"),
        none.cast(SCHEMA_FIELDS_TYPE).alias("schema_fields"),
        digest.alias("column_facet"),
        (none.cast(f"array<{ENTRY_TYPE}>") if entries is None else entries).alias("column_entries"),
        *[none.cast("bigint").alias(c) for c in ("row_count", "size_bytes", "file_count")],
        *[none.cast("string").alias(c) for c in ("lifecycle", "previous_namespace", "previous_name")],
        none.cast(TAGS_TYPE).alias("tags"),
        none.cast(FIELD_TAGS_TYPE).alias("field_tags"),
        none.cast(ASSERTIONS_TYPE).alias("assertions"),
        none.cast(TESTS_TYPE).alias("tests"),
        none.cast(METRICS_TYPE).alias("metrics"),
        none.cast("string").alias("dataset_version"),
    )


def _entry_inputs(entry: Column) -> Column:
    """Every input of an entry: its entity-level ``inputs[]`` and those of each ``fields.<f>``."""
    empty = F.array().cast("array<variant>")
    per_field = F.transform(
        F.map_values(get(entry, "$.fields", "map<string,variant>")),
        lambda f: F.coalesce(get(f, "$.inputs", "array<variant>"), empty),
    )
    return F.concat(
        F.coalesce(get(entry, "$.inputs", "array<variant>"), empty), F.coalesce(F.flatten(per_field), empty)
    )


def _job_lineage_mentions(v: Column) -> Column:
    """Mentions from the job-level ``lineage`` facet, as the run's (or, on a JobEvent, the job's) own I/O.

    A DATASET entry is an output of the event's job, with the entry's field-level inputs as its column
    lineage (read like the dataset-level ``lineage`` facet); every DATASET input of it, and of a JOB entry
    for the event's own job, is an input. Entries about other jobs are not read: a job's edges come from its
    own events (their JOB inputs are dependencies, see :func:`_job_lineage_dependencies`).
    """
    empty = F.array().cast(f"array<{MENTION_TYPE}>")
    entries = get(v, JOB_LINEAGE, "array<variant>")

    def of_entry(entry: Column) -> Column:
        is_dataset = _typed(entry, "DATASET")
        inputs = F.filter(_entry_inputs(entry), lambda i: _typed(i, "DATASET"))
        read = F.transform(inputs, lambda i: _named_mention(i, "input"))
        written = F.array(_named_mention(entry, "output", F.when(entry.isNotNull(), lineage_entries(entry))))
        return (
            F.when(is_dataset, F.concat(written, read))
            .when(_typed(entry, "JOB") & _own_job(entry), read)
            .otherwise(empty)
        )

    return F.coalesce(F.flatten(F.transform(entries, of_entry)), empty)


def _mentions(v: Column) -> Column:
    empty = F.array().cast(f"array<{MENTION_TYPE}>")
    inputs = get(v, "$.inputs", "array<variant>")
    outputs = get(v, "$.outputs", "array<variant>")
    dataset = get(v, "$.dataset", "variant")
    tests = _tests(v)
    return F.concat(
        F.coalesce(
            F.transform(inputs, lambda x: _mention(x, "input", "$.inputFacets.inputStatistics", tests)), empty
        ),
        F.coalesce(
            F.transform(outputs, lambda x: _mention(x, "output", "$.outputFacets.outputStatistics")), empty
        ),
        F.when(F.col("event_kind") == DATASET_EVENT, F.array(_mention(dataset, "static", None))).otherwise(
            empty
        ),
        _job_lineage_mentions(v),
    )


def _declared(v: Column, direction: str) -> Column:
    def one(node: Column) -> Column:
        return F.struct(
            F.lit(direction).alias("direction"),
            get(node, "$.job.namespace").alias("job_namespace"),
            get(node, "$.job.name").alias("job_name"),
            F.lower(F.trim(get(node, "$.run.runId"))).alias("run_id"),
            get(node, "$.dependency_type").alias("dependency_type"),
            get(node, "$.sequence_trigger_rule").alias("sequence_trigger_rule"),
            get(node, "$.status_trigger_rule").alias("status_trigger_rule"),
            F.lit("jobDependencies").alias("source"),
        )

    return F.transform(get(v, f"$.run.facets.jobDependencies.{direction}", "array<variant>"), one)


def _airflow_tasks(v: Column, direction: str) -> Column:
    """The task ids of the ``airflow`` run facet's ``<direction>_task_ids`` as jobs ``<dag_id>.<task_id>`` in
    the event's job namespace. Provider versions send a JSON array or a string holding a Python list repr
    (``"['load_raw']"``); both are read by taking the quoted items of the value's text."""
    task = "$.run.facets.airflow.task"
    text = get(v, f"{task}.{direction}_task_ids")  # an array reads as its JSON text
    ids = F.regexp_extract_all(text, F.lit("""['"]([^'"]+)['"]"""), 1)
    dag = F.coalesce(get(v, "$.run.facets.airflow.dag.dag_id"), get(v, "$.run.facets.parent.job.name"))
    trigger = get(v, f"{task}.trigger_rule")
    return F.transform(
        ids,
        lambda task_id: F.struct(
            F.lit(direction).alias("direction"),
            F.col("job_namespace").alias("job_namespace"),
            F.concat(dag, F.lit("."), task_id).alias("job_name"),
            F.lit(None).cast("string").alias("run_id"),
            F.lit(None).cast("string").alias("dependency_type"),
            F.lit(None).cast("string").alias("sequence_trigger_rule"),
            # Airflow's trigger rule belongs to the downstream task (this one for its upstream ids).
            (trigger if direction == "upstream" else F.lit(None).cast("string")).alias("status_trigger_rule"),
            F.lit("airflow").alias("source"),
        ),
    )


def _job_lineage_dependencies(v: Column) -> Column:
    """Upstream jobs from the job-level ``lineage`` facet: the JOB inputs of a JOB entry for the event's own
    job (data flows from that job into this one), with the input's run id when given."""
    none = F.lit(None).cast("string")

    def one(node: Column) -> Column:
        return F.struct(
            F.lit("upstream").alias("direction"),
            get(node, "$.namespace").alias("job_namespace"),
            get(node, "$.name").alias("job_name"),
            F.lower(F.trim(get(node, "$.runId"))).alias("run_id"),
            none.alias("dependency_type"),
            none.alias("sequence_trigger_rule"),
            none.alias("status_trigger_rule"),
            F.lit("lineage").alias("source"),
        )

    own = F.filter(get(v, JOB_LINEAGE, "array<variant>"), lambda e: _typed(e, "JOB") & _own_job(e))
    inputs = F.flatten(F.transform(own, _entry_inputs))
    return F.transform(F.filter(inputs, lambda i: _typed(i, "JOB") & ~_own_job(i)), one)


def _dependencies(v: Column) -> Column:
    empty = F.array().cast(f"array<{DEPENDENCY_TYPE}>")
    parts = [
        F.coalesce(part, empty)
        for direction in ("upstream", "downstream")
        for part in (_declared(v, direction), _airflow_tasks(v, direction))
    ]
    parts.append(F.coalesce(_job_lineage_dependencies(v), empty))
    every = F.filter(F.concat(*parts), lambda d: d["job_name"].isNotNull() & d["job_namespace"].isNotNull())
    return F.when(F.size(every) > 0, every)


def extract_events(events: DataFrame, *, variant: Column | None = None) -> DataFrame:
    """Parse each event's JSON once and read everything the model needs from it.

    Args:
        events: rows of ``lake.raw.events`` (RunEvents, JobEvents and DatasetEvents).
        variant: the event as a VARIANT when ``events`` already holds one (default: parse ``event_json``).

    Returns:
        :data:`FACT_COLUMNS` plus ``mentions`` (array of role, namespace, name as reported, symlinks,
        schema_fields, column_facet and column_entries (the column-lineage facets: digest and typed
        entries), row_count, size_bytes, file_count): the job facets
        (``job_type`` = integration/job_type/processing_type, ``job_description``, ``job_source_code``,
        ``job_owners``, ``job_tags``), the run facets (``run_error`` = message/stack_trace/language,
        ``run_nominal_time`` = start/end, ``run_processing_engine`` = name/version/adapter,
        ``run_dependencies``: the ``jobDependencies`` facet and Airflow's task ids, see
        :data:`DEPENDENCY_TYPE`, ``run_tags``), each null when the event does not carry the facet, and
        ``event_hash`` (SHA-256 of the JSON: duplicates and ties) and the raw row's :data:`COORDINATES`.
    """
    parsed = events.where(F.col("event_kind").isin(RUN_EVENT, JOB_EVENT, DATASET_EVENT)).select(
        *ENVELOPE,
        event_hash().alias("event_hash"),
        *COORDINATES,
        (parsed_event() if variant is None else variant).alias("_v"),
    )
    return parsed.select(*ENVELOPE, "event_hash", *COORDINATES, *_extracted_columns())


# The extraction's expressions, built once per JVM (they name columns only, no DataFrame): building them
# is about 10,000 Py4J calls, 3-4 s on 2 cores, which every build and every test's extraction paid again.
_EXTRACTED: dict[int, tuple[Column, ...]] = {}


def _extracted_columns() -> tuple[Column, ...]:
    jvm = id(SparkContext._jvm)
    if jvm not in _EXTRACTED:
        _EXTRACTED.clear()
        _EXTRACTED[jvm] = _extraction()
    return _EXTRACTED[jvm]


def _extraction() -> tuple[Column, ...]:
    v = F.col("_v")
    job = "$.job.facets"
    run = "$.run.facets"
    return (
        _facet(
            v,
            f"{job}.jobType",
            integration="integration",
            job_type="jobType",
            processing_type="processingType",
        ).alias("job_type"),
        get(v, f"{job}.documentation.description").alias("job_description"),
        _facet(v, f"{job}.sourceCodeLocation", **{name: key for key, name in SOURCE_CODE_FIELDS}).alias(
            "job_source_code"
        ),
        get(v, f"{job}.ownership.owners", OWNERS_TYPE).alias("job_owners"),
        get(v, f"{job}.tags.tags", TAGS_TYPE).alias("job_tags"),
        _facet(
            v,
            f"{run}.errorMessage",
            message="message",
            stack_trace="stackTrace",
            language="programmingLanguage",
        ).alias("run_error"),
        _facet(
            v,
            f"{run}.nominalTime",
            start=("nominalStartTime", "timestamp"),
            end=("nominalEndTime", "timestamp"),
        ).alias("run_nominal_time"),
        _facet(
            v, f"{run}.processing_engine", name="name", version="version", adapter="openlineageAdapterVersion"
        ).alias("run_processing_engine"),
        _dependencies(v).alias("run_dependencies"),
        get(v, f"{run}.tags.tags", TAGS_TYPE).alias("run_tags"),
        _mentions(v).alias("mentions"),
    )


def event_facts(extracted: DataFrame) -> DataFrame:
    """The ``lineage.event_facts`` rows of :func:`extract_events` (the mentions left out)."""
    return extracted.select(*FACT_COLUMNS)


def as_facts(events: DataFrame) -> DataFrame:
    """``events`` as event facts: rows of ``raw.events`` are extracted, event facts are returned as they are.

    Lets the model transforms take either (the build passes the stored facts; small tests pass raw rows).
    """
    return event_facts(extract_events(events)) if "event_json" in events.columns else events
