"""Per-cluster set-up of a node that carries Metis, at every start (a node-init hook of
roles/metis_gateway: the gateway and the login nodes).

What it installs comes from the cluster's state directory (aitestbed.host.systems.metis
makes it at `up`; nothing of it is in an image):
  every such node   the cluster's Metis CA in the system's trust store
                    (/usr/local/share/ca-certificates, then update-ca-certificates), so
                    curl, Python's ssl, and requests/httpx given the system's bundle verify
                    https://inference-api.alcf.anl.gov; the Metis MUNGE domain's key
                    (/etc/munge/metis.key) and its munged (the metis-munge service)
  the gateway       its certificate and key (/etc/metis/tls/, root's only: the server reads
                    them before it gives up root); the active users' passcode enrolments
                    (metis/oath/<user>.oath, aitestbed.host.systems.metis.publish) in
                    /etc/metis/oath, owned by the directory's owner (the gateway's user,
                    roles/metis_gateway), exactly those: an offboarded user's goes. The
                    account playbooks run this again after they publish the accounts.
  login nodes       /software/metis, a link to the image's token helper and README
A node without the files (a cluster made before Metis) gets nothing and keeps running.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from aitestbed.node.config import CLUSTER_DIR, NODE_DIR, NodeConfig
from aitestbed.node.init import enable_services, install_file

SOURCE = "metis"  # common/metis and nodes/<node>/metis in the state directory
TRUSTED_CA = Path("/usr/local/share/ca-certificates/aitestbed-metis-ca.crt")
MUNGE_KEY = Path("/etc/munge/metis.key")
TLS_DIR = Path("/etc/metis/tls")
OATH_DIR = Path("/etc/metis/oath")  # roles/metis_gateway: metis_gateway_oath_dir
SOFTWARE = Path("/software/metis")
SOFTWARE_SOURCE = Path("/opt/metis/software")
MUNGE_SERVICE = "metis-munge"


def trust_ca(ca: Path) -> bool:
    """The CA in the system's store; True when it changed (update-ca-certificates ran)."""
    before = TRUSTED_CA.read_bytes() if TRUSTED_CA.is_file() else None
    install_file(ca, TRUSTED_CA, 0o644)
    if before == ca.read_bytes():
        return False
    subprocess.run(["update-ca-certificates"], check=True, stdout=subprocess.DEVNULL)
    return True


def munge_domain(key: Path) -> None:
    munge = pwd.getpwnam("munge")
    install_file(key, MUNGE_KEY, 0o400, munge.pw_uid, munge.pw_gid)
    enable_services([MUNGE_SERVICE])


def install_enrolments(source: Path, dest: Path = OATH_DIR) -> None:
    """dest holds exactly source's <user>.oath files, 0600 and owned by dest's owner (the
    gateway's user, who reads them). Nothing without dest (an image from before)."""
    if not dest.is_dir():
        return
    owner = os.stat(dest)
    wanted = {p.name for p in source.glob("*.oath") if p.is_file()}
    for name in sorted(wanted):
        install_file(source / name, dest / name, 0o600, owner.st_uid, owner.st_gid)
    for path in dest.glob("*.oath"):
        if path.name not in wanted:
            path.unlink(missing_ok=True)


def link_software() -> None:
    if SOFTWARE_SOURCE.is_dir() and not SOFTWARE.exists() and not SOFTWARE.is_symlink():
        SOFTWARE.parent.mkdir(parents=True, exist_ok=True)
        SOFTWARE.symlink_to(SOFTWARE_SOURCE)


def main() -> None:
    node = NodeConfig.load()
    common, own = CLUSTER_DIR / SOURCE, NODE_DIR / SOURCE
    if (common / "ca.crt").is_file():
        trust_ca(common / "ca.crt")
    if (common / "munge.key").is_file():
        munge_domain(common / "munge.key")
    if (own / "gateway.crt").is_file():
        TLS_DIR.mkdir(parents=True, exist_ok=True)
        TLS_DIR.chmod(0o700)
        install_file(own / "gateway.crt", TLS_DIR / "gateway.crt", 0o444)
        install_file(own / "gateway.key", TLS_DIR / "gateway.key", 0o400)
    if (own / "oath").is_dir():
        install_enrolments(own / "oath")
    if node.node_class == "login" and "/software" in node.mounts:
        link_software()


if __name__ == "__main__":
    main()
