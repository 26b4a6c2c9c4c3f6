"""The host agent's HTTP client for protocol v2: keep-alive, no redirects, the credential never leaves it.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

VERSION = "2.0"
SYNC_PATH = "/runner/v2/sync"


class Refused(Exception):
    """401/403: the agent credential is not (or no longer) valid."""


class Failed(Exception):
    """No usable answer this time: wait and try again."""


class Connection:
    """One keep-alive connection to the server; never follows a redirect (the credential stays here)."""

    def __init__(self, url: str, credential: str, ssl_context):
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.prefix = parts.path.rstrip("/")
        self.credential, self.ssl_context = credential, ssl_context
        self.http = None
        self.sent_at = None  # time.monotonic() of a request still waiting for its answer
        self.carried = []  # what the request in flight told the server once (removed run directories)

    def send(self, body: dict, timeout: float) -> None:
        if self.http is None:
            if self.https:
                self.http = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context)
            else:
                self.http = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        headers = {
            "Authorization": "Bearer " + self.credential,
            "Content-Type": "application/json",
            "User-Agent": "cloudpivot-agent/" + VERSION,
        }
        try:
            self.http.timeout = timeout
            if self.http.sock is not None:
                self.http.sock.settimeout(timeout)
            self.http.request("POST", self.prefix + SYNC_PATH, body=json.dumps(body).encode(), headers=headers)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise Failed("no answer: %s" % exc) from None
        self.sent_at = time.monotonic()

    def receive(self) -> dict:
        self.sent_at = None
        try:
            response = self.http.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise Failed("no answer: %s" % exc) from None
        if response.status in (401, 403):
            raise Refused("the server refused the agent credential (HTTP %d)" % response.status)
        if 300 <= response.status < 400:
            self.close()
            raise Failed(
                "HTTP %d: redirects are never followed; give the final address as the server URL" % response.status
            )
        if response.status != 200:
            if response.will_close:
                self.close()
            raise Failed("HTTP %d: %s" % (response.status, raw[:300].decode("utf-8", "replace")))
        try:
            answer = json.loads(raw.decode("utf-8"))
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise Failed("the answer is not a JSON object")
        return answer

    def answered(self, readable: list) -> bool:
        return self.http is not None and self.http.sock in readable

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
        self.http, self.sent_at = None, None
