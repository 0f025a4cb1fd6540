# ruff: noqa: E501  (the corpus reads best one case per line)
"""The secret rules: what they redact, what they leave, and that Spark (Java regex) and Python agree."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from lineage.events.redact import (
    DEFAULT,
    GATE_MIN_VALUES,
    MARKER,
    build_redactor,
    builtin_rules,
    decode_name_escapes,
    flagged,
    redact_bytes,
    redact_many,
    redact_text,
    without_credentials,
)
from lineage.ingest import verdicts
from lineage.observe import catalog_namespace
from lineage.settings import CatalogSettings
from lineage.transforms import envelope

KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"

# (text, secrets that must be gone afterwards)
SECRETS: list[tuple[str, list[str]]] = [
    ('{"url": "jdbc:postgresql://db:5432/app?user=app&password=hunter2&ssl=true"}', ["hunter2", "=app&"]),
    (
        '{"url": "jdbc:sqlserver://db:1433;databaseName=x;user=sa;password=Sql$erver1"}',
        ["Sql$erver1", "=sa;"],
    ),
    ('{"url": "jdbc:oracle:thin:scott/tiger42@db:1521/orcl"}', ["tiger42"]),
    (
        '{"sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username=\\"alice\\" password=\\"alice-jaas-pw\\";"}',
        ["alice-jaas-pw"],
    ),
    (
        '{"message": "401 from https://api: Authorization: Bearer tok-0123456789abcdef"}',
        ["tok-0123456789abcdef"],
    ),
    ('{"headers": {"Authorization": "Basic YWxpY2U6c2VjcmV0"}}', ["YWxpY2U6c2VjcmV0"]),
    ('{"spark.hadoop.fs.s3a.secret.key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}', ["wJalrXUtnFEMI"]),
    ('{"spark.hadoop.fs.s3a.access.key": "AKIAIOSFODNN7EXAMPLE"}', ["AKIAIOSFODNN7EXAMPLE"]),
    (
        '{"msg": "creds AKIAIOSFODNN7EXAMPLE / aws_secret_access_key=wJalrXUtnFEMIK7MDENG"}',
        ["AKIA", "wJalrXUt"],
    ),
    ('{"name": "s3://bucket/data?api_key=k3y-123456&x=1"}', ["k3y-123456"]),
    ('{"namespace": "postgres://user:Pa55word@host:5432"}', ["Pa55word"]),
    ('{"namespace": "POSTGRES://Admin:UPPER-Case-PW@Host:5432"}', ["UPPER-Case-PW"]),
    ('{"uri": "https://bob:s3cr%40t@catalog.example.com/api"}', ["s3cr%40t"]),
    ('{"properties": [{"name": "db.password", "value": "pair-pw"}]}', ["pair-pw"]),
    ('{"fs.azure.account.key.acct.dfs.core.windows.net": "azkey=="}', ["azkey=="]),
    ('{"clientSecret": "cs-1", "refresh_token": "rt-1", "X-Api-Key": "xk-1"}', ["cs-1", "rt-1", "xk-1"]),
    ('{"cmd": "export DB_PASSWORD=\'quoted-pw\' && run"}', ["quoted-pw"]),
    (
        '{"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----"}',
        ["MIIEvQIBADANBg"],
    ),
    ('{"t": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}', ["ghp_0123456789"]),
    (
        '{"t": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"}',
        ["eyJ"],
    ),
    ('{"u": "jdbc:mysql://db/x?user\\u003dapp\\u0026password\\u003descaped-pw"}', ["escaped-pw"]),
    # At the rules' length limits: a name of 100 characters that starts with a secret word; a key of 200
    # characters that ends in 190 after its word, each of which lower-cases to two (U+0130).
    ('{"x": "PASSPHRASE_' + "A" * 89 + '=long-name-pw"}', ["long-name-pw"]),
    ('{"' + "\u0130" * 5 + "Token" + "\u0130" * 190 + '": "long-key-pw"}', ["long-key-pw"]),
    ('{"conf": "SECRET_KEY : colon-pw", "URL": "Postgres://U:' + "P" * 400 + '@h"}', ["colon-pw", "P" * 400]),
]

# Text that must come out unchanged.
# Names spelled with JSON \\u escapes: the rules read them decoded (issue 37).
ESCAPED_SECRETS: list[tuple[str, list[str]]] = [
    ('{"db.pass\\u0077ord": "s3cret"}', ["s3cret"]),
    ('{"p\\u0061ssword": "hunter3"}', ["hunter3"]),
    ('{"spark.hadoop.fs.s3a.secret.k\\u0065Y": "AbC123xyz"}', ["AbC123xyz"]),
    ('{"name": "db.pass\\u0077ord", "value": "pw-9"}', ["pw-9"]),
    ('{"url": "jdbc:x://h/db?p\\u0061ssword=pw-7&x=1"}', ["pw-7"]),
    ('{"a": "\\u00e9", "db.pass\\u0077ord": "s3cret", "b": "\\\\u0077"}', ["s3cret"]),
]
SECRETS += ESCAPED_SECRETS

CLEAN = [
    '{"namespace": "kafka://broker:9092", "name": "orders"}',
    '{"namespace": "s3://warehouse", "name": "default.db/orders"}',
    '{"uri": "https://host:8080/path@x", "primaryKey": "id", "keyColumns": "a,b"}',
    '{"fields": [{"name": "password", "type": "string"}, {"name": "token_count", "type": "int"}]}',
    '{"columnLineage": {"fields": {"api_key": {"inputFields": []}}}}',
    '{"runId": "0190a1b2-0000-7000-8000-000000000000", "eventTime": "2026-11-20T08:00:00Z"}',
    '{"doc": "basic statistics of the orders"}',
    '{"sha": "3f786850e387550fdab836ed7e6dc881de23001b"}',
]


@pytest.mark.parametrize(("text", "gone"), SECRETS)
def test_each_planted_secret_is_replaced_and_json_stays_valid(text: str, gone: list[str]) -> None:
    out, count = redact_text(text)
    assert count >= 1 and MARKER in out
    for secret in gone:
        assert secret not in out, out
    json.loads(out)


@pytest.mark.parametrize("text", CLEAN)
def test_text_without_secrets_is_left_alone(text: str) -> None:
    assert redact_text(text) == (text, 0)


def test_redacting_twice_changes_nothing() -> None:
    for text, _ in SECRETS:
        once, _count = redact_text(text)
        assert redact_text(once) == (once, 0), once


def test_every_rule_has_an_example_it_redacts() -> None:
    for rule in builtin_rules():
        out, count = redact_text(rule.example)
        assert count >= 1 and MARKER in out, rule.name


def test_every_match_of_a_rule_is_found_by_one_of_its_triggers() -> None:
    """The triggers decide which texts are searched at all: each must find every match of its rule (in
    the lower-cased text, up to the character after the match: a look-ahead may need it)."""
    texts = [t for t, _ in SECRETS] + CLEAN + [r.example for r in builtin_rules()]
    for rule in builtin_rules():
        pattern = re.compile(rule.pattern)
        assert rule.triggers, rule.name
        found = 0
        for text in texts:
            for match in pattern.finditer(text):
                found += 1
                span = text[match.start() : match.end() + 1].lower()
                assert any(t.finds(span) for t in rule.triggers), (rule.name, match.group(0))
        assert found, rule.name


def test_the_literal_gate_lets_through_every_text_a_trigger_finds() -> None:
    """The ingestion searches pyarrow's one-pass literal gate first; it must never be narrower than the
    triggers: every span a trigger finds (and each literal in any case, the Kelvin sign for k included)."""
    gate = DEFAULT.literal_gate()
    assert gate is not None
    spans = []
    for text in [t for t, _ in SECRETS] + [r.example for r in builtin_rules()]:
        if DEFAULT.might_hold_secrets(text):
            spans.append(text)
    literals = {lit for t in DEFAULT.triggers for lit in t.needs[0]}
    spans += [lit.upper() for lit in literals] + [lit.title() for lit in literals] + ["\u212aEY=x"]
    assert DEFAULT.might_hold_secrets("\u212aEY=x")
    found = pc.match_substring_regex(pa.array(spans, pa.string()), gate).to_pylist()
    assert all(found), [s for s, f in zip(spans, found, strict=True) if not f]
    clean = pc.match_substring_regex(pa.array(["kafka://broker:9092/orders", "s3://b/k"]), gate)
    assert clean.to_pylist() == [False, False]
    assert build_redactor(extra_patterns=["ACME-[0-9]+"]).literal_gate() is None


def test_uri_keeps_user_and_host_but_not_the_password() -> None:
    out, _ = redact_text("postgres://user:pw@host:5432")
    assert out == f"postgres://user:{MARKER}@host:5432"


def test_allow_lists_and_extra_patterns() -> None:
    redactor = build_redactor(
        extra_patterns=[r"ACME-[0-9]{6}", r"(internal-ref: )[a-z]+"],
        allow_values=[r"\$\{env:[A-Z_]+\}"],
        allow_keys=[r"kafka\.key\.serializer"],
    )
    text = (
        '{"password": "${env:DB_PW}", "kafka.key.serializer": "org.StringSerializer", '
        '"msg": "id ACME-123456 internal-ref: zebra", "token": "real"}'
    )
    out, count = redactor.redact(text)
    assert "${env:DB_PW}" in out and "org.StringSerializer" in out
    assert "ACME-123456" not in out and "zebra" not in out and "internal-ref: " in out
    assert '"token": "***REDACTED***"' in out
    assert count == 3


def test_bad_patterns_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        build_redactor(extra_patterns=["(unclosed"])
    with pytest.raises(ValueError, match="more than one capturing group"):
        build_redactor(extra_patterns=["(a)(b)"])
    with pytest.raises(ValueError, match="capturing group"):
        build_redactor(allow_values=["(x)"])


def test_a_secret_in_bytes_that_are_not_utf8_is_replaced_and_the_other_bytes_kept() -> None:
    raw = b"\xff\xfe password=abc \xc3("
    assert redact_bytes(raw) == (b"\xff\xfe password=" + MARKER.encode() + b" \xc3(", 1)
    assert redact_bytes(b"password=abc") == (f"password={MARKER}".encode(), 1)
    # Latin-1 text, a secret whose value holds an invalid byte: the value goes whole.
    latin = '{"user": "Ren\u00e9", "db.password": "s3\u00e9cret"}'.encode("latin-1")
    out, count = redact_bytes(latin)
    assert count == 1 and b"s3" not in out and out.startswith(b'{"user": "Ren\xe9"')
    assert redact_bytes(b"\xff\xfe no secret") == (b"\xff\xfe no secret", 0)


@pytest.mark.parametrize(("text", "gone"), ESCAPED_SECRETS)
def test_a_key_spelled_with_json_escapes_is_read_decoded(text: str, gone: list[str]) -> None:
    out, count = redact_text(text)
    assert count == 1, out
    assert all(secret not in out for secret in gone)
    assert set(json.loads(out)) == set(json.loads(text))  # the same keys, decoded or not


def test_decoding_name_escapes_keeps_the_json_value_and_escapes_that_are_not_names() -> None:
    texts = [
        '{"db.pass\\u0077ord": "x", "q": "\\u0022\\u005c\\u0000\\u00e9\\u002F"}',
        '{"a": "\\\\u0077", "b": ["\\u0041\\u005F\\u002e\\u002D"]}',
        '{"a": 1} \\u0074rue "\\u0074"',  # outside strings nothing changes (not JSON stays not JSON)
    ]
    decoded = [decode_name_escapes(t) for t in texts]
    assert decoded[0] == '{"db.password": "x", "q": "\\u0022\\u005c\\u0000\\u00e9\\u002F"}'
    assert decoded[1] == '{"a": "\\\\u0077", "b": ["A_.-"]}'
    assert decoded[2] == '{"a": 1} \\u0074rue "t"'
    for text, out in zip(texts[:2], decoded[:2], strict=True):
        assert json.loads(out) == json.loads(text)


@pytest.mark.parametrize("extra", [[], [r"ACME-[0-9]{6}"]], ids=["literal gate", "extra patterns, no gate"])
def test_the_intakes_many_at_once_redacts_as_one_by_one(extra: list[str]) -> None:
    redactor = build_redactor(allow_keys=[r"kafka\.key\.serializer"], extra_patterns=extra)
    values = [t.encode() for t, _ in SECRETS] + [t.encode() for t in CLEAN]
    values += [b"\xff\xfe password=abc", b"", '{"m": "ACME-000001 \u212aey=x"}'.encode()]
    expected = [redact_bytes(v, redactor) for v in values]
    assert len(values) >= GATE_MIN_VALUES  # the gate's path, not the one-by-one path of a few values
    assert redact_many(values, redactor) == expected
    assert redact_many(values[:2], redactor) == expected[:2]
    assert sum(n for _, n in expected) >= len(SECRETS)
    # Only the values holding a literal are searched by the rules (all of them without a gate).
    picked = set(flagged(pa.array(values, pa.binary()), redactor))
    assert {i for i, (_, n) in enumerate(expected) if n} <= picked
    assert (len(picked) == len(values)) == bool(extra)


@pytest.mark.parametrize("extra", [[], [r"ACME-[0-9]{6}"]], ids=["literal gate", "extra patterns, no gate"])
def test_spark_and_python_redact_identically(spark: SparkSession, extra: list[str]) -> None:
    texts = [t for t, _ in SECRETS] + CLEAN + [f'{{"a": "{MARKER}"}}']
    redactor = build_redactor(allow_keys=[r"kafka\.key\.serializer"], extra_patterns=extra)
    assert (redactor.literal_gate() is None) == bool(extra)
    texts.append('{"kafka.key.serializer": "x", "m": "ACME-000001"}')
    rows = [(b"key password=k", t.encode(), "t", 0, i, datetime(2026, 11, 20)) for i, t in enumerate(texts)]
    redacted = envelope.redact_messages(spark.createDataFrame(rows, KAFKA_SCHEMA), redactor)
    found = redacted.orderBy("offset").collect()
    mismatches = []
    for text, row in zip(texts, found, strict=True):
        expected, _ = redactor.redact(text)
        got = bytes(row["value"]).decode()
        if got != expected:
            mismatches.append(f"python {expected!r}\n spark {got!r}")
        assert bytes(row["key"]).decode() == f"key password={MARKER}"
        assert row["redactions"] == expected.count(MARKER) + 1
        assert row["payload_bytes"] == len(text.encode())
    assert not mismatches, "\n".join(mismatches)


def test_spark_redacts_bytes_that_are_not_utf8_and_counts_it(spark: SparkSession) -> None:
    raw = b'\xff\xfe{"password": "pw", "b": "\xc3("}'
    rows = [
        (None, raw, "t", 0, 0, datetime(2026, 11, 20)),
        (b"k", None, "t", 0, 1, datetime(2026, 11, 20)),
        (b"\xff password=k", b'{"db.pass\\u0077ord": "s3cret"}', "t", 0, 2, datetime(2026, 11, 20)),
    ]
    out = verdicts.parse_messages(spark.createDataFrame(rows, KAFKA_SCHEMA), DEFAULT).orderBy("kafka_offset")
    first, second, third = out.collect()
    expected = raw.replace(b"pw", MARKER.encode())
    assert (bytes(first["value"]), first["kafka_key"], first["redactions"]) == (expected, None, 1)
    assert first["reason"] == "NOT_UTF8"
    assert (second["value"], bytes(second["kafka_key"]), second["redactions"]) == (None, b"k", 0)
    assert bytes(third["value"]) == b'{"db.password": "' + MARKER.encode() + b'"}'
    assert (bytes(third["kafka_key"]), third["redactions"]) == (b"\xff password=" + MARKER.encode(), 2)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("https://alice:pw-1@catalog.example.com/api/catalog", "https://catalog.example.com/api/catalog"),
        ("jdbc:postgresql://db:5432/iceberg?user=u&password=pw-1", "jdbc:postgresql://db:5432/iceberg"),
        (
            "jdbc:sqlserver://db:1433;user=sa;password=pw-1",
            f"jdbc:sqlserver://db:1433;user={MARKER};password={MARKER}",
        ),
        ("thrift://metastore:9083", "thrift://metastore:9083"),
        ("jdbc:sqlite:/tmp/x/catalog.db", "jdbc:sqlite:/tmp/x/catalog.db"),
    ],
)
def test_published_catalog_addresses_carry_no_credentials(uri: str, expected: str) -> None:
    assert without_credentials(uri) == expected


def test_our_own_symlink_namespace_drops_the_catalog_uris_credentials() -> None:
    catalog = CatalogSettings(properties={"type": "rest", "uri": "https://cat:pw-2@rest.example.com/api"})
    assert catalog_namespace(catalog) == "https://rest.example.com/api"
