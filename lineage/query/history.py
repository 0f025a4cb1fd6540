"""Dataset versions tied to runs: which run wrote each version of a dataset, which versions a run read, and
the chain of versions upstream of a version.

A *version* of a dataset is one write of it: one ``lineage.run_io`` output row (a run, the dataset). It is
named by what the producer said, the dataset version facet's ``datasetVersion`` (an Iceberg snapshot id
from Spark's Iceberg integration), or, where it said nothing, by the writing run's id. Each carries the
schema the run reported (its ``schema_hash``, numbered as in ``lineage.dataset_schemas``), the output
statistics and the lifecycle changes. Several writes naming the same producer version are one version,
written by the earliest of them.

The version a run read: when the read names a version and a write of the dataset named the same one, that
write; when it names a version nobody reported writing, that version with no known writer; else the write
whose last moment came latest at or before the read (the run lineage rule of
:mod:`lineage.query.versions`: a writer still writing at the read counts as writing then).

Nothing here scans event history: every answer comes from the per-run rows the build keeps by run key
(``run_io``, ``runs``) and the schema versions it keeps by dataset (``dataset_schemas``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lineage.query.errors import LookupError_, UnknownNode
from lineage.query.nodes import DATASET, Node
from lineage.query.store import LineageStore
from lineage.query.tables import expressions

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PRODUCER = "producer"  # the version id is the producer's (the version facet)
RUN = "run"  # the producer named none: the version id is the writing run's


@dataclass
class DatasetVersion:
    """One version of a dataset: the write that made it."""

    dataset: Node
    version: str
    source: str  # PRODUCER or RUN
    run_id: str
    job_namespace: str | None
    job_name: str | None
    first_seen: datetime | None  # the run's first event naming the write
    written_at: datetime | None  # its last one
    schema_hash: str | None
    schema_version: int | None  # the number of its schema in the dataset's schema history
    row_count: int | None
    size_bytes: int | None
    file_count: int | None
    lifecycle_states: list[str]
    run_state: str | None  # the writing run's reported state


@dataclass
class VersionRead:
    """A version a run read: the dataset, the version (None: nothing known wrote it before the read and the
    read named none), how the version was found and the write behind it (None: unknown)."""

    dataset: Node
    version: str | None
    reported: str | None  # the version the read itself named
    read_at: datetime | None
    written_by: DatasetVersion | None


@dataclass
class VersionStep:
    """A version of the chain upstream of a version, how many writes away, and what its writer read."""

    version: DatasetVersion
    depth: int
    inputs: list[VersionRead]


def _write_key(row: dict[str, Any]) -> tuple[datetime, str]:
    return row.get("first_seen") or _EPOCH, row["run_id"]


def _writes(store: LineageStore, dataset_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """dataset id -> its ``run_io`` output rows (every write), oldest first."""
    if not dataset_ids:
        return {}
    ex = expressions()
    wanted = ex.And(ex.In("dataset_id", list(dataset_ids)), ex.EqualTo("direction", "output"))
    found: dict[str, list[dict[str, Any]]] = {}
    for row in store.rows("run_io", row_filter=wanted):
        found.setdefault(row["dataset_id"], []).append(row)
    for rows in found.values():
        rows.sort(key=_write_key)
    return found


def _schema_numbers(store: LineageStore, dataset_ids: Sequence[str]) -> dict[tuple[str, str], int]:
    """(dataset id, schema hash) -> the schema's number in the dataset's history; empty on a lake without
    ``dataset_schemas`` (or an index that does not hold it and cannot read it)."""
    if not dataset_ids:
        return {}
    ex = expressions()
    columns = ("dataset_id", "schema_hash", "version")
    wanted = ex.In("dataset_id", list(dataset_ids))
    try:
        table = store.arrow("dataset_schemas", columns, wanted)
    except LookupError_:
        # The read index holds the tables every question needs; schema history is read as of its build.
        build = getattr(store, "build", None)
        try:
            table = store.scan_table(
                store.settings.catalog.lineage_namespace,
                "dataset_schemas",
                columns,
                wanted,
                None if build is None else build.committed_at,
            )
        except LookupError_:
            return {}
    rows = zip(*(table.column(c).to_pylist() for c in columns), strict=True)
    return {(d, h): v for d, h, v in rows}


def _run_states(store: LineageStore, run_ids: Iterable[str]) -> dict[str, str | None]:
    """run id -> its reported state (two of the thirty columns of ``runs``: the rest cost a third of a
    versions answer at tier M)."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    table = store.arrow_where("runs", ("run_id", "reported_state"), "run_id", ids)
    return dict(
        zip(table.column("run_id").to_pylist(), table.column("reported_state").to_pylist(), strict=True)
    )


def _versions(
    node: Node,
    writes: list[dict[str, Any]],
    schemas: dict[tuple[str, str], int],
    runs: dict[str, str | None],
) -> list[DatasetVersion]:
    """The versions of one dataset from its writes (oldest first), one per producer version id."""
    found: dict[str, DatasetVersion] = {}
    for row in writes:
        reported = row.get("dataset_version")
        vid = version_name(row)
        if vid in found:
            continue  # a later write naming a version already written: the earliest wrote it
        schema = row.get("schema_hash")
        found[vid] = DatasetVersion(
            dataset=node,
            version=vid,
            source=PRODUCER if reported else RUN,
            run_id=row["run_id"],
            job_namespace=row.get("job_namespace"),
            job_name=row.get("job_name"),
            first_seen=row.get("first_seen"),
            written_at=row.get("last_seen"),
            schema_hash=schema,
            schema_version=None if schema is None else schemas.get((row["dataset_id"], schema)),
            row_count=row.get("row_count"),
            size_bytes=row.get("size_bytes"),
            file_count=row.get("file_count"),
            lifecycle_states=list(row.get("lifecycle_states") or []),
            run_state=runs.get(row["run_id"]),
        )
    return list(found.values())


def _known_versions(
    store: LineageStore, nodes: dict[str, Node]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[DatasetVersion]]]:
    """For the datasets of ``nodes`` (dataset id -> node): their writes (oldest first) and their versions,
    the writes, schema numbers and writing runs read once for all of them."""
    dataset_ids = sorted(nodes)
    writes = _writes(store, dataset_ids)
    schemas = _schema_numbers(store, dataset_ids)
    runs = _run_states(store, (w["run_id"] for rows in writes.values() for w in rows))
    versions = {d: _versions(node, writes.get(d, []), schemas, runs) for d, node in nodes.items()}
    return writes, versions


def _dataset(store: LineageStore, node: Node) -> Node:
    if node.kind != DATASET or not node.dataset_id:
        raise LookupError_(f"{node.label} is a job: versions are kept for datasets")
    return node


def dataset_versions(store: LineageStore, node: Node) -> list[DatasetVersion]:
    """Every version of a dataset, newest first (by its write's last moment, then run id)."""
    node = _dataset(store, node)
    dataset_id = node.dataset_id or ""
    _, versions = _known_versions(store, {dataset_id: node})
    return sorted(versions[dataset_id], key=lambda v: (v.written_at or _EPOCH, v.run_id), reverse=True)


def dataset_version(store: LineageStore, node: Node, version: str) -> DatasetVersion:
    """One version of a dataset by its id (the producer's, or the writing run's id or a unique prefix).

    Raises:
        UnknownNode: the dataset has no such version.
    """
    wanted = version.strip()
    found = dataset_versions(store, node)
    for candidate in found:
        if candidate.version == wanted or (candidate.source == RUN and candidate.version == wanted.lower()):
            return candidate
    prefixed = [v for v in found if v.source == RUN and v.version.startswith(wanted.lower())]
    if len(wanted) >= 4 and len(prefixed) == 1:
        return prefixed[0]
    raise UnknownNode(f"dataset {node.label} has no version {version!r}")


def version_name(write: dict[str, Any]) -> str:
    """The id of the version a write (a ``run_io`` output row) made: the producer's, else the run's."""
    return write.get("dataset_version") or write["run_id"]


def producing_write(read: dict[str, Any], writes: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The write behind one read (``run_io`` rows with ``run_id``, ``first_seen``, ``last_seen`` and
    ``dataset_version``), among the dataset's writes oldest first: the earliest write naming the version
    the read names; None when the read names one no write did; else the write whose last moment came
    latest at or before the read (a writer still writing then counts as writing at the read: a streaming
    source the reader consumes as it goes), the reading run's own writes left out."""
    reported = read.get("dataset_version")
    if reported:
        return next((w for w in writes if w.get("dataset_version") == reported), None)
    at = read.get("first_seen") or _EPOCH
    earlier = [
        (min(w.get("last_seen") or w.get("first_seen") or _EPOCH, at), w["run_id"], w)
        for w in writes
        if (w.get("first_seen") or _EPOCH) <= at and w["run_id"] != read["run_id"]
    ]
    return max(earlier, key=lambda e: (e[0], e[1]))[2] if earlier else None


def _resolve(
    read: dict[str, Any], versions: list[DatasetVersion], writes: list[dict[str, Any]]
) -> DatasetVersion | None:
    """The version behind one read (a ``run_io`` input row), from the dataset's versions and writes."""
    chosen = producing_write(read, writes)
    if chosen is None:
        return None
    vid = version_name(chosen)
    return next((v for v in versions if v.version == vid), None)


def versions_read(store: LineageStore, run_ids: Sequence[str]) -> dict[str, list[VersionRead]]:
    """run id -> the versions it read (by dataset namespace and name)."""
    if not run_ids:
        return {}
    ex = expressions()
    reads = store.rows(
        "run_io", row_filter=ex.And(ex.In("run_id", list(run_ids)), ex.EqualTo("direction", "input"))
    )
    nodes = store.nodes_of(sorted({r["dataset_id"] for r in reads}))
    writes, versions = _known_versions(store, nodes)
    return _versions_read(run_ids, reads, nodes, writes, versions)


def _versions_read(
    run_ids: Sequence[str],
    reads: list[dict[str, Any]],
    nodes: dict[str, Node],
    writes: dict[str, list[dict[str, Any]]],
    versions: dict[str, list[DatasetVersion]],
) -> dict[str, list[VersionRead]]:
    """:func:`versions_read` from the runs' ``run_io`` input rows and their datasets' known versions."""
    found: dict[str, list[VersionRead]] = {r: [] for r in run_ids}
    for read in reads:
        node = nodes.get(read["dataset_id"])
        if node is None:
            continue
        writer = _resolve(read, versions[read["dataset_id"]], writes.get(read["dataset_id"], []))
        reported = read.get("dataset_version")
        vid = writer.version if writer is not None else reported
        found[read["run_id"]].append(VersionRead(node, vid, reported, read.get("first_seen"), writer))
    for rows in found.values():
        rows.sort(key=lambda r: (r.dataset.namespace, r.dataset.name))
    return found


def versions_written(store: LineageStore, run_id: str) -> list[DatasetVersion]:
    """The versions a run wrote (by dataset namespace and name): for each dataset it wrote, the version
    its write made (a write naming a version an earlier run made is that run's)."""
    ex = expressions()
    mine = ex.And(ex.EqualTo("run_id", run_id), ex.EqualTo("direction", "output"))
    wrote = store.rows("run_io", row_filter=mine)
    _, versions = _known_versions(store, store.nodes_of(sorted({r["dataset_id"] for r in wrote})))
    return _versions_written(wrote, versions)


def _versions_written(
    wrote: list[dict[str, Any]], versions: dict[str, list[DatasetVersion]]
) -> list[DatasetVersion]:
    """:func:`versions_written` from the run's ``run_io`` output rows and their datasets' known versions."""
    out: list[DatasetVersion] = []
    for row in wrote:
        vid = version_name(row)
        out.extend(v for v in versions.get(row["dataset_id"], []) if v.version == vid)
    return sorted(out, key=lambda v: (v.dataset.namespace, v.dataset.name))


def upstream_versions(store: LineageStore, node: Node, version: str, depth: int) -> list[VersionStep]:
    """The version asked about and the versions upstream of it, at most ``depth`` writes away, nearest
    first: each step goes from a version to the versions its writing run read."""
    start = dataset_version(store, node, version)
    out: list[VersionStep] = []
    seen = {(start.dataset.dataset_id, start.version)}
    frontier = [start]
    level = 0
    while frontier:
        reads = versions_read(store, sorted({v.run_id for v in frontier}))
        following: list[DatasetVersion] = []
        for found in frontier:
            inputs = reads.get(found.run_id, [])
            out.append(VersionStep(found, level, inputs))
            for read in inputs:
                writer = read.written_by
                if writer is not None and (writer.dataset.dataset_id, writer.version) not in seen:
                    seen.add((writer.dataset.dataset_id, writer.version))
                    following.append(writer)
        level += 1
        if level > depth:
            break
        frontier = sorted(following, key=lambda v: (v.dataset.namespace, v.dataset.name, v.version))
    return out


def run_versions(
    store: LineageStore, run_id: str, io_rows: list[dict[str, Any]]
) -> tuple[list[VersionRead], list[DatasetVersion]]:
    """The versions a run read and wrote (:func:`versions_read`, :func:`versions_written`), from its
    ``run_io`` rows (:meth:`~lineage.query.runs.RunQueries.run_datasets`, read once for the run's answer):
    the writes, schema numbers and writing runs of every dataset it read or wrote are read once for both."""
    reads = [r for r in io_rows if r["direction"] == "input"]
    wrote = [r for r in io_rows if r["direction"] == "output"]
    nodes = store.nodes_of(sorted({r["dataset_id"] for r in (*reads, *wrote)}))
    writes, versions = _known_versions(store, nodes)
    read = _versions_read([run_id], reads, nodes, writes, versions)[run_id]
    return read, _versions_written(wrote, versions)
