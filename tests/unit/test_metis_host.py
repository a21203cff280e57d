"""The Metis gateway published for the host: its port in the record, the gate's forward,
and `aitestbed metis url|ca|env` (the cluster test test_metis.py reaches it for real)."""

import socket
import subprocess
import sys

import pytest
from aitestbed.cli import cli
from aitestbed.host import inventory, state
from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider import docker_host
from aitestbed.host.provider.docker import DockerProvider
from aitestbed.host.systems import metis_access
from click.testing import CliRunner


def _prepared(name="m1", profile="alcf-2026-mini", systems=("graphcore", "metis")):
    topology = inventory.load(profile, list(systems) if systems else None)
    cluster = state.ClusterState(name)
    record = state.ClusterRecord(name=name, profile=profile, inventory="",
                                 systems=list(systems) if systems else None, user="alice")
    docker_host.assign_ports(topology, record)
    cluster.save(record)
    cluster.prepare(topology, record, {n.name: DockerProvider().ansible_vars(name, n.name)
                                       for n in topology.nodes})
    return cluster, topology, record


def test_the_gateway_gets_a_port_of_its_own_kept_and_skipped_by_other_clusters(isolated_state):
    _, topology, record = _prepared("m1")
    assert set(record.services) == {"metis-gw-01:443"}
    port = record.services["metis-gw-01:443"]
    assert port not in record.ports.values() and port in state.PORT_RANGE
    again = state.ClusterRecord(**{**record.__dict__})
    docker_host.assign_ports(topology, again)
    assert again.services == record.services and again.ports == record.ports
    assert port in state.recorded_ports()
    _, _, other = _prepared("m2")
    assert other.services["metis-gw-01:443"] != port
    assert not set(other.ports.values()) & {port, *record.ports.values()}


def test_a_profile_without_metis_publishes_no_service(isolated_state):
    _, _, record = _prepared("g1", profile="mini", systems=("graphcore",))
    assert record.services == {}
    result = aitestbed("--name", "g1", "metis", "url")
    assert result.returncode == 1, result
    assert result.stderr.startswith("aitestbed: error: cluster 'g1' has no published Metis")
    assert "Traceback" not in result.stderr and not result.stdout
    missing = aitestbed("--name", "nothing-here", "metis", "env")
    assert missing.returncode == 1 and "no cluster 'nothing-here'" in missing.stderr


def aitestbed(*args: str) -> subprocess.CompletedProcess:
    """The installed command's way: errors are one line and exit 1 (run_click)."""
    return subprocess.run([sys.executable, "-c", "from aitestbed.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=60)


def test_url_ca_and_env_name_the_published_port_and_the_clusters_ca(isolated_state):
    cluster, _, record = _prepared("m1")
    port = record.services["metis-gw-01:443"]
    end = metis_access.endpoint(cluster)
    assert end.node == "metis-gw-01" and end.port == port
    assert end.base_url == f"https://127.0.0.1:{port}/resource_server/metis/api/v1"
    assert end.ca == cluster.common_dir / "metis" / "ca.crt" and end.ca.is_file()
    runner = CliRunner()
    assert runner.invoke(cli, ["--name", "m1", "metis", "url"]).output.strip() == end.base_url
    assert runner.invoke(cli, ["--name", "m1", "metis", "url", "--root"]
                         ).output.strip() == f"https://127.0.0.1:{port}"
    assert runner.invoke(cli, ["--name", "m1", "metis", "ca"]).output.strip() == str(end.ca)
    lines = runner.invoke(cli, ["--name", "m1", "metis", "env"]).output.splitlines()
    assert f"export OPENAI_BASE_URL={end.base_url}" in lines
    assert f"export SSL_CERT_FILE={end.ca}" in lines
    assert f"export AITESTBED_METIS_URL=https://127.0.0.1:{port}" in lines


def test_the_certificate_names_the_address_the_host_uses(isolated_state):
    from cryptography import x509

    cluster, _, _ = _prepared("m1")
    cert = x509.load_pem_x509_certificate(
        (cluster.node_dir("metis-gw-01") / "metis" / "gateway.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "inference-api.alcf.anl.gov", "inference.alcf.anl.gov"} <= set(
        names.get_values_for_type(x509.DNSName))
    assert "127.0.0.1" in {str(a) for a in names.get_values_for_type(x509.IPAddress)}


def test_a_certificate_is_issued_again_when_its_names_change(tmp_path):
    from aitestbed.host.systems.cerebras_pki import ClusterCA
    from cryptography import x509

    ca = ClusterCA(tmp_path / "keys", tmp_path / "public", "test-ca")
    ca.server(tmp_path / "srv", ["a.example"], stem="gw")
    first = (tmp_path / "srv" / "gw.crt").read_bytes()
    ca.server(tmp_path / "srv", ["a.example"], stem="gw")
    assert (tmp_path / "srv" / "gw.crt").read_bytes() == first  # kept
    ca.server(tmp_path / "srv", ["a.example", "b.example"], stem="gw")
    again = x509.load_pem_x509_certificate((tmp_path / "srv" / "gw.crt").read_bytes())
    names = again.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "b.example" in names.get_values_for_type(x509.DNSName)


def test_a_service_port_another_program_holds_is_named(isolated_state):
    _, topology, record = _prepared("m1")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        record.services["metis-gw-01:443"] = held.getsockname()[1]
        with pytest.raises(AitestbedError, match="metis-gw-01:443 is already in use"):
            docker_host.check_ports(topology, record, held=set())
        docker_host.check_ports(topology, record, held={held.getsockname()[1]})
