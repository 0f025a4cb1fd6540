"""The answers every front end gives, as JSON-ready dicts: a walk, an impact, a run, the graph page's input.

The CLI prints them (``--json``) or renders them as tables; the read API sends them; the graph page draws
:func:`graph_dict`. Nothing here knows a terminal or HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from lineage.query import diff as diff_module
from lineage.query import history
from lineage.query.errors import LookupError_
from lineage.query.health import OwnHealth
from lineage.query.liveness import as_of
from lineage.query.nodes import BOTH, DATASET, DOWNSTREAM, JOB, UPSTREAM, WHOLE_DATASET, Node, Traversal
from lineage.query.store import LineageStore
from lineage.query.text import iso, transformation_label

STATE_NAMES = {
    "running": "RUNNING",
    "lost": "LOST",
    "failed": "FAIL",
    "fail": "FAIL",
    "complete": "COMPLETE",
    "completed": "COMPLETE",
    "aborted": "ABORT",
    "abort": "ABORT",
    "start": "START",
    "started": "START",
    "other": "OTHER",
}
DEFAULT_DEPTH = 10


def state_names(states: Sequence[str]) -> list[str]:
    """The inferred states asked for (``lost``, ``failed`` ...) as the runs table spells them."""
    wanted = []
    for state in states:
        name = STATE_NAMES.get(state.strip().lower())
        if name is None:
            raise LookupError_(f"unknown state {state!r}: use one of {', '.join(sorted(set(STATE_NAMES)))}")
        wanted.append(name)
    return wanted


def impact_of(store: LineageStore, target: str, depth: int | None, as_of: datetime | None) -> dict[str, Any]:
    """What a change to a dataset (or one field of it) affects downstream, as ``lineage impact --json``."""
    root, field_name = store.resolve_field(target)
    if root.kind != DATASET:
        raise LookupError_(f"{target!r} is a job; impact starts from a dataset or a dataset field")
    walk = store.traverse(root, DOWNSTREAM, depth, as_of=as_of, columns=True, field_name=field_name)
    if field_name is not None:  # a field: only what its column lineage reaches
        reached = {f.dataset for f in walk.columns} | {root}
        walk.hops = {n: h for n, h in walk.hops.items() if n.kind == JOB or n in reached}
        jobs = {(e["job_namespace"], e["job_name"]) for e in walk.column_edges}
        walk.hops = {n: h for n, h in walk.hops.items() if n.kind == DATASET or (n.namespace, n.name) in jobs}
    return impact_json(store, walk, field_name)


def run_detail(store: LineageStore, run_id: str) -> dict[str, Any]:
    """One run with its children and datasets, as ``lineage run --json``."""
    row, children = store.run_and_children(run_id)
    io_rows = store.run_datasets(row["run_id"])
    read, written = history.run_versions(store, row["run_id"], io_rows)
    return {
        **run_json(row),
        "children": [run_json(c) for c in children],
        "dependencies": run_dependencies(store, row),
        "datasets": [
            {
                "dataset": d["dataset"],
                "direction": d["direction"],
                "row_count": d["row_count"],
                "first_seen": iso(d["first_seen"]),
                "last_seen": iso(d["last_seen"]),
            }
            for d in io_rows
        ],
        "versions_read": [version_read_json(r) for r in read],
        "versions_written": [version_json(v) for v in written],
    }


def version_json(version: history.DatasetVersion) -> dict[str, Any]:
    """One dataset version: the write that made it, its schema, statistics and lifecycle changes."""
    return {
        "dataset": version.dataset.label,
        "namespace": version.dataset.namespace,
        "name": version.dataset.name,
        "version": version.version,
        "version_source": version.source,
        "run_id": version.run_id,
        "job": None if version.job_name is None else f"{version.job_namespace}/{version.job_name}",
        "run_state": version.run_state,
        "first_seen": iso(version.first_seen),
        "written_at": iso(version.written_at),
        "schema_hash": version.schema_hash,
        "schema_version": version.schema_version,
        "row_count": version.row_count,
        "size_bytes": version.size_bytes,
        "file_count": version.file_count,
        "lifecycle_states": version.lifecycle_states,
    }


def version_read_json(read: history.VersionRead) -> dict[str, Any]:
    """A version a run read, and the run that wrote it (null: unknown)."""
    writer = read.written_by
    return {
        "dataset": read.dataset.label,
        "namespace": read.dataset.namespace,
        "name": read.dataset.name,
        "version": read.version,
        "reported_version": read.reported,
        "read_at": iso(read.read_at),
        "written_by_run_id": None if writer is None else writer.run_id,
        "written_by_job": None if writer is None else f"{writer.job_namespace}/{writer.job_name}",
    }


def versions_of(store: LineageStore, name: str) -> dict[str, Any]:
    """A dataset's versions, newest first, as ``lineage versions --json``."""
    node = store.resolve(name)
    return {
        "dataset": dict(node_json(store, node)),
        "versions": [version_json(v) for v in history.dataset_versions(store, node)],
    }


def version_lineage(store: LineageStore, name: str, version: str, depth: int) -> dict[str, Any]:
    """A version of a dataset and the versions upstream of it, nearest first, as ``lineage versions
    DATASET --version V --json``: each with the versions its writing run read."""
    node = store.resolve(name)
    steps = history.upstream_versions(store, node, version, depth)
    return {
        "dataset": dict(node_json(store, node)),
        "version": steps[0].version.version,
        "steps": [
            {
                "depth": step.depth,
                **version_json(step.version),
                "inputs": [version_read_json(r) for r in step.inputs],
            }
            for step in steps
        ],
    }


def node_json(store: LineageStore, node: Node) -> dict[str, Any]:
    """A node's JSON object, made once per store: callers copy it before adding to it (the read API's
    store answers many questions from one build, and large answers hold thousands of nodes)."""
    data = store.node_payloads.get(node)
    if data is None:
        data = {
            "id": node.id,
            "kind": node.kind,
            "namespace": node.namespace,
            "name": node.name,
            "label": node.label,
        }
        if node.kind == JOB:
            data["state"], data["last_run_id"] = store.job_state(node.namespace, node.name)
        store.node_payloads[node] = data
    return data


def traversal_json(store: LineageStore, walk: Traversal, as_of: datetime | None) -> dict[str, Any]:
    # Nodes by (hops, kind, label), the root (the one node at 0 hops) left out; edges by (source, target).
    # Sorted as tuples before any JSON object is made: a deep walk from a hub holds thousands of each.
    nodes = sorted(((h, n.kind, n.label, n) for n, h in walk.hops.items() if h), key=itemgetter(0, 1, 2))
    edges = sorted(edge_ends(*edge) for edge in walk.edges)
    store.fetch_job_states((n.namespace, n.name) for n in walk.hops if n.kind == JOB)
    data: dict[str, Any] = {
        "root": dict(node_json(store, walk.root)),
        "direction": walk.direction,
        "depth": walk.depth,
        "as_of": iso(as_of),
        "nodes": [{**node_json(store, n), "hops": h} for h, _, _, n in nodes],
        "edges": edge_objects(edges),
    }
    if walk.job_links:
        data["dependencies"] = sorted(
            (dependency_json(*link) for link in walk.job_links), key=lambda e: (e["source"], e["target"])
        )
    if walk.columns or walk.column_edges:
        data["columns"] = [
            {"dataset": f.dataset.label, "field": f.field, "jobs": hops}
            for f, hops in sorted(walk.columns.items(), key=lambda item: (item[1], item[0].label))
        ]
        ends = store.column_edge_ends(walk.column_edges)
        data["column_edges"] = [column_edge_json(e, ends) for e in walk.column_edges]
    return data


def edge_objects(ends: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The JSON objects of edges given as :func:`edge_ends`, in that order."""
    return [{"source": source, "target": target, "kind": kind} for source, target, kind in ends]


def edge_ends(dataset: Node, job: Node, kind: str) -> tuple[str, str, str]:
    """(source id, target id, kind) of a dataset -> job (input) or job -> dataset (output) edge."""
    source, target = (dataset, job) if kind == "input" else (job, dataset)
    return source.id, target.id, kind


def dependency_json(upstream: Node, downstream: Node, source: str) -> dict[str, str]:
    """A job -> job dependency (the upstream job runs first)."""
    return {"source": upstream.id, "target": downstream.id, "kind": "dependency", "via": source}


def column_edge_json(edge: dict[str, Any], ends: dict[str, Node]) -> dict[str, Any]:
    """A column edge's JSON; ``ends``: its datasets' nodes (:meth:`LineageModel.column_edge_ends`)."""
    source = ends.get(edge["source_dataset_id"])
    target = ends.get(edge["target_dataset_id"])
    return {
        "source": source.label if source else edge["source_dataset_id"],
        "source_field": edge["source_field"] or WHOLE_DATASET,
        "target": target.label if target else edge["target_dataset_id"],
        "target_field": edge["target_field"] or WHOLE_DATASET,
        "job": f"{edge['job_namespace']}/{edge['job_name']}",
        "direct": edge["is_direct"],
        "subtypes": list(edge["subtypes"] or []),
        "transformation": transformation_label(edge),
    }


def impact_json(store: LineageStore, walk: Traversal, field_name: str | None) -> dict[str, Any]:
    """The impact's JSON; the root and every dataset reached carry their own health (state and problems:
    :meth:`lineage.query.health.HealthQueries.own_health`), so what a failure reaches is one answer."""
    store.fetch_job_states((n.namespace, n.name) for n in walk.hops if n.kind == JOB)
    ordered = sorted(walk.hops.items(), key=lambda item: (item[1], item[0].label))
    health = store.own_health(n.dataset_id or "" for n in walk.hops if n.kind == DATASET)
    root_health = health.get(walk.root.dataset_id or "")
    return {
        "root": {
            **node_json(store, walk.root),
            "field": field_name,
            "health": root_health.state if root_health else None,
            "problems": root_health.problems if root_health else [],
        },
        "depth": walk.depth,
        "datasets": [
            {
                "dataset": n.label,
                "id": n.id,
                "hops": h,
                "health": health[n.dataset_id or ""].state,
                "problems": health[n.dataset_id or ""].problems,
            }
            for n, h in ordered
            if n.kind == DATASET and n != walk.root
        ],
        "jobs": [{**node_json(store, n), "hops": h} for n, h in ordered if n.kind == JOB],
        "columns": [
            {
                "dataset": f.dataset.label,
                "field": f.field,
                "jobs": hops,
                "failing": failing_assertions(health.get(f.dataset.dataset_id or ""), f.field),
            }
            for f, hops in sorted(walk.columns.items(), key=lambda item: (item[1], item[0].label))
        ],
    }


def failing_assertions(health: OwnHealth | None, field: str) -> list[str]:
    """The assertions on one column whose latest result is false (from a dataset's own health)."""
    if health is None:
        return []
    return sorted(a["assertion"] for a in health.assertions if a["column"] == field and a["success"] is False)


def problem_words(problem: dict[str, Any]) -> str:
    """One problem of a node's own health (:mod:`lineage.query.health`) in a few words: ``last write
    FAIL``, ``not_null(id) failed``, ``late since 2026-...``."""
    kind = problem["kind"]
    if kind in ("last_write", "last_run"):
        return f"{kind.replace('_', ' ')} {problem['state']}"
    if kind == "assertion":
        return f"{problem['assertion']}({problem['column'] or '*'}) failed"
    if kind == "late":
        return f"late since {problem['late_after']}"
    return str(kind)


RUN_FIELDS = (
    "run_id",
    "job_namespace",
    "job_name",
    "reported_state",
    "inferred_state",
    "liveness_reason",
    "started_at",
    "ended_at",
    "last_event_at",
    "duration_seconds",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
    "root_run_id",
    "error_message",
    "processing_engine_name",
    "processing_engine_version",
    "event_count",
    "silent_seconds",
    "threshold_seconds",
    "lost_after",
)


def run_dependencies(store: LineageStore, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs the run's job depends on (upstream) and that depend on it (downstream)."""
    if row["job_name"] is None:
        return []
    found = store.dependencies_of(row["job_namespace"], row["job_name"])
    out = []
    for direction, rows in found.items():
        end = "upstream" if direction == UPSTREAM else "downstream"
        for dep in rows:
            out.append(
                {
                    "direction": direction,
                    "job": f"{dep[f'{end}_job_namespace']}/{dep[f'{end}_job_name']}",
                    "via": dep["source"],
                    "dependency_type": dep["dependency_type"],
                    "trigger_rule": dep["status_trigger_rule"],
                    "last_seen": iso(dep["last_seen"]),
                }
            )
    return sorted(out, key=lambda d: (d["direction"] != UPSTREAM, d["job"], d["via"]))


def run_json(row: dict[str, Any]) -> dict[str, Any]:
    """A run's JSON: a row of the store's run queries, already as of the reader's clock
    (:func:`lineage.query.liveness.as_of`: ``silent_seconds`` and a LOST whose deadline passed since the
    build); a raw ``lineage.runs`` row is read as of now."""
    if "silent_seconds" not in row:
        row = as_of(row)
    return {key: iso(row.get(key)) for key in RUN_FIELDS}


def graph_dict(store: LineageStore, walk: Traversal) -> dict[str, Any]:
    """The renderer's input (see lineage.graph.render); a dataset carries its own ``health`` and, when any,
    its columns' tags (``column_tags``: field -> ``KEY`` or ``KEY=VALUE`` texts)."""
    nodes = []
    health = store.own_health(n.dataset_id or "" for n in walk.hops if n.kind == DATASET)
    column_tags = store.column_tags_of(n.dataset_id or "" for n in walk.hops if n.kind == DATASET)
    dataset_ids = [n.dataset_id or "" for n in walk.hops if n.kind == DATASET]
    job_keys = [(n.namespace, n.name) for n in walk.hops if n.kind == JOB]
    rows, aliases = store.datasets_of(dataset_ids), store.aliases_for(dataset_ids)
    summaries, jobs = store.job_summaries_of(job_keys), store.jobs_of(job_keys)
    for node, hops in sorted(walk.hops.items(), key=lambda item: (item[1], item[0].label)):
        entry: dict[str, Any] = {
            "id": node.id,
            "kind": node.kind,
            "namespace": node.namespace,
            "name": node.name,
            "label": node.name if node.kind == JOB else node.label,
            "hops": hops,
            "state": None,
            "fields": [],
            "details": {},
        }
        if node.kind == JOB:
            summary = summaries.get((node.namespace, node.name), {})
            job = jobs.get((node.namespace, node.name), {})
            entry["state"] = summary.get("last_run_state")
            entry["details"] = {
                "latest run": summary.get("last_run_id"),
                "latest run reported": summary.get("last_run_reported_state"),
                "runs": summary.get("run_count"),
                "lost runs": summary.get("lost_runs"),
                "failed runs": summary.get("failed_runs"),
                "integration": job.get("integration"),
                "processing": job.get("processing_type"),
            }
        else:
            own = health.get(node.dataset_id or "")
            entry["health"] = own.state if own else None
            row = rows.get(node.dataset_id or "", {})
            entry["fields"] = [
                {"name": f["name"], "type": f["type"]} for f in (row.get("schema_fields") or [])
            ]
            entry["details"] = {
                "aliases": sorted(
                    f"{a['alias_namespace']}/{a['alias_name']} ({a['alias_kind']})"
                    for a in aliases.get(node.dataset_id or "", [])
                    if (a["alias_namespace"], a["alias_name"]) != (node.namespace, node.name)
                ),
                "first seen": iso(row.get("first_seen")),
                "last seen": iso(row.get("last_seen")),
                "problems": [problem_words(p) for p in own.problems] if own else [],
            }
            # Each column's tags (lineage.column_tags), shown with the column on the page; only when any.
            tagged = {
                f: sorted({t["key"] if t["value"] is None else f"{t['key']}={t['value']}" for t in carried})
                for (ds_id, f), carried in column_tags.items()
                if ds_id == node.dataset_id
            }
            if tagged:
                entry["column_tags"] = dict(sorted(tagged.items()))
        entry["details"] = {k: v for k, v in entry["details"].items() if v not in (None, [], "")}
        nodes.append(entry)
    ordered = sorted(walk.edges, key=lambda e: (e[0].label, e[1].label, e[2]))
    edges = edge_objects(edge_ends(*edge) for edge in ordered)
    links = sorted(walk.job_links, key=lambda e: (e[0].label, e[1].label, e[2]))
    edges += [dependency_json(*link) for link in links]
    column_edges = []
    ends = store.column_edge_ends(walk.column_edges)
    for edge in walk.column_edges:
        source = ends.get(edge["source_dataset_id"])
        target = ends.get(edge["target_dataset_id"])
        if source is None or target is None or source not in walk.hops or target not in walk.hops:
            continue
        if edge["source_field"] is None or edge["target_field"] is None:  # dataset-level (INDIRECT) edge
            continue
        column_edges.append(
            {
                "source": source.id,
                "source_field": edge["source_field"],
                "target": target.id,
                "target_field": edge["target_field"],
                "transformation": transformation_label(edge),
                "job": f"job:{edge['job_namespace']}/{edge['job_name']}",
            }
        )
    return {
        "root": walk.root.id,
        "direction": walk.direction,
        "generated_at": iso(datetime.now(UTC)),
        "nodes": nodes,
        "edges": edges,
        "column_edges": column_edges,
    }


def diff_json(store: LineageStore, changes: diff_module.Diff) -> dict[str, Any]:
    """What changed between two windows (:func:`lineage.query.diff.diff`), as ``lineage diff --json``:
    ``counts`` of every kind of change, and the changes listed (the first ``limit`` of each kind)."""
    ids = {d for edge in (*changes.job_edges[0], *changes.job_edges[1]) for d in edge[2:3]}
    ids |= {d for edge in (*changes.dataset_edges[0], *changes.dataset_edges[1]) for d in edge[:2]}
    for column in (*changes.column_edges[0], *changes.column_edges[1]):
        ids |= {column[0], column[2]}
    ids |= {w[2] for side in changes.writers for w in side} | {s[0] for s in changes.schemas}
    nodes = store.nodes_of(ids)

    def label(dataset_id: str) -> str:
        node = nodes.get(dataset_id)
        return node.label if node else dataset_id

    def job_edge(edge: diff_module.JobEdge) -> dict[str, Any]:
        return {"job": f"{edge[0]}/{edge[1]}", "dataset": label(edge[2]), "direction": edge[3]}

    def dataset_edge(edge: diff_module.DatasetEdge) -> dict[str, Any]:
        return {"source": label(edge[0]), "target": label(edge[1]), "job": f"{edge[2]}/{edge[3]}"}

    def column_edge(edge: diff_module.ColumnEdge) -> dict[str, Any]:
        return {
            "source": label(edge[0]),
            "source_field": edge[1],
            "target": label(edge[2]),
            "target_field": edge[3],
            "job": f"{edge[4]}/{edge[5]}",
        }

    def writer(entry: tuple[str, str, str]) -> dict[str, Any]:
        return {"job": f"{entry[0]}/{entry[1]}", "dataset": label(entry[2])}

    def outcome(entry: tuple[datetime, str, str]) -> dict[str, Any]:
        return {"state": entry[2], "run_id": entry[1], "ended_at": iso(entry[0])}

    def window(frame: diff_module.Window) -> dict[str, Any]:
        return {"from": iso(frame.start), "to": iso(frame.end)}

    return {
        "base": window(changes.base),
        "current": window(changes.current),
        "limit": changes.limit,
        "counts": changes.counts,
        "job_edges": {
            "appeared": [job_edge(e) for e in changes.job_edges[0]],
            "stopped": [job_edge(e) for e in changes.job_edges[1]],
        },
        "dataset_edges": {
            "appeared": [dataset_edge(e) for e in changes.dataset_edges[0]],
            "stopped": [dataset_edge(e) for e in changes.dataset_edges[1]],
        },
        "column_edges": {
            "appeared": [column_edge(e) for e in changes.column_edges[0]],
            "stopped": [column_edge(e) for e in changes.column_edges[1]],
        },
        "writers": {
            "started": [writer(w) for w in changes.writers[0]],
            "stopped": [writer(w) for w in changes.writers[1]],
        },
        "schemas": [
            {
                "dataset": label(dataset_id),
                "before": old,
                "after": new,
                "fields_added": added,
                "fields_removed": removed,
                "fields_retyped": [{"name": n, "before": b, "after": a} for n, b, a in retyped],
            }
            for dataset_id, old, new, added, removed, retyped in changes.schemas
        ],
        "outcomes": [
            {"job": f"{ns}/{name}", "before": outcome(before), "after": outcome(after)}
            for ns, name, before, after in changes.outcomes
        ],
    }


def diff_of(
    store: LineageStore,
    base: diff_module.Window,
    current: diff_module.Window,
    node: str | None = None,
    depth: int | None = None,
    limit: int | None = diff_module.DEFAULT_LIMIT,
) -> dict[str, Any]:
    """The JSON of a diff, around ``node`` within ``depth`` hops when given: every change counted, the
    first ``limit`` of each kind listed (all when None)."""
    data = diff_json(store, diff_module.diff(store, base, current, node=node, depth=depth, limit=limit))
    if node is not None:
        data["node"] = dict(node_json(store, store.resolve(node)))
        data["depth"] = depth
    return data


def diff_graph(store: LineageStore, changes: diff_module.Diff, node: str | None = None) -> dict[str, Any]:
    """The renderer's input for a diff: the jobs and datasets of every edge and column edge that appeared
    or stopped being observed, those edges with their ``change`` (``added``, ``removed``), and in the
    nodes' details the schema changes and run outcome changes. The root is ``node`` when given."""
    ids = {e[2] for side in changes.job_edges for e in side} | {s[0] for s in changes.schemas}
    for column_side in changes.column_edges:
        for column in column_side:
            ids |= {column[0], column[2]}
    datasets = store.nodes_of(ids)
    jobs = {(e[0], e[1]) for side in changes.job_edges for e in side}
    jobs |= {(ns, name) for ns, name, _before, _after in changes.outcomes}
    root = store.resolve(node) if node is not None else None
    nodes = [*datasets.values(), *(Node(JOB, ns, name) for ns, name in sorted(jobs))]
    if root is not None and root not in nodes:
        nodes.append(root)
    if not nodes:
        return {"root": None, "direction": BOTH, "generated_at": iso(datetime.now(UTC)), "nodes": [],
                "edges": [], "column_edges": []}  # fmt: skip
    walk = Traversal(root or nodes[0], BOTH, None, hops={n: 0 if n == root else 1 for n in nodes})
    change: dict[tuple[str, str, str], str] = {}
    for kind, side in (("added", changes.job_edges[0]), ("removed", changes.job_edges[1])):
        for ns, name, dataset_id, direction in side:
            dataset = datasets.get(dataset_id)
            if dataset is not None:
                edge = (dataset, Node(JOB, ns, name), direction)
                walk.edges.add(edge)
                change[edge_ends(*edge)] = kind
    column_change: dict[tuple[Any, ...], str] = {}
    for kind, columns in (("added", changes.column_edges[0]), ("removed", changes.column_edges[1])):
        for source, source_field, target, target_field, ns, name in columns:
            walk.column_edges.append(
                {"source_dataset_id": source, "source_field": source_field, "target_dataset_id": target,
                 "target_field": target_field, "job_namespace": ns, "job_name": name}
            )  # fmt: skip
            ends = (datasets.get(source), source_field, datasets.get(target), target_field)
            if ends[0] is not None and ends[2] is not None:
                column_change[(ends[0].id, source_field, ends[2].id, target_field)] = kind
    data = graph_dict(store, walk)
    if root is None:
        data["root"] = None
    for edge in data["edges"]:
        edge["change"] = change.get((edge["source"], edge["target"], edge["kind"]))
    for edge in data["column_edges"]:
        key = (edge["source"], edge["source_field"], edge["target"], edge["target_field"])
        edge["change"] = column_change.get(key)
    notes: dict[str, dict[str, str]] = {}
    for dataset_id, _old, _new, added, removed, retyped in changes.schemas:
        if dataset_id in datasets:
            text = (
                [f"+{f}" for f in added]
                + [f"-{f}" for f in removed]
                + [f"~{n} {b}->{a}" for n, b, a in retyped]
            )
            notes[datasets[dataset_id].id] = {
                "schema change": " ".join(text) or "reordered or described anew"
            }
    for ns, name, before, after in changes.outcomes:
        notes[Node(JOB, ns, name).id] = {"outcome change": f"{before[2]} -> {after[2]} (run {after[1]})"}
    for entry in data["nodes"]:
        entry["details"] = {**notes.get(entry["id"], {}), **entry["details"]}
    return data
