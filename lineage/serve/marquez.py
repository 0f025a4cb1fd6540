"""Marquez's read API shapes (its published OpenAPI spec, ``spec/openapi.yml``) from our lineage model.

Pure functions of an :class:`~lineage.serve.index.IndexedStore`. Every field the spec names is present;
what our model holds beyond it is added under names Marquez does not use: ``inferredState`` and
``livenessReason`` (a stuck run is ``LOST`` while Marquez would still say ``RUNNING``), ``aliases`` of a
dataset, ``transformationSubtypes`` of a column edge.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from lineage.query import history, liveness
from lineage.query.errors import LookupError_, UnknownNode
from lineage.query.nodes import ANY, DATASET, DOWNSTREAM, JOB, UPSTREAM, WHOLE_DATASET, Node
from lineage.query.versions import JobVersion, UpstreamRun, run_versions
from lineage.serve.index import IndexedStore
from lineage.serve.scope import event_visible, scope_of, visible_json

# Our reported states -> Marquez's RunState (NEW, RUNNING, COMPLETED, FAILED, ABORTED).
RUN_STATES = {
    "START": "RUNNING",
    "RUNNING": "RUNNING",
    "OTHER": "RUNNING",
    "COMPLETE": "COMPLETED",
    "FAIL": "FAILED",
    "ABORT": "ABORTED",
}
STREAM_SCHEMES = ("kafka://", "pulsar://", "kinesis://")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def marquez_id(node: Node) -> str:
    """``dataset:<namespace>:<name>`` / ``job:<namespace>:<name>``, as Marquez names graph nodes."""
    return f"{'dataset' if node.kind == DATASET else 'job'}:{node.namespace}:{node.name}"


def field_id(node: Node, field: str) -> str:
    return f"datasetField:{node.namespace}:{node.name}:{field}"


def parse_node_id(store: IndexedStore, node_id: str) -> tuple[Node, str | None]:
    """A Marquez node id (``dataset:ns:name``, ``job:ns:name``, ``datasetField:ns:name:field``) -> node,
    field.

    Namespaces hold colons themselves (``kafka://host:9092``), so every split is tried against the index.
    Our own names (``job:ns/name``, a dataset URI under any alias) are accepted too.

    Raises:
        LookupError_: not a node id (400); UnknownNode: no such node (404, with suggestions).
    """
    kind, sep, rest = node_id.strip().partition(":")
    if not sep or kind not in ("dataset", "job", "datasetField") or not rest:
        raise LookupError_(
            f"bad nodeId {node_id!r}: expected dataset:<namespace>:<name>, job:... or datasetField:..."
        )
    positions = [m.start() for m in re.finditer(":", rest)]
    for at in reversed(positions):
        namespace, name = rest[:at], rest[at + 1 :]
        if kind == "job":
            if (namespace, name) in store.job_keys:
                return store.job_node(namespace, name), None
            continue
        if kind == "dataset":
            found = store.dataset_named(namespace, name)
            if found is not None:
                return found, None
            continue
        head, colon, field = name.rpartition(":")
        found = store.dataset_named(namespace, head) if colon else None
        if found is not None:
            return found, field
    if kind == "datasetField":
        head, colon, field = rest.rpartition(":")
        if colon:
            node, _ = store.resolve_field(f"{_ours(head)}.{field}")
            return node, field
    return store.resolve(f"{'job' if kind == 'job' else 'dataset'}:{_ours(rest)}"), None


def _ours(rest: str) -> str:
    """``ns:name`` written our way (``ns/name``; ``scheme://host:port:name`` -> ``scheme://host:port/name``)."""
    namespace, colon, name = rest.rpartition(":")
    if not colon or not namespace or namespace.endswith(":/") or name.startswith("//"):
        return rest
    if re.fullmatch(r"\d+", name):  # a port, not a name
        return rest
    return f"{namespace}/{name}"


def namespace_list(store: IndexedStore) -> dict[str, Any]:
    spans: dict[str, list[Any]] = {}

    def seen(namespace: str, first: Any, last: Any) -> None:
        span = spans.setdefault(namespace, [first, last])
        if first is not None and (span[0] is None or first < span[0]):
            span[0] = first
        if last is not None and (span[1] is None or last > span[1]):
            span[1] = last

    for (namespace, _), job in store.jobs.items():
        seen(namespace, job.get("first_seen"), job.get("last_seen"))
    for row in store.datasets.values():
        seen(row["namespace"], row.get("first_seen"), row.get("last_seen"))
    return {
        "namespaces": [
            {
                "name": name,
                "createdAt": iso(first),
                "updatedAt": iso(last),
                "ownerName": None,
                "description": None,
                "isHidden": False,
            }
            for name, (first, last) in sorted(spans.items())
        ]
    }


def _dataset_ref(store: IndexedStore, dataset_id: str) -> dict[str, str] | None:
    node = store.dataset_nodes.get(dataset_id)
    return None if node is None else {"namespace": node.namespace, "name": node.name}


def _job_io(store: IndexedStore, namespace: str, name: str) -> tuple[list[dict], list[dict]]:
    inputs, outputs = store.job_io.get((namespace, name), ([], []))

    def refs(nodes: list[Node]) -> list[dict]:
        return sorted(
            ({"namespace": n.namespace, "name": n.name} for n in set(nodes)),
            key=lambda r: (r["namespace"], r["name"]),
        )

    return refs(inputs), refs(outputs)


def run_json(
    store: IndexedStore,
    row: dict[str, Any],
    job_version: str | bool | None = True,
    io_rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Marquez's ``Run`` (+ ``inferredState``, ``livenessReason``, ``errorMessage``, parent run).

    Each input and output is a dataset version (``inputDatasetVersions``/``outputDatasetVersions``,
    :func:`io_version`): the version the run wrote, or the one it read. ``jobVersion`` names
    the run's job version (:mod:`lineage.query.versions`; null until the run ended, as Marquez's):
    ``job_version`` gives it when the caller knows it (None: none), True looks it up. ``io_rows`` are the
    run's ``run_io`` rows when the caller read them already (:func:`latest_runs`), else they are read.
    """
    if job_version is True:
        job_version = run_versions(store, [row]).get(row["run_id"])
    if io_rows is None:
        io_rows = store.run_datasets(row["run_id"])
    duration = row.get("duration_seconds")
    inputs: list[dict] = []
    outputs: list[dict] = []
    for io in io_rows:
        ref = _dataset_ref(store, io["dataset_id"])
        if ref is not None:
            version = io_version(store, io)
            entry = {"datasetVersionId": {**ref, "version": version}, "facets": {}}
            (inputs if io["direction"] == "input" else outputs).append(entry)

    def ordered(entries: list[dict]) -> list[dict]:
        return sorted(entries, key=lambda e: tuple(e["datasetVersionId"][k] for k in ("namespace", "name")))

    return {
        "id": row["run_id"],
        "createdAt": iso(row.get("started_at") or row.get("last_event_at")),
        "updatedAt": iso(row.get("last_event_at")),
        "nominalStartTime": iso(row.get("nominal_start_time")),
        "nominalEndTime": iso(row.get("nominal_end_time")),
        "state": RUN_STATES.get(row.get("reported_state") or "", "NEW"),
        "startedAt": iso(row.get("started_at")),
        "endedAt": iso(row.get("ended_at")),
        "durationMs": None if duration is None else int(duration * 1000),
        "args": {},
        "jobVersion": {
            "namespace": row["job_namespace"],
            "name": row["job_name"],
            "version": job_version or None,
        },
        "inputDatasetVersions": ordered(inputs),
        "outputDatasetVersions": ordered(outputs),
        "context": {},
        "facets": {},
        # ours, beyond the spec
        "reportedState": row.get("reported_state"),
        "inferredState": row.get("inferred_state"),
        "livenessReason": row.get("liveness_reason"),
        "errorMessage": row.get("error_message"),
        "parentRunId": row.get("parent_run_id"),
    }


def latest_runs(store: IndexedStore, nodes: Iterable[Node]) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) -> Marquez's ``Run`` of each job's latest run (as of now), for the jobs of
    ``nodes`` that have one: the runs, their job versions and their datasets read once for all of them
    (a lineage graph or a job list holds hundreds of jobs; one lookup per job read the runs table each time).
    """
    wanted: dict[str, tuple[str, str]] = {}
    for node in nodes:
        run_id = store.job_summary.get((node.namespace, node.name), {}).get("last_run_id")
        if run_id:
            wanted[run_id] = (node.namespace, node.name)
    if not wanted:
        return {}
    ex = expressions()
    rows = [liveness.as_of(r) for r in store.rows("runs", row_filter=ex.In("run_id", list(wanted)))]
    versions = run_versions(store, rows)
    io = store.runs_datasets([r["run_id"] for r in rows])
    return {
        wanted[r["run_id"]]: run_json(store, r, versions.get(r["run_id"]), io.get(r["run_id"], []))
        for r in rows
    }


def job_json(
    store: IndexedStore, node: Node, latest_of: dict[tuple[str, str], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Marquez's ``Job`` (+ ``latestRunInferredState``, ``integration``, ``processingType``).

    ``tags`` is always a list (Marquez's web UI reads it unconditionally); ``latestRuns`` is left out
    when the job has no run (the UI's job cards take an empty list for a run to draw) and holds the
    latest run otherwise. ``latest_of`` is :func:`latest_runs` of the jobs a caller answers together.
    """
    key = (node.namespace, node.name)
    job = store.jobs.get(key, {})
    summary = store.job_summary.get(key, {})
    inputs, outputs = _job_io(store, node.namespace, node.name)
    latest = (latest_runs(store, [node]) if latest_of is None else latest_of).get(key)
    current = None if latest is None else latest["jobVersion"]["version"]
    processing = (job.get("processing_type") or "").upper()
    parent = job.get("parent_job_name")
    parent_namespace = job.get("parent_job_namespace") or node.namespace
    answer: dict[str, Any] = {
        "id": {"namespace": node.namespace, "name": node.name},
        "type": "STREAM" if processing == "STREAMING" else "BATCH",
        "name": node.name,
        "simpleName": node.name,
        "createdAt": iso(job.get("first_seen")),
        "updatedAt": iso(job.get("last_seen")),
        "namespace": node.namespace,
        "inputs": inputs,
        "outputs": outputs,
        "location": job.get("source_code_url"),
        "context": {},
        "description": job.get("description"),
        "latestRun": latest,
        "facets": {},
        "currentVersion": current,
        "parentJobName": parent,
        "parentJobUuid": None if parent is None else job_uuid(parent_namespace, parent),
        "tags": tag_names(job.get("tags")),
        # ours
        # The latest run as of now (a deadline may have passed since the build), else the build's word.
        "latestRunInferredState": latest["inferredState"] if latest else summary.get("last_run_state"),
        "integration": job.get("integration"),
        "processingType": job.get("processing_type"),
    }
    if latest is not None:
        answer["latestRuns"] = [latest]
    return answer


# Stable ids for what Marquez keys by UUID and our model keys by name: the same name gives the same id
# in every build and every process.
_IDS = uuid.uuid5(uuid.NAMESPACE_URL, "urn:lineage-lakehouse:read-api")


def job_uuid(namespace: str, name: str) -> str:
    return str(uuid.uuid5(_IDS, f"job\x00{namespace}\x00{name}"))


def dataset_version_id(dataset_id: str, version: int) -> str:
    """The UUID of version ``version`` of a dataset's schema history (0: a dataset with no schema)."""
    return str(uuid.uuid5(_IDS, f"dataset-version\x00{dataset_id}\x00{version}"))


def write_version_id(dataset_id: str, version: str) -> str:
    """The UUID of a dataset's version ``version`` (a write's id: the producer's version, else the run's)."""
    return str(uuid.uuid5(_IDS, f"dataset-write\x00{dataset_id}\x00{version}"))


def tag_names(tags: Iterable[dict] | None) -> list[str]:
    """Our tags (key, value, source) as Marquez's tag names: ``KEY``, or ``KEY=VALUE`` (as ``--tag``)."""
    names = set()
    for tag in tags or ():
        key = str(tag.get("key") or "").strip()
        if key:
            value = tag.get("value")
            names.add(f"{key}={value}" if value not in (None, "") else key)
    return sorted(names)


# -- answers a store works out once (schema history, column edges by target) ------------------------------
_DERIVED: weakref.WeakKeyDictionary[IndexedStore, dict[str, Any]] = weakref.WeakKeyDictionary()
_DERIVED_LOCK = threading.Lock()


def _derived(store: IndexedStore, name: str, build: Callable[[], Any]) -> Any:
    """``build()`` once per store (an index is replaced whole by a newer build, so nothing goes stale)."""
    with _DERIVED_LOCK:
        slot = _DERIVED.setdefault(store, {})
        if name in slot:
            return slot[name]
    value = build()
    with _DERIVED_LOCK:
        return _DERIVED[store].setdefault(name, value)


_HISTORY_COLUMNS = ("dataset_id", "version", "first_seen", "last_seen", "first_run_id")


def _schemas(store: IndexedStore, columns: tuple[str, ...] | None = None, row_filter: Any = None) -> Any:
    """Rows of ``lineage.dataset_schemas``: from the store when it holds the table, else from Iceberg as of
    the store's build (the snapshot its other tables were read at); None on a lake built before it."""
    try:
        return store.arrow("dataset_schemas", columns, row_filter)
    except LookupError_:
        mark = getattr(store, "build", None)
        namespace = store.settings.catalog.lineage_namespace
        try:
            return store.scan_table(
                namespace, "dataset_schemas", columns, row_filter, None if mark is None else mark.committed_at
            )
        except LookupError_:
            return None


def schema_history(store: IndexedStore) -> dict[str, list[dict[str, Any]]]:
    """dataset id -> its versions (``lineage.dataset_schemas`` without the fields), oldest first; read once
    per loaded build. The fields are read only for the dataset whose versions are asked
    (:func:`dataset_versions`)."""

    def load() -> dict[str, list[dict[str, Any]]]:
        table = _schemas(store, _HISTORY_COLUMNS)
        if table is None:
            return {}
        from lineage.query.tables import python_rows

        found: dict[str, list[dict[str, Any]]] = {}
        for row in python_rows(table.select(list(_HISTORY_COLUMNS))):
            found.setdefault(row["dataset_id"], []).append(row)
        for rows in found.values():
            rows.sort(key=lambda r: r["version"])
        return found

    return _derived(store, "schema_history", load)


def version_at(store: IndexedStore, dataset_id: str, at: Any) -> str:
    """The dataset version in effect at ``at``: the newest schema version first seen by then (the first
    one when ``at`` precedes them all, 0 for a dataset without schema history)."""
    rows = schema_history(store).get(dataset_id, [])
    chosen = rows[0]["version"] if rows else 0
    for row in rows:
        if at is not None and row.get("first_seen") is not None and row["first_seen"] <= at:
            chosen = row["version"]
    return dataset_version_id(dataset_id, chosen)


_WRITE_COLUMNS = ("run_id", "dataset_id", "first_seen", "last_seen", "dataset_version")


def write_history(store: IndexedStore) -> dict[str, list[dict[str, Any]]]:
    """dataset id -> its writes (``run_io`` output rows), oldest first; read once per loaded build. Empty
    for a lake whose ``run_io`` predates the version column (its schema history answers instead)."""

    def load() -> dict[str, list[dict[str, Any]]]:
        from lineage.query.tables import python_rows

        table = store.arrow("run_io", row_filter=expressions().EqualTo("direction", "output"))
        if "dataset_version" not in table.column_names:
            return {}
        found: dict[str, list[dict[str, Any]]] = {}
        for row in python_rows(table.select(list(_WRITE_COLUMNS))):
            found.setdefault(row["dataset_id"], []).append(row)
        for rows in found.values():
            rows.sort(key=lambda r: (r["first_seen"] or _EPOCH, r["run_id"]))
        return found

    return _derived(store, "write_history", load)


def io_version(store: IndexedStore, io: dict[str, Any]) -> str:
    """The Marquez id of the dataset version a ``run_io`` row read or wrote, always one that dataset's
    version list holds (:func:`dataset_versions`): for a dataset with writes, the version the run wrote,
    or, for a read, the write behind it (:func:`lineage.query.history.producing_write`; a read naming a
    version no write named, or with no write before it, takes the last write before it, else the first);
    for a dataset never written, the version of its schema history in effect then."""
    dataset_id = io["dataset_id"]
    writes = write_history(store).get(dataset_id)
    if not writes:
        return version_at(store, dataset_id, io.get("first_seen"))
    if io["direction"] == "output":
        return write_version_id(dataset_id, history.version_name(io))
    chosen = history.producing_write(io, writes) or history.producing_write(
        {**io, "dataset_version": None}, writes
    )
    return write_version_id(dataset_id, history.version_name(chosen or writes[0]))


def _edges_into(store: IndexedStore) -> dict[str, list[dict[str, Any]]]:
    """target dataset id -> the column edges into it (field to field only)."""

    def load() -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for edge in store.column_edge_rows:
            if _is_field(edge["source_field"]) and _is_field(edge["target_field"]):
                found.setdefault(edge["target_dataset_id"], []).append(edge)
        return found

    return _derived(store, "edges_into", load)


def _is_field(name: str | None) -> bool:
    """A real column (a dataset-level edge has no field on one side: no node of Marquez's graph)."""
    return bool(name) and name != WHOLE_DATASET


def _kind(edge: dict[str, Any]) -> str:
    return "DIRECT" if edge.get("is_direct") else "INDIRECT"


def dataset_column_lineage(store: IndexedStore, node: Node) -> list[dict[str, Any]] | None:
    """The dataset's ``columnLineage`` as Marquez's UI reads it (None when no field has any)."""
    by_field: dict[str, list[dict[str, Any]]] = {}
    for edge in _edges_into(store).get(node.dataset_id or "", ()):
        by_field.setdefault(edge["target_field"], []).append(edge)
    if not by_field:
        return None
    answer = []
    for field_name, edges in sorted(by_field.items()):
        inputs: dict[tuple[str, str, str], dict[str, Any]] = {}
        for edge in edges:
            source = store.dataset_nodes.get(edge["source_dataset_id"])
            if source is not None:
                key = (source.namespace, source.name, edge["source_field"])
                entry = inputs.setdefault(
                    key,
                    {
                        "namespace": source.namespace,
                        "dataset": source.name,
                        "field": edge["source_field"],
                        "transformationDescription": None,
                        "transformationType": _kind(edge),
                    },
                )
                if _kind(edge) == "DIRECT":
                    entry["transformationType"] = "DIRECT"
        kinds = {entry["transformationType"] for entry in inputs.values()}
        answer.append(
            {
                "name": field_name,
                "inputFields": [inputs[k] for k in sorted(inputs)],
                "transformationDescription": None,
                "transformationType": "DIRECT" if "DIRECT" in kinds else "INDIRECT",
            }
        )
    return answer


def _fields(schema: Iterable[dict] | None, field_tags: Iterable[dict] | None = None) -> list[dict[str, Any]]:
    """Marquez's fields; ``tags`` are the tags the producers declared on each field (its ``field_tags``)."""
    tags_of: dict[str, list[dict]] = {}
    for tag in field_tags or ():
        tags_of.setdefault(str(tag.get("field")), []).append(tag)
    return [
        {
            "name": f["name"],
            "type": f.get("type"),
            "tags": tag_names(tags_of.get(f["name"])),
            "description": f.get("description"),
        }
        for f in (schema or [])
    ]


def dataset_json(store: IndexedStore, node: Node) -> dict[str, Any]:
    """Marquez's ``Dataset`` with its fields (+ ``aliases``: every other name it was reported under)."""
    row = store.datasets.get(node.dataset_id or "", {})
    fields = _fields(row.get("schema_fields"), row.get("field_tags"))
    aliases = sorted(
        (
            {"namespace": a["alias_namespace"], "name": a["alias_name"], "kind": a["alias_kind"]}
            for a in store.aliases_of.get(node.dataset_id or "", [])
            if (a["alias_namespace"], a["alias_name"]) != (node.namespace, node.name)
        ),
        key=lambda a: (a["namespace"], a["name"]),
    )
    return {
        "id": {"namespace": node.namespace, "name": node.name},
        "type": "STREAM" if node.namespace.startswith(STREAM_SCHEMES) else "DB_TABLE",
        "name": node.name,
        "physicalName": node.name,
        "createdAt": iso(row.get("first_seen")),
        "updatedAt": iso(row.get("last_seen")),
        "namespace": node.namespace,
        "sourceName": node.namespace,
        "fields": fields,
        "tags": tag_names(row.get("tags")),
        "lastModifiedAt": None,
        "lastLifecycleState": None,
        "description": None,
        "facets": {},
        "currentVersion": None,
        "deleted": False,
        "columnLineage": dataset_column_lineage(store, node),
        # ours
        "aliases": aliases,
    }


def page(items: list[Any], limit: int, offset: int) -> list[Any]:
    return items[offset : offset + limit]


def paged(key: str, items: list[Any], limit: int, offset: int) -> dict[str, Any]:
    """Marquez's list answer: one page of ``items`` under ``key``, and how many there are in all."""
    return {key: page(items, limit, offset), "totalCount": len(items)}


def start_job(store: IndexedStore, dataset: Node) -> Node | None:
    """The job Marquez's lineage graph starts from for a dataset: the writer seen last (else the reader
    seen last); None for a dataset no job touches."""
    for direction in (UPSTREAM, DOWNSTREAM):
        jobs = store.adjacent_jobs(dataset, direction)
        if jobs:
            return max(jobs, key=lambda j: (_seen(store.jobs.get((j.namespace, j.name), {})), j.id))
    return None


def _seen(job: dict[str, Any]) -> datetime:
    return job.get("last_seen") or datetime(1970, 1, 1, tzinfo=UTC)


def lineage_graph(store: IndexedStore, root: Node, depth: int) -> dict[str, Any]:
    """Marquez's ``LineageGraph``: nodes with their data and in/out edges around ``root``.

    As Marquez counts it, ``depth`` is in job layers from a start job (``root``, or for a dataset the job
    that last wrote it, else the one that last read it): layer 0 is the start job, each next layer every
    job sharing a dataset with the one before (upstream, downstream and siblings alike), and every dataset
    of those jobs is in. That is an undirected walk of ``2 * depth + 1`` hops from the start job; a
    dataset no job touches answers alone. ``hops`` (ours) counts from the start job.
    """
    start = root if root.kind == JOB else start_job(store, root)
    walk = store.traverse(start or root, ANY, 2 * depth + 1 if start is not None else 0)
    in_edges: dict[Node, list[dict]] = {}
    out_edges: dict[Node, list[dict]] = {}
    for dataset, job, kind in walk.edges:
        origin, destination = (dataset, job) if kind == "input" else (job, dataset)
        edge = {"origin": marquez_id(origin), "destination": marquez_id(destination)}
        out_edges.setdefault(origin, []).append(edge)
        in_edges.setdefault(destination, []).append(edge)
    graph = []
    latest = latest_runs(store, (n for n in walk.hops if n.kind == JOB))
    for node, hops in sorted(walk.hops.items(), key=lambda item: marquez_id(item[0])):  # by id, as Marquez
        data = dataset_json(store, node) if node.kind == DATASET else job_json(store, node, latest)
        graph.append(
            {
                "id": marquez_id(node),
                "type": "DATASET" if node.kind == DATASET else "JOB",
                "data": data,
                "inEdges": sorted(in_edges.get(node, []), key=lambda e: e["origin"]),
                "outEdges": sorted(out_edges.get(node, []), key=lambda e: e["destination"]),
                "hops": hops,
            }
        )
    return {"graph": graph}


def job_version_json(store: IndexedStore, version: JobVersion) -> dict[str, Any]:
    """Marquez's ``JobVersion``: the datasets its runs read and wrote, and its latest run."""
    latest = version.runs[0] if version.runs else None
    return {
        "id": {"namespace": version.namespace, "name": version.name, "version": version.version},
        "name": version.name,
        "version": version.version,
        "createdAt": iso(version.created_at),
        "namespace": version.namespace,
        "inputs": [{"namespace": n.namespace, "name": n.name} for n in version.inputs],
        "outputs": [{"namespace": n.namespace, "name": n.name} for n in version.outputs],
        "location": version.location,
        "context": {},
        "latestRun": None if latest is None else run_json(store, latest, version.version),
        "facets": {},
        # ours
        "runCount": len(version.runs),
    }


def upstream_run_json(store: IndexedStore, runs: list[UpstreamRun]) -> dict[str, Any]:
    """Marquez's ``UpstreamRunLineage``: the run asked about first, then its upstream runs by distance."""
    versions = run_versions(store, [r.row for r in runs])
    out = []
    for entry in runs:
        row = entry.row
        out.append(
            {
                "job": {
                    "namespace": row["job_namespace"],
                    "name": row["job_name"],
                    "version": versions.get(row["run_id"]),
                },
                "run": {
                    "id": row["run_id"],
                    "start": iso(row.get("started_at")),
                    "end": iso(row.get("ended_at")),
                    "status": RUN_STATES.get(row.get("reported_state") or "", "NEW"),
                },
                "inputs": [
                    {
                        "namespace": node.namespace,
                        "name": node.name,
                        "version": _read_version(store, node.dataset_id or "", read_at, producer),
                        "producedByRunId": producer,
                    }
                    for node, read_at, producer in entry.inputs
                ],
                # ours
                "depth": entry.depth,
            }
        )
    return {"runs": out}


def _read_version(store: IndexedStore, dataset_id: str, read_at: Any, producer: str | None) -> str:
    """The version of a read of run lineage: the producer's write of the dataset, as :func:`io_version`
    names it (a read without a known producer: the version in effect then)."""
    writes = write_history(store).get(dataset_id)
    if not writes:
        return version_at(store, dataset_id, read_at)
    mine = [w for w in writes if w["run_id"] == producer]
    if mine:
        return write_version_id(dataset_id, history.version_name(mine[-1]))
    return io_version(
        store, {"dataset_id": dataset_id, "direction": "input", "run_id": "", "first_seen": read_at}
    )


def split_version(node_id: str) -> tuple[str, str | None]:
    """``<node id>#<version>`` -> (node id, version); a node id without a version suffix is kept whole."""
    head, sep, version = node_id.rpartition("#")
    if sep and head and re.fullmatch(r"[0-9a-fA-F-]{36}", version.strip()):
        return head, version.strip().lower()
    return node_id, None


def version_time(store: IndexedStore, node: Node, version: str) -> datetime | None:
    """When version ``version`` of a dataset was last seen: a walk as of then shows the lineage of that
    version. None for a version still current with no time known.

    Raises:
        LookupError_: a job (the model keeps no job versions); UnknownNode: no such version.
    """
    if node.kind != DATASET:
        raise LookupError_(f"nodeId: job versions are not kept, ask {marquez_id(node)} without #{version}")
    if write_history(store).get(node.dataset_id or ""):
        for found in history.dataset_versions(store, node):
            if write_version_id(node.dataset_id or "", found.version) == version:
                return found.written_at
        raise UnknownNode(f"unknown version {version!r} of dataset {node.label}")
    for entry in dataset_versions(store, node):
        if entry["version"] == version:
            last = entry.get("lastSeenAt") or entry.get("createdAt")
            return None if last is None else datetime.fromisoformat(last.replace("Z", "+00:00"))
    raise UnknownNode(f"unknown version {version!r} of dataset {node.label}")


def column_lineage(
    store: IndexedStore,
    root: Node,
    field: str | None,
    depth: int,
    with_downstream: bool,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Marquez's column-lineage graph: one ``DATASET_FIELD`` node per field, ``inputFields`` per node.

    ``depth`` counts column edges (each crosses one job), as Marquez's column lineage does. Edges follow
    Marquez's convention: every edge of a node starts at the node itself (``origin``); ``inEdges`` lead to
    the fields it is computed from, ``outEdges`` to the fields computed from it. Dataset-level edges (a
    filter or join key that affects every row, no one field) make no node: Marquez's graph has none.
    """
    direction = "both" if with_downstream else "upstream"
    walk = store.traverse(root, direction, 2 * depth, as_of=as_of, columns=True, field_name=field)
    fields: dict[tuple[str, str], dict[str, Any]] = {}
    upstream: dict[tuple[str, str], set[str]] = {}
    downstream: dict[tuple[str, str], set[str]] = {}

    def entry(ds: Node, name: str) -> dict[str, Any]:
        key = (ds.dataset_id or "", name)
        if key not in fields:
            schema = store.datasets.get(ds.dataset_id or "", {}).get("schema_fields") or []
            types = {f["name"]: f.get("type") for f in schema}
            fields[key] = {
                "id": field_id(ds, name),
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": ds.namespace,
                    "dataset": ds.name,
                    "datasetVersion": None,
                    "field": name,
                    "fieldType": types.get(name),
                    "transformationDescription": None,
                    "transformationType": None,
                    "inputFields": [],
                },
            }
        return fields[key]

    for edge in walk.column_edges:
        if not (_is_field(edge["source_field"]) and _is_field(edge["target_field"])):
            continue
        source = store.dataset_nodes.get(edge["source_dataset_id"])
        target = store.dataset_nodes.get(edge["target_dataset_id"])
        if source is None or target is None:
            continue
        src, dst = entry(source, edge["source_field"]), entry(target, edge["target_field"])
        kind = _kind(edge)
        dst["data"]["inputFields"].append(
            {
                "namespace": source.namespace,
                "dataset": source.name,
                "datasetVersion": None,
                "field": edge["source_field"],
                "transformationDescription": None,
                "transformationType": kind,
                # ours
                "transformationSubtypes": list(edge.get("subtypes") or []),
                "job": {"namespace": edge["job_namespace"], "name": edge["job_name"]},
            }
        )
        if dst["data"]["transformationType"] is None or kind == "DIRECT":
            dst["data"]["transformationType"] = kind
        upstream.setdefault((target.dataset_id or "", edge["target_field"]), set()).add(src["id"])
        downstream.setdefault((source.dataset_id or "", edge["source_field"]), set()).add(dst["id"])
    graph = []
    for key, node in sorted(fields.items(), key=lambda item: item[1]["id"]):
        node["inEdges"] = [{"origin": node["id"], "destination": d} for d in sorted(upstream.get(key, ()))]
        node["outEdges"] = [{"origin": node["id"], "destination": d} for d in sorted(downstream.get(key, ()))]
        node["data"]["inputFields"].sort(key=lambda f: (f["namespace"], f["dataset"], f["field"]))
        graph.append(node)
    return {"graph": graph}


# -- search -------------------------------------------------------------------------------------------------
# Marquez's search takes SQL LIKE wildcards. They are matched here without a regular expression (a regex
# ``.*.*.*...`` backtracks exponentially on a name it does not match: issue 37): ``%`` cut the pattern into
# fixed-length segments, each found after the end of the previous one, left to right, in time linear in the
# name's length whatever the pattern.
MAX_SEARCH_CHARS = 1000  # a longer ``q`` is refused (400 BAD_PARAMETER)


@functools.lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """One character's case-insensitive form, always one character (``_`` must stay one character)."""
    for folded in (char.casefold(), char.lower()):
        if len(folded) == 1:
            return folded
    return char


def fold(text: str) -> str:
    """``text`` case-folded character by character: the same length, each character its own folded form."""
    if text.isascii():
        return text.lower()
    return "".join(map(_fold_char, text))


class _Segment:
    """A run of a pattern between two ``%``: literal characters and ``_`` (any one character)."""

    __slots__ = ("anchor", "anchor_at", "any", "checks", "last", "length", "literal", "masks")

    def __init__(self, part: str) -> None:
        self.length = len(part)
        self.literal = part if "_" not in part else None
        # The longest literal run is looked for with str.find; the other runs are checked around it.
        runs, at = [], 0
        for run in part.split("_"):
            if run:
                runs.append((at, run))
            at += len(run) + 1
        self.anchor_at, self.anchor = max(runs, key=lambda r: len(r[1]), default=(0, ""))
        self.checks = [r for r in runs if r[0] != self.anchor_at]
        # Shift-And (Baeza-Yates and Gonnet), when the text repeats the anchor too often: bit i of the
        # state is set while the last i + 1 characters read match the segment's first i + 1; a ``_``
        # position's bit is in every character's mask.
        self.any = sum(1 << i for i, char in enumerate(part) if char == "_")
        masks: dict[str, int] = {}
        for i, char in enumerate(part):
            if char != "_":
                masks[char] = masks.get(char, self.any) | (1 << i)
        self.masks = masks
        self.last = 1 << (len(part) - 1)

    def find(self, text: str, start: int, steps: list[int]) -> int:
        """The end of the leftmost occurrence in ``text[start:]``, or -1.

        ``steps[0]`` counts the Python-level steps (str.find calls, runs checked, characters scanned one by
        one): at most ``2 * (end - start) + 2 * (1 + number of runs)``, ``end`` where it stopped, whatever
        the text. Candidates at the anchor are checked while they cost no more than the distance they
        advanced; past that (a text repeating the anchor) the rest is scanned character by character.
        """
        size = len(text)
        if self.literal is not None:  # str.find: linear, in C
            steps[0] += 1
            at = text.find(self.literal, start)
            return -1 if at < 0 else at + self.length
        origin, spent, one = start, 0, 1 + len(self.checks)
        while spent <= start - origin + one:
            at = text.find(self.anchor, start + self.anchor_at)
            spent += 1
            if at < 0 or at - self.anchor_at + self.length > size:
                steps[0] += spent
                return -1
            begin = at - self.anchor_at
            for offset, run in self.checks:
                spent += 1
                if not text.startswith(run, begin + offset):
                    break
            else:
                steps[0] += spent
                return begin + self.length
            start = begin + 1
        steps[0] += spent
        return self._scan(text, start, steps)

    def _scan(self, text: str, start: int, steps: list[int]) -> int:
        """Shift-And from ``start``: one step per character, whatever the text."""
        state, masks, wildcard, last = 0, self.masks, self.any, self.last
        for end in range(start, len(text)):
            state = ((state << 1) | 1) & masks.get(text[end], wildcard)
            if state & last:
                steps[0] += end + 1 - start
                return end + 1
        steps[0] += len(text) - start
        return -1


class Like:
    """A compiled LIKE pattern, matched as Marquez's search does: case-insensitive, anywhere in the text
    (a substring), ``%`` any run of characters (none too), ``_`` exactly one character.

    Segments between ``%`` have fixed lengths, so the leftmost occurrence of each, after the end of the
    previous one, is as good as any: one left-to-right pass, no backtracking. :attr:`steps` counts the
    Python-level steps of every :meth:`search` so far: at most twice the text's length plus twice the
    pattern's, per search (:meth:`_Segment.find`).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        # A segment of ``_`` alone asks for that many characters, anywhere: it moves the next segment's
        # start (``%_%_%_%x`` is ``x`` at or after the third character), with no search of its own.
        self.segments: list[tuple[int, _Segment]] = []
        skip = 0
        for part in fold(pattern).split("%"):
            if part.count("_") == len(part):
                skip += len(part)
            else:
                self.segments.append((skip, _Segment(part)))
                skip = 0
        self.tail = skip  # characters still needed after the last segment
        self._steps = [0]

    @property
    def steps(self) -> int:
        return self._steps[0]

    def search(self, text: str) -> bool:
        folded = fold(text)
        at = 0
        for skip, segment in self.segments:
            at = segment.find(folded, at + skip, self._steps)
            if at < 0:
                return False
        return at + self.tail <= len(folded)


def like(pattern: str) -> Like:
    """Marquez's search pattern: case-insensitive substring, ``%`` any run of characters, ``_`` one."""
    return Like(pattern)


# Search sorts, case-insensitive: Marquez's web UI sends UPDATE_AT.
SEARCH_SORTS = {"name": "name", "updated_at": "updated_at", "update_at": "updated_at"}


def search(
    store: IndexedStore,
    q: str,
    what: str | None,
    sort: str,
    limit: int,
    *,
    namespace: str | None = None,
    before: datetime | None = None,
    after: datetime | None = None,
) -> dict[str, Any]:
    """Marquez's ``SearchResultList`` over job and dataset names (canonical and aliases).

    ``namespace`` keeps the results of that namespace; ``after`` those updated at or after it, ``before``
    those updated before it (a result with no update time is left out by either). ``totalCount`` counts
    every match, ``results`` holds the first ``limit`` (0: none).
    """
    pattern = like(q)
    results: dict[str, dict[str, Any]] = {}

    def wanted(node_namespace: str, updated: Any) -> bool:
        if namespace is not None and node_namespace != namespace:
            return False
        if before is not None and (updated is None or updated >= before):
            return False
        return after is None or (updated is not None and updated >= after)

    if what in (None, "job"):
        for (job_namespace, name), job in store.jobs.items():
            if wanted(job_namespace, job.get("last_seen")) and pattern.search(f"{job_namespace}/{name}"):
                node = store.job_node(job_namespace, name)
                results[marquez_id(node)] = _hit("JOB", node, job.get("last_seen"))
    if what in (None, "dataset"):
        for (alias_namespace, name), node in store.by_marquez_name.items():
            if node.kind != DATASET:
                continue
            row = store.datasets.get(node.dataset_id or "", {})
            # the namespace filter applies to the dataset as answered (its canonical namespace)
            if wanted(node.namespace, row.get("last_seen")) and pattern.search(f"{alias_namespace}/{name}"):
                results[marquez_id(node)] = _hit("DATASET", node, row.get("last_seen"))
    ordered = sorted(results.values(), key=lambda r: r["name"])
    if SEARCH_SORTS.get(sort, sort) == "updated_at":
        ordered.sort(key=lambda r: r["updatedAt"] or "", reverse=True)
    return {"totalCount": len(ordered), "results": ordered[:limit]}


def _hit(kind: str, node: Node, updated: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "name": node.name,
        "updatedAt": iso(updated),
        "namespace": node.namespace,
        "nodeId": marquez_id(node),
    }


# -- the rest of Marquez's reads: sources, tags, dataset versions, run facets, events, statistics ----------
def _scheme(namespace: str) -> str:
    scheme, sep, _ = namespace.partition("://")
    return scheme.upper() if sep and scheme else "UNKNOWN"


def sources(store: IndexedStore) -> list[dict[str, Any]]:
    """Marquez's ``Source`` per dataset namespace (our datasets' ``sourceName`` is their namespace)."""
    spans: dict[str, list[Any]] = {}
    for row in store.datasets.values():
        span = spans.setdefault(row["namespace"], [row.get("first_seen"), row.get("last_seen")])
        first, last = row.get("first_seen"), row.get("last_seen")
        if first is not None and (span[0] is None or first < span[0]):
            span[0] = first
        if last is not None and (span[1] is None or last > span[1]):
            span[1] = last
    return [
        {
            "type": _scheme(name),
            "name": name,
            "createdAt": iso(first),
            "updatedAt": iso(last),
            "connectionUrl": name,
            "description": None,
        }
        for name, (first, last) in sorted(spans.items())
    ]


def tags(store: IndexedStore) -> list[dict[str, Any]]:
    """Every tag name a job, dataset or dataset field carries (:func:`tag_names`), as Marquez's ``Tag``."""
    names: set[str] = set()
    for job in store.jobs.values():
        names.update(tag_names(job.get("tags")))
    for row in store.datasets.values():
        names.update(tag_names(row.get("tags")))
        names.update(tag_names(row.get("field_tags")))
    return [{"name": name, "description": None} for name in sorted(names)]


def dataset_versions(store: IndexedStore, node: Node) -> list[dict[str, Any]]:
    """Marquez's ``DatasetVersion`` per version of the dataset, newest first: one per write
    (:func:`lineage.query.history.dataset_versions`), each created by the run that wrote it.

    A dataset no run wrote has the versions of its schema history instead; one never reported with a
    schema has one version (0) with no fields, created when first seen.
    """
    if write_history(store).get(node.dataset_id or ""):
        return _write_versions(store, node)
    row = store.datasets.get(node.dataset_id or "", {})
    history = schema_history(store).get(node.dataset_id or "") or [
        {"version": 0, "first_seen": row.get("first_seen"), "first_run_id": None}
    ]
    fields_of: dict[Any, Any] = {}
    if history[0]["version"] != 0:
        ex = expressions()
        table = _schemas(
            store, ("dataset_id", "version", "schema_fields"), ex.EqualTo("dataset_id", node.dataset_id)
        )
        if table is not None:
            versions, schemas = table.column("version").to_pylist(), table.column("schema_fields").to_pylist()
            fields_of = dict(zip(versions, schemas, strict=True))
    answer = []
    for entry in reversed(history):
        version = dataset_version_id(node.dataset_id or "", entry["version"])
        created_by = None
        if entry.get("first_run_id"):
            try:
                created_by = run_json(store, store.run(entry["first_run_id"]))
            except LookupError_:
                created_by = None
        answer.append(
            {
                "id": {"namespace": node.namespace, "name": node.name, "version": version},
                "type": "STREAM" if node.namespace.startswith(STREAM_SCHEMES) else "DB_TABLE",
                "name": node.name,
                "physicalName": node.name,
                "createdAt": iso(entry.get("first_seen")),
                "version": version,
                "namespace": node.namespace,
                "sourceName": node.namespace,
                "fields": _fields(fields_of.get(entry["version"])),
                "tags": tag_names(row.get("tags")),
                "lifecycleState": None,
                "description": None,
                "createdByRun": created_by,
                "facets": {},
                # ours
                "schemaVersion": entry["version"],
                "lastSeenAt": iso(entry.get("last_seen")),
            }
        )
    return answer


def _write_versions(
    store: IndexedStore, node: Node, keep: Callable[[list[Any]], list[Any]] = lambda found: found
) -> list[dict[str, Any]]:
    """The write versions of a dataset as Marquez's ``DatasetVersion``, newest first; only those ``keep``
    picks out of :func:`lineage.query.history.dataset_versions` are made (each holds its run's answer)."""
    dataset_id = node.dataset_id or ""
    row = store.datasets.get(dataset_id, {})
    versions = keep(history.dataset_versions(store, node))
    ex = expressions()
    columns = ("schema_hash", "first_seen", "schema_fields")
    table = _schemas(store, ("dataset_id", *columns), ex.EqualTo("dataset_id", dataset_id))
    from lineage.query.tables import python_rows

    schemas = [] if table is None else python_rows(table.select(list(columns)))
    schemas.sort(key=lambda r: r["first_seen"] or _EPOCH)
    fields_of = {r["schema_hash"]: r["schema_fields"] for r in schemas}

    def fields(found: history.DatasetVersion) -> Any:
        """The schema the write reported, else the dataset's schema in effect then."""
        if found.schema_hash in fields_of:
            return fields_of[found.schema_hash]
        at = found.written_at or _EPOCH
        earlier = [r["schema_fields"] for r in schemas if (r["first_seen"] or _EPOCH) <= at]
        return earlier[-1] if earlier else None

    wanted = sorted({v.run_id for v in versions})
    runs = {r["run_id"]: liveness.as_of(r) for r in store.rows("runs", row_filter=ex.In("run_id", wanted))}
    answer = []
    for found in versions:
        version = write_version_id(dataset_id, found.version)
        run = runs.get(found.run_id)
        answer.append(
            {
                "id": {"namespace": node.namespace, "name": node.name, "version": version},
                "type": "STREAM" if node.namespace.startswith(STREAM_SCHEMES) else "DB_TABLE",
                "name": node.name,
                "physicalName": node.name,
                "createdAt": iso(found.written_at),
                "version": version,
                "namespace": node.namespace,
                "sourceName": node.namespace,
                "fields": _fields(fields(found)),
                "tags": tag_names(row.get("tags")),
                "lifecycleState": ",".join(found.lifecycle_states) or None,
                "description": None,
                "createdByRun": None if run is None else run_json(store, run),
                "facets": {},
                # ours
                "datasetVersion": found.version,
                "datasetVersionSource": found.source,
                "schemaVersion": found.schema_version,
                "rowCount": found.row_count,
                "lastSeenAt": iso(found.written_at),
            }
        )
    return answer


def versions_page(store: IndexedStore, node: Node, limit: int, offset: int) -> dict[str, Any]:
    """Marquez's ``DatasetVersions``: one page of :func:`dataset_versions` (only that page's are made)."""
    if not write_history(store).get(node.dataset_id or ""):
        return paged("versions", dataset_versions(store, node), limit, offset)
    total: list[int] = []  # every version is found once: counted here, only the page is made

    def keep(found: list[Any]) -> list[Any]:
        total.append(len(found))
        return page(found, limit, offset)

    versions = _write_versions(store, node, keep)
    return {"versions": versions, "totalCount": total[0]}


def one_version(store: IndexedStore, node: Node, version: str) -> dict[str, Any]:
    """One of :func:`dataset_versions` by its UUID.

    Raises:
        UnknownNode: the dataset has no such version.
    """
    dataset_id = node.dataset_id or ""
    if write_history(store).get(dataset_id):

        def keep(found: list[Any]) -> list[Any]:
            return [v for v in found if write_version_id(dataset_id, v.version) == version]

        entries = _write_versions(store, node, keep)
    else:
        entries = [e for e in dataset_versions(store, node) if e["version"] == version]
    if not entries:
        raise UnknownNode(f"unknown version {version!r} of dataset {node.label}")
    return entries[0]


def expressions() -> Any:
    """pyiceberg's row filter expressions (typed loosely: their stubs are pydantic)."""
    import pyiceberg.expressions

    return pyiceberg.expressions


def _raw(store: IndexedStore, columns: tuple[str, ...], row_filter: Any) -> Any:
    """Rows of ``raw.events`` (the events as landed, secrets redacted), read from Iceberg."""
    return store.scan_table(store.settings.catalog.raw_namespace, "events", columns, row_filter)


def run_facets(store: IndexedStore, run_id: str, kind: str) -> dict[str, Any]:
    """Marquez's ``FacetsResult``: the run's (``kind`` run) or its job's (``job``) facets, merged over
    its events in event time order (a later event's facet of a name replaces an earlier one's)."""
    row = store.run(run_id)
    ex = expressions()
    ids = sorted({row["run_id"], row["run_id"].lower(), row["run_id"].upper()})
    table = _raw(store, ("event_time", "kafka_partition", "kafka_offset", "event_json"), ex.In("run_id", ids))
    facets: dict[str, Any] = {}
    events = sorted(
        table.to_pylist(), key=lambda r: (r["event_time"], r["kafka_partition"] or 0, r["kafka_offset"] or 0)
    )
    for event in events:
        try:
            body = json.loads(event["event_json"])
        except (TypeError, ValueError):
            continue
        found = (body.get(kind) or {}).get("facets") if isinstance(body, dict) else None
        if isinstance(found, dict):
            facets.update(found)
    # a scoped key: no object naming a namespace out of its scope (a parent job, a symlink ...)
    return {"runId": row["run_id"], "facets": visible_json(store, facets)}


def lineage_events(
    store: IndexedStore,
    *,
    before: datetime | None,
    after: datetime | None,
    limit: int,
    offset: int,
    descending: bool,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Marquez's ``LineageEventList`` from ``raw.events``: the events with ``after`` <= event time <=
    ``before``, in event time order (newest first unless ascending), ``totalCount`` all of them.

    Only the cheap columns of the range are read to order and count; the events' JSON only for the page.
    A scoped key is listed the events of its jobs (and of its datasets, for dataset events), each without
    the objects naming a namespace out of its scope, hidden names in its strings masked
    (:func:`lineage.serve.scope.visible_json`).
    """
    scope = scope_of(store)
    ex = expressions()
    window: Any = ex.AlwaysTrue()
    if after is not None:
        window = ex.And(window, ex.GreaterThanOrEqual("event_time", after.isoformat()))
    if before is not None:
        window = ex.And(window, ex.LessThanOrEqual("event_time", before.isoformat()))
    if namespace is not None:  # a job's events, or a dataset event's, of that namespace
        same = ex.Or(ex.EqualTo("job_namespace", namespace), ex.EqualTo("dataset_namespace", namespace))
        window = ex.And(window, same)
    keys = ("event_time", "kafka_topic", "kafka_partition", "kafka_offset")
    table = _raw(store, (*keys, "job_namespace", "dataset_namespace"), window)
    visible = [
        event_visible(scope, job, dataset)
        for job, dataset in zip(
            table.column("job_namespace").to_pylist(),
            table.column("dataset_namespace").to_pylist(),
            strict=True,
        )
    ]
    rows = sorted(
        (
            row
            for row, shown in zip(
                zip(*(table.column(c).to_pylist() for c in keys), strict=True), visible, strict=True
            )
            if shown
        ),
        key=lambda r: (r[0], r[1] or "", r[2] or 0, r[3] or 0),
        reverse=descending,
    )
    chosen = rows[offset : offset + limit]
    events: list[Any] = []
    if chosen:
        wanted = {(r[1], r[2], r[3]) for r in chosen}
        times = [r[0] for r in chosen]
        page_window = ex.And(
            ex.GreaterThanOrEqual("event_time", min(times).isoformat()),
            ex.LessThanOrEqual("event_time", max(times).isoformat()),
        )
        partitions = {r[2] for r in chosen}
        if len(partitions) == 1:
            page_window = ex.And(page_window, ex.EqualTo("kafka_partition", next(iter(partitions))))
        page_rows = _raw(store, (*keys, "event_json"), page_window).to_pylist()
        bodies = {
            (r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]): r["event_json"]
            for r in page_rows
            if (r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]) in wanted
        }
        for r in chosen:
            text = bodies.get((r[1], r[2], r[3]))
            try:
                events.append(visible_json(store, json.loads(text)) if text is not None else None)
            except ValueError:
                events.append(None)
    return {"events": [e for e in events if e is not None], "totalCount": len(rows)}


PERIODS = ("DAY", "WEEK")


def intervals(period: str, zone: tzinfo, now: datetime | None = None) -> list[tuple[datetime, datetime]]:
    """The buckets of a statistics answer: the last 24 hours by the hour (``DAY``, the current hour
    last) or the last 7 days by the day in ``zone`` (``WEEK``, today last)."""
    now = (now or datetime.now(UTC)).astimezone(zone)
    if period == "DAY":
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        starts = [end - timedelta(hours=24 - i) for i in range(24)]
        return [(s.astimezone(UTC), (s + timedelta(hours=1)).astimezone(UTC)) for s in starts]
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [(today - timedelta(days=6 - i)).date() for i in range(7)]
    buckets = []
    for day in days:
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        following = day + timedelta(days=1)
        end = datetime(following.year, following.month, following.day, tzinfo=zone)
        buckets.append((start.astimezone(UTC), end.astimezone(UTC)))
    return buckets


def event_stats(store: IndexedStore, buckets: list[tuple[datetime, datetime]]) -> list[dict[str, Any]]:
    """Per bucket, how many run events of each terminal or starting type ``raw.events`` holds by event
    time (Marquez's lineage-event metric: ``start``, ``complete``, ``fail``, ``abort``)."""
    ex = expressions()
    first, last = buckets[0][0], buckets[-1][1]
    window = ex.And(
        ex.GreaterThanOrEqual("event_time", first.isoformat()), ex.LessThan("event_time", last.isoformat())
    )
    table = _raw(store, ("event_time", "event_type", "job_namespace", "dataset_namespace"), window)
    counts = [dict.fromkeys(("START", "COMPLETE", "FAIL", "ABORT"), 0) for _ in buckets]
    scope = scope_of(store)
    columns = ("event_time", "event_type", "job_namespace", "dataset_namespace")
    for at, kind, job, dataset in zip(*(table.column(c).to_pylist() for c in columns), strict=True):
        if not event_visible(scope, job, dataset):
            continue
        for i, (start, end) in enumerate(buckets):
            if start <= at < end and kind in counts[i]:
                counts[i][kind] += 1
                break
    return [
        {
            "startInterval": iso(start),
            "endInterval": iso(end),
            "start": c["START"],
            "complete": c["COMPLETE"],
            "fail": c["FAIL"],
            "abort": c["ABORT"],
        }
        for (start, end), c in zip(buckets, counts, strict=True)
    ]


def count_stats(firsts: Iterable[Any], buckets: list[tuple[datetime, datetime]]) -> list[dict[str, Any]]:
    """Per bucket, how many of the things first seen at ``firsts`` existed by its end (cumulative)."""
    seen = sorted(f for f in firsts if f is not None)
    return [
        {"startInterval": iso(start), "endInterval": iso(end), "count": bisect.bisect_left(seen, end)}
        for start, end in buckets
    ]


def first_seen_of(store: IndexedStore, what: str) -> list[Any]:
    """When each job, dataset or source (dataset namespace) was first seen."""
    if what == "jobs":
        return [job.get("first_seen") for job in store.jobs.values()]
    if what == "datasets":
        return [row.get("first_seen") for row in store.datasets.values()]
    firsts: dict[str, Any] = {}
    for row in store.datasets.values():
        at = row.get("first_seen")
        if at is not None and (row["namespace"] not in firsts or at < firsts[row["namespace"]]):
            firsts[row["namespace"]] = at
    return list(firsts.values())
