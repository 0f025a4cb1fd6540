"""The lineage model: pure DataFrame -> DataFrame transforms from ``lake.raw.events`` to the lineage tables.

No reads, writes or actions: the build job reads the raw events, calls these and writes the results. The code
lives in three modules, re-exported here so callers import one name:

- :mod:`lineage.transforms.model_runs`: ``jobs``, ``runs``, ``heartbeat_gaps``, ``run_liveness``;
- :mod:`lineage.transforms.model_datasets`: naming (``normalize_namespace``, ``normalize_name``,
  ``apply_alias_rules``), ``dataset_mentions``, ``dataset_aliases``, ``datasets``, ``dataset_schemas``,
  ``fold_datasets``, ``fold_schemas``;
- :mod:`lineage.transforms.model_graph`: ``run_io``, ``quality_results``, ``quality_metrics``, ``static_io``,
  ``job_edges``, ``dataset_edges``, ``job_summary``, ``dataset_summary``.

Typical wiring. An output that later transforms read again is materialised first (the build writes it to a
table): chained lazily, the whole model is one plan of megabytes, each shared output copied into every
branch that reads it, and Spark spends minutes optimising it even for a handful of events::

    mentions = dataset_mentions(events).localCheckpoint()
    aliases = dataset_aliases(mentions, alias_rules).localCheckpoint()
    run_rows = runs(events).localCheckpoint()
    live = run_liveness(run_rows, heartbeat_gaps(events), now)
    io = run_io(mentions, aliases).localCheckpoint()
    edges = job_edges(io, run_rows, static_io(mentions, aliases))
    flows = dataset_edges(edges)
"""

from __future__ import annotations

from lineage.transforms.model_common import RUN_PART, dataset_id, run_part
from lineage.transforms.model_datasets import (
    MENTION_COLUMNS,
    AliasGraph,
    alias_forms,
    alias_graph,
    alias_graph_news,
    apply_alias_rules,
    canonical_mentions,
    dataset_aliases,
    dataset_mentions,
    dataset_schemas,
    datasets,
    fold_datasets,
    fold_schemas,
    labels_changed,
    normalize_name,
    normalize_namespace,
    propagate_labels,
    resolve_aliases,
    schema_hash,
)
from lineage.transforms.model_graph import (
    dataset_edges,
    dataset_summary,
    job_edges,
    job_summary,
    quality_metrics,
    quality_results,
    run_io,
    static_io,
)
from lineage.transforms.model_runs import (
    DEPENDENCY_KEY,
    dependencies_from_runs,
    dependency_runs,
    fold_dependency_runs,
    fold_job_latest,
    heartbeat_gaps,
    job_dependencies,
    job_heartbeats,
    job_latest,
    jobs,
    jobs_from_latest,
    run_heartbeat_gaps,
    run_liveness,
    runs,
)

__all__ = [
    "DEPENDENCY_KEY",
    "MENTION_COLUMNS",
    "RUN_PART",
    "AliasGraph",
    "alias_forms",
    "alias_graph",
    "alias_graph_news",
    "apply_alias_rules",
    "canonical_mentions",
    "dataset_aliases",
    "dataset_edges",
    "dataset_id",
    "dataset_mentions",
    "dataset_schemas",
    "dataset_summary",
    "datasets",
    "dependencies_from_runs",
    "dependency_runs",
    "fold_datasets",
    "fold_dependency_runs",
    "fold_job_latest",
    "fold_schemas",
    "heartbeat_gaps",
    "job_dependencies",
    "job_edges",
    "job_heartbeats",
    "job_latest",
    "job_summary",
    "jobs",
    "jobs_from_latest",
    "labels_changed",
    "normalize_name",
    "normalize_namespace",
    "propagate_labels",
    "quality_metrics",
    "quality_results",
    "resolve_aliases",
    "run_heartbeat_gaps",
    "run_io",
    "run_liveness",
    "run_part",
    "runs",
    "schema_hash",
    "static_io",
]
