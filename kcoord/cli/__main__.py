"""``python -m kcoord.cli``: the ``kcoord`` command."""

from kcoord.cli import main

main()
