"""kcat (Debian's, built on the system librdkafka) against the broker: metadata, produce, consume."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.harness import BrokerProcess

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")


def kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"kcat {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc.stdout


def test_kcat_lists_metadata(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic, partitions=3)
    out = kcat("-b", broker.bootstrap, "-L")
    assert "1 brokers:" in out
    assert f"broker 1 at {broker.bootstrap}" in out
    assert f'topic "{unique_topic}" with 3 partitions:' in out
    for p in range(3):
        assert f"partition {p}, leader 1, replicas: 1, isrs: 1" in out


def test_kcat_produce_and_consume(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic, partitions=1)
    lines = [f"key{i}:value {i} with spaces" for i in range(20)]
    kcat("-b", broker.bootstrap, "-P", "-t", unique_topic, "-p", "0", "-K:", stdin="\n".join(lines) + "\n")
    kcat(
        "-b", broker.bootstrap, "-P", "-t", unique_topic, "-p", "0", "-H", "h1=one", "-H", "h2=two",
        stdin="with-headers\n",
    )  # fmt: skip
    out = kcat("-b", broker.bootstrap, "-C", "-t", unique_topic, "-o", "beginning", "-e", "-q",
               "-f", "%p|%o|%k|%s|%h\n")  # fmt: skip
    got = out.splitlines()
    assert got[:20] == [f"0|{i}|key{i}|value {i} with spaces|" for i in range(20)]
    assert got[20] == "0|20||with-headers|h1=one,h2=two"
    assert len(got) == 21
    # Starting in the middle: exactly the records from that offset on.
    out = kcat("-b", broker.bootstrap, "-C", "-t", unique_topic, "-o", "15", "-e", "-q", "-f", "%o\n")
    assert out.split() == [str(i) for i in range(15, 21)]
