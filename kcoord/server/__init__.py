"""The broker process and its network side: listeners, connections, the dispatcher, the API table."""
