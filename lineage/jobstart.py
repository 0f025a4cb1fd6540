"""What every job under ``jobs/`` does before its work: log lines, settings, preflight, the SparkSession."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from lineage.io.preflight import ConfigError, catalog_failure, check_settings
from lineage.settings import Settings, load_settings
from lineage.spark import build_session
from lineage.stopping import JobStopped


def start_job(job: str, *, checkpoint: bool, **overrides: Any) -> tuple[Settings, SparkSession]:
    """Settings (conf/lineage.toml, ``LINEAGE__*`` env, ``overrides``) checked before any JVM starts, then the
    session named after the job.

    Args:
        job: the job's name (``build_lineage``): the log prefix and, with dashes, the Spark application name.
        checkpoint: whether the job needs a writable streaming checkpoint (ingestion only).
        overrides: settings sections passed to :func:`load_settings`.

    Returns:
        the settings and the session. On a setting that does not work: one line on stderr naming it, then
        ``SystemExit(2)``; on an embedded catalog locked by another process ``SystemExit(75)``.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = load_settings(**overrides)
    try:
        check_settings(settings, checkpoint=checkpoint)
    except ConfigError as exc:
        print(f"{job}: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    try:
        return settings, build_session(settings, job.replace("_", "-"))
    except Py4JJavaError as exc:
        master = settings.spark.master or ""
        if not master.startswith("spark://"):
            raise
        print(f"{job}: {refused_by_master(master, settings, exc)}", file=sys.stderr)
        raise SystemExit(2) from None


@contextlib.contextmanager
def catalog_failures(job: str, settings: Settings) -> Iterator[None]:
    """An error of the catalog's storage in the block (a catalog database locked by another process or
    read-only, a warehouse that cannot be written: :func:`lineage.io.preflight.catalog_failure`) ends the
    job with one line on stderr naming it and the path or URI, and ``SystemExit`` 75 (locked: run again
    later) or 2 (read-only). Any other error goes on (``LINEAGE_DEBUG=1``: every error does)."""
    try:
        yield
    except Exception as exc:
        problem = None if isinstance(exc, JobStopped) else catalog_failure(exc, settings.catalog)
        if problem is None or os.environ.get("LINEAGE_DEBUG"):
            raise
        print(f"{job}: {problem}", file=sys.stderr)
        raise SystemExit(problem.exit_code) from None


def refused_by_master(master: str, settings: Settings, exc: Py4JJavaError) -> str:
    """One line for a standalone master whose port answers (the preflight checked it) but that never
    registered the application: Spark retries for about a minute, then fails the session's start.

    A master that authenticates RPC (``spark.authenticate``) answers that way a driver without its secret
    or with another one; the driver's log shows the cause among the retries ("Expected SaslMessage").
    """
    java = str(exc.java_exception).splitlines()[0] if exc.java_exception is not None else str(exc)
    if settings.spark.auth_secret is None and settings.spark.auth_secret_file is None:
        hint = (
            "if it authenticates RPC (spark.authenticate), set its secret in spark.auth_secret_file or "
            "LINEAGE__SPARK__AUTH_SECRET"
        )
    else:
        hint = "if it authenticates RPC, its secret is not the one of spark.auth_secret(_file)"
    return f"Spark master {master} did not accept the application ({java[:200]}); {hint}"
