"""What a failed sync of a log's file does: the broker halts, as Kafka's does.

When an fsync or fdatasync fails, the kernel may already have marked the pages whose writeback
failed clean (or dropped them), and it reports the error once: a later sync of the same file
succeeds without having written them. A broker that went on would settle the next round, move
the high watermark past the lost bytes and acknowledge records after them, which a crash or a
restart's recovery would then cut off at the damaged batch: acknowledged records and committed
offsets lost. Kafka takes a log directory offline on any I/O error and halts once none is left
(``LogDirFailureChannel``, ``Exit.halt(1)``); kcoord has one, so it halts at the failure, before
any later round settles. The round's own writers hear of the error first.

A function of its own, looked up at each failure, so that tests can see it called instead.
"""

from __future__ import annotations

import os
import sys

import structlog

log = structlog.get_logger(__name__)

EXIT_CODE = 1  # Kafka's Exit.halt(1) when its last log directory failed


def halt(error: BaseException) -> None:
    log.critical(
        "a sync of the log directory failed: halting, as Kafka does when its only log directory "
        "fails (bytes whose writeback failed may be gone from the page cache; the restart's "
        "recovery checks what the files hold)",
        error=str(error),
    )
    sys.stderr.flush()
    os._exit(EXIT_CODE)
