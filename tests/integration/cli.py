"""Running the ``kcoord`` command in tests: in-process through click's CliRunner (the real
command, real sockets), or as ``python -m kcoord.cli`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner

from kcoord.cli import main
from tests.harness import REPO, BrokerProcess


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def kcoord(broker: BrokerProcess | None, *args: str) -> Run:
    """``kcoord ARGS --bootstrap-server BROKER`` in-process."""
    argv = [*args, "--bootstrap-server", broker.bootstrap] if broker is not None else list(args)
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


def kcoord_json(broker: BrokerProcess, *args: str) -> Any:
    run = kcoord(broker, *args, "--output", "json")
    assert run.code == 0, run
    return run.json()


def kcoord_process(broker: BrokerProcess, *args: str) -> Run:
    """``python -m kcoord.cli ARGS --bootstrap-server BROKER`` as a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "kcoord.cli", *args, "--bootstrap-server", broker.bootstrap],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)
