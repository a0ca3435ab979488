"""The Python floor: kload's commit rows against canned answers served by Python on uvloop.

    python -m bench.python_floor                        # commit c1 d1, c8 d1, c64 d1, c8 d16, c64 d16
    python -m bench.python_floor --rows 'c8 d1' --repeats 3

kload's limit-server gives the machine's ceiling for a load with canned answers written in C.
This is the same server in Python, on the event loop kcoord runs on (uvloop, one thread, an
asyncio Protocol per connection), with no state, no log and no fsync: each OffsetCommit is
answered at once with every partition's error code 0. What it reaches is more than any
single-process Python broker can reach on that row, since a real one does all of this and then
the work; when it stays below 2x Tansu's figure for a row, that row's target needs more than one
process. It serves what kload's commit workload sends: ApiVersions v0, CreateTopics v2, Metadata
v1, FindCoordinator v1, OffsetCommit v2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/python_floor.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api key, version, correlation id
NPARTS = 64  # kload's kbench topic
METADATA, OFFSET_COMMIT, FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS = 3, 8, 10, 18, 19
SERVED = {
    API_VERSIONS: (0, 0),
    CREATE_TOPICS: (2, 2),
    METADATA: (1, 1),
    FIND_COORDINATOR: (1, 1),
    OFFSET_COMMIT: (2, 2),
}


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def skip(self, n: int) -> None:
        self.pos += n

    def string(self) -> bytes:
        n = self.i16()
        if n < 0:
            return b""
        self.pos += n
        return self.buf[self.pos - n : self.pos]


def _str(b: bytes) -> bytes:
    return _I16.pack(len(b)) + b


def answer(frame: bytes, port: int) -> bytes:
    """The framed canned answer to one request frame (without its size prefix)."""
    key, _version, corr = _HEAD.unpack_from(frame, 0)
    r = _Reader(frame, 8)
    r.string()  # client id
    out = [_I32.pack(corr)]
    if key == OFFSET_COMMIT:  # v2: group, generation, member, retention, topics
        r.string()
        r.skip(4)
        r.string()
        r.skip(8)
        n_topics = r.i32()
        out.append(_I32.pack(n_topics))
        for _ in range(n_topics):
            out.append(_str(r.string()))
            n_parts = r.i32()
            out.append(_I32.pack(n_parts))
            for _ in range(n_parts):
                out.append(_I32.pack(r.i32()) + b"\x00\x00")
                r.skip(8)
                r.string()
    elif key == API_VERSIONS:
        out.append(b"\x00\x00" + _I32.pack(len(SERVED)))
        out += [struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in SERVED.items()]
    elif key == CREATE_TOPICS:  # every topic "created"
        n_topics = r.i32()
        out.append(_I32.pack(0) + _I32.pack(n_topics))
        for _ in range(n_topics):
            name = r.string()
            r.skip(6)
            for _ in range(r.i32()):
                r.skip(4)
                r.skip(4 * max(0, r.i32()))
            for _ in range(r.i32()):
                r.string()
                r.string()
            out.append(_str(name) + b"\x00\x00\xff\xff")
    elif key == METADATA:
        out.append(_I32.pack(1) + _I32.pack(1) + _str(b"127.0.0.1") + _I32.pack(port) + b"\xff\xff")
        out.append(_I32.pack(1))  # controller
        n_topics = r.i32()
        out.append(_I32.pack(max(0, n_topics)))
        for _ in range(max(0, n_topics)):
            out.append(b"\x00\x00" + _str(r.string()) + b"\x00" + _I32.pack(NPARTS))
            out += [b"\x00\x00" + struct.pack(">iiiiii", i, 1, 1, 1, 1, 1) for i in range(NPARTS)]
    elif key == FIND_COORDINATOR:
        out.append(_I32.pack(0) + b"\x00\x00\xff\xff" + _I32.pack(1) + _str(b"127.0.0.1") + _I32.pack(port))
    else:
        raise ValueError(f"api key {key} is not served")
    body = b"".join(out)
    return _I32.pack(len(body)) + body


class _Canned(asyncio.Protocol):
    def __init__(self, port: int) -> None:
        self.port = port
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, out = 0, len(buf), []
        while end - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            out.append(answer(bytes(buf[pos + 4 : pos + 4 + size]), self.port))
            pos += 4 + size
        del buf[:pos]
        if out:
            self.transport.writelines(out)


async def _serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: _Canned(port), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


ROWS = {
    "c1 d1": "-c 1 -d 1",
    "c8 d1": "-c 8 -d 1",
    "c64 d1": "-c 64 -d 1",
    "c8 d16": "-c 8 -d 16",
    "c64 d16": "-c 64 -d 16",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.python_floor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)  # the server process itself
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=4.0)
    args = ap.parse_args(argv)
    if args.serve:
        import uvloop

        uvloop.run(_serve(args.serve))
        return 0
    kload = common.build_kload() / "kload"
    port = common.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.python_floor", "--serve", str(port)], cwd=common.REPO
    )
    try:
        while not common.port_open(port):
            if proc.poll() is not None:
                raise SystemExit("the canned Python server did not start")
        for row in [r.strip() for r in args.rows.split(",") if r.strip()]:
            rates, cpus = [], []
            for _ in range(args.repeats):
                cmd = [str(kload), "--port", str(port), "-w", "commit", *ROWS[row].split(), "-P", "1"]
                cmd += ["-T", str(args.duration), "--warmup", "1", "--server-pid", str(proc.pid)]
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                line = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "{}"
                rec = json.loads(line)
                if not rec.get("valid"):
                    raise SystemExit(f"kload run invalid: {line} {res.stderr[-500:]}")
                rates.append(rec["rps"])
                cpus.append(rec.get("server_cpu_cores") or 0.0)
            print(
                f"python floor: commit {row} p1: {statistics.median(rates):,.0f} req/s "
                f"(median of {args.repeats}; server {statistics.median(cpus):.2f} cores)",
                flush=True,
            )
    finally:
        common.stop_process(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
