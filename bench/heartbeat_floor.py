"""The Python floor of the steady heartbeat row: ConsumerGroupHeartbeat v1 answered with canned
bytes by Python on uvloop, the event loop kcoord runs on (one thread, an asyncio Protocol per
connection, every complete frame of a read answered in one write), with no state, no group and
no coordinator runtime. Its CPU per heartbeat, under the same traffic as kcoord's steady row, is
what any single-process Python broker spends before doing any of the work.

    python -m bench.heartbeat_floor --port 19999     # serve until killed (bench.consumer_groups runs it)
"""

from __future__ import annotations

import argparse
import asyncio
import struct

_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">i")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api key, version, correlation id
HEARTBEAT = 68
INTERVAL_MS = 5000


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def answer(frame: bytes) -> bytes:
    """The response to one ConsumerGroupHeartbeat v1 frame (without its size): error 0, the
    member id and epoch it sent, the interval, no assignment."""
    api_key, _version, corr = _HEAD.unpack_from(frame, 0)
    if api_key != HEARTBEAT:
        raise ValueError(f"api key {api_key} is not served")
    (client_len,) = struct.unpack_from(">h", frame, 8)
    pos = 10 + max(client_len, 0) + 1  # client id, then the header's empty tagged fields
    n, pos = _uvarint(frame, pos)  # group id (compact string)
    pos += n - 1
    start = pos
    n, pos = _uvarint(frame, pos)  # member id
    pos += n - 1
    member_c = frame[start:pos]
    (epoch,) = _I32.unpack_from(frame, pos)
    body = (
        _CORR.pack(corr)
        + b"\x00"  # response header v1: tagged fields
        + b"\x00\x00\x00\x00\x00\x00"  # throttle time, error code
        + b"\x00"  # error message: null
        + member_c
        + struct.pack(">ii", max(epoch, 1), INTERVAL_MS)
        + b"\xff"  # assignment: null
        + b"\x00"
    )
    return _SIZE.pack(len(body)) + body


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            out.append(answer(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        self.buf = buf[pos:]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Connection, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    import uvloop

    uvloop.run(serve(args.port))


if __name__ == "__main__":
    main()
