"""The orjson reading of :mod:`lineage.events.validate` gives every message and every batch exactly the strict
decoder's verdicts; the cases are those where a shortcut could go wrong (duplicate keys it cannot see,
braces and quotes inside strings, escapes, spacing, limits)."""

from __future__ import annotations

import contextlib
import json
import random

import pytest

from lineage.events import rules
from lineage.events import validate as v
from lineage.events.rules import JSON_LIMITS
from tests.unit.validation_corpus import _DELETE, GOOD, corpus, event


def _verdict(verdict: v.Verdict) -> tuple[str | None, str | None, str | None]:
    return verdict.reason, verdict.detail, verdict.kind


def _strict_split(body: bytes) -> list[tuple[bytes, tuple[str | None, str | None, str | None]]] | str:
    try:
        return [(raw, _verdict(verdict)) for raw, verdict in v._split_strict(body)]
    except v.BatchError as exc:
        return str(exc)


def _split(body: bytes) -> list[tuple[bytes, tuple[str | None, str | None, str | None]]] | str:
    try:
        return [(raw, _verdict(verdict)) for raw, verdict in v.split_batch(body)]
    except v.BatchError as exc:
        return str(exc)


def _good(**changes: object) -> dict[str, object]:
    return {**json.loads(event()), **changes}


# Messages whose orjson reading differs from the strict one, or that tempt a shortcut.
TRICKY: list[tuple[str, bytes]] = [
    ("duplicate at the top", b'{"eventTime":"2026-11-20T08:00:00Z",' + event()[1:]),
    (
        "duplicate deep down",
        json.dumps(_good(run={"runId": GOOD["run"]["runId"]})).encode()[:-1] + b',"x":{"a":1,"a":1}}',
    ),
    ("duplicate, its value holding a quote and a colon", event()[:-1] + b',"n":"a\\":b","n":"c"}'),
    ("duplicate hidden by a spaced colon", event()[:-1] + b',"n" :1,"n":2}'),
    ("duplicate hidden by a \\u escape", event()[:-1] + b',"n":1,"\\u006e":2}'),
    ("a quote and colon as \\u escapes", event()[:-1] + b',"n":"\\u0022:"}'),
    ("a lone surrogate", event()[:-1] + b',"n":"\\ud800"}'),
    ("braces in strings", event()[:-1] + b',"n":"},{\\"a\\":1}","m":"{{{"}'),
    ("a key ending in a backslash", event()[:-1] + b',"n\\\\":1,"n\\\\":2}'),
    ("a key ending in an escaped quote", event()[:-1] + b',"n\\"":1,"n\\"":2}'),
    ("pretty-printed", json.dumps(_good(), indent=2).encode()),
    ("Jackson's pretty printer", json.dumps(_good(), separators=(",", " : ")).encode()),
    ("content after the value", event() + b" x"),
    ("a BOM first", b"\xef\xbb\xbf" + event()),
    ("NaN", event()[:-1] + b',"n":NaN}'),
    ("a huge exponent", event()[:-1] + b',"n":1e400}'),
    ("an integer beyond 64 bits", event()[:-1] + b',"n":123456789012345678901234567890}'),
    (
        "a number over the digit limit",
        event()[:-1] + b',"n":' + b"1" * (JSON_LIMITS.max_number_digits + 1) + b"}",
    ),
    ("a number at the digit limit", event()[:-1] + b',"n":' + b"1" * JSON_LIMITS.max_number_digits + b"}"),
    (
        "over the depth limit",
        event()[:-1] + b',"n":' + b"[" * JSON_LIMITS.max_depth + b"]" * JSON_LIMITS.max_depth + b"}",
    ),
    (
        "at the depth limit",
        event()[:-1]
        + b',"n":'
        + b"[" * (JSON_LIMITS.max_depth - 1)
        + b"]" * (JSON_LIMITS.max_depth - 1)
        + b"}",
    ),
    ("a key over the name limit", event()[:-1] + b',"' + b"k" * (JSON_LIMITS.max_name_length + 1) + b'":1}'),
    ("a control character", event()[:-1] + b',"n":"a\x01"}'),
    ("not UTF-8", event()[:-1] + b',"n":"\xff"}'),
    ("a number eventTime", json.dumps(_good(eventTime=1.5)).encode()),
    (
        "a big-integer eventTime",
        event()[:-1].replace(b'"2026-11-20T08:00:00.123Z"', b"123456789012345678901234567890") + b"}",
    ),
]


@pytest.mark.parametrize(
    ("label", "value"), [*corpus(), *TRICKY], ids=lambda x: x if isinstance(x, str) else ""
)
def test_a_message_gets_the_strict_decoders_verdict(label: str, value: bytes | None) -> None:
    if value is None or v._NON_BLANK.search(value) is None:
        return
    assert _verdict(v.validate(value)) == _verdict(v._strict_verdict(value)), label


def test_the_fast_reading_takes_the_usual_event_and_leaves_the_tricky_ones() -> None:
    assert v._fast_document(event()) == json.loads(event())
    taken = {label for label, value in TRICKY if v._fast_document(value) is not v._SLOW}
    # Only these are read by orjson; every other one of them goes to the strict decoder (a number of
    # 1,000 digits is infinite as a double, which orjson refuses; orjson writes at most 255 levels).
    assert taken == {
        "braces in strings",
        "pretty-printed",
        "an integer beyond 64 bits",
        "a number eventTime",
        "a big-integer eventTime",
    }


def _body(elements: list[bytes], comma: bytes = b",") -> bytes:
    return b"[" + comma.join(elements) + b"]"


BODIES: list[tuple[str, bytes]] = [
    ("compact", _body([event(), event(eventType="COMPLETE")])),
    ("spaced", b" \n[ " + b" ,\n ".join([event(), event()]) + b" ]\r\n"),
    ("one element", _body([event()])),
    ("empty", b"[]"),
    ("blank between", b"[ ]"),
    ("an invalid event among valid ones", _body([event(), event(run__runId="x"), event()])),
    ("a duplicate in the middle element", _body([event(), TRICKY[0][1], event()])),
    (
        "a duplicate whose count the other elements cannot hide",
        _body([TRICKY[0][1], event()[:-1] + b',"q":"\\":"}']),
    ),
    ("braces closing an element inside a string", _body([event()[:-1] + b',"n":"},{"}', event()])),
    ("an unbalanced brace in a string", _body([event()[:-1] + b',"n":"{"}', event(), event()])),
    (
        "braces that balance across elements",
        _body([event()[:-1] + b',"n":"},{"}', event()[:-1] + b',"n":"{"}', event()]),
    ),
    ("an array element", _body([event(), b"[1,2]"])),
    ("a number element", _body([b"1", event()])),
    ("a null element", _body([event(), b"null"])),
    ("a NaN element", _body([event(), TRICKY[14][1]])),
    ("an element too deep", _body([event(), TRICKY[19][1]])),
    ("an element with a long number", _body([TRICKY[17][1], event()])),
    ("\\u escapes", _body([event(), TRICKY[5][1]])),
    ("not UTF-8", _body([event(), TRICKY[23][1]])),
    ("data after the array", _body([event()]) + b" x"),
    ("a missing comma", b"[" + event() + b" " + event() + b"]"),
    ("a trailing comma", b"[" + event() + b",]"),
    ("not an array", event()),
    ("unclosed", b"[" + event()),
    (
        "non-ASCII names",
        _body(
            [
                json.dumps(_good(job={"namespace": "ns", "name": "zähler→"}), ensure_ascii=False).encode(),
                event(),
            ]
        ),
    ),
]


@pytest.mark.parametrize(("label", "body"), BODIES, ids=[label for label, _ in BODIES])
def test_a_batch_gets_the_strict_split(label: str, body: bytes) -> None:
    assert _split(body) == _strict_split(body), label


def test_the_usual_batch_is_cut_without_the_strict_decoder() -> None:
    body = _body([event(), event(eventType="COMPLETE")] * 3)
    elements = v._split_objects(body)
    assert elements is not None and [raw for raw, _ in elements] == [event(), event(eventType="COMPLETE")] * 3
    # A string's braces cut one element wrong: orjson refuses the cut, the strict split decides.
    assert v._split_objects(BODIES[8][1]) is None


_PIECES = ['"', ":", "\\", "{", "}", "[", "]", ",", " ", "a", "\u00e9", "é", "\n"]


def _random_value(rng: random.Random, depth: int) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return "".join(rng.choice(_PIECES) for _ in range(rng.randrange(6)))
    if roll < 0.5:
        return rng.choice([0, -1.5, 10**20, True, None])
    if roll < 0.75:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {f"k{rng.randrange(4)}": _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _random_element(rng: random.Random) -> bytes:
    data = _good(x=_random_value(rng, 0), y=_random_value(rng, 0))
    text = json.dumps(data, ensure_ascii=rng.random() < 0.3)
    if rng.random() < 0.3:  # a duplicate key, spliced in as text at the top or inside "x"
        text = (
            text[:-1] + ', "eventTime": "2026-11-20T08:00:00Z"}'
            if rng.random() < 0.5
            else text.replace('"x": {', '"x": {"k0": 1, "k0": 2, ', 1)
        )
    return text.encode()


def test_random_batches_get_the_strict_split() -> None:
    rng = random.Random(18)
    for _ in range(300):
        elements = [_random_element(rng) for _ in range(rng.randrange(1, 6))]
        body = _body(elements, comma=rng.choice([b",", b", ", b"\n,\n"]))
        assert _split(body) == _strict_split(body), body
        for element in elements:
            assert _verdict(v.validate(element)) == _verdict(v._strict_verdict(element)), element


def _event_times() -> list[str]:
    """eventTimes at and beyond every edge the usual-shape pattern draws, and the usual ones."""
    times = []
    for year in ("1969", "1970", "1999", "2000", "2026", "2099", "2100", "9999"):
        for month, day in [("01", "01"), ("11", "20"), ("01", "31"), ("02", "28"), ("02", "29"), ("02", "30"),
                           ("04", "30"), ("04", "31"), ("12", "31"), ("00", "10"), ("13", "01"),
                           ("06", "00"), ("06", "32")]:  # fmt: skip
            for clock in ("00:00:00", "23:59:59", "24:00:00", "12:60:00", "12:00:60", "08:00:00.123456789"):
                for offset in (
                    "Z",
                    "+00:00",
                    "-17:59",
                    "+18:00",
                    "+1800",
                    "+18",
                    "-18:01",
                    "+19:00",
                    "+05:60",
                    "",
                ):
                    times.append(f"{year}-{month}-{day}T{clock}{offset}")
    return [*times, "2026-11-20 08:00:00Z", "2026-11-20T08:00:00.1234567890Z", "2026-11-20T08:00Z", "x"]


def test_the_usual_event_time_shortcut_only_takes_valid_instants_in_range() -> None:
    times = _event_times()
    taken = [t for t in times if v._USUAL_EVENT_TIME.fullmatch(t)]
    assert all(v._event_time_reason(t) is None for t in taken), [t for t in taken if v._event_time_reason(t)]
    assert "2026-11-20T08:00:00.123456789Z" in taken and len(taken) > len(times) // 20
    # What it leaves goes to the full check, which accepts some of it (leap days, other centuries).
    assert v._event_time_reason("2024-02-29T00:00:00Z") is None and not v._USUAL_EVENT_TIME.fullmatch(
        "2024-02-29T00:00:00Z"
    )


def test_the_usual_run_event_shortcut_gives_the_full_checks_verdict() -> None:
    documents: list[object] = []
    for _, value in [*corpus(), *TRICKY]:
        # No value, or one the checks never see (not JSON, too deep): skipped.
        with contextlib.suppress(AttributeError, ValueError, RecursionError):
            documents.append(v._STRICT.decode(value.decode()))  # type: ignore[union-attr]
    documents += [json.loads(event(eventTime=t)) for t in _event_times()]
    documents += [
        json.loads(event(eventType=t)) for t in ("start", "Start", "\u017ftart", "BEGIN", "", 1, None)
    ]
    documents += [json.loads(event(run__runId=r)) for r in (GOOD["run"]["runId"].upper(), "x", 1, None)]
    documents += [{**json.loads(event()), "job": "flat"}, {**json.loads(event()), "run": None}, [1], 1]
    taken = 0
    for document in documents:
        taken += isinstance(document, dict) and v._usual_run_event(document) is not None
        assert _verdict(v.validate_document(document)) == _verdict(v._checked_document(document)), document
    assert taken > 400  # the usual times of the grid, the good corpus events, the case variants


def test_the_usual_run_event_shortcut_needs_every_field_the_rules_require() -> None:
    """The shortcut names its fields itself (for speed): each field the rules require of a RunEvent,
    missing or not a string, leaves the verdict to the full checks."""
    run_event = next(kind for kind in rules.KINDS if kind.name == rules.RUN_EVENT)
    assert v._usual_run_event(json.loads(event())) is not None
    for dotted in (*rules.COMMON_FIELDS, *run_event.fields):
        for value in (_DELETE, 1, None):
            document = json.loads(event(**{dotted.replace(".", "__"): value}))
            assert v._usual_run_event(document) is None, (dotted, value)
