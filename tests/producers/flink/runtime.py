"""What both Flink producer jobs share: a Flink home whose lib/ holds the OpenLineage and Kafka jars, the
Flink options of conf/flink/, and the stdin protocol with the test that drives them.

Runs inside a Flink venv (.venv-flink1 or .venv-flink2), never in the main one: no ``lineage`` imports.
Import this before anything starts PyFlink's Java gateway: :func:`use_flink_lib` must run first.

Protocol with the test (tests/integration/test_flink_producers.py): a job prints ``SUBMITTED <job id>``
once Flink accepted it and ``FINISHED`` / ``CANCELLED`` / ``FAILED <reason>`` when it ends; a job told to
wait for a command reads one line from stdin (``cancel``); every job then stays alive until stdin is
closed, so the OpenLineage Kafka producer (asynchronous) has sent everything the test waits for.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import string
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_LINE = re.compile(r"^([A-Za-z0-9_.\-]+)\s*:\s*(.*)$")


def temporary_lib_dir(prefix: str) -> Path:
    """A fresh folder for :func:`use_flink_lib`, removed when the job's process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path


def use_flink_lib(lib_dir: Path, extra_jars: Path) -> None:
    """Point PyFlink's gateway JVM at ``lib_dir``: the wheel's own lib/ jars plus every jar of ``extra_jars``.

    The same as copying the jars into ``$FLINK_HOME/lib`` of a cluster: they load with Flink's own classes
    (parent-first), not per job. ``FLINK_HOME`` must be set too, or PyFlink resets ``FLINK_LIB_DIR``.
    """
    import pyflink

    home = Path(pyflink.__file__).resolve().parent
    jars = sorted(extra_jars.glob("*.jar"))
    if not jars:
        raise SystemExit(f"no jars in {extra_jars}: run `make flink-setup`")
    lib_dir.mkdir(parents=True, exist_ok=True)
    for jar in [*sorted((home / "lib").glob("*.jar")), *jars]:
        link = lib_dir / jar.name
        if not link.exists():
            link.symlink_to(jar)
    os.environ["FLINK_HOME"] = str(home)
    os.environ["FLINK_LIB_DIR"] = str(lib_dir)


def flink_options(path: Path, **values: object) -> dict[str, str]:
    """The ``key: value`` lines of a conf/flink/*.yaml file, ``${name}`` replaced by ``values``.

    Those files are flat Flink configuration (valid for Flink 1.x flink-conf.yaml and 2.x config.yaml);
    quotes around a value are dropped, comments and blank lines ignored.
    """
    options: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(string.Template(line).substitute({k: str(v) for k, v in values.items()}))
        if match is None:
            raise ValueError(f"{path}: not a 'key: value' line: {raw!r}")
        key, value = match.groups()
        options[key] = value.strip().strip('"')
    return options


def say(message: str) -> None:
    print(message, flush=True)


def wait_for_command() -> str:
    """The next line the test sends ('' when it closed stdin)."""
    return sys.stdin.readline().strip()


def linger() -> None:
    """Keep the JVM (and its OpenLineage Kafka producer) alive until the test closes stdin."""
    sys.stdin.read()
