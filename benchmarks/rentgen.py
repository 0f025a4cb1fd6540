"""Side by side with Data.Rentgen's Kafka consumer, on the same machine, the same topic, the same messages.

Data.Rentgen (PyPI ``data-rentgen``, a FastStream/aiokafka consumer writing to PostgreSQL) is installed in
its own venv (``.venv-rentgen``, Python 3.12+ as its current releases require; see mk/bench.mk) and talks to a
private PostgreSQL cluster from Debian's packages, started here on a free port (``initdb``/``pg_ctl``, run as
the ``postgres`` user when we are root) with default settings. aiokafka cannot talk to Kafka 4.x brokers
(aio-libs/aiokafka#1085), so this stage starts its own Kafka **3.9** broker (KRaft, jars of the Maven
profile ``kafka39``), loads the tier's base part into a 4-partition topic and measures on it, repeated:

1. our ingestion (``run_ingest``, ``availableNow``, fresh catalog each time), exactly as in the ingest stage;
2. Data.Rentgen's consumer with 4 workers (its documented set-up: 4 workers, 4 partitions) on a fresh
   database (migrations and monthly partitions created before the clock starts), a new consumer group, from
   the earliest offset. Its rate is messages / (first batch received ... last batch processed), from the
   timestamps of its own log lines (``Received``, ``Got N messages``, ``Processed``); the group's committed
   offsets are checked against the topic's end afterwards.

Both rates count every message read and stored (valid, duplicate or malformed), JVM / process start
excluded and reported separately.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from benchmarks import measure
from benchmarks.tier import Lake, TierContext
from benchmarks.workload import BASE_TIME, WINDOW, produce
from lineage.io.local_kafka import LocalKafka, create_topic, free_port

RENTGEN_VERSION = "0.7.2"  # keep in step with RENTGEN_VERSION in mk/bench.mk
KAFKA39_JARS = Path(".jars/kafka39")
DATABASE = "data_rentgen"
WORKERS_DEFAULT = 4
STALL_TIMEOUT_S = 300.0  # no new batch for this long: the consumer is stuck
TABLES = ("run", "operation", "input", "output", "dataset", "dataset_symlink", "job", "column_lineage")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \S+:(\d+) (\S+?)(?::\d+)?\s*\[(\w+)\]\s*-?\s*(.*)$"
)
_GOT = re.compile(r"^Got (\d+) messages")


def find_postgres_bin() -> Path | None:
    """The folder of Debian's PostgreSQL server binaries (newest major version), if installed."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return candidates[-1].parent if candidates else None


def unavailable(python: Path) -> str | None:
    """Why the side by side cannot run here (None when it can)."""
    if not python.exists():
        return f"{python} is missing: `make bench-rentgen` installs Data.Rentgen {RENTGEN_VERSION} into it"
    if find_postgres_bin() is None:
        return (
            "PostgreSQL server binaries missing: apt-get install -y postgresql (mk/bench.mk does it as root)"
        )
    if not any(KAFKA39_JARS.glob("kafka_*.jar")):
        return f"no Kafka 3.9 jars in {KAFKA39_JARS}: `make {KAFKA39_JARS}/.fetched` (Maven profile kafka39)"
    return None


@dataclass
class PgCluster:
    """A private PostgreSQL cluster: data folder, port, trust authentication on 127.0.0.1 only."""

    root: Path
    port: int
    bindir: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"

    def _as_owner(self, command: list[str]) -> list[str]:
        # initdb and the server refuse to run as root: use Debian's postgres user then.
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def init(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        command = [str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        done = subprocess.run(
            self._as_owner([*command, "-E", "UTF8", "--no-locale"]), capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr[-2000:]}")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root}"
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_file), "-o", options]
        done = subprocess.run(
            self._as_owner([*command, "-w", "-t", "120", "start"]), capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr[-2000:]}\n{measure.tail(self.log_file)}")

    def stop(self) -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
        subprocess.run(self._as_owner(command), capture_output=True, text=True)

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().splitlines()[0])

    def sql(self, statement: str, database: str = "postgres") -> str:
        command = [
            str(self.bindir.parent / "bin" / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
        ]
        if not Path(command[0]).exists():
            command[0] = "psql"
        done = subprocess.run([*command, "-d", database, "-tAc", statement], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"psql {statement!r} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def url(self) -> str:
        return f"postgresql+asyncpg://postgres:postgres@127.0.0.1:{self.port}/{DATABASE}"

    def version(self) -> str:
        return measure.command_version([str(self.bindir / "postgres"), "--version"])


@dataclass
class ConsumerLog:
    """What Data.Rentgen's log says so far."""

    got: int = 0
    batches: int = 0
    processed: int = 0
    malformed: int = 0
    errors: int = 0
    first_received: float | None = None
    last_processed: float | None = None
    last_progress: float | None = None


def read_consumer_log(path: Path) -> ConsumerLog:
    state = ConsumerLog()
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return state
    for raw in text.splitlines():
        match = _LINE.match(_ANSI.sub("", raw))
        if not match:
            continue
        stamp, _pid, logger, level, message = match.groups()
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()  # local time, as time.time()
        got = _GOT.match(message)
        if message == "Received" and state.first_received is None:
            state.first_received = at
        if got:
            state.got += int(got.group(1))
            state.batches += 1
            state.last_progress = at
        elif message == "Processed":
            state.processed += 1
            state.last_processed = at
            state.last_progress = at
        elif message.startswith("Failed to parse message"):
            state.malformed += 1
        elif level == "ERROR" and logger.startswith("data_rentgen"):
            state.errors += 1  # aiokafka's own errors (coordinator not ready yet, ...) are retried by it
    return state


def rentgen_versions(python: Path) -> dict[str, str]:
    script = (
        "import json, sys, importlib.metadata as m\n"
        "names = ['data-rentgen', 'faststream', 'aiokafka', 'asyncpg', 'sqlalchemy', 'pydantic']\n"
        "out = {n: m.version(n) for n in names}\n"
        "out['python'] = sys.version.split()[0]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-500:]}


def effective_settings(python: Path, env: dict[str, str]) -> dict[str, Any]:
    """Data.Rentgen's consumer settings as it resolves them (defaults + our config file), password masked."""
    script = (
        "import json\n"
        "from data_rentgen.consumer.settings import ConsumerApplicationSettings\n"
        "s = ConsumerApplicationSettings()\n"
        "dump = s.model_dump(mode='json', include={'kafka', 'consumer', 'producer'})\n"
        "print(json.dumps(dump, default=str))\n"
    )
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True, env=env, timeout=120)
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-1000:]}


def side_by_side(run: TierContext) -> dict[str, Any]:

    python = run.config.rentgen_python.absolute()  # not resolve(): the venv's python is a symlink
    reason = unavailable(python)
    if reason:
        return {"status": "skipped", "reason": reason}
    bindir = find_postgres_bin()
    assert bindir is not None
    work = run.work / "rentgen"
    work.mkdir(parents=True, exist_ok=True)
    topic = run.topic
    broker = LocalKafka(
        data_dir=work / "kafka39",
        jars_dir=KAFKA39_JARS.resolve(),
        port=free_port(),
        controller_port=free_port(),
        max_message_bytes=run.max_message_bytes,
        partitions=4,
        heap=run.settings.local_kafka.heap,
    )
    cluster = PgCluster(run.config.results_dir.resolve().parent / "pg", free_port(), bindir)
    result: dict[str, Any] = {
        "versions": rentgen_versions(python),
        "postgres": cluster.version(),
        "kafka_broker": sorted(p.name for p in KAFKA39_JARS.glob("kafka_2.13-*.jar")),
        "workers": run.config.rentgen_workers,
    }
    try:
        broker.start()
        create_topic(broker.bootstrap_servers, topic, 4, run.max_message_bytes)
        # Data.Rentgen's consumer republishes what it cannot read there; the broker creates no topic itself.
        create_topic(broker.bootstrap_servers, f"{topic}__malformed", 1, run.max_message_bytes)
        loaded = produce(
            broker.bootstrap_servers, topic, run.workload.messages("base"), run.max_message_bytes
        )
        result["messages"] = loaded["messages"]
        cluster.init()
        cluster.start()
        # Alternate the two consumers, so that changes in the machine's load hit both alike.
        ours: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for i in range(1, run.config.repeat + 1):
            lake = Lake(work / f"ours-{i}")
            data = run.spark_stage(
                "ingest", f"rentgen-ours-{i}", lake.overrides(broker.bootstrap_servers, topic)
            )
            data["messages_per_s"] = data["rows_in"] / data["work_s"]
            ours.append(data)
            shutil.rmtree(lake.root, ignore_errors=True)
            result["ours"] = {
                "runs": ours,
                "messages_per_s": measure.summarize(r["messages_per_s"] for r in ours),
                "peak_mib": measure.summarize(r["peak_mib"] for r in ours),
            }
            theirs.append(
                _consume_once(run, cluster, python, broker.bootstrap_servers, topic, i, loaded["messages"])
            )
            result["theirs"] = {"runs": theirs}
            run.results["stages"]["rentgen"] = {**result, "status": "running"}
            run.save()
        done = [r for r in theirs if r.get("complete") and r.get("messages_per_s")]
        result["theirs"] = {
            "runs": theirs,
            "messages_per_s": measure.summarize(r["messages_per_s"] for r in done),
            "startup_s": measure.summarize(r["startup_s"] for r in done),
            "consumer_peak_mib": measure.summarize(r["consumer_peak_mib"] for r in done),
            "postgres_peak_mib": measure.summarize(r["postgres_peak_mib"] for r in done),
            "settings": theirs[0].get("settings") if theirs else None,
        }
        if done and ours:
            result["ratio"] = (
                result["ours"]["messages_per_s"]["median"] / result["theirs"]["messages_per_s"]["median"]
            )
        if len(done) < len(theirs):
            result["status"] = "partial"
        if theirs and theirs[-1] in done:
            # The last run's database is still there: ask its server the CLI's questions.
            try:
                result["endpoint"] = _lineage_endpoint(run, cluster, python)
            except Exception as exc:
                result["endpoint"] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[-4000:]}
    except Exception as exc:
        if "ours" not in result:
            raise
        # Keep what was measured: our side, and whatever Data.Rentgen runs finished.
        result.update(status="partial", error=f"{type(exc).__name__}: {exc}"[-4000:])
    finally:
        cluster.stop()
        broker.stop()
        if not run.config.keep:
            shutil.rmtree(work / "kafka39", ignore_errors=True)
            shutil.rmtree(cluster.root, ignore_errors=True)
    return result


def _rentgen_env(config_file: Path, config: dict[str, Any]) -> dict[str, str]:
    """The environment of a Data.Rentgen process reading ``config``, written to ``config_file``."""
    config_file.write_text(json.dumps(config, indent=2))  # JSON is YAML
    env = {**os.environ, "DATA_RENTGEN_CONFIG_FILE": str(config_file)}
    env.pop("PYTHONPATH", None)
    return env


def _spawn(command: list[str], out: IO[bytes], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """A Data.Rentgen process in its own session (so its whole tree can be stopped), output to ``out``."""
    return subprocess.Popen(
        command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
        start_new_session=True,
    )  # fmt: skip


def _lineage_endpoint(run: TierContext, cluster: PgCluster, python: Path) -> dict[str, Any]:
    """Data.Rentgen's server on the last consumer run's database, timed by :mod:`rentgen_api`."""
    from benchmarks import rentgen_api
    from benchmarks.queries import pick_nodes

    nodes: dict[str, tuple[str, int]] = {}
    for which, (dataset, _why) in pick_nodes(run.workload.estate).items():
        found = cluster.sql(rentgen_api.dataset_id_sql(dataset.namespace, dataset.name), DATABASE)
        if not found:
            raise rentgen_api.EndpointError(f"no dataset {dataset.namespace}/{dataset.name} in Data.Rentgen")
        nodes[which] = (f"dataset:{dataset.namespace}/{dataset.name}", int(found))
    work = run.work / "rentgen"
    config = {
        "database": {"url": cluster.url()},
        "auth": {"access_token": {"secret_key": uuid.uuid4().hex}, "personal_tokens": {"enabled": False}},
        # Its default serves the docs' static files from a source checkout's folder, absent from the wheel.
        "server": {"static_files": {"enabled": False}},
    }
    env = _rentgen_env(work / "config-server.yml", config)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [str(python), "-m", "data_rentgen.server", "--host", "127.0.0.1", "--port", str(port)]
    with (run.logs / "rentgen-server.log").open("wb") as out:
        process = _spawn(command, out, env, work)
        server = measure.TreeSampler([process.pid])
        server.__enter__()
        try:
            ready_s = rentgen_api.wait_ready(base_url, lambda: process.poll() is None)
            result = rentgen_api.measure_endpoint(
                base_url,
                rentgen_api.token(base_url),
                nodes,
                since=BASE_TIME - timedelta(days=1),
                runs=run.config.query_runs,
            )
        finally:
            measure.stop_tree(process, timeout_s=30)
            server.__exit__()
    result.update(
        command=" ".join(["python", *command[1:3], "--host", "127.0.0.1", "--port", "<free port>"]),
        ready_s=round(ready_s, 2),
        server_peak_mib=round(server.peak / measure.MIB, 1),
    )
    return result


def _consume_once(
    run: TierContext, cluster: PgCluster, python: Path, bootstrap: str, topic: str, number: int, expected: int
) -> dict[str, Any]:
    work = run.work / "rentgen"
    cluster.sql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    cluster.sql(f"CREATE DATABASE {DATABASE}")
    group = f"bench-{run.tier_name}-{number}-{uuid.uuid4().hex[:6]}"
    config = {
        "database": {"url": cluster.url()},
        "kafka": {"bootstrap_servers": [bootstrap]},
        "consumer": {"topics_list": [topic], "group_id": group, "auto_offset_reset": "earliest"},
        "producer": {"main_topic": topic, "malformed_topic": f"{topic}__malformed"},
    }
    env = _rentgen_env(work / f"config-{number}.yml", config)
    setup_log = run.logs / f"rentgen-setup-{number}.log"
    first = BASE_TIME.replace(day=1)
    last = (BASE_TIME + timedelta(days=run.tier.days) * WINDOW + timedelta(days=32)).replace(day=1)
    for step in (
        ["-m", "data_rentgen.db.migrations", "upgrade", "head"],
        [
            "-m",
            "data_rentgen.db.scripts.create_partitions",
            "--start",
            first.date().isoformat(),
            "--end",
            last.date().isoformat(),
            "--granularity",
            "month",
        ],
    ):
        done = measure.run_measured([str(python), *step], log=setup_log, env=env, cwd=work, timeout_s=600)
        if done.returncode != 0:
            raise RuntimeError(f"Data.Rentgen {step[1]} failed:\n{measure.tail(setup_log)}")
    settings = effective_settings(python, env)
    log_file = run.logs / f"rentgen-consumer-{number}.log"
    command = [str(python), "-m", "data_rentgen.consumer", "--workers", str(run.config.rentgen_workers)]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]
    started = time.time()
    outcome: dict[str, Any] = {"group": group, "settings": settings, "expected": expected}
    with log_file.open("wb") as out:
        process = _spawn(command, out, env, work)
        consumer = measure.TreeSampler([process.pid])
        postgres = measure.TreeSampler([cluster.postmaster_pid()])
        consumer.__enter__()
        postgres.__enter__()
        try:
            state = _wait_consumed(process, log_file, expected)
        finally:
            measure.stop_tree(process, timeout_s=30)
            consumer.__exit__()
            postgres.__exit__()
    outcome["committed"] = _committed(bootstrap, group, topic)
    outcome.update(
        got=state.got,
        batches=state.batches,
        malformed=state.malformed,
        errors=state.errors,
        complete=state.got >= expected and state.processed >= state.batches,
        consumer_peak_mib=round(consumer.peak / measure.MIB, 1),
        postgres_peak_mib=round(postgres.peak / measure.MIB, 1),
        rows={table: int(cluster.sql(f'SELECT count(*) FROM "{table}"', DATABASE)) for table in TABLES},
    )
    if state.first_received is not None and state.last_processed is not None:
        window = state.last_processed - state.first_received
        outcome["work_s"] = round(window, 3)
        outcome["startup_s"] = round(state.first_received - started, 3)
        outcome["messages_per_s"] = state.got / window if window > 0 else None
    return outcome


def _wait_consumed(process: subprocess.Popen[bytes], log_file: Path, expected: int) -> ConsumerLog:
    state = read_consumer_log(log_file)
    started = time.time()
    while True:
        time.sleep(1.0)
        state = read_consumer_log(log_file)
        if state.got >= expected and state.processed >= state.batches:
            return state
        if process.poll() is not None:
            return state
        last = state.last_progress or started
        if time.time() - last > STALL_TIMEOUT_S:
            return state


def _committed(bootstrap: str, group: str, topic: str) -> dict[str, int]:
    """Committed offsets of the consumer group vs. the end of the topic (summed over partitions)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": "false"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        tps = [TopicPartition(topic, p) for p in partitions]
        committed = consumer.committed(tps, timeout=10)
        end = sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps)
        return {"committed": sum(max(tp.offset, 0) for tp in committed), "end": end}
    finally:
        consumer.close()
