"""How a bot's requests reach the server: Django's test Client or standard-library HTTP.

``Browser`` follows redirects on top of either, like a browser.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Protocol
from urllib.parse import urlencode, urlsplit


@dataclass
class RawResponse:
    status: int
    location: str
    text: str


class Transport(Protocol):
    def request(self, method: str, path: str, data: dict[str, str] | None = None) -> RawResponse: ...


class ClientTransport:
    """Django's test Client: the real URLs, middleware, views and templates, in-process."""

    def __init__(self, client=None, *, address: str | None = None):
        from django.test import Client

        self.client = client or (Client(REMOTE_ADDR=address) if address else Client())

    def request(self, method: str, path: str, data: dict[str, str] | None = None) -> RawResponse:
        if method == "POST":
            response = self.client.post(path, data or {})
        else:
            response = self.client.get(path)
        text = response.content.decode() if not response.streaming else ""
        return RawResponse(response.status_code, response.get("Location", ""), text)


class HttpTransport:
    """Standard-library HTTP with a cookie jar, for load tests against a running server."""

    def __init__(self, base_url: str, timeout: float = 30):
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        self.https = parts.scheme == "https"
        self.timeout = timeout
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, data: dict[str, str] | None = None) -> RawResponse:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        connection = cls(self.host, self.port, timeout=self.timeout)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if method == "POST":
            body = urlencode(data or {})
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return RawResponse(response.status, response.getheader("Location", ""), text)
        finally:
            connection.close()


MAX_REQUESTS = 400


def _path_of(location: str) -> str:
    parts = urlsplit(location)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class Browser:
    """Follows redirects like a browser and remembers where it is."""

    def __init__(self, transport: Transport):
        self.transport = transport
        self.path = "/"
        self.requests = 0

    def go(self, method: str, path: str, data: dict[str, str] | None = None) -> tuple[RawResponse, RawResponse]:
        """(first response, final response after redirects)."""
        first = response = self._send(method, path, data)
        self.path = path
        while response.status in (301, 302, 303, 307, 308) and response.location:
            self.path = _path_of(response.location)
            response = self._send("GET", self.path)
        return first, response

    def _send(self, method, path, data=None) -> RawResponse:
        self.requests += 1
        if self.requests > MAX_REQUESTS:
            raise RuntimeError("bot made too many requests; the flow is looping")
        return self.transport.request(method, path, data)
