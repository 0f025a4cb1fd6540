"""What a job checks before it starts Spark: the master, the catalog and the object store answer.

Started against a wrong configuration, a job otherwise fails late and deep: Spark's standalone client
retries an unreachable master for about a minute, Iceberg's and Hadoop's S3 clients retry refused requests,
and what finally surfaces is a JVM stack trace. These checks take a second or two, need no JVM, and raise
:class:`ConfigError` with one line naming what is wrong and where.

The embedded catalog's SQLite file can also be locked by another process, or be (or sit in) a read-only
file system, when the job starts or while it runs: :func:`check_catalog` tries a write transaction and a
file in each folder before the JVM starts, and :func:`catalog_failure` names such an error raised later
(by pyiceberg, SQLAlchemy, or the JVM's SQLite driver and file system) in one line.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lineage.settings import CatalogSettings, KafkaSettings, Settings, is_uri

CONFIG_EXIT = 2  # a setting does not work (or points at something read-only): fix it, then run again
LOCKED_EXIT = 75  # the catalog is locked by another process: try again later (sysexits' EX_TEMPFAIL)
LOCK_WAIT_SECONDS = 5.0  # how long the preflight waits for another process's SQLite transaction


class ConfigError(Exception):
    """A setting points at something that does not answer as it should. One line for the user."""

    exit_code = CONFIG_EXIT


class CatalogLocked(ConfigError):
    """The catalog's database is locked by another process (a transaction that does not end)."""

    exit_code = LOCKED_EXIT


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"')]+)")


def _first_line(exc: BaseException) -> str:
    """The reason in a few words: an OS error's text when one is inside, else the first line."""
    text = str(exc).strip() or type(exc).__name__
    errno = _ERRNO.search(text)
    if errno:
        return errno.group(1).strip().lower()
    return text.splitlines()[0][:300]


def check_master(master: str | None, timeout_s: float = 5.0) -> None:
    """A ``spark://host:port[,host:port]`` master accepts connections (at least one of them)."""
    if not master or not master.startswith("spark://"):
        return  # local[*], yarn, k8s://...: their own clients report clearly enough
    addresses = master.removeprefix("spark://").split(",")
    errors = []
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError) as exc:
            errors.append(f"{address}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
    raise ConfigError(f"Spark master {master} is unreachable ({'; '.join(errors)}); check spark.master")


def check_catalog(catalog: CatalogSettings) -> Any:
    """Open the catalog with pyiceberg and list its namespaces; return the catalog. The embedded catalog's
    folders are created (as the session would) and must be writable; it returns None."""
    if catalog.embedded:
        for what, folder in catalog.embedded_folders().items():
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the {what} {folder}: {exc.strerror}") from exc
            if not os.access(folder, os.W_OK | os.X_OK):
                raise ConfigError(f"the {what} {folder} is not writable")
            try:  # a read-only file system (or attribute) refuses root too, whom os.access lets through
                with tempfile.TemporaryFile(dir=folder, prefix=".lineage-preflight-"):
                    pass
            except OSError as exc:
                raise ConfigError(f"the {what} {folder} is not writable: {exc.strerror}") from exc
        check_sqlite(Path(catalog.sqlite_path))
        return None
    from lineage.io.catalog import open_catalog

    where = catalog.properties.get("uri") or catalog.properties.get("type", "?")
    try:
        iceberg = open_catalog(catalog)
        iceberg.list_namespaces()
    except Exception as exc:
        raise ConfigError(
            f"Iceberg catalog {catalog.name!r} at {where} does not answer: {_first_line(exc)}"
        ) from exc
    return iceberg


def check_sqlite(path: Path, wait_s: float = LOCK_WAIT_SECONDS) -> None:
    """The embedded catalog's SQLite file (when it exists) takes a write within ``wait_s`` (rolled back)."""
    if not path.is_file():
        return  # the session creates it, in a folder checked writable
    try:
        uri = f"{path.resolve().as_uri()}?mode=rw"
        with closing(sqlite3.connect(uri, uri=True, timeout=wait_s, isolation_level=None)) as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            db.execute("BEGIN IMMEDIATE")  # waits for another process's transaction, up to wait_s
            try:
                # A file SQLite could open for reading only fails here, not at the BEGIN.
                db.execute(f"PRAGMA user_version = {version}")
            finally:
                db.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise _sqlite_problem(str(path), str(exc)) or ConfigError(
            f"the catalog database {path} cannot be written: {_first_line(exc)}"
        ) from exc


# What SQLite (Python's sqlite3, sqlite-jdbc) and the file systems (Python, Java, Hadoop) say.
_LOCKED = re.compile(r"database (table )?is locked|SQLITE_BUSY|SQLITE_LOCKED")
_READ_ONLY_DATABASE = re.compile(r"readonly database|SQLITE_READONLY")
_NOT_WRITABLE = re.compile(
    r"readonly database|SQLITE_READONLY|Read-only file system|\[Errno 30\]|Permission denied|"
    r"AccessDeniedException|Operation not permitted|Mkdirs failed"
)


def _locked(where: str, reason: str) -> CatalogLocked:
    return CatalogLocked(
        f"the catalog database {where} is locked by another process ({reason}); run again once it is free"
    )


def _sqlite_problem(where: str, text: str) -> ConfigError | None:
    locked = _LOCKED.search(text)
    if locked:
        return _locked(where, locked.group(0))
    denied = _NOT_WRITABLE.search(text)
    if denied:
        return ConfigError(f"the catalog database {where} (or its folder) is read-only ({denied.group(0)})")
    return None


def catalog_failure(exc: BaseException, catalog: CatalogSettings) -> ConfigError | None:
    """The one line for an error of the catalog's storage raised while a job runs (``exc`` or an error it
    was raised from): a locked or read-only catalog database, a warehouse that cannot be written. None for
    any other error. A Java error's text holds its whole stack, causes included."""
    if catalog.embedded:
        database, warehouse = str(catalog.sqlite_path), str(catalog.warehouse)
    else:
        database = catalog.properties.get("uri") or catalog.properties.get("type", "?")
        warehouse = catalog.properties.get("warehouse") or "\0"  # never in a message
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        locked = _LOCKED.search(text)
        if locked and (catalog.embedded or "sqlite" in text.lower()):
            return _locked(database, locked.group(0))
        # SQLite's own words name the database; a file system's error names the path it refused.
        read_only = _READ_ONLY_DATABASE.search(text)
        denied = read_only or _NOT_WRITABLE.search(text)
        if denied and (read_only or (warehouse not in text and database in text)):
            return ConfigError(
                f"the catalog database {database} (or its folder) is read-only ({denied.group(0)})"
            )
        if denied and warehouse in text:
            return ConfigError(f"the warehouse {warehouse} is not writable ({denied.group(0)})")
        current = current.__cause__ or current.__context__
    return None


def _s3_filesystem(props: dict[str, str]) -> Any:
    """A pyarrow S3 client from Iceberg-style ``s3.*`` properties; credentials default to the AWS chain."""
    from pyarrow import fs

    options: dict[str, Any] = {"force_virtual_addressing": props.get("s3.path-style-access") != "true"}
    endpoint = props.get("s3.endpoint")
    if endpoint:
        options["endpoint_override"] = endpoint
    region = props.get("s3.region") or props.get("client.region")
    if region:
        options["region"] = region
    if props.get("s3.access-key-id"):
        options["access_key"] = props["s3.access-key-id"]
        options["secret_key"] = props.get("s3.secret-access-key")
    return fs.S3FileSystem(**options)


def _s3a_as_iceberg(conf: dict[str, str]) -> dict[str, str]:
    """The S3A settings of ``spark.hadoop.fs.s3a.*`` as Iceberg-style ``s3.*`` properties."""
    s3a = {
        k.removeprefix("spark.hadoop.fs.s3a."): v
        for k, v in conf.items()
        if k.startswith("spark.hadoop.fs.s3a.")
    }
    props = {}
    if "endpoint" in s3a:
        props["s3.endpoint"] = s3a["endpoint"]
    if s3a.get("path.style.access") == "true":
        props["s3.path-style-access"] = "true"
    if "endpoint.region" in s3a:
        props["s3.region"] = s3a["endpoint.region"]
    if "access.key" in s3a:
        props["s3.access-key-id"] = s3a["access.key"]
        props["s3.secret-access-key"] = s3a.get("secret.key", "")
    return props


def check_bucket(location: str, props: dict[str, str], what: str) -> None:
    """The bucket of an ``s3://``/``s3a://`` location exists and the credentials may list it."""
    parts = urlsplit(location)
    if parts.scheme not in ("s3", "s3a", "s3n"):
        return
    from pyarrow import fs

    bucket = parts.netloc
    endpoint = props.get("s3.endpoint", "AWS")
    try:
        store = _s3_filesystem(props)
        info = store.get_file_info(bucket)
        if info.type == fs.FileType.NotFound:
            raise ConfigError(f"{what} {location}: bucket {bucket!r} does not exist at {endpoint}")
        store.get_file_info(fs.FileSelector(bucket, recursive=False, allow_not_found=True))
    except ConfigError:
        raise
    except Exception as exc:
        reason = _first_line(exc)
        if "ACCESS_DENIED" in reason or "InvalidAccessKeyId" in reason or "SignatureDoesNotMatch" in reason:
            reason += " (wrong credentials? the AWS_* variables or s3.access-key-id / s3.secret-access-key)"
        raise ConfigError(f"{what} {location}: object store {endpoint} refused: {reason}") from exc


def _table_location(iceberg: Any, namespace: str, table: str) -> str:
    """The table's location, "" when it does not exist yet (or the catalog cannot say)."""
    try:
        return str(iceberg.load_table((namespace, table)).location())
    except Exception:
        return ""


def check_kafka(kafka: KafkaSettings, timeout_s: float = 10.0) -> None:
    """The brokers answer and accept our credentials (checked when ``kafka.security`` is configured: a
    wrong password otherwise surfaces as a JVM stack trace from Spark's Kafka source, or as retries)."""
    from confluent_kafka.admin import AdminClient

    security = kafka.security
    try:
        config: dict[str, Any] = {"bootstrap.servers": kafka.bootstrap_servers, **security.librdkafka()}
    except (ValueError, OSError) as exc:
        raise ConfigError(_first_line(exc)) from exc
    errors: list[str] = []
    # librdkafka would print every failed attempt to stderr; keep the first error for one line instead.
    config |= {"log_level": "0", "error_cb": lambda err: errors.append(err.str())}
    admin = AdminClient(config)
    try:
        admin.list_topics(timeout=timeout_s)
    except Exception as exc:
        admin.poll(1)  # serves the error callbacks, where an authentication failure is reported
        who = f" as {security.username!r} ({security.sasl_mechanism})" if security.sasl else ""
        auth = [e for e in errors if "auth" in e.lower() or "sasl" in e.lower()]
        reason = (auth or errors or [_first_line(exc)])[0]
        if auth:
            raise ConfigError(
                f"Kafka at {kafka.bootstrap_servers} refused our credentials{who}: {reason}; "
                "check kafka.security (username, LINEAGE__KAFKA__SECURITY__PASSWORD or password_file)"
            ) from exc
        raise ConfigError(
            f"Kafka at {kafka.bootstrap_servers} does not answer{who} over {security.protocol}: {reason}"
        ) from exc


def check_settings(settings: Settings, *, checkpoint: bool) -> None:
    """Every check that applies to these settings (``checkpoint``: the job writes the ingest checkpoint)."""
    check_master(settings.spark.master)
    try:
        settings.spark.auth_properties()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if checkpoint and settings.kafka.security.protocol != "PLAINTEXT":
        check_kafka(settings.kafka)
    iceberg = check_catalog(settings.catalog)
    if iceberg is not None:
        props = {**iceberg.properties, **settings.catalog.properties}
        # Where the tables are: the warehouse when the catalog tells it, else the raw table's location.
        warehouse = props.get("warehouse", "")
        if not is_uri(warehouse):
            warehouse = _table_location(iceberg, settings.catalog.raw_namespace, "events")
        if is_uri(warehouse):
            check_bucket(warehouse, props, "warehouse")
        if checkpoint and is_uri(str(settings.ingest.checkpoint)):
            s3a = _s3a_as_iceberg(settings.spark.conf) or props
            check_bucket(str(settings.ingest.checkpoint), s3a, "checkpoint")
