"""Connection probes: `netprobe.py proto,addr,port ...` prints one JSON
object mapping each target to "ok" or the errno name of the failure.

`netprobe.py --loop STOPFILE MAXSECONDS allowed denied` alternates the two
targets until STOPFILE exists (bounded in time and count) and prints counts.

`netprobe.py --lease GENSEE TARGET TTL` probes, submits a capability fault
for its own pid, probes again, opens a TCP connection it holds across the
TTL, waits past the lease TTL and probes once more, and sends on the held
connection again.
"""

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def probe(spec, timeout=5):
    proto, addr, port = spec.split(",")
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
    s.settimeout(timeout)

    def talk():
        s.connect((addr, int(port)))
        if proto == "udp":
            s.send(b"x")
        return "ok" if s.recv(2) == b"ok" else "bad_reply"
    try:
        return outcome(talk)
    finally:
        s.close()


def outcome(fn):
    """fn's result, or the errno name of the socket error it raised."""
    try:
        return fn()
    except socket.timeout:
        return "ETIMEDOUT"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def exchange(s, first=False):
    """On a held TCP connection: the greeting (first), then one byte out and b"ok" back."""
    def talk():
        if first and s.recv(2) != b"ok":
            return "bad_reply"
        s.sendall(b"x")
        return "ok" if s.recv(2) == b"ok" else "closed"
    return outcome(talk)


def start_ticks():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])


def main():
    if sys.argv[1] == "--loop":
        stop, maxs, allowed, denied = sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
        out = {"allowed_ok": 0, "allowed_failed": [], "denied_ok": 0, "denied_refused": 0, "rounds": 0}
        t_end = time.monotonic() + maxs
        while not os.path.exists(stop) and time.monotonic() < t_end and out["rounds"] < 200000:
            r = probe(allowed)
            if r == "ok":
                out["allowed_ok"] += 1
            else:
                out["allowed_failed"].append(r)
            if probe(denied) == "ok":
                out["denied_ok"] += 1
            else:
                out["denied_refused"] += 1
            out["rounds"] += 1
        out["allowed_failed"] = out["allowed_failed"][:20]
        print(json.dumps(out))
        return
    if sys.argv[1] == "--retry":
        # Probe, give the trace sensor time to turn the reject into a fault
        # (and maybe a lease), probe again.
        target, wait = sys.argv[2], float(sys.argv[3])
        first = probe(target)
        time.sleep(wait)
        print(json.dumps({"first": first, "second": probe(target)}))
        return
    if sys.argv[1] == "--lease":
        gensee, target, ttl = sys.argv[2], sys.argv[3], int(sys.argv[4])
        proto, addr, port = target.split(",")
        out = {"before": probe(target)}
        fault = {"schema_version": 1,
                 "subject": {"pid": os.getpid(), "start_time_ticks": start_ticks()},
                 "capability": {"kind": "network.connect", "destination": addr,
                                "protocol": proto, "port": int(port)},
                 "requested_ttl_seconds": ttl, "source": "explicit"}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(fault, f)
        # Inside the sandbox ptrace is refused, and LeakSanitizer (in a
        # sanitized build) needs it: leak checking is for the outer CLI.
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        r = subprocess.run([gensee, "run", "fault", "--operation", os.environ["GENSEE_OPERATION_ID"],
                            "--fault", f.name], capture_output=True, text=True, env=env)
        os.unlink(f.name)
        out["fault_rc"] = r.returncode
        out["fault"] = json.loads(r.stdout) if r.stdout.strip() else r.stderr
        out["after_lease"] = probe(target)
        held = None
        if proto == "tcp":
            try:
                held = socket.create_connection((addr, int(port)), timeout=5)
            except OSError as e:
                out["held_open"] = errno.errorcode.get(e.errno, str(e.errno))
        if held is not None:
            out["held_open"] = exchange(held, first=True)
        time.sleep(ttl + 1.5)
        out["after_ttl"] = probe(target)
        if held is not None:
            # No conntrack shortcut: the revoked lease stops the flow it let in.
            out["held_after_ttl"] = exchange(held)
            held.close()
        print(json.dumps(out))
        return
    print(json.dumps({t: probe(t) for t in sys.argv[1:]}))


main()
