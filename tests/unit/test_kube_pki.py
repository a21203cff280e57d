"""Per-cluster certificates for the Cerebras appliance's API (and the Kubernetes test
cluster's, signed by the same CA code)."""

import datetime

from aitestbed.host.systems import cerebras_pki
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def subject(path):
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    name = cert.subject
    return (name.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
            [a.value for a in name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)], cert)


def test_identities_and_groups_come_from_the_certificates(tmp_path):
    ca = cerebras_pki.ClusterCA(tmp_path / "secret", tmp_path / "public")
    ca.server(tmp_path / "mgmt", ["cer-mgmt-01", "cer-mgmt-01.ai.alcf.anl.gov"])
    ca.client(tmp_path / "users", "alice", "alice", cerebras_pki.USERS_GROUP)
    cn, org, cert = subject(tmp_path / "users" / "alice.crt")
    assert (cn, org) == ("alice", ["cerebras-users"])
    assert cert.issuer == ca.cert.subject
    _, _, server = subject(tmp_path / "mgmt" / "apiserver.crt")
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"cer-mgmt-01", "cer-mgmt-01.ai.alcf.anl.gov", "localhost"} <= set(
        names.get_values_for_type(x509.DNSName))
    assert (tmp_path / "users" / "alice.key").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "public" / "ca.key").exists()


def test_reruns_keep_what_exists_and_a_new_ca_reissues(tmp_path):
    ca = cerebras_pki.ClusterCA(tmp_path / "secret", tmp_path / "public")
    ca.client(tmp_path, "bob", "bob", cerebras_pki.USERS_GROUP)
    first = (tmp_path / "bob.crt").read_bytes()
    again = cerebras_pki.ClusterCA(tmp_path / "secret", tmp_path / "public")
    again.client(tmp_path, "bob", "bob", cerebras_pki.USERS_GROUP)
    assert (tmp_path / "bob.crt").read_bytes() == first
    other = cerebras_pki.ClusterCA(tmp_path / "other", tmp_path / "other-public")
    other.client(tmp_path, "bob", "bob", cerebras_pki.USERS_GROUP)
    assert (tmp_path / "bob.crt").read_bytes() != first


def test_the_kube_test_clusters_ca_is_in_memory_with_exactly_its_names():
    ca = cerebras_pki.ClusterCA.in_memory("kube-test-cluster-ca", datetime.timedelta(days=365))
    assert ca.key_path is None and ca.cert.subject.rfc4514_string() == "CN=kube-test-cluster-ca"
    crt, key = ca.issue("kube-apiserver", dns=("kubernetes", "localhost"), ips=("10.96.0.1",))
    cert = x509.load_pem_x509_certificate(crt)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in names] == ["kubernetes", "localhost", "10.96.0.1"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 365
    crt, _ = ca.issue("system:node:w1", "system:nodes")
    client = x509.load_pem_x509_certificate(crt)
    assert client.subject.rfc4514_string() == "CN=system:node:w1,O=system:nodes"
    assert list(client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH]
    assert key.startswith(b"-----BEGIN PRIVATE KEY-----")
