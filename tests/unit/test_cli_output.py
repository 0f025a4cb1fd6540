"""Human-readable CLI output is terminal-safe; any timestamp the lake can hold reads without failing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from lineage.cli import output
from lineage.query.tables import python_rows, python_values

TITLE = "etl\x1b]0;pwned\x07job"
BIDI = "report\u202egnp.exe"


def test_escape_sequences_in_names_are_printed_as_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_runs(
        [
            {
                "run_id": "0192f3a4-0000-7000-8000-000000000001",
                "job_namespace": "ns",
                "job_name": TITLE,
                "reported_state": "RUNNING",
                "inferred_state": "RUNNING",
                "started_at": None,
                "last_event_at": None,
                "duration_seconds": None,
            }
        ]
    )
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "ns/etl\\x1b]0;pwned\\x07job" in out


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (BIDI, "report\\u202egnp.exe"),
        ("a\u2066b\u2069c", "a\\u2066b\\u2069c"),
        ("line\nbreak\rx\x9b", "line\\x0abreak\\x0dx\\x9b"),
        ("naïve/訂單 (orders)", "naïve/訂單 (orders)"),
    ],
)
def test_safe_text(raw: str, shown: str) -> None:
    assert output.safe_text(raw) == shown


def test_json_output_keeps_names_exact(capsys: pytest.CaptureFixture[str]) -> None:
    output.emit_json({"job_name": TITLE})
    assert json.loads(capsys.readouterr().out) == {"job_name": TITLE}


def test_free_text_lines_are_made_safe_but_keep_their_line_breaks(capsys: pytest.CaptureFixture[str]) -> None:
    output.echo(f"impact of a change to {BIDI}\nsecond line")
    assert capsys.readouterr().out == "impact of a change to report\\u202egnp.exe\nsecond line\n"


def test_timestamps_beyond_python_range_are_clamped_not_fatal() -> None:
    # 9999-12-31T23:59:59-01:00 is 10000-01-01T00:59:59Z; also one before year 1.
    beyond = 253402300800_000_000 + 3599_000_000
    before = -62135596800_000_000 - 1
    column = pa.array([beyond, 0, before, None], pa.timestamp("us", tz="UTC"))
    with pytest.raises(OverflowError):
        column.to_pylist()  # what the CLI did before

    assert python_values(column) == [
        datetime.max.replace(tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime.min.replace(tzinfo=UTC),
        None,
    ]
    table = pa.table({"run_id": ["a", "b", "c", "d"], "last_event_at": column})
    rows = python_rows(table)
    assert [r["run_id"] for r in rows] == ["a", "b", "c", "d"]
    assert rows[0]["last_event_at"].year == 9999
    assert output._cell(rows[0]["last_event_at"]) == "9999-12-31 23:59:59"


def test_timestamps_without_zone_are_clamped_too() -> None:
    naive = pa.array([253402300800_000_000, 1_000_000], pa.timestamp("us"))
    assert python_values(naive) == [datetime.max, datetime(1970, 1, 1, 0, 0, 1)]


def test_json_text_is_the_standard_encoders_document_in_ascii() -> None:
    """The CLI's JSON (orjson) reads back as the standard library's indented, sorted, ASCII-only text does,
    character for character: controls, DEL, bidi overrides, accents and characters above the BMP escaped."""
    data = {
        "name": "x\u202ey\x1b]0;title\x07 \u00e9 \U0001f600 \x7f",
        "numbers": [1, 2.5, None, True, 10**18, 1e16],
        "seen": datetime(2026, 11, 20, 8, 0, tzinfo=UTC),
        "empty": [[], {}],
    }
    text = output.json_text(data)
    assert text == json.dumps(data, indent=2, sort_keys=True, default=str)
    assert text.isascii() and "\x7f" not in text
