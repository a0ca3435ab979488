"""ACLs and SCRAM credentials through the official Java Admin (kafka-clients 4.3), enforced on
its consumers, producers and share consumer (tests/java/SecurityProbe.java).

Every PLAINTEXT client is User:ANONYMOUS, so the test takes one principal through three
phases of one broker and data directory: set up as a super user (``super.users=User:ANONYMOUS``:
topics, records, ACLs through Admin.createAcls, SCRAM credentials), then restarted without super
users so that the ACLs it persisted bind it (a consumer reads one topic with one group and
nothing else), then restarted again to check that no forbidden action changed anything. Tests
with two principals at once (an admin and a restricted user) wait for SASL (branch sec-auth).
"""

from __future__ import annotations

import pytest

from kcoord.protocol.messages import ApiKey
from tests.harness import BrokerFactory
from tests.integration.test_groups_java import committed
from tests.integration.test_java import classpath, java, run_probe

__all__ = ["java"]

pytestmark = pytest.mark.java

AUTHORIZER = ["--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
SUPER = ["--super-users", "User:ANONYMOUS"]


@pytest.mark.timeout(600)
def test_acls_and_scram_through_java_admin(java: str, broker_factory: BrokerFactory) -> None:
    cp = classpath("4.3.0")
    b = broker_factory(AUTHORIZER + SUPER)
    prefix = "sec"
    run_probe(java, cp, "SecurityProbe.java", "setup", b.bootstrap, prefix)

    # Restarted without super users: the persisted ACLs are all User:ANONYMOUS has.
    b.extra_args = list(AUTHORIZER)
    b.restart()
    out = run_probe(java, cp, "SecurityProbe.java", "enforced", b.bootstrap, prefix)
    assert "checks passed: 20" in out, out

    # As a super user again: nothing the forbidden actions tried happened.
    b.extra_args = AUTHORIZER + SUPER
    b.restart()
    with b.connect() as c:
        assert c.list_offsets(f"{prefix}-allowed", 0, -1).offset == 5  # nothing produced
        assert c.list_offsets(f"{prefix}-other", 0, -1).offset == 5
        assert committed(c, f"{prefix}-other-group", f"{prefix}-other", 1) == {0: 2}  # untouched
        assert committed(c, f"{prefix}-group", f"{prefix}-allowed", 1) == {0: 5}
        topics = c.request(ApiKey.Metadata, 1, topics=None).topics
        assert {t.name for t in topics if t.name.startswith(prefix)} == {
            f"{prefix}-allowed",
            f"{prefix}-other",
        }
    run_probe(java, cp, "SecurityProbe.java", "scram-after-restart", b.bootstrap, prefix)
