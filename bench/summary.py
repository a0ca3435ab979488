"""The summary of a ``python -m bench`` run: medians and same-repeat ratios of kload's records,
issue 15's targets judged met or not met (each part a row misses named with its figure), and the
table with the restart, memory, share and optional workloads' rows, written to
``summary.{md,json}``. bench/run.py runs the matrix and calls ``report``; ``--summarise DIR``
re-renders an earlier run from its files.
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import Any

from bench import durability

PEERS = ("kcoord", "mock", "tansu", "limit", "pyfloor")  # the table's columns, in order
# issue 15's targets (a row's "met?" names each part it misses, with the figure)
CPU_OVER_MOCK = 1.5  # broker CPU per request, commit and fetch-offsets rows
THROUGHPUT_OVER_MOCK = 0.75  # req/s at depth >= 8, fsync on; p99 <= the mock's too
DEEP = 8  # requests in flight per connection from which the throughput target applies
CEILING_SHARE = 0.9  # depth-1 commit rows: share of the durable ceiling
PRODUCE_MB_S = 1000.0  # produce c8 d16 (100 x 1 KiB per request)
PRODUCE_P99_MS = 20.0
PRODUCE_CPU_US = 100.0  # broker CPU per 100-record request
REBALANCE_TARGET_MS = 40.0  # m1000, first JoinGroup answer to Stable
RESTART_TARGET_S = 0.5  # 1 M offset-commit records over 10 k keys


def _med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def primary(wl: str, rec: dict[str, Any]) -> float | None:
    if wl == "rebalance":
        return rec.get("first_join_to_stable_ms")
    if wl in ("produce", "fetch"):
        return rec.get("mb_per_s")
    return rec.get("rps")


def unit(wl: str) -> str:
    return {"rebalance": "ms, 1st JoinGroup resp -> Stable", "produce": "MB/s", "fetch": "MB/s"}.get(
        wl, "req/s"
    )


def summarise(
    matrix: list[tuple[str, str, str]],
    recs: list[dict[str, Any]],
    sync_us: float | None = None,
    write_mb_s: float | None = None,
    sync_sys_us: float | None = None,
) -> list[dict[str, Any]]:
    """Rows of medians and same-repeat ratios; ``sync_us`` (the durability floor) gives the commit
    rows their durable ceiling, ``write_mb_s`` (the disk's durable write rate) the produce rows',
    ``sync_sys_us`` (the kernel CPU of one sync) the commit rows' CPU floor with the Python one."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in recs:
        by.setdefault((r["config"], r["peer"]), []).append(r)
    rows = []
    for cid, wl, _ in matrix:
        row: dict[str, Any] = {"config": cid, "workload": wl, "unit": unit(wl), "peers": {}}
        valid: dict[str, dict[int, dict[str, Any]]] = {}
        for peer in PEERS:
            rs = by.get((cid, peer), [])
            if not rs:
                continue
            ok = [r for r in rs if r.get("valid")]
            valid[peer] = {r["repeat"]: r for r in ok}
            entry = {
                "runs": len(rs),
                "valid": len(ok),
                "value": _med([primary(wl, r) for r in ok]),
                "p99_us": _med([r.get("lat_us", {}).get("p99") for r in ok]) if wl != "rebalance" else None,
                "cpu_cores": _med([r.get("server_cpu_cores") for r in ok]),
                "cpu_s": _med([r.get("server_cpu_s") for r in ok]),
                "rss_mb": _med([(r.get("server_rss_kb") or 0) / 1024 or None for r in rs]),
                "partitions_per_s": _med([r.get("partitions_per_s") for r in ok]),
                # CPU of everything but this peer and kload: other processes competing for the machine
                "other_cpu": _med(
                    [
                        max(0.0, r["machine_busy_cores"] - r["server_cpu_cores"] - r["kload_cpu_cores"])
                        for r in ok
                        if r.get("machine_busy_cores") is not None and r.get("server_cpu_cores") is not None
                    ]
                ),
                "cpu_us_per_req": _med([cpu_us_per_req(wl, r) for r in ok]),
            }
            if wl == "rebalance":
                entry["t_stable_ms"] = _med([r.get("t_stable_ms") for r in ok])
                entry["rejoins"] = _med([r.get("rejoins") for r in ok])
            row["peers"][peer] = entry
        for other in PEERS[1:]:
            row[f"k_over_{other}"] = _same_repeat_ratio(valid, other, functools.partial(primary, wl))
        row["cpu_over_mock"] = _same_repeat_ratio(valid, "mock", functools.partial(cpu_us_per_req, wl))
        # What no work at all costs a Python server on this row, against the same mock.
        row["floor_cpu_over_mock"] = _same_repeat_ratio(
            valid, "mock", functools.partial(cpu_us_per_req, wl), mine="pyfloor"
        )
        # A durable broker also pays at least one sync's kernel CPU per c x d requests in flight.
        row["durable_floor_cpu_over_mock"] = (
            _same_repeat_ratio(
                valid,
                "mock",
                functools.partial(_plus_sync_share, wl, sync_sys_us / durability.in_flight(cid)),
                mine="pyfloor",
                theirs=functools.partial(cpu_us_per_req, wl),
            )
            if wl == "commit" and sync_sys_us is not None
            else None
        )
        limit = row["peers"].get("limit")
        row["durable_ceiling"] = (
            durability.ceiling(durability.in_flight(cid), limit["value"], sync_us)
            if wl == "commit" and limit is not None
            else write_mb_s
            if wl == "produce"
            else None
        )
        floor = row["peers"].get("pyfloor")
        # The durable ceiling of a server whose every answer costs the Python floor's time: what a
        # broker in Python could reach at best, whatever its work.
        row["floor_ceiling"] = (
            durability.ceiling(durability.in_flight(cid), floor["value"], sync_us)
            if wl == "commit" and floor is not None and floor["value"]
            else None
        )
        row["target"], row["met"] = judge(row)
        rows.append(row)
    return rows


def cpu_us_per_req(wl: str, rec: dict[str, Any]) -> float | None:
    """Broker CPU microseconds per request, from the cores kload saw busy and the request rate."""
    if wl == "rebalance" or not rec.get("rps") or rec.get("server_cpu_cores") is None:
        return None
    return rec["server_cpu_cores"] / rec["rps"] * 1e6


def _plus_sync_share(wl: str, share_us: float, rec: dict[str, Any]) -> float | None:
    """CPU µs per request of a record plus a sync's share of it."""
    cpu = cpu_us_per_req(wl, rec)
    return None if cpu is None else cpu + share_us


def _same_repeat_ratio(
    valid: dict[str, dict[int, dict[str, Any]]],
    other: str,
    value: Any,
    mine: str = "kcoord",
    theirs: Any = None,
) -> float | None:
    """Median over repeats of ``mine``'s ``value`` (kcoord's) / the other peer's ``theirs`` (the
    same ``value`` unless given) in the same repeat."""
    theirs = value if theirs is None else theirs
    ratios = []
    for rep, r in valid.get(mine, {}).items():
        o = valid.get(other, {}).get(rep)
        a, b = value(r), theirs(o) if o else None
        if a is not None and b:
            ratios.append(a / b)
    return _med(ratios)


def judge(row: dict[str, Any]) -> tuple[str, str]:
    """Issue 15's targets for one row: (what is asked, "met" or what misses it with the figure)."""
    wl, cid = row["workload"], row["config"]
    k, m = row["peers"].get("kcoord"), row["peers"].get("mock")
    if k is None:
        return "-", "-"
    # (part of the target, met?, the figure); met None = cannot be judged (a peer missing)
    parts: list[tuple[str, bool | None, str]] = []
    if wl in ("commit", "fetch-offsets"):
        r = row["cpu_over_mock"]
        figure = _x(r) + _floor(row.get("floor_cpu_over_mock"), row.get("durable_floor_cpu_over_mock"))
        parts.append((f"CPU/req <= {CPU_OVER_MOCK}x mock", None if r is None else r <= CPU_OVER_MOCK, figure))
        if durability.connections_and_depth(cid)[1] >= DEEP:
            r = row["k_over_mock"]
            ok = None if r is None else r >= THROUGHPUT_OVER_MOCK
            parts.append((f">= {THROUGHPUT_OVER_MOCK}x mock req/s", ok, _x(r)))
            kp, mp = k["p99_us"], (m or {}).get("p99_us")
            ok = None if kp is None or mp is None else kp <= mp
            parts.append(
                ("p99 <= mock's", ok, f"{fmt(kp and kp / 1000, 2)} vs {fmt(mp and mp / 1000, 2)} ms")
            )
        elif wl == "commit":
            ceil = row["durable_ceiling"]
            r = k["value"] / ceil if ceil and k["value"] is not None else None
            floor = row.get("floor_ceiling")
            figure = _x(r) + _floor(floor / ceil if floor and ceil else None)
            parts.append(
                (f">= {CEILING_SHARE}x durable ceiling", None if r is None else r >= CEILING_SHARE, figure)
            )
    elif wl == "produce" and durability.connections_and_depth(cid)[1] >= DEEP:
        v, p99, cpu = k["value"], k["p99_us"], k["cpu_us_per_req"]
        ceil = row["durable_ceiling"]
        # Every byte is synced before its answer: the disk's own durable write rate bounds the row.
        above = f", above the disk's durable {fmt(ceil)} MB/s" if ceil and ceil < PRODUCE_MB_S else ""
        parts += [
            (
                f">= {PRODUCE_MB_S:.0f} MB/s",
                None if v is None else v >= PRODUCE_MB_S,
                f"{fmt(v)} MB/s{above}",
            ),
            (
                f"p99 <= {PRODUCE_P99_MS:.0f} ms",
                None if p99 is None else p99 <= PRODUCE_P99_MS * 1000,
                f"{fmt(p99 and p99 / 1000, 1)} ms",
            ),
            (
                f"CPU <= {PRODUCE_CPU_US:.0f} us/req",
                None if cpu is None else cpu <= PRODUCE_CPU_US,
                f"{fmt(cpu)} us",
            ),
        ]
    elif wl == "fetch":
        r = row["k_over_mock"]
        parts.append((">= mock MB/s", None if r is None else r >= 1.0, _x(r)))
    elif wl == "rebalance" and cid.endswith("m1000"):
        v = k["value"]
        parts.append(
            (f"<= {REBALANCE_TARGET_MS:.0f} ms", None if v is None else v <= REBALANCE_TARGET_MS, fmt(v, 1))
        )
    if not parts:
        return "-", "INVALID runs" if k["valid"] < k["runs"] else "-"
    target = "; ".join(p[0] for p in parts)
    if k["valid"] < k["runs"]:
        return target, "INVALID runs"
    missed = [f"{name}: {figure}" for name, ok, figure in parts if ok is False]
    unknown = [name for name, ok, _ in parts if ok is None]
    if missed:
        return target, "NOT MET (" + "; ".join(missed) + ")"
    if unknown:
        return target, "n/a (no figure for " + "; ".join(unknown) + ")"
    return target, "met (" + "; ".join(figure for _, _, figure in parts) + ")"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _floor(ratio: float | None, with_syncs: float | None = None) -> str:
    """The same figure for the Python floor, where it was measured (and with the kernel CPU of
    one sync per c x d requests added)."""
    if ratio is None:
        return ""
    syncs = "" if with_syncs is None else f"; with a sync per c x d requests {with_syncs:.2f}x"
    return f" (Python floor {ratio:.2f}x{syncs})"


def fmt(x: float | None, nd: int = 0) -> str:
    if x is None:
        return "-"
    if nd == 0 or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.{nd}f}"


COLUMNS = (
    "row",
    "unit",
    "kcoord",
    "kcoord p99 ms",
    "mock",
    "mock p99 ms",
    "Tansu",
    "Tansu p99 ms",
    "limit",
    "limit p99 ms",
    "Python floor",
    "kcoord / mock",
    "kcoord / Tansu",
    "kcoord / limit",
    "kcoord CPU",
    "kcoord CPU us/req",
    "mock CPU us/req",
    "Python floor CPU us/req",
    "kcoord RSS MB",
    "other CPU",
    "target",
    "met?",
)
TITLE = {"kcoord": "kcoord", "mock": "mock", "tansu": "Tansu", "limit": "limit", "pyfloor": "Python floor"}


def render(rows: list[dict[str, Any]], extra_rows: list[dict[str, str]], repeats: int) -> str:
    """The table: one line per matrix row, then the other workloads' rows (cells by column name)."""
    lines = [
        f"## kcoord benchmark (median of {repeats} repeat(s); ratios are medians of same-repeat ratios)",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for row in rows:
        wl = row["workload"]
        cells = {"row": row["config"], "unit": row["unit"]}
        for peer, title in TITLE.items():
            e = row["peers"].get(peer)
            if e is None:
                continue
            nd = 1 if wl in ("rebalance", "produce", "fetch") else 0
            val = fmt(e["value"], nd)
            if e["valid"] < e["runs"]:
                val += f" ({e['valid']}/{e['runs']} valid)"
            cells[title] = val
            if peer == "pyfloor":  # its CPU, not its latency or ratio, is what the targets need
                cells["Python floor CPU us/req"] = fmt(e["cpu_us_per_req"], 1)
                continue
            cells[f"{title} p99 ms"] = fmt(e["p99_us"] / 1000, 2) if e["p99_us"] is not None else "-"
            if peer != "kcoord":
                r = row[f"k_over_{peer}"]
                cells[f"kcoord / {title}"] = "-" if r is None else f"{r:.2f}"
        k = row["peers"].get("kcoord") or {}
        if wl == "rebalance":
            cells["kcoord CPU"] = f"{fmt(k.get('cpu_s'), 2)} s"
        else:
            cells["kcoord CPU"] = f"{fmt(k.get('cpu_cores'), 2)} cores"
            cells["kcoord CPU us/req"] = fmt(k.get("cpu_us_per_req"), 1)
            cells["mock CPU us/req"] = fmt((row["peers"].get("mock") or {}).get("cpu_us_per_req"), 1)
        cells |= {
            "kcoord RSS MB": fmt(k.get("rss_mb"), 0),
            "other CPU": fmt(k.get("other_cpu"), 2),
            "target": row["target"],
            "met?": row["met"],
        }
        lines.append(table_line(cells))
    lines += [table_line(cells) for cells in extra_rows]
    lines += [
        "",
        "Throughput is req/s for commit/fetch-offsets (partitions/s = req/s x P), MB/s for produce/fetch.",
        "mock: librdkafka's mock cluster (kload's mockpeer, one C thread, memory only), the C peer of",
        "issue 15's CPU and throughput targets. Python floor (commit rows): canned answers from Python",
        "on uvloop, no state, no log (bench/python_floor.py): what a Python server costs before any",
        "work; 'Python floor' in a met? cell is its figure for the same target (for the durable ceiling:",
        "the ceiling computed from its req/s instead of the limit server's). Rebalance rows: time from",
        "the first JoinGroup response",
        "to all members Stable, lower is better;",
        "their ratios are kcoord's time / the peer's time and the CPU column is kcoord CPU seconds.",
        "kcoord CPU: cores busy during the measured window (kload reads /proc/PID/stat);",
        "RSS: kcoord's VmRSS right after each run. other CPU: cores busy on the machine during kcoord's runs",
        "outside the kcoord and kload processes: kernel threads working for them (fsync, loopback) and any",
        "other process; compare it with other runs: a high value means the machine was not quiet.",
        "durable ceiling (commit rows): the most req/s any broker that fsyncs before answering could give",
        "the row's c x d requests in flight: c x d / (c x d / limit req/s + one sync), with the sync",
        "latency measured on this disk in the same run (bench/durability.py); for produce rows, the",
        "disk's durable sequential write rate measured in the same place (every byte synced before its",
        "answer: no durable broker exceeds it).",
    ]
    return "\n".join(lines)


def table_line(cells: dict[str, str]) -> str:
    unknown = set(cells) - set(COLUMNS)
    assert not unknown, f"no such column: {unknown}"
    return "| " + " | ".join(cells.get(c, "-") for c in COLUMNS) + " |"


# --- share workload ------------------------------------------------------------------------------
def share_cells(r: dict[str, Any]) -> dict[str, str]:
    from bench.share import describe

    name = f"share {r.get('consumers', 4)} consumers"
    if "records_per_s" not in r:
        return {
            "row": name,
            "unit": "records/s",
            "target": "(ShareFetch + acknowledge)",
            "met?": describe(r).removeprefix("share: "),
        }
    return {
        "row": name,
        "unit": "records/s (1 KiB)",
        "kcoord": fmt(r["records_per_s"]),
        "kcoord CPU": f"{fmt(r['kcoord_cpu_s'], 2)} s",
        "kcoord CPU us/req": f"{fmt(r['kcoord_cpu_us_per_record'], 1)}/rec",
        "kcoord RSS MB": fmt(r.get("rss_mb"), 0),
        "target": "(no target; no peer has share groups)",
    }


# --- consumer-groups workload (optional) --------------------------------------------------------
def consumer_groups_cells(f: dict[str, Any]) -> list[dict[str, str]]:
    """bench/consumer_groups.py's two rows (KIP-848, 1000 members); no peer has a figure to compare."""
    from bench.consumer_groups import RECONCILE_TARGET_MS, STEADY_TARGET_US

    return [
        {
            "row": "KIP-848 m1000 reconcile",
            "unit": "ms, last join -> reconciled",
            "kcoord": fmt(f["reconcile_ms"], 1),
            "kcoord CPU": f"{fmt(f['reconcile_broker_cpu_s'], 2)} s",
            "kcoord RSS MB": fmt(f["rss_mb"], 0),
            "target": f"<= {RECONCILE_TARGET_MS:.0f} ms",
            "met?": f["reconcile_met"],
        },
        {
            "row": "KIP-848 m1000 steady heartbeats",
            "unit": "us CPU/heartbeat (idle-subtracted)",
            "kcoord": f"{fmt(f['us_per_hb'], 1)} ({fmt(f['us_per_hb_idle_subtracted'], 1)})",
            "kcoord CPU": f"{fmt(f['steady_broker_cpu_s'], 2)} s",
            "kcoord CPU us/req": fmt(f["us_per_hb"], 1),
            "kcoord RSS MB": fmt(f["rss_mb"], 0),
            "target": f"<= {STEADY_TARGET_US:.0f} us",
            "met?": f["steady_met"],
        },
    ]


# --- transactions workload (optional) ------------------------------------------------------------
def transactions_cells(res: dict[str, Any]) -> list[dict[str, str]]:
    """bench/transactions.py's rows: kcoord (always) beside the mock and Tansu; kcoord-os in the notes."""
    by = {(e["row"], e["peer"]): e for e in res["rows"]}
    rows = []
    for row in dict.fromkeys(e["row"] for e in res["rows"]):
        k, t = by.get((row, "kcoord"), {}), by.get((row, "tansu"), {})
        m, o = by.get((row, "mock"), {}), by.get((row, "kcoord-os"), {})
        if row == "fetch":
            kr, ku = k.get("read_committed", {}), k.get("read_uncommitted", {})
            tu = t.get("read_uncommitted", {})
            rows.append(
                {
                    "row": "txn fetch read_committed (read_uncommitted)",
                    "unit": "MB/s",
                    "kcoord": f"{fmt(kr.get('mb_per_s'), 1)} ({fmt(ku.get('mb_per_s'), 1)})",
                    "Tansu": f"- ({fmt(tu.get('mb_per_s'), 1)})",
                    "kcoord / Tansu": f"- ({fmt(t.get('kcoord_over'), 2)})",
                    "target": f"(no target) kcoord rc/ru time {fmt(k.get('time_ratio'), 2)}; Tansu and the "
                    "mock do not isolate (no rc figure)",
                }
            )
            continue
        rows.append(
            {
                "row": f"txn {row}",
                "unit": "txn/s (p99: commit)",
                "kcoord": fmt(k.get("txn_per_s")),
                "kcoord p99 ms": fmt(k.get("p99_ms"), 2),
                "mock": fmt(m.get("txn_per_s")),
                "mock p99 ms": fmt(m.get("p99_ms"), 2),
                "Tansu": fmt(t.get("txn_per_s")),
                "Tansu p99 ms": fmt(t.get("p99_ms"), 2),
                "kcoord / mock": fmt(m.get("kcoord_over"), 2),
                "kcoord / Tansu": fmt(t.get("kcoord_over"), 2),
                "kcoord CPU us/req": f"{fmt(k.get('broker_cpu_us_per_txn'))}/txn",
                "kcoord RSS MB": fmt(k.get("rss_mb"), 0),
                "target": f"(no target) kcoord-os {fmt(o.get('txn_per_s'))} txn/s",
            }
        )
    return rows


def restart_cells(r: dict[str, Any]) -> dict[str, str]:
    t, n = r.get("median_s"), r.get("records", 0)
    met = (
        "n/a (< 1M records)"
        if n < 1_000_000
        else (
            f"met ({fmt(t, 2)} s)" if t is not None and t <= RESTART_TARGET_S else f"NOT MET ({fmt(t, 2)} s)"
        )
    )
    return {
        "row": f"restart {n:,} commit records over {r.get('keys') or '?'} keys",
        "unit": "s to 1st OffsetFetch",
        "kcoord": f"{fmt(t, 2)} (empty dir {fmt(r.get('empty_start_s'), 2)})",
        "kcoord RSS MB": fmt(r.get("rss_mb"), 0),
        "target": f"<= {RESTART_TARGET_S} s (1M records, 10 k keys)",
        "met?": met,
    }


def memory_cells(r: dict[str, Any]) -> dict[str, str]:
    from bench.memory import TARGET_MB, describe

    worst = max(r.get("filled_mb") or 0.0, r.get("restarted_mb") or 0.0)
    return {
        "row": f"memory {r['groups']:,} groups x {r['partitions']} partitions",
        "unit": "MB RSS (commits / restart)",
        "kcoord": f"{fmt(r.get('filled_mb'), 0)} / {fmt(r.get('restarted_mb'), 0)}",
        "kcoord RSS MB": fmt(worst, 0),
        "target": f"<= {TARGET_MB:.0f} MB (10k x 10)",
        "met?": describe(r).rsplit(": ", 1)[1],
    }


def report(
    out: Path,
    matrix: list[tuple[str, str, str]],
    repeats: int,
    restart_result: dict[str, Any] | None,
    share: dict[str, Any] | None,
    crashes: list[str],
    consumer_groups: dict[str, Any] | None = None,
    transactions: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    restarted: list[str] | None = None,
) -> str:
    """Summarise out/raw.jsonl (+ the restart and share results) into out/summary.{md,json}."""
    raw = out / "raw.jsonl"
    recs = [json.loads(line) for line in raw.read_text().splitlines()] if raw.exists() else []
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    sync = meta.get("durability")
    rows = summarise(
        matrix,
        recs,
        sync["floor_us"] if sync else None,
        (sync or {}).get("write_mb_s"),
        (sync or {}).get("sync_sys_us"),
    )
    extra = [restart_cells(restart_result)] if restart_result else []
    if memory is not None:
        extra.append(memory_cells(memory))
    if share is not None:
        extra.append(share_cells(share))
    if consumer_groups is not None:
        extra += consumer_groups_cells(consumer_groups["figures"])
    if transactions is not None:
        extra += transactions_cells(transactions)
    table = render(rows, extra, repeats)
    if meta:
        table += (
            f"\n\nkcoord under test: {meta.get('kcoord_git', 'unknown')}; Tansu: {meta.get('tansu')}; "
            f"{meta.get('nproc')} CPUs; load average at start {meta.get('loadavg_start')}"
        )
    if sync:
        table += "\n" + durability.describe(sync)
    notes = ["", "## Problems seen", ""]
    for r in recs:
        if r.get("valid"):
            continue
        notes.append(
            f"- INVALID {r['peer']} r{r['repeat']} '{r['config']}': rc {r.get('rc')}, "
            f"errors {r.get('errors')} {r.get('errcodes', {})}, malformed {r.get('malformed')}, "
            f"mismatch {r.get('mismatch')}, {r.get('error', '')} (kload log: {out}/logs/kload-{r['peer']}-"
            f"{r['config'].replace(' ', '_')}-r{r['repeat']}.log)"
        )
    notes += [f"- CRASH {c}" for c in crashes]
    notes += [f"- RESTARTED {r}" for r in restarted or []]
    if consumer_groups is not None:
        cgf = consumer_groups["figures"]
        if cgf["ok"] < cgf["runs"] or cgf["stable_confirmed"] < cgf["ok"] or cgf["bad_answers"]:
            notes.append(
                f"- consumer-groups: {cgf['ok']}/{cgf['runs']} runs ok, Describe Stable "
                f"{cgf['stable_confirmed']}/{cgf['ok']}, {cgf['bad_answers']} bad steady answers "
                f"(see {out}/consumer_groups.json)"
            )
        notes += [f"- kcoord log: {line}" for line in consumer_groups["problems"][:20]]
    if transactions is not None:
        notes += [
            f"- transactions {r['row']} {r['peer']} r{r['repeat']}: {r['error']}"
            for r in transactions["records"]
            if "error" in r
        ]
        notes += [f"- kcoord log: {line}" for line in transactions["problems"][:20]]
    if restart_result and not restart_result.get("all_correct", True):
        notes.append(f"- restart: an OffsetFetch answered a wrong offset: {restart_result['runs']}")
    log_lines = problems_in_logs(out / "logs")
    notes += [f"- kcoord log: {line}" for line in log_lines[:20]]
    if len(log_lines) > 20:
        notes.append(f"- ... {len(log_lines) - 20} more error lines in {out}/logs/peer-kcoord-*.log")
    if len(notes) == 3:
        notes.append("- none (every kload run valid, no crash, no error in kcoord's log)")
    text = table + "\n" + "\n".join(notes) + "\n"
    (out / "summary.md").write_text(text)
    (out / "summary.json").write_text(
        json.dumps(
            {
                "rows": rows,
                "restart": restart_result,
                "share": share,
                "consumer_groups": consumer_groups,
                "transactions": transactions,
                "memory": memory,
                "crashes": crashes,
                "restarted": restarted or [],
                "repeats": repeats,
            },
            indent=1,
        )
    )
    return text


def problems_in_logs(logdir: Path) -> list[str]:
    out = []
    for path in sorted(logdir.glob("peer-kcoord-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(m in line for m in ("[error", "[critical", "Traceback", '"level": "error"')):
                out.append(f"{path.name}: {line.strip()[:300]}")
    return out
