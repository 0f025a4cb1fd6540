"""Filtered reads of the lake (LakeTables.arrow) on a real SQL catalog written through pyiceberg (no Spark):
their strings are read dictionary-encoded and handed back plain, the same rows and types as a read without
a filter gives, filtered afterwards."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lineage.io.catalog import open_catalog
from lineage.query.store import LineageStore
from lineage.query.tables import expressions
from lineage.settings import Settings

IO = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("dataset_id", pa.string()),
        pa.field("direction", pa.string()),
        pa.field("row_count", pa.int64()),
        pa.field("lifecycle_states", pa.list_(pa.string())),
    ]
)


def _run_io(settings: Settings) -> None:
    catalog = open_catalog(settings.catalog)
    catalog.create_namespace_if_not_exists("lineage")
    table = catalog.create_table(("lineage", "run_io"), IO)
    runs = [f"run-{i % 7}" for i in range(60)]
    rows = pa.table(
        {
            "run_id": runs,
            "dataset_id": [f"d{i % 5}" for i in range(60)],
            "direction": ["output" if i % 3 else "input" for i in range(60)],
            "row_count": [None if i % 4 == 0 else i for i in range(60)],
            "lifecycle_states": [["DROP"] if i == 7 else [] for i in range(60)],
        },
        schema=IO,
    )
    table.append(rows)  # type: ignore[attr-defined]
    table.append(rows.slice(0, 10))  # type: ignore[attr-defined]  # a second file


def test_a_filtered_read_gives_plain_strings_and_the_rows_of_an_unfiltered_one(
    empty_catalog: Settings,
) -> None:
    _run_io(empty_catalog)
    store = LineageStore(empty_catalog)
    ex = expressions()
    wanted = ex.And(ex.In("dataset_id", ["d2", "d4"]), ex.EqualTo("direction", "output"))
    whole = store.arrow("run_io")
    expected = whole.filter(
        pc.and_(
            pc.is_in(whole.column("dataset_id"), pa.array(["d2", "d4"])),
            pc.equal(whole["direction"], "output"),
        )
    )
    for columns in (None, ("run_id", "dataset_id", "row_count"), ("row_count", "lifecycle_states")):
        got = store.arrow("run_io", columns, wanted)
        want = expected if columns is None else expected.select(list(columns))
        assert got.schema == want.schema  # plain strings, not dictionaries
        assert sorted(got.to_pylist(), key=str) == sorted(want.to_pylist(), key=str)
        assert got.num_rows == 19  # the output rows of d2 and d4: 16 of the first 60, 3 of the other 10
    # the keyed lookups of the CLI (versions, health) go through the same read
    keyed = store.arrow_where("run_io", ("run_id", "dataset_id"), "dataset_id", ["d0"])
    assert keyed.schema.field("run_id").type == pa.string()
    assert set(keyed.column("dataset_id").to_pylist()) == {"d0"}
