"""A business system's webhook receiver, run as its own process by the tests.

    python tests/notifications/webhook_receiver.py PORT SECRET LOG [ADDRESS]

It listens on ADDRESS (127.0.0.1 unless said), checks each request's Standard Webhooks signature (the few lines
docs/webhooks.md shows), answers 204 (401 for a bad signature), and appends one JSON line per request to LOG:
id, timestamp, whether the signature held, the body, the Host header and when it arrived (time.time()).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def verified(secret: str, headers, body: bytes) -> bool:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(expected, given.partition(",")[2]) for given in headers["webhook-signature"].split())


def main() -> None:
    port, secret, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    address = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            ok = verified(secret, self.headers, body)
            with open(log, "a") as out:
                line = {"id": self.headers["webhook-id"], "timestamp": self.headers["webhook-timestamp"]}
                line |= {"host": self.headers["Host"], "received_at": time.time()}
                out.write(json.dumps(line | {"verified": ok, "body": json.loads(body)}) + "\n")
            self.send_response(204 if ok else 401)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer((address, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
