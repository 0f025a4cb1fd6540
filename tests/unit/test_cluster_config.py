"""The scale-out wiring without a cluster: settings file, spark-submit command line, preflight helpers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from lineage.cluster.stack import (
    REST_SERVER_SOURCE,
    Credentials,
    LocalStack,
    deep_merge,
    dump_toml,
    settings_file,
)
from lineage.cluster.submit import submit_command
from lineage.io.local_kafka import free_port
from lineage.io.preflight import ConfigError, _s3a_as_iceberg, check_catalog, check_master
from lineage.settings import LocalClusterSettings, Settings, local_or_uri
from lineage.spark import executor_env, spark_properties

REPO = Path(__file__).resolve().parents[2]
CLUSTER_TOML = REPO / "conf" / "cluster.toml"


def cluster_settings(monkeypatch: pytest.MonkeyPatch, path: Path = CLUSTER_TOML) -> Settings:
    monkeypatch.setenv("LINEAGE_CONFIG", str(path))
    monkeypatch.chdir(REPO)
    return Settings().resolved()


def test_cluster_toml_points_at_the_local_stack_it_describes(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = cluster_settings(monkeypatch)
    stack = LocalStack(settings.local_cluster)
    assert settings.spark.master == stack.master_url
    assert settings.catalog.properties["uri"] == stack.catalog_uri
    assert settings.catalog.properties["s3.endpoint"] == stack.s3_endpoint
    assert settings.spark.conf["spark.hadoop.fs.s3a.endpoint"] == stack.s3_endpoint
    assert settings.spark.conf["spark.eventLog.dir"] == stack.event_log_dir
    assert settings.ingest.checkpoint == f"s3a://{stack.settings.bucket}/checkpoints/ingest"
    # No secret in the file: credentials come from the environment (AWS chain).
    text = CLUSTER_TOML.read_text().lower()
    assert "secret-access-key" not in text.replace("aws_secret_access_key", "")
    assert not any("secret" in k or "access-key" in k for k in settings.catalog.properties)


def test_checkpoint_uri_is_kept_and_local_paths_are_made_absolute() -> None:
    assert local_or_uri("s3a://lake/checkpoints/x") == "s3a://lake/checkpoints/x"
    assert local_or_uri("var/ckpt") == str((Path.cwd() / "var/ckpt").resolve())


def test_a_stack_settings_file_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = LocalClusterSettings(data_dir=tmp_path / "stack", master_port=17077, s3_port=19400)
    stack = LocalStack(local)
    path = settings_file(CLUSTER_TOML, stack.client_settings(), tmp_path / "cluster.toml")
    settings = cluster_settings(monkeypatch, path)
    assert settings.spark.master == "spark://127.0.0.1:17077"
    assert settings.catalog.properties["s3.endpoint"] == "http://127.0.0.1:19400"
    assert settings.catalog.properties["type"] == "rest"  # kept from conf/cluster.toml
    assert settings.local_cluster.data_dir == tmp_path / "stack"


def test_the_stack_authenticates_spark_rpc_with_a_secret_kept_out_of_argv_and_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = LocalStack(LocalClusterSettings(data_dir=tmp_path / "stack"))
    daemons = stack.daemon_properties()
    secret = stack.spark_secret()
    assert len(secret) >= 32 and stack.spark_secret() == secret  # generated once, then read back
    assert daemons.stat().st_mode & 0o777 == 0o600 and stack.spark_secret_file.stat().st_mode & 0o777 == 0o600
    props = dict(line.split(" ", 1) for line in daemons.read_text().splitlines())
    assert props == {
        "spark.authenticate": "true",
        "spark.authenticate.secret": secret,
        "spark.network.crypto.enabled": "true",
    }
    for service in [stack.master(), *stack.workers()]:
        argv = " ".join([*service.argv, *service.env.values()])
        assert secret not in argv
        assert service.argv[service.argv.index("--properties-file") + 1] == str(daemons)
    path = settings_file(CLUSTER_TOML, stack.client_settings(), tmp_path / "cluster.toml")
    assert secret not in path.read_text()
    settings = cluster_settings(monkeypatch, path)
    assert spark_properties(settings, "t", environ={})["spark.authenticate.secret"] == secret


def test_dump_toml_writes_what_tomllib_reads() -> None:
    data = {
        "top": "x",
        "a": {"n": 1, "f": 0.5, "b": True, "l": ["p", "q"], "nested": {"dotted.key": 'quote " and \\'}},
    }
    assert tomllib.loads(dump_toml(data)) == data
    assert deep_merge({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}) == {"a": {"x": 1, "y": 3}}


def test_submit_command_ships_the_package_and_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jar_dir = tmp_path / "jars"
    jar_dir.mkdir()
    (jar_dir / "iceberg-aws-bundle-1.11.0.jar").write_bytes(b"")
    (jar_dir / "py4j-0.10.9.9.jar").write_bytes(b"")  # PySpark ships py4j: not shipped again
    settings = cluster_settings(monkeypatch)
    settings = settings.model_copy(
        update={"spark": settings.spark.model_copy(update={"submit_jars": [str(jar_dir)]})}
    )
    package = tmp_path / "lineage_lakehouse-0.1.0-py3-none-any.zip"
    argv = submit_command(settings, "build", ["--full-refresh"], py_files=package)
    assert argv[0].endswith("bin/spark-submit")
    options = dict(zip(argv[1:-2:2], argv[2:-2:2], strict=False))
    assert options["--master"] == "spark://127.0.0.1:7177"
    assert options["--deploy-mode"] == "client"
    assert options["--py-files"] == str(package)
    assert options["--jars"] == str(jar_dir / "iceberg-aws-bundle-1.11.0.jar")
    assert argv[-2:] == [str(REPO / "jobs/build_lineage.py"), "--full-refresh"]
    with pytest.raises(ValueError, match="unknown job"):
        submit_command(settings, "maintain", py_files=package)


def test_executor_env_passes_named_variables_only() -> None:
    environ = {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s", "HOME": "/root"}
    assert executor_env(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"], environ) == {
        "spark.executorEnv.AWS_ACCESS_KEY_ID": "id",
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "s",
    }


def test_cluster_sessions_get_no_local_jars_and_the_executor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = cluster_settings(monkeypatch)
    # conf/cluster.toml names the secret file of a started stack; this machine may never have started one.
    assert settings.spark.auth_secret_file == REPO / "var/cluster/spark-auth.secret"
    monkeypatch.setenv("LINEAGE__SPARK__AUTH_SECRET", "from-the-environment")
    settings = cluster_settings(monkeypatch)
    props = spark_properties(settings, "x", environ={"AWS_ACCESS_KEY_ID": "id"})
    assert props["spark.authenticate.secret"] == "from-the-environment"  # the environment comes first
    assert "spark.jars" not in props
    assert props["spark.executorEnv.AWS_ACCESS_KEY_ID"] == "id"
    assert props["spark.sql.catalog.lake.type"] == "rest"
    assert props["spark.master"] == "spark://127.0.0.1:7177"


def test_s3a_settings_map_to_iceberg_style_properties() -> None:
    conf = {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9400",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.executor.memory": "1g",
    }
    assert _s3a_as_iceberg(conf) == {
        "s3.endpoint": "http://127.0.0.1:9400",
        "s3.path-style-access": "true",
        "s3.region": "us-east-1",
    }


def test_unreachable_master_is_one_line() -> None:
    port = free_port()
    with pytest.raises(ConfigError, match=rf"Spark master spark://127.0.0.1:{port} is unreachable"):
        check_master(f"spark://127.0.0.1:{port}", timeout_s=1)
    check_master("local[2]")  # not a standalone master: nothing to check
    check_master(None)


def test_nested_settings_from_the_environment_merge_with_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE__CATALOG__PROPERTIES__CREDENTIAL", "client:secret")
    monkeypatch.setenv("LINEAGE__KAFKA__CONSUMER", '{"sasl.jaas.config": "x required;"}')
    settings = cluster_settings(monkeypatch)
    assert settings.catalog.properties["credential"] == "client:secret"
    assert settings.catalog.properties["type"] == "rest"  # the file's keys stay
    assert settings.kafka.consumer == {"sasl.jaas.config": "x required;"}


def test_embedded_catalog_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings = Settings().catalog.model_copy(
        update={"sqlite_path": tmp_path / "ok" / "catalog.db", "warehouse": blocker / "warehouse"}
    )
    with pytest.raises(ConfigError, match=r"cannot create the warehouse .*a-file/warehouse: Not a directory"):
        check_catalog(settings)
    assert (tmp_path / "ok").is_dir()  # the catalog database's folder came first and was made


def test_the_rest_catalog_server_binds_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    """Iceberg's RESTCatalogServer listens on every interface and has no host setting: the stack runs its
    catalog through RestCatalogOnHost.java, bound to [local_cluster] catalog_host (127.0.0.1 by default)."""
    jars = tmp_path / "jars"
    (jars / "iceberg-rest").mkdir(parents=True)
    (jars / "iceberg-rest" / "iceberg-open-api-1.11.0-test-fixtures.jar").write_bytes(b"")
    keys = Credentials("KEY", "SECRET", "us-east-1")

    def catalog(**host: str) -> tuple[LocalStack, list[str]]:
        stack = LocalStack(LocalClusterSettings(data_dir=tmp_path / "stack", jars_dir=jars, **host))
        return stack, stack.catalog(keys).argv

    stack, argv = catalog()
    assert "-Dlineage.rest.host=127.0.0.1" in argv
    assert argv[-1] == str(REST_SERVER_SOURCE) and REST_SERVER_SOURCE.is_file()
    assert "org.apache.iceberg.rest.RESTCatalogServer" not in argv  # its main binds every interface
    assert stack.catalog_uri == "http://127.0.0.1:8281"
    stack, argv = catalog(catalog_host="0.0.0.0")
    assert "-Dlineage.rest.host=0.0.0.0" in argv
    assert stack.catalog_uri == "http://127.0.0.1:8281"  # clients on this machine still use loopback
    assert catalog(catalog_host="10.1.2.3")[0].catalog_uri == "http://10.1.2.3:8281"
    assert catalog(catalog_host="::1")[0].catalog_uri == "http://[::1]:8281"
