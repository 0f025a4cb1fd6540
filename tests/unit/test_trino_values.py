"""Trino's JSON protocol values as ``lineage sql --format json`` writes them
(lineage.cluster.trino.json_rows): the one decoder the Trino tests and the Trino benchmark compare other
engines' answers with. No Trino here: the columns and rows are written as its protocol sends them."""

from __future__ import annotations

import math
from typing import Any

from lineage.cluster.trino import json_rows


def _signature(raw: str, *arguments: dict[str, Any]) -> dict[str, Any]:
    return {"rawType": raw, "arguments": list(arguments)}


def _column(name: str, signature: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "type": signature["rawType"], "typeSignature": signature}


def _type_argument(signature: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "TYPE", "value": signature}


def _field(name: str | None, signature: dict[str, Any]) -> dict[str, Any]:
    named = {"fieldName": {"name": name}} if name else {}
    return {"kind": "NAMED_TYPE", "value": {**named, "typeSignature": signature}}


def test_scalars_as_the_cli_writes_json() -> None:
    columns = [
        _column("state", _signature("varchar")),
        _column("runs", _signature("bigint")),
        _column("total", _signature("decimal")),
        _column("share", _signature("decimal")),
        _column("ratio", _signature("double")),
    ]
    rows: list[list[Any]] = [["COMPLETE", 408456, "12", "0.50", "NaN"], [None, 3, None, None, 1.5]]
    first, second = json_rows(columns, rows)
    assert {k: v for k, v in first.items() if k != "ratio"} == {
        "state": "COMPLETE",
        "runs": 408456,
        "total": 12,  # a decimal of scale 0: an integer, as `lineage sql` writes DuckDB's HUGEINT sums
        "share": "0.50",
    }
    assert math.isnan(first["ratio"])
    assert second == {"state": None, "runs": 3, "total": None, "share": None, "ratio": 1.5}


def test_timestamps_plain_and_zoned() -> None:
    columns = [
        _column("plain", _signature("timestamp")),
        _column("utc", _signature("timestamp with time zone")),
        _column("offset", _signature("timestamp with time zone")),
        _column("named", _signature("timestamp with time zone")),
    ]
    row = [
        "2026-11-22 12:00:00.000",
        "2026-11-22 12:00:00.123 UTC",
        "2026-11-22 12:00:00.000 +05:30",
        "2026-07-01 12:00:00.000 Europe/Paris",
    ]
    assert json_rows(columns, [row]) == [
        {
            "plain": "2026-11-22T12:00:00",
            "utc": "2026-11-22T12:00:00.123000Z",
            "offset": "2026-11-22T12:00:00+05:30",
            "named": "2026-07-01T12:00:00+02:00",  # summer time in Paris
        }
    ]


def test_rows_arrays_and_maps_nested() -> None:
    bigint, varchar = _signature("bigint"), _signature("varchar")
    entry = _signature(
        "row", _field("name", varchar), _field("size", _signature("decimal")), _field(None, bigint)
    )
    columns = [
        _column("fields", _signature("array", _type_argument(entry))),
        _column("tags", _signature("map", _type_argument(varchar), _type_argument(_signature("double")))),
    ]
    rows = [[[["id", "4", 1], ["amount", "2.50", None]], {"pii": "Infinity", "7": 0.5}], [[], None]]
    first, second = json_rows(columns, rows)
    assert first["fields"] == [
        {"name": "id", "size": 4, "field2": 1},  # an unnamed field gets its position
        {"name": "amount", "size": "2.50", "field2": None},
    ]
    assert first["tags"] == {"pii": math.inf, "7": 0.5}
    assert second == {"fields": [], "tags": None}


def test_a_column_without_a_type_signature_keeps_its_values() -> None:
    assert json_rows([{"name": "v", "type": "varchar"}], [["x"], [None]]) == [{"v": "x"}, {"v": None}]
