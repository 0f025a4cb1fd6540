"""A scale-out stack on one machine, from the package registries only (no containers).

Every service is a process in its own session, with its configuration, log and pid file in
``<data_dir>/<service>/``, bound to 127.0.0.1 (the REST catalog to ``catalog_host``, loopback unless set):

- ``s3``: S3Proxy (Maven Central ``org.gaul:s3proxy``), the S3 API over ``<data_dir>/s3/data`` (a bucket is
  a folder, an object a file). It accepts only the keys this module generates on first start and keeps in
  ``<data_dir>/credentials.json`` (mode 600); clients get them as ``AWS_*`` environment variables
  (``python -m lineage.cluster env``), never from a settings file.
- ``catalog``: Iceberg's REST catalog server (``org.apache.iceberg.rest.RESTCatalogServer`` from Maven
  Central, the server of the apache/iceberg-rest-fixture image) over a JdbcCatalog on the SQLite file
  ``<data_dir>/catalog/catalog.db``, so the catalog survives a restart; table metadata and data go to
  ``s3://<bucket>/warehouse``. That server has no host setting (it listens on every interface), so it runs
  behind ``RestCatalogOnHost.java`` (beside this module, started from source by the JDK): the same catalog
  and servlet on ``catalog_host:catalog_port``. It authenticates no client: keep it on loopback.
- ``master`` and ``worker-<n>``: Spark standalone from the pyspark wheel's ``bin/spark-class`` (the wheel
  has no ``sbin/start-*.sh``). Workers have ``worker_cores`` cores and ``worker_memory`` each. Their RPC
  is authenticated and encrypted (``spark.authenticate``, ``spark.network.crypto.enabled``) with a secret
  generated on first start into ``<data_dir>/spark-auth.secret`` (mode 600); the daemons read it from a
  properties file of the same mode (a ``-D`` option would show it to every user in the process list),
  the jobs through ``[spark] auth_secret_file``, and the worker hands it to its executors itself.
- ``history``: Spark's history server over the event logs the jobs write to ``s3a://<bucket>/spark-events``;
  its REST API (``/api/v1/applications/<id>/executors``) tells which executor ran how many tasks.

``python -m lineage.cluster start|stop|status`` (``make cluster-start`` / ``make cluster-stop``) use the
``[local_cluster]`` settings; the tests and the benchmarks start their own stack on free ports.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.settings import LocalClusterSettings, spark_auth_properties

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 240.0
REST_SERVER_SOURCE = Path(__file__).with_name("RestCatalogOnHost.java")
DAEMON_HEAP = "256m"


class StackError(RuntimeError):
    """The stack cannot start or answer: one line saying which service and where its log is."""


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _http_json(url: str, timeout: float = 3.0) -> Any:
    """The JSON body of a GET, or None when the server does not answer 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read() or b"null") if response.status == 200 else None
    except (OSError, urllib.error.URLError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """True for a running process (a zombie, exited but not yet reaped, is not running)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return True


@dataclass
class Service:
    """One long-running process of the stack, found again through its pid file."""

    name: str
    argv: list[str]
    folder: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid_file(self) -> Path:
        return self.folder / "pid"

    @property
    def log_file(self) -> Path:
        return self.folder / "log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._process is not None and self._process.pid == pid:
            return pid if self._process.poll() is None else None
        return pid if _alive(pid) else None

    def start(self) -> bool:
        """Start the process unless it runs already; True when it was started now."""
        if self.pid() is not None:
            return False
        if _port_open(self.port):
            raise StackError(f"{self.name}: port {self.port} is taken by another process (set another port)")
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self._process = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                cwd=self.cwd or self.folder,
                start_new_session=True,
            )
        self.pid_file.write_text(str(self._process.pid))
        return True

    def check(self) -> None:
        """Raise when the process died (instead of waiting for it until the timeout)."""
        if self.pid() is None:
            raise StackError(f"{self.name} exited during start-up; see {self.log_file}")

    def signal(self, signum: int) -> None:
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signum)

    def kill(self) -> None:
        """SIGKILL to the whole process group (a worker and the executors it launched): a lost machine."""
        pid = self.pid()
        self.signal(signal.SIGKILL)
        if pid is not None:
            self._reap(pid, 10.0)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``. Idempotent."""
        pid = self.pid()
        if pid is not None:
            self.signal(signal.SIGTERM)
            if not self._reap(pid, timeout_s):
                self.signal(signal.SIGKILL)
                self._reap(pid, 10.0)
        self.pid_file.unlink(missing_ok=True)

    def _reap(self, pid: int, timeout_s: float) -> bool:
        """Wait until ``pid`` is gone (collecting it when it is our child, so no zombie stays behind)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not _alive(pid):
                if self._process is not None and self._process.pid == pid:
                    self._process.poll()
                return True
            time.sleep(0.2)
        return not _alive(pid)


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    region: str

    def env(self) -> dict[str, str]:
        """The AWS SDKs' standard variables, read by every client (Iceberg S3FileIO, S3A, pyarrow)."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
        }


def _client_host(bind: str) -> str:
    """The host a client on this machine uses for a server bound to ``bind`` (a wildcard: loopback)."""
    host = bind.strip()
    if host in ("", "0.0.0.0", "::", "[::]"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class LocalStack:
    """The services of one stack, from ``[local_cluster]`` settings (paths already absolute)."""

    def __init__(self, settings: LocalClusterSettings) -> None:
        self.settings = settings
        self.root = Path(settings.data_dir)
        self.jars = Path(settings.jars_dir)

    # -- addresses ---------------------------------------------------------------------------------------
    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.settings.s3_port}"

    @property
    def catalog_uri(self) -> str:
        return f"http://{_client_host(self.settings.catalog_host)}:{self.settings.catalog_port}"

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.settings.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://127.0.0.1:{self.settings.master_ui_port}"

    @property
    def history_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.history_port}"

    @property
    def warehouse(self) -> str:
        return f"s3://{self.settings.bucket}/warehouse"

    @property
    def event_log_dir(self) -> str:
        return f"s3a://{self.settings.bucket}/spark-events"

    @property
    def bucket_folder(self) -> Path:
        """Where S3Proxy keeps the bucket's objects (one file per object)."""
        return self.root / "s3" / "data" / self.settings.bucket

    def worker_ui(self, index: int) -> str:
        return f"http://127.0.0.1:{self.settings.worker_ui_port + index}"

    # -- credentials -------------------------------------------------------------------------------------
    @property
    def credentials_file(self) -> Path:
        return self.root / "credentials.json"

    def credentials(self) -> Credentials:
        """The object store's keys: generated on first use, then read back (the file is mode 600)."""
        if not self.credentials_file.is_file():
            fresh = {
                "access_key_id": "LAKE" + secrets.token_hex(8).upper(),
                "secret_access_key": secrets.token_urlsafe(30),
            }
            _write_private(self.credentials_file, json.dumps(fresh, indent=2) + "\n")
        stored = json.loads(self.credentials_file.read_text())
        return Credentials(stored["access_key_id"], stored["secret_access_key"], self.settings.region)

    @property
    def spark_secret_file(self) -> Path:
        return self.root / "spark-auth.secret"

    def spark_secret(self) -> str:
        """The shared secret of Spark's RPC authentication: generated on first use, then read back."""
        if not self.spark_secret_file.is_file():
            _write_private(self.spark_secret_file, secrets.token_urlsafe(32) + "\n")
        return self.spark_secret_file.read_text().strip()

    @property
    def daemon_properties_file(self) -> Path:
        """The properties file of the master and the workers (``--properties-file``)."""
        return self.root / "spark-daemons.conf"

    def daemon_properties(self) -> Path:
        """Write :attr:`daemon_properties_file`: RPC authentication and encryption with the secret."""
        props = spark_auth_properties(self.spark_secret())
        _write_private(self.daemon_properties_file, "".join(f"{k} {v}\n" for k, v in props.items()))
        return self.daemon_properties_file

    # -- services ----------------------------------------------------------------------------------------
    def _jar(self, profile: str, prefix: str) -> Path:
        found = sorted((self.jars / profile).glob(f"{prefix}*.jar"))
        if not found:
            raise StackError(
                f"no {prefix}*.jar in {self.jars / profile}: run `make cluster-setup` (Maven fetches it)"
            )
        return found[-1]

    def _spark_jars(self) -> str:
        folder = self.jars / "cluster-spark"
        jars = sorted(folder.glob("*.jar"))
        if not jars:
            raise StackError(f"no jars in {folder}: run `make cluster-setup` (Maven fetches them)")
        return ":".join(str(j) for j in jars)

    def s3(self) -> Service:
        folder = self.root / "s3"
        return Service(
            "s3",
            [
                "java",
                "-Xmx256m",
                "-jar",
                str(self._jar("s3proxy", "s3proxy-")),
                "--properties",
                "s3proxy.conf",
            ],
            folder,
            self.settings.s3_port,
        )

    def _write_s3_config(self, credentials: Credentials) -> None:
        folder = self.root / "s3"
        (folder / "data").mkdir(parents=True, exist_ok=True)
        props = {
            "s3proxy.endpoint": self.s3_endpoint,
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": credentials.access_key_id,
            "s3proxy.credential": credentials.secret_access_key,
            "jclouds.provider": "filesystem",
            "jclouds.filesystem.basedir": str(folder / "data"),
        }
        _write_private(folder / "s3proxy.conf", "".join(f"{k}={v}\n" for k, v in props.items()))

    def catalog(self, credentials: Credentials) -> Service:
        folder = self.root / "catalog"
        jars = self.jars / "iceberg-rest"
        if not any(jars.glob("iceberg-open-api-*-test-fixtures.jar")):
            raise StackError(f"no REST catalog server in {jars}: run `make cluster-setup` (Maven fetches it)")
        # RESTCatalogServer reads its catalog properties from CATALOG_* variables only: the prefix is
        # dropped, "__" becomes "-", "_" becomes ".": CATALOG_S3_PATH__STYLE__ACCESS=s3.path-style-access.
        env = {
            "CATALOG_URI": f"jdbc:sqlite:file:{folder / 'catalog.db'}",
            "CATALOG_JDBC_SCHEMA__VERSION": "V1",
            "CATALOG_WAREHOUSE": self.warehouse,
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": self.s3_endpoint,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_CLIENT_REGION": self.settings.region,
            "CATALOG_REST_PORT": str(self.settings.catalog_port),
            # Its own S3 keys: the AWS chain of its process, like every other client.
            **credentials.env(),
        }
        return Service(
            "catalog",
            [
                "java",
                "-Xmx256m",
                f"-Dlineage.rest.host={self.settings.catalog_host}",
                "-cp",
                f"{jars}/*",
                str(REST_SERVER_SOURCE),  # RESTCatalogServer's catalog on one address (see that file)
            ],
            folder,
            self.settings.catalog_port,
            env=env,
        )

    def _spark_env(self, **extra: str) -> dict[str, str]:
        return {
            "SPARK_HOME": str(_spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": DAEMON_HEAP,
            **extra,
        }

    def master(self) -> Service:
        spark_class = str(_spark_home() / "bin" / "spark-class")
        return Service(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.settings.master_port),
                "--webui-port",
                str(self.settings.master_ui_port),
                "--properties-file",
                str(self.daemon_properties_file),
            ],
            self.root / "master",
            self.settings.master_port,
            # No REST submission server (it would bind 6066 on every interface).
            env=self._spark_env(SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false"),
        )

    def workers(self) -> list[Service]:
        return [self.worker(i) for i in range(self.settings.workers)]

    def worker(self, index: int) -> Service:
        folder = self.root / f"worker-{index + 1}"
        spark_class = str(_spark_home() / "bin" / "spark-class")
        # Each application copies its --jars and --py-files into the work dir of every worker: delete
        # the folders of finished applications after an hour (checked every 10 minutes).
        cleanup = (
            "-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=600 "
            "-Dspark.worker.cleanup.appDataTtl=3600"
        )
        return Service(
            f"worker-{index + 1}",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.settings.worker_cores),
                "--memory",
                self.settings.worker_memory,
                "--webui-port",
                str(self.settings.worker_ui_port + index),
                "--work-dir",
                str(folder / "work"),
                "--properties-file",
                str(self.daemon_properties_file),
                self.master_url,
            ],
            folder,
            self.settings.worker_ui_port + index,
            env=self._spark_env(SPARK_WORKER_OPTS=cleanup),
        )

    def history(self, credentials: Credentials) -> Service:
        spark_class = str(_spark_home() / "bin" / "spark-class")
        options = {
            "spark.history.fs.logDirectory": self.event_log_dir,
            "spark.history.ui.port": self.settings.history_port,
            "spark.history.fs.update.interval": "2s",
            **{f"spark.hadoop.{k}": v for k, v in self.s3a_properties().items()},
        }
        return Service(
            "history",
            [spark_class, "org.apache.spark.deploy.history.HistoryServer"],
            self.root / "history",
            self.settings.history_port,
            env=self._spark_env(
                SPARK_HISTORY_OPTS=" ".join(f"-D{k}={v}" for k, v in options.items()),
                SPARK_DAEMON_CLASSPATH=self._spark_jars(),
                **credentials.env(),
            ),
        )

    def s3a_properties(self) -> dict[str, str]:
        """Hadoop S3A properties for this object store (credentials come from the environment)."""
        return {
            "fs.s3a.endpoint": self.s3_endpoint,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.endpoint.region": self.settings.region,
            "fs.s3a.connection.ssl.enabled": "false",
        }

    def services(self) -> list[Service]:
        """Every service, in start order (stop goes the other way)."""
        credentials = self.credentials()
        return [
            self.s3(),
            self.catalog(credentials),
            self.master(),
            *self.workers(),
            self.history(credentials),
        ]

    # -- life cycle --------------------------------------------------------------------------------------
    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Start whatever is not running and wait until every service answers. Idempotent."""
        started = time.monotonic()
        deadline = started + timeout_s
        credentials = self.credentials()
        self._write_s3_config(credentials)
        self.daemon_properties()
        s3, catalog, master = self.s3(), self.catalog(credentials), self.master()
        for service in (s3, master):
            service.start()
        self._wait(s3, deadline, lambda: _port_open(self.settings.s3_port))
        self.create_bucket(credentials)
        (self.root / "catalog").mkdir(parents=True, exist_ok=True)
        catalog.start()
        self._wait(master, deadline, lambda: _port_open(self.settings.master_port))
        workers = self.workers()
        for worker in workers:
            worker.start()
        history = self.history(credentials)
        history.start()
        self._wait(catalog, deadline, lambda: _http_json(f"{self.catalog_uri}/v1/config") is not None)
        self._wait(master, deadline, lambda: self.alive_workers() >= len(workers), *workers)
        self._wait(
            history, deadline, lambda: _http_json(f"{self.history_url}/api/v1/applications") is not None
        )
        log.info("stack up in %.0f s", time.monotonic() - started)

    def _wait(self, service: Service, deadline: float, ready: Any, *others: Service) -> None:
        while time.monotonic() < deadline:
            service.check()
            for other in others:
                other.check()
            if ready():
                return
            time.sleep(0.5)
        raise StackError(f"{service.name} did not answer in time; see {service.log_file}")

    def alive_workers(self) -> int:
        state = _http_json(f"{self.master_ui}/json/")
        return int(state.get("aliveworkers", 0)) if isinstance(state, dict) else 0

    def stop(self) -> None:
        """Stop every service (newest first). Idempotent; the data stays."""
        for service in reversed(self.services()):
            service.stop()

    def status(self) -> list[tuple[str, int | None, str]]:
        """(service, pid or None, address) of every service."""
        addresses = [
            self.s3_endpoint,
            self.catalog_uri,
            self.master_url,
            *(self.worker_ui(i) for i in range(self.settings.workers)),
            self.history_url,
        ]
        return [(s.name, s.pid(), a) for s, a in zip(self.services(), addresses, strict=True)]

    def create_bucket(self, credentials: Credentials) -> None:
        """The bucket and the event log prefix, through the S3 API. Idempotent."""
        from pyarrow import fs

        store = fs.S3FileSystem(
            access_key=credentials.access_key_id,
            secret_key=credentials.secret_access_key,
            region=credentials.region,
            endpoint_override=self.s3_endpoint,
            force_virtual_addressing=False,
            allow_bucket_creation=True,
        )
        bucket = self.settings.bucket
        if store.get_file_info(bucket).type == fs.FileType.NotFound:
            store.create_dir(bucket)
        # A folder marker: the history server and the jobs' event log writers require the folder to exist.
        store.create_dir(f"{bucket}/spark-events")

    # -- what the clients need ---------------------------------------------------------------------------
    def client_settings(self) -> dict[str, Any]:
        """Settings of jobs and CLI for this stack (merged over conf/cluster.toml by ``settings_file``)."""
        return {
            "spark": {
                "master": self.master_url,
                "auth_secret_file": str(self.spark_secret_file),
                "conf": {
                    **{f"spark.hadoop.{k}": v for k, v in self.s3a_properties().items()},
                    "spark.eventLog.dir": self.event_log_dir,
                },
            },
            "catalog": {
                "properties": {
                    "uri": self.catalog_uri,
                    "warehouse": self.warehouse,
                    "s3.endpoint": self.s3_endpoint,
                }
            },
            "ingest": {"checkpoint": f"s3a://{self.settings.bucket}/checkpoints/ingest"},
            "local_cluster": self.settings.model_dump(mode="json"),
        }

    def application_executors(self, app_id: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The executors of a finished application and their task counts, from the history server.

        Each entry has ``id``, ``totalTasks``, ``totalDuration`` (the milliseconds its tasks ran, summed),
        ``totalCores`` and ``worker`` (the UI address of the worker that ran it, from the executor's log
        links); the driver is left out.
        """
        url = f"{self.history_url}/api/v1/applications/{app_id}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            # Only a completed application's counts are final (an event log on S3 becomes visible in
            # pieces: the history server may list the application before its last events).
            app = _http_json(url)
            attempts = app.get("attempts", []) if isinstance(app, dict) else []
            # allexecutors: also those that were lost or removed before the end (executors: live ones).
            found = _http_json(f"{url}/allexecutors") if attempts and attempts[-1].get("completed") else None
            if isinstance(found, list):
                out = []
                for executor in found:
                    if executor.get("id") == "driver":
                        continue
                    links = executor.get("executorLogs") or {}
                    link = links.get("stdout") or links.get("stderr") or ""
                    worker = link.split("/logPage", 1)[0]
                    out.append(
                        {
                            "id": executor["id"],
                            "totalTasks": executor["totalTasks"],
                            "totalDuration": executor.get("totalDuration", 0),
                            "totalCores": executor.get("totalCores", 0),
                            "worker": worker,
                        }
                    )
                return out
            time.sleep(1.0)
        raise StackError(f"the history server at {self.history_url} does not know application {app_id}")


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` applied, tables merged key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _toml_key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum()
    return key if bare else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def dump_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """Settings as TOML (tables, strings, numbers, booleans, lists, None left out): enough for ours."""
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}"
        for k, v in data.items()
        if v is not None and not isinstance(v, Mapping)
    ]
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in data.items():
        if isinstance(value, Mapping):
            name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
            text += f"\n[{name}]\n" + dump_toml(value, name)
    return text


def settings_file(base: Path, overrides: Mapping[str, Any], path: Path) -> Path:
    """Write ``base`` (a settings TOML file) with ``overrides`` merged in to ``path``."""
    import tomllib

    merged = deep_merge(tomllib.loads(base.read_text()), overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# {base} with the addresses of one local stack (lineage.cluster.stack)\n" + dump_toml(merged)
    )
    return path
