"""Trino on the scale-out stack's lake: one single-node server reading the REST catalog and the object store.

``make trino-setup`` fetches Trino's server without plugins (``io.trino:trino-server-core``, a tar.gz) and the
Iceberg connector (``io.trino:trino-iceberg``, a zip of the plugin's jars) from Maven Central, both at the
version of ``conf/maven/pom.xml`` (``trino.version``), and :func:`install` keeps what runs: the server's
``lib/`` and the connector as the one plugin, in ``.jars-cluster/trino/``. The tarball's launcher is not used:
the server runs as ``java -cp lib/* io.trino.server.TrinoServer`` with the options of its ``jvm.config``.

The server (:class:`TrinoOnStack`, ``python -m lineage.cluster.trino start|stop|status``,
``make trino-start``) is a coordinator that also runs the tasks (``node-scheduler.include-coordinator``),
bound to 127.0.0.1 on one port, with a 1 GiB heap. Its one catalog, ``lake``, is the Iceberg connector on
the stack's REST catalog and S3 store (:func:`catalog_properties`): the file a team copies into its own
Trino's ``etc/catalog/``. The object store's keys are read from the server's environment
(``${ENV:AWS_ACCESS_KEY_ID}``): no file holds them. The catalog is read-only (``iceberg.security=read_only``):
Spark's jobs are the lake's only writers.

Trino 476 needs Java 24 or newer; :func:`java_home` finds one (``TRINO_JAVA_HOME``, else a JDK of
``/usr/lib/jvm`` whose ``release`` says 24+).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from lineage.cluster.stack import LocalStack, Service, StackError, _port_open

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 300.0
MIN_JAVA = 24
DEFAULT_PORT = 8480
HEAP = "1G"
CATALOG = "lake"
# Trino's recommended JVM options (its jvm.config), less what only matters on big machines.
JVM_OPTIONS = [
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=32M",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:ReservedCodeCacheSize=256M",
    "-XX:PerBytecodeTrapLimit=0",
    "-XX:PerMethodTrapLimit=0",
    "-XX:PerMethodRecompilationCutoff=10000",
    "-XX:PerBytecodeRecompilationCutoff=10000",
    "-Djdk.attach.allowAttachSelf=true",
    "-Djdk.nio.maxCachedBufferSize=2000000",
    "-XX:+EnableDynamicAgentLoading",
    "-Dfile.encoding=UTF-8",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--sun-misc-unsafe-memory-access=allow",
    "--enable-native-access=ALL-UNNAMED",
]


# -- installation ----------------------------------------------------------------------------------------
def install(archives: Path, target: Path) -> Path:
    """Unpack the server's ``lib/`` and the Iceberg plugin from the archives Maven copied into ``archives``.

    ``target/lib`` holds the server's class path, ``target/plugin/iceberg`` the connector; the server's own
    optional plugins (spooling, exchange, Python functions, ...) and launcher are left out. Returns
    ``target``; ``archives`` is deleted.
    """
    servers = sorted(archives.glob("trino-server-core-*.tar.gz"))
    plugins = sorted(archives.glob("trino-iceberg-*.zip"))
    if len(servers) != 1 or len(plugins) != 1:
        raise StackError(f"expected one trino-server-core tar.gz and one trino-iceberg zip in {archives}")
    for sub in ("lib", "plugin"):
        shutil.rmtree(target / sub, ignore_errors=True)
    lib, plugin = target / "lib", target / "plugin" / "iceberg"
    lib.mkdir(parents=True)
    plugin.mkdir(parents=True)
    with tarfile.open(servers[0]) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) == 3 and parts[1] == "lib" and parts[2].endswith(".jar"):
                _copy_stream(tar.extractfile(member), lib / parts[2])
    with zipfile.ZipFile(plugins[0]) as zipped:
        for info in zipped.infolist():
            name = Path(info.filename).name
            if not info.is_dir() and name.endswith(".jar"):
                with zipped.open(info) as source:
                    _copy_stream(source, plugin / name)
    version = re.search(r"trino-server-core-(\d+)", servers[0].name)
    (target / "VERSION").write_text((version.group(1) if version else "unknown") + "\n")
    shutil.rmtree(archives)
    return target


def _copy_stream(source: Any, path: Path) -> None:
    if source is None:
        raise StackError(f"cannot read {path.name} from its archive")
    with path.open("wb") as out:
        shutil.copyfileobj(source, out)


def java_version(home: Path) -> int | None:
    """The feature version of the JDK at ``home`` (its ``release`` file), or None."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else None


def java_home(environ: Mapping[str, str] | None = None, jvm_root: Path = Path("/usr/lib/jvm")) -> Path:
    """A JDK Trino runs on: ``TRINO_JAVA_HOME``, else ``JAVA_HOME`` when it is 24+, else the newest 24+ JDK
    under ``jvm_root``."""
    import os

    env = os.environ if environ is None else environ
    if env.get("TRINO_JAVA_HOME"):
        home = Path(env["TRINO_JAVA_HOME"])
        version = java_version(home)
        if version is None or version < MIN_JAVA:
            raise StackError(f"TRINO_JAVA_HOME={home} is not a Java {MIN_JAVA}+ JDK (Trino needs one)")
        return home
    candidates = [Path(env["JAVA_HOME"])] if env.get("JAVA_HOME") else []
    if jvm_root.is_dir():
        candidates += sorted(jvm_root.iterdir())
    found = [(java_version(c) or 0, c) for c in candidates if (c / "bin" / "java").is_file()]
    usable = [pair for pair in found if pair[0] >= MIN_JAVA]
    if not usable:
        raise StackError(
            f"Trino needs Java {MIN_JAVA}+: none under {jvm_root} (set TRINO_JAVA_HOME to a JDK's folder)"
        )
    return max(usable, key=lambda pair: pair[0])[1]


# -- configuration ---------------------------------------------------------------------------------------
def catalog_properties(stack: LocalStack, *, keys_from_env: bool = True) -> dict[str, str]:
    """The Iceberg connector on ``stack``'s REST catalog and object store (``etc/catalog/lake.properties``).

    The keys are Trino's environment variable references, resolved when the server loads the catalog.
    """
    props = {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": stack.catalog_uri,
        "iceberg.rest-catalog.warehouse": stack.warehouse,
        "iceberg.security": "read_only",
        "fs.native-s3.enabled": "true",
        "s3.endpoint": stack.s3_endpoint,
        "s3.region": stack.settings.region,
        "s3.path-style-access": "true",
    }
    if keys_from_env:
        props["s3.aws-access-key"] = "${ENV:AWS_ACCESS_KEY_ID}"
        props["s3.aws-secret-key"] = "${ENV:AWS_SECRET_ACCESS_KEY}"
    return props


def _properties(values: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


class TrinoOnStack:
    """One Trino server for ``stack``: its files in ``<data_dir>/trino/``, the software in
    ``<jars_dir>/trino``."""

    def __init__(self, stack: LocalStack, port: int = DEFAULT_PORT, home: Path | None = None) -> None:
        self.stack = stack
        self.port = port
        self.home = home or stack.jars / "trino"
        self.folder = stack.root / "trino"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def version(self) -> str:
        try:
            return (self.home / "VERSION").read_text().strip()
        except OSError:
            return "unknown"

    def write_config(self) -> Path:
        """``etc/`` of the server: node, server and log settings, and the ``lake`` catalog."""
        etc = self.folder / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        config = {
            "node.environment": "lineage",
            "node.id": "lineage-trino-1",
            "node.internal-address": "127.0.0.1",
            "node.bind-ip": "127.0.0.1",  # the HTTP server's one address (Airlift's default: every interface)
            "coordinator": "true",
            "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(self.port),
            "discovery.uri": self.url,
            "query.max-memory": "512MB",
            "query.max-memory-per-node": "512MB",
            "plugin.dir": str(self.home / "plugin"),
            "catalog.config-dir": str(etc / "catalog"),
        }
        (etc / "config.properties").write_text(_properties(config))
        (etc / "log.properties").write_text("io.trino=INFO\n")
        (etc / "catalog" / f"{CATALOG}.properties").write_text(_properties(catalog_properties(self.stack)))
        return etc

    def service(self) -> Service:
        lib = self.home / "lib"
        if not any(lib.glob("*.jar")) or not any((self.home / "plugin" / "iceberg").glob("*.jar")):
            raise StackError(f"no Trino in {self.home}: run `make trino-setup` (Maven fetches it)")
        java = java_home() / "bin" / "java"
        etc = self.folder / "etc"
        return Service(
            "trino",
            [
                str(java),
                f"-Xmx{HEAP}",
                *JVM_OPTIONS,
                f"-Dconfig={etc / 'config.properties'}",
                f"-Dlog.levels-file={etc / 'log.properties'}",
                "-cp",
                f"{lib}/*",
                "io.trino.server.TrinoServer",
            ],
            self.folder,
            self.port,
            env=self.stack.credentials().env(),
        )

    def launch(self) -> Service:
        """Write the configuration and start the process unless it runs (without waiting for it)."""
        self.write_config()
        service = self.service()
        service.start()
        return service

    def wait_ready(self, service: Service, deadline: float) -> None:
        """Wait until the server takes queries (``/v1/info`` says it is no longer starting)."""
        while time.monotonic() < deadline:
            service.check()
            info = _info(self.url)
            if info is not None and info.get("starting") is False:
                return
            time.sleep(0.5)
        raise StackError(f"trino did not answer in time; see {service.log_file}")

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> float:
        """Start the server unless it runs, wait until it takes queries; the seconds that took."""
        started = time.monotonic()
        self.wait_ready(self.launch(), started + timeout_s)
        took = time.monotonic() - started
        log.info("trino %s up in %.0f s at %s", self.version, took, self.url)
        return took

    def reported_startup_s(self) -> float | None:
        """The start-up time the server logged ("Server startup completed in 46.24s"), or None."""
        try:
            found = re.findall(r"Server startup completed in ([\d.]+)s", (self.folder / "log").read_text())
        except OSError:
            return None
        return float(found[-1]) if found else None

    def stop(self) -> None:
        if self.folder.is_dir():
            Service("trino", [], self.folder, self.port).stop()

    def pid(self) -> int | None:
        return Service("trino", [], self.folder, self.port).pid()


def _info(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{url}/v1/info", timeout=3) as response:
            body = json.loads(response.read())
            return body if isinstance(body, dict) else None
    except (OSError, urllib.error.URLError, ValueError):
        return None


# -- the client protocol ---------------------------------------------------------------------------------
class TrinoQueryError(RuntimeError):
    """Trino refused or failed a statement: its error name and message."""


def execute(
    url: str, sql: str, *, user: str = "lineage", catalog: str = CATALOG, timeout_s: float = 300.0
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Run ``sql`` through Trino's HTTP protocol (POST ``/v1/statement``, then follow ``nextUri``).

    Returns the columns (name, type and typeSignature as the server gives them) and the rows as JSON values.
    """
    headers = {"X-Trino-User": user, "X-Trino-Catalog": catalog, "X-Trino-Time-Zone": "UTC"}
    request = urllib.request.Request(f"{url}/v1/statement", data=sql.encode(), headers=headers, method="POST")
    deadline = time.monotonic() + timeout_s
    columns: list[dict[str, Any]] = []
    rows: list[list[Any]] = []
    for page in _pages(request, headers, deadline):
        if "error" in page:
            error = page["error"]
            raise TrinoQueryError(f"{error.get('errorName')}: {error.get('message')}")
        columns = page.get("columns") or columns
        rows += page.get("data") or []
    return columns, rows


def _pages(
    request: urllib.request.Request, headers: dict[str, str], deadline: float
) -> Iterator[dict[str, Any]]:
    while True:
        if time.monotonic() > deadline:
            raise TrinoQueryError("timed out waiting for the query's results")
        with urllib.request.urlopen(request, timeout=60) as response:
            page = json.loads(response.read())
        yield page
        next_uri = page.get("nextUri")
        if not next_uri:
            return
        request = urllib.request.Request(next_uri, headers=headers)


# -- values ------------------------------------------------------------------------------------------------
def json_rows(columns: Sequence[Mapping[str, Any]], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """:func:`execute`'s rows as objects by column name, each value as ``lineage sql --format json`` writes
    the same value read by another engine (:func:`json_value`)."""
    signatures = [column.get("typeSignature") or {"rawType": column.get("type", "")} for column in columns]
    names = [column["name"] for column in columns]
    return [
        {
            name: json_value(value, signature)
            for name, signature, value in zip(names, signatures, row, strict=True)
        }
        for row in rows
    ]


def json_value(value: Any, signature: Mapping[str, Any]) -> Any:
    """A value of Trino's JSON protocol, typed by its column's ``typeSignature``: rows become objects by
    their field names, arrays lists, maps objects, timestamps ISO-8601 text (``Z`` for UTC), decimals (sent
    as text) integers at scale 0 and text otherwise, NaN and infinities (sent as text) floats."""
    from lineage.cli.sql import plain  # the CLI's JSON form of a value, which this one is compared with

    if value is None:
        return None
    raw = signature.get("rawType", "")
    arguments = signature.get("arguments") or []
    if raw == "row":
        fields = [argument["value"] for argument in arguments]
        return {
            (field.get("fieldName") or {}).get("name") or f"field{i}": json_value(v, field["typeSignature"])
            for i, (field, v) in enumerate(zip(fields, value, strict=True))
        }
    if raw == "array":
        return [json_value(v, arguments[0]["value"]) for v in value]
    if raw == "map":
        return {str(k): json_value(v, arguments[1]["value"]) for k, v in value.items()}
    if raw in ("timestamp with time zone", "timestamp"):
        return plain(_timestamp(value, zoned=raw != "timestamp"), for_json=True)
    if raw == "decimal":
        return plain(Decimal(value), for_json=True)
    if raw in ("real", "double") and isinstance(value, str):
        return float(value)
    return value


def _timestamp(text: str, *, zoned: bool) -> datetime:
    """Trino's timestamp text (``2026-11-22 12:00:00.000``, zoned with ``UTC``, an offset or a zone name)."""
    if not zoned:
        return datetime.fromisoformat(text)
    local, _, zone = text.rpartition(" ")
    at = datetime.fromisoformat(local)
    if zone in ("UTC", "Z"):
        return at.replace(tzinfo=UTC)
    if zone[:1] in "+-":
        return datetime.fromisoformat(local + zone)
    return at.replace(tzinfo=ZoneInfo(zone))


# -- command line ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    from lineage.settings import load_settings

    parser = argparse.ArgumentParser(
        prog="python -m lineage.cluster.trino",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    unpack = commands.add_parser("install", help="unpack the archives Maven fetched (make trino-setup)")
    unpack.add_argument("archives", type=Path)
    unpack.add_argument("target", type=Path)
    for name in ("start", "stop", "status", "catalog"):
        command = commands.add_parser(name)
        command.add_argument("--port", type=int, default=DEFAULT_PORT)
    query = commands.add_parser("query", help="one statement, rows as JSON lines")
    query.add_argument("sql")
    query.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "install":
            install(args.archives, args.target)
            return 0
        trino = TrinoOnStack(LocalStack(load_settings().local_cluster), port=args.port)
        if args.command == "start":
            if _port_open(args.port) and trino.pid() is None:
                raise StackError(f"trino: port {args.port} is taken by another process (--port)")
            took = trino.start()
            print(f"  trino {trino.version} at {trino.url} (catalog {CATALOG}), ready in {took:.0f} s")
        elif args.command == "stop":
            trino.stop()
        elif args.command == "status":
            pid = trino.pid()
            print(f"  trino      pid {pid}  {trino.url}" if pid else "  trino      not running")
        elif args.command == "catalog":
            sys.stdout.write(_properties(catalog_properties(trino.stack)))
        elif args.command == "query":
            columns, rows = execute(trino.url, args.sql)
            names = [c["name"] for c in columns]
            for row in rows:
                print(json.dumps(dict(zip(names, row, strict=True)), default=str))
    except (StackError, TrinoQueryError) as error:
        print(f"trino: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
