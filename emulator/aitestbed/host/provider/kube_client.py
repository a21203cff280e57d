"""The Kubernetes provider's access to the API: the client and its connection (from the
kubeconfig and context the cluster was made with), one-line errors for refused or failed
calls, the node's pod, and commands run in it through the API's exec (streamed, with or
without stdin). `KubeClient` is the part of `KubernetesProvider` that talks to the API
server; what it asks for lives in kubernetes.py.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from aitestbed.host.errors import AitestbedError
from aitestbed.host.naming import LABEL_CLUSTER, LABEL_NODE
from aitestbed.host.provider.base import ExecResult, NodeGone

DEFAULT_NAMESPACE = "aitestbed"
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Options:
    """What `aitestbed up --provider kubernetes` was given (kept in the cluster record)."""

    context: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    registry: str | None = None  # HOST[:PORT][/PREFIX] the host pushes to and pods pull from
    storage_class: str | None = None  # None: the cluster's default class
    ssh_address: str | None = None  # where the login nodes' NodePorts are reached
    kubeconfig: str | None = None  # None: $KUBECONFIG, else ~/.kube/config


def kubectl_path() -> str:
    """kubectl: AITESTBED_KUBECTL, the PATH, or the one the project builds and caches."""
    if os.environ.get("AITESTBED_KUBECTL"):
        return os.environ["AITESTBED_KUBECTL"]
    if found := shutil.which("kubectl"):
        return found
    cache = os.environ.get("AITESTBED_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aitestbed")
    def version(path: str) -> tuple[int, ...]:  # v1.32.13 after v1.32.9
        name = Path(path).parent.name.lstrip("v")
        return tuple(int(part) if part.isdigit() else -1 for part in name.split("."))

    built = sorted(glob.glob(os.path.join(cache, "kubernetes", "v*", "kubectl")), key=version)
    if built:
        return built[-1]
    raise AitestbedError("kubectl is missing: install it, or `make kube-test-cluster` "
                         "(which builds one into ~/.cache/aitestbed/kubernetes/)")


class KubeClient:
    """The API server as the provider reaches it: connection, calls, pods, exec."""

    def __init__(self, options: Options):
        self.options = options
        # The cluster keeps the kubeconfig it was made with (its record); else KUBECONFIG
        # as it is now (the client reads it once, when imported).
        self.kubeconfig = options.kubeconfig or os.environ.get("KUBECONFIG") or \
            os.path.expanduser("~/.kube/config")
        self.namespace = options.namespace
        self._api = None
        self._lock = threading.Lock()

    # the client ------------------------------------------------------------------------
    @property
    def api(self):
        if self._api is None:
            self._api = self._connect()
        return self._api

    def _connect(self):
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
        try:
            api_client = config.new_client_from_config(config_file=self.kubeconfig,
                                                       context=self.options.context)
        except ConfigException as err:
            where = self.kubeconfig
            raise AitestbedError(
                f"no Kubernetes context to use ({' '.join(str(err).split())}): point "
                f"KUBECONFIG (or --kubeconfig) at the cluster's kubeconfig (now {where}) or give "
                "--context") from None
        except (OSError, ValueError) as err:
            raise AitestbedError(f"cannot read the kubeconfig: {err}") from None
        self._server = api_client.configuration.host
        self._configuration = api_client.configuration
        return _Apis(client, api_client)

    def _exec_api(self):
        """A CoreV1Api of its own: the client's `stream` swaps its ApiClient's request
        function for a websocket while it runs, so a client shared with other threads
        would send their calls down the websocket."""
        from kubernetes import client
        self.api  # noqa: B018 - connects first
        return client.CoreV1Api(client.ApiClient(self._configuration))

    def _kubeconfig_args(self) -> list[str]:
        args = []
        args += ["--kubeconfig", self.kubeconfig]
        if self.options.context:
            args += ["--context", self.options.context]
        return args + ["-n", self.namespace]

    def _call(self, what: str, call, *args, missing_ok: bool = False, **kwargs):
        """One API call; refusals become one line naming the verb and resource."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError
        try:
            return call(*args, _request_timeout=30, **kwargs)
        except ApiException as err:
            if err.status == 404 and missing_ok:
                return None
            raise api_error(err, what, self.namespace) from None
        except (HTTPError, OSError) as err:
            raise AitestbedError(
                f"the Kubernetes API server {getattr(self, '_server', '')} cannot be reached "
                f"({' '.join(str(err).split())[:200]}): is the cluster up, and is this the "
                "right context?") from None

    def _ensure_namespace(self) -> None:
        core = self.api.core
        from kubernetes.client.exceptions import ApiException
        try:
            core.read_namespace(self.namespace, _request_timeout=30)
            return
        except ApiException as err:
            if err.status == 403:
                return  # a namespaced Role: its namespace exists
            if err.status != 404:
                raise api_error(err, "read namespaces", self.namespace) from None
        body = {"metadata": {"name": self.namespace}}
        try:
            core.create_namespace(body, _request_timeout=30)
        except ApiException as err:
            if err.status != 409:
                raise AitestbedError(
                    f"namespace {self.namespace} does not exist and cannot be made here "
                    f"({err.reason}): ask the cluster's administrator for it and its Role "
                    "(docs/kubernetes.md)") from None

    def _apply(self, read, create, replace, name: str, body: dict, resource: str) -> None:
        current = self._call(f"get {resource}", read, name, self.namespace, missing_ok=True)
        if current is None:
            self._call(f"create {resource}", create, self.namespace, body)
        elif replace is not None:
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            self._call(f"update {resource}", replace, name, self.namespace, body)

    # the node's pod --------------------------------------------------------------------
    def _pods(self, cluster: str, node: str | None = None) -> list:
        selector = f"{LABEL_CLUSTER}={cluster}" + (f",{LABEL_NODE}={node}" if node else "")
        return self._call("list pods", self.api.core.list_namespaced_pod, self.namespace,
                          label_selector=selector).items

    def _pod(self, cluster: str, node: str):
        """The node's live pod (not one being deleted), or None."""
        pods = [p for p in self._pods(cluster, node) if p.metadata.deletion_timestamp is None]
        running = [p for p in pods if p.status.phase == "Running"]
        return (running or pods or [None])[0]

    def _running_pod(self, cluster: str, node: str) -> str:
        pod = self._pod(cluster, node)
        if pod is None or pod.status.phase != "Running":
            raise NodeGone(f"node {node} of cluster {cluster!r} has no running pod")
        return pod.metadata.name

    # commands --------------------------------------------------------------------------
    @staticmethod
    def _as(argv: list[str], user: str | None, workdir: str | None) -> list[str]:
        """The API's exec runs as the container's user in its working directory: `user`
        and `workdir` as `docker exec -u -w` gives them."""
        if workdir:
            argv = ["sh", "-c", 'cd "$0" && exec "$@"', workdir, *argv]
        if user:
            argv = ["runuser", "-u", user, "--", *argv]
        return argv

    def _stream(self, cluster: str, node: str, argv: list[str], stdin: bytes | None = None):
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream
        pod = self._running_pod(cluster, node)
        try:
            return stream(self._exec_api().connect_get_namespaced_pod_exec, pod, self.namespace,
                          container="node", command=argv, stdin=stdin is not None,
                          stdout=True, stderr=True, tty=False, _preload_content=False,
                          binary=True)
        except ApiException as err:
            reason = " ".join(str(err.reason).split())
            # The websocket's handshake failing is status 0, its HTTP status in the text.
            found = re.search(r"Handshake status (\d+)", reason)
            status = err.status or (int(found.group(1)) if found else 0)
            if status == 403:
                raise self._exec_refused() from None
            # 5xx: the API server cannot reach the pod's machine (its kubelet is gone:
            # "error dialing backend"), a node not ready, not a refusal.
            if status in (0, 400, 404) or status >= 500:
                raise NodeGone(f"node {node}: {reason[:300]}") from err
            raise api_error(err, "create pods/exec", self.namespace) from None
        except Exception as err:  # the websocket's own errors (handshake refused, closed)
            text = " ".join(str(err).split())
            if "403" in text:
                raise self._exec_refused() from None
            raise NodeGone(f"node {node}: {text}") from err

    def _exec_refused(self) -> AitestbedError:
        return AitestbedError(f"namespace {self.namespace}: the Role does not allow create on "
                              "pods/exec (docs/kubernetes.md lists the verbs)")

    def _finish(self, client, separate: bool) -> ExecResult:
        from kubernetes.stream.ws_client import ERROR_CHANNEL, STDERR_CHANNEL, STDOUT_CHANNEL
        out, err = bytearray(), bytearray()
        while client.is_open():
            client.update(timeout=1)
            if client.peek_channel(STDOUT_CHANNEL):
                out += client.read_channel(STDOUT_CHANNEL)
            if client.peek_channel(STDERR_CHANNEL):
                chunk = client.read_channel(STDERR_CHANNEL)
                (err if separate else out).extend(chunk)
        out += client.read_channel(STDOUT_CHANNEL) or b""
        (err if separate else out).extend(client.read_channel(STDERR_CHANNEL) or b"")
        try:
            code = client.returncode
        except (ValueError, KeyError, IndexError, TypeError) as error:
            # The error channel holds no exit code: the kubelet could not run it (its
            # machine is gone, the container stopped).
            text = client.read_channel(ERROR_CHANNEL)
            raise NodeGone(" ".join(str(text or error).split())[:300]) from None
        finally:
            client.close()
        if code is None:
            raise NodeGone("the command's connection closed before it ended")
        return ExecResult(int(code), bytes(out), bytes(err))

    def _exec_stdin(self, cluster: str, node: str, argv: list[str], data: bytes) -> ExecResult:
        from kubernetes.stream.ws_client import STDIN_CHANNEL
        client = self._stream(cluster, node, argv, stdin=data)
        for start in range(0, len(data), 1 << 16):
            client.write_channel(STDIN_CHANNEL, data[start:start + (1 << 16)])
        client.close_channel(STDIN_CHANNEL)
        return self._finish(client, False)


class _Apis:
    def __init__(self, client, api_client):
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.net = client.NetworkingV1Api(api_client)
        self.storage = client.StorageV1Api(api_client)
        self.version = client.VersionApi(api_client)


def api_error(err, what: str, namespace: str) -> AitestbedError:
    reason = err.reason or ""
    try:
        import json
        reason = json.loads(err.body).get("message") or reason
    except (TypeError, ValueError, AttributeError):
        pass
    if err.status == 403:
        return AitestbedError(
            f"namespace {namespace}: not allowed to {what} ({reason}): the Role must allow "
            "it (docs/kubernetes.md lists every verb on every resource)")
    if err.status == 401:
        return AitestbedError(f"the Kubernetes API server refused the credentials: {reason}")
    if err.status == 404 and "namespaces" in reason:
        return AitestbedError(f"namespace {namespace} does not exist: {reason}")
    return AitestbedError(f"Kubernetes refused to {what}: {reason}")
