"""kafka-python's package initialisation, deferred in the broker's process.

kcoord uses kafka-python for its codecs (``kafka.protocol``, ``kafka.record``, ``kafka.codec``,
``kafka.errors``), which import as submodules of the package. The package's ``__init__`` also
imports its clients: KafkaAdminClient, KafkaConsumer, KafkaProducer and their network stack. That
is ~100 M instructions (callgrind) of a broker start whose imports are ~2.3 G, and the broker never
uses them. ``defer_package_init`` registers the package unexecuted. Its ``__init__`` runs when a
name is first asked of it (``from kafka import KafkaConsumer``, ``kafka.__version__``), so code in
the same process that uses the clients gets the whole package as usual.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types

_lock = threading.Lock()


class _DeferredPackage(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        with _lock:
            if type(self) is _DeferredPackage:
                # A plain module first: names the __init__ looks up on its own package while it
                # runs must not start it again.
                self.__class__ = types.ModuleType
                spec = self.__spec__
                assert spec is not None and spec.loader is not None
                spec.loader.exec_module(self)
        return getattr(self, name)


def defer_package_init() -> None:
    """Register kafka-python's package without running its ``__init__`` (no-op once imported)."""
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredPackage
    sys.modules["kafka"] = module
