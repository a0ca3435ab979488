"""Error codes under Kafka's names (clients/.../protocol/Errors.java)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kcoord
from kcoord.protocol.errors import ErrorCode, KafkaError

KCOORD = Path(kcoord.__file__).parent


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NONE", 0),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("NOT_LEADER_OR_FOLLOWER", 6),
        ("MESSAGE_TOO_LARGE", 10),
        ("NOT_COORDINATOR", 16),
        ("INVALID_TOPIC_EXCEPTION", 17),
        ("RECORD_LIST_TOO_LARGE", 18),
        ("UNSUPPORTED_VERSION", 35),
        ("TOPIC_ALREADY_EXISTS", 36),
        ("INVALID_REPLICA_ASSIGNMENT", 39),
        ("INVALID_REQUEST", 42),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
        ("INVALID_PRODUCER_EPOCH", 47),
        ("FETCH_SESSION_ID_NOT_FOUND", 70),
        ("INVALID_FETCH_SESSION_EPOCH", 71),
        ("INVALID_RECORD", 87),
        ("UNKNOWN_TOPIC_ID", 100),
        ("FETCH_SESSION_TOPIC_ID_ERROR", 106),
        ("SHARE_SESSION_LIMIT_REACHED", 133),
    ],
)
def test_kafka_names(name: str, code: int) -> None:
    assert ErrorCode[name] == code
    assert ErrorCode(code).name == name  # Kafka's name is the canonical one


def test_every_code_up_to_133_has_a_name() -> None:
    assert {int(e) for e in ErrorCode} >= set(range(-1, 134))


def test_every_error_code_named_in_the_source_exists() -> None:
    """``ErrorCode.X`` is looked up at run time: a wrong name only fails on the error path."""
    names = set()
    for path in KCOORD.rglob("*.py"):
        names |= set(re.findall(r"ErrorCode\.([A-Z][A-Z0-9_]*)", path.read_text()))
    assert names
    assert sorted(n for n in names if n not in ErrorCode.__members__) == []


def test_kafka_error_message_defaults_to_the_name() -> None:
    e = KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION)
    assert (e.code, str(e), e.message) == (17, "INVALID_TOPIC_EXCEPTION", None)


def test_the_type_stub_lists_every_code() -> None:
    """errors.pyi (what mypy sees of the enum built at import time) names exactly its members."""
    import ast
    from pathlib import Path

    import kcoord.protocol.errors as errors

    stub = ast.parse(Path(errors.__file__).with_suffix(".pyi").read_text())
    (enum,) = [n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "ErrorCode"]
    listed = {
        t.id: ast.literal_eval(a.value)
        for a in enum.body
        if isinstance(a, ast.Assign)
        for t in a.targets
        if isinstance(t, ast.Name)
    }
    assert listed == {name: int(code) for name, code in errors.ErrorCode.__members__.items()}
