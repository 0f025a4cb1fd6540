"""One typed settings object for every job, the demo and the tests.

Precedence, highest first: explicit keyword arguments, ``LINEAGE__...`` environment variables
(``__`` separates nesting levels, e.g. ``LINEAGE__KAFKA__BOOTSTRAP_SERVERS``), the TOML file named by
``LINEAGE_CONFIG`` (default ``conf/lineage.toml`` when it exists), then the defaults below.
Unknown keys are rejected so that a typo fails at start rather than being ignored.
Relative paths are resolved against the current working directory once, at load time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

DEFAULT_CONFIG_FILE = Path("conf/lineage.toml")
MIB = 1024 * 1024


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KafkaSettings(_Section):
    """Where the OpenLineage events are read from."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "input.runs"
    # OpenLineage Spark events reach tens of MB; the limit is applied to the consumer here and to the
    # broker/topic/producer by the local broker and the demo publisher.
    max_message_bytes: int = Field(default=32 * MIB, ge=16 * MIB)
    # Extra consumer properties passed to Spark's Kafka source as ``kafka.<key>`` (security, SASL, ...).
    consumer: dict[str, str] = Field(default_factory=dict)


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
    driver_memory: str = "4g"
    # Extra Spark properties (highest precedence), e.g. {"spark.executor.memory" = "4g"}.
    conf: dict[str, str] = Field(default_factory=dict)
    # Folder of jars fetched by `make jars` (conf/maven/pom.xml). On a cluster, ship them with --jars
    # instead and set this to an empty string.
    jars_dir: str = ".jars/spark"
    # Generic Spark tuning in spark-defaults.conf format; applied first, when the file exists.
    defaults_file: Path = Path("conf/spark-defaults.conf")


class IngestSettings(_Section):
    checkpoint: Path = Path("var/checkpoints/ingest")
    # "availableNow": land what is in the topic and stop; otherwise a processing-time interval.
    trigger: str = "10 seconds"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: int | None = None
    # Target data file size for the raw tables (Iceberg write.target-file-size-bytes).
    target_file_size_bytes: int = 128 * MIB


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


class LocalKafkaSettings(_Section):
    """The single-node KRaft broker run by `make kafka-start` and the test fixtures."""

    data_dir: Path = Path("var/kafka")
    jars_dir: Path = Path(".jars/kafka")
    port: int = 9092
    controller_port: int = 9093
    partitions: int = 4
    heap: str = "512m"


class OpenLineageSettings(_Section):
    """Our own jobs' OpenLineage events (lineage.observe) and the CLI's close-run."""

    enabled: bool = True
    namespace: str = "lineage-lakehouse"  # job namespace of our jobs
    # Used when openlineage-python finds no configuration of its own (OPENLINEAGE_CONFIG,
    # ./openlineage.yml, ~/.openlineage/openlineage.yml, OPENLINEAGE__* or OPENLINEAGE_URL variables).
    config: Path | None = Path("conf/openlineage.yml")
    running_interval_seconds: float = Field(default=60, gt=0)  # RUNNING events of the streaming ingestion
    emit_timeout_seconds: float = Field(default=10, gt=0)  # longest wait for the transport at job end


class ServeSettings(_Section):
    """``lineage serve``: the HTTP intake (and, later, the read API) in one process."""

    host: str = "127.0.0.1"
    port: int = Field(default=5000, ge=0, le=65535)
    intake: bool = True  # POST /api/v1/lineage and /api/v1/lineage/batch into kafka.topic
    # API keys as SHA-256 hex digests (`lineage serve hash-key`), here and/or in a file, one per line.
    # With none, the service listens on loopback only and without authentication.
    api_key_hashes: list[str] = Field(default_factory=list)
    api_keys_file: Path | None = None
    tls_cert_file: Path | None = None  # both set: HTTPS
    tls_key_file: Path | None = None
    produce_timeout_seconds: float = Field(default=10, gt=0)  # Kafka's ack within this, else 503
    body_timeout_seconds: float = Field(default=30, gt=0)  # a request body must arrive within this
    idle_timeout_seconds: float = Field(default=15, gt=0)  # idle keep-alive; also bounds slow headers
    health_timeout_seconds: float = Field(default=2, gt=0)  # /healthz waits this long for Kafka
    retry_after_seconds: int = Field(default=5, ge=0)  # Retry-After of a 503
    max_batch_events: int = Field(default=10_000, ge=1)
    backlog: int = Field(default=2048, ge=1)  # listen queue: many clients connecting at once
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
    local_kafka: LocalKafkaSettings = Field(default_factory=LocalKafkaSettings)
    openlineage: OpenLineageSettings = Field(default_factory=OpenLineageSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)

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
        return Settings.model_validate(data)


_PATH_FIELDS = {
    "catalog": ("sqlite_path", "warehouse"),
    "spark": ("defaults_file",),
    "ingest": ("checkpoint",),
    "local_kafka": ("data_dir", "jars_dir"),
    "openlineage": ("config",),
    "serve": ("api_keys_file", "tls_cert_file", "tls_key_file"),
}


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
