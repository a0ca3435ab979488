"""The configuration layer: flag > environment > TOML file > default, under Kafka's names."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kcoord import cli
from kcoord.config import BrokerConfig, build_config, kafka_name, load_toml
from kcoord.endpoints import parse_listeners


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[BrokerConfig]:
    """Run ``kcoord serve`` in-process up to the point where it would start the broker."""
    got: list[BrokerConfig] = []
    import kcoord.logsetup
    import kcoord.server.app

    monkeypatch.setattr(kcoord.server.app, "run_broker", got.append)
    monkeypatch.setattr(kcoord.logsetup, "configure_logging", lambda *a, **k: None)
    for name in list(os.environ):
        if name.startswith("KCOORD_"):
            monkeypatch.delenv(name)
    return got


def serve(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli.main, ["serve", *args], env=env, catch_exceptions=False)


def test_defaults_are_kafkas(served: list[BrokerConfig]) -> None:
    assert serve([]).exit_code == 0
    (cfg,) = served
    assert cfg == BrokerConfig()
    assert cfg.node_id == 1
    assert cfg.effective_log_retention_ms == 168 * 3_600_000
    assert cfg.effective_log_roll_ms == 168 * 3_600_000
    assert cfg.offsets_retention_minutes == 10080
    assert cfg.offsets_topic_num_partitions == 1
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600


def test_precedence_flag_over_env_over_file_over_default(served: list[BrokerConfig], tmp_path: Path) -> None:
    toml = tmp_path / "kcoord.toml"
    toml.write_text(
        'node.id = 7\nlog.retention.bytes = 1000\nlog.flush.policy = "interval"\n'
        "[offsets.retention]\nminutes = 60\n"
    )
    env = {"KCOORD_NODE_ID": "8", "KCOORD_LOG_RETENTION_BYTES": "2000"}
    result = serve(["--config", str(toml), "--node-id", "9"], env=env)
    assert result.exit_code == 0, result.output
    cfg = served[-1]
    assert cfg.node_id == 9  # flag beats env and file
    assert cfg.log_retention_bytes == 2000  # env beats file
    assert cfg.log_flush_policy == "interval"  # file beats default
    assert cfg.offsets_retention_minutes == 60  # nested table -> Kafka's dotted name
    assert cfg.log_segment_bytes == 1073741824  # default

    serve(["--config", str(toml)], env={})
    assert served[-1].node_id == 7
    serve([], env={"KCOORD_NODE_ID": "8"})
    assert served[-1].node_id == 8


def test_config_file_from_the_environment(served: list[BrokerConfig], tmp_path: Path) -> None:
    toml = tmp_path / "k.toml"
    toml.write_text('listeners = "PLAINTEXT://127.0.0.1:0"\n')
    assert serve([], env={"KCOORD_CONFIG": str(toml)}).exit_code == 0
    assert served[-1].listeners == "PLAINTEXT://127.0.0.1:0"


@pytest.mark.parametrize(
    ("args", "toml"),
    [
        (["--node-id", "-1"], None),
        (["--log-flush-policy", "sometimes"], None),
        (["--message-max-bytes", "0"], None),
        ([], "no.such.setting = 1\n"),
        ([], "node.id = 'x'\n"),
        ([], "this is not toml"),
    ],
)
def test_invalid_settings_are_usage_errors(
    served: list[BrokerConfig], tmp_path: Path, args: list[str], toml: str | None
) -> None:
    if toml is not None:
        (tmp_path / "bad.toml").write_text(toml)
        args = [*args, "--config", str(tmp_path / "bad.toml")]
    result = serve(args)
    assert result.exit_code == 2, result.output
    assert not served


def test_help_lists_every_setting_with_its_default_and_env_var() -> None:
    result = CliRunner().invoke(cli.main, ["serve", "--help"], terminal_width=1000)
    assert result.exit_code == 0
    text = " ".join(result.output.split())  # undo click's wrapping
    for name, info in BrokerConfig.model_fields.items():
        kname = kafka_name(name)
        flag = "--" + kname.replace(".", "-")
        assert flag in text, flag
        default = info.default
        shown = (
            "(none)" if default is None else str(default).lower() if isinstance(default, bool) else default
        )
        assert re.search(re.escape(f"{kname}:") + r".*?" + re.escape(f"[default: {shown}]"), text), kname
        assert "KCOORD_" + name.upper() in text


def test_console_script_help_runs() -> None:
    exe = shutil.which("kcoord")
    cmd = [exe] if exe else [sys.executable, "-m", "kcoord.cli"]
    out = subprocess.run([*cmd, "serve", "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "--log-dirs" in out.stdout and "--listeners" in out.stdout


def test_load_toml_flattens_tables(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[group]\nmin.session.timeout.ms = 10\n[log]\ndirs = "/d"\n')
    assert load_toml(p) == {"group_min_session_timeout_ms": 10, "log_dirs": "/d"}
    cfg = build_config(load_toml(p), {"log_dirs": "/e"})
    assert cfg.log_dirs == "/e" and cfg.group_min_session_timeout_ms == 10


def test_ms_settings_take_precedence_over_hours() -> None:
    cfg = BrokerConfig(log_retention_hours=1, log_roll_hours=2)
    assert (cfg.effective_log_retention_ms, cfg.effective_log_roll_ms) == (3_600_000, 7_200_000)
    cfg = BrokerConfig(log_retention_hours=1, log_retention_ms=5, log_roll_ms=6)
    assert (cfg.effective_log_retention_ms, cfg.effective_log_roll_ms) == (5, 6)


def test_listeners() -> None:
    (ep,) = parse_listeners("plaintext://[::1]:9092")
    assert (ep.name, ep.host, ep.port) == ("PLAINTEXT", "::1", 9092)
    assert [e.name for e in parse_listeners("A://h:1, B://:2")] == ["A", "B"]
    for bad in ("", "h:1", "A://h", "A://h:1,A://h:2"):
        with pytest.raises(ValueError):
            parse_listeners(bad)
    cfg = BrokerConfig(listeners="PLAINTEXT://0.0.0.0:9092", advertised_listeners="PLAINTEXT://kc:19092")
    assert str(cfg.advertised_endpoints()[0]) == "PLAINTEXT://kc:19092"
    assert cfg.kafka_items()["log.dirs"] == "./kcoord-data"


def test_serve_imports_the_broker_with_the_collector_off_and_starts_it_on(
    served: list[BrokerConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import kcoord.server.app

    seen: list[tuple[bool, int]] = []
    monkeypatch.setattr(
        kcoord.server.app, "run_broker", lambda cfg: seen.append((gc.isenabled(), gc.get_freeze_count()))
    )
    try:
        assert serve([]).exit_code == 0
    finally:
        gc.unfreeze()  # this test process's objects go back to the collector
    ((enabled, frozen),) = seen
    assert enabled and frozen > 0  # what the imports made is out of the collector's sight
