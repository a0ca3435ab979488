"""What a consumer group's members subscribe to, in Kafka's terms: the metadata hash of the
subscribed topics (KIP-1101), and regular expressions checked as Kafka's RE2J would report them.

The group (group.py) resolves regular expressions against the topics and bumps its epoch when the
hash of what its members subscribe to changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping

import re2

from kcoord.consumer.records import ConsumerGroupRegularExpressionValue
from kcoord.groups.topics import TopicsView


def subscription_hash(
    names: Collection[str], regexes: Mapping[str, ConsumerGroupRegularExpressionValue], topics: TopicsView
) -> int:
    """A hash of the subscribed topics' ids and partition counts (KIP-1101's metadata hash): the
    topic ``names`` and those the resolved ``regexes`` match; 0 for none."""
    subscribed = set(names)
    for value in regexes.values():
        subscribed.update(value.topics)
    if not subscribed:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(subscribed):
        found = topics.lookup(name)
        if found is not None:
            digest.update(f"{name}\0{found[0]}\0{found[1]}\n".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


# RE2's error texts, and RE2J's for the same errors (PatternSyntaxException.getDescription(), what
# Kafka's message carries).
_RE2J_DESCRIPTIONS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class range": "invalid character class range",
    "invalid character class": "invalid character class",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "no argument for repetition operator": "missing argument to repetition operator",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "unexpected error": "regexp/syntax: internal error",
}


_QUIET = re2.Options()
_QUIET.log_errors = False  # a client's bad regex is its error, not one for the broker's stderr


def regex_error(regex: str) -> str | None:
    """Why RE2 cannot compile ``regex``, in RE2J's words (Kafka compiles with RE2J); None if it can."""
    try:
        re2.compile(regex, _QUIET)
    except re2.error as e:
        raw = e.args[0] if e.args else ""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        kind = text.partition(": ")[0]
        return _RE2J_DESCRIPTIONS.get(kind, text)
    return None
