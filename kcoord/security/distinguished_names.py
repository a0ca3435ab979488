"""A client certificate's subject as Java's ``X500Principal.getName()`` renders it (RFC 2253),
the name Kafka's SSL principal builder maps. Its own module: cryptography's x509 is a tenth of
what the broker would otherwise import, and only a TLS client certificate needs it.
"""

from __future__ import annotations

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
