"""How long the consumer group assignors (kcoord.consumer.assignors) take on large groups.

    python -m bench.assignors                 # 1000 members, 10 topics x 100 partitions, and more
    python -m bench.assignors --members 5000 --topics 20 --partitions 500 --runs 5

Times ``assign`` alone (the members' subscriptions are built beforehand; the GroupSpec's
sorted member ids and subscription type are computed inside the timing), in-process, median and max of
``--runs``, for each assignor on: the first assignment (no member holds anything), a steady
state (the previous answer fed back, nothing changed), a member joining, a member leaving, and
partitions added to every topic. The heterogeneous rows subscribe each member to a fixed
pseudo-random half of the topics. A benchmark prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as ``python bench/assignors.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kcoord.consumer.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberSubscription,
    RangeAssignor,
    UniformAssignor,
)


def _spec(subscriptions: dict[str, frozenset[uuid.UUID]], current: GroupAssignment) -> GroupSpec:
    return GroupSpec(
        {m: MemberSubscription(topics, current.get(m, {})) for m, topics in subscriptions.items()}
    )


def _time(
    assignor: ConsumerGroupPartitionAssignor, spec: GroupSpec, counts: dict[uuid.UUID, int], runs: int
) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        fresh = GroupSpec(spec.members)  # its sorted member ids and subscription type not cached yet
        t0 = time.perf_counter()
        assignor.assign(fresh, counts)
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), max(samples)


def scenarios(
    assignor: ConsumerGroupPartitionAssignor,
    subscriptions: dict[str, frozenset[uuid.UUID]],
    counts: dict[uuid.UUID, int],
    runs: int,
) -> list[tuple[str, float, float]]:
    rows = []
    first_spec = _spec(subscriptions, {})
    rows.append(("first assignment", *_time(assignor, first_spec, counts, runs)))
    previous = assignor.assign(first_spec, counts)
    steady = _spec(subscriptions, previous)
    rows.append(("steady state", *_time(assignor, steady, counts, runs)))
    joined = dict(subscriptions)
    joined["zz-new-member"] = next(iter(subscriptions.values()))
    join_spec = _spec(joined, previous)
    rows.append(("one member joins", *_time(assignor, join_spec, counts, runs)))
    left = dict(subscriptions)
    del left[min(left)]
    leave_spec = _spec(left, previous)
    rows.append(("one member leaves", *_time(assignor, leave_spec, counts, runs)))
    grown = {t: c + c // 10 + 1 for t, c in counts.items()}
    rows.append(("partitions added", *_time(assignor, steady, grown, runs)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()

    rnd = random.Random(848)
    topics = [uuid.UUID(int=rnd.getrandbits(128)) for _ in range(args.topics)]
    members = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(args.members)]
    half = max(1, len(topics) // 2)
    groups = {
        "homogeneous": {m: frozenset(topics) for m in members},
        "heterogeneous": {m: frozenset(rnd.sample(topics, half)) for m in members},
    }
    print(
        f"{args.members} members, {args.topics} topics x {args.partitions} partitions, "
        f"median / max of {args.runs} runs, ms (Python {sys.version.split()[0]})"
    )
    for kind in ("homogeneous", "heterogeneous"):
        for sizes in ([args.partitions], [args.partitions * 10]):
            counts = dict.fromkeys(topics, sizes[0])
            for assignor in (UniformAssignor(), RangeAssignor()):
                print(f"\n{assignor.name}, {kind}, {args.topics} x {sizes[0]} partitions")
                for label, median, worst in scenarios(assignor, groups[kind], counts, args.runs):
                    print(f"  {label:<20} {median:8.2f} {worst:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
