"""Produce (key 0), v3-v13.

Behaviour / version notes:
- record batches must be message format v2 with a valid CRC32C (CORRUPT_MESSAGE otherwise) and
  consistent record counts (INVALID_RECORD); an uncompressed batch's records must read as Kafka's
  DefaultRecord.readFrom reads them (INVALID_RECORD: a consumer could not read past them; a
  compressed batch's records are read only where it is decompressed anyway: recompression,
  compaction keys, timestamps); batches are stored as sent, with the broker's offsets
  and leader epoch stamped in (and LogAppendTime applied when the topic asks for it), unless the
  topic's compression.type names a codec other than the batch's: then the batch is recompressed
  with it first (dataplane/compression), and checked against max.message.bytes again;
- a batch over the topic's max.message.bytes is MESSAGE_TOO_LARGE, a request for one partition
  over segment.bytes RECORD_LIST_TOO_LARGE, a record timestamp outside
  message.timestamp.before/after.max.ms INVALID_TIMESTAMP with every such record in record_errors
  (under CreateTime; the records are read only when before.max.ms is set or the batch's max
  timestamp is out of range);
- idempotent producers are checked per partition (see producer_state); a duplicate of one of
  the last five batches is answered with the original offsets and no error;
- acks=0 gets no response, acks=1 is answered once the batch is in the log, acks=-1 once the
  high watermark covers it (under log.flush.policy=always: after the fsync);
  other acks values get INVALID_REQUIRED_ACKS;
- Produce never creates topics (Kafka 4 creates them on Metadata only); internal topics refuse
  client writes with INVALID_TOPIC_EXCEPTION; v13 addresses topics by id (UNKNOWN_TOPIC_ID);
- transactional produce (KIP-890 part 1): each partition must be in the producer's ongoing
  transaction (AddPartitionsToTxn), checked with the transaction coordinator before the append:
  otherwise INVALID_TXN_STATE (v3-v10) or TRANSACTION_ABORTABLE (v11+), a fenced epoch
  INVALID_PRODUCER_EPOCH, an unknown producer INVALID_PRODUCER_ID_MAPPING, a transaction whose
  markers are being written NOT_ENOUGH_REPLICAS (Kafka's retriable stand-in for
  CONCURRENT_TRANSACTIONS on Produce); transactional batches without a
  transactional id are TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka answers it for the whole
  request, kcoord for the partitions that hold them); transactional batches start or continue the producer's
  transaction in the partition, a non-transactional batch of a producer in a transaction is
  INVALID_TXN_STATE, a batch of an older producer epoch INVALID_PRODUCER_EPOCH (Kafka answers
  that, not PRODUCER_FENCED, since 2.7, at every version);
- control batches (transaction markers) from clients are INVALID_RECORD, as Kafka's LogValidator;
  so is more than one batch for a partition, and a zstd batch before v7 is
  UNSUPPORTED_COMPRESSION_TYPE (Kafka's ProduceRequest.validateRecords);
- a request with acks=0 that cannot be answered normally closes the connection, as Kafka does,
  since the client reads no response to it;
- a write to the partition's files that fails (a full disk, a file-size limit, an I/O error) is
  KAFKA_STORAGE_ERROR for that partition, which clients retry, as Kafka answers an append to a
  failed log directory. Nothing of the batch counts: the log's end and the producer's sequence
  stay where they were, and the next append writes over any part that reached the file. Kafka
  then takes the directory offline; kcoord keeps serving its other partitions, and this one
  once its writes succeed again (a failed *sync* halts the broker instead:
  storage/log_dir_failure.py).
"""

from __future__ import annotations

from typing import Any, Final

import structlog

from kcoord.apis.authorization import TRANSACTIONAL_ID, Op, authorized, topic_authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import Reply
from kcoord.apis.services import Services
from kcoord.config import BrokerConfig
from kcoord.dataplane import compaction, compression
from kcoord.dataplane.partition import Partition, Topic
from kcoord.dataplane.partitions import PartitionManager
from kcoord.dataplane.topic_config import LONG_MAX
from kcoord.protocol import records
from kcoord.protocol.errors import CloseConnection, ErrorCode, KafkaError
from kcoord.protocol.produce_codec import PartitionAnswer, ProduceAnswer, ProduceRequest, TopicProduceData
from kcoord.protocol.records import InvalidBatch
from kcoord.storage import record_filter
from kcoord.transaction.coordinator import verification_error

log = structlog.get_logger(__name__)

NO_TIMESTAMP: Final = -1  # a record without a timestamp (Kafka's RecordBatch.NO_TIMESTAMP)


def _partition_error(index: int, code: int, message: str | None = None) -> PartitionAnswer:
    return PartitionAnswer(index, code, error_message=message)


def _topic_of(pm: PartitionManager, td: TopicProduceData) -> Topic | None:
    """The topic a request names: by id from v13 (the decoder leaves the name None), else by name."""
    if td.topic_id is not None:
        return pm.get_by_id(td.topic_id)
    return pm.get(td.name) if td.name is not None else None


def handle(services: Services, ctx: RequestContext, req: ProduceRequest) -> ProduceAnswer | Reply | None:
    v = ctx.api_version
    acks = req.acks
    pm = services.partitions
    config = services.config
    now = services.clock.now_ms()
    if acks not in (-1, 0, 1):
        return error_response(req, v, ErrorCode.INVALID_REQUIRED_ACKS, "acks must be -1, 0 or 1")
    if req.transactional_id is not None and not authorized(
        services, ctx, Op.WRITE, TRANSACTIONAL_ID, req.transactional_id
    ):
        if acks == 0:  # no answer is read: as Kafka, close the connection so the client notices
            raise CloseConnection("acks=0 produce: TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        return error_response(req, v, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    verified = _verify_transaction(services, req, v)
    frame_buffer = ctx.frame_buffer
    responses = []
    touched = []
    for td in req.topic_data:
        topic = _topic_of(pm, td)
        name = topic.name if topic is not None else td.name if v < 13 else None
        writable = name is None or topic_authorized(services, ctx, Op.WRITE, name)
        parts_out = []
        for pd in td.partition_data:
            if not writable:
                parts_out.append(_partition_error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if v >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                parts_out.append(_partition_error(pd.index, code))
                continue
            if topic.internal:
                parts_out.append(
                    _partition_error(
                        pd.index,
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"cannot produce to internal topic {topic.name}",
                    )
                )
                continue
            if not 0 <= pd.index < len(topic.partitions):
                parts_out.append(_partition_error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            part = topic.partitions[pd.index]
            if verified is not None and (error := verified.get((topic.name, pd.index))):
                parts_out.append(_partition_error(pd.index, error, "the partition is not in the transaction"))
                continue
            raw = pd.records
            if frame_buffer is not None and raw is not None:
                # The same bytes, writable: stamped and written without a copy.
                raw = frame_buffer[pd.records_at : pd.records_at + len(raw)]
            try:
                base_offset, append_time, appended = append_records(
                    config, part, raw, now, req.transactional_id, v
                )
            except KafkaError as e:
                errors = e.errors if isinstance(e, RecordErrors) else ()
                parts_out.append(
                    PartitionAnswer(pd.index, e.code, record_errors=errors, error_message=e.message)
                )
                continue
            except OSError as e:
                log.warning(
                    "append failed: the partition's files could not be written",
                    topic=topic.name,
                    partition=pd.index,
                    error=str(e),
                )
                message = f"the log could not be written: {e}"
                parts_out.append(_partition_error(pd.index, ErrorCode.KAFKA_STORAGE_ERROR, message))
                continue
            if appended:
                touched.append(part)
            parts_out.append(PartitionAnswer(pd.index, 0, base_offset, append_time, part.log_start_offset))
        responses.append((td.name, td.topic_id, parts_out))
    resp = ProduceAnswer(responses)
    if acks == 0:
        for part in touched:
            services.flusher.mark_dirty(part.log)
        failed = [
            f"{name}-{p.index}: {ErrorCode(p.error_code).name}"
            for name, _topic_id, parts in responses
            for p in parts
            if p.error_code
        ]
        if failed:
            # The client reads no response to acks=0: as Kafka, close the connection so that it
            # notices the failure (and refreshes its metadata).
            raise CloseConnection(f"acks=0 produce failed: {', '.join(failed)}")
        return None
    if acks == 1 or not touched:
        for part in touched:
            services.flusher.mark_dirty(part.log)
        return resp
    flusher = services.flusher
    if not flusher.waits_for_disk:
        for part in touched:
            flusher.mark_dirty(part.log)
        return resp
    # acks=all answers once the batches are durable; every touched log is in the same flush round.
    for part in touched[:-1]:
        flusher.mark_dirty(part.log)
    reply = Reply()
    flusher.when_durable(touched[-1].log, lambda error: reply.fail(error) if error else reply.resolve(resp))
    return reply


def _verify_transaction(
    services: Services, req: ProduceRequest, version: int
) -> dict[tuple[str, int], int] | None:
    """Per (topic, partition) of a transactional request, the error that refuses it (0 when the
    partition is in the transaction); None for a request without a transactional id."""
    tid = req.transactional_id
    if tid is None:
        return None
    pm = services.partitions
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    errors: dict[tuple[str, int], int] = {}
    for td in req.topic_data:
        topic = _topic_of(pm, td)
        if topic is None:
            continue
        for pd in td.partition_data:
            try:
                h = records.read_header(pd.records or b"")
            except (InvalidBatch, ValueError, IndexError):
                continue  # the append answers what is wrong with the records
            if not h.is_transactional:
                continue
            by_producer.setdefault((h.producer_id, h.producer_epoch), []).append((topic.name, pd.index))
    store = services.transactions.state_for(tid)
    for (pid, epoch), partitions in by_producer.items():
        for tp, error in store.verify_partitions(tid, pid, epoch, partitions).items():
            if error == ErrorCode.CONCURRENT_TRANSACTIONS:
                # Kafka's ReplicaManager: older clients do not retry CONCURRENT_TRANSACTIONS on
                # Produce; NOT_ENOUGH_REPLICAS is retried by all, without a metadata refresh.
                error = ErrorCode.NOT_ENOUGH_REPLICAS
            # Clients before Produce v11 do not know TRANSACTION_ABORTABLE.
            errors[tp] = verification_error(error, generic_errors=version >= 11)
    return errors


def append_records(
    config: BrokerConfig,
    part: Partition,
    raw: bytes | memoryview | None,
    now: int,
    transactional_id: str | None,
    version: int,
) -> tuple[int, int, bool]:
    """Validate and append one partition's records: (base offset, log append time, appended)."""
    if not raw:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no records")
    rules = part.topic.append_rules(config)
    # Not copied: the log stamps a writable buffer (a request read into a buffer of its own) in
    # place, and writes read-only bytes behind a stamped copy of each batch's start.
    data: bytearray | memoryview = raw if isinstance(raw, memoryview) else memoryview(raw)
    if len(data) > rules.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, "records larger than segment.bytes")
    max_batch = rules.max_message_bytes
    compacted = rules.compacted
    try:
        headers = list(records.iter_headers(data))
        for h in headers:
            records.validate_batch(data, h)
            # Kafka's LogValidator reads every record; a compressed batch is read where it has to
            # be decompressed (below), not to check it (its records would cost a decompression).
            if not h.compression and (problem := records.records_problem(data, h)) is not None:
                raise InvalidBatch(problem, corrupt=False)
            if compacted:
                compaction.check_keys(data, h)
    except InvalidBatch as e:
        raise _refused(e) from e
    # Kafka's ProduceRequest.validateRecords, for every version kcoord serves (v3+).
    if len(headers) > 1:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {version} are only allowed to contain exactly one record "
            "batch per partition",
        )
    if version < 7 and headers and headers[0].compression == compression.CODECS["zstd"]:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {version} are not allowed to use ZStandard compression",
        )
    for h in headers:
        if h.is_transactional and transactional_id is None:
            # Kafka refuses the whole request (its authorizer has no transactional id to check).
            raise KafkaError(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "transactional records without a transactional id",
            )
        if h.size > max_batch:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {h.size} bytes is larger than max.message.bytes {max_batch}",
            )
        if not rules.log_append_time:
            try:
                _check_timestamps(data, h, now, rules.timestamp_before_max_ms, rules.timestamp_after_max_ms)
            except InvalidBatch as e:
                raise _refused(e) from e
    codec = rules.codec
    if codec is not None:
        try:
            data, headers = compression.apply_topic_codec(data, headers, codec)
        except InvalidBatch as e:  # records that cannot be read to be recompressed
            raise _refused(e) from e
        # Kafka checks the sizes again when recompression changed them (UnifiedLog.append).
        for h in headers:
            if h.size > max_batch:
                raise KafkaError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"batch of {h.size} bytes after recompression is larger than max.message.bytes "
                    f"{max_batch}",
                )
        if len(data) > rules.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, "records larger than segment.bytes")
    return part.append_from_client(data, headers, now, rules.log_append_time)


class RecordErrors(KafkaError):
    """Records refused one by one (Kafka's RecordValidationException): the partition's error,
    and (index in its batch, message) for each record, answered as Produce ``record_errors``."""

    def __init__(self, code: int, message: str, errors: list[tuple[int, str]]) -> None:
        super().__init__(code, message)
        self.errors = errors


def _refused(e: InvalidBatch) -> KafkaError:
    """A producer's batch refused: CORRUPT_MESSAGE for what a CRC or size says is damaged (the Java
    producer retries it), INVALID_RECORD for records Kafka cannot read (it fails the batch)."""
    return KafkaError(ErrorCode.CORRUPT_MESSAGE if e.corrupt else ErrorCode.INVALID_RECORD, str(e))


def _check_timestamps(
    data: bytearray | memoryview, h: records.BatchHeader, now: int, before_max: int, after_max: int
) -> None:
    """message.timestamp.before.max.ms / after.max.ms under CreateTime (Kafka's LogValidator
    .validateTimestamp, with its messages; a record without a timestamp, -1, is not checked).
    The batch's max timestamp (covered by the CRC) bounds every record from above, so the future
    is checked without reading the records; the past needs the records' own timestamps (the
    base timestamp is the first record's, not the oldest), read only when before.max.ms is set
    (its default, Long.MAX_VALUE, accepts every timestamp)."""
    too_new = h.max_timestamp - now > after_max
    if not too_new and before_max >= LONG_MAX:
        return
    batch = memoryview(data)[h.position : h.position + h.size]
    errors = [
        (
            index,
            f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. The timestamp "
            f"should be within [{now - before_max}, {now + after_max}]",
        )
        for index, r in enumerate(record_filter.iter_raw(record_filter.records_body(batch, h), h))
        if r.timestamp != NO_TIMESTAMP and (now - r.timestamp > before_max or r.timestamp - now > after_max)
    ]
    if errors:
        raise RecordErrors(
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    if too_new:
        # Every record is in range but the batch claims a later max timestamp (a broken
        # producer): Kafka would store the records' real max; kcoord stores batches as sent, so
        # it refuses the batch instead of keeping a wrong max timestamp.
        raise KafkaError(
            ErrorCode.INVALID_TIMESTAMP,
            f"Batch max timestamp {h.max_timestamp} is above every record's timestamp and out of "
            f"range. The timestamp should be at most {now + after_max}",
        )


# ``req`` is Any: below v3 (no longer served) the dispatcher decodes it with kafka-python's schema to
# answer UNSUPPORTED_VERSION, so it is not always produce_codec's ProduceRequest.
def error_response(req: Any, version: int, code: int, message: str | None) -> ProduceAnswer:
    if req.acks == 0:
        raise CloseConnection(f"acks=0 produce failed: {ErrorCode(code).name} {message or ''}")
    return ProduceAnswer(
        [
            (td.name, td.topic_id, [_partition_error(pd.index, code, message) for pd in td.partition_data])
            for td in req.topic_data
        ]
    )
