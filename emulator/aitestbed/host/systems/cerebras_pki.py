"""The Cerebras appliance's Kubernetes credentials, generated per cluster at `up`.

One CA per cluster signs the API server's serving certificate and one client
certificate per identity. Who a client is comes from its certificate: the
common name is the user name and the organisation its group, which RBAC and
the wsjob ownership policy (deploy/wsjob) act on:

  users          CN=<login name>            O=cerebras-users
  scheduler      CN=wsjob-controller        O=cerebras:appliance
  agents         CN=wsjob-agent:<node>      O=cerebras:appliance
  staff          CN=aitestbed-admin         O=system:masters (kubectl on the management node)

Files are made once and kept, so `up` after `down` changes nothing; a new
user or node gets a certificate signed by the same CA without restarting
the API server.

The Kubernetes test cluster (scripts/kube-test-cluster) is signed by the same
CA code: ClusterCA.in_memory (its own name and validity, nothing on disk) and
issue, which returns a certificate and key as PEM for any subject and SANs.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

USERS_GROUP = "cerebras-users"
APPLIANCE_GROUP = "cerebras:appliance"
ADMIN_GROUP = "system:masters"
VALIDITY = datetime.timedelta(days=3650)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(data)
    tmp.replace(path)


def _new_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = ec.generate_private_key(ec.SECP256R1())
    _write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return key


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def _name(common_name: str, organisation: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organisation:
        parts.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation))
    return x509.Name(parts)


def _builder(subject: x509.Name, issuer: x509.Name, public_key,
             validity: datetime.timedelta = VALIDITY) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + validity))


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _ca_certificate(key: ec.EllipticCurvePrivateKey, common_name: str,
                    validity: datetime.timedelta) -> x509.Certificate:
    name = _name(common_name)
    return (_builder(name, name, key.public_key(), validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))


class ClusterCA:
    """The cluster's CA: its key stays in the state directory, never in a container."""

    validity = VALIDITY

    def __init__(self, key_dir: Path, public_dir: Path,
                 common_name: str = "aitestbed-cerebras-ca"):
        self.key_path = key_dir / "ca.key"
        self.cert_path = public_dir / "ca.crt"
        if self.key_path.is_file() and self.cert_path.is_file():
            self.key = _load_key(self.key_path)
            self.cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
            return
        self.key = _new_key(self.key_path)
        self.cert = _ca_certificate(self.key, common_name, self.validity)
        self.cert_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def _issue(self, directory: Path, stem: str, subject: x509.Name,
               usage: x509.ObjectIdentifier, sans: list[x509.GeneralName] | None = None) -> None:
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        if (cert_path.is_file() and key_path.is_file() and self._signed_by_me(cert_path)
                and _names_of(cert_path) == set(sans or ())):
            return  # names changed (a new alias): issued again
        key = _new_key(key_path)
        cert = self._sign(subject, key.public_key(), usage, sans)
        _write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))

    def _sign(self, subject: x509.Name, public_key, usage: x509.ObjectIdentifier,
              sans: list[x509.GeneralName] | None) -> x509.Certificate:
        builder = (_builder(subject, self.cert.subject, public_key, self.validity)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(self.key, hashes.SHA256())

    def _signed_by_me(self, cert_path: Path) -> bool:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        try:
            cert.verify_directly_issued_by(self.cert)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return cert.not_valid_after_utc > datetime.datetime.now(datetime.timezone.utc)

    def server(self, directory: Path, dns_names: list[str], stem: str = "apiserver") -> None:
        sans: list[x509.GeneralName] = [x509.DNSName(n)
                                         for n in dict.fromkeys([*dns_names, "localhost"])]
        sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        self._issue(directory, stem, _name(dns_names[0]),
                    ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, directory: Path, stem: str, user: str, group: str) -> None:
        self._issue(directory, stem, _name(user, group), ExtendedKeyUsageOID.CLIENT_AUTH)

    # In memory (the Kubernetes test cluster): the caller places the PEMs.

    @classmethod
    def in_memory(cls, common_name: str, validity: datetime.timedelta) -> ClusterCA:
        """A CA whose key and certificate live only in this process."""
        ca = cls.__new__(cls)
        ca.key_path = ca.cert_path = None
        ca.validity = validity
        ca.key = ec.generate_private_key(ec.SECP256R1())
        ca.cert = _ca_certificate(ca.key, common_name, validity)
        return ca

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _pem_key(self.key)

    def issue(self, common_name: str, organisation: str | None = None,
              dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM): a server certificate for these names (DNS names
        first, then IP addresses, exactly these) when it has any, else a client one."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if sans else ExtendedKeyUsageOID.CLIENT_AUTH
        cert = self._sign(_name(common_name, organisation), key.public_key(), usage, sans)
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def public_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """A key's public half as PEM (SubjectPublicKeyInfo), as kube-apiserver reads sa.pub."""
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def service_account_key_pems() -> tuple[bytes, bytes]:
    """(sa.key, sa.pub) in memory: the service-account token key pair."""
    key = ec.generate_private_key(ec.SECP256R1())
    return _pem_key(key), public_key_pem(key)


def service_account_keys(directory: Path) -> None:
    """The key pair kube-apiserver requires to sign service-account tokens."""
    key_path, pub_path = directory / "sa.key", directory / "sa.pub"
    if key_path.is_file() and pub_path.is_file():
        return
    key = _new_key(key_path)
    _write_private(pub_path, key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def _names_of(cert_path: Path) -> set[x509.GeneralName]:
    """A certificate's subject alternative names (none: the empty set)."""
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        return set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return set()
