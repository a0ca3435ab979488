"""A log read that failed, answered as Kafka answers it: for the partition read, never for the
whole request, and never as an exception that leaves a coordinator operation.

- OSError (EIO: a segment the disk cannot read) is KAFKA_STORAGE_ERROR, Kafka's answer for a
  KafkaStorageException, which consumers retry;
- InvalidBatch (bytes that changed on disk since start-up's recovery checked them) is
  CORRUPT_MESSAGE, Kafka's answer for a CorruptRecordException on a read.
"""

from __future__ import annotations

from typing import Final

import structlog

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import InvalidBatch

log = structlog.get_logger(__name__)

READ_ERRORS: Final = (OSError, InvalidBatch)
"""What reading a log may raise that is its files' fault, not the request's."""


def unreadable(api: str, topic: str, partition: int, error: Exception) -> int:
    """The error code that answers ``error`` for the partition read, logged."""
    corrupt = isinstance(error, InvalidBatch)
    log.warning(
        f"{api} failed: the partition's log " + ("holds a corrupt batch" if corrupt else "could not be read"),
        topic=topic,
        partition=partition,
        error=str(error),
    )
    return ErrorCode.CORRUPT_MESSAGE if corrupt else ErrorCode.KAFKA_STORAGE_ERROR
