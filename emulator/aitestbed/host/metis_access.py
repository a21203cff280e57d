"""The Metis gateway from the host: where the cluster publishes it and what trusts it.

The gateway (aitestbed.metis, node class metis_gateway) serves HTTPS on port 443 inside
the cluster at the docs' names; the cluster's gate publishes that port on 127.0.0.1
(provider/docker: the record's `services`), and its certificate names 127.0.0.1 and
localhost, so a program on the host verifies it with the cluster's Metis CA
(`common/metis/ca.crt` in the cluster's state).

Commands here return data; `aitestbed metis ...` (cli.py) prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aitestbed.host.errors import AitestbedError
from aitestbed.host.systems.metis import GATEWAY_CLASS

if TYPE_CHECKING:
    from aitestbed.host.state import ClusterState

HTTPS = 443
API_PATH = "/resource_server/metis/api/v1"
ADDRESS = "127.0.0.1"


@dataclass(frozen=True)
class Endpoint:
    node: str  # the gateway node
    port: int  # on 127.0.0.1
    ca: Path  # the cluster's Metis CA certificate

    @property
    def url(self) -> str:
        """The service's root, as AITESTBED_METIS_URL wants it (the token helper)."""
        return f"https://{ADDRESS}:{self.port}"

    @property
    def base_url(self) -> str:
        """What the docs give OpenAI(base_url=...)."""
        return self.url + API_PATH

    def environment(self) -> dict[str, str]:
        """What a program on the host sets to reach and verify the gateway: the token
        helper's settings, the `openai` package's, httpx's and requests' CA bundles."""
        return {"AITESTBED_METIS_URL": self.url, "AITESTBED_METIS_CA": str(self.ca),
                "OPENAI_BASE_URL": self.base_url, "SSL_CERT_FILE": str(self.ca),
                "REQUESTS_CA_BUNDLE": str(self.ca)}


def endpoint(state: ClusterState) -> Endpoint:
    """The published gateway of the cluster, or one line saying why there is none."""
    if not state.exists():
        raise AitestbedError(f"no cluster {state.name!r}: run `aitestbed up` first")
    record = state.load()
    published = sorted((key, port) for key, port in record.services.items()
                       if key.endswith(f":{HTTPS}"))
    gateways = [(key.rpartition(":")[0], port) for key, port in published
                if _class_of(state, key.rpartition(":")[0]) == GATEWAY_CLASS]
    if not gateways:
        if record.provider != "docker":
            raise AitestbedError(
                f"cluster {state.name!r} runs on the {record.provider} provider, which does "
                "not publish the Metis gateway for the host: reach it from a login node")
        raise AitestbedError(
            f"cluster {state.name!r} has no published Metis gateway: Metis is in the "
            "alcf-2026 profiles (`aitestbed up --profile alcf-2026-mini --systems "
            "graphcore,metis`); a cluster made before the gateway was published gets its "
            "port at its next `up`")
    node, port = gateways[0]
    ca = state.common_dir / "metis" / "ca.crt"
    if not ca.is_file():
        raise AitestbedError(f"the cluster's Metis CA ({ca}) is missing: run `aitestbed up`")
    return Endpoint(node, port, ca)


def _class_of(state: ClusterState, node: str) -> str | None:
    """A node's class from its config in the state (node.json), None if unknown."""
    from aitestbed.node.config import NodeConfig  # noqa: PLC0415 - the node's own format
    try:
        return NodeConfig.from_json((state.node_dir(node) / "node.json").read_text()).node_class
    except (OSError, ValueError, KeyError, TypeError):
        return None
