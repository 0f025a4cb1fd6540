"""The CLI's lineage walk (:meth:`LineageStore.traverse`) on in-memory edge columns (no catalog, no Spark).

The walk goes one hop at a time over Arrow columns; it must reach the same nodes at the same hop counts,
and follow the same edges, as a plain breadth-first search over an adjacency list, on graphs with cycles,
shared nodes, edges to unknown datasets and edges seen only after ``--as-of``.
"""

from __future__ import annotations

import random
from collections import deque
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lineage.query import walks as walks_module
from lineage.query.nodes import BOTH, DATASET, DOWNSTREAM, JOB, UPSTREAM, Node
from lineage.query.store import LineageStore
from lineage.settings import load_settings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EdgeRow = tuple[str, str, str, str, datetime | None]  # job namespace, job name, dataset id, direction, seen


def _graph(seed: int) -> tuple[list[tuple[str, str, str]], list[EdgeRow]]:
    rng = random.Random(seed)
    datasets = [(f"d{i}", "s3://lake", f"t{i}") for i in range(rng.randint(3, 25))]
    jobs = [("ns", f"j{i}") for i in range(rng.randint(2, 15))]
    rows: list[EdgeRow] = []
    for namespace, name in jobs:
        for direction in ("input", "output"):
            for _ in range(rng.randint(0, 3)):
                # about one edge in ten points at a dataset the datasets table does not hold
                target = rng.choice(datasets)[0] if rng.random() > 0.1 else f"gone{rng.randint(0, 3)}"
                seen = None if rng.random() < 0.1 else T0 + timedelta(days=rng.randint(0, 9))
                rows.append((namespace, name, target, direction, seen))
    return datasets, rows


def _store(datasets: list[tuple[str, str, str]], rows: list[EdgeRow]) -> LineageStore:
    store = LineageStore(load_settings())
    ids, namespaces, names = zip(*datasets, strict=True)
    store.__dict__["_dataset_columns"] = pa.table({"dataset_id": ids, "namespace": namespaces, "name": names})
    columns = list(zip(*rows, strict=True)) if rows else [[], [], [], [], []]
    store.__dict__["_edge_columns"] = pa.table(
        {
            "job_namespace": pa.array(columns[0], pa.string()),
            "job_name": pa.array(columns[1], pa.string()),
            "dataset_id": pa.array(columns[2], pa.string()),
            "direction": pa.array(columns[3], pa.string()),
            "first_seen": pa.array(columns[4], pa.timestamp("us", tz="UTC")),
        }
    )
    return store


def _reference(
    datasets: list[tuple[str, str, str]],
    rows: list[EdgeRow],
    root: Node,
    direction: str,
    depth: int | None,
    as_of: datetime | None,
) -> tuple[dict[Node, int], set[tuple[Node, Node, str]]]:
    """Breadth-first search over a whole adjacency list, node by node."""
    nodes = {i: Node(DATASET, ns, n, i) for i, ns, n in datasets}
    up: dict[Node, list[Node]] = {}
    down: dict[Node, list[Node]] = {}
    for namespace, name, ds_id, kind, seen in rows:
        if (as_of is not None and seen is not None and seen > as_of) or ds_id not in nodes:
            continue
        job = Node(JOB, namespace, name)
        source, target = (nodes[ds_id], job) if kind == "input" else (job, nodes[ds_id])
        down.setdefault(source, []).append(target)
        up.setdefault(target, []).append(source)
    hops = {root: 0}
    edges: set[tuple[Node, Node, str]] = set()
    for walk, neighbours in [(UPSTREAM, up), (DOWNSTREAM, down)]:
        if direction not in (walk, BOTH):
            continue
        seen_at = {root: 0}
        queue = deque([root])
        while queue:
            node = queue.popleft()
            if depth is not None and seen_at[node] >= depth:
                continue
            for nxt in neighbours.get(node, ()):
                dataset, job = (nxt, node) if nxt.kind == DATASET else (node, nxt)
                flows_in = (walk == UPSTREAM) == (nxt.kind == DATASET)
                edges.add((dataset, job, "input" if flows_in else "output"))
                if nxt not in seen_at:
                    seen_at[nxt] = seen_at[node] + 1
                    queue.append(nxt)
        for node, hop in seen_at.items():
            hops[node] = min(hop, hops.get(node, hop))
    return hops, edges


CASES = [
    (seed, direction, depth, as_of)
    for seed in range(12)
    for direction in (UPSTREAM, DOWNSTREAM, BOTH)
    for depth, as_of in ((1, None), (3, None), (None, None), (4, T0 + timedelta(days=5)))
]


def _no_filter(*args: object) -> None:
    raise AssertionError("a hop filtered the edges although the adjacency lists were built")


@pytest.mark.parametrize("indexed", [False, True], ids=["arrow filters", "adjacency lists"])
@pytest.mark.parametrize(("seed", "direction", "depth", "as_of"), CASES)
def test_hop_wise_walk_matches_a_breadth_first_search(
    seed: int,
    direction: str,
    depth: int | None,
    as_of: datetime | None,
    indexed: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both ways of taking a hop (the CLI's filter, the read API's adjacency lists) walk the same, and a
    store walks the same again (its edge split is kept between walks)."""
    datasets, rows = _graph(seed)
    store = _store(datasets, rows)
    if indexed:
        store.index_walks()
        store.dataset_nodes  # noqa: B018 - built, as the read API's warm-up does (nodes_of then filters nothing)
        if as_of is None:  # every hop from the lists: no filter over the edges
            monkeypatch.setattr(walks_module, "rows_in", _no_filter)
    rng = random.Random(seed)
    roots = [Node(DATASET, ns, n, i) for i, ns, n in rng.sample(datasets, 2)]
    roots.append(Node(JOB, *rng.choice(rows)[:2]) if rows else roots[0])
    for root in roots * 2:
        walk = store.traverse(root, direction, depth, as_of=as_of)
        hops, edges = _reference(datasets, rows, root, direction, depth, as_of)
        assert walk.hops == hops
        assert walk.edges == edges


def test_a_chain_reports_each_hop_and_stops_at_the_depth() -> None:
    # d0 -> j0 -> d1 -> j1 -> d2: upstream of d2 at depth 3 reaches j1 (1), d1 (2), j0 (3), not d0.
    datasets = [(f"d{i}", "s3://lake", f"t{i}") for i in range(3)]
    rows: list[EdgeRow] = [
        ("ns", "j0", "d0", "input", T0),
        ("ns", "j0", "d1", "output", T0),
        ("ns", "j1", "d1", "input", T0),
        ("ns", "j1", "d2", "output", T0),
    ]
    store = _store(datasets, rows)
    d = {i: Node(DATASET, ns, n, i) for i, ns, n in datasets}
    j0, j1 = Node(JOB, "ns", "j0"), Node(JOB, "ns", "j1")
    walk = store.traverse(d["d2"], UPSTREAM, 3)
    assert walk.hops == {d["d2"]: 0, j1: 1, d["d1"]: 2, j0: 3}
    assert walk.edges == {(d["d2"], j1, "output"), (d["d1"], j1, "input"), (d["d1"], j0, "output")}
    assert store.traverse(d["d0"], DOWNSTREAM, None).hops[d["d2"]] == 4


def _dependency(up: str, down: str, source: str) -> dict[str, object]:
    return {
        "upstream_job_namespace": "ns",
        "upstream_job_name": up,
        "downstream_job_namespace": "ns",
        "downstream_job_name": down,
        "source": source,
    }


def test_walk_via_dependencies_follows_jobs_only_and_via_both_follows_either() -> None:
    # Data flow: j0 -> d1 -> j1. Control flow: dag -> j0 (parent), j0 -> j2 (declared), j2 -> j3 (airflow).
    datasets = [("d1", "s3://lake", "t1")]
    store = _store(datasets, [("ns", "j0", "d1", "output", T0), ("ns", "j1", "d1", "input", T0)])
    store.__dict__["job_dependency_rows"] = [
        _dependency("dag", "j0", "parent"),
        _dependency("j0", "j2", "jobDependencies"),
        _dependency("j2", "j3", "airflow"),
    ]
    root = Node(JOB, "ns", "j0")
    hops = {
        via: {n.label: h for n, h in store.traverse(root, DOWNSTREAM, None, via=via).hops.items()}
        for via in ("datasets", "dependencies", "both")
    }
    assert hops["datasets"] == {"ns/j0": 0, "s3://lake/t1": 1, "ns/j1": 2}
    assert hops["dependencies"] == {"ns/j0": 0, "ns/j2": 1, "ns/j3": 2}
    assert hops["both"] == {"ns/j0": 0, "s3://lake/t1": 1, "ns/j2": 1, "ns/j1": 2, "ns/j3": 2}
    up = store.traverse(Node(JOB, "ns", "j3"), UPSTREAM, 2, via="dependencies")
    assert {n.label for n in up.hops} == {"ns/j3", "ns/j2", "ns/j0"}  # depth 2 stops before the DAG
    assert {(a.label, b.label, s) for a, b, s in up.job_links} == {
        ("ns/j2", "ns/j3", "airflow"),
        ("ns/j0", "ns/j2", "jobDependencies"),
    }


def test_parent_granularity_merges_the_edges_of_a_parents_children() -> None:
    # app.a0 writes d1, app.a1 reads d1 and writes d2, etl reads d2: by job, app is nowhere; by parent the
    # two actions are one job "app" (reading and writing d1 itself), and a child root becomes its parent.
    datasets = [("d1", "s3://lake", "t1"), ("d2", "s3://lake", "t2")]
    rows: list[EdgeRow] = [
        ("spark", "app.a0", "d1", "output", T0),
        ("spark", "app.a1", "d1", "input", T0),
        ("spark", "app.a1", "d2", "output", T0),
        ("ns", "etl", "d2", "input", T0),
    ]
    store = _store(datasets, rows)
    store.__dict__["parent_jobs"] = {
        ("spark", "app.a0"): ("spark", "app"),
        ("spark", "app.a1"): ("spark", "app"),
    }
    store.__dict__["job_dependency_rows"] = []
    by_job = store.traverse(Node(JOB, "ns", "etl"), UPSTREAM, None)
    assert {n.label for n in by_job.hops} == {
        "ns/etl",
        "s3://lake/t2",
        "spark/app.a1",
        "s3://lake/t1",
        "spark/app.a0",
    }
    by_parent = store.traverse(Node(JOB, "ns", "etl"), UPSTREAM, None, granularity="parent")
    assert {n.label: h for n, h in by_parent.hops.items()} == {
        "ns/etl": 0,
        "s3://lake/t2": 1,
        "spark/app": 2,
        "s3://lake/t1": 3,
    }
    assert {(d.label, j.label, k) for d, j, k in by_parent.edges} >= {
        ("s3://lake/t1", "spark/app", "input"),
        ("s3://lake/t1", "spark/app", "output"),
    }
    child_root = store.traverse(Node(JOB, "spark", "app.a0"), DOWNSTREAM, None, granularity="parent")
    assert child_root.root.label == "spark/app"
    assert "ns/etl" in {n.label for n in child_root.hops}


def test_tag_filter_keeps_the_root_and_the_tagged_nodes_only() -> None:
    from lineage.query.params import has_tag, parse_tag

    datasets = [("d1", "s3://lake", "t1"), ("d2", "s3://lake", "t2")]
    rows: list[EdgeRow] = [
        ("ns", "a", "d1", "output", T0),
        ("ns", "b", "d1", "input", T0),
        ("ns", "b", "d2", "output", T0),
    ]
    store = _store(datasets, rows)
    store.__dict__["jobs"] = {("ns", "b"): {"tags": [{"key": "Team", "value": "finance", "source": "USER"}]}}
    store.__dict__["dataset_tags"] = {"d2": [{"key": "pii", "value": "true", "source": "USER"}]}
    walk = store.traverse(Node(JOB, "ns", "a"), DOWNSTREAM, None)
    kept = store.keep_tagged(walk, [parse_tag("team=finance"), parse_tag("pii")])
    assert {n.label for n in kept.hops} == {"ns/a", "ns/b", "s3://lake/t2"}
    assert {(d.label, j.label) for d, j, _ in kept.edges} == {("s3://lake/t2", "ns/b")}
    assert not has_tag([{"key": "team", "value": "sales"}], [parse_tag("team=finance")])
    with pytest.raises(Exception, match="not a tag"):
        parse_tag("=x")
