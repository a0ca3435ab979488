"""Running kcoord inside other programs' tests: an in-process broker and a pytest plugin."""
