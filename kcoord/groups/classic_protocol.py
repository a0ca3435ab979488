"""The classic group membership protocol's requests and answers (JoinGroup, SyncGroup), as a
group kind sees them: the classic kind answers them, and so do consumer groups for their members
that still speak the classic protocol (KIP-848 online migration). The handlers translate them
from and to the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+


@dataclass
class JoinResult:
    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # id, instance id, metadata
    skip_assignment: bool = False


@dataclass(init=False)
class SyncResult:
    error: int
    assignment: bytes
    protocol_type: str | None
    protocol_name: str | None

    # One per member and rebalance: written out, compiled, it is C; dataclass's is Python.
    def __init__(
        self,
        error: int,
        assignment: bytes = b"",
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> None:
        self.error = error
        self.assignment = assignment
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
