"""bench/run.py judges issue 15's targets from kload's records: each part a row misses is named
with its figure, and a row without the peer it is judged against says so instead of passing.
Pure arithmetic on made-up records; nothing is run or timed."""

from __future__ import annotations

from typing import Any

from bench.summary import summarise


def rec(peer: str, config: str, rps: float, cores: float, p99_us: float, repeat: int = 0, **kw: Any) -> dict:
    return {
        "peer": peer,
        "config": config,
        "repeat": repeat,
        "valid": True,
        "rps": rps,
        "server_cpu_cores": cores,
        "lat_us": {"p99": p99_us},
        **kw,
    }


def judged(config: str, workload: str, recs: list[dict], sync_us: float | None = None) -> dict:
    (row,) = summarise([(config, workload, "")], recs, sync_us)
    return row


def test_deep_commit_row_met_only_when_cpu_throughput_and_p99_all_are() -> None:
    row = judged(
        "commit c8 d16 p1",
        "commit",
        [
            rec("kcoord", "commit c8 d16 p1", 40_000, 0.9, 900),
            rec("mock", "commit c8 d16 p1", 50_000, 0.9, 1000),
        ],
    )
    # CPU/req 22.5 vs 18 us = 1.25x; 0.8x the mock's req/s; p99 0.9 vs 1.0 ms
    assert row["met"].startswith("met"), row["met"]
    slow = judged(
        "commit c8 d16 p1",
        "commit",
        [
            rec("kcoord", "commit c8 d16 p1", 20_000, 1.0, 3000),
            rec("mock", "commit c8 d16 p1", 50_000, 0.9, 1000),
        ],
    )
    assert slow["met"] == (
        "NOT MET (CPU/req <= 1.5x mock: 2.78x; >= 0.75x mock req/s: 0.40x; p99 <= mock's: 3.00 vs 1.00 ms)"
    )


def test_depth_one_commit_row_is_judged_against_the_durable_ceiling() -> None:
    recs = [
        rec("kcoord", "commit c1 d1 p1", 5_000, 0.2, 300),
        rec("mock", "commit c1 d1 p1", 20_000, 0.5, 60),
        rec("limit", "commit c1 d1 p1", 20_000, 0.3, 50),
    ]
    # ceiling = 1 / (1/20000 + 150 us) = 5,000 req/s: kcoord is at 1.0x of it
    row = judged("commit c1 d1 p1", "commit", recs, sync_us=150.0)
    assert round(row["durable_ceiling"]) == 5_000
    assert row["target"] == "CPU/req <= 1.5x mock; >= 0.9x durable ceiling"
    assert row["met"] == "NOT MET (CPU/req <= 1.5x mock: 1.60x)"  # 40 us vs 25 us


def test_without_the_mock_a_row_is_not_judged_met() -> None:
    row = judged("fetch c8", "fetch", [rec("kcoord", "fetch c8", 100, 0.5, 100, mb_per_s=900.0)])
    assert row["met"] == "n/a (no figure for >= mock MB/s)"


def test_produce_and_rebalance_targets() -> None:
    produce = judged(
        "produce c8 d16",
        "produce",
        [rec("kcoord", "produce c8 d16", 2_000, 1.0, 30_000, mb_per_s=200.0)],
    )
    assert produce["met"] == (
        "NOT MET (>= 1000 MB/s: 200 MB/s; p99 <= 20 ms: 30.0 ms; CPU <= 100 us/req: 500 us)"
    )
    rebalance = judged(
        "rebalance m1000",
        "rebalance",
        [
            {
                "peer": "kcoord",
                "config": "rebalance m1000",
                "repeat": 0,
                "valid": True,
                "first_join_to_stable_ms": 35.0,
            }
        ],
    )
    assert rebalance["met"] == "met (35.0)"


def test_produce_above_the_disks_durable_rate_says_so() -> None:
    (row,) = summarise(
        [("produce c8 d16", "produce", "")],
        [rec("kcoord", "produce c8 d16", 4_000, 0.4, 10_000, mb_per_s=400.0)],
        sync_us=100.0,
        write_mb_s=450.0,
    )
    assert row["met"] == "NOT MET (>= 1000 MB/s: 400 MB/s, above the disk's durable 450 MB/s)"


def test_the_python_floor_is_given_beside_each_commit_figure() -> None:
    """A commit row's CPU and durable-ceiling figures name what canned answers from Python cost
    on the same row: the share of a target no Python broker's work can recover."""
    recs = [
        rec("kcoord", "commit c1 d1 p1", 2_500, 0.2, 300),
        rec("mock", "commit c1 d1 p1", 20_000, 0.5, 60),
        rec("limit", "commit c1 d1 p1", 20_000, 0.3, 50),
        rec("pyfloor", "commit c1 d1 p1", 10_000, 0.5, 100),
    ]
    row = judged("commit c1 d1 p1", "commit", recs, sync_us=150.0)
    # kcoord 80 us/req, the floor 50, the mock 25; ceilings 1/(50+150 us) = 5,000 and
    # 1/(100+150 us) = 4,000 req/s: kcoord at 0.5x, the floor's ceiling at 0.8x
    assert row["met"] == (
        "NOT MET (CPU/req <= 1.5x mock: 3.20x (Python floor 2.00x); "
        ">= 0.9x durable ceiling: 0.50x (Python floor 0.80x))"
    )
    # A sync's kernel CPU (50 us) per request in flight comes on top: (50 + 50) / 25 us
    (synced,) = summarise([("commit c1 d1 p1", "commit", "")], recs, 150.0, None, 50.0)
    assert (
        "CPU/req <= 1.5x mock: 3.20x (Python floor 2.00x; with a sync per c x d requests 4.00x)"
        in (synced["met"])
    )
    deep = judged(
        "commit c8 d16 p1",
        "commit",
        [
            rec("kcoord", "commit c8 d16 p1", 40_000, 0.9, 900),
            rec("mock", "commit c8 d16 p1", 50_000, 0.9, 1000),
            rec("pyfloor", "commit c8 d16 p1", 100_000, 0.9, 500),
        ],
    )
    assert deep["met"] == "met (1.25x (Python floor 0.50x); 0.80x; 0.90 vs 1.00 ms)"


def test_a_re_rendered_summary_keeps_the_memory_row(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--summarise DIR`` re-renders a run from its files: the memory row used to be dropped
    (summary.json did not keep it), and re-rendering rewrote summary.md without it."""
    import json

    from bench import run
    from bench.summary import report

    (tmp_path / "meta.json").write_text(json.dumps({"matrix": [], "repeats": 1}))
    memory = {
        "groups": 10_000,
        "partitions": 10,
        "empty_mb": 60.0,
        "filled_mb": 122.0,
        "restarted_mb": 138.0,
        "valid": True,
    }
    first = report(tmp_path, [], 1, None, None, [], memory=memory)
    assert "memory 10,000 groups x 10 partitions" in first
    assert run.resummarise(tmp_path) == 0
    assert "memory 10,000 groups x 10 partitions" in (tmp_path / "summary.md").read_text()
