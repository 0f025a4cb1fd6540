"""``spark-submit`` of our jobs to a cluster, the command line a user or a scheduler runs.

What travels with an application:

- **Our code**: the project's wheel, built from the repository (``pip wheel --no-deps``), passed to
  ``--py-files`` under a ``.zip`` name. Spark puts ``.zip``/``.egg``/``.jar`` py-files on ``sys.path`` and
  ignores a ``.whl`` (it is a zip all the same). The driver imports the package from it, and so do the
  executors' Python workers for the one Python function of ours they run: the ingestion's redaction, an
  Arrow UDF that needs pyarrow (which pyspark's Arrow support needs anyway) and nothing else of our
  dependencies. The rest of the jobs are DataFrame plans executed by the JVM. That is why a packed
  virtualenv (``--archives env.tar.gz#env`` with ``spark.pyspark.python=./env/bin/python``), which ships
  every dependency to every executor, would only cost time and disk here. The driver's own dependencies
  (pyiceberg, pydantic, openlineage-python) are installed where it runs: the submitting machine in client
  mode, the container image on Kubernetes (docs/deployment.md).
- **Jars**: ``--jars`` with the folders and files of ``[spark] submit_jars`` (the Iceberg runtime, the Kafka
  source, iceberg-aws-bundle, hadoop-aws ...), minus what PySpark already ships.
- **Settings**: the same ``LINEAGE_CONFIG`` file and ``LINEAGE__*`` variables as everywhere; the job reads
  them on the driver. Credentials stay in the environment (``[spark] executor_env`` names the variables the
  executors get).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lineage.settings import Settings
from lineage.spark import extra_jars

REPO = Path(__file__).resolve().parents[2]
JOBS = {"ingest": "jobs/ingest_events.py", "build": "jobs/build_lineage.py"}


def spark_submit() -> Path:
    """The ``spark-submit`` script of the installed pyspark wheel."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


def build_package(out_dir: Path, repo: Path = REPO) -> Path:
    """Build the project's wheel into ``out_dir`` and return it under a ``.zip`` name for ``--py-files``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", scratch, str(repo)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (wheel,) = Path(scratch).glob("*.whl")
        target = out_dir / (wheel.stem + ".zip")
        shutil.copyfile(wheel, target)
    return target


def package_is_stale(package: Path, repo: Path = REPO) -> bool:
    """True when a source file of the package is newer than the built ``package``."""
    if not package.is_file():
        return True
    built = package.stat().st_mtime
    sources = [repo / "pyproject.toml", *(repo / "lineage").rglob("*")]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


def submit_jars(settings: Settings) -> list[str]:
    """The jars for ``--jars``: every configured folder's jars PySpark lacks, and configured jar files."""
    jars: list[str] = []
    for entry in settings.spark.submit_jars:
        path = Path(entry).expanduser().resolve()
        if path.is_dir():
            jars += extra_jars(str(path))
        elif path.is_file():
            jars.append(str(path))
        else:
            raise FileNotFoundError(f"spark.submit_jars names {entry}, which does not exist")
    return jars


def submit_command(
    settings: Settings,
    job: str,
    job_args: Sequence[str] = (),
    *,
    py_files: Path,
    conf: dict[str, str] | None = None,
) -> list[str]:
    """The ``spark-submit`` argument list for one of our jobs (``ingest`` or ``build``).

    Client deploy mode: Spark's standalone cluster manager cannot run a Python driver in the cluster
    ("Cluster deploy mode is currently not supported for python applications on standalone clusters");
    on Kubernetes and YARN the same command takes ``--deploy-mode cluster`` (docs/deployment.md).
    """
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}: one of {', '.join(JOBS)}")
    if not settings.spark.master:
        raise ValueError("spark.master is not set: which cluster? (e.g. spark://host:7077 in the settings)")
    argv = [
        str(spark_submit()),
        "--master",
        settings.spark.master,
        "--deploy-mode",
        "client",
        # The driver JVM starts before our code runs: its heap can only be given here.
        "--driver-memory",
        settings.spark.driver_memory,
        "--py-files",
        str(py_files),
    ]
    jars = submit_jars(settings)
    if jars:
        argv += ["--jars", ",".join(jars)]
    for key, value in (conf or {}).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(REPO / JOBS[job]), *job_args]


def submit_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for spark-submit: the driver and executors run this Python unless told otherwise."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env
