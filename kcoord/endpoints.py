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


def _entries(spec: str) -> list[str]:
    return [p for p in (p.strip() for p in spec.split(",")) if p]


def _endpoint(part: str, what: str, form: str) -> tuple[str, str, int]:
    """(name or scheme, host, port) of one ``NAME://host:port`` entry (IPv6 hosts in brackets)."""
    name, sep, rest = part.partition("://")
    if not sep:
        raise ValueError(f"{what} {part!r} is not {form}")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        raise ValueError(f"{what} {part!r} has no port")
    return name, host.strip("[]"), int(port)


def parse_listeners(spec: str) -> list[Endpoint]:
    endpoints = []
    for part in _entries(spec):
        name, host, port = _endpoint(part, "listener", "NAME://host:port")
        endpoints.append(Endpoint(name.upper(), host, port))
    if not endpoints:
        raise ValueError("no listeners given")
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"listener names repeat: {spec!r}")
    return endpoints


def parse_ip_overrides(spec: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, hosts as IPs or names."""
    out: dict[str, int] = {}
    for part in _entries(spec):
        host, sep, count = part.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entry {part!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def parse_http_listeners(spec: str) -> list[Endpoint]:
    """``http://host:port,...``; nothing (an empty or blank value) for no HTTP endpoint."""
    endpoints = []
    for part in _entries(spec):
        form = "http://host:port"
        scheme, host, port = _endpoint(part.rstrip("/"), "http listener", form)
        if scheme.lower() != "http":
            raise ValueError(f"http listener {part!r} is not {form}")
        endpoints.append(Endpoint("HTTP", host, port))
    return endpoints
