"""A small client for the appliance's Kubernetes API: the WSJob resource over HTTPS.

csctl must answer `get jobs` in a fraction of a second, and importing the
official client alone takes longer than that; the few calls the appliance
needs (get, list, create, merge-patch, status patch, watch) are plain REST.
Identity is the client certificate (see aitestbed.host.systems.cerebras_pki).
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

GROUP = "jobs.cerebras.com"
VERSION = "v1"
PLURAL = "wsjobs"
KIND = "WSJob"
NAMESPACE = "job-operator"


class ApiError(Exception):
    """An error status from the API server, with its reason (NotFound, Forbidden, ...)."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class Unreachable(Exception):
    """The API server could not be reached."""


@dataclass(frozen=True)
class Credentials:
    """A client certificate (users, our appliance), or a service-account token (in a pod)."""

    server: str  # https://host:port
    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None
    token_file: Path | None = None


class KubeApi:
    def __init__(self, credentials: Credentials, timeout: float = 30.0):
        url = urlsplit(credentials.server)
        self.host, self.port = url.hostname, url.port or 443
        self.timeout = timeout
        self._tls = ssl.create_default_context(cafile=str(credentials.ca_file))
        if credentials.cert_file:
            self._tls.load_cert_chain(str(credentials.cert_file), str(credentials.key_file))
        self._token_file = credentials.token_file
        self._conn: http.client.HTTPSConnection | None = None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._token_file:  # re-read: projected tokens are rotated
            headers["Authorization"] = f"Bearer {self._token_file.read_text().strip()}"
        return headers

    # transport ------------------------------------------------------------
    def _connection(self, timeout: float | None = None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self._tls,
                                           timeout=timeout or self.timeout)

    def request(self, method: str, path: str, body: dict | None = None,
                content_type: str = "application/json") -> dict:
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers()
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):  # a kept-alive connection the server closed: retry once
            if self._conn is None:
                self._conn = self._connection()
            try:
                self._conn.request(method, path, body=data, headers=headers)
                response = self._conn.getresponse()
                payload = response.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as err:
                self._conn.close()
                self._conn = None
                if attempt == 2 or not isinstance(err, ConnectionError):
                    raise Unreachable(f"cannot reach the cluster server "
                                      f"{self.host}:{self.port}: {err}") from None
        document = json.loads(payload) if payload else {}
        if response.status >= 400:
            raise ApiError(response.status, document.get("reason", response.reason),
                           document.get("message", payload.decode(errors="replace")))
        return document

    def ready(self) -> bool:
        """Whether the API server says it is ready (/readyz, which every client may ask:
        RBAC's roles loaded and its caches synced). A server that has just restarted
        answers 403 to what RBAC allows until then."""
        connection = self._connection(timeout=5)
        try:
            connection.request("GET", "/readyz", headers=self._headers())
            response = connection.getresponse()
            response.read()
            return response.status == 200
        except (ConnectionError, http.client.HTTPException, OSError):
            return False
        finally:
            connection.close()

    # wsjobs ---------------------------------------------------------------
    @staticmethod
    def jobs_path(namespace: str, name: str | None = None, sub: str | None = None) -> str:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path

    def get_job(self, name: str, namespace: str = NAMESPACE) -> dict:
        return self.request("GET", self.jobs_path(namespace, name))

    def list_jobs(self, namespace: str = NAMESPACE, label_selector: str | None = None) -> dict:
        query = f"?{urlencode({'labelSelector': label_selector})}" if label_selector else ""
        return self.request("GET", self.jobs_path(namespace) + query)

    def create_job(self, job: dict, namespace: str = NAMESPACE) -> dict:
        return self.request("POST", self.jobs_path(namespace), job)

    def patch_job(self, name: str, patch: dict, namespace: str = NAMESPACE) -> dict:
        return self.request("PATCH", self.jobs_path(namespace, name), patch,
                            "application/merge-patch+json")

    def patch_status(self, name: str, status: dict, namespace: str = NAMESPACE,
                     resource_version: str | None = None) -> dict:
        """Merge `status`; with resource_version, only if the job did not change meanwhile."""
        patch: dict = {"status": status}
        if resource_version:
            patch["metadata"] = {"resourceVersion": resource_version}
        return self.request("PATCH", self.jobs_path(namespace, name, "status"), patch,
                            "application/merge-patch+json")

    # the logs of ended jobs (csctl log-export): each readable by its job's owner -------
    def put_config_map(self, name: str, binary: dict[str, str], labels: dict[str, str],
                       namespace: str = NAMESPACE) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "binaryData": binary}
        try:
            self.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
        except ApiError as err:
            if err.status != 409:
                raise
            self.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/{name}", body)

    def _put(self, collection: str, body: dict) -> None:
        """Create the object, or replace it if it exists."""
        try:
            self.request("POST", collection, body)
        except ApiError as err:
            if err.status != 409:
                raise
            self.request("PUT", f"{collection}/{body['metadata']['name']}", body)

    def grant_read(self, config_map: str, user: str, labels: dict[str, str],
                   namespace: str = NAMESPACE) -> None:
        """Let `user` (and nobody else RBAC does not already let) get one ConfigMap: a
        Role and a RoleBinding of the same name."""
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        metadata = {"name": config_map, "namespace": namespace, "labels": labels}
        self._put(f"{rbac}/roles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata,
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                       "resourceNames": [config_map]}]})
        self._put(f"{rbac}/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": config_map},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": user}]})

    def get_config_map(self, name: str, namespace: str = NAMESPACE) -> dict:
        return self.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    def watch_jobs(self, resource_version: str, namespace: str = NAMESPACE,
                   timeout_seconds: int = 60) -> Iterator[dict]:
        """Events after resource_version until the server ends the watch."""
        query = urlencode({"watch": "1", "resourceVersion": resource_version,
                           "timeoutSeconds": str(timeout_seconds),
                           "allowWatchBookmarks": "true"})
        conn = self._connection(timeout=timeout_seconds + 30)
        try:
            conn.request("GET", f"{self.jobs_path(namespace)}?{query}", headers=self._headers())
            response = conn.getresponse()
            if response.status >= 400:
                document = json.loads(response.read() or b"{}")
                raise ApiError(response.status, document.get("reason", response.reason),
                               document.get("message", ""))
            for line in response:
                if line.strip():
                    yield json.loads(line)
        except (OSError, http.client.HTTPException) as err:
            raise Unreachable(f"watch ended: {err}") from None
        finally:
            conn.close()
