"""KIP-848 consumer groups (group.protocol=consumer)."""
