"""The package metadata registers the pytest plugin (``pytest11``), so an installed kcoord gives
every project's pytest the kcoord fixtures. Checked on metadata built from this tree's
pyproject.toml into a temporary directory (the installed kcoord may be another checkout)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

from tests.harness import REPO


def test_pytest11_entry_point_names_the_plugin(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from setuptools import setup; setup()",
            "-q",
            "egg_info",
            "--egg-base",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (egg_info,) = tmp_path.glob("*.egg-info")
    dist = importlib.metadata.PathDistribution(egg_info)
    (ep,) = dist.entry_points.select(group="pytest11")
    assert ep.name == ep.value == "kcoord.testing.pytest_plugin"
    plugin = ep.load()
    assert {"kcoord_broker", "kcoord_bootstrap", "kcoord_names"} <= set(vars(plugin))
    requires = " ".join(dist.requires or [])
    assert "aiohttp" in requires and "prometheus-client" in requires
