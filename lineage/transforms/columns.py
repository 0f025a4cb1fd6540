"""Column-level lineage: column edges from the column-lineage facets, and end-to-end column paths.

Pure transforms, no I/O, no actions. The input is ``dataset_mentions``, whose ``column_entries`` hold each
output dataset's column-lineage facets (``columnLineage`` and the newer ``lineage``) as typed entries,
extracted once (:mod:`lineage.transforms.column_facets`), and ``column_facet`` the digest of that content;
and ``dataset_aliases``.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lineage.transforms.column_facets import DATASET_SCOPE, DIRECT, FIELD_SCOPE, INDIRECT
from lineage.transforms.model_common import dataset_id
from lineage.transforms.model_datasets import (
    apply_alias_rules,
    canonical_mentions,
    normalize_name,
    normalize_namespace,
)

EDGE_KEY = [
    "source_dataset_id",
    "source_field",
    "target_dataset_id",
    "target_field",
    "job_namespace",
    "job_name",
]


def _source_ids(frame: DataFrame, aliases: DataFrame, alias_rules: list[tuple[str, str]] | None) -> DataFrame:
    """Add ``source_dataset_id``: the canonical id of the entry's (namespace, name), as ``run_io`` maps names.

    The reference is normalised like a mention (naming spec) and looked up among the aliases; a name never
    seen as a dataset gets the id its own node would have (alias rules applied), so it is stable.
    """
    keys = aliases.groupBy(
        F.col("alias_namespace").alias("_src_ns"), F.col("alias_name").alias("_src_n")
    ).agg(F.min("dataset_id").alias("_alias_id"))
    normalised = frame.withColumn("_src_ns", normalize_namespace(F.col("_e.namespace"))).withColumn(
        "_src_n", normalize_name(F.col("_e.name"))
    )
    fallback = dataset_id(apply_alias_rules(F.col("_src_ns"), alias_rules), F.col("_src_n"))
    return normalised.join(keys, ["_src_ns", "_src_n"], "left").withColumn(
        "source_dataset_id", F.coalesce(F.col("_alias_id"), fallback)
    )


def column_edges(
    mentions: DataFrame,
    aliases: DataFrame,
    *,
    alias_rules: list[tuple[str, str]] | None = None,
) -> DataFrame:
    """Source column -> target column edges through a job, from the column-lineage facets of output datasets.

    Every output dataset mention with a ``columnLineage`` facet (RunEvent and JobEvent outputs) contributes
    one row per (input field, transformation). Both ends are canonical datasets: the output by its mention (as
    ``run_io``), an input field by its own namespace/name, normalised, then looked up in ``aliases``.

    Rules:

    - Transformations are kept faithfully: ``transformations`` is the sorted array of the distinct
      ``(type, subtype, description, masking)`` structs ever reported for the edge (type and subtype
      upper-cased, ``masking`` false when absent); several on one column pair are all kept.
    - Legacy facet (1-0-x, dbt, Airflow's SQL parser: no ``transformations`` on the input field): one
      transformation of unknown type (null: the facet does not say DIRECT or INDIRECT), ``subtype`` =
      ``transformationType`` and ``description`` = ``transformationDescription`` as given, ``masking`` = the
      type contains ``MASK`` (1-0-x allowed IDENTITY and MASKED). Such an edge is not ``is_direct``.
    - Dataset-wide dependencies (``dataset[]``) are edges with ``scope`` = ``dataset`` and a null
      ``target_field``, never exploded into every output column; an entry without transformations gets one
      INDIRECT with a null subtype.
    - Near-cartesian INDIRECT duplicates: openlineage-spark before 1.23 (and later with
      ``columnLineage.datasetLineageEnabled=false``, the default) repeats every INDIRECT input under every
      output field (noted in data-rentgen's column-lineage extractor, which drops the target column of every
      INDIRECT relation instead). Within one facet (one output dataset of one event) with at least two output
      fields, an INDIRECT transformation of a source column that appears, identical, under every output field
      is moved to one dataset-scope edge. A dataset-wide dependency affects every column, so nothing is
      lost; an INDIRECT dependency under only some fields stays field-level, and so does a transformation of
      unknown (null) type, even under every field: the facet does not say it is INDIRECT (a dbt or Airflow
      legacy IDENTITY feeding every column is a copy into each, not a dataset-wide influence).
    - ``run_count`` counts distinct runs (0 for JobEvent static lineage); ``first_seen``/``last_seen`` are the
      event times of the facets reporting the edge. Aggregation is by sets and min/max, so duplicated or
      reordered events give the same rows.

    Args:
        mentions: output of :func:`~lineage.transforms.model_datasets.dataset_mentions`.
        aliases: output of :func:`~lineage.transforms.model_datasets.dataset_aliases` on the same mentions.
        alias_rules: the rules ``aliases`` was built with; they give the id of an input dataset no event ever
            mentioned as a dataset.

    Returns:
        ``source_dataset_id, source_field, target_dataset_id, target_field (null for dataset scope),
        job_namespace, job_name, scope (field/dataset), transformations (array of type, subtype, description,
        masking), is_direct (any DIRECT), subtypes (sorted distinct non-null subtypes), masking (any masked),
        run_count, first_seen, last_seen``.
    """
    outputs = facet_mentions(mentions, aliases)
    facets = distinct_facets(outputs)
    return edges_from_facets(facet_edges(facets, aliases, alias_rules), facets, facet_runs(outputs))


# The state the incremental build folds column edges from (three tables of lake.lineage, one row per
# distinct facet, per (facet, run) and per exploded facet entry): each distinct facet is exploded once, ever.
FACET_KEY = ["job_namespace", "job_name", "target_dataset_id", "column_facet"]
FACET_COLUMNS = [*FACET_KEY, "_facet", "first_seen", "last_seen"]
FACET_RUN_COLUMNS = ["_facet", "target_dataset_id", "run_id"]
FACET_EDGE_COLUMNS = ["_facet", *EDGE_KEY, "scope", "t"]


def facet_mentions(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """The output mentions with a column-lineage facet, with ``target_dataset_id`` (canonical) and
    ``_facet``: the id of (job, target, facet content)."""
    outputs = canonical_mentions(
        mentions.where((F.col("role") == "output") & F.col("column_facet").isNotNull()), aliases
    ).withColumnRenamed("dataset_id", "target_dataset_id")
    return outputs.withColumn("_facet", F.sha2(F.to_json(F.struct(*[F.col(c) for c in FACET_KEY])), 256))


def distinct_facets(outputs: DataFrame) -> DataFrame:
    """One row per distinct facet of :func:`facet_mentions`: its key, ``_facet``, the first and last event
    time that reported it, and its ``column_entries``.

    A job sends the same facet for an output on every run (and often on START and COMPLETE), so each
    distinct content is exploded once, not once per event.
    """
    return outputs.groupBy(*FACET_KEY, "_facet").agg(
        # Entries are a function of the facet content: any copy's will do.
        F.any_value("column_entries").alias("column_entries"),
        F.min("event_time").alias("first_seen"),
        F.max("event_time").alias("last_seen"),
    )


def facet_runs(outputs: DataFrame) -> DataFrame:
    """The distinct (facet, run) pairs of :func:`facet_mentions` (JobEvent facets have no run)."""
    return outputs.where(F.col("run_id").isNotNull()).select(*FACET_RUN_COLUMNS).distinct()


def facet_edges(
    facets: DataFrame, aliases: DataFrame, alias_rules: list[tuple[str, str]] | None = None
) -> DataFrame:
    """Each facet of :func:`distinct_facets` exploded: one row per (input field, transformation), both ends
    canonical, the near-cartesian rule applied (it looks at one facet only), as :data:`FACET_EDGE_COLUMNS`."""
    rows = (
        facets.select(
            "_facet",
            "job_namespace",
            "job_name",
            "target_dataset_id",
            F.explode("column_entries").alias("_e"),
        )
        .where(
            F.col("_e.namespace").isNotNull() & F.col("_e.name").isNotNull() & F.col("_e.field").isNotNull()
        )
        .transform(lambda df: _source_ids(df, aliases, alias_rules))
        .select(
            "_facet",
            "job_namespace",
            "job_name",
            "source_dataset_id",
            F.col("_e.field").alias("source_field"),
            "target_dataset_id",
            F.col("_e.target_field").alias("target_field"),
            F.explode("_e.transformations").alias("t"),
        )
    )
    return _move_cartesian_indirect(rows).select(*FACET_EDGE_COLUMNS)


def edges_from_facets(edge_rows: DataFrame, facets: DataFrame, runs: DataFrame) -> DataFrame:
    """The :func:`column_edges` rows of ``edge_rows`` (:func:`facet_edges`), with the times of ``facets``
    (at least ``_facet, first_seen, last_seen`` of every facet in ``edge_rows``) and the runs of ``runs``
    (:func:`facet_runs`): every edge's transformations are the union over the facets that report it, its
    times the extremes over them, its run count the distinct runs over them."""
    grouped = edge_rows.groupBy(*EDGE_KEY, "scope").agg(
        F.array_sort(F.collect_set("t")).alias("transformations"),
        F.array_sort(F.collect_set("_facet")).alias("_facets"),
    )
    counted = grouped.join(_per_facet_set(grouped, facets, runs), "_facets")
    t = F.col("transformations")
    return counted.select(
        *EDGE_KEY,
        "scope",
        "transformations",
        # An unknown (null) type is not DIRECT: false, not null.
        F.exists(t, lambda x: F.coalesce(x["type"] == DIRECT, F.lit(False))).alias("is_direct"),
        F.array_sort(
            F.array_distinct(F.filter(F.transform(t, lambda x: x["subtype"]), lambda s: s.isNotNull()))
        ).alias("subtypes"),
        F.exists(t, lambda x: x["masking"]).alias("masking"),
        "run_count",
        "first_seen",
        "last_seen",
    )


def _per_facet_set(edges: DataFrame, facets: DataFrame, runs: DataFrame) -> DataFrame:
    """``run_count``, ``first_seen`` and ``last_seen`` per distinct set of facets: the distinct runs and the
    extreme times over the facets of the set.

    Edges of one job and output mostly share their set of facets, so each set is counted once, not once
    per edge.
    """
    sets = edges.select("_facets").distinct()
    members = sets.select("_facets", F.explode("_facets").alias("_facet"))
    times = (
        members.join(facets.select("_facet", "first_seen", "last_seen"), "_facet")
        .groupBy("_facets")
        .agg(F.min("first_seen").alias("first_seen"), F.max("last_seen").alias("last_seen"))
    )
    counts = (
        members.join(runs.select("_facet", "run_id"), "_facet", "left")
        .groupBy("_facets")
        .agg(F.count_distinct("run_id").alias("run_count"))
    )
    return times.join(counts, "_facets")


def _move_cartesian_indirect(rows: DataFrame) -> DataFrame:
    """Add ``scope``; move INDIRECT transformations repeated under every output field to dataset scope.

    See the near-cartesian rule in :func:`column_edges`. Window sets, not counts, so duplicates do not matter.
    ``_repeated`` is never null (every operand is non-null), so a row keeps its target field exactly when it
    stays at field scope.
    """
    field_level = F.col("target_field").isNotNull()
    facet_fields = F.size(
        F.collect_set(F.when(field_level, F.col("target_field"))).over(Window.partitionBy("_facet"))
    )
    same_input = Window.partitionBy("_facet", "source_dataset_id", "source_field", "t")
    fields_with_it = F.size(F.collect_set(F.when(field_level, F.col("target_field"))).over(same_input))
    # Null-safe: a transformation of unknown (null) type (legacy facets, an item without `type`) is not
    # INDIRECT, so it stays on each of its fields. With `==` the whole condition was null for it, and the
    # `when`s below then nulled its target field while keeping `field` scope (issue 37).
    indirect = F.col("t.type").eqNullSafe(F.lit(INDIRECT))
    repeated = field_level & indirect & (facet_fields >= 2) & (fields_with_it == facet_fields)
    return rows.withColumn("_repeated", repeated).select(
        "_facet",
        "job_namespace",
        "job_name",
        "source_dataset_id",
        "source_field",
        "target_dataset_id",
        F.when(~F.col("_repeated"), F.col("target_field")).alias("target_field"),
        F.when(F.col("target_field").isNull() | F.col("_repeated"), F.lit(DATASET_SCOPE))
        .otherwise(F.lit(FIELD_SCOPE))
        .alias("scope"),
        "t",
    )


# ---------------------------------------------------------------------------------------------------------
# End-to-end column paths

PATH_KEY = ["target_dataset_id", "target_field", "source_dataset_id", "source_field"]


def _path_edges(column_edges: DataFrame) -> DataFrame:
    # Only edges naming both columns: a field-scope row without a target field (what issue 37's near-cartesian
    # bug stored, and may still be in a table built before its fix) would otherwise pass the self-loop test
    # below whenever its datasets differ (`x OR NULL` is true) and become paths into a null column.
    named = (
        (F.col("scope") == FIELD_SCOPE)
        & F.col("source_field").isNotNull()
        & F.col("target_field").isNotNull()
    )
    return (
        column_edges.where(named)
        .select(
            F.col("source_dataset_id").alias("_e_src_ds"),
            F.col("source_field").alias("_e_src_f"),
            F.col("target_dataset_id").alias("_e_tgt_ds"),
            F.col("target_field").alias("_e_tgt_f"),
            F.col("job_name").alias("_e_job"),
            F.col("is_direct").alias("_e_direct"),
        )
        # A column feeding itself (an in-place update) is no lineage step.
        .where((F.col("_e_src_ds") != F.col("_e_tgt_ds")) | (F.col("_e_src_f") != F.col("_e_tgt_f")))
        .distinct()
    )


def _fold_paths(candidates: DataFrame) -> DataFrame:
    """Per (target, source): the minimum hops; among shortest paths the smallest job list, "some direct"."""
    return (
        candidates.groupBy(*PATH_KEY)
        .agg(
            F.min(F.struct("hops", "jobs")).alias("_short"),
            # (hops, not direct) is smallest for a shortest path that is all DIRECT, when there is one.
            F.min(F.struct(F.col("hops"), (~F.col("all_direct")).alias("indirect"))).alias("_direct"),
        )
        .select(
            *PATH_KEY,
            F.col("_short.hops").alias("hops"),
            F.col("_short.jobs").alias("jobs"),
            (~F.col("_direct.indirect")).alias("all_direct"),
        )
    )


def extend_column_paths(paths: DataFrame, column_edges: DataFrame, *, hops: int) -> DataFrame:
    """One round of :func:`column_paths`: extend the paths of exactly ``hops`` edges by one upstream edge.

    The input paths are kept; a (target, source) pair already reached keeps its shorter paths. The plan
    references ``paths`` once, so rounds chain into a plan that grows linearly.

    Args:
        paths: output of :func:`column_paths` (``max_depth=hops``) or of the previous round.
        column_edges: output of :func:`column_edges`.
        hops: the length of the paths to extend (the frontier).

    Returns:
        The :func:`column_paths` columns, with paths of up to ``hops + 1`` edges.
    """
    return _extend(paths, _path_edges(column_edges), hops)


def next_column_paths(frontier: DataFrame, known: DataFrame, column_edges: DataFrame) -> DataFrame:
    """The paths one edge longer than ``frontier`` (the paths found in the last round, all of the same
    length) to (target, source) pairs not in ``known`` (every pair found so far), folded like
    :func:`column_paths`. The search needs only these each round: a pair reached before was reached by a
    path no longer than the frontier's, so a longer path never replaces it, and only the pairs new in a
    round can lead to new pairs in the next. Summed over the rounds, the result equals
    :func:`column_paths`, without regrouping every pair found so far each round.

    Args:
        frontier: paths of exactly ``h`` edges (the :func:`column_paths` columns).
        known: at least the ``target_dataset_id, target_field, source_dataset_id, source_field`` of every
            path found so far (frontier included).
        column_edges: output of :func:`column_edges`.

    Returns:
        The :func:`column_paths` columns: new pairs only, each with ``h + 1`` hops.
    """
    edges = _path_edges(column_edges)
    f = frontier.alias("p")
    joined = f.join(
        edges,
        (F.col("p.source_dataset_id") == F.col("_e_tgt_ds")) & (F.col("p.source_field") == F.col("_e_tgt_f")),
    )
    back_to_target = (F.col("_e_src_ds") == F.col("p.target_dataset_id")) & (
        F.col("_e_src_f") == F.col("p.target_field")
    )
    candidates = joined.where(~back_to_target).select(
        F.col("p.target_dataset_id").alias("target_dataset_id"),
        F.col("p.target_field").alias("target_field"),
        F.col("_e_src_ds").alias("source_dataset_id"),
        F.col("_e_src_f").alias("source_field"),
        (F.col("p.hops") + F.lit(1)).alias("hops"),
        F.concat(F.array(F.col("_e_job")), F.col("p.jobs")).alias("jobs"),
        (F.col("p.all_direct") & F.col("_e_direct")).alias("all_direct"),
    )
    fresh = candidates.join(known.select(*PATH_KEY), PATH_KEY, "left_anti")
    return _fold_paths(fresh)


def _extend(paths: DataFrame, edges: DataFrame, hops: int) -> DataFrame:
    p = paths.alias("p")
    joined = p.join(
        edges,
        (F.col("p.hops") == F.lit(hops))
        & (F.col("p.source_dataset_id") == F.col("_e_tgt_ds"))
        & (F.col("p.source_field") == F.col("_e_tgt_f")),
        "left",
    )
    kept = F.struct(*[F.col(f"p.{c}").alias(c) for c in (*PATH_KEY, "hops", "jobs", "all_direct")])
    # A path never comes back to its own target column (the 2-cycle a -> b -> a gives no a <- a row).
    back_to_target = (F.col("_e_src_ds") == F.col("p.target_dataset_id")) & (
        F.col("_e_src_f") == F.col("p.target_field")
    )
    extended = F.when(
        F.col("_e_src_ds").isNotNull() & ~back_to_target,
        F.struct(
            F.col("p.target_dataset_id").alias("target_dataset_id"),
            F.col("p.target_field").alias("target_field"),
            F.col("_e_src_ds").alias("source_dataset_id"),
            F.col("_e_src_f").alias("source_field"),
            F.lit(hops + 1).alias("hops"),
            F.concat(F.array(F.col("_e_job")), F.col("p.jobs")).alias("jobs"),
            (F.col("p.all_direct") & F.col("_e_direct")).alias("all_direct"),
        ),
    )
    candidates = joined.select(F.explode(F.array(kept, extended)).alias("c")).where(F.col("c").isNotNull())
    return _fold_paths(candidates.select("c.*"))


def column_paths(
    column_edges: DataFrame,
    *,
    max_depth: int = 20,
    checkpoint: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """End-to-end column lineage: every upstream column of every target column, up to ``max_depth`` hops.

    Only field-scope edges are followed (a dataset-wide INDIRECT dependency does not name a target column).
    For each (target column, source column) pair reachable through 1..``max_depth`` edges:

    - ``hops``: the minimum number of edges;
    - ``jobs``: the job names along one shortest path, from source to target; among several shortest paths
      the lexicographically smallest list;
    - ``all_direct``: some shortest path has only DIRECT edges (an edge is DIRECT when any transformation on
      that column pair is DIRECT), i.e. the source's values flow into the target, not only influence it.

    A column is never its own upstream; cycles are safe because a pair already reached is never reached again
    with more hops, and a shortest path visits no column twice.

    Algorithm: breadth-first search as iterative DataFrame joins, one round per hop. Round k joins the paths
    of exactly k edges (the frontier) with the edges reaching their source column, then keeps per (target,
    source) pair the shortest. Each round is one left join of the previous state with the edges (the
    frontier condition is in the join, so the state is referenced once and the plan grows linearly with the
    rounds) and one aggregation. A driver-side graph library (networkx) would need the whole edge set
    collected into the driver; column graphs of a large estate (every column of every table, every run's
    facet) do not fit there, while joins scale out with the cluster and run lazily inside the build. The
    minimum-hops rule makes each round's new pairs the only ones expanded next, so the join grows with the
    frontier; the aggregation regroups all pairs found so far (at most every (target, upstream) pair).
    ``column_edges`` appears once per round in the plan: pass it as read back from its table (or
    checkpointed), not as the lazy plan from the mentions.

    Without ``checkpoint`` the whole search is one lazy plan of ``max_depth`` rounds (no action). A caller
    with a deep graph can pass ``checkpoint`` (e.g. ``DataFrame.localCheckpoint`` or a write + read of a temp
    table) to materialise each round; to stop early, drive the rounds with :func:`extend_column_paths` and
    stop when a round adds no path of ``hops + 1`` edges.

    Args:
        column_edges: output of :func:`column_edges`.
        max_depth: maximum number of edges in a path (at least 1).
        checkpoint: applied to the state after each round.

    Returns:
        ``target_dataset_id, target_field, source_dataset_id, source_field, hops, jobs (array of job names,
        source to target), all_direct``.
    """
    if max_depth < 1:
        raise ValueError(f"max_depth must be at least 1, got {max_depth}")
    edges = _path_edges(column_edges)
    paths = _fold_paths(
        edges.select(
            F.col("_e_tgt_ds").alias("target_dataset_id"),
            F.col("_e_tgt_f").alias("target_field"),
            F.col("_e_src_ds").alias("source_dataset_id"),
            F.col("_e_src_f").alias("source_field"),
            F.lit(1).alias("hops"),
            F.array(F.col("_e_job")).alias("jobs"),
            F.col("_e_direct").alias("all_direct"),
        )
    )
    if checkpoint is not None:
        paths = checkpoint(paths)
    for hops in range(1, max_depth):
        paths = _extend(paths, edges, hops)
        if checkpoint is not None:
            paths = checkpoint(paths)
    return paths


def column_summary(column_edges: DataFrame, column_paths: DataFrame) -> DataFrame:
    """Per column (dataset, field) that takes part in column lineage: its upstream and downstream reach.

    - ``upstream_column_count``: distinct source columns with a path into it (any number of hops);
      ``direct_upstream_column_count``: those with an all-DIRECT shortest path (values flow in, not only
      influence it);
    - ``downstream_column_count`` and ``downstream_dataset_count``: the columns and datasets it reaches;
    - ``masked``: some edge into it, or into any of its upstream columns, carries a masking transformation
      (its values may be hashed or redacted on the way);
    - ``first_seen``/``last_seen``: over the column edges that touch it (either end).

    Only field-scope edges name columns; a dataset-wide dependency is not a column's.

    Args:
        column_edges: output of :func:`column_edges`.
        column_paths: output of :func:`column_paths` on the same edges.

    Returns:
        ``dataset_id, field, upstream_column_count, direct_upstream_column_count, downstream_column_count,
        downstream_dataset_count, masked, first_seen, last_seen``.
    """
    fields = column_edges.where((F.col("scope") == FIELD_SCOPE) & F.col("target_field").isNotNull())
    ends = fields.select(
        F.col("target_dataset_id").alias("dataset_id"),
        F.col("target_field").alias("field"),
        "first_seen",
        "last_seen",
    ).unionByName(
        fields.select(
            F.col("source_dataset_id").alias("dataset_id"),
            F.col("source_field").alias("field"),
            "first_seen",
            "last_seen",
        )
    )
    seen = ends.groupBy("dataset_id", "field").agg(
        F.min("first_seen").alias("first_seen"), F.max("last_seen").alias("last_seen")
    )
    into = ["target_dataset_id", "target_field"]
    upstream = column_paths.groupBy(*into).agg(
        F.count(F.lit(1)).alias("upstream_column_count"),
        F.count(F.when(F.col("all_direct"), F.lit(1))).alias("direct_upstream_column_count"),
    )
    downstream = column_paths.groupBy("source_dataset_id", "source_field").agg(
        F.count(F.lit(1)).alias("downstream_column_count"),
        F.count_distinct("target_dataset_id").alias("downstream_dataset_count"),
    )
    masked_at = fields.where(F.col("masking")).select(*into).distinct()
    masked_above = (
        column_paths.join(
            masked_at.select(
                F.col("target_dataset_id").alias("source_dataset_id"),
                F.col("target_field").alias("source_field"),
            ),
            ["source_dataset_id", "source_field"],
            "left_semi",
        )
        .select(*into)
        .unionByName(masked_at)
        .distinct()
        .withColumn("masked", F.lit(True))
    )

    def keyed(frame: DataFrame, dataset: str, field: str) -> DataFrame:
        return frame.withColumnRenamed(dataset, "dataset_id").withColumnRenamed(field, "field")

    zero = F.lit(0).cast("bigint")
    joined = (
        seen.join(keyed(upstream, *into), ["dataset_id", "field"], "left")
        .join(keyed(downstream, "source_dataset_id", "source_field"), ["dataset_id", "field"], "left")
        .join(keyed(masked_above, *into), ["dataset_id", "field"], "left")
    )
    return joined.select(
        "dataset_id",
        "field",
        *[
            F.coalesce(F.col(c), zero).alias(c)
            for c in (
                "upstream_column_count",
                "direct_upstream_column_count",
                "downstream_column_count",
                "downstream_dataset_count",
            )
        ],
        F.coalesce(F.col("masked"), F.lit(False)).alias("masked"),
        "first_seen",
        "last_seen",
    )
