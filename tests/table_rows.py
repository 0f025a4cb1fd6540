"""A table's rows collected once and compared in Python: the full = incremental checks compare a few dozen
tiny tables per build, and comparing them with Spark jobs (sort and collect both sides, per table) cost about
20 s per comparison, more than the builds it checked."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row


@dataclass(frozen=True)
class TableRows:
    """Column types (nullability left out) and rows, columns in name order and rows in a canonical order."""

    types: dict[str, str]
    rows: list[tuple[Any, ...]]

    def __len__(self) -> int:
        return len(self.rows)


def comparable(value: Any) -> Any:
    """A value that compares by content: a map's entries in key order (their order is not data), a
    struct as its named fields, NaN equal to NaN."""
    if isinstance(value, Row):
        return tuple((name, comparable(value[name])) for name in value.__fields__)
    if isinstance(value, dict):
        return ("map", tuple(sorted(((comparable(k), comparable(v)) for k, v in value.items()), key=repr)))
    if isinstance(value, list | tuple):
        return [comparable(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def collect_rows(frame: DataFrame) -> TableRows:
    columns = sorted(frame.columns)
    types = {field.name: field.dataType.simpleString() for field in frame.schema.fields}
    rows = [tuple(comparable(row[c]) for c in columns) for row in frame.select(*columns).collect()]
    return TableRows(types, sorted(rows, key=repr))


def assert_same_rows(name: str, actual: TableRows, expected: TableRows, shown: int = 5) -> None:
    """The same column types and the same rows as a multiset; else the rows on either side only."""
    assert actual.types == expected.types, f"{name}: columns {actual.types} != {expected.types}"
    if actual.rows == expected.rows:
        return
    remaining = list(expected.rows)
    extra = []
    for row in actual.rows:
        if row in remaining:
            remaining.remove(row)
        else:
            extra.append(row)
    raise AssertionError(
        f"{name}: {len(actual.rows)} rows against {len(expected.rows)} expected; "
        f"only in the actual ({len(extra)}): {extra[:shown]}; only in the expected ({len(remaining)}): "
        f"{remaining[:shown]}"
    )
