"""``kcoord serve`` imports structlog without rich, and its log lines are the same either way."""

from __future__ import annotations

import subprocess
import sys

from tests.harness import REPO

PROBE = """
import sys
from kcoord.logsetup import configure_logging, import_structlog

if sys.argv[1] == "lean":
    import_structlog()
    assert "rich" not in sys.modules and "pygments" not in sys.modules, sorted(sys.modules)
configure_logging()
import structlog

try:
    1 / 0
except ZeroDivisionError:
    structlog.get_logger().exception("boom", key="value")
import rich.table  # the CLI's tables still import
"""


def _log(variant: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, variant], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The timestamp is the one part of a line that differs between the two runs.
    return proc.stderr.split(" ", 1)[1]


def test_structlog_without_rich_logs_the_same_lines() -> None:
    lean, full = _log("lean"), _log("full")
    assert "ZeroDivisionError: division by zero" in lean and "key=value" in lean
    assert lean == full
