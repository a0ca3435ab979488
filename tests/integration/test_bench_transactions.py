"""Smoke test of the transactions benchmark (bench/transactions.py) in a tiny configuration.

It checks that the module runs end to end against kcoord (both flush policies), that every run
finished without error, that the read_committed pass delivered exactly the committed and plain
records, and that the suite's table rows render. It times nothing: speed is judged by the
benchmark's same-run ratios, never by a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.slow  # starts two brokers and worker processes


def test_transactions_bench_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "txn"
    cmd = [
        sys.executable,
        "-m",
        "bench.transactions",
        "--peers",
        "kcoord,kcoord-os",
        "--repeats",
        "1",
        "--warmup",
        "0.2",
        "--duration",
        "0.5",
        "--producers",
        "1,2",
        "--input-records",
        "20",
        "--producer-config",
        "retry.backoff.ms=1",
        "--fetch-txns",
        "10",
        "--fetch-partitions",
        "2",
        "--fetch-passes",
        "2",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    assert "## Transactions" in proc.stdout
    res = json.loads((out / "transactions.json").read_text())
    recs = res["records"]
    assert {(r["row"], r["peer"]) for r in recs} == {
        (row, peer) for row in ("ctp p1", "ctp p2", "fetch") for peer in ("kcoord", "kcoord-os")
    }
    assert [r for r in recs if "error" in r] == [], proc.stderr[-5000:]
    assert res["problems"] == []
    for r in recs:
        if r["row"] == "fetch":
            # 10 transactions, every fifth aborted: 8 committed and 2 aborted x 100, 20 plain in each
            assert r["counts"] == {"committed": 800, "aborted": 200, "plain": 200}
            assert r["read_committed"]["correct"] and r["read_committed"]["aborted"] == 0
            assert r["read_uncommitted"]["correct"] and r["read_uncommitted"]["records"] == 1200
        else:
            assert r["txns"] > 0
            assert r["wraps"] > 0  # 20 input records per partition: the workers went round the input

    # the suite's rows (python -m bench --workloads transactions) render from the same result
    from bench.summary import table_line, transactions_cells

    rows = transactions_cells(res)
    assert [r["row"] for r in rows] == [
        "txn ctp p1",
        "txn ctp p2",
        "txn fetch read_committed (read_uncommitted)",
    ]
    assert all(table_line(r).startswith("| txn ") for r in rows)  # every cell names a column
