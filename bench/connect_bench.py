#!/usr/bin/env python3
"""CONNECT egress benchmark (root): tunnel setup latency and bulk
throughput through the operation's CONNECT listener in
gensee-httpmediatord, beside tinyproxy and squid as plain CONNECT proxies
to the same upstream, and direct, all from inside one `gensee run
--sandbox linux --allow-net bulk.example.com,tcp,9000` operation in the
same run. Run by bench/run; also on its own:

usage: bench/connect_bench.py [BUILD_DIR]

Topology (a network namespace made here; documentation addresses on its
lo, as tests/integration/test_dns.py's local_setup): boundaryd, the
mediator, the agent (the operation), the test resolver dnsauth.py
(192.0.2.53), the upstream (this file's --serve: a TCP source/sink on
192.0.2.10:9000), tinyproxy (192.0.2.30:3129) and squid (192.0.2.30:3130).
The agent is this file's --agent, run by gensee run as the test user:
  gensee     CONNECT bulk.example.com:9000 to $HTTPS_PROXY (the operation's
             listener on 127.78.X.Y:3128 with its token): the mediator
             resolves the name, boundaryd decides (mediator.connect,
             evidence), the mediator connects to the pinned address;
  tinyproxy, squid  CONNECT bulk.example.com:9000 (the operation's envelope
             grants exactly their listeners);
  direct     the agent resolves bulk.example.com through the operation's
             DNS proxy (redirected port 53; the proxy asks dnsauth.py and
             boundaryd leases 192.0.2.10 tcp 9000 in the kernel), then
             connects to the answered address through its table.
All three proxies resolve the name from the same hosts file (the
mediator's --hosts-file, squid's hosts_file, tinyproxy's /etc/hosts in a
private mount namespace), so no proxy waits on the test resolver.

Figures: setup = CONNECT request sent (TCP connect included) to the
proxy's "200" head read, SETUPS times each, median and p99 (direct: TCP
connect to established); each tunnel is then checked with a one-byte
round trip through it (not timed). Bulk = MB/s (10^6 bytes) of BULK bytes
downloaded and uploaded through one tunnel, and downloaded through
PARALLEL tunnels at once (PARALLEL_BYTES each, aggregate MB/s), median of
REPS rounds; the rounds interleave the targets. Any refused tunnel, short
transfer or wrong count fails the whole bench: no figure is reported for a
failed transfer. The client and the upstream are Python (large buffers,
recv_into; the GIL is released in socket calls): the direct figure is
bounded by them, the proxied ones mostly by the proxies.

Peers (tinyproxy, squid) are Debian packages, installed with apt-get if
missing (services kept from starting), or skipped with a message. Never run
by the test suites; no assertion on time. Results go to stdout, into
bench/run's results (connect_egress) and, run alone, to
bench/results/connect.json.
"""

import base64
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debpkg  # noqa: E402

NAME = "bulk.example.com"
UPSTREAM = ("192.0.2.10", 9000)
PEER_ADDR = "192.0.2.30"
RESOLVER = "192.0.2.53"
SETUPS = 300
BULK = 64 << 20
PARALLEL = 8
PARALLEL_BYTES = 16 << 20
REPS = 3
CHUNK = 1 << 20
IO_TIMEOUT = 20

# -- the upstream: a TCP source and sink (runs in the bench's namespace) --


def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return bytes(b)


def serve_conn(c, block):
    """Commands until EOF (at most 64): b"P" -> b"p"; b"D" + N (u64) -> N
    bytes; b"U" + N then N bytes -> b"K" + count (u64)."""
    c.settimeout(60)
    buf = bytearray(CHUNK)
    try:
        for _ in range(64):
            cmd = c.recv(1)
            if not cmd:
                return
            if cmd == b"P":
                c.sendall(b"p")
            elif cmd == b"D":
                n = struct.unpack("!Q", recv_exact(c, 8))[0]
                mv = memoryview(block)
                while n > 0:
                    k = min(n, CHUNK)
                    c.sendall(mv[:k])
                    n -= k
            elif cmd == b"U":
                n = struct.unpack("!Q", recv_exact(c, 8))[0]
                got = 0
                while got < n:
                    k = c.recv_into(buf, min(CHUNK, n - got))
                    if k == 0:
                        return
                    got += k
                c.sendall(b"K" + struct.pack("!Q", got))
            else:
                return
    except (OSError, EOFError):
        pass
    finally:
        c.close()


def serve(addr, port):
    block = os.urandom(CHUNK)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1024)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve_conn, args=(c, block), daemon=True).start()


# -- the agent: runs inside the operation --


class Refused(Exception):
    pass


def open_tunnel(t):
    """A connected socket through target t (a dict), and the seconds from
    the start to the tunnel being usable (the 200 head read; direct: TCP
    established). Raises Refused for anything but a 200."""
    s = socket.socket()
    s.settimeout(IO_TIMEOUT)
    t0 = time.perf_counter()
    try:
        if t["kind"] == "direct":
            s.connect((t["addr"], t["port"]))
            return s, time.perf_counter() - t0
        s.connect((t["proxy_addr"], t["proxy_port"]))
        head = "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n" % (NAME, UPSTREAM[1], NAME, UPSTREAM[1])
        if t.get("auth"):
            head += "Proxy-Authorization: Basic %s\r\n" % base64.b64encode(
                t["auth"].encode()).decode()
        s.sendall((head + "\r\n").encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            c = s.recv(4096)
            if not c:
                raise Refused("%s: closed before a reply head (%r)" % (t["name"], reply[:200]))
            reply += c
            if len(reply) > 16384:
                raise Refused("%s: reply head too long" % t["name"])
        dt = time.perf_counter() - t0
        line = reply.split(b"\r\n", 1)[0].decode(errors="replace")
        parts = line.split()
        if len(parts) < 2 or parts[1] != "200":
            raise Refused("%s: tunnel refused: %r" % (t["name"], reply[:300]))
        if not reply.endswith(b"\r\n\r\n"):
            raise Refused("%s: bytes after the reply head" % t["name"])
        return s, dt
    except Exception:
        s.close()
        raise


def ping(s, name):
    s.sendall(b"P")
    if recv_exact(s, 1) != b"p":
        raise Refused("%s: the tunnel does not carry bytes" % name)


def download(s, n, buf):
    s.sendall(b"D" + struct.pack("!Q", n))
    got = 0
    while got < n:
        k = s.recv_into(buf, min(len(buf), n - got))
        if k == 0:
            raise Refused("short download: %d of %d bytes" % (got, n))
        got += k


def upload(s, n, block):
    s.sendall(b"U" + struct.pack("!Q", n))
    mv = memoryview(block)
    left = n
    while left > 0:
        k = min(left, len(block))
        s.sendall(mv[:k])
        left -= k
    r = recv_exact(s, 9)
    if r[:1] != b"K" or struct.unpack("!Q", r[1:])[0] != n:
        raise Refused("upload: the upstream counted %r of %d" % (r, n))


def measure_setup(t):
    times = []
    for _ in range(SETUPS):
        s, dt = open_tunnel(t)
        try:
            ping(s, t["name"])
        finally:
            s.close()
        times.append(dt * 1000)
    times.sort()
    return {"count": len(times), "median_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3)}


def measure_bulk(t, block, buf):
    out = {}
    s, _ = open_tunnel(t)
    try:
        ping(s, t["name"])
        t0 = time.perf_counter()
        download(s, BULK, buf)
        out["down"] = BULK / (time.perf_counter() - t0) / 1e6
        t0 = time.perf_counter()
        upload(s, BULK, block)
        out["up"] = BULK / (time.perf_counter() - t0) / 1e6
    finally:
        s.close()
    socks = []
    try:
        for _ in range(PARALLEL):
            s, _ = open_tunnel(t)
            socks.append(s)
            ping(s, t["name"])
        errors = []

        def one(s):
            try:
                download(s, PARALLEL_BYTES, bytearray(CHUNK))
            except Exception as e:  # reported below: the figure is not
                errors.append(repr(e))
        threads = [threading.Thread(target=one, args=(s,)) for s in socks]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join(IO_TIMEOUT * 4)
        dt = time.perf_counter() - t0
        if errors or any(th.is_alive() for th in threads):
            raise Refused("%s: parallel download failed: %s" % (t["name"], errors or "timeout"))
        out["parallel_down"] = PARALLEL * PARALLEL_BYTES / dt / 1e6
    finally:
        for s in socks:
            s.close()
    return out


def resolve_through_operation():
    """The agent's lookup as any resolver client makes it: one A query to
    port 53 of the resolver (the operation's table redirects it to its DNS
    proxy, which leases the answer before replying)."""
    q = struct.pack(">HHHHHH", os.getpid() & 0xFFFF, 0x0100, 1, 0, 0, 0)
    for label in NAME.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.connect((RESOLVER, 53))
    s.send(q)
    msg = s.recv(4096)
    s.close()
    rcode, an = struct.unpack(">H", msg[2:4])[0] & 0xF, struct.unpack(">H", msg[6:8])[0]
    off = len(q)  # the reply repeats the question
    for _ in range(an):
        while msg[off] and msg[off] & 0xC0 != 0xC0:  # the owner name: labels ...
            off += 1 + msg[off]
        off += 2 if msg[off] & 0xC0 == 0xC0 else 1   # ... ending in a pointer or a zero
        t, _, _, ln = struct.unpack(">HHIH", msg[off:off + 10])
        if t == 1 and ln == 4:
            return socket.inet_ntoa(msg[off + 10:off + 14])
        off += 10 + ln
    raise Refused("direct: %s did not resolve through the DNS proxy (rcode %d)" % (NAME, rcode))


def agent(spec):
    url = os.environ.get("HTTPS_PROXY", "")
    if not url.startswith("http://gensee:"):
        raise SystemExit("no CONNECT egress in HTTPS_PROXY: %r" % url)
    userinfo, hostport = url[len("http://"):].rstrip("/").rsplit("@", 1)
    host, port = hostport.rsplit(":", 1)
    targets = [{"name": "direct", "kind": "direct", "addr": resolve_through_operation(),
                "port": UPSTREAM[1]},
               {"name": "gensee", "kind": "proxy", "proxy_addr": host, "proxy_port": int(port),
                "auth": userinfo}]
    for name, p in spec["peers"].items():
        targets.append({"name": name, "kind": "proxy", "proxy_addr": PEER_ADDR, "proxy_port": p})
    block = os.urandom(CHUNK)
    buf = bytearray(CHUNK)
    res = {t["name"]: {"setup": None, "bulk": []} for t in targets}
    try:
        for t in targets:
            res[t["name"]]["setup"] = measure_setup(t)
        for _ in range(REPS):
            for t in targets:
                res[t["name"]]["bulk"].append(measure_bulk(t, block, buf))
    except (Refused, OSError, EOFError) as e:
        print(json.dumps({"error": str(e)}), flush=True)
        sys.exit(1)
    for r in res.values():
        r["bulk"] = {k: round(statistics.median(b[k] for b in r["bulk"]), 1)
                     for k in ("down", "up", "parallel_down")}
    print(json.dumps({"ok": True, "results": res}), flush=True)


# -- the bench (root) --

which = debpkg.which


PEERS = {"tinyproxy": "tinyproxy", "squid": "squid"}


def install_peers():
    debpkg.install(PEERS)


def wait_port(env, addr, port, what, proc):
    code = ("import socket,sys\ns=socket.socket()\ns.settimeout(1)\n"
            "sys.exit(0 if s.connect_ex((%r,%d))==0 else 1)\n" % (addr, port))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("%s exited %d" % (what, proc.returncode))
        if env.ns_run(env.netns, ["/usr/bin/python3", "-c", code], check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise SystemExit("%s did not listen on %s:%d" % (what, addr, port))


def start_tinyproxy(env, d, hosts):
    conf = os.path.join(d, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write('Port 3129\nListen %s\nTimeout 60\nMaxClients 256\nAllow 192.0.2.0/24\n'
                'LogLevel Critical\nUser nobody\nGroup nogroup\nDisableViaHeader Yes\n'
                'PidFile "%s/tinyproxy.pid"\n' % (PEER_ADDR, d))
    os.chmod(conf, 0o644)
    # Its resolver (getaddrinfo) reads /etc/hosts: the bench's, in a mount
    # namespace of its own, so the host's is never touched.
    p = subprocess.Popen(env.ns_prefix() + [
        "unshare", "-m", "--propagation", "private", "sh", "-c",
        'mount --bind "$1" /etc/hosts && shift && exec "$@"', "sh", hosts,
        which("tinyproxy"), "-d", "-c", conf],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.children.append(p)
    wait_port(env, PEER_ADDR, 3129, "tinyproxy", p)


def start_squid(env, d, hosts):
    import pwd
    sd = os.path.join(d, "squid")
    os.makedirs(sd, exist_ok=True)
    pw = pwd.getpwnam("proxy")
    os.chown(sd, pw.pw_uid, pw.pw_gid)
    conf = os.path.join(sd, "squid.conf")
    with open(conf, "w") as f:
        f.write("""http_port %(a)s:3130
acl client src 192.0.2.0/24
http_access allow client
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_log %(d)s/cache.log
pid_filename %(d)s/squid.pid
coredump_dir %(d)s
cache_effective_user proxy
hosts_file %(h)s
dns_nameservers %(r)s
via off
forwarded_for delete
shutdown_lifetime 1 seconds
""" % {"a": PEER_ADDR, "d": sd, "h": hosts, "r": RESOLVER})
    p = subprocess.Popen(env.ns_prefix() + [which("squid"), "-N", "-f", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.children.append(p)
    wait_port(env, PEER_ADDR, 3130, "squid", p)


def setup(env):
    import tempfile
    import test_mediator as tm
    env.use_netns()
    ns = env.netns
    for a in (UPSTREAM[0], PEER_ADDR, RESOLVER):
        env.ns_run(ns, ["ip", "addr", "add", a + "/32", "dev", "lo"])
    tm.ensure_mediator_user()
    d = tempfile.mkdtemp(prefix="gensee-bench-connect.")
    env.cleanup_dirs.append(d)
    os.chmod(d, 0o755)
    zone = os.path.join(d, "zone.json")
    with open(zone, "w") as f:
        json.dump({NAME: [["A", UPSTREAM[0], 300]]}, f)
    dnslog = os.path.join(d, "dns.jsonl")
    open(dnslog, "w").close()
    p = subprocess.Popen(env.ns_prefix(ns) + ["/usr/bin/python3", env.tool("dnsauth.py"),
                                              dnslog, zone, RESOLVER],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.children.append(p)
    if p.stdout.readline().strip() != "ready":
        raise SystemExit("dnsauth did not start")
    me = os.path.abspath(__file__)
    tool = os.path.join(env.bindir, "connect_bench.py")
    shutil.copy(me, tool)
    os.chmod(tool, 0o755)
    up = subprocess.Popen(env.ns_prefix(ns) + ["/usr/bin/python3", tool, "--serve", UPSTREAM[0],
                                               str(UPSTREAM[1])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.children.append(up)
    if up.stdout.readline().strip() != "ready":
        raise SystemExit("the upstream did not start: %s" % up.stderr.read())
    env.start(args=["--mediator-user", tm.MEDIATOR_USER])
    resolv = os.path.join(d, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver %s\n" % RESOLVER)
    hosts = os.path.join(d, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n%s %s\n" % (UPSTREAM[0], NAME))
    os.chmod(hosts, 0o644)
    medlog = os.path.join(d, "mediator.log")
    env.logs.append(medlog)
    med = subprocess.Popen(env.ns_prefix(ns) + [tm.MEDIATORD, "--runtime-dir", env.runtime,
                                                "--user", tm.MEDIATOR_USER, "--hosts-file", hosts,
                                                "--resolv-conf", resolv,
                                                "--ca-file", tm.make_test_ca(d)[0]],
                           stdout=open(medlog, "a"), stderr=subprocess.STDOUT)
    env.children.append(med)
    env.wait_for("the mediator", lambda: "confined as" in open(medlog).read())
    peers = {}
    if which("tinyproxy"):
        start_tinyproxy(env, d, hosts)
        peers["tinyproxy"] = 3129
    else:
        print("tinyproxy not available: its figures are skipped")
    if which("squid"):
        start_squid(env, d, hosts)
        peers["squid"] = 3130
    else:
        print("squid not available: its figures are skipped")
    return tool, peers, medlog


def run_bench(env):
    tool, peers, medlog = setup(env)
    allow = ["--allow-net", "%s,tcp,%d" % (NAME, UPSTREAM[1])]
    for port in peers.values():
        allow += ["--allow-net", "%s,tcp,%d" % (PEER_ADDR, port)]
    p = env.gensee_bg("run", "--sandbox", "linux", *allow, "--", "/usr/bin/python3", tool,
                      "--agent", json.dumps({"peers": peers}))
    try:
        out, err = p.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit("connect bench: the agent did not finish in 900 s")
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines or not lines[-1].get("ok"):
        raise SystemExit("connect bench FAILED (no figures): rc %d %s\n%s\nmediator log:\n%s" % (
            p.returncode, lines[-1] if lines else out[-500:], err[-2000:],
            open(medlog).read()[-2000:]))
    # The gensee figures are the real egress path's: boundaryd decided and
    # recorded every tunnel, and the direct address came from a DNS lease.
    want = SETUPS + REPS * (1 + PARALLEL)
    root = os.path.join(env.state, "network-operations")
    ev = []
    for opid in os.listdir(root):
        path = os.path.join(root, opid, "effects.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                ev += [json.loads(l) for l in f if l.strip()]
    allowed = [e for e in ev if e.get("type") == "connect_decision" and
               e.get("decision") == "allow" and e.get("host") == NAME and
               e.get("pinned_address") == UPSTREAM[0]]
    leased = [e for e in ev if e.get("type") == "dns_decision" and e.get("qname") == NAME and
              e.get("reason") == "allowed"]
    if len(allowed) != want or not leased:
        raise SystemExit("connect bench: evidence has %d allowed tunnels (want %d) and %d DNS "
                         "leases (want 1 or more): not the egress path measured" % (
                             len(allowed), want, len(leased)))
    return lines[-1]["results"]


def report(res):
    g = res["gensee"]
    print("CONNECT egress, from inside one gensee run operation (setup: %d tunnels; bulk: "
          "median of %d, %d MiB one tunnel, %d x %d MiB parallel):" % (
              SETUPS, REPS, BULK >> 20, PARALLEL, PARALLEL_BYTES >> 20))
    for name, r in res.items():
        s, b = r["setup"], r["bulk"]
        print("  %-9s setup median %7.3f ms  p99 %7.3f ms   down %7.1f MB/s  up %7.1f MB/s  "
              "%dx down %7.1f MB/s" % (name, s["median_ms"], s["p99_ms"], b["down"], b["up"],
                                       PARALLEL, b["parallel_down"]))
    ratios = {}
    print("  ratios gensee/peer: setup median, p99 (lower is better); down, up, parallel "
          "(higher is better)")
    for name, r in res.items():
        if name == "gensee":
            continue
        q = {"setup_median": g["setup"]["median_ms"] / r["setup"]["median_ms"],
             "setup_p99": g["setup"]["p99_ms"] / r["setup"]["p99_ms"],
             "down": g["bulk"]["down"] / r["bulk"]["down"],
             "up": g["bulk"]["up"] / r["bulk"]["up"],
             "parallel_down": g["bulk"]["parallel_down"] / r["bulk"]["parallel_down"]}
        ratios[name] = {k: round(v, 2) for k, v in q.items()}
        print("    vs %-9s x%.2f  x%.2f   x%.2f  x%.2f  x%.2f" % (
            name, q["setup_median"], q["setup_p99"], q["down"], q["up"], q["parallel_down"]))
    return ratios


def main(Env, build, top, results):
    install_peers()
    with Env() as env:
        res = run_bench(env)
    ratios = report(res)
    results["connect_egress"] = {"setups": SETUPS, "bulk_bytes": BULK, "parallel": PARALLEL,
                                 "parallel_bytes": PARALLEL_BYTES, "reps": REPS,
                                 "figures": res, "ratios_gensee_over_peer": ratios}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--agent":
        agent(json.loads(sys.argv[2]))
    else:
        if os.geteuid() != 0:
            raise SystemExit("connect_bench needs root (namespaces, boundaryd)")
        _top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        _build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(_top, "build"))
        os.environ["GENSEE_BUILD_ROOT"] = _build
        sys.path.insert(0, os.path.join(_top, "tests", "integration"))
        from harness import Env as _Env
        _results = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        main(_Env, _build, _top, _results)
        os.makedirs(os.path.join(_top, "bench", "results"), exist_ok=True)
        with open(os.path.join(_top, "bench", "results", "connect.json"), "w") as f:
            json.dump(_results, f, indent=2)
