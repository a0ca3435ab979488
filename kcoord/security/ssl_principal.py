"""The principal of a mutual-TLS client: its certificate's subject DN (distinguished_names.py),
mapped as Kafka maps it.

The DN is written as Java's ``X500Principal.getName()`` writes it (RFC 2253: the RDNs last to
first, keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other attribute as its OID with the
value's DER in hex), because that is the string Kafka's DEFAULT rule yields and its
``RULE:pattern/replacement/[LU]`` rules (``ssl.principal.mapping.rules``, SslPrincipalMapper)
are written against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kafka's SslPrincipalMapper grammar.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups

        # Java's replaceAll: $n is a group; a $n beyond the groups is shortened (Kafka's
        # escapeLiteralBackReferences) or, with no group left, kept literally.
        def expand(m: re.Match[str]) -> str:
            parts = []
            i = 0
            rep = self.replacement
            while i < len(rep):
                c = rep[i]
                if c == "\\" and i + 1 < len(rep):
                    parts.append(rep[i + 1])
                    i += 2
                    continue
                ref = _BACKREF.match(rep, i)
                if ref is not None:
                    digits = ref.group(1)
                    index = int(digits)
                    while index > groups and index >= 10:
                        index //= 10
                    if digits.startswith("0") or index <= groups:
                        used = len(str(index)) if not digits.startswith("0") else 1
                        parts.append(m.group(index) or "")
                        i += 1 + used
                        continue
                    parts.append("$")
                    i += 1
                    continue
                parts.append(c)
                i += 1
            return "".join(parts)

        result = self.pattern.sub(expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: the first rule that matches names the principal."""

    def __init__(self, rules: str) -> None:
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(rules.strip()):
            text = m.group(1)
            if m.end() == m.start():
                break
            parsed = _PARSER.match(text)
            if parsed is None or parsed.end() != len(text):
                raise ValueError(f"Invalid rule: {text}")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as e:
                    raise ValueError(f"Invalid rule: {text}: {e}") from None
                self.rules.append(_Rule(pattern, parsed.group(3), parsed.group(4)))
            elif parsed.group(5):
                raise ValueError(f"Invalid rule: {text}")

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise ValueError(f"No rules apply to {dn}")
