"""Marquez search patterns (SQL LIKE: ``%`` any run, ``_`` one character, case-insensitive, anywhere in the
name) matched without a regular expression, in time linear in the name (issue 37: ``%_%_%_...`` made the
regex translation backtrack for minutes)."""

from __future__ import annotations

import random
import re
import time

import pytest

from lineage.serve import marquez
from tests.unit.test_read_mapping import KAFKA, tiny_store

HOSTILE = "%_%_%_%_%_%_%_%_%_%_D"


def reference(pattern: str) -> re.Pattern[str]:
    """The regex the service used to build (plus DOTALL: ``%`` and ``_`` match a newline too). Only on small
    inputs: it backtracks exponentially on patterns with several ``%``."""
    parts = (".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def bound(pattern: str, text: str) -> int:
    """The most steps one search may take (lineage.serve.marquez._Segment.find): linear."""
    return 2 * len(text) + 2 * len(pattern) + 2


def test_agrees_with_the_regex_semantics_on_random_short_inputs() -> None:
    rnd = random.Random(37)
    pattern_chars, text_chars = "ab%_Aé.", "abABéÉ.\n"
    for _ in range(15_000):
        pattern = "".join(rnd.choice(pattern_chars) for _ in range(rnd.randint(0, 8)))
        text = "".join(rnd.choice(text_chars) for _ in range(rnd.randint(0, 12)))
        matcher = marquez.like(pattern)
        assert matcher.search(text) is bool(reference(pattern).search(text)), (pattern, text)
        assert matcher.steps <= bound(pattern, text), (pattern, text, matcher.steps)


def test_agrees_on_repetitive_texts_without_percent() -> None:
    """No ``%``: the regex is fixed-width (no backtracking), so long texts are fine for it; texts made of
    two letters repeat a segment's anchor often, which takes the matcher's character-by-character scan."""
    rnd = random.Random(20)
    for _ in range(3_000):
        pattern = "".join(rnd.choice("ab__") for _ in range(rnd.randint(1, 12)))
        text = "".join(rnd.choice("aab") for _ in range(rnd.randint(0, 80)))
        matcher = marquez.like(pattern)
        assert matcher.search(text) is bool(reference(pattern).search(text)), (pattern, text)
        assert matcher.steps <= bound(pattern, text), (pattern, text, matcher.steps)


@pytest.mark.parametrize(
    ("pattern", "text", "hit"),
    [
        ("", "", True),  # an empty pattern matches anything
        ("", "orders", True),
        ("%", "", True),
        ("%%%", "orders", True),
        ("_", "", False),
        ("_", "x", True),
        ("__", "x", False),
        ("_%_", "xy", True),
        ("_%_", "x", False),
        ("ord_", "ord", False),  # a trailing _ needs a character
        ("ord_", "orde", True),
        ("%s_", "orders", False),
        ("rd_r", "orders", True),  # anywhere in the name
        ("o%s", "ORDERS", True),
        ("S%O", "orders", False),  # in order
        ("db_t%s", "s3://lake/DB/totals", True),  # _ is any character, / too
        ("db__t", "s3://lake/db/totals", False),
        ("db/t%s", "s3://lake/DB/totals", True),
        ("ÉTÉ", "un été", True),  # case-insensitive beyond ASCII
        ("ΣΟΦ_\u0391", "σοφία", True),  # Greek capitals
        ("ς", "Σ", True),  # final sigma folds to sigma
        ("\u212a", "k", True),  # the Kelvin sign is a K
        ("straße", "STRASSE", False),  # one character is one character: ß is not ss
        ("stra_e", "STRAßE", True),
        ("日本_", "日本語", True),
        ("%_%_%_D", "abcd", True),
        ("%_%_%_%_D", "abcd", False),
        (".*", "orders", False),  # regex syntax is literal
        ("a.c", "abc", False),
    ],
)
def test_edge_cases(pattern: str, text: str, hit: bool) -> None:
    assert marquez.like(pattern).search(text) is hit
    assert bool(reference(pattern).search(text)) is hit


def test_the_hostile_pattern_takes_steps_linear_in_the_name() -> None:
    """Ten ``%_`` pairs before a letter the name lacks: the regex tried every split of the name into ten
    parts (10 s for 40 characters); here the steps stay below twice the text's length."""
    for size in (40, 400, 40_000):
        matcher = marquez.like(HOSTILE)
        assert matcher.steps == 0
        assert matcher.search("a" * size) is False
        assert matcher.steps <= bound(HOSTILE, "a" * size)
        assert matcher.search("a" * size + "d") is True
    for size in (40, 4_000):
        repetitive = marquez.like("a_a_a_a_a_a_a_a_a_a_b")  # its anchor occurs everywhere in a run of a's
        assert repetitive.search("a" * size) is False
        assert repetitive.steps <= bound("a_a_a_a_a_a_a_a_a_a_b", "a" * size)


def test_the_hostile_pattern_answers_at_once() -> None:
    """The former regex took 4.8 s on this 30-character name (and minutes on 40); the bound is generous."""
    started = time.perf_counter()
    assert not marquez.like(HOSTILE).search("a" * 30)
    assert time.perf_counter() - started < 0.5
    started = time.perf_counter()
    assert not marquez.like(HOSTILE * 20).search("x" * 5_000)
    assert time.perf_counter() - started < 0.5


def test_search_with_the_hostile_pattern() -> None:
    """A ``d`` after at least ten characters of namespace/name: ``kafka://kafka-1:19092/orders`` and
    ``s3://lake/db/totals`` (its ``d`` is the eleventh character), not ``etl/load``."""
    store = tiny_store()
    found = marquez.search(store, HOSTILE, None, "name", 10)
    assert [r["nodeId"] for r in found["results"]] == [
        "dataset:s3://lake:db/totals",
        f"dataset:{KAFKA}:orders",
    ]
    eleven = marquez.search(store, "%_" + HOSTILE, None, "name", 10)
    assert [r["nodeId"] for r in eleven["results"]] == [f"dataset:{KAFKA}:orders"]
