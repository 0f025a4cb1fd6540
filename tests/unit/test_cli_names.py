"""Name resolution of the lineage CLI on in-memory name columns (no catalog, no Spark).

The fast exact lookup (:meth:`LineageStore._exact`, vectorised over the name columns) must answer exactly
what the full name dictionary (:attr:`LineageStore._names`) answers, for every spelling a user may type;
once the dictionary is built (the read API's warm store) the lookup answers from it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lineage.query.errors import LookupError_
from lineage.query.names import _variants
from lineage.query.nodes import DATASET, JOB, Node
from lineage.query.store import LineageStore
from lineage.settings import load_settings

DATASETS = [
    ("d1", "s3://warehouse", "default.db/orders"),
    ("d2", "kafka://kafka-1:19092", "orders"),
    ("d3", "file", "/data/landing/orders.csv"),
    ("d4", "hive://metastore:9083", "default.customers"),
]
ALIASES = [
    ("s3a://warehouse", "default.db/orders/", "d1", "normalized"),
    ("hive://metastore:9083", "default.orders", "d1", "symlink"),
    ("kafka://broker:9092", "orders", "d2", "alias_rule"),
    ("file", "/data/landing/orders.csv/", "d3", "normalized"),
]
JOBS = [("fh-local", "supplier-stats"), ("flink-jobs", "orders"), ("airflow", "dag/task")]


@pytest.fixture
def store() -> LineageStore:
    s = LineageStore(load_settings())
    ids, namespaces, names = zip(*DATASETS, strict=True)
    s.__dict__["_dataset_columns"] = pa.table({"dataset_id": ids, "namespace": namespaces, "name": names})
    a_ns, a_n, a_id, kinds = zip(*ALIASES, strict=True)
    s.__dict__["_alias_columns"] = pa.table(
        {"alias_namespace": a_ns, "alias_name": a_n, "dataset_id": a_id, "alias_kind": kinds}
    )
    j_ns, j_n = zip(*JOBS, strict=True)
    s.__dict__["_job_columns"] = pa.table({"job_namespace": j_ns, "job_name": j_n})
    return s


def _from_dictionary(store: LineageStore, key: str) -> set[Node]:
    found: set[Node] = set()
    for variant in _variants(key):
        found |= store._names.get(variant, set()) | store._names.get(variant.rstrip("/"), set())
    return found


KEYS = [
    "s3://warehouse/default.db/orders",
    "s3a://warehouse/default.db/orders/",
    "s3n://warehouse/default.db/orders",
    "s3://warehouse/default.db/orders/",
    "hive://metastore:9083/default.orders",
    "kafka://broker:9092/orders",
    "kafka://kafka-1:19092/orders",
    "file:///data/landing/orders.csv",
    "file:///data/landing/orders.csv/",
    "file//data/landing/orders.csv",
    "fh-local/supplier-stats",
    "flink-jobs/orders",
    "airflow/dag/task",
    "orders",
    "nothing/like/this",
]


@pytest.mark.parametrize("key", KEYS)
def test_fast_lookup_answers_what_the_name_dictionary_answers(store: LineageStore, key: str) -> None:
    vectorised = store._exact(key)  # before the dictionary exists: the pass over the name columns
    assert "_names" not in store.__dict__
    expected = _from_dictionary(store, key)
    assert vectorised == expected
    assert store._exact(key) == expected  # the dictionary built (a warm store): looked up there


def test_resolve_uses_every_name_of_a_dataset(store: LineageStore) -> None:
    orders = Node(DATASET, "s3://warehouse", "default.db/orders", "d1")
    for key in ("s3a://warehouse/default.db/orders/", "default.db/orders", "default.customers"):
        assert store.resolve(key).kind == DATASET
    assert store.resolve("hive://metastore:9083/default.orders") == orders
    assert store.resolve("file:///data/landing/orders.csv/").dataset_id == "d3"
    assert store.resolve("job:flink-jobs/orders") == Node(JOB, "flink-jobs", "orders")
    with pytest.raises(LookupError_, match="ambiguous"):
        store.resolve("orders")
    with pytest.raises(LookupError_, match="unknown node"):
        store.resolve("kafka://elsewhere:9092/payments")
