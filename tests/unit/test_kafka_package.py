"""The broker's process defers kafka-python's package ``__init__`` (its clients) and still gives
the whole package to anything in the process that asks for a client."""

from __future__ import annotations

import subprocess
import sys

from tests.harness import REPO

PROBE = """
import sys
from kcoord.protocol.kafka_package import defer_package_init

defer_package_init()
import kcoord.server.app  # every codec the broker imports
from kcoord.server.api_table import build_table

build_table()  # every API's schema found (SaslHandshake's came from the clients' imports once)
clients = sorted(m for m in sys.modules if m.split(".")[:2] in (["kafka", "admin"], ["kafka", "consumer"]))
assert clients == [], clients
from kafka import KafkaAdminClient, KafkaConsumer
import kafka
assert "KafkaProducer" in kafka.__all__ and kafka.__version__
assert KafkaConsumer.__module__ == "kafka.consumer.group" and KafkaAdminClient
print("ok")
"""


def test_codecs_without_the_clients_then_the_clients_on_demand() -> None:
    cmd = [sys.executable, "-c", PROBE]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
