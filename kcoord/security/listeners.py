"""Listener names and their security protocols, parsed as Kafka parses them.

``listener.security.protocol.map`` maps listener names to PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL; a listener named after a protocol needs no entry (Kafka's default map lists the four
protocols under their own names).
"""

from __future__ import annotations

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(spec: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, protocol = part.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ValueError(f"listener.security.protocol.map entry {part!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"listener.security.protocol.map: {protocol!r} is not a security protocol "
                f"({', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in mapping:
            raise ValueError(f"listener.security.protocol.map names listener {name} twice")
        mapping[name] = protocol
    return mapping


def listener_protocol(name: str, mapping: dict[str, str]) -> str:
    protocol = mapping.get(name)
    if protocol is None and name in SECURITY_PROTOCOLS:
        protocol = name
    if protocol is None:
        raise ValueError(
            f"No security protocol defined for listener {name} (add {name}:<protocol> to "
            "listener.security.protocol.map)"
        )
    return protocol
