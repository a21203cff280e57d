"""A small client of the Metis gateway (standard library only).

    client = MetisClient("http://127.0.0.1:8080", token)
    client.chat("gpt-oss-120b", [{"role": "user", "content": "Hello"}], max_tokens=20)
    for chunk in client.stream("gpt-oss-120b", messages): ...
    client.models(); client.jobs(); client.list_endpoints(); client.status()

`url` is the gateway's root (scheme, host, port); the routes are the docs'. An answer
other than 200 raises MetisError with the service's message, status, OpenAI error code
and Retry-After; a gateway that does not answer raises MetisError with status 0.
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from urllib.parse import urlsplit

from aitestbed.metis.schema import sse_events

API = "/resource_server/metis/api/v1"


class MetisError(RuntimeError):
    def __init__(self, message: str, status: int = 0, code: str | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.status, self.code, self.retry_after = status, code, retry_after


class MetisClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0,
                 context: ssl.SSLContext | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MetisError(f"not a gateway URL: {url!r}")
        self.url, self.https = url.rstrip("/"), parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.token, self.timeout, self.context = token, timeout, context

    @property
    def base_url(self) -> str:
        """What the OpenAI client takes as base_url."""
        return self.url + API

    def _connection(self) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=self.context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _request(self, method: str, path: str, body: dict | None = None
                 ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        headers = {"Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.request(method, path, data, headers)
            response = conn.getresponse()
        except OSError as err:
            conn.close()
            raise MetisError(f"the Metis gateway at {self.url} does not answer: "
                             f"{err.strerror or err}") from None
        if response.status != 200:
            raw = response.read()
            conn.close()
            raise self._error(response, raw)
        return conn, response

    @staticmethod
    def _error(response: http.client.HTTPResponse, raw: bytes) -> MetisError:
        code, message = None, f"the gateway answered {response.status} {response.reason}"
        try:
            error = json.loads(raw)["error"]
            message, code = error["message"], error.get("code")
        except (ValueError, KeyError, TypeError):
            pass
        retry = response.getheader("Retry-After")
        return MetisError(message, response.status, code,
                          int(retry) if retry and retry.isdigit() else None)

    def _json(self, method: str, path: str, body: dict | None = None):
        conn, response = self._request(method, path, body)
        try:
            return json.loads(response.read())
        finally:
            conn.close()

    # --- the routes -----------------------------------------------------------------------------
    def chat(self, model: str, messages: list[dict], **options) -> dict:
        """A chat completion (OpenAI's options: max_tokens, temperature, top_p, stop, seed)."""
        return self._json("POST", f"{API}/chat/completions",
                          {"model": model, "messages": messages, **options, "stream": False})

    def stream(self, model: str, messages: list[dict], **options) -> Iterator[dict]:
        """The chunks of a streamed completion, until `data: [DONE]`. Closing the iterator
        closes the connection (the gateway stops generating)."""
        conn, response = self._request("POST", f"{API}/chat/completions",
                                       {"model": model, "messages": messages, **options,
                                        "stream": True})
        try:
            for event in sse_events(response):
                if "error" in event:
                    raise MetisError(event["error"]["message"], 200, event["error"].get("code"))
                yield event
        except ValueError as err:
            raise MetisError(str(err), 200) from None
        finally:
            conn.close()

    def models(self) -> dict:
        return self._json("GET", f"{API}/models")

    def jobs(self) -> dict:
        return self._json("GET", "/resource_server/metis/jobs")

    def list_endpoints(self) -> dict:
        return self._json("GET", "/resource_server/list-endpoints")

    def status(self) -> dict:
        """The status page's data (model -> status)."""
        return self._json("GET", "/status")

    def states(self) -> dict[str, str]:
        """model -> Live / Starting / Queued / Offline, from /jobs."""
        jobs = self.jobs()
        return {job["Models"]: ("Live" if job["Model Status"] == "running"
                                else job["Model Status"].capitalize())
                for key in ("running", "queued", "stopped", "others") for job in jobs[key]}
