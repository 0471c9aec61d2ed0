"""A DNS client for tests. `dnsclient.py [--tcp] [--source ADDR] [--port N] SERVER NAME [TYPE]`
prints one JSON object {"rcode", "tc", "answers": [[name, type, ttl, data]]}
or {"error": errno name or "timeout"}.

`dnsclient.py --agent SERVER PORT NAME...` resolves each name and connects
to its first address (what an agent does); prints one JSON object.

`dnsclient.py --bench N SERVER PORT NAME [SOURCE]` times N lookups each
followed by a connect (first-connect latency), for bench/dns_bench.py.

`dnsclient.py --connect-agent LINGER HOST:PORT...` tries each through
$HTTPS_PROXY (CONNECT, then reads "ok" from netserve.py) and once with a
wrong token; `dnsclient.py --connect-once URL HOST PORT` tries one.

`dnsclient.py --hold ADDR PORT MAXSECONDS` connects to a netserve.py TCP
port and sends one byte every 0.2 s until a send or reply fails or
MAXSECONDS pass; prints {"connected": bool, "held_seconds": s, "cut": bool}."""

import errno
import json
import os
import socket
import struct
import sys
import time

TYPES = {"A": 1, "CNAME": 5, "AAAA": 28, "TXT": 16}
NAMES = {v: k for k, v in TYPES.items()}


def read_name(msg, off):
    labels, end, hops = [], None, 0
    while True:
        ln = msg[off]
        if ln & 0xC0 == 0xC0:
            if end is None:
                end = off + 2
            off = ((ln & 0x3F) << 8) | msg[off + 1]
            hops += 1
            if hops > 20:
                raise ValueError("loop")
            continue
        if ln == 0:
            return ".".join(labels), (end if end is not None else off + 1)
        labels.append(msg[off + 1:off + 1 + ln].decode())
        off += 1 + ln


def query(server, name, qtype, tcp, source, port):
    q = struct.pack(">HHHHHH", os.getpid() & 0xFFFF, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", TYPES[qtype], 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    s.settimeout(3)
    if source:
        s.bind((source, 0))
    s.connect((server, port))
    if tcp:
        s.sendall(struct.pack(">H", len(q)) + q)
        hdr = s.recv(2)
        ln = struct.unpack(">H", hdr)[0]
        msg = b""
        while len(msg) < ln:
            chunk = s.recv(ln - len(msg))
            if not chunk:
                break
            msg += chunk
    else:
        s.send(q)
        msg = s.recv(4096)
    s.close()
    _, flags, qd, an, _, _ = struct.unpack(">HHHHHH", msg[:12])
    off = 12
    for _ in range(qd):
        _, off = read_name(msg, off)
        off += 4
    answers = []
    for _ in range(an):
        n, off = read_name(msg, off)
        t, _, ttl, rdlen = struct.unpack(">HHIH", msg[off:off + 10])
        off += 10
        rd = msg[off:off + rdlen]
        if t == 1:
            data = socket.inet_ntop(socket.AF_INET, rd)
        elif t == 28:
            data = socket.inet_ntop(socket.AF_INET6, rd)
        elif t == 5:
            data = read_name(msg, off)[0]
        else:
            data = rd.hex()
        off += rdlen
        answers.append([n, NAMES.get(t, t), ttl, data])
    return {"rcode": flags & 0xF, "tc": bool(flags & 0x0200), "answers": answers}


def hold(addr, port, maxs):
    start = time.monotonic()
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((addr, port))
        if s.recv(2) != b"ok":
            return {"connected": False, "held_seconds": 0, "cut": True}
    except OSError:
        return {"connected": False, "held_seconds": 0, "cut": True}
    for _ in range(int(maxs / 0.2) + 1):
        if time.monotonic() - start > maxs:
            break
        try:
            s.send(b"x")
            if s.recv(2) != b"ok":
                raise OSError("bad reply")
        except OSError:
            return {"connected": True, "held_seconds": round(time.monotonic() - start, 2),
                    "cut": True}
        time.sleep(0.2)
    return {"connected": True, "held_seconds": round(time.monotonic() - start, 2), "cut": False}


def agent(server, port, names):
    """For each name: a UDP query to SERVER:53, then a TCP connect to the
    first A address on PORT; one JSON object {name: {"rcode", "addrs",
    "connect"}}."""
    out = {}
    for n in names:
        try:
            r = query(server, n, "A", False, None, 53)
        except socket.timeout:
            out[n] = {"error": "timeout"}
            continue
        except OSError as e:
            out[n] = {"error": errno.errorcode.get(e.errno, str(e))}
            continue
        addrs = [x[3] for x in r["answers"] if x[1] == "A"]
        res = {"rcode": r["rcode"], "addrs": addrs, "connect": None}
        if addrs:
            s = socket.socket()
            s.settimeout(3)
            try:
                s.connect((addrs[0], port))
                res["connect"] = "ok" if s.recv(2) == b"ok" else "bad_reply"
            except socket.timeout:
                res["connect"] = "timeout"
            except OSError as e:
                res["connect"] = errno.errorcode.get(e.errno, str(e))
            finally:
                s.close()
        out[n] = res
    return out


def bench(n, server, port, name, source):
    """N times: resolve name (UDP) and connect to its first address; the
    wall time of each pair in ms, as {"n", "median_ms", "p90_ms", "failed"}."""
    times, failed = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            r = query(server, name, "A", False, source, 53)
            addrs = [x[3] for x in r["answers"] if x[1] == "A"]
            s = socket.socket()
            s.settimeout(3)
            if source:
                s.bind((source, 0))
            s.connect((addrs[0], port))
            ok = s.recv(2) == b"ok"
            s.close()
        except (OSError, IndexError):
            ok = False
        if not ok:
            failed += 1
            continue
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"n": n, "failed": failed,
            "median_ms": round(times[len(times) // 2], 3) if times else None,
            "p90_ms": round(times[int(len(times) * 0.9)], 3) if times else None}


def connect_once(url, host, port, token=None):
    """One CONNECT through the proxy of url (http://user:pass@addr:port);
    {"status", "refusal", "data"} or {"error"}."""
    import base64
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    cred = "%s:%s" % (u.username, token if token is not None else u.password)
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((u.hostname, u.port))
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\nProxy-Authorization: Basic %s"
                   "\r\n\r\n" % (host, port, host, port,
                                   base64.b64encode(cred.encode()).decode())).encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            c = s.recv(1)
            if not c:
                break
            head += c
        lines = head.decode(errors="replace").split("\r\n")
        if not lines[0].startswith("HTTP/1."):
            return {"error": "no_reply", "head": head.decode(errors="replace")}
        out = {"status": int(lines[0].split()[1]), "refusal": None, "data": None}
        for l in lines[1:]:
            if l.lower().startswith("x-gensee-refusal:"):
                out["refusal"] = l.split(":", 1)[1].strip()
        if out["status"] == 200:
            out["data"] = s.recv(2).decode(errors="replace")
        return out
    except socket.timeout:
        return {"error": "timeout"}
    except OSError as e:
        return {"error": errno.errorcode.get(e.errno, str(e))}
    finally:
        s.close()


def connect_agent(cases, linger):
    """Inside the operation: each HOST:PORT through $HTTPS_PROXY, and one
    with a wrong token; prints one JSON object, then stays `linger` seconds
    so the operation is still running while a test probes from outside."""
    url = os.environ.get("HTTPS_PROXY")
    out = {"proxy_url": url, "results": {}}
    if url:
        for c in cases:
            h, p = c.rsplit(":", 1)
            out["results"][c] = connect_once(url, h, int(p))
        h, p = cases[0].rsplit(":", 1)
        out["results"]["bad_token"] = connect_once(url, h, int(p), token="0" * 64)
    print(json.dumps(out), flush=True)
    time.sleep(linger)


def main():
    a = sys.argv[1:]
    if a[0] == "--connect-agent":
        connect_agent(a[2:], float(a[1]))
        return
    if a[0] == "--connect-once":
        print(json.dumps(connect_once(a[1], a[2], int(a[3]))))
        return
    if a[0] == "--bench":
        print(json.dumps(bench(int(a[1]), a[2], int(a[3]), a[4], a[5] if len(a) > 5 else None)))
        return
    if a[0] == "--agent":
        print(json.dumps(agent(a[1], int(a[2]), a[3:])))
        return
    if a[0] == "--hold":
        print(json.dumps(hold(a[1], int(a[2]), float(a[3]))))
        return
    tcp = source = None
    port = 53
    while a[0].startswith("--"):
        if a[0] == "--tcp":
            tcp = True
            a = a[1:]
        elif a[0] == "--port":
            port = int(a[1])
            a = a[2:]
        elif a[0] == "--source":
            source = a[1]
            a = a[2:]
    try:
        r = query(a[0], a[1], a[2] if len(a) > 2 else "A", tcp, source, port)
    except socket.timeout:
        r = {"error": "timeout"}
    except OSError as e:
        r = {"error": errno.errorcode.get(e.errno, str(e))}
    print(json.dumps(r))


main()
