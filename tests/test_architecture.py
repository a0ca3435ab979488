"""The architecture as import-linter contracts (pyproject.toml, [tool.importlinter]).

Layers point down (cli > server > apis > {dataplane, classic, share, consumer} > groups > base
modules > runtime > storage > protocol), coordinator kinds never import one another, the PySpark
data source uses none of the broker, and no package's modules import one another in a cycle;
and the strict types of the packages [tool.mypy] lists.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

PYPROJECT = str(Path(__file__).resolve().parents[1] / "pyproject.toml")


def test_import_contracts_hold() -> None:
    assert lint_imports(config_filename=PYPROJECT, no_cache=True) == 0


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("kcoord.share.group", "kcoord.classic.store"),  # coordinator kinds are independent
        ("kcoord.classic.group", "kcoord.apis.groups"),  # state machines know no handler
        ("kcoord.runtime.shard", "kcoord.groups.store"),  # the runtime names no group
        ("kcoord.runtime.runtime", "kcoord.config"),  # ... and no broker setting
        ("kcoord.storage.log", "kcoord.runtime.records"),  # storage knows bytes only
        ("kcoord.protocol.records", "kcoord.storage.log"),  # protocol imports nothing of kcoord's
        ("kcoord.share.durability", "kcoord.share.partition"),  # a cycle inside a package
        ("kcoord.cli.group_admin", "kcoord.apis.share_groups"),  # the groups command is a client
        ("kcoord.cli.topics", "kcoord.config"),  # ... and knows no broker setting
        ("kcoord.spark.client", "kcoord.protocol.errors"),  # allowed: see the next assertion
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    monkeypatch: pytest.MonkeyPatch, importer: str, imported: str
) -> None:
    """The contracts are not vacuous: each of these imports, added to the real graph, is refused
    (the last one, a client using protocol codecs, is allowed)."""
    build = grimp.build_graph

    def with_the_import(*args: object, **kwargs: object) -> grimp.ImportGraph:
        graph = build(*args, **kwargs)
        graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
        return graph

    monkeypatch.setattr(grimp, "build_graph", with_the_import)
    allowed = importer == "kcoord.spark.client"
    assert lint_imports(config_filename=PYPROJECT, no_cache=True) == (0 if allowed else 1)


def test_strict_types_hold() -> None:
    """mypy --strict over the packages [tool.mypy] lists (the runtime, the coordinators, storage
    and the data plane)."""
    from mypy import api

    stdout, stderr, status = api.run(["--config-file", PYPROJECT, "--no-incremental"])
    assert status == 0, stdout + stderr
