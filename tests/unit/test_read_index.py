"""The read index's lookups by key (lineage.serve.index.KeyIndex): a filter one of whose terms picks rows by a
keyed column answers exactly what a pass over every row answers, in the table's order."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg import expressions as ex

from lineage.serve.index import IndexedStore, KeyIndex
from lineage.settings import Settings

RUN_IO = pa.Table.from_batches(
    [
        pa.record_batch(
            {
                "run_id": ["r1", "r2", None, "r1"],
                "dataset_id": ["b", "a", "a", None],
                "direction": ["output", "input", "output", "output"],
            }
        ),
        pa.record_batch(
            {"run_id": ["r3", "r2"], "dataset_id": ["a", "b"], "direction": ["output", "output"]}
        ),
    ]
)

FILTERS = [
    ex.In("dataset_id", ["a", "b", "unknown"]),
    ex.EqualTo("run_id", "r2"),
    ex.And(ex.EqualTo("direction", "output"), ex.In("dataset_id", ["a", "b"])),
    ex.And(ex.In("run_id", ["r1", "r2"]), ex.EqualTo("direction", "output")),
    ex.And(
        ex.EqualTo("direction", "output"),
        ex.And(ex.In("run_id", ["r1", "r3"]), ex.EqualTo("dataset_id", "a")),
    ),
    ex.EqualTo("direction", "input"),  # no keyed term: a pass over every row
    ex.In("dataset_id", ["nothing"]),
]


def _whole_table(row_filter: Any) -> list[dict[str, Any]]:
    """What a pass over every row answers (the store's filter without the index)."""
    from pyiceberg.expressions.visitors import bind
    from pyiceberg.io.pyarrow import expression_to_pyarrow

    store = IndexedStore(Settings(), {"run_io": RUN_IO})
    bound = bind(store._schema("run_io"), row_filter, case_sensitive=True)
    return RUN_IO.filter(expression_to_pyarrow(bound)).to_pylist()


@pytest.mark.parametrize("row_filter", FILTERS, ids=str)
def test_a_keyed_filter_answers_what_a_pass_over_every_row_answers(row_filter: Any) -> None:
    store = IndexedStore(Settings(), {"run_io": RUN_IO})
    assert store.arrow("run_io", None, row_filter).to_pylist() == _whole_table(row_filter)


def test_positions_are_in_table_order_and_leave_nulls_out() -> None:
    index = KeyIndex(RUN_IO, "dataset_id")
    assert index.positions(["b", "a"]).to_pylist() == [0, 1, 2, 4, 5]
    assert index.positions([]).to_pylist() == []
    assert KeyIndex(RUN_IO, "run_id").positions(["r1"]).to_pylist() == [0, 3]


def test_an_index_is_built_on_first_use_and_kept() -> None:
    store = IndexedStore(Settings(), {"run_io": RUN_IO})
    store.arrow("run_io", None, ex.EqualTo("direction", "input"))
    assert not store._keys
    store.arrow("run_io", None, ex.EqualTo("run_id", "r1"))
    first = store.key_index("run_io", "run_id")
    store.arrow("run_io", None, ex.In("run_id", ["r2", "r3"]))
    assert store.key_index("run_io", "run_id") is first


@pytest.mark.parametrize(
    ("key", "values", "row_filter"),
    [
        ("dataset_id", ["a", "b"], None),
        ("dataset_id", ["a", "b"], ex.EqualTo("direction", "output")),
        ("run_id", ["r1", "r3", "nothing"], None),
        ("run_id", [], None),
        ("direction", ["input"], None),  # not keyed: the In filter
    ],
)
def test_rows_by_key_are_the_rows_an_in_filter_picks(key: str, values: list[str], row_filter: Any) -> None:
    store = IndexedStore(Settings(), {"run_io": RUN_IO})
    match = ex.In(key, sorted(set(values)))
    expected = store.arrow(
        "run_io", ("run_id", "dataset_id"), match if row_filter is None else ex.And(row_filter, match)
    )
    assert store.arrow_where("run_io", ("run_id", "dataset_id"), key, values, row_filter).to_pylist() == (
        expected.to_pylist()
    )
