"""The share group assignor ("simple"), as Kafka 4.x's SimpleAssignor.

Per topic, over the members subscribed to it: every partition is shared by
``ceil(members / partitions)`` members (one member per partition while there are fewer
members than partitions), and the ``sharing * partitions`` slots are spread so that member i
of the sorted members gets ``ceil(p*(i+1)) - ceil(p*i)`` of them, with
``p = sharing * partitions / members``. Balance comes first, stickiness second: current
assignments are kept unless a partition is over-shared or a member over-filled, then the
remaining slots are filled partition by partition, cycling through members with room.
"""

from __future__ import annotations

import uuid

Assignment = dict[uuid.UUID, frozenset[int]]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def assign(
    subscriptions: dict[str, set[uuid.UUID]],
    partitions: dict[uuid.UUID, int],
    current: dict[str, Assignment],
) -> dict[str, Assignment]:
    """Target assignment: member id -> topic id -> partitions.

    ``subscriptions`` maps members to the (existing) topics they subscribe to, ``partitions``
    topics to their partition counts, ``current`` members to what they hold now.
    """
    target: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partitions.items(), key=lambda kv: str(kv[0])):
        subs = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not subs or count <= 0:
            continue
        n = len(subs)
        sharing = _ceil_div(n, count)
        slots = sharing * count
        desired = {m: _ceil_div(slots * (i + 1), n) - _ceil_div(slots * i, n) for i, m in enumerate(subs)}
        held = {m: {p for p in current.get(m, {}).get(topic, ()) if p < count} for m in subs}
        # Revoke over-shared partitions: keep the holders with the fewest partitions.
        for p in range(count):
            holders = sorted((m for m in subs if p in held[m]), key=lambda m: (len(held[m]), m))
            for m in holders[sharing:]:
                held[m].discard(p)
        # Revoke from members holding more than their share.
        for m in subs:
            extra = len(held[m]) - desired[m]
            if extra > 0:
                for p in sorted(held[m], reverse=True)[:extra]:
                    held[m].discard(p)
        # Fill the remaining slots partition by partition, cycling through members with room.
        sharers = {p: sum(1 for m in subs if p in held[m]) for p in range(count)}
        cursor = 0
        for p in range(count):
            tries = 0
            while sharers[p] < sharing and tries < n:
                m = subs[cursor % n]
                cursor += 1
                tries += 1
                if len(held[m]) < desired[m] and p not in held[m]:
                    held[m].add(p)
                    sharers[p] += 1
                    tries = 0
        for m in subs:
            if held[m]:
                target[m][topic] = held[m]
    return {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in target.items()}
