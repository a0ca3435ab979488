"""KIP-848 consumer group benchmark: a 1000-member group through a raw-protocol driver.

    python -m bench.consumer_groups                       # 1000 members, 1000 partitions, 3 repeats
    python -m bench.consumer_groups --members 200 --steady-s 10 --repeats 1 --no-classic
    python -m bench.consumer_groups --profile reconcile   # py-spy on the broker in the measured phase

Measures, on a fresh kcoord per repeat (durable defaults, as the suite runs it):

1. **Reconcile after the last join.** A topic of --partitions partitions; --members members join
   one group (ConsumerGroupHeartbeat v1, epoch 0, subscribed to the topic, owning nothing),
   pipelined over --connections connections, each member taking on the assignment of its answer.
   The last member joins only once the others are answered; the clock starts when its answer
   arrives. Members then heartbeat as clients do (the full form: epoch and owned partitions) and
   take on at once any assignment they are sent, until every member is reconciled (below); the
   clock stops at the answer that completes it. A ConsumerGroupDescribe afterwards (outside the
   window) confirms that the group is Stable at that epoch with those assignments. Printed: ms,
   rounds (the most heartbeats one member sent in the window), heartbeats sent, and the CPU
   seconds of the broker (/proc/PID/stat) and of the driver during the window.
2. **Steady state.** Every member heartbeats once per --interval-ms (5000), spread evenly, in the
   incremental form the Java client sends when nothing changed (member id and epoch; every other
   field null or -1, TopicPartitions null), for --steady-s (20) after a 1 s warm-up. Broker CPU
   seconds / heartbeats sent in the window = CPU us per heartbeat. The broker's idle CPU over a
   window as long (no traffic, the group alive) is measured after it; both the raw and the
   idle-subtracted figures are printed. Every answer must have error 0, the final epoch, and no
   assignment.
3. **Classic row beside it.** kload's classic ``rebalance --members 1000`` on another fresh kcoord
   (same session and rebalance timeouts as bench/run.py).

The driver is stdlib asyncio (uvloop when installed) with a hand-written ConsumerGroupHeartbeat v1
codec (flexible: request header v2, compact strings and arrays, tagged fields, the nullable
Assignment struct); at start-up it is checked against kcoord's own codecs
(``kcoord.protocol.messages``) byte for byte, and kcoord's codecs are used only outside the
measured windows (CreateTopics, ConsumerGroupDescribe). Members are not bound to connections.

Targets (the issue): <= 200 ms from the last member's join to every member reconciled, and
<= 50 us of broker CPU per steady-state heartbeat (judged on the raw figure). A benchmark prints;
it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/consumer_groups.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from kcoord.protocol.fields import uvarint

HEARTBEAT, DESCRIBE, CREATE_TOPICS = 68, 69, 19
HB_VERSION = 1
CLIENT_ID = b"kcoord-bench"
TOPIC = "kbench-cg"
GROUP = "kbench-cg"
REBALANCE_TIMEOUT_MS = 300_000
RECONCILE_TARGET_MS = 200.0
STEADY_TARGET_US = 50.0
CLASSIC_TARGET_MS = 200.0  # issue 5's classic target, for reference
WARMUP_S = 1.0
LOG_MARKERS = ("[error", "[critical", "Traceback", '"level": "error"')

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_II = struct.Struct(">ii")
_IH = struct.Struct(">ih")
_HEAD = struct.Struct(">ihhi")  # frame size, api key, api version, correlation id

Owned = dict[bytes, tuple[int, ...]]  # topic id (16 bytes) -> sorted partitions


# --- hand codec: ConsumerGroupHeartbeat v1 ---------------------------------------------------------
def cstr(s: str | bytes | None) -> bytes:
    """COMPACT_NULLABLE_STRING (a non-null one is a COMPACT_STRING)."""
    if s is None:
        return b"\x00"
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b) + 1) + b


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _read_cstr(buf: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return buf[pos : pos + n - 1].decode(), pos + n - 1


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


# request header v2: client id stays a (non-compact) nullable string, then empty tagged fields
_HEADER_TAIL = _I16.pack(len(CLIENT_ID)) + CLIENT_ID + b"\x00"


def encode_heartbeat(
    corr: int,
    group_c: bytes,
    member_c: bytes,
    epoch: int,
    *,
    rebalance_timeout_ms: int = -1,
    topics: list[str] | None = None,
    owned: Owned | None = None,
    instance_id: str | None = None,
    rack_id: str | None = None,
    regex: str | None = None,
    assignor: str | None = None,
) -> bytes:
    """A framed ConsumerGroupHeartbeat v1 request. ``group_c`` and ``member_c`` are already
    compact strings (``cstr``); None fields go out as null (-1 for RebalanceTimeoutMs)."""
    parts = [
        _HEADER_TAIL,
        group_c,
        member_c,
        _I32.pack(epoch),
        cstr(instance_id),
        cstr(rack_id),
        _I32.pack(rebalance_timeout_ms),
    ]
    if topics is None:
        parts.append(b"\x00")
    else:
        parts.append(uvarint(len(topics) + 1))
        parts += [cstr(t) for t in topics]
    parts += [cstr(regex), cstr(assignor)]
    if owned is None:
        parts.append(b"\x00")
    else:
        parts.append(uvarint(len(owned) + 1))
        for tid, ps in owned.items():
            parts += [tid, uvarint(len(ps) + 1), struct.pack(f">{len(ps)}i", *ps), b"\x00"]
    parts.append(b"\x00")  # the request's tagged fields
    body = b"".join(parts)
    return _HEAD.pack(len(body) + 8, HEARTBEAT, HB_VERSION, corr) + body


def decode_heartbeat(frame: bytes) -> tuple[int, str | None, str | None, int, int, Owned | None]:
    """A ConsumerGroupHeartbeat v1 response frame (after the size): correlation id, response
    header v1's tagged fields, then the body. Raises ValueError if bytes are left over."""
    pos = _skip_tags(frame, 4)
    _throttle, err = _IH.unpack_from(frame, pos)
    pos += 6
    if frame[pos] == 0:
        msg, pos = None, pos + 1
    else:
        msg, pos = _read_cstr(frame, pos)
    member_id, pos = _read_cstr(frame, pos)
    epoch, interval = _II.unpack_from(frame, pos)
    pos += 8
    assignment: Owned | None = None
    if frame[pos] == 0xFF:  # a nullable struct: int8 -1 null, 1 present
        pos += 1
    else:
        pos += 1
        n, pos = _read_uvarint(frame, pos)
        assignment = {}
        for _ in range(n - 1):
            tid = frame[pos : pos + 16]
            k, pos = _read_uvarint(frame, pos + 16)
            ps = struct.unpack_from(f">{k - 1}i", frame, pos)
            pos = _skip_tags(frame, pos + 4 * (k - 1))
            assignment[tid] = tuple(sorted(ps))
        pos = _skip_tags(frame, pos)  # the Assignment struct's tagged fields
    pos = _skip_tags(frame, pos)  # the response's tagged fields
    if pos != len(frame):
        raise ValueError(f"{len(frame) - pos} bytes left after a ConsumerGroupHeartbeat response")
    return err, msg, member_id, epoch, interval, assignment


# --- kcoord's codecs: the start-up check and the requests outside the measured windows ----------
def _codecs(api_key: int, name: str) -> tuple[Any, Any]:
    from kcoord.protocol.messages import register_schema_pair, request_class, response_class

    req, resp = request_class(api_key), response_class(api_key)
    if req is None or resp is None:
        req, resp = register_schema_pair(name)
    return req, resp


def check_codec() -> None:
    """Prove the hand codec against kcoord's: each hand-encoded request decodes with kcoord's
    codec to the intended fields, and kcoord's codec encodes those fields to the same bytes;
    each response kcoord's codec encodes hand-decodes to its fields."""
    from kcoord.protocol.frames import parse_request_header, skip_tagged_fields

    req_cls, resp_cls = _codecs(HEARTBEAT, "ConsumerGroupHeartbeat")
    t1, t2 = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1122_3344_5566_7788), uuid.uuid4()
    cases: list[dict[str, Any]] = [
        dict(epoch=0, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, topics=[TOPIC], owned={}),
        dict(
            epoch=7,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            topics=[TOPIC, "x" * 200],
            owned={t1.bytes: (0, 5, 999), t2.bytes: tuple(range(300))},
        ),
        dict(epoch=12),
        dict(epoch=3, instance_id="i-1", rack_id="r", regex="kb.*", assignor="uniform", owned={}),
    ]
    for i, case in enumerate(cases):
        member = f"member-{i}-" + "m" * (i * 60)
        epoch = case.pop("epoch")
        frame = encode_heartbeat(1000 + i, cstr(GROUP), cstr(member), epoch, **case)
        (size,) = _I32.unpack_from(frame, 0)
        if size != len(frame) - 4:
            raise SystemExit(f"hand codec: frame size {size} != {len(frame) - 4}")
        body = bytes(frame[4:])
        hdr = parse_request_header(body)
        pos = skip_tagged_fields(body, hdr.body_offset)
        if (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) != (
            HEARTBEAT,
            HB_VERSION,
            1000 + i,
            CLIENT_ID.decode(),
        ):
            raise SystemExit(f"hand codec: request header {hdr}")
        got = req_cls.decode(body[pos:], version=HB_VERSION)
        owned = case.get("owned")
        want = {
            "group_id": GROUP,
            "member_id": member,
            "member_epoch": epoch,
            "instance_id": case.get("instance_id"),
            "rack_id": case.get("rack_id"),
            "rebalance_timeout_ms": case.get("rebalance_timeout_ms", -1),
            "subscribed_topic_names": case.get("topics"),
            "subscribed_topic_regex": case.get("regex"),
            "server_assignor": case.get("assignor"),
            "topic_partitions": None
            if owned is None
            else [(uuid.UUID(bytes=t), list(ps)) for t, ps in owned.items()],
        }
        seen = {k: getattr(got, k) for k in want}
        if seen["topic_partitions"] is not None:
            seen["topic_partitions"] = [(tp.topic_id, list(tp.partitions)) for tp in seen["topic_partitions"]]
        if seen != want:
            raise SystemExit(f"hand codec: request case {i} decodes to {seen}, expected {want}")
        fields = dict(want)
        if owned is not None:
            fields["topic_partitions"] = [
                req_cls.TopicPartitions(topic_id=t, partitions=ps) for t, ps in want["topic_partitions"]
            ]
        if bytes(req_cls(**fields).encode(version=HB_VERSION)) != body[pos:]:
            raise SystemExit(f"hand codec: request case {i}: kcoord's codec encodes other bytes")
    tps = resp_cls.Assignment.TopicPartitions
    answers = [
        (0, None, "m-1", 4, 5000, None),
        (0, None, "m-2", 9, 5000, {t1.bytes: (1, 2, 3), t2.bytes: tuple(range(0, 400, 3))}),
        (0, None, "m-3", 9, 5000, {}),
        (25, "Member m-4 is not a member of group g." + "!" * 150, None, 0, 0, None),
    ]
    for i, (err, msg, mid, epoch, interval, assignment) in enumerate(answers):
        resp = resp_cls(
            throttle_time_ms=0,
            error_code=err,
            error_message=msg,
            member_id=mid,
            member_epoch=epoch,
            heartbeat_interval_ms=interval,
            assignment=None
            if assignment is None
            else resp_cls.Assignment(
                topic_partitions=[
                    tps(topic_id=uuid.UUID(bytes=t), partitions=list(ps)) for t, ps in assignment.items()
                ]
            ),
        )
        frame = _I32.pack(77) + b"\x00" + bytes(resp.encode(version=HB_VERSION))
        got_answer = decode_heartbeat(frame)
        if got_answer != (err, msg, mid, epoch, interval, assignment):
            raise SystemExit(f"hand codec: response case {i} decodes to {got_answer}")


def codec_call(port: int, api_key: int, name: str, version: int, timeout: float = 60.0, **fields: Any) -> Any:
    """One request through kcoord's codecs on a new connection (setup and checks only)."""
    from kcoord.protocol.frames import skip_tagged_fields

    req_cls, resp_cls = _codecs(api_key, name)
    flexible = req_cls.flexible_version_q(version)
    body = bytes(req_cls(**fields).encode(version=version))
    head = struct.pack(">hhi", api_key, version, 1) + _I16.pack(len(CLIENT_ID)) + CLIENT_ID
    head += b"\x00" if flexible else b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(_I32.pack(len(head) + len(body)) + head + body)
        (size,) = _I32.unpack(common._recv_exact(s, 4))
        frame = common._recv_exact(s, size)
    if _I32.unpack_from(frame, 0)[0] != 1:
        raise ConnectionError("correlation id mismatch")
    pos = skip_tagged_fields(bytes(frame), 4) if flexible else 4
    return resp_cls.decode(frame[pos:], version=version)


def create_topic(port: int, name: str, partitions: int) -> bytes:
    """CreateTopics v7; the topic id (16 bytes)."""
    req_cls, _ = _codecs(CREATE_TOPICS, "CreateTopics")
    topic = req_cls.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )
    resp = codec_call(
        port, CREATE_TOPICS, "CreateTopics", 7, topics=[topic], timeout_ms=60_000, validate_only=False
    )
    t = resp.topics[0]
    if t.error_code != 0:
        raise SystemExit(f"CreateTopics {name}: error {t.error_code} {t.error_message}")
    return t.topic_id.bytes


def describe_group(port: int, group: str) -> Any:
    resp = codec_call(
        port, DESCRIBE, "ConsumerGroupDescribe", 1, group_ids=[group], include_authorized_operations=False
    )
    return resp.groups[0]


# --- processes ---------------------------------------------------------------------------------------
def cpu_s(pid: int) -> float:
    """CPU seconds (utime + stime) of a process so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Broker:
    """A fresh ``kcoord serve`` (temp log dir, the suite's durable defaults) on a free port."""

    def __init__(self, logdir: Path, tag: str, extra: list[str]):
        self.data = tempfile.mkdtemp(prefix="kcoord-cg-data-")
        self.port = common.free_port()
        self.log_path = logdir / f"kcoord-{tag}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - lives as long as the broker
        self.proc = subprocess.Popen(
            common.kcoord_cmd(self.port, self.data, common.KCOORD_ARGS + extra),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not common.port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"kcoord did not start; see {self.log_path}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            common.stop_process(self.proc)
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)

    def problems(self) -> list[str]:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [f"{self.log_path.name}: {x.strip()[:300]}" for x in lines if any(m in x for m in LOG_MARKERS)]

    def warnings(self) -> collections.Counter[str]:
        """Warning lines by their event (the text before the first key=value)."""
        out: collections.Counter[str] = collections.Counter()
        for x in self.log_path.read_text(errors="replace").splitlines():
            if "[warning" in x:
                out[x.split("]", 1)[-1].strip().split("  ")[0][:80]] += 1
        return out


class Profiler:
    """py-spy on the broker while a phase is measured (``--profile``): raw collapsed stacks."""

    def __init__(self, pid: int, raw: Path, rate: int, native: bool = False):
        self.raw = raw
        # --native (C frames: uvloop, syscalls) needs py-spy to pause the broker for each sample
        how = ["--native"] if native else ["--nonblocking"]
        self.proc = subprocess.Popen(
            [
                "py-spy",
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--nolineno",
                "--threads",
                *how,
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # py-spy prints nothing on attaching when its output is not a terminal: give it a moment
        # (outside the measured window) and check that it is still there.
        time.sleep(1.0)
        if self.proc.poll() is not None:
            err = self.proc.communicate()[1]
            raise SystemExit(f"py-spy exited (rc {self.proc.returncode}): {err.strip()[-300:]}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # our own child: py-spy writes its output on SIGINT
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


# --- the driver --------------------------------------------------------------------------------------
class Conn(asyncio.Protocol):
    """One connection with pipelined requests: answers come back in order, each to its callback."""

    def __init__(self, driver: Driver):
        self.driver = driver
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiting: collections.deque[tuple[int, Callable[[bytes], None]]] = collections.deque()
        self.corr = 0
        self.out: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment] - uvloop's is no asyncio.Transport subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting or not self.driver.closing:
            self.driver.fail(ConnectionError(f"connection lost ({exc}) with {len(self.waiting)} in flight"))

    def next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def send(self, corr: int, frame: bytes, on_answer: Callable[[bytes], None]) -> None:
        self.waiting.append((corr, on_answer))
        if not self.out:
            self.driver.loop.call_soon(self.flush)  # one write per connection per loop pass
        self.out.append(frame)

    def flush(self) -> None:
        if self.out and self.transport is not None:
            self.transport.write(b"".join(self.out))
        self.out = []

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, n = 0, len(buf)
        while n - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if n - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            if not self.waiting:
                self.driver.fail(ValueError("an answer nobody asked for"))
                return
            corr, on_answer = self.waiting.popleft()
            if _I32.unpack_from(frame, 0)[0] != corr:
                self.driver.fail(
                    ValueError(f"correlation id {_I32.unpack_from(frame, 0)[0]}, expected {corr}")
                )
                return
            try:
                on_answer(frame)
            except Exception as e:  # any failure ends the run with its reason
                self.driver.fail(e)
                return
        if pos:
            del buf[:pos]


class Member:
    __slots__ = (
        "busy",
        "epoch",
        "idx",
        "member_c",
        "member_id",
        "must_release",
        "n_hb",
        "owned",
        "releasing",
        "sent_gen",
    )

    def __init__(self, idx: int):
        self.idx = idx
        self.member_id = str(uuid.uuid4())  # v1: the client makes its own member id (KIP-1082)
        self.member_c = cstr(self.member_id)
        self.epoch = 0
        self.owned: Owned = {}
        self.busy = False  # a heartbeat in flight (one at a time, as a client)
        self.n_hb = 0  # heartbeats sent in the reconcile window
        # took on an answer that revoked partitions: its next heartbeat releases them
        self.must_release = False
        self.releasing = False  # the heartbeat in flight releases partitions
        self.sent_gen = 0  # releases answered when the heartbeat in flight was sent


class Driver:
    def __init__(
        self, port: int, pid: int, members: int, topic: str, topic_id: bytes, partitions: int, conns: int
    ):
        self.loop = asyncio.get_running_loop()
        self.port = port
        self.broker_pid = pid
        self.topic, self.topic_id, self.partitions = topic, topic_id, partitions
        self.group_c = cstr(GROUP)
        self.members = [Member(i) for i in range(members)]
        self.n_conns = conns
        self.conns: list[Conn] = []
        self.rr = 0
        self.closing = False
        self.failed: asyncio.Future[None] = self.loop.create_future()
        self.in_flight = 0
        self.idle_waiter: asyncio.Future[None] | None = None

    async def connect(self) -> None:
        for _ in range(self.n_conns):
            _, conn = await self.loop.create_connection(lambda: Conn(self), "127.0.0.1", self.port)
            self.conns.append(conn)

    def close(self) -> None:
        self.closing = True
        for c in self.conns:
            if c.transport is not None:
                c.transport.close()

    def fail(self, exc: BaseException) -> None:
        if not self.failed.done():
            self.failed.set_exception(exc)

    async def wait(self, fut: asyncio.Future[Any], timeout: float, what: str) -> Any:
        """``fut``'s result, unless the driver failed first or ``timeout`` passed."""
        done, _ = await asyncio.wait({fut, self.failed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if self.failed in done:
            self.failed.result()
        if fut not in done:
            raise TimeoutError(f"{what}: nothing after {timeout:.0f} s")
        return fut.result()

    def _send(
        self, m: Member, frame_of: Callable[[int], bytes], on_answer: Callable[[Member, bytes], None]
    ) -> None:
        conn = self.conns[self.rr]
        self.rr = (self.rr + 1) % len(self.conns)
        corr = conn.next_corr()
        m.busy = True
        self.in_flight += 1

        def answered(frame: bytes) -> None:
            m.busy = False
            self.in_flight -= 1
            on_answer(m, frame)
            if self.in_flight == 0 and self.idle_waiter is not None and not self.idle_waiter.done():
                self.idle_waiter.set_result(None)

        conn.send(corr, frame_of(corr), answered)

    async def drained(self, timeout: float = 60.0) -> None:
        if self.in_flight:
            self.idle_waiter = self.loop.create_future()
            await self.wait(self.idle_waiter, timeout, "answers still in flight")

    def _full(self, m: Member, epoch: int) -> Callable[[int], bytes]:
        owned = dict(m.owned)
        return lambda corr: encode_heartbeat(
            corr,
            self.group_c,
            m.member_c,
            epoch,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            topics=[self.topic],
            owned=owned,
        )

    # --- joining ------------------------------------------------------------------------------------
    async def join(self, before_last: Callable[[], None] | None = None) -> None:
        """Every member but the last joins (pipelined); then the last, and its answer starts the clock
        (``self.t0``) and the reconciliation."""
        head, last = self.members[:-1], self.members[-1]
        left = len(head)
        all_in: asyncio.Future[None] = self.loop.create_future()

        def joined(m: Member, frame: bytes) -> None:
            nonlocal left
            err, msg, _mid, epoch, _iv, assignment = decode_heartbeat(frame)
            if err:
                raise RuntimeError(f"join of member {m.idx}: error {err} {msg}")
            m.epoch, m.owned = epoch, assignment or {}
            left -= 1
            if left == 0:
                all_in.set_result(None)

        for m in head:
            self._send(m, self._full(m, 0), joined)
        if head:
            await self.wait(all_in, 600, f"{left} of {len(head)} joins unanswered")
        self._start_counts()
        if before_last is not None:
            before_last()
        self.done: asyncio.Future[float] = self.loop.create_future()
        self.t0 = 0.0
        self._send(last, self._full(last, 0), self._last_joined)

    def _last_joined(self, m: Member, frame: bytes) -> None:
        self.t0 = time.perf_counter()
        self.cpu0 = cpu_s(self.broker_pid), time.process_time()
        err, msg, _mid, epoch, _iv, assignment = decode_heartbeat(frame)
        if err:
            raise RuntimeError(f"join of the last member: error {err} {msg}")
        self.final_epoch = max(epoch, *(x.epoch for x in self.members))
        self.at_final = sum(1 for x in self.members if x.epoch == self.final_epoch and x is not m)
        self.release_gen = 0
        self.release_ms: list[float] = []  # when each release was answered, from the clock's start
        self.waking = False
        self.heartbeats = 0
        self._apply(m, epoch, assignment or {})
        # The clock runs: every member heartbeats as a client does after joining, in member order.
        for x in self.members:
            self._next(x)
        self._check()

    # --- reconciling --------------------------------------------------------------------------------
    # Reconciled = every member at the group's final epoch E and the members' owned sets partition
    # every partition of the topic exactly once. That is Kafka's Stable (assignment epoch = group
    # epoch, every member STABLE at it), for this group: after the last join nothing moves the
    # group epoch, so E is the target assignment's epoch. A member at epoch E is STABLE or
    # UNRELEASED_PARTITIONS (a member revoking keeps its older epoch), and in both states what it
    # was last sent (every answer to a full request carries the assignment) is a subset of its
    # target. The assignor's targets are disjoint and, all members subscribing to the topic, cover
    # every partition; so if the owned sets cover every partition, each one equals its member's
    # target and no member waits for a partition: all are STABLE at E. Conversely a Stable group
    # has every member at E owning exactly its target. The Describe after the window checks it.
    def _start_counts(self) -> None:
        self.owners: dict[tuple[bytes, int], int] = {}
        self.n_exact = self.n_over = 0
        for m in self.members:
            self._own(m.owned, 1)

    def _own(self, owned: Owned, d: int) -> None:
        owners = self.owners
        for tid, ps in owned.items():
            for p in ps:
                key = (tid, p)
                c = owners.get(key, 0)
                new = c + d
                owners[key] = new
                self.n_exact += (new == 1) - (c == 1)
                self.n_over += (new > 1) - (c > 1)

    def _apply(self, m: Member, epoch: int, assignment: Owned) -> bool:
        """Take on an answer (revoking and acquiring at once); whether the owned set changed."""
        e = self.final_epoch
        self.at_final += (epoch == e) - (m.epoch == e)
        m.epoch = epoch
        if assignment == m.owned:
            return False
        for tid, ps in m.owned.items():
            if not set(ps) <= set(assignment.get(tid, ())):
                m.must_release = True  # the next heartbeat tells the coordinator they are gone
                break
        self._own(m.owned, -1)
        self._own(assignment, 1)
        m.owned = assignment
        return True

    def _next(self, m: Member) -> None:
        """A member heartbeats again at once while it may not be reconciled: it is behind the final
        epoch, or must release revoked partitions, or a release was answered after its heartbeat was
        sent (a partition it waits for may be free now). Otherwise it waits for the next release:
        waiting for a partition another member still holds (UNRELEASED_PARTITIONS) is invisible to
        a client, and only a release can end it."""
        if self.done.done():
            return
        if m.epoch != self.final_epoch or m.must_release or m.sent_gen < self.release_gen:
            self._heartbeat(m)

    def _heartbeat(self, m: Member) -> None:
        m.releasing, m.must_release = m.must_release, False
        m.sent_gen = self.release_gen
        m.n_hb += 1
        self.heartbeats += 1
        self._send(m, self._full(m, m.epoch), self._answered)

    def _answered(self, m: Member, frame: bytes) -> None:
        err, msg, _mid, epoch, _iv, assignment = decode_heartbeat(frame)
        if err:
            raise RuntimeError(f"member {m.idx} epoch {m.epoch}: error {err} {msg}")
        if assignment is None:
            raise RuntimeError(f"member {m.idx}: no assignment in the answer to a full heartbeat")
        if epoch > self.final_epoch:
            raise RuntimeError(f"member {m.idx}: epoch {epoch} above the final epoch {self.final_epoch}")
        self._apply(m, epoch, assignment)
        if m.releasing:
            m.releasing = False
            self.release_gen += 1
            m.sent_gen = self.release_gen  # its own release frees nothing it waits for
            self.release_ms.append((time.perf_counter() - self.t0) * 1000)
            if not self.waking:  # wake the waiting members once per loop pass
                self.waking = True
                self.loop.call_soon(self._wake)
        if self._check():
            return
        self._next(m)
        self._stuck()

    def _wake(self) -> None:
        self.waking = False
        for m in self.members:
            if not m.busy:
                self._next(m)
        self._stuck()

    def _stuck(self) -> None:
        """Nothing in flight, no wake-up due, not reconciled: no rule sends anything any more."""
        if self.in_flight == 0 and not self.waking and not self.done.done():
            behind = sum(1 for m in self.members if m.epoch != self.final_epoch)
            self.fail(
                RuntimeError(
                    f"stuck: {behind} members behind epoch {self.final_epoch}, "
                    f"{self.partitions - self.n_exact - self.n_over} partitions unowned, "
                    f"{self.n_over} owned twice"
                )
            )

    def _check(self) -> bool:
        if self.done.done():
            return True
        if self.at_final == len(self.members) and self.n_exact == self.partitions and self.n_over == 0:
            t1 = time.perf_counter()
            self.cpu1 = cpu_s(self.broker_pid), time.process_time()
            self.done.set_result(t1)
            return True
        return False

    # --- steady state -------------------------------------------------------------------------------
    async def steady(self, seconds: float, interval_s: float, warmup_s: float) -> dict[str, Any]:
        """Every member heartbeats once per interval, spread evenly, in the incremental form; the
        broker's CPU per heartbeat over ``seconds`` after ``warmup_s``."""
        e = self.final_epoch
        bad: collections.Counter[str] = collections.Counter()

        def answered(m: Member, frame: bytes) -> None:
            err, msg, _mid, epoch, _iv, assignment = decode_heartbeat(frame)
            if err:
                bad[f"error {err}: {msg}"] += 1
            elif assignment is not None:
                bad["an assignment in a steady answer"] += 1
            elif epoch != e:
                bad[f"epoch {epoch} != {e}"] += 1

        def frame_of(m: Member) -> Callable[[int], bytes]:
            return lambda corr: encode_heartbeat(corr, self.group_c, m.member_c, e)

        members = self.members
        step = interval_s / len(members)
        t0 = time.perf_counter()
        start, end = t0 + warmup_s, t0 + warmup_s + seconds
        k = sent = skipped = 0
        cpu0: tuple[float, float] | None = None
        t_start = 0.0
        while True:
            now = time.perf_counter()
            if cpu0 is None and now >= start:
                cpu0, t_start, sent = (cpu_s(self.broker_pid), time.process_time()), now, 0
            if now >= end:
                break
            due = t0 + k * step
            if due > now:
                await asyncio.sleep(min(due, end) - now)
                if self.failed.done():
                    self.failed.result()
                continue
            m = members[k % len(members)]
            k += 1
            if m.busy:
                skipped += 1  # its previous heartbeat is still unanswered: a client waits too
                continue
            self._send(m, frame_of(m), answered)
            sent += 1
        cpu1 = cpu_s(self.broker_pid), time.process_time()
        wall = time.perf_counter() - t_start
        await self.drained()
        assert cpu0 is not None
        return {
            "heartbeats": sent,
            "seconds": wall,
            "rate": sent / wall,
            "broker_cpu_s": cpu1[0] - cpu0[0],
            "driver_cpu_s": cpu1[1] - cpu0[1],
            "skipped": skipped,
            "bad_answers": dict(bad),
        }


# --- one repeat --------------------------------------------------------------------------------------
async def _consumer_run(
    port: int, pid: int, args: argparse.Namespace, topic_id: bytes, profile_raw: Path | None
) -> dict[str, Any]:
    d = Driver(port, pid, args.members, TOPIC, topic_id, args.partitions, args.connections)
    await d.connect()
    prof: Profiler | None = None
    try:
        t_join = time.perf_counter()

        def before_last() -> None:
            nonlocal prof
            if profile_raw is not None and args.profile == "reconcile":
                prof = Profiler(pid, profile_raw, args.profile_rate, args.profile_native)

        await d.join(before_last)
        join_s = time.perf_counter() - t_join
        t1 = await d.wait(d.done, args.reconcile_timeout, "the group did not reconcile")
        if prof is not None:
            prof.stop()
            prof = None
        await d.drained()
        hbs = [m.n_hb for m in d.members]
        rec = {
            "join_s": join_s,
            "reconcile_ms": (t1 - d.t0) * 1000,
            "final_epoch": d.final_epoch,
            "rounds": max(hbs),
            "heartbeats": d.heartbeats,
            "releases": d.release_gen,
            "first_release_ms": d.release_ms[0] if d.release_ms else None,
            "broker_cpu_s": d.cpu1[0] - d.cpu0[0],
            "driver_cpu_s": d.cpu1[1] - d.cpu0[1],
        }
        # outside the window: what kcoord itself says about the group
        g = describe_group(port, GROUP)
        owned = {m.member_id: {(t, p) for t, ps in m.owned.items() for p in ps} for m in d.members}
        mismatched = 0
        for dm in g.members:
            assigned = {
                (tp.topic_id.bytes, p) for tp in dm.assignment.topic_partitions for p in tp.partitions
            }
            target = {
                (tp.topic_id.bytes, p) for tp in dm.target_assignment.topic_partitions for p in tp.partitions
            }
            if dm.member_epoch != d.final_epoch or assigned != target or assigned != owned.get(dm.member_id):
                mismatched += 1
        rec["describe"] = {
            "error": g.error_code,
            "state": g.group_state,
            "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "members": len(g.members),
            "members_not_matching": mismatched,
        }
        rec["stable_confirmed"] = (
            g.error_code == 0
            and g.group_state == "Stable"
            and g.group_epoch == g.assignment_epoch == d.final_epoch
            and len(g.members) == args.members
            and mismatched == 0
        )
        if profile_raw is not None and args.profile == "steady":
            prof = Profiler(pid, profile_raw, args.profile_rate, args.profile_native)
        st = await d.steady(args.steady_s, args.interval_ms / 1000, WARMUP_S)
        if prof is not None:
            prof.stop()
            prof = None
        idle_s = min(args.steady_s, 30.0)  # the members' sessions (45 s) outlive it
        c0 = cpu_s(pid)
        await asyncio.sleep(idle_s)
        st["idle_s"] = idle_s
        st["idle_cpu_s"] = cpu_s(pid) - c0
        idle_rate = st["idle_cpu_s"] / idle_s
        st["us_per_hb"] = st["broker_cpu_s"] / st["heartbeats"] * 1e6
        st["us_per_hb_idle_subtracted"] = (
            (st["broker_cpu_s"] - idle_rate * st["seconds"]) / st["heartbeats"] * 1e6
        )
        rec["steady"] = st
        rec["floor"] = await _floor_steady(d, args)
        return rec
    finally:
        if prof is not None:
            prof.stop()
        d.close()


async def _floor_steady(d: Driver, args: argparse.Namespace) -> dict[str, Any]:
    """The same steady traffic (the group's member ids and epoch) against bench/heartbeat_floor.py:
    canned answers from Python on uvloop, no broker behind them."""
    port = common.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.heartbeat_floor", "--port", str(port)], cwd=common.REPO
    )
    try:
        deadline = time.monotonic() + 30
        while not common.port_open(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("bench/heartbeat_floor.py did not start")
            await asyncio.sleep(0.05)
        floor = Driver(port, proc.pid, 0, d.topic, d.topic_id, d.partitions, args.connections)
        floor.members, floor.final_epoch = d.members, d.final_epoch
        await floor.connect()
        try:
            st = await floor.steady(args.steady_s, args.interval_ms / 1000, WARMUP_S)
        finally:
            floor.close()
        st["us_per_hb"] = st["broker_cpu_s"] / st["heartbeats"] * 1e6
        return st
    finally:
        proc.kill()
        proc.wait()


def consumer_repeat(
    args: argparse.Namespace, out: Path, rep: int, profile_raw: Path | None
) -> dict[str, Any]:
    """One KIP-848 run on a fresh kcoord; the record carries the broker log's problems."""
    broker = Broker(out / "logs", f"consumer-r{rep}", args.kcoord_args.split())
    try:
        versions = common.api_versions(broker.port)
        for key, want in ((HEARTBEAT, HB_VERSION), (DESCRIBE, 1)):
            lo, hi = versions.get(key, (0, -1))
            if not lo <= want <= hi:
                raise SystemExit(f"kcoord does not serve api {key} v{want} (advertises {lo}-{hi})")
        topic_id = create_topic(broker.port, TOPIC, args.partitions)
        rec = _run_async(_consumer_run(broker.port, broker.pid, args, topic_id, profile_raw))
        rec["rss_mb"] = common.rss_mb(broker.pid)
    except (RuntimeError, TimeoutError, ConnectionError, ValueError) as e:
        rec = {"error": f"{type(e).__name__}: {e}"}
    finally:
        broker.stop()
    rec["problems"] = broker.problems()
    rec["warnings"] = dict(broker.warnings())
    return rec


def _run_async(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def classic_repeat(args: argparse.Namespace, out: Path, rep: int) -> dict[str, Any]:
    """kload's classic rebalance of --members members on a fresh kcoord."""
    build = common.build_kload()
    broker = Broker(out / "logs", f"classic-r{rep}", args.kcoord_args.split())
    cmd = [
        str(build / "kload"),
        "-w",
        "rebalance",
        "--members",
        str(args.members),
        "--port",
        str(broker.port),
        "--server-pid",
        str(broker.pid),
        "--session-ms",
        "45000",
        "--rb-timeout",
        "150",
        "--label",
        "kcoord",
    ]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        broker.stop()
    (out / "logs" / f"kload-classic-r{rep}.log").write_text(
        common.shell_join(cmd) + "\n" + p.stdout + p.stderr
    )
    rec = next((json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")), None)
    if rec is None:
        return {"error": f"kload gave no result (rc {p.returncode})", "problems": broker.problems()}
    rec["valid"] = bool(rec.get("converged")) and rec.get("errors", 1) == 0 and rec.get("malformed", 1) == 0
    rec["problems"] = broker.problems()
    return rec


# --- summary -----------------------------------------------------------------------------------------
def _med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def _span(xs: list[float | None], nd: int) -> str:
    ys = [x for x in xs if x is not None]
    if not ys:
        return "-"
    return f"{min(ys):,.{nd}f} - {max(ys):,.{nd}f}"


def _fmt(x: float | None, nd: int = 0) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _met(value: float | None, target: float, n_ok: int, n_all: int) -> str:
    if n_ok < n_all:
        return f"INVALID runs ({n_ok}/{n_all} ok)" if n_ok else "NOT MET (no valid run)"
    if value is None:
        return "-"
    return "met" if value <= target else "NOT MET"


def figures(consumer: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the KIP-848 runs and each target's verdict (also the suite's table rows)."""
    ok = [r for r in consumer if "error" not in r]
    confirmed = sum(1 for r in ok if r.get("stable_confirmed"))
    clean = sum(1 for r in ok if not r["steady"]["bad_answers"])
    f: dict[str, Any] = {"runs": len(consumer), "ok": len(ok), "stable_confirmed": confirmed}
    for key, get in (
        ("reconcile_ms", lambda r: r["reconcile_ms"]),
        ("rounds", lambda r: r["rounds"]),
        ("heartbeats", lambda r: r["heartbeats"]),
        ("first_release_ms", lambda r: r.get("first_release_ms")),
        ("reconcile_broker_cpu_s", lambda r: r["broker_cpu_s"]),
        ("reconcile_driver_cpu_s", lambda r: r["driver_cpu_s"]),
        ("us_per_hb", lambda r: r["steady"]["us_per_hb"]),
        ("us_per_hb_idle_subtracted", lambda r: r["steady"]["us_per_hb_idle_subtracted"]),
        ("floor_us_per_hb", lambda r: r["floor"]["us_per_hb"]),
        ("floor_bad", lambda r: sum(r["floor"]["bad_answers"].values())),
        ("steady_heartbeats", lambda r: r["steady"]["heartbeats"]),
        ("steady_rate", lambda r: r["steady"]["rate"]),
        ("steady_broker_cpu_s", lambda r: r["steady"]["broker_cpu_s"]),
        ("steady_driver_cpu_s", lambda r: r["steady"]["driver_cpu_s"]),
        ("idle_cpu_s", lambda r: r["steady"]["idle_cpu_s"]),
        ("idle_s", lambda r: r["steady"]["idle_s"]),
        ("rss_mb", lambda r: r.get("rss_mb")),
    ):
        vals = [get(r) for r in ok]
        f[key] = _med(vals)
        f[key + "_span"] = vals
    f["bad_answers"] = sum(sum(r["steady"]["bad_answers"].values()) for r in ok)
    f["reconcile_met"] = _met(f["reconcile_ms"], RECONCILE_TARGET_MS, confirmed, len(consumer))
    f["steady_met"] = _met(f["us_per_hb"], STEADY_TARGET_US, clean, len(consumer))
    f["steady_idle_subtracted_met"] = _met(
        f["us_per_hb_idle_subtracted"], STEADY_TARGET_US, clean, len(consumer)
    )
    return f


def summary(consumer: list[dict[str, Any]], classic: list[dict[str, Any]], args: argparse.Namespace) -> str:
    f = figures(consumer)
    valid_classic = [r for r in classic if r.get("valid")]
    first = [r.get("first_join_to_stable_ms") for r in valid_classic]
    t_stable = [r.get("t_stable_ms") for r in valid_classic]
    last = [
        r["t_stable_ms"] - r["t_last_join_ms"]
        for r in valid_classic
        if r.get("t_stable_ms") is not None and r.get("t_last_join_ms") is not None
    ]
    n = len(consumer)
    m, p = args.members, args.partitions
    rows = [
        [
            f"KIP-848 m{m} p{p}: last join answered -> all reconciled",
            "ms",
            _fmt(f["reconcile_ms"], 1),
            _span(f["reconcile_ms_span"], 1),
            f"rounds {_fmt(f['rounds'])}, heartbeats {_fmt(f['heartbeats'])}, first release answered at "
            f"{_fmt(f['first_release_ms'], 1)} ms, broker CPU {_fmt(f['reconcile_broker_cpu_s'], 3)} s, "
            f"driver CPU {_fmt(f['reconcile_driver_cpu_s'], 3)} s; "
            f"Describe: Stable {f['stable_confirmed']}/{f['ok']}",
            f"<= {RECONCILE_TARGET_MS:.0f} ms",
            f["reconcile_met"],
        ],
        [
            f"KIP-848 steady m{m} x {args.interval_ms / 1000:g} s: broker CPU / heartbeat",
            "us",
            _fmt(f["us_per_hb"], 1),
            _span(f["us_per_hb_span"], 1),
            f"{_fmt(f['steady_heartbeats'])} heartbeats in {args.steady_s:g} s "
            f"({_fmt(f['steady_rate'])}/s), broker CPU {_fmt(f['steady_broker_cpu_s'], 2)} s, "
            f"driver CPU {_fmt(f['steady_driver_cpu_s'], 2)} s, bad answers {f['bad_answers']}",
            f"<= {STEADY_TARGET_US:.0f} us",
            f["steady_met"],
        ],
        [
            "  same, idle broker CPU subtracted",
            "us",
            _fmt(f["us_per_hb_idle_subtracted"], 1),
            _span(f["us_per_hb_idle_subtracted_span"], 1),
            f"idle broker CPU {_fmt(f['idle_cpu_s'], 3)} s over {_fmt(f['idle_s'])} s",
            "(for reference)",
            f["steady_idle_subtracted_met"],
        ],
        [
            "  Python floor: the same traffic, canned answers on uvloop (bench/heartbeat_floor.py)",
            "us",
            _fmt(f["floor_us_per_hb"], 1),
            _span(f["floor_us_per_hb_span"], 1),
            f"no broker behind the socket; bad answers {_fmt(f['floor_bad'])}; kcoord / floor "
            f"{_fmt(_ratio(f['us_per_hb'], f['floor_us_per_hb']), 2)}",
            "(for reference)",
            "-",
        ],
    ]
    if classic:
        nc = len(classic)
        rows += [
            [
                f"classic m{m} (kload): first JoinGroup response -> Stable",
                "ms",
                _fmt(_med(first), 1),
                _span(first, 1),
                f"{len(valid_classic)}/{nc} converged; rejoins "
                f"{_fmt(_med([r.get('rejoins') for r in valid_classic]))}, "
                f"broker CPU {_fmt(_med([r.get('server_cpu_s') for r in valid_classic]), 2)} s",
                f"<= {CLASSIC_TARGET_MS:.0f} ms (issue 5)",
                _met(_med(first), CLASSIC_TARGET_MS, len(valid_classic), nc),
            ],
            [
                f"classic m{m} (kload): last JoinGroup response -> Stable",
                "ms",
                _fmt(_med(last), 1),
                _span(last, 1),
                "t_stable_ms - t_last_join_ms: the classic analogue of the KIP-848 row",
                "-",
                "-",
            ],
            [
                f"classic m{m} (kload): t_stable_ms",
                "ms",
                _fmt(_med(t_stable), 1),
                _span(t_stable, 1),
                "from sending the first JoinGroup to the last SyncGroup answered",
                "-",
                "-",
            ],
        ]
    head = ["row", "unit", f"median of {n}", "min - max", "detail", "target", "met?"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += [
        "",
        "KIP-848 reconcile: from the answer to the last member's join (all other members joined and",
        "answered before it) to the answer after which every member is at the group's final epoch and",
        "the owned sets partition all partitions exactly once (= Stable; confirmed by ConsumerGroupDescribe",
        "outside the window). rounds: the most heartbeats one member sent in the window.",
        "Steady: incremental heartbeats (member id + epoch, all else null), evenly spread; broker CPU from",
        "/proc/PID/stat over the window / heartbeats sent in it. Idle-subtracted: minus the broker's CPU",
        "rate with the group alive and no traffic, measured right after.",
        "Classic (kload -w rebalance, one connection per member): first_join_to_stable_ms = from the first",
        "JoinGroup response to the last SyncGroup response of the stable generation; t_stable_ms = from",
        "sending the JoinGroups to that last SyncGroup response.",
    ]
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------------
WAITING = ("epoll_pwait", "epoll_wait", "PyThread_acquire_lock_timed", "_queue_SimpleQueue_get")


def profile_report(raws: list[Path], top: int) -> str:
    """Per thread (merged across the repeats' processes): the top functions by self and total
    time. With --profile-native py-spy counts a thread blocked in epoll or on a lock as active:
    those samples are left out (and counted), so the percentages are of the thread's CPU."""
    from bench.profile import TRUNK, aggregate

    merged: dict[str, tuple[int, collections.Counter[str], collections.Counter[str]]] = {}
    waits: collections.Counter[str] = collections.Counter()
    for raw in raws:
        if not raw.exists():
            continue
        kept = []
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            thread = re.sub(r"^thread \(\d+\): ", "", stack.split(";", 1)[0])
            if any(w in stack for w in WAITING) and n.isdigit():
                waits[thread] += int(n)
                continue
            kept.append(line)
        filtered = raw.with_suffix(".busy.txt")
        filtered.write_text("\n".join(kept) + "\n")
        for tid, (total, selfc, tc) in aggregate(filtered).items():
            thread = re.sub(r"^thread \(\d+\): ", "", tid)  # one name across the repeats' processes
            t0, s0, c0 = merged.get(thread, (0, collections.Counter(), collections.Counter()))
            merged[thread] = (t0 + total, s0 + selfc, c0 + tc)
    lines = []
    for thread, (total, selfc, tc) in sorted(merged.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"\n{thread}: {total} busy samples ({waits.get(thread, 0)} waiting left out)")
        lines.append(f"  top {top} by self time:")
        lines += [f"    {100 * k / total:5.1f}%  {fn}" for fn, k in selfc.most_common(top)]
        lines.append(f"  top {top} by total time (without the start-up frames every stack shares):")
        inner = [(fn, k) for fn, k in tc.most_common() if not fn.endswith(TRUNK) and k < total]
        lines += [f"    {100 * k / total:5.1f}%  {fn}" for fn, k in inner[:top]]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.consumer_groups",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000, help="partitions of the subscribed topic")
    ap.add_argument("--connections", type=int, default=8, help="driver connections (members share them)")
    ap.add_argument(
        "--interval-ms", type=int, default=5000, help="steady state: each member's heartbeat interval"
    )
    ap.add_argument("--steady-s", type=float, default=20.0, help="steady state: measured seconds")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-classic", action="store_true", help="skip kload's classic rebalance row")
    ap.add_argument("--reconcile-timeout", type=float, default=120.0, help="seconds before giving up")
    ap.add_argument("--kcoord-args", default="", help="extra `kcoord serve` flags")
    ap.add_argument(
        "--profile",
        choices=["reconcile", "steady"],
        default=None,
        help="sample the broker with py-spy during that measured phase (numbers then carry its cost)",
    )
    ap.add_argument("--profile-rate", type=int, default=500, help="py-spy samples per second")
    ap.add_argument(
        "--profile-native",
        action="store_true",
        help="--profile with C frames (uvloop, syscalls); py-spy then pauses the broker for each sample",
    )
    ap.add_argument("--top", type=int, default=20, help="--profile: functions listed")
    ap.add_argument("--out", default="", help="results directory (default /tmp/kcoord-bench/cg-<time>)")
    args = ap.parse_args(argv)
    if args.members < 2 or args.partitions < 1:
        ap.error("needs --members >= 2 and --partitions >= 1")
    if args.profile and shutil.which("py-spy") is None:
        ap.error("--profile needs py-spy: pip install py-spy")
    return args


def run(args: argparse.Namespace, out: Path, classic: bool = True) -> dict[str, Any]:
    """Every repeat: the KIP-848 run, then (``classic``) kload's classic rebalance. Returns the
    records, the summary table and the problems seen in the broker logs."""
    common.raise_fd_limit()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    check_codec()
    common.log("hand ConsumerGroupHeartbeat v1 codec agrees with kcoord's codecs")
    consumer: list[dict[str, Any]] = []
    classic_recs: list[dict[str, Any]] = []
    problems: list[str] = []
    warnings: collections.Counter[str] = collections.Counter()
    raws: list[Path] = []
    for rep in range(args.repeats):
        common.log(f"== repeat {rep + 1}/{args.repeats}  load {Path('/proc/loadavg').read_text().strip()}")
        raw = out / f"pyspy-{args.profile}-r{rep}.txt" if args.profile else None
        r = consumer_repeat(args, out, rep, raw)
        problems += r.pop("problems")
        warnings.update(r.pop("warnings"))
        if raw is not None:
            raws.append(raw)
        consumer.append(r)
        if "error" in r:
            common.log(f"  KIP-848: ERROR {r['error']}")
        else:
            st = r["steady"]
            common.log(
                f"  KIP-848: joins {r['join_s']:.1f} s; reconciled in {r['reconcile_ms']:.1f} ms, "
                f"{r['rounds']} rounds, {r['heartbeats']} heartbeats, first release answered at "
                f"{_fmt(r['first_release_ms'], 1)} ms, broker CPU {r['broker_cpu_s']:.3f} s, "
                f"driver CPU {r['driver_cpu_s']:.3f} s; Describe {r['describe']}; steady "
                f"{st['heartbeats']} hb, {st['us_per_hb']:.1f} us/hb raw, "
                f"{st['us_per_hb_idle_subtracted']:.1f} idle-subtracted, bad {st['bad_answers']}, "
                f"skipped (previous heartbeat unanswered) {st['skipped']}"
            )
        if classic:
            c = classic_repeat(args, out, rep)
            problems += c.pop("problems", [])
            classic_recs.append(c)
            common.log(
                f"  classic: first JoinGroup response -> Stable {c.get('first_join_to_stable_ms')} ms, "
                f"t_stable {c.get('t_stable_ms')} ms, valid {c.get('valid')} {c.get('error', '')}"
            )
    table = summary(consumer, classic_recs, args)
    result = {
        "args": vars(args),
        "consumer": consumer,
        "classic": classic_recs,
        "problems": problems,
        "warnings": dict(warnings),
        "table": table,
    }
    if raws:
        result["profile"] = profile_report(raws, args.top)
    (out / "consumer_groups.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out or f"/tmp/kcoord-bench/cg-{time.strftime('%Y%m%d-%H%M%S')}")
    common.log(f"results -> {out}")
    res = run(args, out, classic=not args.no_classic)
    print(f"## KIP-848 consumer group, {args.members} members (kcoord {common.REPO.name})\n")
    print(res["table"])
    if args.profile:
        print(f"\n## py-spy on the broker during the {args.profile} phase (all repeats)")
        print("(with py-spy attached the numbers above carry its cost: use them only to read the profile)")
        print(res["profile"])
    print("\n## Problems seen")
    errs = [r["error"] for r in res["consumer"] if "error" in r]
    errs += [r["error"] for r in res["classic"] if "error" in r]
    lines = [f"- {e}" for e in errs] + [f"- kcoord log: {x}" for x in res["problems"][:20]]
    if res["warnings"]:
        lines.append(f"- kcoord warnings: {res['warnings']}")
    print("\n".join(lines) if lines else "- none (no error, no error line in kcoord's logs)")
    print(f"\n(records and logs in {out})")
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    common.log(f"done in {time.monotonic() - t0:.0f} s")
    sys.exit(rc)
