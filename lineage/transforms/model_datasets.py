"""Datasets: naming normalisation, mentions, canonical aliases, datasets and schema versions.

Pure transforms, no I/O, no actions. Naming follows the OpenLineage naming spec
(https://openlineage.io/docs/spec/naming): ``kafka://{first bootstrap server}`` + topic, ``s3://{bucket}`` +
key (``s3a``/``s3n`` are Hadoop client schemes for the same objects), no trailing slashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lineage.transforms.extract import COORDINATES, extract_events
from lineage.transforms.model_common import dataset_id, latest, short_hash


def _no_identifiers() -> Column:
    return F.array().cast("array<struct<namespace:string,name:string,type:string>>")


# scheme :// authority rest
_URI = r"^([A-Za-z][A-Za-z0-9+.\-]*)://([^/]*)(.*)$"


def normalize_namespace(col: Column) -> Column:
    """Normalise a dataset namespace per the OpenLineage naming spec.

    Rules: ``s3a://`` and ``s3n://`` become ``s3://``; a Kafka bootstrap list keeps its first server
    (``kafka://h1:9092,h2:9092`` -> ``kafka://h1:9092``); trailing slashes are dropped (``file:///`` stays);
    scheme and host are lower-cased (both are case-insensitive); namespaces without a scheme only lose
    trailing slashes. Idempotent.

    Args:
        col: the namespace as reported.

    Returns:
        The normalised namespace (null for null).
    """
    # The look-behind keeps "scheme:///" whole: only slashes after a real character are trailing.
    stripped = F.regexp_replace(col, r"(?<=[^/:])/+$", "")
    scheme = F.lower(F.regexp_extract(stripped, _URI, 1))
    scheme = F.when(scheme.isin("s3a", "s3n"), F.lit("s3")).otherwise(scheme)
    authority = F.lower(F.regexp_extract(stripped, _URI, 2))
    authority = F.when(scheme == "kafka", F.trim(F.substring_index(authority, ",", 1))).otherwise(authority)
    rest = F.regexp_extract(stripped, _URI, 3)
    return F.when(stripped.rlike(_URI), F.concat(scheme, F.lit("://"), authority, rest)).otherwise(stripped)


def normalize_name(col: Column) -> Column:
    """Drop trailing slashes of a dataset name (``default.db/orders/`` -> ``default.db/orders``), keep ``/``.

    Args:
        col: the name as reported.

    Returns:
        The normalised name (null for null).
    """
    return F.when(col.rlike(r"^/+$"), F.lit("/")).otherwise(F.regexp_replace(col, r"/+$", ""))


def apply_alias_rules(namespace_col: Column, rules: list[tuple[str, str]] | None) -> Column:
    """Map whole namespaces to a canonical one (user rules, e.g. two bootstrap addresses of one cluster).

    Both sides of each rule are normalised like :func:`normalize_namespace`, and ``namespace_col`` must be
    normalised already. Rules are applied once, not transitively; the first matching rule wins.

    Args:
        namespace_col: a normalised namespace.
        rules: ``(alias, canonical)`` pairs, e.g. ``("kafka://broker:9092", "kafka://kafka-1:19092")``.

    Returns:
        The canonical namespace, or ``namespace_col`` when no rule matches.
    """
    if not rules:
        return namespace_col
    mapped = F.when(
        namespace_col == normalize_namespace(F.lit(rules[0][0])), normalize_namespace(F.lit(rules[0][1]))
    )
    for alias, canonical in rules[1:]:
        mapped = mapped.when(
            namespace_col == normalize_namespace(F.lit(alias)), normalize_namespace(F.lit(canonical))
        )
    return mapped.otherwise(namespace_col)


# What a mention keeps of its event.
_MENTION_EVENT = (
    "event_kind",
    "event_type",
    "event_time",
    "event_hash",
    "run_id",
    "job_namespace",
    "job_name",
    *COORDINATES,
)
# The columns of :func:`dataset_mentions`, in order (what the build checks the stored extracted form against
# without planning the extraction).
MENTION_COLUMNS = (
    *_MENTION_EVENT,
    "role",
    "namespace",
    "name",
    "raw_namespace",
    "raw_name",
    "symlinks",
    "schema_fields",
    "row_count",
    "size_bytes",
    "file_count",
    "column_facet",
    "column_entries",
    "lifecycle",
    "previous_namespace",
    "previous_name",
    "tags",
    "field_tags",
    "assertions",
    "tests",
    "metrics",
    "dataset_version",
)


def dataset_mentions(events: DataFrame) -> DataFrame:
    """Every dataset mention: ``inputs``/``outputs`` of RunEvents and JobEvents, ``dataset`` of DatasetEvents.

    Not deduplicated: every consumer aggregates with min/max/latest, which duplicates do not change.

    Args:
        events: output of :func:`~lineage.transforms.extract.extract_events`, or rows of ``lake.raw.events``
            (extracted here).

    Returns:
        ``event_kind, event_type, event_time, event_hash, run_id, job_namespace, job_name, kafka_topic,
        kafka_partition, kafka_offset (the event's raw row), role
        (input/output/static), namespace, name (normalised), raw_namespace, raw_name (as reported), symlinks
        (array of namespace/name/type, normalised), schema_fields (array of name/type/description),
        row_count, size_bytes, file_count (input or output statistics facet), column_facet and
        column_entries (the column-lineage facets: a digest of their content and their typed entries),
        lifecycle (the lifecycleStateChange facet, upper case), previous_namespace, previous_name (its
        previousIdentifier, normalised: the name a RENAME came from), tags (the tags dataset facet's entries
        about the dataset), field_tags (its entries about one field: field, key, value, source),
        assertions (the data-quality assertions facet: assertion, success, column, problem), tests (the
        run's test run facet, on its inputs: name, status, success, column, problem), metrics (the
        data-quality metrics facet: row_count, bytes, file_count, problem and per-column metrics),
        dataset_version (the version facet's ``datasetVersion``: the producer's id of the version)``.
    """
    extracted = events if "mentions" in events.columns else extract_events(events)
    exploded = extracted.select(*_MENTION_EVENT, F.explode("mentions").alias("m")).where(
        F.col("m.namespace").isNotNull() & F.col("m.name").isNotNull()
    )
    symlinks = F.transform(
        F.col("m.symlinks"),
        lambda s: F.struct(
            normalize_namespace(s["namespace"]).alias("namespace"),
            normalize_name(s["name"]).alias("name"),
            s["type"].alias("type"),
        ),
    )
    return exploded.select(
        *_MENTION_EVENT,
        F.col("m.role").alias("role"),
        normalize_namespace(F.col("m.namespace")).alias("namespace"),
        normalize_name(F.col("m.name")).alias("name"),
        F.col("m.namespace").alias("raw_namespace"),
        F.col("m.name").alias("raw_name"),
        F.filter(symlinks, lambda s: s["namespace"].isNotNull() & s["name"].isNotNull()).alias("symlinks"),
        F.col("m.schema_fields").alias("schema_fields"),
        F.col("m.row_count").alias("row_count"),
        F.col("m.size_bytes").alias("size_bytes"),
        F.col("m.file_count").alias("file_count"),
        F.col("m.column_facet").alias("column_facet"),
        F.col("m.column_entries").alias("column_entries"),
        F.col("m.lifecycle").alias("lifecycle"),
        normalize_namespace(F.col("m.previous_namespace")).alias("previous_namespace"),
        normalize_name(F.col("m.previous_name")).alias("previous_name"),
        F.col("m.tags").alias("tags"),
        F.col("m.field_tags").alias("field_tags"),
        F.col("m.assertions").alias("assertions"),
        F.col("m.tests").alias("tests"),
        F.col("m.metrics").alias("metrics"),
        F.col("m.dataset_version").alias("dataset_version"),
    )


def dataset_aliases(
    mentions: DataFrame,
    alias_rules: list[tuple[str, str]] | None = None,
    *,
    max_iterations: int = 10,
) -> DataFrame:
    """Map every (namespace, name) seen to one canonical dataset.

    Graph: a node is a normalised name after alias rules; every symlink identifier, and the previous
    identifier of a RENAME (``lifecycleStateChange``), is linked to the dataset that reports it. Each
    connected component is one real dataset (Iceberg location ↔ catalog table, Kafka
    topic ↔ Flink SQL table, the same topic under two bootstrap addresses).

    Canonical name rule (independent of arrival order and event time): prefer nodes reported as a dataset's
    own namespace/name by some producer (the physical/storage name; a name only ever seen as a symlink is a
    catalog alias), then the lexicographically smallest (namespace, name). Components are found by min-label
    propagation over ``max_iterations`` rounds (enough for components of diameter up to that; real ones are
    2-3), all lazily: no action is run, and the plan references ``mentions`` once per round, so callers
    should persist ``mentions``. The build runs the same steps (:func:`alias_graph`,
    :func:`propagate_labels`, :func:`resolve_aliases`) with every round materialised, stopping at the first
    round that changes no label: the result is the same, without planning and shuffling rounds that cannot
    change anything.

    ``alias_kind`` is the first step that changed the name: ``self`` (the alias is the canonical name),
    ``normalized`` (naming-spec normalisation), ``alias_rule`` (a user rule), ``symlink`` (merged through the
    symlinks facet), ``renamed`` (a name the dataset had before a RENAME).

    Args:
        mentions: output of :func:`dataset_mentions`.
        alias_rules: ``(alias namespace, canonical namespace)`` pairs, see :func:`apply_alias_rules`.
        max_iterations: label-propagation rounds.

    Returns:
        ``alias_namespace, alias_name, dataset_namespace, dataset_name, dataset_id, alias_kind``, one row per
        alias (as reported, normalised, or as a symlink identifier).
    """
    graph = alias_graph(mentions, alias_rules)
    labels = graph.labels
    for _ in range(max_iterations):
        labels = propagate_labels(labels, graph.edges)
    return resolve_aliases(graph, labels)


@dataclass(frozen=True)
class AliasGraph:
    """The alias graph of :func:`dataset_aliases`: every name form, the initial labels, the edges."""

    forms: (
        DataFrame  # alias_namespace, alias_name, norm_namespace, norm_name, rank, node_namespace, node_name
    )
    labels: DataFrame  # node_namespace, node_name, label (rank, ns, n): each node labelled by itself
    edges: DataFrame  # src_ns, src_n, dst_ns, dst_n: undirected links plus a self-loop per node


def alias_graph(mentions: DataFrame, alias_rules: list[tuple[str, str]] | None = None) -> AliasGraph:
    """Nodes, initial labels and edges of the alias graph (see :func:`dataset_aliases`); lazy."""
    # A RENAME's previous name is one more name of the dataset (lowest priority for the label), linked to
    # the new one like a symlink, so the history under both names is one dataset's.
    renamed = F.when(
        (F.col("lifecycle") == "RENAME")
        & F.col("previous_namespace").isNotNull()
        & F.col("previous_name").isNotNull(),
        F.array(
            F.struct(
                F.col("previous_namespace").alias("namespace"),
                F.col("previous_name").alias("name"),
                F.lit("PREVIOUS_IDENTIFIER").alias("type"),
            )
        ),
    )
    reported = mentions.select(
        "raw_namespace",
        "raw_name",
        "namespace",
        "name",
        "symlinks",
        F.coalesce(renamed, _no_identifiers()).alias("previous"),
    )
    as_reported = reported.select(
        F.col("raw_namespace").alias("alias_namespace"),
        F.col("raw_name").alias("alias_name"),
        F.col("namespace").alias("norm_namespace"),
        F.col("name").alias("norm_name"),
        F.lit(0).alias("rank"),
    )
    normalised = as_reported.select(
        F.col("norm_namespace").alias("alias_namespace"),
        F.col("norm_name").alias("alias_name"),
        "norm_namespace",
        "norm_name",
        "rank",
    )
    symlinked = reported.select(F.explode("symlinks").alias("s")).select(
        F.col("s.namespace").alias("alias_namespace"),
        F.col("s.name").alias("alias_name"),
        F.col("s.namespace").alias("norm_namespace"),
        F.col("s.name").alias("norm_name"),
        F.lit(1).alias("rank"),
    )
    previous = reported.select(F.explode("previous").alias("s")).select(
        F.col("s.namespace").alias("alias_namespace"),
        F.col("s.name").alias("alias_name"),
        F.col("s.namespace").alias("norm_namespace"),
        F.col("s.name").alias("norm_name"),
        F.lit(2).alias("rank"),
    )
    forms = (
        as_reported.unionByName(normalised)
        .unionByName(symlinked)
        .unionByName(previous)
        .withColumn("node_namespace", apply_alias_rules(F.col("norm_namespace"), alias_rules))
        .withColumn("node_name", F.col("norm_name"))
    )
    node = ["node_namespace", "node_name"]
    labels = forms.groupBy(*node).agg(
        F.struct(
            F.min("rank").alias("rank"), F.col("node_namespace").alias("ns"), F.col("node_name").alias("n")
        ).alias("label")
    )

    def aliased(ns: Column) -> Column:
        return apply_alias_rules(ns, alias_rules)

    links = reported.select(
        aliased(F.col("namespace")).alias("a_ns"),
        F.col("name").alias("a_n"),
        F.explode(F.concat(F.coalesce(F.col("symlinks"), _no_identifiers()), F.col("previous"))).alias("s"),
    ).select("a_ns", "a_n", aliased(F.col("s.namespace")).alias("b_ns"), F.col("s.name").alias("b_n"))
    # Undirected edges plus a self-loop per node, so one join per round both keeps and spreads labels.
    edges = (
        links.select(
            F.col("a_ns").alias("src_ns"),
            F.col("a_n").alias("src_n"),
            F.col("b_ns").alias("dst_ns"),
            F.col("b_n").alias("dst_n"),
        )
        .unionByName(
            links.select(
                F.col("b_ns").alias("src_ns"),
                F.col("b_n").alias("src_n"),
                F.col("a_ns").alias("dst_ns"),
                F.col("a_n").alias("dst_n"),
            )
        )
        .unionByName(
            forms.select(
                F.col("node_namespace").alias("src_ns"),
                F.col("node_name").alias("src_n"),
                F.col("node_namespace").alias("dst_ns"),
                F.col("node_name").alias("dst_n"),
            )
        )
        .distinct()
    )
    return AliasGraph(forms, labels, edges)


def alias_graph_news(graph: AliasGraph, nodes: DataFrame, links: DataFrame, aliases: DataFrame) -> DataFrame:
    """What the alias graph of new mentions adds to the stored one (empty: no label, alias row or dataset
    changes, so nothing needs re-labelling).

    Args:
        graph: :func:`alias_graph` of the new mentions.
        nodes: the stored nodes (``node_namespace, node_name, rank``, e.g. ``lineage.alias_nodes``).
        links: the stored links (``src_ns, src_n, dst_ns, dst_n``, no self-loops; ``lineage.alias_links``).
        aliases: the stored ``dataset_aliases`` rows.

    Returns:
        ``news, namespace, name``: ``node`` for a node not stored or stored with a worse (higher) rank,
        ``link`` for a link not stored (named by its source), ``alias`` for a name form not stored as an
        alias, or one that turns a ``renamed`` alias into another kind (reported or a symlink: rank 0 or 1).
    """
    node = ["node_namespace", "node_name"]
    link = ["src_ns", "src_n", "dst_ns", "dst_n"]
    alias = ["alias_namespace", "alias_name"]
    stored_rank = nodes.select(*node, F.col("rank").alias("_stored"))
    new_nodes = (
        graph.labels.select(*node, F.col("label.rank").alias("rank"))
        .join(stored_rank, node, "left")
        .where(F.col("_stored").isNull() | (F.col("_stored") > F.col("rank")))
        .select(
            F.lit("node").alias("news"),
            F.col("node_namespace").alias("namespace"),
            F.col("node_name").alias("name"),
        )
    )
    self_loop = (F.col("src_ns") == F.col("dst_ns")) & (F.col("src_n") == F.col("dst_n"))
    new_links = (
        graph.edges.where(~self_loop)
        .join(links.select(*link), link, "left_anti")
        .select(F.lit("link").alias("news"), F.col("src_ns").alias("namespace"), F.col("src_n").alias("name"))
    )
    kind = F.col("alias_kind")
    new_aliases = (
        graph.forms.join(aliases.select(*alias, "alias_kind"), alias, "left")
        .where(kind.isNull() | ((F.col("rank") < 2) & (kind == "renamed")))
        .select(
            F.lit("alias").alias("news"),
            F.col("alias_namespace").alias("namespace"),
            F.col("alias_name").alias("name"),
        )
    )
    return new_nodes.unionByName(new_links).unionByName(new_aliases)


def alias_forms(aliases: DataFrame, alias_rules: list[tuple[str, str]] | None = None) -> DataFrame:
    """The graph forms (see :class:`AliasGraph`) of known alias names, without their mentions.

    Every alias of ``dataset_aliases`` was a name as reported, its normalised form or a (normalised) symlink
    identifier; normalisation is idempotent, so its normal form and node follow from the name alone.

    Args:
        aliases: ``alias_namespace, alias_name`` (e.g. rows of ``dataset_aliases``).
        alias_rules: the rules the graph is built with.

    Returns:
        ``alias_namespace, alias_name, norm_namespace, norm_name, rank, node_namespace, node_name``; ``rank``
        is 2 for an alias of kind ``renamed`` (only ever seen as a RENAME's previous name), else 0 (the
        rank only tells ``renamed`` from ``symlink`` apart once the labels are known).
    """
    norm_namespace = normalize_namespace(F.col("alias_namespace"))
    rank = (
        F.when(F.col("alias_kind") == "renamed", F.lit(2)).otherwise(F.lit(0))
        if "alias_kind" in aliases.columns
        else F.lit(0)
    )
    return aliases.select(
        "alias_namespace",
        "alias_name",
        norm_namespace.alias("norm_namespace"),
        normalize_name(F.col("alias_name")).alias("norm_name"),
        rank.alias("rank"),
        apply_alias_rules(norm_namespace, alias_rules).alias("node_namespace"),
        normalize_name(F.col("alias_name")).alias("node_name"),
    )


def propagate_labels(labels: DataFrame, edges: DataFrame) -> DataFrame:
    """One round of min-label propagation: every node takes the smallest label among itself and its
    neighbours. Labels only ever decrease, so a round that changes none is a fixed point."""
    spread = labels.select(
        F.col("node_namespace").alias("dst_ns"), F.col("node_name").alias("dst_n"), "label"
    )
    return (
        edges.join(spread, ["dst_ns", "dst_n"])
        .groupBy(F.col("src_ns").alias("node_namespace"), F.col("src_n").alias("node_name"))
        .agg(F.min("label").alias("label"))
    )


def labels_changed(before: DataFrame, after: DataFrame) -> DataFrame:
    """Nodes whose label differs between two rounds (empty at the fixed point)."""
    node = ["node_namespace", "node_name"]
    return after.join(before.withColumnRenamed("label", "_before"), node).where(
        F.col("label") != F.col("_before")
    )


def resolve_aliases(graph: AliasGraph, labels: DataFrame) -> DataFrame:
    """The ``dataset_aliases`` rows from the graph's forms and the propagated labels."""
    node = ["node_namespace", "node_name"]
    forms = graph.forms
    canonical_ns, canonical_n = F.col("label.ns"), F.col("label.n")
    alias_ns, alias_n = F.col("alias_namespace"), F.col("alias_name")
    kind = (
        F.when((alias_ns == canonical_ns) & (alias_n == canonical_n), F.lit("self"))
        .when((alias_ns != F.col("norm_namespace")) | (alias_n != F.col("norm_name")), F.lit("normalized"))
        .when(F.col("norm_namespace") != F.col("node_namespace"), F.lit("alias_rule"))
        .when(F.col("rank") == 2, F.lit("renamed"))
        .otherwise(F.lit("symlink"))
    )
    return (
        forms.groupBy("alias_namespace", "alias_name", "norm_namespace", "norm_name", *node)
        .agg(F.min("rank").alias("rank"))
        .join(labels, node)
        .select(
            "alias_namespace",
            "alias_name",
            canonical_ns.alias("dataset_namespace"),
            canonical_n.alias("dataset_name"),
            dataset_id(canonical_ns, canonical_n).alias("dataset_id"),
            kind.alias("alias_kind"),
        )
    )


def canonical_mentions(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """Mentions with their canonical ``dataset_id, dataset_namespace, dataset_name`` (by normalised name).

    Args:
        mentions: output of :func:`dataset_mentions`.
        aliases: output of :func:`dataset_aliases` on the same mentions.

    Returns:
        The ``mentions`` columns plus ``dataset_id, dataset_namespace, dataset_name``.
    """
    keys = aliases.select(
        F.col("alias_namespace").alias("namespace"),
        F.col("alias_name").alias("name"),
        "dataset_id",
        "dataset_namespace",
        "dataset_name",
    )
    return mentions.join(keys, ["namespace", "name"])


def schema_hash(fields: Column) -> Column:
    """Id of a schema version: 16 hex characters of SHA-256 of the fields as JSON (order matters)."""
    return short_hash(F.to_json(fields))


def has_schema(fields: Column) -> Column:
    return fields.isNotNull() & (F.size(fields) > 0)


def datasets(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """One row per canonical dataset, with its current schema (the latest schema facet by event time).

    Args:
        mentions: output of :func:`dataset_mentions`.
        aliases: output of :func:`dataset_aliases`.

    Returns:
        ``dataset_id, namespace, name, first_seen, last_seen, schema_fields, schema_hash, alias_count, tags``
        (of the latest mention carrying the ``tags`` facet).
    """
    fields = F.col("schema_fields")
    folded = (
        canonical_mentions(mentions, aliases)
        .groupBy("dataset_id", "dataset_namespace", "dataset_name")
        .agg(
            F.min("event_time").alias("first_seen"),
            F.max("event_time").alias("last_seen"),
            latest(fields, has_schema(fields)).alias("schema_fields"),
            latest(F.col("tags")).alias("tags"),
            # From the same facet as ``tags`` (both are null exactly when the mention lacks it).
            latest(F.col("field_tags")).alias("field_tags"),
        )
    )
    alias_counts = aliases.groupBy("dataset_id").agg(
        F.count_distinct("alias_namespace", "alias_name").alias("alias_count")
    )
    return folded.join(alias_counts, "dataset_id", "left").select(
        "dataset_id",
        F.col("dataset_namespace").alias("namespace"),
        F.col("dataset_name").alias("name"),
        "first_seen",
        "last_seen",
        "schema_fields",
        F.when(fields.isNotNull(), schema_hash(fields)).alias("schema_hash"),
        "alias_count",
        "tags",
        "field_tags",
    )


def dataset_schemas(mentions: DataFrame, aliases: DataFrame) -> DataFrame:
    """Schema versions per canonical dataset, from every ``schema`` facet (run and static events).

    ``first_run_id`` (and its job) is the run of the earliest run event carrying the schema (ties: smallest
    run id); null when the schema was only seen in DatasetEvents/JobEvents. ``version`` numbers the schemas
    of a dataset by first appearance (ties by hash).

    Args:
        mentions: output of :func:`dataset_mentions`.
        aliases: output of :func:`dataset_aliases`.

    Returns:
        ``dataset_id, schema_hash, version, schema_fields, first_seen, last_seen, first_run_id,
        first_job_namespace, first_job_name``.
    """
    fields = F.col("schema_fields")
    run_key = F.when(F.col("run_id").isNotNull(), F.struct("event_time", "run_id", "event_hash"))
    folded = (
        canonical_mentions(mentions, aliases)
        .where(has_schema(fields))
        .withColumn("schema_hash", schema_hash(fields))
        .groupBy("dataset_id", "schema_hash")
        .agg(
            F.min_by(fields, F.struct("event_time", "event_hash")).alias("schema_fields"),
            F.min("event_time").alias("first_seen"),
            F.max("event_time").alias("last_seen"),
            F.min_by(F.struct("run_id", "job_namespace", "job_name"), run_key).alias("_first"),
        )
    )
    order = Window.partitionBy("dataset_id").orderBy("first_seen", "schema_hash")
    return folded.select(
        "dataset_id",
        "schema_hash",
        F.row_number().over(order).alias("version"),
        "schema_fields",
        "first_seen",
        "last_seen",
        F.col("_first.run_id").alias("first_run_id"),
        F.col("_first.job_namespace").alias("first_job_namespace"),
        F.col("_first.job_name").alias("first_job_name"),
    )


def fold_datasets(new: DataFrame, old: DataFrame) -> DataFrame:
    """``datasets`` rows with later mentions folded in, equal to :func:`datasets` over old and new mentions.

    Only for datasets whose new mentions are all later than their ``last_seen`` and whose aliases did not
    change: then the first sighting stays, the last one is the new one, and the latest schema is the new
    mentions' latest when they carry one.

    Args:
        new: :func:`datasets` over the new mentions of those datasets.
        old: their current ``datasets`` rows.

    Returns:
        The rows of the datasets in both, with the columns of :func:`datasets`.
    """
    n, o = new.alias("n"), old.alias("o")
    has_new_schema = F.col("n.schema_fields").isNotNull()
    return n.join(o, "dataset_id").select(
        "dataset_id",
        F.col("o.namespace").alias("namespace"),
        F.col("o.name").alias("name"),
        F.col("o.first_seen").alias("first_seen"),
        F.col("n.last_seen").alias("last_seen"),
        F.when(has_new_schema, F.col("n.schema_fields"))
        .otherwise(F.col("o.schema_fields"))
        .alias("schema_fields"),
        F.when(has_new_schema, F.col("n.schema_hash")).otherwise(F.col("o.schema_hash")).alias("schema_hash"),
        F.col("o.alias_count").alias("alias_count"),
        F.coalesce(F.col("n.tags"), F.col("o.tags")).alias("tags"),
        F.coalesce(F.col("n.field_tags"), F.col("o.field_tags")).alias("field_tags"),
    )


def fold_schemas(new: DataFrame, old: DataFrame) -> DataFrame:
    """``dataset_schemas`` rows with later mentions folded in, equal to :func:`dataset_schemas` over old and
    new mentions, under the same condition as :func:`fold_datasets`.

    A schema seen before keeps its version, first sighting and first run; its ``last_seen`` moves to the new
    mentions'. A new schema is numbered after the dataset's existing versions (it was first seen after all of
    them), in the order :func:`dataset_schemas` numbers them.

    Args:
        new: :func:`dataset_schemas` over the new mentions of those datasets.
        old: the current ``dataset_schemas`` rows of those datasets.

    Returns:
        Every row of the datasets ``new`` has schemas for, with the columns of :func:`dataset_schemas`.
    """
    key = ["dataset_id", "schema_hash"]
    columns = old.columns
    old = old.join(new.select("dataset_id").distinct(), "dataset_id", "left_semi")
    # A schema only DatasetEvents carried so far has no first run: the new mentions' first run is its first.
    first_run = ("first_run_id", "first_job_namespace", "first_job_name")
    no_run = F.col("o.first_run_id").isNull()

    def merged(c: str) -> Column:
        if c in key:
            return F.col(c)
        if c == "last_seen":
            return F.coalesce(F.col("n.last_seen"), F.col("o.last_seen")).alias(c)
        if c in first_run:
            return F.when(no_run, F.col(f"n.{c}")).otherwise(F.col(f"o.{c}")).alias(c)
        return F.col(f"o.{c}").alias(c)

    seen = old.alias("o").join(new.alias("n"), key, "left").select(*[merged(c) for c in columns])
    versions = old.groupBy("dataset_id").agg(F.max("version").alias("_known"))
    order = Window.partitionBy("dataset_id").orderBy("first_seen", "schema_hash")
    added = (
        new.join(old, key, "left_anti")
        .join(versions, "dataset_id", "left")
        .withColumn("version", F.coalesce(F.col("_known"), F.lit(0)) + F.row_number().over(order))
        .select(*columns)
    )
    return seen.unionByName(added)
