"""What every job under ``jobs/`` does before its work: log lines, settings, preflight, the SparkSession."""

from __future__ import annotations

import logging
import sys
from typing import Any

from pyspark.sql import SparkSession

from lineage.io.preflight import ConfigError, check_settings
from lineage.settings import Settings, load_settings
from lineage.spark import build_session


def start_job(job: str, *, checkpoint: bool, **overrides: Any) -> tuple[Settings, SparkSession]:
    """Settings (conf/lineage.toml, ``LINEAGE__*`` env, ``overrides``) checked before any JVM starts, then the
    session named after the job.

    Args:
        job: the job's name (``build_lineage``): the log prefix and, with dashes, the Spark application name.
        checkpoint: whether the job needs a writable streaming checkpoint (ingestion only).
        overrides: settings sections passed to :func:`load_settings`.

    Returns:
        the settings and the session. On a setting that does not work: one line on stderr naming it, then
        ``SystemExit(2)``.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = load_settings(**overrides)
    try:
        check_settings(settings, checkpoint=checkpoint)
    except ConfigError as exc:
        print(f"{job}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return settings, build_session(settings, job.replace("_", "-"))
