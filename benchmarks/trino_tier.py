"""Trino beside ``lineage sql`` on a tier's lake (issue 39): ``python -m benchmarks trino-tier``.

The ``lineage sql`` rows of the queries stage ask DuckDB (a new CLI process each time) two questions
(:data:`benchmarks.queries.SQL_QUESTIONS`) of a tier's embedded lake. This piece asks Trino the same
questions, with the same SQL text, on a copy of the tables they read:

1. a stack of its own (:class:`lineage.cluster.stack.LocalStack` on free ports under ``--work``; its Spark
   master, worker and history server are stopped at once: only S3Proxy and the REST catalog are used);
2. the tables the questions read (``lineage.runs`` and ``lineage.run_io``), copied from the seed lake's
   embedded catalog into the stack's REST catalog and object store by one local Spark session that has
   both catalogs (``CREATE TABLE ... AS SELECT``), in a child process so its JVM is gone before anything
   is timed. The seed lake is only read: its ``catalog.db`` is copied first (the JDBC catalog may write
   to the file it opens) and Spark and the CLI open that copy, which names the seed's own data files;
3. Trino (:class:`lineage.cluster.trino.TrinoOnStack`, 1 GiB heap) on the stack, and ``lineage sql
   --format json`` on the seed lake: each question once untimed through each engine, then ``--query-runs``
   timed pairs (Trino, then the CLI), so both see the same state of a shared machine. Trino's time is the
   wall time from the POST of ``/v1/statement`` to the last page of rows (a warm server: no process
   start); the CLI's is a new process each time, as the queries stage measures it. The two engines' rows
   must be equal (:func:`same_rows`).

Everything it started (Trino, the stack) is stopped at the end, also on error. The results JSON holds the
machine, the versions, the load average around the timed runs, the copy's time and every timing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import measure
from benchmarks.queries import SQL_QUESTIONS, spread

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
COPY_DRIVER_MEMORY = "3g"
# The copied tables keep the seed's table properties that change how the files are written.
COPY_PROPERTIES = {"format-version": "2", "write.parquet.compression-codec": "zstd"}


# -- pure parts ------------------------------------------------------------------------------------------
def tables_read(questions: Iterable[tuple[str, str]], namespace: str = "lineage") -> list[str]:
    """The tables of ``namespace`` the questions' SQL names (``lineage.runs`` -> ``runs``), sorted."""
    pattern = re.compile(rf"\b{re.escape(namespace)}\.([A-Za-z_][A-Za-z0-9_]*)")
    return sorted({m.group(1) for _, sql in questions for m in pattern.finditer(sql)})


def _canonical(value: Any) -> Any:
    """A JSON value with integral floats as integers (one engine's ``2.0`` is another's ``2``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def canonical_rows(rows: Sequence[dict[str, Any]], *, ordered: bool) -> list[str]:
    """Rows as sorted-key JSON texts, numbers made comparable; sorted unless the question orders them."""
    texts = [json.dumps(_canonical(row), sort_keys=True) for row in rows]
    return texts if ordered else sorted(texts)


def ordered_question(sql: str) -> bool:
    """True when the outermost query has an ORDER BY (the row order is then part of the answer)."""
    return re.search(r"\border\s+by\b", sql, re.IGNORECASE) is not None


def same_rows(trino: Sequence[dict[str, Any]], duckdb: Sequence[dict[str, Any]], sql: str) -> bool:
    """Trino's rows and DuckDB's are the same answer to ``sql`` (in order when it has an ORDER BY)."""
    ordered = ordered_question(sql)
    return canonical_rows(trino, ordered=ordered) == canonical_rows(duckdb, ordered=ordered)


# -- the copy (a child process: its JVM is gone before anything is timed) ----------------------------------
def copy_tables(spec: dict[str, Any]) -> dict[str, Any]:
    """``CREATE TABLE stack.<ns>.<t> AS SELECT * FROM lake.<ns>.<t>`` for each table of ``spec``: one local
    Spark session with the seed's JDBC catalog (``lake``: the name its ``catalog.db`` files the tables
    under) and the stack's REST catalog (``stack``)."""
    from pyspark.sql import SparkSession

    from lineage.settings import CatalogSettings
    from lineage.spark import catalog_conf, extra_jars

    seed = CatalogSettings(
        name="lake", sqlite_path=Path(spec["seed_catalog"]), warehouse=Path(spec["seed_warehouse"])
    )
    stack = CatalogSettings(name="stack", properties=spec["stack_properties"])
    jars = [*extra_jars(str(REPO / ".jars" / "spark")), *spec["aws_jars"]]
    builder = SparkSession.builder.master("local[2]").appName("lineage-trino-copy")
    conf = {
        "spark.driver.memory": COPY_DRIVER_MEMORY,
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.jars": ",".join(jars),
        "spark.driver.extraClassPath": ":".join(jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        **catalog_conf(seed),
        **catalog_conf(stack),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    started = time.monotonic()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    session_s = time.monotonic() - started
    namespace = spec["namespace"]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS stack.{namespace}")
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in COPY_PROPERTIES.items())
    tables: dict[str, Any] = {}
    for table in spec["tables"]:
        source, target = f"lake.{namespace}.{table}", f"stack.{namespace}.{table}"
        mark = time.monotonic()
        spark.sql(f"DROP TABLE IF EXISTS {target}")
        spark.sql(
            f"CREATE TABLE {target} USING iceberg TBLPROPERTIES ({properties}) AS SELECT * FROM {source}"
        )
        seconds = time.monotonic() - mark

        def files(name: str) -> tuple[int, int]:
            row = spark.sql(f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b FROM {name}.files").first()
            if row is None:
                raise RuntimeError(f"no answer from {name}.files")
            return int(row["n"]), int(row["b"] or 0)

        seed_files, seed_bytes = files(source)
        copy_files, copy_bytes = files(target)
        rows = [spark.table(name).count() for name in (source, target)]
        if rows[0] != rows[1]:
            raise RuntimeError(f"{target}: {rows[1]} rows copied of {rows[0]}")
        tables[table] = {
            "rows": rows[0],
            "copy_s": round(seconds, 1),
            "seed_data_files": seed_files,
            "seed_bytes": seed_bytes,
            "copy_data_files": copy_files,
            "copy_bytes": copy_bytes,
        }
    spark.stop()
    return {"session_start_s": round(session_s, 1), "tables": tables}


# -- the run ---------------------------------------------------------------------------------------------
def _versions(trino_version: str, java_home: Path) -> dict[str, str]:
    from lineage.cluster.trino import java_version

    out = {"python": sys.version.split()[0]}
    for dist in ("pyspark", "pyiceberg", "duckdb", "duckdb-ext-iceberg"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    out["java (Spark, S3Proxy, REST catalog)"] = measure.command_version(["java", "-version"])
    out["trino"] = trino_version
    out["java (Trino)"] = f"{java_version(java_home)} ({java_home})"
    for jar in sorted((REPO / ".jars" / "spark").glob("iceberg-spark-runtime-*.jar")):
        out["iceberg-spark-runtime"] = jar.name.removeprefix("iceberg-spark-runtime-").removesuffix(".jar")
    return out


def _cli_env(seed_catalog: Path, seed_warehouse: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LINEAGE__CATALOG__SQLITE_PATH": str(seed_catalog),
        "LINEAGE__CATALOG__WAREHOUSE": str(seed_warehouse),
        "LINEAGE__OPENLINEAGE__ENABLED": "false",
    }


def _ask_trino(url: str, sql: str) -> tuple[list[dict[str, Any]], float]:
    from lineage.cluster.trino import execute, json_rows

    started = time.monotonic()
    columns, rows = execute(url, sql)
    return json_rows(columns, rows), time.monotonic() - started


def run_trino_tier(
    seed_lake: Path, work: Path, results: Path, runs: int, command: str, label: str = "", tier: str = "M"
) -> dict[str, Any]:
    """Copy, start, ask and compare (see the module's docstring); the results, also written to ``results``."""
    from lineage.cluster.stack import LocalStack
    from lineage.cluster.trino import TrinoOnStack, java_home
    from lineage.io.local_kafka import free_port
    from lineage.settings import LocalClusterSettings

    seed_warehouse = (seed_lake / "warehouse").resolve()
    out: dict[str, Any] = {
        "schema": 1,
        "tier": tier,
        "label": label,
        "command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed_lake": str(seed_lake),
        "load_average_start": measure.load_average(),
        "machine": measure.machine(),
    }
    work.mkdir(parents=True, exist_ok=True)
    seed_catalog = work / "seed-catalog.db"  # the seed's catalog.db is never opened: a copy is
    shutil.copy2(seed_lake / "catalog.db", seed_catalog)
    stack_dir = work / "stack"
    shutil.rmtree(stack_dir, ignore_errors=True)
    ports = [free_port() for _ in range(5)]
    stack = LocalStack(
        LocalClusterSettings(
            data_dir=stack_dir,
            jars_dir=REPO / ".jars-cluster",
            workers=1,
            worker_memory="512m",
            master_port=ports[0],
            master_ui_port=ports[1],
            history_port=ports[2],
            s3_port=ports[3],
            catalog_port=ports[4],
            worker_ui_port=free_port(),
        )
    )
    trino = TrinoOnStack(stack, port=free_port())
    questions = list(SQL_QUESTIONS)
    tables = tables_read(questions)
    try:
        mark = time.monotonic()
        stack.start()
        credentials = stack.credentials()
        for service in (stack.history(credentials), *stack.workers(), stack.master()):
            service.stop()  # only the object store and the REST catalog are used
        out["stack_start_s"] = round(time.monotonic() - mark, 1)
        spec = {
            "seed_catalog": str(seed_catalog),
            "seed_warehouse": str(seed_warehouse),
            "namespace": "lineage",
            "tables": tables,
            "aws_jars": [
                str(j) for j in sorted((stack.jars / "cluster-spark").glob("iceberg-aws-bundle-*.jar"))
            ],
            "stack_properties": {
                "type": "rest",
                "uri": stack.catalog_uri,
                "warehouse": stack.warehouse,
                "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
                "s3.endpoint": stack.s3_endpoint,
                "s3.path-style-access": "true",
                "client.region": stack.settings.region,
            },
        }
        mark = time.monotonic()
        copied = subprocess.run(
            [sys.executable, "-m", "benchmarks.trino_tier", "copy", json.dumps(spec)],
            env={**os.environ, **credentials.env()},
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
        )
        (work / "copy.log").write_text(copied.stdout + copied.stderr)
        if copied.returncode != 0:
            raise RuntimeError(f"the copy failed ({copied.returncode}); see {work / 'copy.log'}")
        out["copy"] = {
            **json.loads(copied.stdout.strip().splitlines()[-1]),
            "total_s": round(time.monotonic() - mark, 1),
            "how": "one local[2] Spark session (driver 3g), both catalogs: CREATE TABLE stack.lineage.<t> "
            "USING iceberg AS SELECT * FROM lake.lineage.<t> (the seed's)",
        }
        log.info("copied %s in %.0f s", ", ".join(tables), out["copy"]["total_s"])
        out["trino"] = {"startup_s": round(trino.start(), 1)}
        out["trino"]["reported_startup_s"] = trino.reported_startup_s()
        version = _ask_trino(trino.url, "SELECT version() AS v")[0][0]["v"]
        out["trino"].update(heap="1G", url_port=trino.port, version=version)
        out["versions"] = _versions(str(version), java_home())
        out["questions"] = [{"query": q, "sql": sql, "trino_sql": sql} for q, sql in questions]
        # Each question: once untimed through each engine (their answers), then the timed runs in pairs
        # (Trino, then lineage sql), so both engines see the same state of a shared machine.
        script = Path(sys.executable).parent / "lineage"
        env = _cli_env(seed_catalog, seed_warehouse)
        out["load_average_before_timed"] = measure.load_average()
        for index, entry in enumerate(out["questions"]):
            trino_answer, trino_first_s = _ask_trino(trino.url, entry["trino_sql"])
            cli = [str(script), "sql", "--format", "json", entry["sql"]]
            mark = time.monotonic()
            check = subprocess.run(cli, env=env, capture_output=True, text=True, check=False)
            cli_first_s = time.monotonic() - mark
            if check.returncode != 0:
                raise RuntimeError(f"lineage sql exited {check.returncode}: {check.stderr.strip()[-2000:]}")
            answer = json.loads(check.stdout)
            trino_walls, walls, peaks, loads = [], [], [], []
            for i in range(1, runs + 1):
                trino_walls.append(_ask_trino(trino.url, entry["trino_sql"])[1])
                done = measure.run_measured(cli, log=work / f"sql-{index}-{i}.log", env=env)
                if done.returncode != 0:
                    raise RuntimeError(f"lineage sql run {i} exited {done.returncode}; log {done.log}")
                walls.append(done.wall_s)
                peaks.append(done.peak_rss_mib)
                loads.append(measure.load_average()[0])
            entry["trino"] = {
                "rows": len(trino_answer),
                "first_s": round(trino_first_s, 3),
                **spread(trino_walls),
            }
            entry["lineage_sql"] = {
                "rows": len(answer),
                "first_s": round(cli_first_s, 3),
                **spread(walls),
                "peak_mib": round(max(peaks), 1),
            }
            entry["load_1min_after_each_pair"] = loads
            entry["answers_equal"] = same_rows(trino_answer, answer, entry["sql"])
            entry["ordered"] = ordered_question(entry["sql"])
            entry["trino_answer"] = trino_answer
            entry["lineage_sql_answer"] = answer
        out["load_average_after_timed"] = measure.load_average()
        out["answers_equal"] = all(e["answers_equal"] for e in out["questions"])
    finally:
        trino.stop()
        stack.stop()
        out["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        out["load_average_end"] = measure.load_average()
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """``copy <spec JSON>``: the child process of the copy; prints its summary as the last line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trino_tier")
    parser.add_argument("command", choices=["copy"])
    parser.add_argument("spec")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    print(json.dumps(copy_tables(json.loads(args.spec))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
