"""The quixstreams counting application of test_quixstreams.py, run as its own process.

    python quix_counter.py BOOTSTRAP STATE_DIR GUARANTEE EXPECT

quixstreams lives in a package directory of its own (see test_quixstreams.py), on this process's
PYTHONPATH only. Prints the emitted rows as one JSON list on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import quixstreams


def main(bootstrap: str, state_dir: str, guarantee: str, expect: int) -> None:
    app = quixstreams.Application(
        broker_address=bootstrap,
        consumer_group="counter",
        auto_offset_reset="earliest",
        state_dir=state_dir,
        processing_guarantee=guarantee,
        commit_interval=0.5,
        loglevel="WARNING",
    )
    sdf = app.dataframe(app.topic("words", value_deserializer="json"))

    def count(value: dict[str, Any], state: Any) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"word": value["word"], "n": n}

    sdf = sdf.apply(count, stateful=True)
    rows = app.run(count=expect, timeout=60)
    print(json.dumps(rows))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
