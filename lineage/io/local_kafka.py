"""A single-node Apache Kafka broker (KRaft: broker + controller in one JVM) on 127.0.0.1.

Started from the jars `make jars` fetched from Maven Central (conf/maven/pom.xml, profile ``kafka``):
``kafka.tools.StorageTool format`` once, then ``kafka.Kafka``. Used by `make kafka-start` / `make kafka-stop`
and by the test fixtures (on free ports, so tests never collide with a running demo).

The broker never creates a topic by itself (``auto.create.topics.enable=false``): a topic that appeared on a
producer's first message, or on a client's metadata request, would have the broker's defaults
(``compression.type=producer``, the broker-wide size limit), not the settings our topics need. Our code
creates its topics first with :func:`create_topic` (``make kafka-start`` creates ``kafka.topic``).

Command line: ``python -m lineage.io.local_kafka start|stop|status``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.settings import RECORD_HEADROOM_BYTES, KafkaSecuritySettings, LocalKafkaSettings, load_settings

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 90.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class LocalKafka:
    """One broker whose data, configuration, log and pid file live in ``data_dir``."""

    data_dir: Path
    jars_dir: Path
    port: int
    controller_port: int
    max_message_bytes: int
    partitions: int = 4
    heap: str = "512m"
    # SASL_SSL with SCRAM-SHA-512 on the client listener (TLS certificate made at set-up, SCRAM users
    # created when the storage is formatted). ``users``: name -> password
    # of the clients; the broker authenticates to itself as ``broker`` with a generated password.
    sasl_ssl: bool = False
    users: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(
        cls, local: LocalKafkaSettings, max_message_bytes: int, security: KafkaSecuritySettings | None = None
    ) -> LocalKafka:
        users = {}
        if local.sasl_ssl and security is not None:  # None: stop/status, which need no client user
            if not security.username:
                raise ValueError("local_kafka.sasl_ssl needs kafka.security.username and its password")
            users = {security.username: security.secret()}
        return cls(
            sasl_ssl=local.sasl_ssl,
            users=users,
            data_dir=local.data_dir,
            jars_dir=local.jars_dir,
            port=local.port,
            controller_port=local.controller_port,
            max_message_bytes=max_message_bytes,
            partitions=local.partitions,
            heap=local.heap,
        )

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def _pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def _properties_file(self) -> Path:
        return self.data_dir / "server.properties"

    def _classpath(self) -> str:
        if not any(self.jars_dir.glob("kafka_*.jar")):
            raise FileNotFoundError(
                f"no Kafka broker jars in {self.jars_dir}: run `make jars` (Maven fetches the pinned jars)"
            )
        return str(self.jars_dir / "*")

    @property
    def tls_dir(self) -> Path:
        return self.data_dir / "tls"

    @property
    def ca_file(self) -> Path:
        """The broker's self-signed certificate (PEM): librdkafka clients trust it (``ssl.ca.location``)."""
        return self.tls_dir / "broker-cert.pem"

    @property
    def truststore_file(self) -> Path:
        """The same certificate as a PKCS12 truststore, for JVM clients (Spark's Kafka source)."""
        return self.tls_dir / "truststore.p12"

    def _secret(self, name: str) -> str:
        """A generated password kept in ``tls/<name>`` (owner-only), the same across restarts."""
        path = self.tls_dir / name
        if not path.exists():
            self.tls_dir.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_hex(16))
        return path.read_text().strip()

    @property
    def truststore_password(self) -> str:
        return self._secret("truststore.password")

    def _make_certificates(self) -> None:
        """A key pair and self-signed certificate for 127.0.0.1/localhost (keytool, once)."""
        keystore = self.tls_dir / "broker.p12"
        if keystore.exists() and self.truststore_file.exists():
            return
        store_pw = self._secret("keystore.password")
        keytool = ["keytool", "-noprompt"]
        steps = [
            [
                *keytool, "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
                "-validity", "365", "-dname", "CN=localhost", "-ext", "SAN=ip:127.0.0.1,dns:localhost",
                "-storetype", "PKCS12", "-keystore", str(keystore), "-storepass", store_pw,
            ],
            [
                *keytool, "-exportcert", "-rfc", "-alias", "broker", "-keystore", str(keystore),
                "-storepass", store_pw, "-file", str(self.ca_file),
            ],
            [
                *keytool, "-importcert", "-alias", "broker", "-file", str(self.ca_file),
                "-storetype", "PKCS12", "-keystore", str(self.truststore_file),
                "-storepass", self.truststore_password,
            ],
        ]  # fmt: skip
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"keytool failed: {(done.stderr or done.stdout).strip()[-500:]}")

    def _security_properties(self) -> dict[str, str]:
        store_pw = self._secret("keystore.password")
        broker_pw = self._secret("broker.password")
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="broker" password="{broker_pw}";'
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.tls_dir / "broker.p12"),
            "ssl.keystore.password": store_pw,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.truststore_file),
            "ssl.truststore.password": self.truststore_password,
        }

    def _scram_arguments(self) -> list[str]:
        users = {"broker": self._secret("broker.password"), **self.users}
        return [f"--add-scram=SCRAM-SHA-512=[name={n},password={p}]" for n, p in users.items()]

    def _own_security(self) -> dict[str, str]:
        """The broker's own credentials, for its start-up check and topic creation."""
        if not self.sasl_ssl:
            return {}
        return {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "broker",
            "sasl.password": self._secret("broker.password"),
            "ssl.ca.location": str(self.ca_file),
        }

    def client_security(self, user: str) -> dict[str, str]:
        """librdkafka properties of a client authenticating as ``user`` (empty without SASL_SSL)."""
        if not self.sasl_ssl:
            return {}
        return {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": self.users[user],
            "ssl.ca.location": str(self.ca_file),
        }

    def _write_properties(self) -> None:
        limit = self.max_message_bytes
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": str(self.partitions),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # OpenLineage Spark events reach tens of MB: raise every size limit on the broker side.
            "message.max.bytes": str(limit + RECORD_HEADROOM_BYTES),
            "replica.fetch.max.bytes": str(limit),
            "socket.request.max.bytes": str(max(limit * 2, 104857600)),
            # Topics are created by our code with their settings (create_topic), never by a producer's or
            # a consumer's first request.
            "auto.create.topics.enable": "false",
        }
        if self.sasl_ssl:
            props.update(self._security_properties())
        self._properties_file.touch(mode=0o600)  # holds the broker's own passwords in SASL_SSL mode
        self._properties_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def pid(self) -> int | None:
        """The broker's pid when it is alive, else None."""
        try:
            pid = int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def start(self) -> None:
        """Format the storage on first use, start the broker and wait until it answers. Idempotent."""
        if self.pid() is not None and _port_open(self.port):
            log.info("Kafka already running on %s (pid %s)", self.bootstrap_servers, self.pid())
            return
        if _port_open(self.port):
            raise RuntimeError(f"port {self.port} is taken by another process; set local_kafka.port")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        classpath = self._classpath()
        if self.sasl_ssl:
            self._make_certificates()
        self._write_properties()
        java = ["java", f"-Xmx{self.heap}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath]
        if not (self.data_dir / "logs" / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            # "--cluster-id=" form: a base64 id may start with "-", which would read as an option.
            formatted = subprocess.run(
                [
                    *java,
                    "kafka.tools.StorageTool",
                    "format",
                    f"--cluster-id={cluster_id}",
                    "--config",
                    str(self._properties_file),
                    *(self._scram_arguments() if self.sasl_ssl else []),
                ],
                capture_output=True,
                text=True,
            )
            if formatted.returncode != 0:
                raise RuntimeError(f"formatting Kafka storage failed: {formatted.stderr.strip()[-2000:]}")
        with self.log_file.open("ab") as out:
            process = subprocess.Popen(
                [*java, "kafka.Kafka", str(self._properties_file)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {process.returncode}; see {self.log_file}")
            if _port_open(self.port) and self._metadata_ready():
                log.info("Kafka is up on %s (pid %s)", self.bootstrap_servers, process.pid)
                return
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"Kafka did not answer within {STARTUP_TIMEOUT_S:.0f}s; see {self.log_file}")

    def _metadata_ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        try:
            config: dict[str, Any] = {
                "bootstrap.servers": self.bootstrap_servers,
                "log_level": "0",
                **self._own_security(),
            }
            metadata = AdminClient(config).list_topics(timeout=2)
        except Exception:
            return False
        return bool(metadata.brokers)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout_s``). Idempotent."""
        pid = self.pid()
        if pid is None:
            self._pid_file.unlink(missing_ok=True)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.pid() is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        if self.pid() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self._pid_file.unlink(missing_ok=True)

    def create_topic(self, topic: str, partitions: int | None = None) -> None:
        """Create ``topic`` with raised message size limits, unless it exists."""
        create_topic(
            self.bootstrap_servers,
            topic,
            partitions or self.partitions,
            self.max_message_bytes,
            self._own_security(),
        )


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    max_message_bytes: int,
    security: Mapping[str, str] | None = None,
) -> None:
    """Create ``topic`` (replication 1, ``max.message.bytes`` raised) unless it already exists.

    The topic stores messages uncompressed (``compression.type=uncompressed``): the broker then decompresses
    what a producer compressed and checks the decompressed size against ``max.message.bytes``, so a message
    that is small compressed but over the limit once decompressed is refused at produce time instead of
    reaching the ingestion (the broker compares a compressed batch's own size otherwise). The price is disk:
    the topic holds the JSON as it is.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(security or {})})
    if topic in admin.list_topics(timeout=10).topics:
        return
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=1,
        config={
            "max.message.bytes": str(max_message_bytes + RECORD_HEADROOM_BYTES),
            "compression.type": "uncompressed",
        },
    )
    for future in admin.create_topics([new]).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def delete_topic(
    bootstrap_servers: str, topic: str, security: Mapping[str, str] | None = None, timeout_s: float = 60.0
) -> None:
    """Delete ``topic`` and wait until the brokers no longer list it (nothing to do if it does not exist)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(security or {})})
    if topic not in admin.list_topics(timeout=10).topics:
        return
    for future in admin.delete_topics([topic], operation_timeout=timeout_s).values():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:
            if "UNKNOWN_TOPIC_OR_PART" not in str(exc):
                raise
    deadline = time.monotonic() + timeout_s
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} still listed {timeout_s:.0f}s after its deletion")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lineage.io.local_kafka", description=__doc__)
    parser.add_argument("command", choices=["start", "stop", "status"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = load_settings()
    try:
        broker = LocalKafka.from_settings(
            settings.local_kafka,
            settings.kafka.max_message_bytes,
            settings.kafka.security if args.command == "start" else None,
        )
    except ValueError as exc:
        print(f"local_kafka: {exc}", file=sys.stderr)
        return 2
    if args.command == "start":
        broker.start()
        broker.create_topic(settings.kafka.topic)  # the broker's own credentials in SASL_SSL mode
        print(
            f"Kafka running on {broker.bootstrap_servers}, topic {settings.kafka.topic}, "
            f"log {broker.log_file}"
        )
        if broker.sasl_ssl:
            print(
                "SASL_SSL (SCRAM-SHA-512); clients need:\n"
                f"  LINEAGE__KAFKA__SECURITY__CA_FILE={broker.ca_file}\n"
                f"  LINEAGE__KAFKA__SECURITY__TRUSTSTORE_FILE={broker.truststore_file}\n"
                "  LINEAGE__KAFKA__SECURITY__TRUSTSTORE_PASSWORD=$(cat "
                f"{broker.tls_dir / 'truststore.password'})"
            )
    elif args.command == "stop":
        broker.stop()
        print("Kafka stopped")
    else:
        pid = broker.pid()
        print(f"Kafka running on {broker.bootstrap_servers} (pid {pid})" if pid else "Kafka not running")
        return 0 if pid else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
