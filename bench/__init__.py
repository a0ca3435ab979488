"""kcoord's benchmark suite (issue 5): ``python -m bench`` (see bench/README.md)."""
