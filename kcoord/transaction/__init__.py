"""The transaction coordinator (Kafka's fourth coordinator kind): transactional ids, their
producer ids and epochs, and the state of their transactions, in ``__transaction_state``."""

TRANSACTION_STATE_TOPIC = "__transaction_state"
