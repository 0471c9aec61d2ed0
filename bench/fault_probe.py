"""Runs inside a sandboxed operation: for each port, connect (rejected),
then retry every 0.5 ms until the lease the trace sensor obtained lets it
through (bounded: 3 s per port). Prints JSON: per port the wall-clock time
of the first rejected connect (ms) and the delay until the retry succeeded."""

import json
import socket
import sys
import time

addr, ports = sys.argv[1], [int(p) for p in sys.argv[2].split(",")]
out = []
for port in ports:
    t0 = time.time()
    s = socket.socket()
    try:
        s.connect((addr, port))
        first = "ok"
    except OSError as e:
        first = e.errno
    s.close()
    deadline = time.monotonic() + 3
    ok_after = None
    while time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(1)
        try:
            s.connect((addr, port))
            ok_after = (time.time() - t0) * 1000
            break
        except OSError:
            time.sleep(0.0005)
        finally:
            s.close()
    out.append({"port": port, "t0_ms": t0 * 1000, "first": first, "retry_ok_ms": ok_after})
print(json.dumps(out))
