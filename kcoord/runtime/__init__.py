"""The coordinator runtime: what every coordinator kind runs on, modelled on Kafka's CoordinatorRuntime.

A coordinator topic (``__consumer_offsets``, later ``__transaction_state``) has partitions; each
is a *shard* (shard.py): its log, its in-memory state, and the one ``replay`` that both start-up
and live writes go through. Coordinator kinds register the bytes of their records in a
*registry* (records.py) and give the runtime a state object (``CoordinatorState``); operations
(outcome.py) return ``(records, responses)``. The shard is sans-io: ``run(op, now)`` applies an
operation's records and returns what to append and to answer; ``append`` writes records to the
log. The asyncio driver (runtime.py) gives every key (group id, transactional id) an actor that
runs its operations one at a time, batches the records of many actors into one append per
flush round, and answers once the records are durable.

The runtime names no group type, no record type and no record-type number.
"""
