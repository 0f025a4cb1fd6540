"""Settings precedence, validation and derived catalog properties."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import ValidationError

from lineage.settings import cli_instant, cli_interval, load_settings, parse_trigger
from lineage.spark import _artifact, read_defaults_file


def test_environment_overrides_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conf = tmp_path / "lineage.toml"
    conf.write_text('[kafka]\nbootstrap_servers = "from-file:9092"\ntopic = "from.file"\n')
    monkeypatch.setenv("LINEAGE_CONFIG", str(conf))
    monkeypatch.setenv("LINEAGE__KAFKA__TOPIC", "from.env")
    settings = load_settings()
    assert (settings.kafka.bootstrap_servers, settings.kafka.topic) == ("from-file:9092", "from.env")


def test_explicit_arguments_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE__KAFKA__TOPIC", "from.env")
    assert load_settings(kafka={"topic": "explicit"}).kafka.topic == "explicit"


def test_unknown_key_is_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conf = tmp_path / "lineage.toml"
    conf.write_text('[kafka]\nbootstrap_server = "typo:9092"\n')
    monkeypatch.setenv("LINEAGE_CONFIG", str(conf))
    with pytest.raises(ValidationError, match="bootstrap_server"):
        load_settings()


def test_missing_config_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINEAGE_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(FileNotFoundError, match=r"nope\.toml"):
        load_settings()


def test_message_limit_below_16_mib_is_rejected() -> None:
    with pytest.raises(ValidationError, match="max_message_bytes"):
        load_settings(kafka={"max_message_bytes": 1_000_000})


def test_relative_paths_are_made_absolute() -> None:
    settings = load_settings(catalog={"sqlite_path": "x/c.db"})
    assert settings.catalog.sqlite_path == Path.cwd() / "x" / "c.db"


def test_embedded_catalog_properties_for_spark_and_pyiceberg(tmp_path: Path) -> None:
    catalog = load_settings(
        catalog={"sqlite_path": str(tmp_path / "c.db"), "warehouse": str(tmp_path / "wh"), "properties": {}}
    ).catalog
    assert catalog.spark_properties()["uri"] == f"jdbc:sqlite:{tmp_path / 'c.db'}"
    assert catalog.pyiceberg_properties() == {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'c.db'}",
        "warehouse": (tmp_path / "wh").as_uri(),
    }


def test_configured_catalog_properties_go_to_both_engines_unchanged() -> None:
    props = {"type": "rest", "uri": "https://catalog.example.com", "warehouse": "analytics"}
    catalog = load_settings(catalog={"properties": props}).catalog
    assert catalog.spark_properties() == props == catalog.pyiceberg_properties()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("availableNow", {"availableNow": True}),
        ("10 seconds", {"processingTime": "10 seconds"}),
        ("1 minute", {"processingTime": "1 minute"}),
    ],
)
def test_trigger_values(text: str, expected: dict[str, object]) -> None:
    assert parse_trigger(text) == expected


def test_bad_trigger_is_rejected() -> None:
    with pytest.raises(ValidationError, match="trigger"):
        load_settings(ingest={"trigger": "sometimes"})


def test_spark_defaults_file_parsing(tmp_path: Path) -> None:
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# comment\nspark.a   1\n\nspark.b  two words\n")
    assert read_defaults_file(conf) == {"spark.a": "1", "spark.b": "two words"}


def test_jar_artifact_names_drop_the_version() -> None:
    assert _artifact("kafka-clients-3.9.1.jar") == "kafka-clients"
    assert _artifact("iceberg-spark-runtime-4.1_2.13-1.11.0.jar") == "iceberg-spark-runtime-4.1_2.13"
    assert _artifact("spark-sql-kafka-0-10_2.13-4.1.3.jar") == "spark-sql-kafka-0-10_2.13"
    assert _artifact("zstd-jni-1.5.6-10.jar") == "zstd-jni"


def test_maintenance_never_removes_files_younger_than_a_day() -> None:
    with pytest.raises(ValidationError, match="orphan_min_age_hours"):
        load_settings(maintain={"orphan_min_age_hours": 1})
    assert load_settings(maintain={"raw_retention_days": 30}).maintain.raw_retention_days == 30
    assert load_settings().maintain.raw_retention_days == 0  # conf/lineage.toml keeps raw events


def test_cli_instant_accepts_z_and_refuses_other_text() -> None:
    assert cli_instant("2026-11-22T10:00:00Z").isoformat() == "2026-11-22T10:00:00+00:00"
    with pytest.raises(argparse.ArgumentTypeError, match="not an ISO-8601 time"):
        cli_instant("yesterday")


@pytest.mark.parametrize(
    ("text", "seconds"), [("60s", 60), ("5m", 300), ("1h", 3600), ("90", 90), ("0.5s", 0.5)]
)
def test_cli_interval_reads_seconds_minutes_and_hours(text: str, seconds: float) -> None:
    assert cli_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "0s", "-5m", "5d", "inf", "nan", "every minute"])
def test_cli_interval_refuses_what_is_not_a_positive_interval(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a positive interval"):
        cli_interval(text)
