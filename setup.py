"""kcoord is pure Python; its request path is also compiled to C with mypyc when it can be.

The modules below are what every commit, offset fetch, produce request and classic rebalance runs
through (issue 15: stop 25's build cut a third of the instructions per request, stop 26's list and
habits another fifth, stop 27's reading requests from bytes and writing answers with to_bytes a
third of what was left; docs/architecture.md lists the habits), and the log cleaner's loop over
records (record_filter), which holds the GIL beside them while a pass runs.
One C module is written by hand, ``kcoord/protocol/_native_codecs.c``: the byte layouts of offset
commits and fetches and of coordinator batches' records (stop 31: 7-26 % fewer instructions per
commit and fetch), which the Python encoders mirror and run in its place when it is missing
(``kcoord/protocol/native.py``); it is built without mypy too.
So is ``kcoord/storage/_sync_thread.c``: a thread that runs a flush round's syncs without taking
the GIL (``kcoord/storage/sync_thread.py``), where a Python thread is used when it is missing.
And ``kcoord/runtime/_snapshot_codec.c``: a coordinator snapshot's entries, which
``kcoord/runtime/snapshot.py`` writes in Python when it is missing.
The build is optional: without a C compiler (without mypy: but for that module), or with
``KCOORD_PURE_BUILD=1``, kcoord installs as the same modules in pure Python, and
``kcoord/__init__.py`` falls back to them at import time whenever the compiled ones are missing
or older than their sources.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup

COMPILED = [
    "kcoord/apis/authorization.py",
    "kcoord/apis/context.py",
    "kcoord/apis/groups.py",
    "kcoord/apis/offsets.py",
    "kcoord/apis/produce.py",
    "kcoord/apis/reply.py",
    "kcoord/apis/services.py",
    "kcoord/classic/group.py",
    "kcoord/classic/member.py",
    "kcoord/classic/offsets.py",
    "kcoord/classic/store.py",
    "kcoord/clock.py",
    "kcoord/consumer/store.py",
    "kcoord/dataplane/append_rules.py",
    "kcoord/dataplane/compaction.py",
    "kcoord/dataplane/compression.py",
    "kcoord/dataplane/partition.py",
    "kcoord/dataplane/partitions.py",
    "kcoord/dataplane/producer_state.py",
    "kcoord/dataplane/topic_config.py",
    "kcoord/groups/classic_protocol.py",
    "kcoord/groups/offsets.py",
    "kcoord/groups/records.py",
    "kcoord/groups/store.py",
    "kcoord/metrics.py",
    "kcoord/protocol/fields.py",
    "kcoord/protocol/frames.py",
    "kcoord/protocol/groups_codec.py",
    "kcoord/protocol/offsets_codec.py",
    "kcoord/protocol/produce_codec.py",
    "kcoord/protocol/records.py",
    "kcoord/protocol/request_reader.py",
    "kcoord/runtime/outcome.py",
    "kcoord/runtime/records.py",
    "kcoord/runtime/runtime.py",
    "kcoord/runtime/shard.py",
    "kcoord/server/connection.py",
    "kcoord/server/dispatcher.py",
    "kcoord/server/server.py",
    "kcoord/share/store.py",
    "kcoord/storage/flush.py",
    "kcoord/storage/log.py",
    "kcoord/storage/record_filter.py",
    "kcoord/storage/segment.py",
]


# The byte layouts of offset commits and fetches in C (kcoord/protocol/native.py); optional too.
NATIVE_CODECS = Extension(
    "kcoord.protocol._native_codecs",
    ["kcoord/protocol/_native_codecs.c"],
    extra_compile_args=["-O2"],
    optional=True,
)


# A flush round's syncs on a C thread that never takes the GIL (kcoord/storage/sync_thread.py).
SYNC_THREAD = Extension(
    "kcoord.storage._sync_thread",
    ["kcoord/storage/_sync_thread.c"],
    extra_compile_args=["-O2"],
    optional=True,
)


# A coordinator snapshot's entries in C (kcoord/runtime/snapshot.py); optional too.
SNAPSHOT_CODEC = Extension(
    "kcoord.runtime._snapshot_codec",
    ["kcoord/runtime/_snapshot_codec.c"],
    extra_compile_args=["-O2"],
    optional=True,
)


def ext_modules() -> list:
    if os.environ.get("KCOORD_PURE_BUILD"):
        return []
    try:
        from mypyc.build import mypycify

        # group_name fixes the shared library's name: kcoord__mypyc, beside the package.
        extensions = mypycify(COMPILED, opt_level="3", group_name="kcoord")
    except BaseException as e:  # no mypy, sources that do not type-check: install pure Python
        print(
            f"warning: kcoord's request path is not compiled ({e!r}); installing it as pure Python",
            file=sys.stderr,
        )
        return [NATIVE_CODECS, SYNC_THREAD, SNAPSHOT_CODEC]
    for extension in extensions:
        # Without a C compiler the build goes on without them (kcoord/__init__.py then imports
        # the sources of any module whose shared library is missing).
        extension.optional = True
    return [*extensions, NATIVE_CODECS, SYNC_THREAD, SNAPSHOT_CODEC]


setup(ext_modules=ext_modules())
