"""``__consumer_offsets`` record schemas, copied verbatim from Apache Kafka's
``group-coordinator/src/main/resources/common/message/``.

They are not request/response pairs: ``*Key`` files are ``"type": "coordinator-key"`` (the
2-byte prefix of a record key is the ``apiKey``, i.e. the record type), ``*Value`` files are
``"type": "coordinator-value"`` (the prefix of a value is its version); older schemas used
``"type": "data"``. Load them with kafka-python's ``ApiData`` and
``load_json="kcoord.protocol.schemas.records"``.
"""
