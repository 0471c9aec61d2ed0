"""Test upstream: `httpserve.py LOG addr,port[,cert,key] ...` serves HTTP/1.1
(HTTPS with cert and key) on each
address until killed. Every accepted connection and every request (method,
target, headers) is appended to LOG as one JSON line, so a test can prove
both what reached the upstream and that nothing reached it. Each answer
carries a Set-Cookie, a WWW-Authenticate and an X-Upstream header and the
body "hello from ADDR". Special targets:
  /redirect...          302 to the metadata address
  .../to?u=URL[&s=CODE] a redirect (302, or CODE) to URL, with a
                        Set-Cookie the client must never see
  .../chain/N           302 to .../chain/N-1 on the same authority, 200 at 0
  /slow?t=SECONDS       waits (at most 30 s) before answering
  /bighdr               a response header of 70000 bytes
  /size/N               a body of N bytes (at most 16 MiB)
  .../slow               (last segment "slow", not /slow...) answered after
                        4 s, after its request line is logged
  /files/PATH           with HTTPSERVE_ROOT=DIR in the environment: the file
                        DIR/PATH (a directory's index.html), 404 if none: a
                        package index or a dumb-HTTP git repository
POST, PUT and DELETE bodies are logged as their SHA-256 and length.
Prints "ready" once every socket listens. Runs inside a test network
namespace."""

import hashlib
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]
ROOT = os.path.realpath(os.environ["HTTPSERVE_ROOT"]) if os.environ.get("HTTPSERVE_ROOT") else None
lock = threading.Lock()


def log(obj):
    with lock, open(LOG, "a") as f:
        f.write(json.dumps(obj) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        log({"event": "connect", "local": self.server.server_address[0],
             "port": self.server.server_address[1], "peer": self.client_address[0]})

    def answer(self, body):
        addr = self.server.server_address[0]
        log({"event": "request", "local": addr, "method": self.command, "target": self.path,
             "headers": {k.lower(): v for k, v in self.headers.items()}})
        data = ("hello from %s\n" % addr).encode()
        q = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        path = urlsplit(self.path).path
        if path.rsplit("/", 1)[-1] == "to" and "u" in q:
            self.send_response(int(q.get("s", ["302"])[0]))
            self.send_header("Location", q["u"][0])
            self.send_header("Set-Cookie", "session=redirect-secret")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if ROOT is not None and path.startswith("/files/"):
            self.static(path[len("/files/"):], body)
            return
        head, _, n = path.rpartition("/")
        if head.endswith("/chain") and n.isdigit():
            n = int(n)
            if n > 0:
                self.send_response(302)
                self.send_header("Location", "%s/%d" % (head, n - 1))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        if self.path.startswith("/slow"):
            time.sleep(min(float(q.get("t", ["5"])[0]), 30))
        elif path.rsplit("/", 1)[-1] == "slow":
            time.sleep(4)
        if self.path.startswith("/size/"):
            data = b"x" * min(int(path[len("/size/"):]), 16 << 20)
        if self.path.startswith("/bighdr"):
            self.send_response(200)
            self.send_header("X-Big", "b" * 70000)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path.startswith("/redirect"):
            # A redirect to the metadata address: the mediator must not follow it.
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254:8080/latest/meta-data")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Set-Cookie", "session=upstream-secret")
        self.send_header("WWW-Authenticate", "Basic realm=x")
        self.send_header("Proxy-Authenticate", "Basic realm=p")
        self.send_header("Authentication-Info", "nextnonce=upstreamnonce")
        self.send_header("Keep-Alive", "timeout=5")
        self.send_header("X-Upstream", "1")
        self.send_header("ETag", '"v1"')
        self.end_headers()
        if body:
            self.wfile.write(data)

    def static(self, rel, body):
        full = os.path.realpath(os.path.join(ROOT, rel))
        if os.path.isdir(full):
            full = os.path.join(full, "index.html")
        if not full.startswith(ROOT + "/") or not os.path.isfile(full):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(full, "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if full.endswith(".html") else
                         "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self):
        self.answer(True)

    def do_HEAD(self):
        self.answer(False)

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n) if n else b""
        log({"event": "body", "local": self.server.server_address[0], "method": self.command,
             "target": self.path, "sha256": hashlib.sha256(data).hexdigest(), "length": n})
        self.answer(True)

    def do_POST(self):
        self.body()

    def do_PUT(self):
        self.body()

    def do_DELETE(self):
        self.body()

    def log_message(self, *a):
        pass


def server_bind(self):
    # HTTPServer.server_bind would call getfqdn(): a DNS lookup that waits out
    # its timeouts in a namespace without a resolver.
    socketserver.TCPServer.server_bind(self)
    self.server_name, self.server_port = self.server_address[:2]


servers = []
for spec in sys.argv[2:]:
    parts = spec.split(",")
    addr, port = parts[0], parts[1]
    cls = type("S", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6 if ":" in addr
                                             else socket.AF_INET, "daemon_threads": True,
                                             "server_bind": server_bind})
    srv = cls((addr, int(port)), Handler)
    if len(parts) == 4:  # addr,port,certfile,keyfile: TLS
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(parts[2], parts[3])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    servers.append(srv)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
