"""A log read that failed, answered as Kafka answers it: for the partition read, never for the
whole request, and never as an exception that leaves a coordinator operation.

- OSError (EIO: a segment the disk cannot read) is KAFKA_STORAGE_ERROR, Kafka's answer for a
  KafkaStorageException, which consumers retry;
- InvalidBatch (bytes that changed on disk since start-up's recovery checked them) is
  CORRUPT_MESSAGE, Kafka's answer for a CorruptRecordException on a read.

Clients retry such a partition at once and for ever (a share consumer every ~100 ms), and each
retry fails the same way: a partition's failure is logged when it first happens and then at most
once per ``REPEAT_LOG_SECONDS``, with how many failures it stands for, so that a failing disk
does not also fill the one the broker logs to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import structlog

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import InvalidBatch

log = structlog.get_logger(__name__)

READ_ERRORS: Final = (OSError, InvalidBatch)
"""What reading a log may raise that is its files' fault, not the request's."""

REPEAT_LOG_SECONDS: Final = 60.0

# (api, topic, partition, corrupt) -> (when it was last logged, failures not logged since). The
# process's, not a broker's: tests that run several brokers in one process fail distinct topics.
_logged: dict[tuple[str, str, int, bool], tuple[float, int]] = {}
# An attribute, so that tests move time on.
now: Callable[[], float] = time.monotonic


def unreadable(api: str, topic: str, partition: int, error: Exception) -> int:
    """The error code that answers ``error`` for the partition read, logged (see above)."""
    corrupt = isinstance(error, InvalidBatch)
    key = (api, topic, partition, corrupt)
    at = now()
    last = _logged.get(key)
    if last is not None and at - last[0] < REPEAT_LOG_SECONDS:
        _logged[key] = (last[0], last[1] + 1)
    else:
        _logged[key] = (at, 0)
        log.warning(
            f"{api} failed: the partition's log "
            + ("holds a corrupt batch" if corrupt else "could not be read"),
            topic=topic,
            partition=partition,
            error=str(error),
            **({"failures_since_last_logged": last[1] + 1} if last is not None else {}),
        )
    return ErrorCode.CORRUPT_MESSAGE if corrupt else ErrorCode.KAFKA_STORAGE_ERROR
