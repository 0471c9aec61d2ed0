"""Raw HTTP client for the mediator tests: `httpclient.py [--source ADDR] [--check-close] HOST PORT`
sends stdin's bytes as they are (so CONNECT, origin-form and the rest can be
sent exactly), reads until the server closes or stops answering, and prints
{"status": N, "headers": {...}, "body": "..."} as JSON ("status": null when
nothing came back). Runs inside a test network namespace."""

import json
import socket
import sys

args = sys.argv[1:]
source = None
check_close = False
while args[0].startswith("--"):
    if args[0] == "--source":
        source, args = args[1], args[2:]
    elif args[0] == "--check-close":
        check_close, args = True, args[1:]
host, port = args[0], int(args[1])
req = sys.stdin.buffer.read()
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(20)
if source:
    s.bind((source, 0))
s.connect((host, port))
s.sendall(req)
data = b""
closed = False
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            closed = True
            break
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            lines = head.decode("latin-1").split("\r\n")
            hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
            n = int(hdrs.get("content-length", "-1"))
            if n >= 0 and len(body) >= n:
                break
            # An answer to CONNECT or HEAD has no body (RFC 9110 9.3.6, 9.3.2).
            if n < 0 and req.split(b" ", 1)[0] in (b"CONNECT", b"HEAD"):
                break
except socket.timeout:
    pass
if not closed and check_close:
    # Did the server close after the answer? (An open connection just waits out this timeout.)
    s.settimeout(2)
    try:
        closed = s.recv(1) == b""
    except (socket.timeout, OSError):
        closed = False
head, _, body = data.partition(b"\r\n\r\n")
out = {"status": None, "headers": {}, "body": "", "closed": closed}
if head:
    lines = head.decode("latin-1").split("\r\n")
    out["status"] = int(lines[0].split()[1])
    out["headers"] = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    out["body"] = body.decode("latin-1")
print(json.dumps(out))
