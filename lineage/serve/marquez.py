"""Marquez's read API shapes (its published OpenAPI spec, ``spec/openapi.yml``) from our lineage model.

Pure functions of an :class:`~lineage.serve.index.IndexedStore`. Every field the spec names is present;
what our model holds beyond it is added under names Marquez does not use: ``inferredState`` and
``livenessReason`` (a stuck run is ``LOST`` while Marquez would still say ``RUNNING``), ``aliases`` of a
dataset, ``transformationSubtypes`` of a column edge.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from typing import Any

from lineage.cli.store import DATASET, WHOLE_DATASET, LookupError_, Node, UnknownNode
from lineage.serve.index import IndexedStore

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


def run_json(store: IndexedStore, row: dict[str, Any]) -> dict[str, Any]:
    """Marquez's ``Run`` (+ ``inferredState``, ``livenessReason``, ``errorMessage``, parent run)."""
    duration = row.get("duration_seconds")
    inputs: list[dict] = []
    outputs: list[dict] = []
    for io in store.run_datasets(row["run_id"]):
        ref = _dataset_ref(store, io["dataset_id"])
        if ref is not None:
            (inputs if io["direction"] == "input" else outputs).append({**ref, "version": None})
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
        "jobVersion": {"namespace": row["job_namespace"], "name": row["job_name"], "version": None},
        "inputVersions": sorted(inputs, key=lambda r: (r["namespace"], r["name"])),
        "outputVersions": sorted(outputs, key=lambda r: (r["namespace"], r["name"])),
        "context": {},
        "facets": {},
        # ours, beyond the spec
        "reportedState": row.get("reported_state"),
        "inferredState": row.get("inferred_state"),
        "livenessReason": row.get("liveness_reason"),
        "errorMessage": row.get("error_message"),
        "parentRunId": row.get("parent_run_id"),
    }


def job_json(store: IndexedStore, node: Node) -> dict[str, Any]:
    """Marquez's ``Job`` (+ ``latestRunInferredState``, ``parentJob``)."""
    job = store.jobs.get((node.namespace, node.name), {})
    summary = store.job_summary.get((node.namespace, node.name), {})
    inputs, outputs = _job_io(store, node.namespace, node.name)
    latest = None
    if summary.get("last_run_id"):
        try:
            latest = run_json(store, store.run(summary["last_run_id"]))
        except UnknownNode:
            latest = None
    processing = (job.get("processing_type") or "").upper()
    parent = job.get("parent_job_name")
    return {
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
        "currentVersion": None,
        "parentJobName": parent,
        # ours
        "latestRunInferredState": summary.get("last_run_state"),
        "integration": job.get("integration"),
        "processingType": job.get("processing_type"),
    }


def dataset_json(store: IndexedStore, node: Node) -> dict[str, Any]:
    """Marquez's ``Dataset`` with its fields (+ ``aliases``: every other name it was reported under)."""
    row = store.datasets.get(node.dataset_id or "", {})
    fields = [
        {"name": f["name"], "type": f.get("type"), "tags": [], "description": f.get("description")}
        for f in (row.get("schema_fields") or [])
    ]
    aliases = sorted(
        (
            {"namespace": a["alias_namespace"], "name": a["alias_name"], "kind": a["alias_kind"]}
            for a in store.aliases
            if a["dataset_id"] == node.dataset_id
            and (a["alias_namespace"], a["alias_name"]) != (node.namespace, node.name)
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
        "tags": [],
        "lastModifiedAt": None,
        "lastLifecycleState": None,
        "description": None,
        "facets": {},
        "currentVersion": None,
        "deleted": False,
        # ours
        "aliases": aliases,
    }


def page(items: list[Any], limit: int, offset: int) -> list[Any]:
    return items[offset : offset + limit]


def lineage_graph(store: IndexedStore, root: Node, depth: int) -> dict[str, Any]:
    """Marquez's ``LineageGraph``: nodes with their data and in/out edges, both directions from ``root``."""
    walk = store.traverse(root, "both", depth)
    in_edges: dict[Node, list[dict]] = {}
    out_edges: dict[Node, list[dict]] = {}
    for dataset, job, kind in walk.edges:
        origin, destination = (dataset, job) if kind == "input" else (job, dataset)
        edge = {"origin": marquez_id(origin), "destination": marquez_id(destination)}
        out_edges.setdefault(origin, []).append(edge)
        in_edges.setdefault(destination, []).append(edge)
    graph = []
    for node, hops in sorted(walk.hops.items(), key=lambda item: (item[1], marquez_id(item[0]))):
        data = dataset_json(store, node) if node.kind == DATASET else job_json(store, node)
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


def column_lineage(
    store: IndexedStore, root: Node, field: str | None, depth: int, with_downstream: bool
) -> dict[str, Any]:
    """Marquez's column-lineage graph: one ``DATASET_FIELD`` node per field, ``inputFields`` per node.

    ``depth`` counts column edges (each crosses one job), as Marquez's column lineage does.
    """
    direction = "both" if with_downstream else "upstream"
    walk = store.traverse(root, direction, 2 * depth, columns=True, field_name=field)
    fields: dict[tuple[str, str], dict[str, Any]] = {}
    in_edges: dict[tuple[str, str], list[dict]] = {}
    out_edges: dict[tuple[str, str], list[dict]] = {}

    def node_of(dataset_id: str, name: str | None) -> tuple[Node, str] | None:
        ds = store.dataset_nodes.get(dataset_id)
        return None if ds is None else (ds, name or WHOLE_DATASET)

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
        source = node_of(edge["source_dataset_id"], edge["source_field"])
        target = node_of(edge["target_dataset_id"], edge["target_field"])
        if source is None or target is None:
            continue
        src, dst = entry(*source), entry(*target)
        subtypes = list(edge.get("subtypes") or [])
        kind = "DIRECT" if edge.get("is_direct") else "INDIRECT"
        dst["data"]["inputFields"].append(
            {
                "namespace": source[0].namespace,
                "dataset": source[0].name,
                "datasetVersion": None,
                "field": source[1],
                "transformationDescription": None,
                "transformationType": kind,
                # ours
                "transformationSubtypes": subtypes,
                "job": {"namespace": edge["job_namespace"], "name": edge["job_name"]},
            }
        )
        if dst["data"]["transformationType"] is None or kind == "DIRECT":
            dst["data"]["transformationType"] = kind
        link = {"origin": src["id"], "destination": dst["id"]}
        out_edges.setdefault((source[0].dataset_id or "", source[1]), []).append(link)
        in_edges.setdefault((target[0].dataset_id or "", target[1]), []).append(link)
    graph = []
    for key, node in sorted(fields.items(), key=lambda item: item[1]["id"]):
        node["inEdges"] = sorted(in_edges.get(key, []), key=lambda e: e["origin"])
        node["outEdges"] = sorted(out_edges.get(key, []), key=lambda e: e["destination"])
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


def search(store: IndexedStore, q: str, what: str | None, sort: str, limit: int) -> dict[str, Any]:
    """Marquez's ``SearchResultList`` over job and dataset names (canonical and aliases)."""
    pattern = like(q)
    results: dict[str, dict[str, Any]] = {}
    if what in (None, "job"):
        for (namespace, name), job in store.jobs.items():
            if pattern.search(f"{namespace}/{name}"):  # a match in the name is one in namespace/name
                node = store.job_node(namespace, name)
                results[marquez_id(node)] = _hit("JOB", node, job.get("last_seen"))
    if what in (None, "dataset"):
        for (namespace, name), node in store.by_marquez_name.items():
            if node.kind == DATASET and pattern.search(f"{namespace}/{name}"):
                row = store.datasets.get(node.dataset_id or "", {})
                results[marquez_id(node)] = _hit("DATASET", node, row.get("last_seen"))
    ordered = sorted(results.values(), key=lambda r: r["name"])
    if sort == "updated_at":
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
