"""The webhook server's certificates (Koordinator's ``webhook/util/generator`` and ``writer``): a
self-signed CA (``webhook-cert-ca``) and a serving certificate signed by it, both valid ten years, kept in
the Secret ``koordinator-webhook-certs`` under Koordinator's keys and renewed when the serving
certificate has less than a year left or does not cover the name the API server calls.

Where Koordinator regenerates the whole pair for a name the stored certificate lacks (replicas asked for
different names would take turns replacing it), a new serving certificate here keeps the CA and adds the
name to those it had, so every replica's name stays covered.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_KEY, CA_CERT, KEY, CERT, TLS_KEY, TLS_CERT = (
    "ca-key.pem",
    "ca-cert.pem",
    "key.pem",
    "cert.pem",
    "tls.key",
    "tls.crt",
)
CA_NAME = "webhook-cert-ca"
VALIDITY = datetime.timedelta(days=3650)
RENEW_BEFORE = datetime.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class Certs:
    """PEM bytes of the CA and the serving pair."""

    ca_key: bytes
    ca_cert: bytes
    key: bytes
    cert: bytes


def service_name(namespace: str, service: str) -> str:
    """``ServiceToCommonName``: the name the API server calls a webhook Service by."""
    return f"{service}.{namespace}.svc"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [
        *san.get_values_for_type(x509.DNSName),
        *(str(ip) for ip in san.get_values_for_type(x509.IPAddress)),
    ]


def _serving(ca_key: rsa.RSAPrivateKey, ca: x509.Certificate, names: Sequence[str]) -> tuple[bytes, bytes]:
    key = _key()
    alt: list[x509.GeneralName] = []
    for name in dict.fromkeys(["localhost", *names]):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _pem_key(key), cert.public_bytes(serialization.Encoding.PEM)


def generate(names: Sequence[str]) -> Certs:
    """A new CA and a serving certificate for ``names`` (DNS names or IP addresses; ``localhost`` too)."""
    ca_key = _key()
    now = _now()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, True, False, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key, cert = _serving(ca_key, ca, names)
    return Certs(_pem_key(ca_key), ca.public_bytes(serialization.Encoding.PEM), key, cert)


def covering(certs: Certs, name: str) -> Certs:
    """``certs`` if their serving certificate covers ``name`` for more than a year, else a new serving
    certificate from the same CA for ``name`` and the names it had (a new CA when the CA itself is
    expiring or unreadable)."""
    try:
        ca = x509.load_pem_x509_certificate(certs.ca_cert)
        ca_key = serialization.load_pem_private_key(certs.ca_key, None)
        cert = x509.load_pem_x509_certificate(certs.cert)
    except ValueError:
        return generate([name])
    deadline = _now() + RENEW_BEFORE
    if not isinstance(ca_key, rsa.RSAPrivateKey) or ca.not_valid_after_utc < deadline:
        return generate([name])
    have = _names(cert)
    if name in have and cert.not_valid_after_utc >= deadline and cert.issuer == ca.subject:
        return certs
    key, pem = _serving(ca_key, ca, [name, *(n for n in have if n not in (name, "localhost"))])
    return Certs(certs.ca_key, certs.ca_cert, key, pem)


def from_secret(data: Mapping[str, str] | None) -> Certs | None:
    """The certificates a Secret's ``data`` holds (``None``: absent or incomplete)."""
    if not data:
        return None
    try:
        raw = {k: base64.b64decode(str(data[k]), validate=True) for k in (CA_KEY, CA_CERT, KEY, CERT)}
    except (KeyError, ValueError):
        return None
    return Certs(raw[CA_KEY], raw[CA_CERT], raw[KEY], raw[CERT])


def secret_data(certs: Certs) -> dict[str, str]:
    """The Secret's ``data``: Koordinator's keys, and ``tls.crt``/``tls.key`` for tools that expect them."""
    plain = {
        CA_KEY: certs.ca_key,
        CA_CERT: certs.ca_cert,
        KEY: certs.key,
        CERT: certs.cert,
        TLS_KEY: certs.key,
        TLS_CERT: certs.cert,
    }
    return {k: base64.b64encode(v).decode() for k, v in plain.items()}
