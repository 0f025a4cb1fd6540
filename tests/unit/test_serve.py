"""The intake's parts that need no broker: keys, exposure rules, settings, gzip bounds, batch answers."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from lineage.io.kafka_async import AsyncProducer, Delivered, Deliveries, DeliveryFailed
from lineage.serve.app import ConfigurationError, check_exposure, is_loopback
from lineage.serve.auth import ApiKeys, hash_key, new_key, read_hash_file
from lineage.serve.body import _Gunzip
from lineage.serve.errors import ApiError
from lineage.serve.intake import Outcome, batch_response
from lineage.settings import Settings, load_settings


def test_a_key_is_accepted_only_as_a_bearer_token_of_a_configured_digest() -> None:
    key = new_key()
    keys = ApiKeys([hash_key("other"), hash_key(key).upper()])

    assert keys.enabled
    assert keys.allows(f"Bearer {key}")
    assert keys.allows(f"bearer {key}")
    for header in (None, "", "Bearer", f"Basic {key}", f"Bearer {key}x", f"Bearer{key}", "Bearer other2"):
        assert not keys.allows(header)


def test_a_new_key_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter(["-leading-dash", "--two", "fine-key"])
    monkeypatch.setattr("lineage.serve.auth.secrets.token_urlsafe", lambda n: next(drawn))

    assert new_key() == "fine-key"


def test_without_keys_everything_is_allowed() -> None:
    assert not ApiKeys([]).enabled
    assert ApiKeys([]).allows(None)


def test_hash_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# producers\n{hash_key('a')}  # spark\n\n{hash_key('b').upper()}\n")
    assert read_hash_file(path) == [hash_key("a"), hash_key("b")]
    path.write_text("not-a-digest\n")
    with pytest.raises(ValueError, match="keys:1"):
        read_hash_file(path)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
     ("::", False), ("10.0.0.5", False), ("intake.example.com", False)],
)  # fmt: skip
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_no_key_means_loopback_only_and_says_so() -> None:
    settings = load_settings()
    assert "WITHOUT authentication" in check_exposure(settings, "127.0.0.1")
    with pytest.raises(ConfigurationError, match=r"refusing to listen on 0\.0\.0\.0"):
        check_exposure(settings, "0.0.0.0")
    keyed = load_settings(serve={"api_key_hashes": [hash_key("k")]})
    assert "API keys required" in check_exposure(keyed, "0.0.0.0")


def test_serve_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="SHA-256 hex digests"):
        Settings(serve={"api_key_hashes": ["my-secret-key"]})
    with pytest.raises(ValidationError, match="go together"):
        Settings(serve={"tls_cert_file": "cert.pem"})
    with pytest.raises(ValidationError):
        Settings(serve={"api_key": "x"})  # unknown key


def test_gunzip_is_bounded_and_detects_truncation() -> None:
    body = json.dumps({"a": "x" * 1000}).encode()
    packed = gzip.compress(body)
    two_members = packed + gzip.compress(b" ")

    whole = _Gunzip(limit=len(body))
    for i in range(0, len(packed), 7):
        whole.feed(packed[i : i + 7])
    assert whole.finish() == body
    multi = _Gunzip(limit=len(body) + 1)
    multi.feed(two_members)
    assert multi.finish() == body + b" "
    bomb = _Gunzip(limit=len(body) - 1)
    with pytest.raises(ApiError) as too_large:
        bomb.feed(packed)
    assert (too_large.value.status, too_large.value.code) == (413, "PAYLOAD_TOO_LARGE")
    cut = _Gunzip(limit=len(body))
    cut.feed(packed[:-4])
    with pytest.raises(ApiError) as truncated:
        cut.finish()
    assert truncated.value.code == "INVALID_GZIP"
    with pytest.raises(ApiError, match="not valid gzip"):
        _Gunzip(limit=10).feed(zlib.compress(b"deflate, not gzip"))


def test_a_failed_delivery_says_whether_the_message_may_be_in_the_topic() -> None:
    from confluent_kafka import KafkaError

    loop = asyncio.new_event_loop()
    try:
        producer = AsyncProducer({"bootstrap.servers": "127.0.0.1:9"}, "events")
        deliveries = Deliveries(2, loop.create_future())
        producer._on_delivery(deliveries, 0, KafkaError(KafkaError._MSG_TIMED_OUT), None)  # type: ignore[arg-type]
        producer._on_delivery(deliveries, 1, KafkaError(KafkaError.NOT_ENOUGH_REPLICAS), None)  # type: ignore[arg-type]
    finally:
        loop.close()

    timed_out, refused = deliveries.results
    assert isinstance(timed_out, DeliveryFailed) and isinstance(refused, DeliveryFailed)
    assert (timed_out.code, timed_out.possibly_persisted) == ("_MSG_TIMED_OUT", True)
    assert (refused.code, refused.possibly_persisted) == ("NOT_ENOUGH_REPLICAS", False)


def _status(outcomes: list[Outcome]) -> tuple[int, dict[str, object]]:
    answer = batch_response(outcomes, {"Retry-After": "5"})
    assert answer.body is not None
    return answer.status, json.loads(bytes(answer.body))  # type: ignore[arg-type]


def test_batch_answer_statuses() -> None:
    ok = Outcome(200, delivered=Delivered(0, 1))
    invalid = Outcome(400, "NOT_JSON", "message value is not valid JSON", Delivered(1, 2))
    lost = Outcome(503, "KAFKA_UNAVAILABLE", "Kafka did not store the event (NOT_ENOUGH_REPLICAS)")
    unsure = Outcome(503, "KAFKA_UNAVAILABLE", "(_MSG_TIMED_OUT) it may have been written", unconfirmed=True)

    assert _status([ok, ok])[0] == 200
    assert _status([])[0] == 200
    assert _status([ok, invalid])[0] == 207
    status, body = _status([invalid])
    assert (status, body["error"]) == (
        400,
        {"code": "BATCH_HAS_INVALID_EVENTS", "message": body["error"]["message"]},
    )  # type: ignore[index]
    status, body = _status([ok, invalid, lost, unsure])
    assert status == 503
    assert (body["accepted"], body["rejected"], body["failed"]) == (1, 1, 2)
    assert body["results"] == [  # type: ignore[comparison-overlap]
        {"status": 200, "partition": 0, "offset": 1},
        {
            "status": 400,
            "code": "NOT_JSON",
            "message": "message value is not valid JSON",
            "stored": True,
            "partition": 1,
            "offset": 2,
        },
        {"status": 503, "code": "KAFKA_UNAVAILABLE", "message": lost.message, "stored": False},
        {"status": 503, "code": "KAFKA_UNAVAILABLE", "message": unsure.message, "stored": None},
    ]


def test_hash_key_command() -> None:
    from click.testing import CliRunner

    from lineage.cli.main import cli

    runner = CliRunner()
    hashed = runner.invoke(cli, ["serve", "hash-key", "--stdin"], input="my key\n")
    made = runner.invoke(cli, ["serve", "hash-key"])

    assert (hashed.exit_code, hashed.output.strip()) == (0, hash_key("my key"))
    key_line, digest_line = made.output.strip().splitlines()
    assert digest_line.split()[-1] == hash_key(key_line.split()[-1])
