"""Job versions and run lineage, derived from the runs and the datasets each run read and wrote.

The build keeps no job versions; a job's *version* here is what its runs tell: the job's name, the
datasets a run read and the datasets it wrote (canonical datasets, all of the run's events together)
and the job's source location. Two runs that read and wrote the same datasets ran the same version.
The version's id is a name-based UUID of those parts (MD5), the same in every build and process. A
run has a version once it ended (COMPLETE, FAIL, ABORT), or at once for a streaming job (it may
never end); until then it has none.

Run lineage: a run's upstream runs are the runs that wrote what it read, each the latest write of
that dataset at or before the run first read it (a writer still writing then counts), followed dataset
by dataset up to ``depth`` runs away. The model keeps each run's first and last write of a dataset, not
every write: between them a run counts as writing.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lineage.query import liveness
from lineage.query.errors import UnknownNode
from lineage.query.history import producing_write
from lineage.query.nodes import TERMINAL_STATES, Node
from lineage.query.store import LineageStore
from lineage.query.tables import expressions

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
STREAMING = "STREAMING"


def version_id(
    namespace: str, name: str, inputs: Iterable[str], outputs: Iterable[str], location: str | None
) -> str:
    """The UUID of a job version: MD5 over ``namespace:name:inputs:outputs[:location]``, each dataset
    list sorted and spelled ``namespace:name`` (a name-based UUID, version 3)."""
    parts = [namespace, name, ":".join(sorted(inputs)), ":".join(sorted(outputs))]
    if location:
        parts.append(location)
    digest = bytearray(hashlib.md5(":".join(parts).encode(), usedforsecurity=False).digest())
    digest[6] = (digest[6] & 0x0F) | 0x30
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


@dataclass
class JobVersion:
    """One version of a job: the datasets its runs read and wrote, and those runs (newest first)."""

    namespace: str
    name: str
    version: str
    inputs: list[Node]
    outputs: list[Node]
    location: str | None
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def created_at(self) -> datetime | None:
        """When its first run started (or first reported, without a start)."""
        times = [_started(r) for r in self.runs]
        return min(times) if times else None


def has_version(row: dict[str, Any], streaming: bool) -> bool:
    """Whether a run has a version yet: it ended, or its job streams."""
    return row.get("reported_state") in TERMINAL_STATES or streaming


def _started(row: dict[str, Any]) -> datetime:
    return row.get("started_at") or row.get("last_event_at") or _EPOCH


def _io_of(store: LineageStore, run_ids: Sequence[str]) -> dict[str, tuple[list[Node], list[Node]]]:
    """run id -> (datasets read, datasets written), canonical datasets the model knows."""
    found: dict[str, tuple[list[Node], list[Node]]] = {run_id: ([], []) for run_id in run_ids}
    if not run_ids:
        return found
    ex = expressions()
    table = store.arrow("run_io", ("run_id", "dataset_id", "direction"), ex.In("run_id", list(run_ids)))
    rows = zip(*(table.column(c).to_pylist() for c in ("run_id", "dataset_id", "direction")), strict=True)
    nodes = store.nodes_of(table.column("dataset_id").to_pylist())
    for run_id, dataset_id, direction in rows:
        node = nodes.get(dataset_id)
        if node is not None:
            found[run_id][0 if direction == "input" else 1].append(node)
    return found


def _versions_of(store: LineageStore, rows: list[dict[str, Any]]) -> dict[str, JobVersion]:
    """run id -> its job version, for the runs that have one."""
    jobs: dict[tuple[str, str], dict] = {}
    for row in rows:
        key = (row["job_namespace"], row["job_name"])
        if key not in jobs:
            jobs[key] = store.jobs.get(key, {})

    def streams(row: dict[str, Any]) -> bool:
        job = jobs[(row["job_namespace"], row["job_name"])]
        return (job.get("processing_type") or "").upper() == STREAMING

    versioned = [r for r in rows if r.get("job_name") is not None and has_version(r, streams(r))]
    io = _io_of(store, [r["run_id"] for r in versioned])
    found: dict[str, JobVersion] = {}
    by_id: dict[str, JobVersion] = {}
    for row in versioned:
        namespace, name = row["job_namespace"], row["job_name"]
        location = jobs[(namespace, name)].get("source_code_url")
        inputs, outputs = (sorted(set(side), key=_name_key) for side in io[row["run_id"]])
        vid = version_id(namespace, name, _spelled(inputs), _spelled(outputs), location)
        version = by_id.get(vid)
        if version is None:
            version = by_id[vid] = JobVersion(namespace, name, vid, inputs, outputs, location)
        version.runs.append(row)
        found[row["run_id"]] = version
    for version in by_id.values():
        version.runs.sort(key=_started, reverse=True)
    return found


def _name_key(node: Node) -> tuple[str, str]:
    return node.namespace, node.name


def _spelled(nodes: Iterable[Node]) -> list[str]:
    return [f"{n.namespace}:{n.name}" for n in nodes]


def run_versions(store: LineageStore, rows: list[dict[str, Any]]) -> dict[str, str]:
    """run id -> its job version's id, for the runs of ``rows`` that have one."""
    return {run_id: v.version for run_id, v in _versions_of(store, rows).items()}


def job_versions(store: LineageStore, job: Node) -> list[JobVersion]:
    """A job's versions, newest first (by their latest run's start)."""
    ex = expressions()
    same_job = ex.And(ex.EqualTo("job_namespace", job.namespace), ex.EqualTo("job_name", job.name))
    rows = [liveness.as_of(r) for r in store.rows("runs", row_filter=same_job)]
    unique = {id(v): v for v in _versions_of(store, rows).values()}
    return sorted(unique.values(), key=lambda v: (_started(v.runs[0]), v.version), reverse=True)


def job_version(store: LineageStore, job: Node, version: str) -> JobVersion:
    """One version of a job by its id.

    Raises:
        UnknownNode: the job has no such version.
    """
    wanted = version.strip().lower()
    for found in job_versions(store, job):
        if found.version == wanted:
            return found
    raise UnknownNode(f"job {job.label} has no version {version!r}")


@dataclass
class UpstreamRun:
    """A run of the run lineage, how many runs away from the one asked about, and what it read: each
    dataset with the run that wrote it last before this run first read it (None: no run known)."""

    row: dict[str, Any]
    depth: int
    inputs: list[tuple[Node, datetime | None, str | None]]


def upstream_runs(store: LineageStore, run_id: str, depth: int) -> list[UpstreamRun]:
    """The run ``run_id`` and the runs upstream of it, at most ``depth`` runs away, nearest first.

    Each step goes from a run to the writers of what it read: for each dataset it read, the run that wrote
    the version the read named (the dataset version facet), or, when the read named none, the run whose
    write of it came last at or before the run's first read (the run itself left out; a run that began
    writing before the read and wrote on after it counts as writing at the read):
    :func:`lineage.query.history.producing_write`.
    """
    start = store.run(run_id)
    ex = expressions()
    out: list[UpstreamRun] = []
    seen = {start["run_id"]}
    frontier = [start]
    level = 0
    while frontier:
        ids = [r["run_id"] for r in frontier]
        # Whole rows: the version facet's column is read where the lake has it.
        read_by = ex.And(ex.In("run_id", ids), ex.EqualTo("direction", "input"))
        reads = store.rows("run_io", row_filter=read_by)
        read_ids = sorted({r["dataset_id"] for r in reads})
        written = ex.And(ex.In("dataset_id", read_ids), ex.EqualTo("direction", "output"))
        writes = store.rows("run_io", row_filter=written) if reads else []
        by_dataset: dict[str, list[dict[str, Any]]] = {}
        for w in sorted(writes, key=lambda w: (w["first_seen"] or _EPOCH, w["run_id"])):
            by_dataset.setdefault(w["dataset_id"], []).append(w)
        nodes = store.nodes_of(r["dataset_id"] for r in reads)
        read_by_run: dict[str, list[tuple[Node, datetime | None, str | None]]] = {i: [] for i in ids}
        producers: set[str] = set()
        for r in reads:
            node = nodes.get(r["dataset_id"])
            if node is None:
                continue
            chosen = producing_write(r, by_dataset.get(r["dataset_id"], ()))
            producer = None if chosen is None else chosen["run_id"]
            read_by_run[r["run_id"]].append((node, r["first_seen"], producer))
            if producer is not None:
                producers.add(producer)
        for row in frontier:
            inputs = sorted(read_by_run[row["run_id"]], key=lambda i: (i[0].namespace, i[0].name))
            out.append(UpstreamRun(row, level, inputs))
        level += 1
        wanted = sorted(producers - seen)
        if level > depth or not wanted:
            break
        seen.update(wanted)
        rows = [liveness.as_of(r) for r in store.rows("runs", row_filter=ex.In("run_id", wanted))]
        frontier = sorted(rows, key=lambda r: (r["job_namespace"] or "", r["job_name"] or "", r["run_id"]))
    return out
