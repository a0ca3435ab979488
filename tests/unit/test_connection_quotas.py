"""ConnectionQuotas' arithmetic and the overrides syntax (Kafka's ConnectionQuotas)."""

import pytest

from kcoord.endpoints import parse_ip_overrides
from kcoord.server.connection_quotas import ConnectionQuotas


def test_per_ip_limit_override_and_broker_limit() -> None:
    q = ConnectionQuotas(max_connections=4, max_per_ip=2, overrides={"10.0.0.9": 3})
    assert [q.accept("10.0.0.1") for _ in range(2)] == [None, None]
    assert q.accept("10.0.0.1") == "Too many connections from 10.0.0.1 (maximum = 2)"
    assert [q.accept("10.0.0.9") for _ in range(2)] == [None, None]
    assert q.accept("10.0.0.9") == "Too many connections (max.connections = 4)"
    q.release("10.0.0.1")
    assert q.accept("10.0.0.9") is None  # the override's third, now that the broker has room
    assert q.total == 4 and dict(q.refused) == {"per_ip": 1, "broker": 1}
    q.release("10.0.0.7")  # never counted: nothing changes
    assert q.total == 4


def test_overrides_syntax() -> None:
    assert parse_ip_overrides("127.0.0.1:4, localhost:0,") == {"127.0.0.1": 4, "localhost": 0}
    with pytest.raises(ValueError, match="host:count"):
        parse_ip_overrides("127.0.0.1")
    with pytest.raises(ValueError, match="host:count"):
        parse_ip_overrides("h:-1")
