"""Producer ids are handed out only from a block whose bound is on disk: a restart never hands
out an id again (ProducerIdManager, InitProducerId without transactions)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kcoord.dataplane.producer_ids import ProducerIdManager


def test_no_id_is_handed_out_from_a_block_whose_bound_could_not_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = ProducerIdManager(tmp_path)
    ids.open()
    replace = os.replace

    def full_disk(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)
    for _ in range(2):  # the second call too: no id without a bound on disk
        with pytest.raises(OSError):
            ids.next_id()
    monkeypatch.setattr(os, "replace", replace)
    handed_out = [ids.next_id() for _ in range(3)]

    restarted = ProducerIdManager(tmp_path)
    restarted.open()
    assert restarted.next_id() > max(handed_out)
