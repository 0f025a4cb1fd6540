"""Column walks (lineage.query.walks) answer the same whether the column edges are held as rows (the read
API's warm store) or read as Arrow columns one hop at a time (the CLI), on random small estates: the same
column edges in the same order and the same columns at the same hops, for every kind of root, direction,
depth, time and field."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from lineage.query.model import COLUMN_EDGE_COLUMNS
from lineage.query.nodes import BOTH, DATASET, DOWNSTREAM, JOB, UPSTREAM, Node
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

T0 = datetime(2026, 11, 1, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()
FIELDS = ["id", "amount", "*", None]  # a dataset-level edge has no field; "*" is a name like any other here


def _tables(seed: int) -> dict[str, pa.Table]:
    rng = random.Random(seed)
    datasets = [f"d{i}" for i in range(8)]
    jobs = [f"j{i}" for i in range(5)]
    edges, job_edges = [], []
    for _ in range(40):
        job, source, target = rng.choice(jobs), rng.choice(datasets), rng.choice(datasets)
        seen = None if rng.random() < 0.2 else T0 + timedelta(days=rng.randrange(10))
        edges.append(
            {
                "source_dataset_id": source, "source_field": rng.choice(FIELDS),
                "target_dataset_id": target, "target_field": rng.choice(FIELDS[:3]),
                "job_namespace": "etl", "job_name": job, "transformations": [{"type": "DIRECT"}],
                "subtypes": ["IDENTITY"], "is_direct": True, "first_seen": seen,
            }
        )  # fmt: skip
        job_edges += [("etl", job, source, "input"), ("etl", job, target, "output")]
    column_schema = pa.schema(
        [(c, S) for c in COLUMN_EDGE_COLUMNS[:6]]
        + [("transformations", pa.list_(pa.struct([("type", S)]))), ("subtypes", pa.list_(S))]
        + [("is_direct", pa.bool_()), ("first_seen", TS)]
    )
    names = pa.list_(pa.struct([("name", S)]))
    return {
        "datasets": pa.table(
            {
                "dataset_id": datasets,
                "namespace": ["s3://lake"] * len(datasets),
                "name": datasets,
                "schema_fields": pa.array([[{"name": "id"}, {"name": "extra"}]] * len(datasets), names),
            }
        ),
        "job_edges": pa.table(
            {
                "job_namespace": [e[0] for e in job_edges],
                "job_name": [e[1] for e in job_edges],
                "dataset_id": [e[2] for e in job_edges],
                "direction": [e[3] for e in job_edges],
                "first_seen": pa.array([T0] * len(job_edges), TS),
            }
        ),
        "column_edges": pa.Table.from_pylist(edges, schema=column_schema),
    }


def _walk(store: IndexedStore, root: Node, direction: str, depth: int | None, **kwargs: Any) -> tuple:
    walk = store.traverse(root, direction, depth, columns=True, **kwargs)
    return walk.column_edges, list(walk.columns.items())


@pytest.mark.parametrize("seed", range(6))
def test_rows_and_arrow_columns_walk_the_same(seed: int) -> None:
    tables = _tables(seed)
    by_rows = IndexedStore(Settings(), tables)
    by_rows.column_edge_rows  # noqa: B018 -- held as rows: the read API's warm store
    by_columns = IndexedStore(Settings(), tables)
    roots = [Node(DATASET, "s3://lake", f"d{i}", f"d{i}") for i in range(8)] + [Node(JOB, "etl", "j0")]
    for root in roots:
        for direction in (UPSTREAM, DOWNSTREAM, BOTH):
            for depth in (1, 3, None):
                for as_of in (None, T0 + timedelta(days=4)):
                    asked = {"as_of": as_of}
                    assert _walk(by_rows, root, direction, depth, **asked) == _walk(
                        by_columns, root, direction, depth, **asked
                    )
                    if root.kind == DATASET:
                        asked["field_name"] = "id"
                        assert _walk(by_rows, root, direction, depth, **asked) == _walk(
                            by_columns, root, direction, depth, **asked
                        )
    assert "column_edge_rows" not in by_columns.__dict__  # the Arrow path made no dict of every edge


def _edges_in_a_process(hash_seed: str) -> str:
    """The column edges of every walk from every dataset of an estate, in order, as one process answers."""
    import os
    import subprocess
    import sys

    script = (
        "from tests.unit.test_column_walks import _tables, _walk\n"
        "from lineage.query.nodes import BOTH, DATASET, Node\n"
        "from lineage.serve.index import IndexedStore\n"
        "from lineage.settings import Settings\n"
        "store = IndexedStore(Settings(), _tables(3))\n"
        "for i in range(8):\n"
        "    edges, _ = _walk(store, Node(DATASET, 's3://lake', f'd{i}', f'd{i}'), BOTH, None)\n"
        "    print([(e['source_dataset_id'], e['source_field'], e['target_field']) for e in edges])\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_a_walks_column_edges_come_in_the_same_order_in_every_process() -> None:
    # The fields a walk starts from are a set: walked in the order of their strings' hashes, the edges of
    # a --columns answer came in another order in another process.
    first = _edges_in_a_process("1")
    assert first.count("\n") == 8 and "d" in first
    assert _edges_in_a_process("2") == first
    assert _edges_in_a_process("3") == first


def test_the_arrow_walk_reads_ends_held_as_large_strings() -> None:
    # pyiceberg reads some lakes' string columns as large_string: the ends' key columns are joined all the
    # same (the redaction test's lake met "no kernel matching (large_string, large_string, string)").
    tables = _tables(1)
    for name, table in tables.items():
        large = [pa.field(f.name, pa.large_string()) if f.type == pa.string() else f for f in table.schema]
        tables[name] = table.cast(pa.schema(large))
    expected = IndexedStore(Settings(), _tables(1))
    store = IndexedStore(Settings(), tables)
    for i in range(8):
        root = Node(DATASET, "s3://lake", f"d{i}", f"d{i}")
        assert _walk(store, root, BOTH, None) == _walk(expected, root, BOTH, None)
        walk, walked = store.traverse(root, BOTH, None), expected.traverse(root, BOTH, None)
        assert (walk.hops, walk.edges) == (walked.hops, walked.edges)  # the job edges' walk too
