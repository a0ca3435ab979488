"""Listener endpoints, as Kafka's EndPoint: ``NAME://host:port`` lists (``listeners``,
``advertised.listeners``), the HTTP endpoints (``http.listeners``) and the per-host connection
limits (``max.connections.per.ip.overrides``), parsed from their setting strings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(spec: str) -> list[Endpoint]:
    endpoints = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, rest = part.partition("://")
        if not sep:
            raise ValueError(f"listener {part!r} is not NAME://host:port")
        host, colon, port = rest.rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError(f"listener {part!r} has no port")
        host = host.strip("[]")
        endpoints.append(Endpoint(name.upper(), host, int(port)))
    if not endpoints:
        raise ValueError("no listeners given")
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"listener names repeat: {spec!r}")
    return endpoints


def parse_ip_overrides(spec: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, hosts as IPs or names."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        host, sep, count = part.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entry {part!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def parse_http_listeners(spec: str) -> list[Endpoint]:
    """``http://host:port,...``; nothing (an empty or blank value) for no HTTP endpoint."""
    endpoints = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        scheme, sep, rest = part.partition("://")
        if not sep or scheme.lower() != "http":
            raise ValueError(f"http listener {part!r} is not http://host:port")
        host, colon, port = rest.rstrip("/").rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError(f"http listener {part!r} has no port")
        endpoints.append(Endpoint("HTTP", host.strip("[]"), int(port)))
    return endpoints
