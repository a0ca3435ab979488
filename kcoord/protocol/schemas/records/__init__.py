"""``__consumer_offsets`` record schemas, copied verbatim from Apache Kafka's
``group-coordinator/src/main/resources/common/message/``.

They are not request/response pairs: ``*Key`` files are ``"type": "coordinator-key"`` (the
2-byte prefix of a record key is the ``apiKey``, i.e. the record type), ``*Value`` files are
``"type": "coordinator-value"`` (the prefix of a value is its version); older schemas used
``"type": "data"``. Load them with kafka-python's ``ApiData`` and
``load_json="kcoord.protocol.schemas.records"``.

The KIP-848 consumer group schemas (``ConsumerGroup*``, record types 3-8 and 16) are the newest
versions the stored copies of apache/kafka offered, each file verbatim at the commit named:

- Kafka 4.x form (``apiKey``, ``coordinator-key``/``-value``): ConsumerGroupMetadataKey 45b0af26,
  ConsumerGroupMetadataValue 266ed846 (trunk after 4.3: has CreationTimeMs, KIP-1327, which 4.3
  does not write), ConsumerGroupPartitionMetadataKey 0c37e22a, ConsumerGroupMemberMetadataValue
  b091e287, ConsumerGroupTargetAssignmentMetadataValue 07b06d06 (AssignmentTimestamp, 4.3),
  ConsumerGroupTargetAssignmentMemberValue 0c37e22a, ConsumerGroupCurrentMemberAssignmentKey
  2be4c8f5, ConsumerGroupCurrentMemberAssignmentValue 6541f940 (AssignmentEpochs, 4.3);
- the older form (``"type": "data"``, a key's one version is its record type; before KAFKA-18301,
  Kafka 4.0), where no 4.x copy was to be had: ConsumerGroupPartitionMetadataValue d63fb6f7,
  ConsumerGroupMemberMetadataKey 53364c53, ConsumerGroupTargetAssignmentMetadataKey 53364c53,
  ConsumerGroupTargetAssignmentMemberKey 06a2dac2, ConsumerGroupRegularExpressionKey and
  ConsumerGroupRegularExpressionValue 53364c53. As far as the Kafka sources at hand show, their
  fields and so their bytes are those of 4.x (KAFKA-18301 changed how a key names its type, not
  its fields); replace them with the 4.x text when it is at hand.
"""
