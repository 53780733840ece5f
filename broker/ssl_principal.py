"""A TLS client's principal from its certificate, as Kafka 2.8's DefaultKafkaPrincipalBuilder builds it.

Kafka takes the peer's X500Principal and its `getName()`, the RFC 2253 form of the subject, and (with the
default `ssl.principal.mapping.rules=DEFAULT`) makes `User:<that name>`: a certificate issued to
`C=GB, O=Acme, CN=broker-1` calls as `User:CN=broker-1,O=Acme,C=GB`. RFC 2253 §2.1 writes the RDNs last to
first, §2.3 names CN, L, ST, O, OU, C, STREET, DC and UID by keyword and any other attribute by its OID with the
value's BER encoding in hex (`1.2.840.113549.1.9.1=#1611...` for an e-mail address, as Java writes it), §2.4
escapes `, + " \\ < > ;`, a leading `#` or space and a trailing space.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography import x509
from cryptography.x509.oid import NameOID

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN",
    NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.COUNTRY_NAME: "C",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}
_SPECIALS = frozenset(',+"\\<>;')
# ASN.1 string tags and how their characters are encoded (for the `#hex` form of attributes without a keyword).
_ENCODINGS = {12: "utf-8", 19: "ascii", 20: "latin-1", 22: "ascii", 26: "ascii", 28: "utf-32-be", 30: "utf-16-be"}
CERTIFICATES_CACHED_MAX = 1024  # distinct client certificates whose principal is remembered


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in _SPECIALS else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if len(value) > 1 and value.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def _der_length(size: int) -> bytes:
    if size < 0x80:
        return bytes([size])
    octets = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(octets)]) + octets


def _attribute(attribute: x509.NameAttribute) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    value = attribute.value if isinstance(attribute.value, str) else attribute.value.decode("latin-1")
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    tag = int(getattr(attribute, "_type").value)  # noqa: B009 (cryptography keeps the ASN.1 type private)
    body = value.encode(_ENCODINGS.get(tag, "utf-8"))
    return f"{attribute.oid.dotted_string}=#{(bytes([tag]) + _der_length(len(body)) + body).hex()}"


def rfc2253_name(name: x509.Name) -> str:
    """Java's X500Principal.getName() (RFC 2253): RDNs last to first, a multi-valued RDN's parts joined by '+'."""
    return ",".join("+".join(_attribute(a) for a in rdn) for rdn in reversed(name.rdns))


@lru_cache(maxsize=CERTIFICATES_CACHED_MAX)
def certificate_principal(pem: bytes) -> str:
    """`User:<subject in RFC 2253>` of a PEM certificate (the first one when a chain is given)."""
    return "User:" + rfc2253_name(x509.load_pem_x509_certificate(pem).subject)
