"""Kafka's KafkaPrincipal: the authenticated identity of a connection, ``User:<name>``."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"), as Kafka's SecurityUtils.parseKafkaPrincipal."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"principal {text!r} is not of the form Type:name")
        return cls(kind, name)


# A PLAINTEXT connection, or an SSL one without a client certificate, is this principal in Kafka.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
