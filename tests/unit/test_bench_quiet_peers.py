"""bench/run.py runs kload against a peer only once the other peers are idle: a peer still busy
with an earlier run's work (Tansu after the m1000 rebalance row) is restarted, and the summary
says so. Real child processes, one spinning and one asleep; nothing is timed against a target."""

from __future__ import annotations

import sys
from typing import Any

from bench import common, run


class _Peer:
    """What Peers needs of kload's Peer: a name, a process, start and stop."""

    def __init__(self, name: str, code: str) -> None:
        self.name, self.code, self.proc = name, code, None
        self.port = common.free_port()
        self.starts = 0

    def start(self, tag: str) -> None:
        import subprocess

        self.proc = subprocess.Popen([sys.executable, "-c", self.code])
        self.starts += 1

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _peers(**peers: _Peer) -> Any:
    p = run.Peers.__new__(run.Peers)
    p.peers, p.kcoord_dir = peers, None
    for peer in peers.values():
        peer.start("r0")
    return p


def test_a_busy_peer_is_restarted_before_another_peers_run(monkeypatch: Any) -> None:
    monkeypatch.setattr(run, "IDLE_WAIT_S", 0.5)
    spinning = _Peer("tansu", "while True: pass")
    asleep = _Peer("mock", "import time; time.sleep(60)")
    measured = _Peer("kcoord", "while True: pass")  # the peer about to be measured is not judged
    peers = _peers(tansu=spinning, mock=asleep, kcoord=measured)
    try:
        restarted = peers.quiet_others("kcoord", "r0 'rebalance m1000' on kcoord")
        assert [r.split(" ", 1)[0] for r in restarted] == ["tansu"]
        assert "before r0 'rebalance m1000' on kcoord" in restarted[0]
        assert (spinning.starts, asleep.starts, measured.starts) == (2, 1, 1)
    finally:
        for p in (spinning, asleep, measured):
            p.stop()


def test_idle_peers_are_left_running() -> None:
    asleep = _Peer("mock", "import time; time.sleep(60)")
    peers = _peers(mock=asleep, kcoord=_Peer("kcoord", "import time; time.sleep(60)"))
    try:
        assert peers.quiet_others("kcoord", "r0 'commit c1 d1 p1' on kcoord") == []
        assert asleep.starts == 1
    finally:
        for p in peers.peers.values():
            p.stop()
