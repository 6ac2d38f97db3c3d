"""A webhook receiver for jobscheduler's failure notifications, with the standard library
only: it checks each delivery's signature and prints the event.

    WEBHOOK_SECRET=whsec_... python3 webhook_receiver.py 9001

Every delivery is a JSON POST with ``X-Jobscheduler-Signature: t=<unix seconds>,v1=<hex>``,
where ``<hex>`` is the HMAC-SHA256, keyed with the webhook's secret, of ``<t>.<body>``. A
receiver recomputes it over the raw body, compares in constant time, and refuses a
timestamp more than 5 minutes away (a replayed request). Delivery is at least once:
``X-Jobscheduler-Delivery`` is the same on every retry of one delivery, a key to drop
duplicates. Any 2xx answer counts as delivered; anything else is retried.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRET = os.environ.get("WEBHOOK_SECRET", "")
TOLERANCE = 300


def signed(header: str, body: bytes, secret: str, now: float) -> bool:
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > TOLERANCE:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(expected.hexdigest(), fields.get("v1", ""))


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        header = self.headers.get("X-Jobscheduler-Signature", "")
        if not signed(header, body, SECRET, time.time()):
            self.send_response(401)
            self.end_headers()
            print("refused: bad signature", flush=True)
            return
        event = json.loads(body)
        job = event["data"].get("job") or event["data"].get("run") or {}
        print(f"{event['type']} {job.get('id')} {job.get('lastError')!r}: signature ok", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet: one line per event
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9001
    HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
