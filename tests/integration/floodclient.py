"""Half-sent request heads for the mediator's flood test:
`floodclient.py SOURCE HOST PORT COUNT SECONDS` opens up to COUNT connections
from SOURCE, each sending the start of a request head and never its end,
within SECONDS in all (both bounds hold, whichever comes first), then
prints {"opened": N, "refused": N} and waits for a line on stdin; it then
prints {"open": N} (the connections the server has neither closed nor
answered) and exits,
closing them all. Runs inside a test network namespace."""

import json
import resource
import select
import socket
import sys
import time

source, host, port, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), float(sys.argv[5])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
head = b"GET http://up.test:8080/flood HTTP/1.1\r\nHost: up.test:8080\r\nX-Slow: "
socks, refused = [], 0
deadline = time.monotonic() + seconds
while len(socks) + refused < count and time.monotonic() < deadline:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.bind((source, 0))
        s.connect((host, port))
        s.sendall(head)
        socks.append(s)
    except OSError:
        refused += 1
        s.close()
print(json.dumps({"opened": len(socks), "refused": refused}), flush=True)
sys.stdin.readline()
still = 0
for s in socks:
    # (poll, not select: descriptors past 1024)
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
    # readable: closed, or answered with a refusal it is closing after
    if not p.poll(0):
        still += 1
    s.close()
print(json.dumps({"open": still}), flush=True)
