#!/usr/bin/env python3
"""Alertmanager webhook receiver for the live end-to-end tests (tests/e2e/alerts_live.sh).

Appends every payload Alertmanager POSTs to OUT as one JSON line: the payload object exactly as
received, plus one key added by the receiver, "x_received_at" (Unix time, float, this host's clock).
GET /-/ready answers 200 once the server listens. The port it listens on (useful with port 0, which
lets the kernel pick a free one) is written to --port-file after the socket is bound.

Usage: webhook.py --listen 127.0.0.1:0 --out hooks.jsonl --port-file webhook.port
Standard library only (Debian python3).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 16 * 1024 * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any free port)")
    ap.add_argument("--out", required=True, help="file the JSON lines are appended to")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    args = ap.parse_args()

    host, _, port = args.listen.rpartition(":")
    lock = threading.Lock()
    out = open(args.out, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, code, body=b""):
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def do_GET(self):
            if self.path in ("/-/ready", "/-/healthy"):
                self._reply(200, b"ok\n")
            else:
                self._reply(404, b"POST Alertmanager webhook payloads here\n")

        def do_POST(self):
            received = time.time()
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._reply(400, b"bad Content-Length\n")
                return
            raw = self.rfile.read(length)
            try:
                payload = json.loads(raw)
                if not isinstance(payload, dict):
                    raise ValueError("payload is not a JSON object")
            except ValueError as e:
                sys.stderr.write("webhook: rejected a payload: %s\n" % e)
                self._reply(400, b"invalid JSON\n")
                return
            payload["x_received_at"] = received
            line = json.dumps(payload, sort_keys=True, separators=(",", ":"))
            with lock:
                out.write(line + "\n")
                out.flush()
            self._reply(200, b"ok\n")

        def log_message(self, fmt, *a):  # one short line per request on stderr
            sys.stderr.write("webhook: %s %s\n" % (self.address_string(), fmt % a))

    server = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), Handler)
    server.daemon_threads = True
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.replace(tmp, args.port_file)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        out.close()


if __name__ == "__main__":
    main()
