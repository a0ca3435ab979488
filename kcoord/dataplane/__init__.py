"""The data plane: topics and partitions, producer state and ids, fetch sessions, topic configs."""
