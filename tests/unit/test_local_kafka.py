"""The local broker's configuration (no broker started): it never creates a topic by itself (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage.io.local_kafka import LocalKafka
from lineage.settings import MIB


@pytest.mark.parametrize("sasl_ssl", [False, True])
def test_the_broker_is_configured_without_automatic_topic_creation(tmp_path: Path, sasl_ssl: bool) -> None:
    broker = LocalKafka(
        data_dir=tmp_path,
        jars_dir=tmp_path,
        port=9,
        controller_port=10,
        max_message_bytes=32 * MIB,
        sasl_ssl=sasl_ssl,
    )
    broker._write_properties()
    lines = (tmp_path / "server.properties").read_text().splitlines()
    assert [line for line in lines if line.startswith("auto.create.topics.enable=")] == [
        "auto.create.topics.enable=false"
    ]
