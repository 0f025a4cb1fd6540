"""Local exposure and where our own events go: Spark binds to loopback in local mode, and our default
OpenLineage transport follows [kafka] instead of its file's fixed address."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lineage.observe import OpenLineageClient, default_transport_overrides, new_client
from lineage.settings import load_settings
from lineage.spark import spark_properties

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("master", ["local[2]", "local[*]", None])
def test_local_mode_binds_the_driver_to_loopback(master: str | None) -> None:
    settings = load_settings(spark={"master": master, "conf": {}})
    props = spark_properties(settings, "t", environ={})
    assert props["spark.driver.bindAddress"] == "127.0.0.1"
    assert props["spark.driver.host"] == "127.0.0.1"


def test_cluster_mode_and_opt_out_leave_the_binding_alone() -> None:
    cluster = load_settings(spark={"master": "spark://10.0.0.5:7077", "conf": {}})
    assert "spark.driver.bindAddress" not in spark_properties(cluster, "t", environ={})
    submitted = load_settings(spark={"master": None, "conf": {}})
    assert "spark.driver.bindAddress" not in spark_properties(
        submitted, "t", environ={"PYSPARK_GATEWAY_PORT": "1"}
    )
    opted_out = load_settings(spark={"master": "local[2]", "local_loopback": False, "conf": {}})
    assert "spark.driver.bindAddress" not in spark_properties(opted_out, "t", environ={})


@pytest.fixture
def no_openlineage_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_our_default_kafka_transport_follows_kafka_settings(no_openlineage_env: Path) -> None:
    settings = load_settings(
        kafka={"bootstrap_servers": "broker-a:9093,broker-b:9093", "topic": "lineage.events"},
        openlineage={"config": str(REPO / "conf/openlineage.yml")},
    ).own_lineage()
    assert default_transport_overrides(settings) == {
        "transport": {
            "topic": "lineage.events",
            "config": {"bootstrap.servers": "broker-a:9093,broker-b:9093"},
        }
    }
    config = new_client(settings).config.transport
    assert config is not None
    assert config["topic"] == "lineage.events"
    assert config["config"]["bootstrap.servers"] == "broker-a:9093,broker-b:9093"
    assert config["config"]["acks"] == "all"  # the rest of the file still applies


def test_a_users_own_client_configuration_is_not_touched(
    no_openlineage_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = no_openlineage_env / "openlineage.yml"
    theirs.write_text("transport:\n  type: console\n")
    settings = load_settings(openlineage={"config": str(REPO / "conf/openlineage.yml")}).own_lineage()
    client = new_client(settings)
    assert isinstance(client, OpenLineageClient) and client.config.transport == {"type": "console"}


def test_kafka_security_from_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LINEAGE__KAFKA__SECURITY__PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("LINEAGE__KAFKA__SECURITY__USERNAME", "lineage")
    monkeypatch.setenv("LINEAGE__KAFKA__SECURITY__PASSWORD", 'p"w\\1')
    security = load_settings().kafka.security
    assert 'p"w' not in repr(security) and 'p"w' not in str(load_settings())
    assert security.librdkafka()["sasl.password"] == 'p"w\\1'
    jaas = security.java()["sasl.jaas.config"]
    assert jaas.endswith('username="lineage" password="p\\"w\\\\1";')

    monkeypatch.delenv("LINEAGE__KAFKA__SECURITY__PASSWORD")
    with pytest.raises(ValueError, match="no password"):
        load_settings().kafka.security.librdkafka()
    secret = tmp_path / "kafka.password"
    secret.write_text("from-file\n")
    monkeypatch.setenv("LINEAGE__KAFKA__SECURITY__PASSWORD_FILE", str(secret))
    assert load_settings().kafka.security.librdkafka()["sasl.password"] == "from-file"


def test_sasl_without_a_username_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE__KAFKA__SECURITY__PROTOCOL", "SASL_SSL")
    with pytest.raises(ValueError, match=r"needs kafka\.security\.username"):
        load_settings()


def test_plaintext_adds_nothing() -> None:
    security = load_settings().kafka.security
    assert security.librdkafka() == {} and security.java() == {}


def test_a_spark_secret_switches_on_rpc_authentication_and_encryption(tmp_path: Path) -> None:
    plain = load_settings(spark={"master": "spark://10.0.0.5:7077", "conf": {}})
    assert "spark.authenticate" not in spark_properties(plain, "t", environ={})
    from_env = load_settings(spark={"master": "spark://10.0.0.5:7077", "auth_secret": "s3cr3t", "conf": {}})
    secret_file = tmp_path / "spark.secret"
    secret_file.write_text("from-file\n")
    from_file = load_settings(spark={"master": "spark://10.0.0.5:7077", "auth_secret_file": str(secret_file)})
    for settings, secret in ((from_env, "s3cr3t"), (from_file, "from-file")):
        props = spark_properties(settings, "t", environ={})
        assert props["spark.authenticate"] == "true"
        assert props["spark.authenticate.secret"] == secret
        assert props["spark.network.crypto.enabled"] == "true"
    assert "s3cr3t" not in repr(from_env.spark)  # a secret value: never printed


@pytest.mark.parametrize("content", [None, "  \n"])
def test_a_missing_or_empty_spark_secret_file_is_one_line(tmp_path: Path, content: str | None) -> None:
    from lineage.io.preflight import ConfigError, check_settings

    path = tmp_path / "spark.secret"
    if content is not None:
        path.write_text(content)
    settings = load_settings(spark={"master": None, "auth_secret_file": str(path)})
    reason = "No such file or directory" if content is None else "is empty"
    with pytest.raises(ValueError, match=f"spark.auth_secret_file {path}.*{reason}"):
        settings.spark.auth_properties()
    with pytest.raises(ConfigError, match=f"spark.auth_secret_file {path}.*{reason}"):
        check_settings(settings, checkpoint=False)
