"""The SASL_SSL compose example without Docker: the compose file lints, docker/make-certs.sh makes
certificates the broker and clients accept, and a broker run with docker/kcoord-sasl-ssl.toml
(only its paths and ports changed) takes the example producer's events over SASL_SSL PLAIN with
exactly the compose file's client settings."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.harness import REPO, BrokerProcess, free_port, track_broker
from tests.integration.test_spark_docker import compose_env, run, tool

DOCKER = REPO / "docker"
COMPOSE = DOCKER / "docker-compose.sasl-ssl.yml"


def test_compose_file_is_valid() -> None:
    out = run(tool("docker-compose"), "-f", str(COMPOSE), "config", "-q", env=compose_env())
    assert out.returncode == 0, out.stdout + out.stderr


def _toml_value(value: object) -> str:
    text = str(value)
    return "'''" + text + "'''" if '"' in text else '"' + text + '"'


def test_example_config_and_certificates_serve_the_producer(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    certs = tmp_path / "certs"
    made = subprocess.run(["bash", str(DOCKER / "make-certs.sh"), str(certs)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    with open(DOCKER / "kcoord-sasl-ssl.toml", "rb") as f:
        settings = tomllib.load(f)
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    internal, host = free_port(), free_port()
    # The compose file's addresses become this machine's; everything else is the example's.
    settings["listeners"] = (
        f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{internal},HOST://127.0.0.1:{host}"
    )
    settings["advertised"]["listeners"] = f"INTERNAL://127.0.0.1:{internal},HOST://127.0.0.1:{host}"
    settings["listener"]["security"]["protocol"]["map"] += ",PLAINTEXT:PLAINTEXT"
    settings["ssl"]["keystore"]["location"] = str(certs / "kcoord.pem")

    def flat(prefix: str, node: dict[str, object]) -> list[str]:
        lines = []
        for key, value in node.items():
            name = f"{prefix}.{key}" if prefix else key
            lines += flat(name, value) if isinstance(value, dict) else [f'"{name}" = {_toml_value(value)}']
        return lines

    config = tmp_path / "kcoord.toml"
    config.write_text("\n".join(flat("", settings)) + "\n")
    b.extra_args = ["--config", str(config), "--listeners", settings["listeners"]]
    b.start()
    track_broker(request, b)
    try:
        compose = COMPOSE.read_text()
        assert "SASL_USERNAME: producer" in compose and "SASL_PASSWORD: producer-secret" in compose
        env = {
            **os.environ,
            "BOOTSTRAP": f"127.0.0.1:{internal}",
            "TOPIC": "events",
            "COUNT": "20",
            "INTERVAL_MS": "0",
            "SECURITY_PROTOCOL": "SASL_SSL",
            "SASL_MECHANISM": "PLAIN",
            "SASL_USERNAME": "producer",
            "SASL_PASSWORD": "producer-secret",
            "SSL_CAFILE": str(certs / "ca.pem"),
        }
        produced = subprocess.run(
            [sys.executable, str(REPO / "examples" / "produce_events.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert produced.returncode == 0, produced.stdout + produced.stderr
        assert "sent 20 events to events" in produced.stdout
        # The admin user of the HOST listener reads them back (confluent-kafka, as from the host).
        consumer = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{host}",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
                "ssl.ca.location": str(certs / "ca.pem"),
                "group.id": "readback",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["events"])
        got = 0
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
            if got == 20:
                break
        consumer.close()
        assert got == 20
        assert "principal=User:producer" in b.log_text() and "principal=User:admin" in b.log_text()
    finally:
        b.stop()
