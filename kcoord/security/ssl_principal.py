"""The principal of a mutual-TLS client: its certificate's subject DN, mapped as Kafka maps it.

The DN is written as Java's ``X500Principal.getName()`` writes it (RFC 2253: the RDNs last to
first, keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other attribute as its OID with the
value's DER in hex), because that is the string Kafka's DEFAULT rule yields and its
``RULE:pattern/replacement/[LU]`` rules (``ssl.principal.mapping.rules``, SslPrincipalMapper)
are written against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN",
    NameOID.COUNTRY_NAME: "C",
    NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}
_STRING_CODECS = {30: "utf-16-be", 28: "utf-32-be"}  # BMPString, UniversalString; the rest 8-bit


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _der_hex(attr: x509.NameAttribute[Any]) -> str:
    tag = attr._type.value  # the ASN.1 string type the certificate used
    value = (
        attr.value if isinstance(attr.value, bytes) else attr.value.encode(_STRING_CODECS.get(tag, "utf-8"))
    )
    n = len(value)
    length = (
        bytes([n])
        if n < 0x80
        else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8)
    )
    return "#" + (bytes([tag]) + length + value).hex()


def rfc2253_name(name: x509.Name) -> str:
    """``name`` as Java's X500Principal.getName() (RFC 2253) renders it."""
    rdns = []
    for rdn in reversed(list(name.rdns)):
        parts = []
        for attr in rdn:
            keyword = _KEYWORDS.get(attr.oid)
            if keyword is not None:
                parts.append(f"{keyword}={_escape(str(attr.value))}")
            else:
                parts.append(f"{attr.oid.dotted_string}={_der_hex(attr)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def certificate_dn(der: bytes) -> str:
    return rfc2253_name(x509.load_der_x509_certificate(der).subject)


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
