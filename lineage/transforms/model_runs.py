"""Jobs, runs and run liveness from event facts (``lineage.event_facts``, :mod:`lineage.transforms.extract`).

Pure transforms, no I/O, no actions.

Every "latest" value is chosen by (event_time, SHA-256 of the event JSON), and duplicate events are dropped
before anything is counted, so duplicated, replayed or shuffled input gives identical rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lineage.transforms.extract import SOURCE_CODE_FIELDS, as_facts
from lineage.transforms.model_common import (
    JOB_EVENT,
    LOST,
    RUN_EVENT,
    RUNNING,
    TERMINAL_STATES,
    UNKNOWN,
    latest,
    latest_key,
    seconds_between,
)

# Several terminal events at the same event time (a producer sending FAIL and ABORT together): the worst wins.
_SEVERITY = {"COMPLETE": 1, "ABORT": 2, "FAIL": 3}


# The columns of ``lineage.job_latest`` chosen as "latest wins" (:func:`job_latest`).
JOB_LATEST_COLUMNS = ("job_type", "parent", "description", "source_code", "owners", "tags")


def _job_latest_values() -> tuple[tuple[str, Column, Column], ...]:
    """Each of :data:`JOB_LATEST_COLUMNS` with its value and when an event carries it."""
    parent = F.struct(
        F.col("parent_job_namespace").alias("namespace"), F.col("parent_job_name").alias("name")
    )
    return (
        ("job_type", F.col("job_type"), F.col("job_type").isNotNull()),
        ("parent", parent, F.col("parent_job_name").isNotNull()),
        ("description", F.col("job_description"), F.col("job_description").isNotNull()),
        ("source_code", F.col("job_source_code"), F.col("job_source_code").isNotNull()),
        ("owners", F.col("job_owners"), F.col("job_owners").isNotNull()),
        ("tags", F.col("job_tags"), F.col("job_tags").isNotNull()),
    )


def job_latest(events: DataFrame) -> DataFrame:
    """The state ``jobs`` is folded from (``lineage.job_latest``): per job seen in RunEvents or JobEvents,
    each "latest wins" facet with the ordering key of the event it came from, and the first and last event
    times.

    Each of :data:`JOB_LATEST_COLUMNS` is ``struct<at: struct<event_time, event_hash>, value>``, null when no
    event carried the facet. Folding two states (:func:`fold_job_latest`) gives the state of the union of
    their events, whatever the order or overlap, so a build reads only its range's events.
    """
    job_events = as_facts(events).where(
        F.col("event_kind").isin(RUN_EVENT, JOB_EVENT)
        & F.col("job_namespace").isNotNull()
        & F.col("job_name").isNotNull()
    )
    # One aggregate per facet: the latest carrying event's key and value together (null when none carries it).
    values = [
        latest(F.struct(latest_key().alias("at"), value.alias("value")), present).alias(name)
        for name, value, present in _job_latest_values()
    ]
    return job_events.groupBy("job_namespace", "job_name").agg(
        *values,
        F.min("event_time").alias("first_seen"),
        F.max("event_time").alias("last_seen"),
    )


def fold_job_latest(*states: DataFrame) -> DataFrame:
    """:func:`job_latest` rows of several sets of events folded into those of their union: per job, each
    facet of the latest ordering key, the earliest first and the latest last event time."""
    union = states[0]
    for other in states[1:]:
        union = union.unionByName(other)
    return union.groupBy("job_namespace", "job_name").agg(
        *[F.max_by(F.col(c), F.col(f"{c}.at")).alias(c) for c in JOB_LATEST_COLUMNS],
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
    )


def jobs_from_latest(state: DataFrame) -> DataFrame:
    """``jobs`` rows (without the heartbeat columns) of :func:`job_latest` rows."""
    return state.select(
        "job_namespace",
        "job_name",
        F.col("job_type.value.integration").alias("integration"),
        F.col("job_type.value.job_type").alias("job_type"),
        F.col("job_type.value.processing_type").alias("processing_type"),
        F.col("parent.value.namespace").alias("parent_job_namespace"),
        F.col("parent.value.name").alias("parent_job_name"),
        F.col("description.value").alias("description"),
        *[F.col(f"source_code.value.{c}").alias(f"source_code_{c}") for _, c in SOURCE_CODE_FIELDS],
        F.col("owners.value").alias("owners"),
        F.col("tags.value").alias("tags"),
        "first_seen",
        "last_seen",
    )


def jobs(events: DataFrame) -> DataFrame:
    """One row per job (namespace, name) seen in RunEvents or JobEvents.

    Job facets come from the latest event that carries each facet (a producer may send ``jobType`` on
    START only), so an event without a facet never erases it.

    Args:
        events: event facts (:mod:`lineage.transforms.extract`), or rows of ``lake.raw.events``.

    Returns:
        ``job_namespace, job_name, integration, job_type, processing_type, parent_job_namespace,
        parent_job_name, description, source_code_type, source_code_url, source_code_repo_url,
        source_code_path, source_code_version, owners, tags, first_seen, last_seen``.
    """
    return jobs_from_latest(job_latest(events))


def runs(events: DataFrame) -> DataFrame:
    """One row per run id, with the reported state folded order-independently.

    State rule (OpenLineage run cycle): COMPLETE, FAIL and ABORT are terminal. A terminal event wins over any
    START/RUNNING/OTHER whatever its arrival order or event time, so a late RUNNING never reopens a run. With
    several terminal events the latest by event time wins, ties going to the most severe (FAIL > ABORT >
    COMPLETE), then to the event content. A run without a terminal event is ``RUNNING``.

    ``root_*`` falls back to the parent when the producer sends no ``parent.root`` (older Spark and Airflow
    integrations): exact for the two-level hierarchies they produce (application -> action, DAG -> task). A
    run without a parent is its own root. A parent run known only from its children's ``parent`` facet gets a
    row too: ``reported_state`` null (unknown), no times, ``event_count`` 0.

    ``started_at`` is the first START, else the first non-terminal event (the run was running by then); a run
    seen only through terminal events has no start time and no duration.
    The error columns come from the latest FAIL event carrying the ``errorMessage`` facet, else the latest
    event carrying it. An event received twice (same run, type, time and JSON content: the OpenLineage Kafka
    transport and Spark's retries re-send events byte for byte) counts once in ``event_count``.

    Args:
        events: event facts (:mod:`lineage.transforms.extract`), or rows of ``lake.raw.events``; only
            RunEvents are used.

    Returns:
        ``run_id, job_namespace, job_name, parent_run_id, parent_job_namespace, parent_job_name, root_run_id,
        root_job_namespace, root_job_name, reported_state, started_at, ended_at, last_event_at,
        duration_seconds, nominal_start_time, nominal_end_time, error_message, error_stack_trace,
        error_language, processing_engine_name, processing_engine_version, openlineage_adapter_version,
        event_count, producer, tags`` (of the latest event carrying the run's ``tags`` facet).
    """
    run_events = (
        as_facts(events)
        .where((F.col("event_kind") == RUN_EVENT) & F.col("run_id").isNotNull())
        # The envelope upper-cases eventType; a missing one is OTHER (optional in the spec, never terminal).
        .withColumn("state", F.coalesce(F.col("event_type"), F.lit("OTHER")))
        .dropDuplicates(["run_id", "event_type", "event_time", "event_hash"])
    )
    state = F.col("state")
    severity = F.coalesce(*[F.when(state == s, F.lit(n)) for s, n in _SEVERITY.items()])
    terminal_key = F.when(state.isin(*TERMINAL_STATES), F.struct(F.col("event_time"), severity, "event_hash"))
    error = F.col("run_error")
    error_key = F.when(
        error.isNotNull(),
        F.struct((state == "FAIL").alias("is_fail"), F.col("event_time"), F.col("event_hash")),
    )
    parent = F.struct(*[F.col(c) for c in ("parent_run_id", "parent_job_namespace", "parent_job_name")])
    root = F.struct(*[F.col(c) for c in ("root_run_id", "root_job_namespace", "root_job_name")])
    folded = run_events.groupBy("run_id").agg(
        F.max_by(F.struct("job_namespace", "job_name", "producer"), latest_key()).alias("_job"),
        latest(parent, F.col("parent_run_id").isNotNull()).alias("_parent"),
        latest(root, F.col("root_run_id").isNotNull()).alias("_root"),
        F.max_by(F.struct(state.alias("state"), F.col("event_time")), terminal_key).alias("_terminal"),
        F.min(F.when(state == "START", F.col("event_time"))).alias("_first_start"),
        F.min(F.when(~state.isin(*TERMINAL_STATES), F.col("event_time"))).alias("_first_running"),
        F.max("event_time").alias("last_event_at"),
        latest(F.col("run_nominal_time")).alias("_nominal"),
        F.max_by(error, error_key).alias("_error"),
        latest(F.col("run_processing_engine")).alias("_engine"),
        latest(F.col("run_tags")).alias("tags"),
        F.count(F.lit(1)).alias("event_count"),
    )
    started = F.coalesce(F.col("_first_start"), F.col("_first_running"))
    ended = F.col("_terminal.event_time")
    has_parent = F.col("_parent.parent_run_id").isNotNull()
    own = {
        "run_id": F.col("run_id"),
        "job_namespace": F.col("_job.job_namespace"),
        "job_name": F.col("_job.job_name"),
    }
    reported = folded.select(
        "run_id",
        F.col("_job.job_namespace").alias("job_namespace"),
        F.col("_job.job_name").alias("job_name"),
        "_parent.parent_run_id",
        "_parent.parent_job_namespace",
        "_parent.parent_job_name",
        # A run without a parent is its own root, so "everything under this root" is one filter.
        *[
            F.coalesce(
                F.col(f"_root.root_{c}"), F.when(has_parent, F.col(f"_parent.parent_{c}")), own[c]
            ).alias(f"root_{c}")
            for c in ("run_id", "job_namespace", "job_name")
        ],
        F.coalesce(F.col("_terminal.state"), F.lit(RUNNING)).alias("reported_state"),
        started.alias("started_at"),
        ended.alias("ended_at"),
        "last_event_at",
        F.when(ended.isNotNull(), seconds_between(started, ended)).alias("duration_seconds"),
        F.col("_nominal.start").alias("nominal_start_time"),
        F.col("_nominal.end").alias("nominal_end_time"),
        F.col("_error.message").alias("error_message"),
        F.col("_error.stack_trace").alias("error_stack_trace"),
        F.col("_error.language").alias("error_language"),
        F.col("_engine.name").alias("processing_engine_name"),
        F.col("_engine.version").alias("processing_engine_version"),
        F.col("_engine.adapter").alias("openlineage_adapter_version"),
        "event_count",
        F.col("_job.producer").alias("producer"),
        "tags",
    )
    return reported.unionByName(_parents_without_events(run_events, reported))


def _parents_without_events(run_events: DataFrame, reported: DataFrame) -> DataFrame:
    """A row for every parent run named by a child but never seen through an event of its own.

    Airflow's DAG run and a Spark application are often only known through their children's ``parent``
    facet; without a row of its own the parent would dangle. Its state is unknown (``reported_state`` null),
    its job is the one the children name, its root the one they report above it, else itself.
    """
    children = run_events.where(
        F.col("parent_run_id").isNotNull() & (F.col("parent_run_id") != F.col("run_id"))
    )
    above = F.when(
        F.col("root_run_id").isNotNull() & (F.col("root_run_id") != F.col("parent_run_id")),
        F.struct("root_run_id", "root_job_namespace", "root_job_name"),
    )
    named = children.groupBy(F.col("parent_run_id").alias("run_id")).agg(
        # The struct itself is never null: a parent facet without a job must not count as naming one.
        latest(
            F.struct("parent_job_namespace", "parent_job_name"), F.col("parent_job_name").isNotNull()
        ).alias("_job"),
        latest(above, above.isNotNull()).alias("_root"),
    )
    orphans = named.join(reported.select("run_id"), "run_id", "left_anti")
    columns = {c: F.lit(None).cast(t) for c, t in reported.dtypes}
    columns.update(
        run_id=F.col("run_id"),
        job_namespace=F.col("_job.parent_job_namespace"),
        job_name=F.col("_job.parent_job_name"),
        root_run_id=F.coalesce(F.col("_root.root_run_id"), F.col("run_id")),
        root_job_namespace=F.coalesce(F.col("_root.root_job_namespace"), F.col("_job.parent_job_namespace")),
        root_job_name=F.coalesce(F.col("_root.root_job_name"), F.col("_job.parent_job_name")),
        event_count=F.lit(0).cast("bigint"),
    )
    return orphans.select(*[columns[c].alias(c) for c in reported.columns])


DEPENDENCY_KEY = [
    "upstream_job_namespace",
    "upstream_job_name",
    "downstream_job_namespace",
    "downstream_job_name",
    "source",
]
DEPENDENCY_RULES = ("dependency_type", "sequence_trigger_rule", "status_trigger_rule")


def job_dependencies(events: DataFrame) -> DataFrame:
    """Job-to-job (control-flow) dependencies, one row per (upstream job, downstream job, source): the
    aggregate (:func:`dependencies_from_runs`) of the per-run state :func:`dependency_runs`.

    Sources: ``jobDependencies`` (the OpenLineage run facet: upstream and downstream jobs of a run),
    ``airflow`` (the task facet's upstream/downstream task ids, tasks of one DAG), ``lineage`` (JOB inputs of
    the job-level ``lineage`` facet's entry for the run's own job) and ``parent`` (the job of a parent run
    invokes the job of its child run). The same pair reported by both ends (A lists B downstream,
    B lists A upstream) is one row. The optional rules are those of the latest report carrying them.

    Args:
        events: event facts (:mod:`lineage.transforms.extract`), or rows of ``lake.raw.events``.

    Returns:
        ``upstream_job_namespace, upstream_job_name, downstream_job_namespace, downstream_job_name, source,
        dependency_type, sequence_trigger_rule, status_trigger_rule, run_count (distinct reporting runs),
        first_seen, last_seen``.
    """
    return dependencies_from_runs(dependency_runs(events))


def dependency_runs(events: DataFrame) -> DataFrame:
    """Per (dependency pair, reporting run): what :func:`job_dependencies` aggregates, kept as state
    (``lineage.job_dependency_runs``) so a build folds its delta in (:func:`fold_dependency_runs`) instead of
    reading every event again. Each rule column comes with ``_<rule>_at``, the ordering key (event time,
    event hash) of the latest report carrying it; ``first_seen``/``last_seen`` are the run's first and last
    report of the pair.
    """
    facts = as_facts(events).where(
        (F.col("event_kind") == RUN_EVENT)
        & F.col("job_namespace").isNotNull()
        & F.col("job_name").isNotNull()
    )
    base = ["run_id", "event_time", "event_hash"]
    declared = (
        facts.where(F.col("run_dependencies").isNotNull())
        .select(*base, *JOB_COLUMNS, F.explode("run_dependencies").alias("d"))
        .select(
            *base,
            *[
                F.when(F.col("d.direction") == "upstream", F.col(f"d.{c}"))
                .otherwise(F.col(c))
                .alias(f"upstream_{c}")
                for c in JOB_COLUMNS
            ],
            *[
                F.when(F.col("d.direction") == "upstream", F.col(c))
                .otherwise(F.col(f"d.{c}"))
                .alias(f"downstream_{c}")
                for c in JOB_COLUMNS
            ],
            F.col("d.source").alias("source"),
            "d.dependency_type",
            "d.sequence_trigger_rule",
            "d.status_trigger_rule",
        )
    )
    none = F.lit(None).cast("string")
    parents = facts.where(
        F.col("parent_job_name").isNotNull() & F.col("parent_job_namespace").isNotNull()
    ).select(
        *base,
        F.col("parent_job_namespace").alias("upstream_job_namespace"),
        F.col("parent_job_name").alias("upstream_job_name"),
        F.col("job_namespace").alias("downstream_job_namespace"),
        F.col("job_name").alias("downstream_job_name"),
        F.lit("parent").alias("source"),
        none.alias("dependency_type"),
        none.alias("sequence_trigger_rule"),
        none.alias("status_trigger_rule"),
    )
    pairs = declared.unionByName(parents).where(
        (F.col("upstream_job_namespace") != F.col("downstream_job_namespace"))
        | (F.col("upstream_job_name") != F.col("downstream_job_name"))
    )
    return pairs.groupBy(*DEPENDENCY_KEY, "run_id").agg(
        *[
            agg
            for c in DEPENDENCY_RULES
            for agg in (latest(F.col(c)).alias(c), F.max(_when_present(c)).alias(f"_{c}_at"))
        ],
        F.min("event_time").alias("first_seen"),
        F.max("event_time").alias("last_seen"),
    )


def _when_present(column: str) -> Column:
    return F.when(F.col(column).isNotNull(), latest_key())


def fold_dependency_runs(delta: DataFrame, stored: DataFrame) -> DataFrame:
    """``job_dependency_runs`` rows of the delta's (pair, run) keys: the delta's statistics (from
    :func:`dependency_runs`) combined with the stored row of the same key, if any. Folding the same delta
    twice gives the same rows (min, max and latest-by-key are idempotent)."""
    key = [*DEPENDENCY_KEY, "run_id"]
    on = None
    for k in key:
        clause = F.col(f"d.{k}").eqNullSafe(F.col(f"o.{k}"))
        on = clause if on is None else on & clause
    joined = delta.alias("d").join(stored.alias("o"), on, "left")
    rules = []
    for c in DEPENDENCY_RULES:
        # The later of the two reports carrying the rule (a null key never wins).
        newer = F.col(f"o._{c}_at").isNull() | (F.col(f"d._{c}_at") >= F.col(f"o._{c}_at"))
        use_new = F.col(f"d._{c}_at").isNotNull() & newer
        rules.append(F.when(use_new, F.col(f"d.{c}")).otherwise(F.col(f"o.{c}")).alias(c))
        rules.append(F.when(use_new, F.col(f"d._{c}_at")).otherwise(F.col(f"o._{c}_at")).alias(f"_{c}_at"))
    return joined.select(
        *[F.col(f"d.{k}").alias(k) for k in key],
        *rules,
        F.least("d.first_seen", "o.first_seen").alias("first_seen"),
        F.greatest("d.last_seen", "o.last_seen").alias("last_seen"),
    )


def dependencies_from_runs(dependency_runs_: DataFrame) -> DataFrame:
    """``job_dependencies`` rows from per-(pair, run) state (:func:`dependency_runs`): the latest rules over
    the runs by their stored ordering keys, the distinct runs, the first and last report."""
    return dependency_runs_.groupBy(*DEPENDENCY_KEY).agg(
        *[F.max_by(F.col(c), F.col(f"_{c}_at")).alias(c) for c in DEPENDENCY_RULES],
        F.count("run_id").alias("run_count"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
    )


JOB_COLUMNS = ("job_namespace", "job_name")


def run_heartbeat_gaps(events: DataFrame) -> DataFrame:
    """Per run, the multiset of gaps between its consecutive START/RUNNING events, each gap counted for the
    job the later event names (``lineage.run_heartbeat_gaps``: what :func:`job_heartbeats` folds into each
    job's median). Events at the same instant count once; a run's rows depend on its own events only, so a
    build recomputes the rows of the runs its range touched and keeps every other run's.

    Returns:
        ``run_id, job_namespace, job_name, gap_seconds, gap_count`` (gaps > 0 only).
    """
    beats = (
        events.where(
            (F.col("event_kind") == RUN_EVENT)
            & F.col("run_id").isNotNull()
            & F.col("event_type").isin("START", "RUNNING")
        )
        .select("job_namespace", "job_name", "run_id", "event_time")
        .distinct()
    )
    previous = F.lag("event_time").over(Window.partitionBy("run_id").orderBy("event_time"))
    gaps = beats.select(
        "run_id",
        "job_namespace",
        "job_name",
        seconds_between(previous, F.col("event_time")).alias("gap_seconds"),
    )
    return (
        gaps.where(F.col("gap_seconds") > 0)
        .groupBy("run_id", "job_namespace", "job_name", "gap_seconds")
        .agg(F.count(F.lit(1)).alias("gap_count"))
    )


def job_heartbeats(gaps: DataFrame) -> DataFrame:
    """Per job, the median of its runs' gaps (:func:`run_heartbeat_gaps` rows, each gap weighted by its
    count: the same exact median as over the gaps themselves) and how many gaps there are."""
    return gaps.groupBy("job_namespace", "job_name").agg(
        F.percentile(F.col("gap_seconds"), 0.5, F.col("gap_count")).alias("median_gap_seconds"),
        F.sum("gap_count").alias("gap_count"),
    )


def heartbeat_gaps(events: DataFrame) -> DataFrame:
    """Per job, the median gap between consecutive START/RUNNING events of the same run.

    Streaming producers send RUNNING on a fixed cadence (Flink's ``trackingIntervalInSeconds``, checkpoints),
    so this median is the job's heartbeat period. Events at the same instant count once.

    Args:
        events: event facts or rows of ``lake.raw.events`` (only envelope columns are read).

    Returns:
        ``job_namespace, job_name, median_gap_seconds, gap_count`` for jobs with at least one gap.
    """
    return job_heartbeats(run_heartbeat_gaps(events))


def _epoch_micros(now: datetime) -> int:
    # A naive datetime is taken as UTC (the session time zone of every job), never as the local zone.
    aware = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def run_liveness(
    runs: DataFrame,
    heartbeats: DataFrame,
    now: datetime,
    *,
    floor_seconds: float = 900,
    multiplier: float = 3.0,
    overrides: dict[str, float] | None = None,
) -> DataFrame:
    """Add an inferred liveness to runs: a non-terminal run silent for its threshold or longer is LOST.

    The seed lab's Flink 1.x application-mode job is cancelled without sending ABORT and would otherwise stay
    RUNNING forever (as it does in Marquez). ``reported_state`` is never changed; ``inferred_state`` is the
    terminal state for terminal runs, else ``RUNNING`` or ``LOST``.

    Threshold per job: ``overrides["<namespace>/<name>"]`` when given, else
    ``max(floor_seconds, multiplier * median heartbeat gap)``, else ``floor_seconds`` for jobs without
    heartbeat history (single-event runs, batch jobs).

    Nothing stored grows with the clock: a running run keeps its deadline ``lost_after`` (last event +
    threshold), and ``inferred_state`` is ``LOST`` when that deadline is ``now`` or earlier. ``now`` decides
    that one column only, so a build re-merges a still-running run only when its deadline has passed or its
    job's heartbeat statistics changed; readers derive the seconds of silence, and LOST for a stored RUNNING
    run whose deadline has passed since, at read time (:func:`lineage.query.liveness.as_of`).

    Args:
        runs: output of :func:`runs`.
        heartbeats: output of :func:`heartbeat_gaps`.
        now: the evaluation instant (UTC; a naive datetime is read as UTC).
        floor_seconds: the smallest threshold, so a chatty job is not declared lost after a short hiccup.
        multiplier: how many heartbeat periods of silence make a run lost.
        overrides: per-job thresholds in seconds, keyed ``"namespace/name"``.

    Returns:
        The ``runs`` columns plus ``median_heartbeat_seconds, threshold_seconds, lost_after,
        inferred_state, liveness_reason`` (the first three null unless the run is reported RUNNING; the
        reason is a function of the stored columns, never of ``now``).
    """
    override = F.lit(None).cast("double")
    if overrides:
        pairs = [x for key, seconds in sorted(overrides.items()) for x in (F.lit(key), F.lit(float(seconds)))]
        override = F.create_map(*pairs)[F.concat_ws("/", F.col("job_namespace"), F.col("job_name"))]
    median = F.col("median_heartbeat_seconds")
    derived = F.greatest(F.lit(float(floor_seconds)), F.lit(float(multiplier)) * median)
    threshold = F.coalesce(F.col("_override"), derived, F.lit(float(floor_seconds)))
    deadline = F.timestamp_micros(
        F.unix_micros(F.col("last_event_at")) + F.round(F.col("threshold_seconds") * 1_000_000).cast("bigint")
    )
    reported = F.col("reported_state")
    # LOST from the deadline on: a deadline at ``now`` or earlier has passed.
    lost = (reported == RUNNING) & (F.unix_micros(F.col("lost_after")) <= F.lit(_epoch_micros(now)))
    basis = (
        F.when(
            F.col("_override").isNotNull(),
            F.concat(F.lit("override for "), F.col("job_namespace"), F.lit("/"), F.col("job_name")),
        )
        .when(
            median.isNotNull(),
            F.format_string(
                "%s x median heartbeat %s s, floor %s s",
                F.lit(_num(multiplier)),
                _fmt(median),
                F.lit(_num(floor_seconds)),
            ),
        )
        .otherwise(F.format_string("no heartbeat history, floor %s s", F.lit(_num(floor_seconds))))
    )
    # The same text whether the run is still RUNNING or LOST: it says when the run turns LOST, not how long
    # ago anything was, so a reader flipping a run to LOST at read time shows the build's own words.
    reason = (
        F.when(reported.isNull(), F.lit("no event of its own: known as the parent of other runs"))
        .when(reported != RUNNING, F.concat(F.lit("reported terminal state "), reported))
        .otherwise(
            F.format_string(
                "no event since %s: LOST after %s (threshold %s s: %s)",
                _utc_text(F.col("last_event_at")),
                _utc_text(F.col("lost_after")),
                _fmt(F.col("threshold_seconds")),
                basis,
            )
        )
    )
    hb = heartbeats.select(
        "job_namespace", "job_name", F.col("median_gap_seconds").alias("median_heartbeat_seconds")
    )
    return (
        runs.join(hb, ["job_namespace", "job_name"], "left")
        .withColumn("_override", override)
        .withColumn("threshold_seconds", threshold)
        .withColumn("lost_after", deadline)
        .withColumn(
            "inferred_state",
            F.when(reported.isNull(), F.lit(UNKNOWN))
            .when(reported != RUNNING, reported)
            .when(lost, F.lit(LOST))
            .otherwise(F.lit(RUNNING)),
        )
        .withColumn("liveness_reason", reason)
        .select(
            *runs.columns,
            # Only a running run has a liveness threshold. For a terminal run these would depend on later
            # runs of its job, and an incremental build would not equal a full one.
            *[
                F.when(reported == RUNNING, F.col(c)).alias(c)
                for c in ("median_heartbeat_seconds", "threshold_seconds", "lost_after")
            ],
            "inferred_state",
            "liveness_reason",
        )
    )


def _utc_text(timestamp: Column) -> Column:
    """A timestamp as ISO-8601 UTC text to the second (``2026-11-27T03:15:00Z``), whatever the session's
    time zone."""
    utc = F.to_utc_timestamp(timestamp, F.current_timezone())
    return F.date_format(utc, "yyyy-MM-dd'T'HH:mm:ss'Z'")


def _fmt(seconds: Column) -> Column:
    """Seconds for humans: whole seconds unless fractional (a 0.5 s heartbeat stays 0.5)."""
    rounded = F.round(seconds, 1)
    return F.when(rounded == F.floor(rounded), F.floor(rounded).cast("string")).otherwise(
        rounded.cast("string")
    )


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
