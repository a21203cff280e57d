"""Where the appliance's clients find the cluster server and who they are.

Users: the usernode config /opt/cerebras/config_v2 (csctl's `--csconfig`)
names the server and its CA; each user's client certificate is in
/etc/cerebras/credentials/<user>/, readable by that user only.
Appliance daemons: a directory with `server`, ca.crt, client.crt, client.key.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

from aitestbed.cerebras.kubeapi import NAMESPACE, Credentials

USERNODE_CONFIG = Path(os.environ.get("CEREBRAS_CSCONFIG", "/opt/cerebras/config_v2"))
CREDENTIALS_ROOT = Path("/etc/cerebras/credentials")
# What this cluster is (node_setup writes it on every Cerebras node from the inventory):
# release, system_model (CS-2, CS-3), systems, management_node, support (the servers
# around the systems) and max_execute.
CLUSTER_SETTINGS = Path("/etc/cerebras/cluster.json")


class ConfigError(Exception):
    pass


def cluster_settings(path: Path | None = None) -> dict:
    """The cluster's settings, or {} where none were written (an older node)."""
    try:
        return json.loads((path or CLUSTER_SETTINGS).read_text())
    except (OSError, ValueError):
        return {}


def current_user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def load_usernode_config(path: Path | None = None) -> dict:
    path = path or USERNODE_CONFIG
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"usernode config {path} not found: is this a Cerebras login "
                          "node?") from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read the usernode config {path}: {err}") from None


def current_context(config: dict) -> tuple[dict, dict]:
    name = config.get("currentContext")
    context = next((c for c in config.get("contexts", []) if c.get("name") == name), None)
    if context is None:
        raise ConfigError(f"the usernode config has no context {name!r}")
    cluster = next((c for c in config.get("clusters", [])
                    if c.get("name") == context.get("cluster")), None)
    if cluster is None:
        raise ConfigError(f"the usernode config has no cluster {context.get('cluster')!r}")
    return context, cluster


def user_credentials(config: dict, user: str | None = None) -> Credentials:
    user = user or current_user()
    _, cluster = current_context(config)
    directory = CREDENTIALS_ROOT / user
    cert, key = directory / "client.crt", directory / "client.key"
    if not (os.access(cert, os.R_OK) and os.access(key, os.R_OK)):
        raise ConfigError(f"no cluster credentials for user {user} in {directory}: "
                          "the account has no access to the Cerebras cluster")
    return Credentials(cluster["server"], Path(cluster["certificateAuthority"]), cert, key)


def default_namespace(config: dict) -> str:
    context, _ = current_context(config)
    return context.get("namespace", NAMESPACE)


def in_cluster_credentials() -> Credentials:
    """A pod's own service account (the scheduler deployed with deploy/wsjob/scheduler)."""
    account = Path("/var/run/secrets/kubernetes.io/serviceaccount")
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError("not running in a Kubernetes pod (no KUBERNETES_SERVICE_HOST)")
    return Credentials(f"https://{host}:{port}", account / "ca.crt",
                       token_file=account / "token")


def service_credentials(directory: Path) -> Credentials:
    return Credentials((directory / "server").read_text().strip(), directory / "ca.crt",
                       directory / "client.crt", directory / "client.key")
