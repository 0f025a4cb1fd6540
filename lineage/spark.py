"""The one place that builds a SparkSession (every job receives it from here)."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from lineage.io.scans import ScanTally
from lineage.settings import CatalogSettings, Settings, load_settings

log = logging.getLogger(__name__)


def read_defaults_file(path: Path) -> dict[str, str]:
    """Parse a ``spark-defaults.conf`` style file: ``key<whitespace>value`` lines, ``#`` comments."""
    props: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split(None, 1)
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected 'key value', got {line!r}")
        props[parts[0]] = parts[1].strip()
    return props


def extra_jars(jars_dir: str) -> list[str]:
    """Jars from ``make jars`` that PySpark does not already ship (same artifact, other version)."""
    if not jars_dir:
        return []
    folder = Path(jars_dir).expanduser().resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist: run `make jars` (Maven fetches the pinned jars)")
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(p) for p in folder.glob("*.jar") if _artifact(p.name) not in shipped)


_JAR = re.compile(r"(?P<artifact>.+?)-(?P<version>\d+(\.\d+)*([-.][A-Za-z0-9]+)*)\.jar")


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients``; ``x_2.13-1.0.jar`` -> ``x_2.13``."""
    match = _JAR.fullmatch(jar_name)
    return match.group("artifact") if match else jar_name.removesuffix(".jar")


def catalog_conf(catalog: CatalogSettings) -> dict[str, str]:
    """The ``spark.sql.catalog.<name>*`` properties that register the Iceberg catalog in a session."""
    # Other processes (the ingestion, other builds, pyiceberg writers) commit to the same tables; a cached
    # table would serve a stale snapshot to this session, so load the current metadata on every access.
    props = {f"spark.sql.catalog.{catalog.name}": "org.apache.iceberg.spark.SparkCatalog"}
    for key, value in {"cache-enabled": "false", **catalog.spark_properties()}.items():
        props[f"spark.sql.catalog.{catalog.name}.{key}"] = value
    return props


def executor_env(names: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """``spark.executorEnv.<NAME>`` for the named variables set in the driver's environment.

    How credentials the driver has (e.g. ``AWS_ACCESS_KEY_ID``) reach executors on other machines without
    being written into any file. Spark redacts properties whose names look secret in its UI and event log.
    """
    return {f"spark.executorEnv.{name}": environ[name] for name in names if environ.get(name)}


def spark_properties(
    settings: Settings, app_name: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every property the session starts with, lowest precedence first."""
    props: dict[str, str] = {}
    if settings.spark.defaults_file.is_file():
        props.update(read_defaults_file(settings.spark.defaults_file))
    props["spark.app.name"] = f"{settings.spark.app_name_prefix}-{app_name}"
    props["spark.sql.shuffle.partitions"] = str(settings.spark.shuffle_partitions)
    props["spark.driver.memory"] = settings.spark.driver_memory
    if settings.spark.master:
        props["spark.master"] = settings.spark.master
    env = os.environ if environ is None else environ
    # No master and no spark-submit gateway: build_session runs local[*].
    master = settings.spark.master or ("" if "PYSPARK_GATEWAY_PORT" in env else "local[*]")
    if settings.spark.local_loopback and master.startswith("local"):
        # Spark binds its driver RPC and block manager to every interface by default, unauthenticated.
        props["spark.driver.bindAddress"] = LOOPBACK
        props["spark.driver.host"] = LOOPBACK
    jars = extra_jars(settings.spark.jars_dir)
    if jars:
        props["spark.jars"] = ",".join(jars)
        # JDBC's DriverManager only sees drivers on the system class path (SQLite catalog).
        props["spark.driver.extraClassPath"] = ":".join(jars)
    props.update(catalog_conf(settings.catalog))
    props.update(executor_env(settings.spark.executor_env, os.environ if environ is None else environ))
    props.update(settings.spark.auth_properties())
    props.update(settings.spark.conf)
    return props


LOOPBACK = "127.0.0.1"


def build_session(settings: Settings, app_name: str) -> SparkSession:
    """Create (or reuse) the SparkSession for one job."""
    if settings.catalog.embedded:
        for folder in settings.catalog.embedded_folders().values():
            folder.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    # spark-submit starts this process with a gateway to its JVM and decides the master itself; a plain
    # `python jobs/...` runs locally, its Python workers on this interpreter (the venv), not on PATH's.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if not settings.spark.master:
            builder = builder.master("local[*]")
        if settings.spark.local_loopback and (settings.spark.master or "local").startswith("local"):
            # The web UI binds to SPARK_LOCAL_IP (all interfaces without it); the JVM starts after this.
            os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    for key, value in spark_properties(settings, app_name).items():
        builder = builder.config(key, value)
    if ScanTally.enabled():
        # The tally reads each step's statements from the SQL status store: keep them until it has.
        builder = builder.config("spark.sql.ui.retainedExecutions", "2000")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    context = spark.sparkContext
    # The application id finds the run again in the master's UI and the history server.
    log.info("Spark application %s on %s", context.applicationId, context.master)
    return spark


def main(argv: list[str] | None = None) -> int:
    """Print the extra jars for spark-submit: ``--jars`` (comma-separated) or ``--classpath`` (colon)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lineage.spark", description=main.__doc__)
    parser.add_argument("format", choices=["jars", "classpath"])
    args = parser.parse_args(argv)
    jars = extra_jars(load_settings().spark.jars_dir)
    print(("," if args.format == "jars" else ":").join(jars))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
