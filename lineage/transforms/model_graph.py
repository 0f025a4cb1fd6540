"""The lineage graph on canonical datasets (run_io, job_edges, dataset_edges) and the summaries.

Pure transforms, no I/O, no actions.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lineage.transforms.model_common import JOB_EVENT, LOST, RUN_EVENT, RUNNING, latest, latest_key
from lineage.transforms.model_datasets import canonical_mentions, has_schema, schema_hash

JOB = ["job_namespace", "job_name"]


def run_io(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """Run-level inputs and outputs on canonical datasets.

    A run's datasets are the union over all its events: Flink 2.x reports them on START only, its RUNNING
    and terminal events carry none. Statistics, the dataset version and the schema are each those of the
    latest event carrying them: a row is the version the run read or wrote (one per run, dataset and
    direction; a run that reports several versions of one dataset is known by its last).

    Args:
        mentions: output of :func:`~lineage.transforms.model_datasets.dataset_mentions`.
        aliases: output of :func:`~lineage.transforms.model_datasets.dataset_aliases`.

    Returns:
        ``run_id, job_namespace, job_name, dataset_id, direction (input/output), first_seen, last_seen,
        row_count, size_bytes, file_count, lifecycle_states`` (the distinct ``lifecycleStateChange`` values
        the run reported for the dataset, sorted: CREATE, DROP, OVERWRITE, TRUNCATE, ALTER, RENAME),
        ``dataset_version`` (the producer's version id from the version facet, null when none was sent) and
        ``schema_hash`` (of the schema the run reported, as in ``dataset_schemas``; null without one).
    """
    stats = F.struct("row_count", "size_bytes", "file_count")
    fields = F.col("schema_fields")
    has_stats = (
        F.col("row_count").isNotNull() | F.col("size_bytes").isNotNull() | F.col("file_count").isNotNull()
    )
    folded = (
        canonical_mentions(mentions, aliases)
        .where((F.col("event_kind") == RUN_EVENT) & F.col("run_id").isNotNull())
        .groupBy("run_id", "dataset_id", F.col("role").alias("direction"))
        .agg(
            F.max_by(F.struct(*JOB), latest_key()).alias("_job"),
            F.min("event_time").alias("first_seen"),
            F.max("event_time").alias("last_seen"),
            latest(stats, has_stats).alias("_stats"),
            F.array_sort(F.collect_set("lifecycle")).alias("lifecycle_states"),
            latest(F.col("dataset_version")).alias("dataset_version"),
            latest(fields, has_schema(fields)).alias("_fields"),
        )
    )
    return folded.select(
        "run_id",
        "_job.job_namespace",
        "_job.job_name",
        "dataset_id",
        "direction",
        "first_seen",
        "last_seen",
        "_stats.row_count",
        "_stats.size_bytes",
        "_stats.file_count",
        "lifecycle_states",
        "dataset_version",
        F.when(F.col("_fields").isNotNull(), schema_hash(F.col("_fields"))).alias("schema_hash"),
    )


def quality_results(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """Data-quality results per run, canonical dataset, column and assertion: the data-quality assertions
    facet of each mention and the test run facet of the run, whose tests count for each of its inputs.

    A run may report the same assertion in several events (a retried check): the latest event wins, and
    within one event a failure wins over a success, so the row never depends on arrival order. Entries the
    extraction could not read keep their text as ``assertion`` and say why in ``problem`` (nothing is lost).

    Args:
        mentions: output of :func:`~lineage.transforms.model_datasets.dataset_mentions`.
        aliases: output of :func:`~lineage.transforms.model_datasets.dataset_aliases`.

    Returns:
        ``run_id, job_namespace, job_name, dataset_id, column_name (null: the whole dataset), assertion (a
        test's name for the test run facet), success (null when unreadable or skipped), checked_at (time of
        the event that reported it), problem, facet (dataQualityAssertions or test), status (the test's
        pass, fail or skip; null for the assertions facet)``.
    """
    run_mentions = canonical_mentions(mentions, aliases).where(
        (F.col("event_kind") == RUN_EVENT) & F.col("run_id").isNotNull()
    )
    keep = ["run_id", *JOB, "dataset_id", "event_time", "event_hash"]
    asserted = (
        run_mentions.where(F.col("assertions").isNotNull())
        .select(*keep, F.explode("assertions").alias("a"))
        .select(
            *keep,
            F.struct(
                "a.assertion",
                "a.success",
                "a.column",
                "a.problem",
                F.lit("dataQualityAssertions").alias("facet"),
                F.lit(None).cast("string").alias("status"),
            ).alias("a"),
        )
    )
    tested = (
        run_mentions.where((F.col("role") == "input") & F.col("tests").isNotNull())
        .select(*keep, F.explode("tests").alias("t"))
        .select(
            *keep,
            F.struct(
                F.col("t.name").alias("assertion"),
                "t.success",
                "t.column",
                "t.problem",
                F.lit("test").alias("facet"),
                "t.status",
            ).alias("a"),
        )
    )
    reported = asserted.unionByName(tested)
    # Latest event first, then a failure (False sorts before True, so ``~success`` puts it last = max).
    order = F.struct("event_time", "event_hash", ~F.coalesce(F.col("a.success"), F.lit(True)))
    result = F.struct(*[F.col(f"a.{c}").alias(c) for c in ("success", "problem", "facet", "status")])
    folded = reported.groupBy(
        "run_id", "dataset_id", F.col("a.column").alias("column_name"), "a.assertion"
    ).agg(
        F.max_by(F.struct(*JOB), latest_key()).alias("_job"),
        F.max_by(result, order).alias("_result"),
        F.max("event_time").alias("checked_at"),
    )
    return folded.select(
        "run_id",
        "_job.job_namespace",
        "_job.job_name",
        "dataset_id",
        "column_name",
        "assertion",
        "_result.success",
        "checked_at",
        "_result.problem",
        "_result.facet",
        "_result.status",
    )


def quality_metrics(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """The data-quality metrics facet per run, canonical dataset and column: one row for the dataset
    (``column_name`` null: its row, byte and file counts) and one per column of ``columnMetrics``.

    A run may send the facet in several events: the latest event's values win (event time, then content
    hash), so the row never depends on arrival order. Values that were not numbers are null and named, with
    their text, in ``problem``.

    Args:
        mentions: output of :func:`~lineage.transforms.model_datasets.dataset_mentions`.
        aliases: output of :func:`~lineage.transforms.model_datasets.dataset_aliases`.

    Returns:
        ``run_id, job_namespace, job_name, dataset_id, column_name, row_count, bytes, file_count,
        null_count, distinct_count, sum, count, min, max, quantiles (quantile, value pairs sorted by
        quantile),
        measured_at (time of the event that reported them), problem``.
    """
    column_types = {
        "null_count": "bigint",
        "distinct_count": "bigint",
        **dict.fromkeys(("sum", "count", "min", "max"), "double"),
        "quantiles": "array<struct<quantile:string,value:double>>",
    }
    column_fields = tuple(column_types)
    dataset_fields = ("row_count", "bytes", "file_count")
    m = F.col("metrics")

    def row(column: Column | None) -> Column:
        none = F.lit(None)
        return F.struct(
            (none.cast("string") if column is None else column["column"]).alias("column_name"),
            *[(m[f] if column is None else none.cast("bigint")).alias(f) for f in dataset_fields],
            *[(none.cast(t) if column is None else column[f]).alias(f) for f, t in column_types.items()],
            (m["problem"] if column is None else column["problem"]).alias("problem"),
        )

    rows = F.concat(F.transform(m["columns"], row), F.array(row(None)))
    reported = (
        canonical_mentions(mentions, aliases)
        .where((F.col("event_kind") == RUN_EVENT) & F.col("run_id").isNotNull() & m.isNotNull())
        .select("run_id", *JOB, "dataset_id", "event_time", "event_hash", F.explode(rows).alias("r"))
    )
    values = F.struct(*[F.col(f"r.{f}").alias(f) for f in (*dataset_fields, *column_fields, "problem")])
    folded = reported.groupBy("run_id", "dataset_id", F.col("r.column_name").alias("column_name")).agg(
        F.max_by(F.struct(*JOB), latest_key()).alias("_job"),
        F.max_by(values, latest_key()).alias("_values"),
        F.max("event_time").alias("measured_at"),
    )
    return folded.select(
        "run_id",
        "_job.job_namespace",
        "_job.job_name",
        "dataset_id",
        "column_name",
        *[F.col(f"_values.{f}").alias(f) for f in (*dataset_fields, *column_fields)],
        "measured_at",
        "_values.problem",
    )


def drops_only(lifecycle_states: Column) -> Column:
    """True for a run's output that only DROPped the dataset: the run is not the dataset's producer."""
    return F.coalesce(lifecycle_states == F.array(F.lit("DROP")), F.lit(False))


def static_io(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """Job-level inputs and outputs declared by JobEvents (static lineage, no run).

    Args:
        mentions: output of :func:`~lineage.transforms.model_datasets.dataset_mentions`.
        aliases: output of :func:`~lineage.transforms.model_datasets.dataset_aliases`.

    Returns:
        ``job_namespace, job_name, dataset_id, direction (input/output), first_seen, last_seen``.
    """
    return (
        canonical_mentions(mentions, aliases)
        .where((F.col("event_kind") == JOB_EVENT) & F.col("job_name").isNotNull())
        .groupBy(*JOB, "dataset_id", F.col("role").alias("direction"))
        .agg(F.min("event_time").alias("first_seen"), F.max("event_time").alias("last_seen"))
    )


def job_edges(run_io: DataFrame, runs: DataFrame, static: DataFrame | None = None) -> DataFrame:
    """Dataset -> job (``input``) and job -> dataset (``output``) edges.

    An edge is seen from the first event that mentions it until the last event of any run using it: a
    streaming run keeps reading and writing after the START that listed its datasets (Flink 2.x), so the
    run's ``last_event_at`` extends ``last_seen``. Static JobEvent edges count no run.

    Args:
        run_io: output of :func:`run_io`.
        runs: output of :func:`~lineage.transforms.model_runs.runs` (for ``last_event_at``).
        static: output of :func:`static_io`, optional.

    Returns:
        ``job_namespace, job_name, dataset_id, direction, run_count, first_seen, last_seen,
        lifecycle_states`` (every lifecycle change reported on the edge), ``drop_only`` (an output edge
        whose every run only DROPped the dataset: the job is not a producer of it).
    """
    ended = runs.select("run_id", "last_event_at")
    by_run = (
        run_io.join(ended, "run_id", "left")
        .groupBy(*JOB, "dataset_id", "direction")
        .agg(
            F.count_distinct("run_id").alias("run_count"),
            F.min("first_seen").alias("first_seen"),
            F.max(F.greatest("last_seen", "last_event_at")).alias("last_seen"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("lifecycle_states")))).alias(
                "lifecycle_states"
            ),
            F.bool_and((F.col("direction") == "output") & drops_only(F.col("lifecycle_states"))).alias(
                "drop_only"
            ),
        )
    )
    if static is None:
        return by_run
    declared = static.select(
        *JOB,
        "dataset_id",
        "direction",
        F.lit(0).cast("bigint").alias("run_count"),
        "first_seen",
        "last_seen",
        F.array().cast("array<string>").alias("lifecycle_states"),
        F.lit(False).alias("drop_only"),
    )
    return (
        by_run.unionByName(declared)
        .groupBy(*JOB, "dataset_id", "direction")
        .agg(
            F.sum("run_count").alias("run_count"),
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("lifecycle_states")))).alias(
                "lifecycle_states"
            ),
            F.bool_and("drop_only").alias("drop_only"),
        )
    )


def dataset_edges(job_edges: DataFrame) -> DataFrame:
    """Dataset -> dataset edges through a job that reads the source and writes the target.

    ``first_seen`` is when the path first existed: the later of the two job edges' ``first_seen``.
    ``last_seen`` is the latest evidence of either end (the later ``last_seen``), so ``first_seen <=
    last_seen`` always. Lineage "as of" T keeps edges with ``first_seen <= T``; staleness can be judged on
    ``last_seen``. A job reading and writing the same dataset gives no self-loop.

    Args:
        job_edges: output of :func:`job_edges`.

    Returns:
        ``source_dataset_id, target_dataset_id, job_namespace, job_name, first_seen, last_seen``.
    """
    reads = job_edges.where(F.col("direction") == "input").select(
        *JOB,
        F.col("dataset_id").alias("source_dataset_id"),
        F.col("first_seen").alias("_in_first"),
        F.col("last_seen").alias("_in_last"),
    )
    writes = job_edges.where((F.col("direction") == "output") & ~F.col("drop_only")).select(
        *JOB,
        F.col("dataset_id").alias("target_dataset_id"),
        F.col("first_seen").alias("_out_first"),
        F.col("last_seen").alias("_out_last"),
    )
    return (
        reads.join(writes, JOB)
        .where(F.col("source_dataset_id") != F.col("target_dataset_id"))
        .select(
            "source_dataset_id",
            "target_dataset_id",
            *JOB,
            F.greatest("_in_first", "_out_first").alias("first_seen"),
            F.greatest("_in_last", "_out_last").alias("last_seen"),
        )
    )


def _count_if(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1)))


def job_summary(runs_with_liveness: DataFrame, job_edges: DataFrame) -> DataFrame:
    """Per job: runs by inferred state, success rate, last run, duration percentiles, fan-in/out.

    ``success_rate`` = COMPLETE / (COMPLETE + FAIL + ABORT), null without terminal runs. The last run is
    the latest started (ties by run id). Durations are those of ended runs (exact median and 95th percentile).
    Upstream jobs write a dataset this job reads; downstream jobs read a dataset it writes (itself excluded).

    Args:
        runs_with_liveness: output of :func:`~lineage.transforms.model_runs.run_liveness`.
        job_edges: output of :func:`job_edges`.

    Returns:
        ``job_namespace, job_name, run_count, running_runs, lost_runs, completed_runs, failed_runs,
        aborted_runs, success_rate, last_run_id, last_run_started_at, last_run_state, last_run_reported_state,
        median_duration_seconds, p95_duration_seconds, input_count, output_count, upstream_job_count,
        downstream_job_count``; every job with a run or an edge.
    """
    state = F.col("inferred_state")
    completed, failed, aborted = (_count_if(state == s) for s in ("COMPLETE", "FAIL", "ABORT"))
    terminal = completed + failed + aborted
    last = F.struct("run_id", "started_at", "inferred_state", "reported_state")
    run_stats = runs_with_liveness.groupBy(*JOB).agg(
        F.count(F.lit(1)).alias("run_count"),
        _count_if(state == RUNNING).alias("running_runs"),
        _count_if(state == LOST).alias("lost_runs"),
        completed.alias("completed_runs"),
        failed.alias("failed_runs"),
        aborted.alias("aborted_runs"),
        F.when(terminal > 0, completed / terminal).alias("success_rate"),
        F.max_by(last, F.struct("started_at", "run_id")).alias("_last"),
        F.median("duration_seconds").alias("median_duration_seconds"),
        F.percentile("duration_seconds", 0.95).alias("p95_duration_seconds"),
    )
    io = job_edges.groupBy(*JOB).agg(
        F.count_distinct(F.when(F.col("direction") == "input", F.col("dataset_id"))).alias("input_count"),
        F.count_distinct(F.when(F.col("direction") == "output", F.col("dataset_id"))).alias("output_count"),
    )
    reads = job_edges.where(F.col("direction") == "input").select(*JOB, "dataset_id")
    writes = job_edges.where((F.col("direction") == "output") & ~F.col("drop_only")).select(
        F.col("job_namespace").alias("other_namespace"), F.col("job_name").alias("other_name"), "dataset_id"
    )
    pairs = reads.join(writes, "dataset_id").where(
        (F.col("job_namespace") != F.col("other_namespace")) | (F.col("job_name") != F.col("other_name"))
    )
    upstream = pairs.groupBy(*JOB).agg(
        F.count_distinct("other_namespace", "other_name").alias("upstream_job_count")
    )
    downstream = pairs.groupBy(
        F.col("other_namespace").alias("job_namespace"), F.col("other_name").alias("job_name")
    ).agg(F.count_distinct(F.col("job_namespace"), F.col("job_name")).alias("downstream_job_count"))
    every_job = runs_with_liveness.select(*JOB).unionByName(job_edges.select(*JOB)).distinct()
    zero = F.lit(0).cast("bigint")
    joined = (
        every_job.join(run_stats, JOB, "left")
        .join(io, JOB, "left")
        .join(upstream, JOB, "left")
        .join(downstream, JOB, "left")
    )
    counts = ("run_count", "running_runs", "lost_runs", "completed_runs", "failed_runs", "aborted_runs")
    return joined.select(
        *JOB,
        *[F.coalesce(F.col(c), zero).alias(c) for c in counts],
        "success_rate",
        F.col("_last.run_id").alias("last_run_id"),
        F.col("_last.started_at").alias("last_run_started_at"),
        F.col("_last.inferred_state").alias("last_run_state"),
        F.col("_last.reported_state").alias("last_run_reported_state"),
        "median_duration_seconds",
        "p95_duration_seconds",
        *[
            F.coalesce(F.col(c), zero).alias(c)
            for c in ("input_count", "output_count", "upstream_job_count", "downstream_job_count")
        ],
    )


def dataset_summary(
    datasets: DataFrame,
    job_edges: DataFrame,
    dataset_edges: DataFrame,
    run_io: DataFrame,
    runs: DataFrame,
    schemas: DataFrame,
) -> DataFrame:
    """Per canonical dataset: producing and consuming jobs, freshness, upstream/downstream, schema versions.

    Freshness: the last write is the latest run that outputs the dataset and did not FAIL, at its end time
    (its last event while it is still running: a streaming writer keeps writing). Ties by run id. A run or
    job that only DROPs the dataset is neither a write nor a producer.

    Args:
        datasets: output of :func:`~lineage.transforms.model_datasets.datasets`.
        job_edges: output of :func:`job_edges`.
        dataset_edges: output of :func:`dataset_edges`.
        run_io: output of :func:`run_io`.
        runs: output of :func:`~lineage.transforms.model_runs.runs`.
        schemas: output of :func:`~lineage.transforms.model_datasets.dataset_schemas`.

    Returns:
        ``dataset_id, namespace, name, producing_jobs, producer_count, consuming_jobs, consumer_count,
        last_write_at, last_write_run_id, upstream_dataset_count, downstream_dataset_count,
        schema_version_count``; job lists are sorted arrays of (namespace, name).
    """
    job = F.struct(F.col("job_namespace").alias("namespace"), F.col("job_name").alias("name"))
    direction = F.col("direction")
    jobs_by_role = job_edges.groupBy("dataset_id").agg(
        F.array_sort(F.collect_set(F.when((direction == "output") & ~F.col("drop_only"), job))).alias(
            "producing_jobs"
        ),
        F.array_sort(F.collect_set(F.when(direction == "input", job))).alias("consuming_jobs"),
    )
    write_at = F.coalesce(F.col("ended_at"), F.col("last_event_at"))
    writes = (
        run_io.where((direction == "output") & ~drops_only(F.col("lifecycle_states")))
        .select("run_id", "dataset_id")
        .join(runs.select("run_id", "reported_state", "ended_at", "last_event_at"), "run_id")
        .where(F.col("reported_state") != "FAIL")
        .groupBy("dataset_id")
        .agg(
            F.max_by(F.struct(write_at.alias("at"), F.col("run_id")), F.struct(write_at, "run_id")).alias(
                "_w"
            )
        )
    )
    upstream = dataset_edges.groupBy(F.col("target_dataset_id").alias("dataset_id")).agg(
        F.count_distinct("source_dataset_id").alias("upstream_dataset_count")
    )
    downstream = dataset_edges.groupBy(F.col("source_dataset_id").alias("dataset_id")).agg(
        F.count_distinct("target_dataset_id").alias("downstream_dataset_count")
    )
    versions = schemas.groupBy("dataset_id").agg(
        F.count_distinct("schema_hash").alias("schema_version_count")
    )
    zero = F.lit(0).cast("bigint")
    empty = F.array().cast("array<struct<namespace:string,name:string>>")
    joined = (
        datasets.select("dataset_id", "namespace", "name")
        .join(jobs_by_role, "dataset_id", "left")
        .join(writes, "dataset_id", "left")
        .join(upstream, "dataset_id", "left")
        .join(downstream, "dataset_id", "left")
        .join(versions, "dataset_id", "left")
    )
    producing = F.coalesce(F.col("producing_jobs"), empty)
    consuming = F.coalesce(F.col("consuming_jobs"), empty)
    return joined.select(
        "dataset_id",
        "namespace",
        "name",
        producing.alias("producing_jobs"),
        F.size(producing).cast("bigint").alias("producer_count"),
        consuming.alias("consuming_jobs"),
        F.size(consuming).cast("bigint").alias("consumer_count"),
        F.col("_w.at").alias("last_write_at"),
        F.col("_w.run_id").alias("last_write_run_id"),
        *[
            F.coalesce(F.col(c), zero).alias(c)
            for c in ("upstream_dataset_count", "downstream_dataset_count", "schema_version_count")
        ],
    )
