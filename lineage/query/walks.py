"""Walks over the lineage graph: direction, depth, data flow or dependencies, job or parent granularity,
as of a time, column paths, tag filters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from lineage.query.model import COLUMN_EDGE_COLUMNS, COLUMN_EDGE_KEY, LineageModel
from lineage.query.nodes import (
    ANY,
    BOTH,
    DATASET,
    DOWNSTREAM,
    GRANULARITY_JOB,
    GRANULARITY_PARENT,
    JOB,
    UPSTREAM,
    VIA_DATASETS,
    VIA_DEPENDENCIES,
    WHOLE_DATASET,
    Field,
    Node,
    Traversal,
)
from lineage.query.params import Tag, has_tag
from lineage.query.tables import expressions, joined, python_rows, python_values, rows_in


class Walks(LineageModel):
    @cached_property
    def _walk_tables(self) -> dict[str, dict[tuple[str, str], Any]]:
        """granularity -> :meth:`_edges_by_hop` without ``as_of`` (the same for every walk of this store)."""
        return {}

    @cached_property
    def _adjacency(self) -> dict[str, dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]]]:
        """granularity -> (walk, from kind) -> key -> the edges leaving it, once :meth:`index_walks` ran."""
        return {}

    def index_walks(self, granularity: str = GRANULARITY_JOB) -> None:
        """Adjacency lists of the edges, for the walks without ``as_of`` of a long-lived store.

        Without them each hop of a walk is a pass over every edge (one vectorised filter: right for the CLI,
        which walks once per process); with them a hop costs what it reaches. The read API builds them
        when it loads a build (:meth:`lineage.serve.index.IndexedStore.warm`).
        """
        lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] = {}
        for side, table in self._edges_by_hop(None, granularity).items():
            key = "dataset_id" if side[1] == DATASET else "job_key"
            found: dict[str, list[tuple[str, str, str, str]]] = {}
            columns = (key, "dataset_id", "job_namespace", "job_name", "direction")
            for row in zip(*(python_values(table.column(c)) for c in columns), strict=True):
                found.setdefault(row[0], []).append(row[1:])
            lists[side] = found
        self._adjacency[granularity] = lists

    def _edges_by_hop(
        self, as_of: datetime | None, granularity: str = GRANULARITY_JOB
    ) -> dict[tuple[str, str], Any]:
        """``job_edges`` split for walking: (walk, from kind) -> the Arrow rows that step leaves by.

        Only edges first seen by ``as_of`` and only edges to datasets of the ``datasets`` table. Upstream a
        dataset is left by its producers' ``output`` edges and a job by its ``input`` edges; downstream the
        other way round. Without ``as_of`` the split is kept for the next walk of this store.
        """
        if as_of is None:
            if granularity not in self._walk_tables:
                self._walk_tables[granularity] = self._split_edges(None, granularity)
            return self._walk_tables[granularity]
        return self._split_edges(as_of, granularity)

    def _split_edges(self, as_of: datetime | None, granularity: str) -> dict[tuple[str, str], Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        table = self._edge_columns
        if as_of is not None:
            seen = table.column("first_seen")
            limit = pa.scalar(as_of, type=seen.type)
            table = table.filter(pc.or_kleene(pc.is_null(seen), pc.less_equal(seen, limit)))
        known = pc.is_in(table.column("dataset_id"), value_set=self._dataset_columns.column("dataset_id"))
        table = table.filter(known)
        if granularity == GRANULARITY_PARENT:
            # Every child job's edges become its parent's: edges of several children merge into one.
            pairs = [
                self.collapse(job, granularity)
                for job in zip(
                    table.column("job_namespace").to_pylist(),
                    table.column("job_name").to_pylist(),
                    strict=True,
                )
            ]
            for i, column in enumerate(("job_namespace", "job_name")):
                values = pa.array([p[i] for p in pairs], pa.string())
                table = table.set_column(table.schema.get_field_index(column), column, values)
        table = table.append_column(
            "job_key",
            joined(table, ("job_namespace", "job_name"), "\x00"),
        )
        inputs = table.filter(pc.equal(table.column("direction"), "input"))
        outputs = table.filter(pc.equal(table.column("direction"), "output"))
        return {
            (UPSTREAM, DATASET): outputs,
            (UPSTREAM, JOB): inputs,
            (DOWNSTREAM, DATASET): inputs,
            (DOWNSTREAM, JOB): outputs,
        }

    def traverse(
        self,
        root: Node,
        direction: str,
        depth: int | None,
        *,
        as_of: datetime | None = None,
        columns: bool = False,
        field_name: str | None = None,
        via: str = VIA_DATASETS,
        granularity: str = GRANULARITY_JOB,
    ) -> Traversal:
        """Breadth-first walk from ``root`` (``upstream``, ``downstream``, ``both``) up to ``depth`` hops.

        ``via``: ``datasets`` follows job -> dataset -> job edges (data flow), ``dependencies`` follows
        job -> job dependencies (control flow: declared, Airflow task order, parent -> child), ``both``
        either. ``granularity`` ``parent`` collapses every job into its parent job (Spark application,
        Airflow DAG) before walking, so the edges of its children merge; a child job as root becomes its
        parent.
        One hop at a time over Arrow columns: the edges leaving the whole frontier are found by one
        vectorised filter, and only the nodes reached become Python objects.
        """
        if root.kind == JOB and granularity == GRANULARITY_PARENT:
            root = self.job_node(*self.collapse((root.namespace, root.name), granularity))
        result = Traversal(root, direction, depth)
        walks = [UPSTREAM, DOWNSTREAM] if direction == BOTH else [direction]
        by_hop = self._edges_by_hop(as_of, granularity) if via != VIA_DEPENDENCIES else None
        lists = self._adjacency.get(granularity) if as_of is None and by_hop is not None else None
        result.hops[root] = 0
        reached_ids: set[str] = set()
        found: list[
            tuple[dict[str, int], dict[tuple[str, str], int], set[tuple[str, tuple[str, str], str]]]
        ] = []
        for walk in walks:
            follows_steps = via != VIA_DATASETS and walk != ANY  # ANY walks data flow only
            steps = self._dependency_steps(walk, granularity) if follows_steps else None
            datasets, jobs, edges = self._walk(by_hop, lists, walk, root, depth, steps, result)
            reached_ids.update(datasets)
            found.append((datasets, jobs, edges))
        nodes = self.nodes_of(reached_ids)
        hops, add_edge = result.hops, result.edges.add
        for datasets, jobs, edges in found:
            for ds_id, hop in datasets.items():
                node = nodes.get(ds_id) or (root if ds_id == root.dataset_id else None)
                if node is not None and hops.get(node, hop) >= hop:  # the fewest hops of both walks
                    hops[node] = hop
            job_nodes = {key: self.job_node(*key) for key in jobs}  # every edge's job was reached
            for key, hop in jobs.items():
                node = job_nodes[key]
                if hops.get(node, hop) >= hop:
                    hops[node] = hop
            for ds_id, key, kind in edges:
                dataset = nodes.get(ds_id)
                if dataset is not None:
                    add_edge((dataset, job_nodes.get(key) or self.job_node(*key), kind))
        if columns or field_name:
            if direction == ANY:
                raise ValueError("column paths are walked upstream, downstream or both, not in any direction")
            self._walk_columns(result, walks, as_of, field_name)
        return result

    def adjacent_jobs(self, dataset: Node, direction: str) -> list[Node]:
        """The jobs one hop from a dataset: its writers (``upstream``) or its readers (``downstream``).
        Not a walk: a scoped store counts nothing withheld for it."""
        by_hop = self._edges_by_hop(None)
        lists = self._adjacency.get(GRANULARITY_JOB)
        found = _leaving(by_hop, lists, (direction, DATASET), "dataset_id", {dataset.dataset_id or ""})
        return sorted({self.job_node(ns, name) for _, ns, name, _ in found}, key=lambda n: n.id)

    def _walk(
        self,
        by_hop: dict[tuple[str, str], Any] | None,
        lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] | None,
        walk: str,
        root: Node,
        depth: int | None,
        steps: dict[tuple[str, str], set[tuple[tuple[str, str], str]]] | None,
        result: Traversal,
    ) -> tuple[dict[str, int], dict[tuple[str, str], int], set[tuple[str, tuple[str, str], str]]]:
        """(dataset id -> hops, job -> hops, edges as (dataset id, job, input|output)) of one direction;
        job-to-job links followed (``steps``) go to ``result.job_links``."""
        datasets: dict[str, int] = {}
        jobs: dict[tuple[str, str], int] = {}
        edges: set[tuple[str, tuple[str, str], str]] = set()
        if root.kind == DATASET:
            datasets[root.dataset_id or ""] = 0
            frontier_ds, frontier_jobs = {root.dataset_id or ""}, set()
        else:
            jobs[(root.namespace, root.name)] = 0
            frontier_ds, frontier_jobs = set(), {(root.namespace, root.name)}
        sides = (UPSTREAM, DOWNSTREAM) if walk == ANY else (walk,)
        hop = 0
        while (frontier_ds or frontier_jobs) and (depth is None or hop < depth):
            next_ds: set[str] = set()
            next_jobs: set[tuple[str, str]] = set()
            if frontier_ds and by_hop is not None:
                for ds_id, namespace, name, kind in _leaving_by(
                    by_hop, lists, sides, DATASET, "dataset_id", frontier_ds
                ):
                    edges.add((ds_id, (namespace, name), kind))
                    if (namespace, name) not in jobs:
                        jobs[(namespace, name)] = hop + 1
                        next_jobs.add((namespace, name))
            if frontier_jobs and steps is not None:
                for job in frontier_jobs:
                    for other, source in steps.get(job, ()):
                        up, down = (other, job) if walk == UPSTREAM else (job, other)
                        result.job_links.add((self.job_node(*up), self.job_node(*down), source))
                        if other not in jobs:
                            jobs[other] = hop + 1
                            next_jobs.add(other)
            if frontier_jobs and by_hop is not None:
                keys = {f"{ns}\x00{n}" for ns, n in frontier_jobs}
                for ds_id, namespace, name, kind in _leaving_by(by_hop, lists, sides, JOB, "job_key", keys):
                    edges.add((ds_id, (namespace, name), kind))
                    if ds_id not in datasets:
                        datasets[ds_id] = hop + 1
                        next_ds.add(ds_id)
            frontier_ds, frontier_jobs = next_ds, next_jobs
            hop += 1
        return datasets, jobs, edges

    def _walk_columns(
        self,
        result: Traversal,
        walks: Sequence[str],
        as_of: datetime | None,
        field_name: str | None,
    ) -> None:
        """Column paths from the root's fields (or its one field; a job's: the fields it reads and writes),
        breadth first, one hop (one job crossed) at a time: the edges leaving a whole hop are looked up at
        once (:meth:`_column_lookup`)."""
        root = result.root
        max_jobs = None if result.depth is None else (result.depth + 1) // 2
        edges = self._column_lookup(as_of)
        if root.kind == DATASET:
            fields = self._fields_of(root.dataset_id or "", edges, field_name)
        else:  # a job: the fields it writes (downstream) or reads (upstream)
            fields = self._job_fields(root)
        # Walked in name order, so the edges come in the same order in every process (a set's order follows
        # the strings' hashes, which differ between processes).
        starts = sorted(fields, key=lambda start: (start[0] or "", start[1] or ""))
        followed: set[tuple] = set()
        reached: list[dict[tuple[str, str], int]] = []
        for walk in walks:
            here, there = (TARGET_END, SOURCE_END) if walk == UPSTREAM else (SOURCE_END, TARGET_END)
            seen = {start: 0 for start in starts}
            frontier = list(starts)
            hop = 0
            while frontier and (max_jobs is None or hop < max_jobs):
                leaving = edges.leaving(here, frontier)
                following = []
                for current in frontier:
                    for edge in leaving.get(current, ()):
                        nxt = (edge[there[0]], edge[there[1]] or WHOLE_DATASET)
                        key = tuple(edge[k] for k in COLUMN_EDGE_KEY)
                        if key not in followed:
                            followed.add(key)
                            result.column_edges.append(edge)
                        if nxt not in seen:
                            seen[nxt] = hop + 1
                            following.append(nxt)
                frontier = following
                hop += 1
            reached.append(seen)
        nodes = self.nodes_of(ds_id for seen in reached for ds_id, _ in seen if ds_id is not None)
        for seen in reached:
            for (ds_id, name), hop in seen.items():
                node = nodes.get(ds_id)
                if node is not None and hop > 0:
                    key_field = Field(node, name)
                    result.columns[key_field] = min(hop, result.columns.get(key_field, hop))

    def _column_lookup(self, as_of: datetime | None) -> _EdgeRows | _EdgeColumns:
        """The column edges first seen by ``as_of``, by either end: from the edge rows when they are loaded
        (the read API's warm store), else from ``column_edges``' Arrow rows one hop at a time, only the
        edges a walk follows made into dicts (the CLI: tier M holds 665,518 column edges, 5 s of dicts)."""
        if "column_edge_rows" in self.__dict__:
            return _EdgeRows(self.column_edge_rows, as_of)
        return _EdgeColumns(self._column_edge_columns, as_of)

    @cached_property
    def _column_edge_columns(self) -> Any:
        """``column_edges`` as Arrow rows, with each end's (dataset id, field) joined into one key column."""
        table = self.arrow("column_edges", COLUMN_EDGE_COLUMNS)
        for end, name in _END_KEYS.items():
            table = table.append_column(name, joined(table, end, _SEP, _NULL))
        return table

    def _fields_of(
        self, ds_id: str, edges: _EdgeRows | _EdgeColumns, field_name: str | None
    ) -> set[tuple[str, str]]:
        """The fields a dataset's column walk starts from: ``field_name``, or those of its schema and those
        at either end of a column edge."""
        if field_name is not None:
            return {(ds_id, field_name)}
        if "datasets" in self.__dict__:
            fields = self.datasets.get(ds_id, {}).get("schema_fields")
        else:  # its one row, every column (a lake of an earlier build may lack some)
            rows = self.rows("datasets", None, expressions().EqualTo("dataset_id", ds_id))
            fields = rows[-1].get("schema_fields") if rows else None
        names = {f["name"] for f in fields or []}
        names |= edges.fields(ds_id)
        return {(ds_id, name) for name in names}

    def _job_fields(self, job: Node) -> set[tuple[str, str]]:
        """The fields a job reads and writes, from every column edge of it (whatever the walk's time)."""
        if "column_edge_rows" in self.__dict__:
            key = (job.namespace, job.name)
            edges = [e for e in self.column_edge_rows if (e["job_namespace"], e["job_name"]) == key]
        else:
            import pyarrow.compute as pc

            table = self._column_edge_columns
            mine = pc.and_(
                pc.equal(table.column("job_namespace"), job.namespace),
                pc.equal(table.column("job_name"), job.name),
            )
            edges = table.filter(mine).select([*SOURCE_END, *TARGET_END]).to_pylist()
        found: set[tuple[str, str]] = set()
        for edge in edges:
            found.add((edge["target_dataset_id"], edge["target_field"]))
            found.add((edge["source_dataset_id"], edge["source_field"]))
        return found

    def keep_tagged(self, walk: Traversal, tags: Sequence[Tag]) -> Traversal:
        """The walk with only the nodes carrying one of ``tags`` (the root always stays) and their edges; in a
        column walk, only the columns carrying one (column tags, propagated along column lineage)."""
        if not tags:
            return walk

        # In a column walk a column stays when it carries one of the tags (``lineage.column_tags``), and its
        # dataset with it.
        carried = (
            self.column_tags_of(f.dataset.dataset_id or "" for f in walk.columns) if walk.columns else {}
        )
        walk.columns = {
            f: h
            for f, h in walk.columns.items()
            if has_tag(carried.get((f.dataset.dataset_id or "", f.field)), tags)
        }
        with_columns = {f.dataset for f in walk.columns}
        fields = {(f.dataset.dataset_id, f.field) for f in walk.columns}
        ends = (("source_dataset_id", "source_field"), ("target_dataset_id", "target_field"))
        walk.column_edges = [
            e
            for e in walk.column_edges
            if all((e[d], e[f]) in fields or e[d] == walk.root.dataset_id for d, f in ends)
        ]

        def keep(node: Node) -> bool:
            if node == walk.root or node in with_columns:
                return True
            if node.kind == JOB:
                return has_tag(self.jobs.get((node.namespace, node.name), {}).get("tags"), tags)
            return has_tag(self.dataset_tags.get(node.dataset_id or ""), tags)

        kept = {n: h for n, h in walk.hops.items() if keep(n)}
        walk.hops = kept
        walk.edges = {e for e in walk.edges if e[0] in kept and e[1] in kept}
        walk.job_links = {e for e in walk.job_links if e[0] in kept and e[1] in kept}
        return walk


SOURCE_END = ("source_dataset_id", "source_field")
TARGET_END = ("target_dataset_id", "target_field")
# A column edge's end as one key column: dataset id and field joined by a separator no name holds, a null
# either side spelled by another (a dataset-level edge's field is null; "*" is only what a walk shows).
_SEP, _NULL = "\x1f", "\x1e"
_END_KEYS = {SOURCE_END: "_source_key", TARGET_END: "_target_key"}


def _end_key(dataset_id: str | None, field_name: str | None) -> str:
    """An end's key as :attr:`Walks._column_edge_columns` spells it."""
    return f"{_NULL if dataset_id is None else dataset_id}{_SEP}{_NULL if field_name is None else field_name}"


class _EdgeRows:
    """Column edges held as rows (dicts), indexed by each end at once."""

    def __init__(self, rows: Iterable[dict], as_of: datetime | None) -> None:
        self._by_end: dict[tuple[str, str], dict[tuple[str, str], list[dict]]] = {
            SOURCE_END: {},
            TARGET_END: {},
        }
        for edge in rows:
            if as_of is not None and edge["first_seen"] is not None and edge["first_seen"] > as_of:
                continue
            for end, index in self._by_end.items():
                index.setdefault((edge[end[0]], edge[end[1]]), []).append(edge)

    def leaving(
        self, end: tuple[str, str], _ends: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[dict]]:
        """(dataset id, field) -> the edges with it at ``end``, in table order (every one: a superset of
        ``ends``)."""
        return self._by_end[end]

    def fields(self, ds_id: str) -> set[str]:
        """The fields of a dataset at either end of an edge."""
        return {name for d, name in [*self._by_end[SOURCE_END], *self._by_end[TARGET_END]] if d == ds_id}


class _EdgeColumns:
    """Column edges held as Arrow rows (:attr:`Walks._column_edge_columns`), looked up one hop at a time."""

    def __init__(self, table: Any, as_of: datetime | None) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if as_of is not None:
            seen = table.column("first_seen")
            limit = pa.scalar(as_of, type=seen.type)
            table = table.filter(pc.or_kleene(pc.is_null(seen), pc.less_equal(seen, limit)))
        self._table = table

    def leaving(
        self, end: tuple[str, str], ends: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[dict]]:
        """(dataset id, field) among ``ends`` -> the edges with it at ``end``, in table order: one filter."""
        import pyarrow as pa
        import pyarrow.compute as pc

        keys = pa.array(sorted({_end_key(*e) for e in ends}), pa.string())
        found = self._table.filter(pc.is_in(self._table.column(_END_KEYS[end]), value_set=keys))
        out: dict[tuple[str, str], list[dict]] = {}
        for edge in python_rows(found.select(list(COLUMN_EDGE_COLUMNS))):
            out.setdefault((edge[end[0]], edge[end[1]]), []).append(edge)
        return out

    def fields(self, ds_id: str) -> set[str]:
        """The fields of a dataset at either end of an edge, gathered in the order :class:`_EdgeRows` does."""
        import pyarrow.compute as pc

        names: list[str] = []
        for dataset, field_ in (SOURCE_END, TARGET_END):
            mine = self._table.filter(pc.equal(self._table.column(dataset), ds_id))
            names.extend(mine.column(field_).to_pylist())
        return set(names)


def _leaving_by(
    by_hop: dict[tuple[str, str], Any],
    lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] | None,
    walks: Sequence[str],
    kind: str,
    key: str,
    values: set[str],
) -> Iterable[tuple[Any, ...]]:
    """The edges leaving ``values`` (nodes of ``kind``) in each of ``walks`` (one, or both for ANY)."""
    if len(walks) == 1:
        return _leaving(by_hop, lists, (walks[0], kind), key, values)
    return [edge for walk in walks for edge in _leaving(by_hop, lists, (walk, kind), key, values)]


def _leaving(
    by_hop: dict[tuple[str, str], Any],
    lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] | None,
    side: tuple[str, str],
    key: str,
    values: set[str],
) -> Iterable[tuple[Any, ...]]:
    """(dataset id, job namespace, job name, direction) of the edges of ``side`` whose ``key`` is in
    ``values``: from the adjacency lists when built, else one filter of the side's Arrow rows."""
    if lists is not None:
        leaving = lists[side]
        return [edge for value in values for edge in leaving.get(value, ())]
    return rows_in(by_hop[side], key, values, ("dataset_id", "job_namespace", "job_name", "direction"))
