"""One typed settings object for every job, the demo and the tests.

Precedence, highest first: explicit keyword arguments, ``LINEAGE__...`` environment variables
(``__`` separates nesting levels, e.g. ``LINEAGE__KAFKA__BOOTSTRAP_SERVERS``), the TOML file named by
``LINEAGE_CONFIG`` (default ``conf/lineage.toml`` when it exists), then the defaults below.
Unknown keys are rejected so that a typo fails at start rather than being ignored.
Relative paths are resolved against the current working directory once, at load time.
"""

from __future__ import annotations

import argparse
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from lineage.events.redact import Redactor, build_redactor

DEFAULT_CONFIG_FILE = Path("conf/lineage.toml")
MIB = 1024 * 1024
# A Kafka message is the event plus its key and the record batch's framing: limits on messages (the topics
# we create, the local broker, our producers) leave this much room above kafka.max_message_bytes, so that an
# event of that size fits even where the broker checks the uncompressed size.
RECORD_HEADROOM_BYTES = MIB


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KafkaSecuritySettings(_Section):
    """How every Kafka client of ours authenticates: the ingestion's consumer, topic creation, the demo
    publisher, our own OpenLineage events, close-run and the HTTP intake's producer.

    The password comes from the environment (``LINEAGE__KAFKA__SECURITY__PASSWORD``) or from
    ``password_file``; it is a secret value, never printed or logged, and has no place in conf/.
    """

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    username: str | None = None
    password: SecretStr | None = None
    password_file: Path | None = None
    # PEM file of the CA that signed the brokers' certificates (librdkafka), and the same as a PKCS12
    # truststore for the JVM clients (Spark's Kafka source); unset: the system's trust store.
    ca_file: Path | None = None
    truststore_file: Path | None = None
    truststore_password: SecretStr | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def ssl(self) -> bool:
        return self.protocol.endswith("SSL")

    def secret(self) -> str:
        """The SASL password (from the environment or the file).

        Raises:
            ValueError: SASL is configured without a username or password.
        """
        if self.password is not None:
            return self.password.get_secret_value()
        if self.password_file is not None:
            return self.password_file.read_text().strip()
        raise ValueError(
            "kafka.security uses SASL but has no password: set LINEAGE__KAFKA__SECURITY__PASSWORD "
            "or kafka.security.password_file"
        )

    def librdkafka(self) -> dict[str, str]:
        """Properties for confluent-kafka / librdkafka clients (and openlineage-python's Kafka transport)."""
        if self.protocol == "PLAINTEXT":
            return {}
        props = {"security.protocol": self.protocol.lower()}
        if self.sasl:
            props |= {
                "sasl.mechanism": self.sasl_mechanism,
                "sasl.username": self.username or "",
                "sasl.password": self.secret(),
            }
        if self.ssl and self.ca_file is not None:
            props["ssl.ca.location"] = str(self.ca_file)
        return props

    def java(self) -> dict[str, str]:
        """Properties for Java Kafka clients (Spark's Kafka source gets them as ``kafka.<key>``)."""
        if self.protocol == "PLAINTEXT":
            return {}
        props: dict[str, str] = {"security.protocol": self.protocol}
        if self.sasl:
            module = {
                "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
            }.get(self.sasl_mechanism, "org.apache.kafka.common.security.scram.ScramLoginModule")
            user = (self.username or "").replace("\\", "\\\\").replace('"', '\\"')
            secret = self.secret().replace("\\", "\\\\").replace('"', '\\"')
            props |= {
                "sasl.mechanism": self.sasl_mechanism,
                "sasl.jaas.config": f'{module} required username="{user}" password="{secret}";',
            }
        if self.ssl and self.truststore_file is not None:
            props |= {
                "ssl.truststore.location": str(self.truststore_file),
                "ssl.truststore.type": "PKCS12",
            }
            if self.truststore_password is not None:
                props["ssl.truststore.password"] = self.truststore_password.get_secret_value()
        return props

    @model_validator(mode="after")
    def _sasl_user(self) -> KafkaSecuritySettings:
        if self.sasl and not self.username:
            raise ValueError("kafka.security.protocol SASL_* needs kafka.security.username")
        return self


class KafkaSettings(_Section):
    """Where the OpenLineage events are read from."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "input.runs"
    # OpenLineage Spark events reach tens of MB; the limit is applied to the consumer here and to the
    # broker/topic/producer by the local broker and the demo publisher.
    max_message_bytes: int = Field(default=32 * MIB, ge=16 * MIB)
    # Extra consumer properties passed to Spark's Kafka source as ``kafka.<key>``, applied last.
    consumer: dict[str, str] = Field(default_factory=dict)
    # Authentication and encryption of every Kafka client of ours.
    security: KafkaSecuritySettings = Field(default_factory=KafkaSecuritySettings)


class CatalogSettings(_Section):
    """The Iceberg catalog, shared by Spark and pyiceberg under one name.

    With ``properties`` empty the embedded default is used: an Iceberg JDBC catalog on the SQLite file
    ``sqlite_path`` with the local ``warehouse`` folder. Otherwise ``properties`` are Iceberg catalog
    properties (``type = "rest"``, ``uri``, ``warehouse``, credentials, ``io-impl`` ...) given unchanged to
    both Spark's ``SparkCatalog`` and pyiceberg's ``load_catalog``.
    """

    name: str = "lake"
    sqlite_path: Path = Path("var/lake/catalog.db")
    warehouse: Path = Path("var/lake/warehouse")
    properties: dict[str, str] = Field(default_factory=dict)
    raw_namespace: str = "raw"
    lineage_namespace: str = "lineage"

    @property
    def embedded(self) -> bool:
        return not self.properties

    def embedded_folders(self) -> dict[str, Path]:
        """The local folders the embedded catalog writes, by what they hold."""
        return {"catalog database folder": self.sqlite_path.parent, "warehouse": self.warehouse}

    def spark_properties(self) -> dict[str, str]:
        """Catalog properties for ``spark.sql.catalog.<name>.*``."""
        if not self.embedded:
            return dict(self.properties)
        return {
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{self.sqlite_path}",
            "warehouse": self.warehouse.as_uri(),
            # V1 adds the view columns; pyiceberg's SqlCatalog reads the same tables.
            "jdbc.schema-version": "V1",
        }

    def pyiceberg_properties(self) -> dict[str, str]:
        """Properties for ``pyiceberg.catalog.load_catalog(name, **props)``."""
        if not self.embedded:
            return dict(self.properties)
        return {
            "type": "sql",
            "uri": f"sqlite:///{self.sqlite_path}",
            "warehouse": self.warehouse.as_uri(),
        }

    def table(self, namespace: str, table: str) -> str:
        """Fully qualified Spark identifier, e.g. ``lake.raw.events``."""
        return f"{self.name}.{namespace}.{table}"

    @property
    def events_table(self) -> str:
        return self.table(self.raw_namespace, "events")

    @property
    def rejected_table(self) -> str:
        return self.table(self.raw_namespace, "rejected")


class SparkSettings(_Section):
    master: str | None = None  # None: leave it to spark-submit (local[*] when run with plain python)
    app_name_prefix: str = "lineage"
    shuffle_partitions: int = 8
    # Every tier-M build peaked under 4 GiB with 3g (docs/benchmark-tuning.md); a larger lake may need more.
    driver_memory: str = "3g"
    # In local mode the driver's RPC and block-manager ports (and the UI) listen on loopback only, not on
    # the machine's external interface; set to false to reach a local-mode driver from elsewhere.
    local_loopback: bool = True
    # Extra Spark properties (highest precedence), e.g. {"spark.executor.memory" = "4g"}.
    conf: dict[str, str] = Field(default_factory=dict)
    # Folder of jars fetched by `make jars` (conf/maven/pom.xml). On a cluster, ship them with --jars
    # instead and set this to an empty string.
    jars_dir: str = ".jars/spark"
    # Generic Spark tuning in spark-defaults.conf format; applied first, when the file exists.
    defaults_file: Path = Path("conf/spark-defaults.conf")
    # What `python -m lineage.cluster submit` ships with spark-submit --jars: folders (their jars that
    # PySpark does not ship itself) or jar files. Relative paths are against the current directory.
    submit_jars: list[str] = Field(default_factory=lambda: [".jars/spark"])
    # Names of environment variables of the driver handed to the executors (spark.executorEnv.<NAME>),
    # e.g. the AWS_* credentials the object store clients of the executors read. Only names are
    # configured; the values stay in the environment (Spark redacts secret-looking ones in its UI/logs).
    executor_env: list[str] = Field(default_factory=list)
    # Spark's RPC authentication and AES encryption of RPC and block transfers on a standalone cluster whose
    # master and workers hold the same secret (lineage.cluster.stack does that for its own): from the
    # environment (LINEAGE__SPARK__AUTH_SECRET) or a file. Unset: nothing is added (local mode binds to
    # loopback instead; YARN and Kubernetes make a secret per application from spark.authenticate alone).
    auth_secret: SecretStr | None = None
    auth_secret_file: Path | None = None

    def auth_properties(self) -> dict[str, str]:
        """``spark.authenticate`` with the secret and ``spark.network.crypto.enabled``, when one is set.

        Raises:
            ValueError: ``auth_secret_file`` names a file that is missing or empty.
        """
        if self.auth_secret is not None:
            secret = self.auth_secret.get_secret_value()
        elif self.auth_secret_file is not None:
            try:
                secret = self.auth_secret_file.read_text().strip()
            except OSError as exc:
                raise ValueError(f"spark.auth_secret_file {self.auth_secret_file}: {exc.strerror}") from None
            if not secret:
                raise ValueError(f"spark.auth_secret_file {self.auth_secret_file} is empty")
        else:
            return {}
        return spark_auth_properties(secret)


def spark_auth_properties(secret: str) -> dict[str, str]:
    """The Spark properties of RPC authentication and encryption with ``secret``: what a driver sets
    (:meth:`SparkSettings.auth_properties`) and what a standalone master and its workers read."""
    return {
        "spark.authenticate": "true",
        "spark.authenticate.secret": secret,
        "spark.network.crypto.enabled": "true",
    }


class IngestSettings(_Section):
    # A local folder, or a Hadoop file system URI (s3a://bucket/prefix, abfss://..., gs://...): Structured
    # Streaming writes its checkpoint through Hadoop's FileSystem, so no Iceberg FileIO applies here.
    checkpoint: str = "var/checkpoints/ingest"
    # "availableNow": land what is in the topic and stop; otherwise a processing-time interval.
    trigger: str = "10 seconds"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: int | None = None
    # Target data file size for the raw tables (Iceberg write.target-file-size-bytes).
    target_file_size_bytes: int = 128 * MIB
    # An event whose eventTime is more than this after the message was received is refused
    # (EVENT_TIME_IN_FUTURE), by the ingestion and by the HTTP intake alike; 0: no limit.
    max_future_seconds: float = Field(default=86_400, ge=0)


class BuildSettings(_Section):
    """The lineage model build (jobs/build_lineage.py)."""

    # A non-terminal run silent for longer than max(floor, multiplier x its job's median heartbeat gap)
    # is inferred LOST; per-job overrides in seconds, keyed "namespace/name".
    liveness_floor_seconds: float = Field(default=900, gt=0)
    liveness_multiplier: float = Field(default=3.0, gt=0)
    liveness_overrides: dict[str, float] = Field(default_factory=dict)
    # Namespaces that are the same system under another address, applied after the OpenLineage naming
    # normalisation: {"kafka://broker:9092" = "kafka://kafka-1:19092"}.
    alias_rules: dict[str, str] = Field(default_factory=dict)
    # Rounds of label propagation when merging symlinked names (longest alias chain handled).
    alias_max_iterations: int = Field(default=10, ge=1)
    # Longest column path (in jobs) followed by lake.lineage.column_paths; cycles are safe at any depth.
    column_path_max_depth: int = Field(default=20, ge=1)
    # The build and the maintenance hold a lease on the lineage tables while they run (one at a time),
    # renewed every third of this; a lease not renewed for this long (its job killed) is taken over.
    lease_minutes: float = Field(default=30, gt=0)


class HealthSettings(_Section):
    """[health]: how ``lineage health``, ``lineage impact`` and the read API judge a dataset (read time)."""

    # A dataset is late when its last successful write is older than late_multiplier x the median gap
    # between its successful writes; that interval is learned only from at least min_writes of them.
    late_multiplier: float = Field(default=2.0, gt=1)
    min_writes: int = Field(default=3, ge=2)


class TagRule(_Section):
    """One rule of ``[tags.rules]``: a field whose name matches ``pattern`` carries ``tag``."""

    # Searched in the field name (Spark ``rlike``: Java syntax; anchor with ^...$ for a whole name). Write
    # it in the syntax common to Java and Python, which is what is checked here.
    pattern: str
    tag: str
    value: str | None = None

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc}): {value!r}") from exc
        return value

    @field_validator("tag")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a tag rule needs a non-empty tag name")
        return value


class TagSettings(_Section):
    """[tags]: seed tags from rules on field names and how tags propagate along column lineage (the build's
    ``lineage.column_tags``)."""

    # Rule name -> rule, e.g. [tags.rules.contact] pattern = "(?i)^(e_?mail|phone|ssn)$", tag = "pii".
    rules: dict[str, TagRule] = Field(default_factory=dict)
    # A DIRECT edge whose only DIRECT transformations have one of these subtypes does not carry a tag (a
    # masking transformation never does).
    stop_subtypes: list[str] = Field(default_factory=lambda: ["AGGREGATION"])

    @field_validator("stop_subtypes")
    @classmethod
    def _upper(cls, value: list[str]) -> list[str]:
        # Subtypes are spec enums in upper case, as the extraction stores them.
        return sorted({v.strip().upper() for v in value if v.strip()})

    def fingerprint(self) -> str:
        """The settings the column tags are computed from, as one canonical string."""
        rules = ";".join(f"{n}={r.pattern!r}:{r.tag!r}:{r.value!r}" for n, r in sorted(self.rules.items()))
        return f"rules={rules}|stop={','.join(self.stop_subtypes)}"


class MaintainSettings(_Section):
    """[maintain]: jobs/maintain_lake.py, Iceberg maintenance and raw-event retention (docs/operations.md)."""

    snapshot_max_age_hours: float = Field(default=24, gt=0)  # older snapshots expire (see docs for the clamp)
    retain_last_snapshots: int = Field(default=10, ge=1)  # kept whatever their age
    # Iceberg's procedure refuses less than 24 h: a file younger than this may belong to a running write.
    orphan_min_age_hours: float = Field(default=72, ge=24)
    compact_min_input_files: int = Field(default=5, ge=2)  # a partition with fewer small files is left alone
    # 0 keeps every raw event; otherwise events older than this (event time) whose facts are extracted
    # already are deleted from raw.events; the lineage model keeps what it learned from them.
    raw_retention_days: float = Field(default=0, ge=0)
    rejected_retention_days: float = Field(default=0, ge=0)  # 0 keeps every rejected message


class LocalKafkaSettings(_Section):
    """The single-node KRaft broker run by `make kafka-start` and the test fixtures."""

    data_dir: Path = Path("var/kafka")
    jars_dir: Path = Path(".jars/kafka")
    port: int = 9092
    controller_port: int = 9093
    partitions: int = 4
    heap: str = "512m"
    # SASL_SSL with SCRAM-SHA-512 (the broker never creates topics by itself, in either mode); the one
    # client user is kafka.security's username and password (set kafka.security.protocol = "SASL_SSL").
    sasl_ssl: bool = False


class LocalClusterSettings(_Section):
    """The local scale-out stack of `make cluster-start` (lineage.cluster.stack): an S3-API server (S3Proxy),
    Iceberg's REST catalog server, a Spark standalone master with workers and a history server.

    Only that stack reads this section; jobs and the CLI find the cluster through [spark] and [catalog].
    """

    data_dir: Path = Path("var/cluster")
    jars_dir: Path = Path(
        ".jars-cluster"
    )  # profiles cluster-spark, s3proxy, iceberg-rest of conf/maven/pom.xml
    workers: int = Field(default=2, ge=1)
    worker_cores: int = Field(default=1, ge=1)
    worker_memory: str = "1g"
    master_port: int = 7177
    master_ui_port: int = 8180
    worker_ui_port: int = 8191  # first worker's UI; the others count up from it
    history_port: int = 18180
    s3_port: int = 9400
    catalog_port: int = 8281
    # The address the REST catalog server listens on (it authenticates nobody): loopback unless set,
    # e.g. "0.0.0.0" for every interface behind a firewall or a proxy that authenticates.
    catalog_host: str = "127.0.0.1"
    bucket: str = "lake"
    region: str = "us-east-1"


class OpenLineageSettings(_Section):
    """Our own jobs' OpenLineage events (lineage.observe) and the CLI's close-run."""

    enabled: bool = True
    namespace: str = "lineage-lakehouse"  # job namespace of our jobs
    # Used when openlineage-python finds no configuration of its own (OPENLINEAGE_CONFIG,
    # ./openlineage.yml, ~/.openlineage/openlineage.yml, OPENLINEAGE__* or OPENLINEAGE_URL variables).
    config: Path | None = Path("conf/openlineage.yml")
    running_interval_seconds: float = Field(default=60, gt=0)  # RUNNING events of the streaming ingestion
    emit_timeout_seconds: float = Field(default=10, gt=0)  # longest wait for the transport at job end
    # Filled by Settings.own_lineage() from [kafka], not set in the file: when our default `config` file is
    # used, its Kafka transport sends to these bootstrap servers and this topic (the ones we ingest from).
    kafka_target: tuple[str, str] | None = None
    kafka_security: KafkaSecuritySettings | None = None


class RedactSettings(_Section):
    """Secrets replaced by a marker before anything is stored (lineage.events.redact)."""

    enabled: bool = True  # the ingestion redacts every message before it lands
    # The HTTP intake redacts before producing to Kafka, so secrets sent over HTTP never reach the topic.
    intake: bool = True
    # More secrets as regular expressions (syntax common to Java and Python, no named groups): the whole
    # match is redacted, or, with one capturing group, what follows the group.
    extra_patterns: list[str] = Field(default_factory=list)
    # Values that are never redacted (whole value), e.g. placeholders such as "\\$\\{env:[A-Z_]+\\}".
    allow_values: list[str] = Field(default_factory=list)
    # Property/parameter names that are not secrets although they contain a secret word (whole name).
    allow_keys: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _compiles(self) -> RedactSettings:
        self.redactor()
        return self

    def redactor(self) -> Redactor | None:
        """The compiled rules, or None when redaction is off."""
        if not self.enabled:
            return None
        return build_redactor(self.extra_patterns, self.allow_values, self.allow_keys)


def _read_and_write() -> list[Literal["read", "write"]]:
    return ["read", "write"]


class ApiKeySettings(_Section):
    """One API key with limits (``[[serve.api_keys]]``): what it may do and in which namespaces."""

    digest: str  # SHA-256 hex digest of the key (lineage serve hash-key)
    name: str | None = None  # a label for whoever reads the configuration (never the key)
    # Globs (fnmatch: *, ?, [...]) of the job and dataset namespaces the key may read and write; none
    # given: every namespace. An empty list allows none.
    namespaces: list[str] | None = None
    access: list[Literal["read", "write"]] = Field(default_factory=_read_and_write)

    @field_validator("digest")
    @classmethod
    def _hex_digest(cls, value: str) -> str:
        digest = value.strip().lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("digest is a SHA-256 hex digest (64 hex digits), not a key")
        return digest


class ServeSettings(_Section):
    """``lineage serve``: the HTTP intake and the read API in one process, each half switchable."""

    host: str = "127.0.0.1"
    port: int = Field(default=5000, ge=0, le=65535)
    intake: bool = True  # POST /api/v1/lineage and /api/v1/lineage/batch into kafka.topic
    read: bool = True  # GET lineage questions answered from lake.lineage.* (docs/read-api.md)
    # How often the read API checks for a newer finished build (answers lag a build by at most about this).
    refresh_seconds: float = Field(default=5, gt=0)
    # API keys as SHA-256 hex digests (`lineage serve hash-key`), here and/or in a file, one per line.
    # With none, the service listens on loopback only and without authentication.
    api_key_hashes: list[str] = Field(default_factory=list)
    api_keys_file: Path | None = None
    # Keys limited to reading or writing and to namespaces (docs/intake.md, "Scoped keys").
    api_keys: list[ApiKeySettings] = Field(default_factory=list)
    tls_cert_file: Path | None = None  # both set: HTTPS
    tls_key_file: Path | None = None
    produce_timeout_seconds: float = Field(default=10, gt=0)  # Kafka's ack within this, else 503
    body_timeout_seconds: float = Field(default=30, gt=0)  # a request body must arrive within this
    idle_timeout_seconds: float = Field(default=15, gt=0)  # idle keep-alive; also bounds slow headers
    health_timeout_seconds: float = Field(default=2, gt=0)  # /healthz waits this long for Kafka
    retry_after_seconds: int = Field(default=5, ge=0)  # Retry-After of a 503
    max_batch_events: int = Field(default=10_000, ge=1)
    backlog: int = Field(default=2048, ge=1)  # listen queue: many clients connecting at once
    # Processes answering on the one port (each its own event loop, Kafka producer and read index);
    # more than one lets the service use more than one core (docs/intake.md, "Worker processes").
    workers: int = Field(default=1, ge=1, le=64)
    access_log: bool = True  # one line per request: client, request line, status, size, time (no bodies)
    # Extra librdkafka producer properties (security.protocol, sasl.*, linger.ms ...), applied last.
    producer: dict[str, str] = Field(default_factory=dict)

    @field_validator("api_key_hashes")
    @classmethod
    def _hex_digests(cls, value: list[str]) -> list[str]:
        digests = [v.strip().lower() for v in value]
        bad = [d for d in digests if len(d) != 64 or any(c not in "0123456789abcdef" for c in d)]
        if bad:
            raise ValueError("api_key_hashes holds SHA-256 hex digests (64 hex digits), not keys")
        return digests

    @model_validator(mode="after")
    def _tls_pair(self) -> ServeSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LINEAGE__",
        env_nested_delimiter="__",
        extra="forbid",
        toml_file=None,
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    build: BuildSettings = Field(default_factory=BuildSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    tags: TagSettings = Field(default_factory=TagSettings)
    maintain: MaintainSettings = Field(default_factory=MaintainSettings)
    local_kafka: LocalKafkaSettings = Field(default_factory=LocalKafkaSettings)
    local_cluster: LocalClusterSettings = Field(default_factory=LocalClusterSettings)
    openlineage: OpenLineageSettings = Field(default_factory=OpenLineageSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    redact: RedactSettings = Field(default_factory=RedactSettings)

    def own_lineage(self) -> OpenLineageSettings:
        """The [openlineage] settings with the Kafka target our default transport follows."""
        return self.openlineage.model_copy(
            update={
                "kafka_target": (self.kafka.bootstrap_servers, self.kafka.topic),
                "kafka_security": self.kafka.security,
            }
        )

    @field_validator("ingest")
    @classmethod
    def _trigger_is_known(cls, value: IngestSettings) -> IngestSettings:
        parse_trigger(value.trigger)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = _config_file()
        if config_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

    def resolved(self) -> Settings:
        """A copy with every relative path made absolute (against the current directory)."""
        data = self.model_dump()
        for section, keys in _PATH_FIELDS.items():
            for key in keys:
                if data[section][key] is not None:
                    data[section][key] = Path(data[section][key]).expanduser().resolve()
        data["ingest"]["checkpoint"] = local_or_uri(data["ingest"]["checkpoint"])
        return Settings.model_validate(data)


_PATH_FIELDS = {
    "catalog": ("sqlite_path", "warehouse"),
    "spark": ("defaults_file", "auth_secret_file"),
    "local_kafka": ("data_dir", "jars_dir"),
    "local_cluster": ("data_dir", "jars_dir"),
    "openlineage": ("config",),
    "serve": ("api_keys_file", "tls_cert_file", "tls_key_file"),
}


def is_uri(location: str | Path) -> bool:
    """``s3a://bucket/x`` and ``file:///x`` are URIs; ``var/x`` and ``/x`` are local paths."""
    return "://" in str(location)


def local_or_uri(location: str | Path) -> str:
    """A URI unchanged, a local path made absolute (against the current directory)."""
    text = str(location)
    return text if is_uri(text) else str(Path(text).expanduser().resolve())


def _config_file() -> Path | None:
    named = os.environ.get("LINEAGE_CONFIG")
    if named:
        path = Path(named)
        if not path.is_file():
            raise FileNotFoundError(f"LINEAGE_CONFIG names {path}, which is not a file")
        return path
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Load and validate settings once, at the start of a job."""
    return Settings(**overrides).resolved()


def parse_trigger(trigger: str) -> dict[str, Any]:
    """Turn the ``ingest.trigger`` setting into keyword arguments for ``DataStreamWriter.trigger``.

    Raises:
        ValueError: the value is neither ``availableNow`` nor a ``"<n> <unit>"`` interval.
    """
    text = trigger.strip()
    if text.lower() in {"availablenow", "available-now", "available_now"}:
        return {"availableNow": True}
    parts = text.split()
    units = {"second", "seconds", "minute", "minutes", "hour", "hours", "millisecond", "milliseconds"}
    if len(parts) == 2 and parts[0].isdigit() and parts[1].lower() in units:
        return {"processingTime": text}
    raise ValueError(f"trigger must be 'availableNow' or an interval like '10 seconds', got {trigger!r}")


def cli_instant(text: str) -> datetime:
    """An ISO-8601 instant given on a job's command line (``--now``); ``Z`` accepted."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r}") from exc


_INTERVAL_UNITS = {"s": 1, "m": 60, "h": 3600}


def cli_interval(text: str) -> float:
    """A positive interval given on a job's command line (``--every 60s``, ``5m``, ``1h``; a bare number is
    seconds), in seconds."""
    value = text.strip().lower()
    scale = _INTERVAL_UNITS.get(value[-1:])
    number = value[:-1] if scale else value
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive interval like 60s, 5m or 1h: {text!r}")
    return seconds
