"""One corpus of good and bad messages for both validators (Spark expressions and plain Python).

Each entry is (label, message value). The corner cases are those where Python's ``json`` and Spark's
``try_parse_json`` (Jackson) disagree by default, and the edges of every rule.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "resources" / "golden"
RUN_ID = "0b8f6b2e-8a3e-4c7e-9a51-3f3e8f0a1b2c"

GOOD: dict[str, Any] = {
    "eventType": "START",
    "eventTime": "2026-11-20T08:00:00.123Z",
    "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.50.0/integration/flink",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": RUN_ID},
    "job": {"namespace": "flink-jobs", "name": "orders"},
}
_DELETE = object()


def event(**changes: Any) -> bytes:
    """GOOD with dotted-path changes (``_DELETE`` removes the key); ``__`` stands for a dot in a name."""
    data = copy.deepcopy(GOOD)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        if value is _DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return json.dumps(data).encode()


def _nested(depth: int) -> bytes:
    """An event whose deepest value sits ``depth`` levels down (the event object is level 1)."""
    inner = depth - 2  # the event object and the "deep" array count too
    return event()[:-1] + b', "deep": ' + b"[" * (inner + 1) + b"]" * (inner + 1) + b"}"


def _with(raw: bytes) -> bytes:
    """GOOD with one more member given as raw JSON text."""
    return event()[:-1] + b', "extra": ' + raw + b"}"


def corpus() -> list[tuple[str, bytes | None]]:
    cases: list[tuple[str, bytes | None]] = [
        ("good run event", event()),
        ("good, no eventType", event(eventType=_DELETE)),
        ("good, lower-case type", event(eventType="complete")),
        ("good, long s upper-cases to START", event(eventType="\u017ftart")),
        ("good, uuid v7", event(run__runId="019a9f3c-5c00-7a2b-8c3d-1e2f3a4b5c6d")),
        ("good, upper-case uuid", event(run__runId=RUN_ID.upper())),
        (
            "good dataset event",
            json.dumps(
                {
                    **{k: GOOD[k] for k in ("eventTime", "producer", "schemaURL")},
                    "dataset": {"namespace": "kafka://b:9092", "name": "t"},
                }
            ).encode(),
        ),
        (
            "good job event",
            json.dumps(
                {
                    **{k: GOOD[k] for k in ("eventTime", "producer", "schemaURL")},
                    "job": {"namespace": "n", "name": "j"},
                }
            ).encode(),
        ),
        ("run wins over dataset", event(dataset={"namespace": "n"})),
        ("null value", None),
        ("empty", b""),
        ("blank", b" \n\t "),
        ("vertical tab only", b"\x0b\x0c"),
        ("vertical tab before object", b"\x0b" + event()),
        ("NUL", b"\x00"),
        ("bad utf-8", b"\xc3\x28"),
        ("surrogate in utf-8", b"\xed\xa0\x80"),
        ("overlong utf-8", b"\xc0\xaf"),
        ("beyond U+10FFFF", b"\xf4\x90\x80\x80"),
        ("bad utf-8 after blanks", b"   \xff"),
        ("bad utf-8 inside an event", event()[:-1] + b', "x": "\xff"}'),
        ("BOM", b"\xef\xbb\xbf" + event()),
        ("not json", b"not json"),
        ("truncated", b'{"eventTime": '),
        ("trailing garbage", event() + b" trailing"),
        ("two objects", event() + event()),
        ("two objects, a line each", event() + b"\n" + event() + b"\n"),
        ("two objects, a comma between", event() + b", " + event()),
        ("an object, then an array", event() + b"[1]"),
        ("an object, then a closing bracket", event() + b"]"),
        ("an object, a closing bracket, an object", event() + b"] " + event()),
        ("an object, then a closing brace", event() + b"}"),
        ("an object, a closing brace, an object", event() + b"}" + event()),
        ("an object, then a vertical tab", event() + b"\x0b"),
        ("an object, then NUL", event() + b"\x00"),
        ("an invalid event, then another", event(producer=_DELETE) + event()),
        ("an array, then an array", b"[1] [2]"),
        ("a number, then garbage", b"42 x"),
        ("a string, then a string", b'"a""b"'),
        ("an object with a duplicate, then an object", _with(b'{"b": 1, "b": 2}') + event()),
        ("depth 1000, then garbage", _nested(1000) + b" x"),
        ("trailing newline", event() + b"\n"),
        ("trailing blanks", event() + b" \r\n\t "),
        ("single quotes", b"{'a': 1}"),
        ("trailing comma", b'{"a": 1,}'),
        ("leading zero", _with(b"01")),
        ("NaN", _with(b"NaN")),
        ("Infinity", _with(b"-Infinity")),
        ("raw control character in a string", _with(b'"x\x01"')),
        ("escaped NUL", _with(b'"\\u0000"')),
        ("lone surrogate escape", _with(b'"\\ud800"')),
        ("duplicate key", event()[:-1] + b', "producer": "again"}'),
        ("nested duplicate key", _with(b'{"b": 1, "b": 2}')),
        ("huge exponent", _with(b"1e400")),
        ("1000 digits", _with(b"9" * 1000)),
        ("-1000 digits", _with(b"-" + b"9" * 1000)),
        ("1001 digits", _with(b"9" * 1001)),
        ("1000-digit fraction", _with(b"1." + b"1" * 999)),
        ("1001-digit fraction", _with(b"1." + b"1" * 1000)),
        ("1001 digits with exponent", _with(b"1" + b"0" * 998 + b"e10")),
        ("digits in a string", _with(b'"' + b"7" * 3000 + b'"')),
        ("string of 20,000,000 characters", _with(b'"' + b"s" * 20_000_000 + b'"')),
        ("string of 20,000,001 characters", _with(b'"' + b"s" * 20_000_001 + b'"')),
        ("string of 20,000,001 characters, then garbage", _with(b'"' + b"s" * 20_000_001 + b'"') + b"x"),
        ("depth 1000", _nested(1000)),
        ("depth 1001", _nested(1001)),
        ("depth 5000", _nested(5000)),
        ("key of 50000", _with(b'{"' + b"k" * 50_000 + b'": 1}')),
        ("key of 50001", _with(b'{"' + b"k" * 50_001 + b'": 1}')),
        ("escaped key of 50000", _with(b'{"' + b"\\u006b" * 50_000 + b'": 1}')),
        ("emoji key of 50000 UTF-16 units", _with(b'{"' + "\U0001f600".encode() * 25_000 + b'": 1}')),
        ("emoji key of 50002 UTF-16 units", _with(b'{"' + "\U0001f600".encode() * 25_001 + b'": 1}')),
        ("array", b"[1, 2]"),
        ("string", b'"START"'),
        ("number", b"42"),
        ("decimal", b"4.25"),
        ("double", b"4.25e3"),
        ("big integer", b"9223372036854775808"),
        ("huge integer", b"9" * 50),
        ("true", b"true"),
        ("null", b"null"),
        ("array after blanks", b" \n [1]"),
        ("no kind", b'{"eventTime": "2026-11-20T08:00:00Z", "producer": "p", "schemaURL": "u"}'),
        ("null marker is a kind", event(run=None)),
        ("string marker is a kind", event(run="r")),
        ("array marker is a kind", event(run=[RUN_ID])),
        (
            "dataset kind, missing name",
            json.dumps(
                {
                    **{k: GOOD[k] for k in ("eventTime", "producer", "schemaURL")},
                    "dataset": {"namespace": "n"},
                }
            ).encode(),
        ),
        (
            "job kind, name is a number",
            json.dumps(
                {
                    **{k: GOOD[k] for k in ("eventTime", "producer", "schemaURL")},
                    "job": {"namespace": "n", "name": 5},
                }
            ).encode(),
        ),
    ]
    for name in ("eventTime", "producer", "schemaURL", "run__runId", "job__namespace", "job__name"):
        label = name.replace("__", ".")
        cases += [
            (f"{label} missing", event(**{name: _DELETE})),
            (f"{label} null", event(**{name: None})),
            (f"{label} number", event(**{name: 7})),
            (f"{label} decimal", event(**{name: 7.5})),
            (f"{label} object", event(**{name: {"a": 1}})),
            (f"{label} array", event(**{name: ["a"]})),
            (f"{label} boolean", event(**{name: False})),
        ]
    cases += [
        ("first common field wins", event(eventTime=_DELETE, producer=5)),
        ("common before kind fields", event(producer=_DELETE, run__runId=_DELETE)),
        ("kind fields before eventTime format", event(eventTime="x", job__name=_DELETE)),
        ("eventTime before eventType", event(eventTime="x", eventType="X")),
        ("eventType before runId", event(eventType="X", run__runId="r")),
        ("eventType null is not given", event(eventType=None)),
        ("eventType number", event(eventType=1)),
        ("eventType boolean", event(eventType=True)),
        ("eventType object", event(eventType={"b": [1, "x"], "a": None})),
        ("eventType with escapes", event(eventType='a\n\t"\\/\u00e9\x1f\x7f')),
        ("eventType long", event(eventType="X" * 300)),
        ("eventType STARTED", event(eventType="STARTED")),
        ("eventType empty", event(eventType="")),
        ("runId not a uuid", event(run__runId="run-42")),
        ("runId with newline", event(run__runId=RUN_ID + "\n")),
        ("runId with braces", event(run__runId="{" + RUN_ID + "}")),
        ("runId upper case", event(run__runId=RUN_ID.upper())),
        ("runId with a trailing CR LF", event(run__runId=RUN_ID + "\r\n")),
        ("runId with a leading space", event(run__runId=" " + RUN_ID)),
        ("runId upper case not a uuid", event(run__runId="RUN-42")),
        ("START without run is no JobEvent", event(run=_DELETE)),
        ("START with run null", event(run=None)),
        ("eventType null, no run: JobEvent", event(run=_DELETE, eventType=None)),
        ("eventType lower case, no run", event(run=_DELETE, eventType="start")),
        ("eventType with dataset, no run", event(run=_DELETE, dataset={"namespace": "n", "name": "d"})),
        ("runId unicode digits", event(run__runId=RUN_ID.replace("0", "\u0660"))),
        ("runId long", event(run__runId="r" * 300)),
        ("runId lone surrogate", event().replace(RUN_ID.encode(), b"\\ud800")),
    ]
    times = [
        "2026-11-20T08:00:00Z",
        "2026-11-20T08:00:00.1Z",
        "2026-11-20T08:00:00.123456789Z",
        "2026-11-20T08:00:00.1234567891Z",
        "2026-11-20T08:00:00.Z",
        "2026-11-20 08:00:00Z",
        "2026-11-20t08:00:00Z",
        "2026-11-20T08:00:00z",
        "2026-11-20T08:00:00",
        "2026-11-20T08:00:00+01:00",
        "2026-11-20T08:00:00+0100",
        "2026-11-20T08:00:00+01",
        "2026-11-20T08:00:00-00:00",
        "2026-11-20T08:00:00+18:00",
        "2026-11-20T08:00:00-18:00",
        "2026-11-20T08:00:00+18:01",
        "2026-11-20T08:00:00+19:00",
        "2026-11-20T08:00:00+01:60",
        "2026-11-20T08:00:00+14:59",
        "2026-11-20T08:00:00+1:00",
        "2026-11-20T08:00:00+05:30:15",
        "2026-11-20T08:00:00UTC",
        "2026-11-20T08:00:00Europe/Paris",
        "2026-11-20T08:00Z",
        "2026-11-20T08:00",
        "2026-11-20",
        "2026",
        "08:00:00",
        "T08:00:00",
        " 2026-11-20T08:00:00Z",
        "2026-11-20T08:00:00Z ",
        "+2026-11-20T08:00:00Z",
        "12026-11-20T08:00:00Z",
        "2026-1-2T8:0:0Z",
        "2026-02-29T08:00:00Z",
        "2024-02-29T08:00:00Z",
        "1900-02-29T00:00:00Z",
        "2000-02-29T00:00:00Z",
        "0000-02-29T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:59-18:00",
        "9999-12-31T23:59:59-01:00",
        "9999-12-31T23:59:59Z",
        "2026-11-21T08:00:00Z",
        "2026-11-21T08:00:00.000001Z",
        "2026-11-21T09:00:00+01:00",
        "2026-11-21T08:00:00.000000999Z",
        "2100-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999999Z",
        "9999-12-31T23:59:59+18:00",
        "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59.999Z",
        "1970-01-01T00:59:59+01:00",
        "1969-12-31T23:00:00-01:00",
        "12:34:56",
        "2026-11-20T12:34:56",
        "2026-11-20 12:34:56.5",
        "2026-04-31T00:00:00Z",
        "2026-13-01T08:00:00Z",
        "2026-00-01T08:00:00Z",
        "2026-11-00T08:00:00Z",
        "2026-11-20T24:00:00Z",
        "2026-11-20T08:60:00Z",
        "2026-11-20T23:59:60Z",
        "2026-11-20T08:00:00\u0660Z",
        "20/11/2026 08:00",
        "yesterday",
        "",
        "x" * 300,
    ]
    cases += [(f"eventTime {t!r}"[:80], event(eventTime=t)) for t in times]
    for path in sorted(GOLDEN.glob("**/*.jsonl")):
        for number, line in enumerate(path.read_bytes().splitlines()):
            if line.strip():
                cases.append((f"golden {path.relative_to(GOLDEN)}:{number + 1}", line))
    return cases
