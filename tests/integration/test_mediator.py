#!/usr/bin/env python3
"""gensee-httpmediatord: a real GET through a confined mediator that holds no
authority (boundaryd decides every request over mediator.sock).

Topology, all in namespaces this case creates (documentation addresses):
  ctr  198.51.100.12 (the proxy.client_address) and 198.51.100.13 (another client)
  gw   198.51.100.1 (mediator listens on :3128), 192.0.2.1; boundaryd and the
       mediator run here; a listener on 127.0.0.1:8080 (restricted, granted)
  ext  192.0.2.10:8080 (granted upstream), 192.0.2.20:8080 (outside the grants),
       169.254.169.254:8080 (metadata range: restricted, yet granted exactly)
Names come from a hosts file the mediator reads before it confines itself.
Every listener logs each connection, so "refused" is proven by the listener
having seen nothing, not by a timeout.
"""

import json
import os
import pwd
import select
import signal
import subprocess
import tempfile
import time

import harness
from harness import BUILD, Failure, check, main

MEDIATOR_USER = "gensee-mediator"
MEDIATORD = os.path.join(BUILD, "daemons", "httpmediatord", "gensee-httpmediatord")
OP = "op_med_test"
HOSTS = """192.0.2.10 up.test
192.0.2.20 other.test
169.254.169.254 meta.test
127.0.0.1 loop.test
192.0.2.10 mixed.test
127.0.0.1 mixed.test
192.0.2.10 secure.test
192.0.2.10 wrong.test
"""


def make_test_ca(d):
    """A test CA and a server certificate for secure.test (and 192.0.2.10),
    made with the openssl CLI; returns (ca, cert, key)."""
    ca, cakey = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    cert, key, csr = os.path.join(d, "srv.pem"), os.path.join(d, "srv.key"), os.path.join(d, "srv.csr")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:secure.test,IP:192.0.2.10\n")
    run = lambda *a: subprocess.run(["openssl"] + list(a), check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cakey, "-out", ca,
        "-days", "2", "-subj", "/CN=gensee-it test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=secure.test")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey, "-CAcreateserial", "-out", cert,
        "-days", "2", "-extfile", ext)
    for p in (ca, cert, key):
        os.chmod(p, 0o644)
    return ca, cert, key


def ensure_mediator_user():
    """The mediator's system user, created like the harness's gensee-test and,
    like it, left in place for later runs."""
    try:
        pw = pwd.getpwnam(MEDIATOR_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", MEDIATOR_USER], check=True)
        pw = pwd.getpwnam(MEDIATOR_USER)
    return pw.pw_uid


class Topo:
    pass


GRANTS = [{"destination": "198.51.100.1", "protocol": "tcp", "ports": [3128]},
          {"destination": "192.0.2.10", "protocol": "tcp", "ports": [8080, 8443]},
          {"destination": "169.254.169.254", "protocol": "tcp", "ports": [8080]},
          {"destination": "127.0.0.1", "protocol": "tcp", "ports": [8080]}]


def setup(env, start_mediator=True, proxy_extra=None, selftest=(), grants=None, before_mediator=None,
          policy_extra=None, grants_extra=()):
    t = Topo()
    t.uid = ensure_mediator_user()
    ctr, gw, ext = env.add_netns("ctr"), env.add_netns("gw"), env.add_netns("ext")
    t.ctr, t.gw, t.ext = ctr, gw, ext
    sh = lambda ns, *a: env.ns_run(ns, ["ip"] + list(a))
    subprocess.run(["ip", "link", "add", "mc0", "netns", ctr, "type", "veth", "peer", "name",
                    "mg0", "netns", gw], check=True)
    subprocess.run(["ip", "link", "add", "me0", "netns", ext, "type", "veth", "peer", "name",
                    "mg1", "netns", gw], check=True)
    sh(ctr, "addr", "add", "198.51.100.12/24", "dev", "mc0")
    sh(ctr, "addr", "add", "198.51.100.13/24", "dev", "mc0")
    sh(gw, "addr", "add", "198.51.100.1/24", "dev", "mg0")
    sh(gw, "addr", "add", "192.0.2.1/24", "dev", "mg1")
    sh(ext, "addr", "add", "192.0.2.10/24", "dev", "me0")
    sh(ext, "addr", "add", "192.0.2.20/24", "dev", "me0")
    sh(ext, "addr", "add", "169.254.169.254/32", "dev", "lo")
    for ns, dev in ((ctr, "mc0"), (gw, "mg0"), (gw, "mg1"), (ext, "me0")):
        sh(ns, "link", "set", dev, "up")
    sh(gw, "route", "add", "169.254.169.254/32", "via", "192.0.2.10")
    sh(ext, "route", "add", "default", "via", "192.0.2.1")

    t.dir = tempfile.mkdtemp(prefix="gensee-it-med.")
    env.cleanup_dirs.append(t.dir)
    os.chmod(t.dir, 0o755)
    t.uplog = os.path.join(t.dir, "upstream.jsonl")
    t.gwlog = os.path.join(t.dir, "gw-loopback.jsonl")
    for p in (t.uplog, t.gwlog):
        open(p, "w").close()
    t.ca, cert, key = make_test_ca(t.dir)
    env.netns = gw
    env.start(args=["--mediator-user", MEDIATOR_USER])
    httpserve = env.tool("httpserve.py")
    for ns, log, targets in ((ext, t.uplog, ["192.0.2.10,8080", "192.0.2.20,8080",
                                              "169.254.169.254,8080",
                                              "192.0.2.10,8443,%s,%s" % (cert, key)]),
                             (gw, t.gwlog, ["127.0.0.1,8080"])):
        p = subprocess.Popen(env.ns_prefix(ns) + ["/usr/bin/python3", httpserve, log] + targets,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        env.children.append(p)
        check(p.stdout.readline().strip() == "ready", "httpserve did not start")

    proxy = {"listen": "198.51.100.1:3128", "client_address": "198.51.100.12",
             "max_request_bytes": 65536, "max_response_bytes": 1048576,
             "connect_timeout_seconds": 5, "io_timeout_seconds": 10}
    proxy.update(proxy_extra or {})
    cfg = os.path.join(t.dir, OP + ".json")
    with open(cfg, "w") as f:
        json.dump({"schema_version": 3, "operation_id": OP, "source_run_id": "run_med",
                   "source_address": "198.51.100.12",
                   "envelope": {"grants": (GRANTS if grants is None else grants) +
                                list(grants_extra)},
                   "policy": dict({"schema_version": 1, "restricted_destinations": [],
                                   "in_place_lease_scopes": [],
                                   "max_in_place_lease_ttl_seconds": 60,
                                   "http_gateway_available": True, "prefer_http_gateway": True,
                                   "http_gateway_methods": ["GET", "HEAD"]},
                                  **(policy_extra or {})),
                   "proxy": proxy}, f)
    os.chmod(cfg, 0o600)
    r = env.root_call("network.start", {"config_path": cfg})
    check("result" in r, "network.start: %r" % r)
    t.hosts = os.path.join(t.dir, "hosts")
    with open(t.hosts, "w") as f:
        f.write(HOSTS)
    t.medlog = os.path.join(t.dir, "mediator.log")
    t.med = None
    t.resolv = "/nonexistent"
    if before_mediator is not None:
        before_mediator(t)
    if start_mediator:
        start_mediatord(env, t, selftest)
    return t


def start_mediatord(env, t, selftest=(), resolv=None):
    argv = env.ns_prefix(t.gw) + [MEDIATORD, "--runtime-dir", env.runtime, "--user",
                                  MEDIATOR_USER, "--hosts-file", t.hosts,
                                  "--resolv-conf", resolv or t.resolv, "--ca-file", t.ca]
    for p in selftest:
        argv += ["--selftest-read", t.ca if p == "@CA@" else p]
    argv += getattr(t, "med_args", [])
    log = open(t.medlog, "a")
    if t.medlog not in env.logs:
        env.logs.append(t.medlog)  # the harness scans it for sanitizer reports
    t.med = subprocess.Popen(argv, stdout=log, stderr=log)
    env.children.append(t.med)

    def listening():
        if t.med.poll() is not None:
            raise Failure("mediator exited %d:\n%s" % (t.med.returncode, open(t.medlog).read()))
        return "listening on 198.51.100.1:3128" in open(t.medlog).read()
    env.wait_for("the mediator to listen", listening)


def request(env, t, raw, source=None):
    argv = ["/usr/bin/python3", env.tool("httpclient.py")]
    if source:
        argv += ["--source", source, "--check-close"]
    argv += ["198.51.100.1", "3128"]
    r = env.ns_run(t.ctr, argv, input=raw)
    # A seccomp kill (or any crash) would also refuse: make it a failure of its own.
    if t.med is not None:
        check(t.med.poll() is None, "the mediator died (%s):\n%s" % (t.med.returncode,
                                                                    open(t.medlog).read()))
    return json.loads(r.stdout)


def authority(url):
    """The authority of an absolute URL as written (the Host header a client sends)."""
    if "://" not in url:
        return "ignored.example"
    rest = url.split("://", 1)[1]
    for c in "/?#":
        rest = rest.split(c, 1)[0]
    return rest


def get(env, t, url, method="GET", headers=(), source=None, host=None):
    host = authority(url) if host is None else host
    lines = ["%s %s HTTP/1.1" % (method, url)] + (["Host: " + host] if host != "" else []) + \
        list(headers)
    return request(env, t, "\r\n".join(lines) + "\r\n\r\n", source)


def call_as(env, sock, uid, gid, method="mediator.config", params=None):
    r = subprocess.run(["/usr/bin/python3", "-c", harness.USER_CALL, sock, method,
                        json.dumps(params or {})],
                       capture_output=True, text=True, timeout=30, user=uid, group=gid,
                       extra_groups=[], env=env.user_env(), cwd="/")
    check(r.returncode == 0, "call: %s" % r.stderr)
    return json.loads(r.stdout)


def upstream_lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def evidence(env):
    p = os.path.join(env.state, "network-operations", OP, "http-mediator.jsonl")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip()]



# evhttp closes a connection idle for io_timeout_seconds by itself: the
# cases that prove the mediator shuts connections down set it far beyond
# every wait, so only the shutdown can explain a close.
LONG_IDLE = {"io_timeout_seconds": 300}


class Held:
    """One TCP connection a client in ctr holds open to a proxy
    (holdclient.py), for the cases that prove the mediator shuts accepted
    connections down when authority ends. Every step is bounded."""

    def __init__(self, env, t, source=None, port=3128):
        self.t = t
        argv = ["/usr/bin/python3", env.tool("holdclient.py")]
        if source:
            argv += ["--source", source]
        self.p = subprocess.Popen(env.ns_prefix(t.ctr) + argv + ["198.51.100.1", str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        env.children.append(self.p)
        first = self._line(15)
        check(first.get("connected"), "holdclient did not connect: %r" % first)
        # Connected is not accepted: wait until the mediator has taken it
        # from the listen queue (ss shows the queue length as Recv-Q).
        env.wait_for("the mediator to accept on :%d" % port, lambda: accept_queue(env, t, port)
                     == 0, timeout=10)

    def _line(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise Failure("holdclient did not answer within %d s" % timeout)
        line = self.p.stdout.readline()
        if not line:
            raise Failure("holdclient exited: %s" % self.p.stderr.read())
        return json.loads(line)

    def cmd(self, line, seconds=0):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self._line(seconds + 15)

    def wait_closed(self, seconds=10):
        """The connection's end as the client saw it (eof, reset) within seconds, or None."""
        return self.cmd("wait %d" % seconds, seconds)

    def send(self, raw):
        return self.cmd("send " + raw.encode("latin-1").hex())

    def read(self, seconds=5):
        return self.cmd("read %d" % seconds, seconds)

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(timeout=10)


def accept_queue(env, t, port):
    """Connections waiting in the accept queue of the mediator's listener on port."""
    r = env.ns_run(t.gw, ["ss", "-Hltn", "sport = :%d" % port])
    lines = [l.split() for l in r.stdout.splitlines() if l.strip()]
    check(len(lines) == 1, "no listener on :%d: %r" % (port, r.stdout))
    return int(lines[0][1])


def raw_get(url, host=None):
    return "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (
        url, authority(url) if host is None else host)


def start_other_op(env, t, op_id="op_med_other", port=3129, client="198.51.100.13",
                   proxy_extra=None):
    """A second operation with its own proxy on 198.51.100.1:port for the
    other ctr address, granted the upstream directly (no transaction)."""
    proxy = {"listen": "198.51.100.1:%d" % port, "client_address": client,
             "connect_timeout_seconds": 5, "io_timeout_seconds": 300}
    proxy.update(proxy_extra or {})
    cfg = os.path.join(t.dir, op_id + ".json")
    with open(cfg, "w") as f:
        json.dump({"schema_version": 3, "operation_id": op_id, "source_run_id": "run_med2",
                   "source_address": client,
                   "envelope": {"grants": [
                       {"destination": "198.51.100.1", "protocol": "tcp", "ports": [port]},
                       {"destination": "192.0.2.10", "protocol": "tcp", "ports": [8080]}]},
                   "policy": {"schema_version": 1, "restricted_destinations": [],
                              "in_place_lease_scopes": [], "max_in_place_lease_ttl_seconds": 60,
                              "http_gateway_available": True,
                              "http_gateway_methods": ["GET", "HEAD"]},
                   "proxy": proxy}, f)
    os.chmod(cfg, 0o600)
    r = env.root_call("network.start", {"config_path": cfg})
    check("result" in r, "network.start of %s: %r" % (op_id, r))
    env.wait_for("the mediator to listen for %s" % op_id, lambda: "listening on 198.51.100.1:%d"
                 % port in open(t.medlog).read(), timeout=10)
    return op_id


def mediator_fds(t):
    """The mediator's open file descriptors (root reads its /proc entry)."""
    return len(os.listdir("/proc/%d/fd" % t.med.pid))


def status_of(data):
    """The status code of the first response in raw bytes, or None."""
    if not data.startswith("HTTP/1."):
        return None
    return int(data.split(" ", 2)[1])


def mediator_get_allowed_and_stripped(env):
    t = setup(env)
    r = get(env, t, "http://up.test:8080/data/item?token=querysecret",
            headers=["Authorization: Bearer clientsecret", "Cookie: sid=cookiesecret",
                     "Proxy-Authorization: Basic proxysecret", "Connection: close, X-Hop",
                     "X-Hop: hopvalue", "Accept: text/plain", "TE: trailers",
                     "Upgrade: h2c", "Proxy-Connection: keep-alive", "Keep-Alive: 5",
                     "Proxy-Foo: bar"])
    check(r["status"] == 200, "allowed GET: %r\n%s" % (r, open(t.medlog).read()))
    check(r["body"] == "hello from 192.0.2.10\n", "body: %r" % r)
    for h in ("set-cookie", "www-authenticate", "proxy-authenticate", "authentication-info",
              "keep-alive", "x-upstream"):
        check(h not in r["headers"], "%s reached the client: %r" % (h, r["headers"]))
    check(r["headers"].get("etag") == '"v1"', "allowlisted header lost: %r" % r["headers"])
    reqs = [l for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(len(reqs) == 1, "upstream requests: %r" % reqs)
    h = reqs[0]["headers"]
    for bad in ("authorization", "cookie", "proxy-authorization", "x-hop", "te", "upgrade",
                "proxy-connection", "keep-alive", "proxy-foo"):
        check(bad not in h, "%s reached the upstream: %r" % (bad, h))
    check(h.get("host") == "up.test:8080", "Host not the original authority: %r" % h)
    check(h.get("accept") == "text/plain", "end-to-end header dropped: %r" % h)
    check(reqs[0]["target"] == "/data/item?token=querysecret" and reqs[0]["local"] == "192.0.2.10",
          "upstream saw %r" % reqs[0])
    r = get(env, t, "http://192.0.2.10:8080/head", method="HEAD")
    check(r["status"] == 200 and r["body"] == "", "HEAD: %r" % r)
    # A redirect to the metadata address is followed only as far as
    # boundaryd's decision on the hop: denied, no socket to it, and the 3xx
    # itself never reaches the client.
    r = get(env, t, "http://up.test:8080/redirect")
    check(r["status"] == 403 and r["headers"].get("x-gensee-refusal") ==
          "restricted_destination" and "location" not in r["headers"], "redirect: %r" % r)
    check([l for l in upstream_lines(t.uplog) if l["local"] == "169.254.169.254"] == [],
          "the redirect reached the metadata listener")
    # A redirect chain within the grants is followed (2 hops, max_redirects 3).
    r = get(env, t, "http://up.test:8080/chain/2?k=chainsecret")
    check(r["status"] == 200 and r["body"] == "hello from 192.0.2.10\n", "chain: %r\n%s" % (r, open(t.medlog).read()))
    ev = evidence(env)
    check([e["decision"] for e in ev] == ["allow"] * 3 + ["deny"] + ["allow"] * 3,
          "evidence: %r" % ev)
    check(ev[0]["path"] == "/data/item" and ev[0]["pinned_address"] == "192.0.2.10" and
          ev[0]["host"] == "up.test" and ev[0]["port"] == 8080 and
          ev[0]["url"] == "http://up.test:8080/data/item?[redacted]" and
          ev[0]["redirect_hop"] == 0, "evidence: %r" % ev[0])
    check(ev[3]["redirect_hop"] == 1 and ev[3]["host"] == "169.254.169.254" and
          ev[3]["url"] == "http://169.254.169.254:8080/latest/meta-data" and
          ev[3]["reason"] == "restricted_destination", "redirect evidence: %r" % ev[3])
    check([e["redirect_hop"] for e in ev[4:]] == [0, 1, 2] and
          ev[6]["url"] == "http://up.test:8080/chain/0", "chain evidence: %r" % ev[4:])
    # Each mediated request (hops too) is an effect of the operation's record (seed 000).
    counts = env.record(OP)["counts"]
    check(counts["effects"] >= len(ev), "counts.effects %r for %d decisions" % (counts, len(ev)))
    # No query value, credential or cookie anywhere in evidence or logs.
    blob = json.dumps(ev) + open(t.medlog).read() + env.daemon_log()
    for secret in ("querysecret", "clientsecret", "cookiesecret", "proxysecret", "chainsecret"):
        check(secret not in blob, "%s leaked into evidence or logs" % secret)


def mediator_refusals(env):
    t = setup(env)
    cases = [
        # (url, method, expected status, expected refusal code)
        ("http://other.test:8080/", "GET", 403, "not_granted"),
        ("http://192.0.2.20:8080/", "GET", 403, "not_granted"),
        ("http://meta.test:8080/latest/", "GET", 403, "restricted_destination"),
        ("http://169.254.169.254:8080/", "GET", 403, "restricted_destination"),
        ("http://loop.test:8080/", "GET", 403, "restricted_destination"),
        ("http://mixed.test:8080/", "GET", 403, "restricted_destination"),
        ("http://up.test:8080/", "POST", 403, "method_not_allowed"),
        ("http://up.test:8080/", "DELETE", 403, "method_not_allowed"),
        ("/data", "GET", 400, "origin_form_refused"),
        ("ftp://up.test/", "GET", 400, "bad_scheme"),
        # 127.0.0.1 in decimal: parsed to its one canonical form, denied by boundaryd
        ("http://2130706433:8080/", "GET", 403, "restricted_destination"),
        ("http://127.0.0.1.5:8080/", "GET", 400, "ambiguous_numeric_host"),
        ("http://user:pw@up.test:8080/", "GET", 400, "userinfo"),
        ("http://up.test:8080/a/%2e%2e/b", "GET", 400, "encoded_delimiter"),
        ("up.test:8080", "CONNECT", 405, "connect_refused"),
    ]
    for url, method, status, code in cases:
        r = get(env, t, url, method=method)
        check(r["status"] == status and r["headers"].get("x-gensee-refusal") == code,
              "%s %s: want %d %s, got %r" % (method, url, status, code, r))
    # The Host header must name the target's authority (canonically).
    for host, code in (("other.test:8080", "host_mismatch"), ("up.test", "host_mismatch"),
                       ("", "host_missing")):
        r = get(env, t, "http://up.test:8080/", host=host)
        check(r["status"] == 400 and r["headers"].get("x-gensee-refusal") == code,
              "Host %r: %r" % (host, r))
    r = get(env, t, "http://up.test:8080/", headers=["Host: up.test:8080"])
    check(r["status"] == 400 and r["headers"].get("x-gensee-refusal") == "host_mismatch",
          "two Host headers: %r" % r)
    # Another client address: 403 and the connection closed.
    r = get(env, t, "http://up.test:8080/", source="198.51.100.13")
    check(r["status"] == 403 and r["headers"].get("x-gensee-refusal") == "client_not_allowed" and
          r["closed"], "other client: %r" % r)
    # Nothing reached any upstream listener: not the ungranted one, not the
    # restricted ones, not the granted one (mixed, POST, the other client).
    check(upstream_lines(t.uplog) == [], "upstream saw %r" % upstream_lines(t.uplog))
    check(upstream_lines(t.gwlog) == [], "loopback saw %r" % upstream_lines(t.gwlog))
    ev = evidence(env)
    check(len(ev) == 9 and all(e["decision"] == "deny" for e in ev), "evidence: %r" % ev)
    mixed = [e for e in ev if e["host"] == "mixed.test"][0]
    check(sorted(mixed["addresses"]) == ["127.0.0.1", "192.0.2.10"] and
          mixed["denied_address"] == "127.0.0.1", "mixed answer: %r" % mixed)
    # And the granted upstream still works afterwards.
    r = get(env, t, "http://up.test:8080/")
    check(r["status"] == 200, "allowed after refusals: %r" % r)
    r = get(env, t, "http://UP.test:8080/", host="up.TEST:8080")
    check(r["status"] == 200, "Host compared canonically: %r" % r)


def mediator_https_verified(env):
    """https://: TLS from the mediator to the pinned address, verified
    against --ca-file with the original name; a certificate for another name
    is refused before any request is sent."""
    t = setup(env)
    r = get(env, t, "https://secure.test:8443/tls?x=1",
            headers=["Authorization: Bearer clientsecret", "Cookie: sid=cookiesecret"])
    check(r["status"] == 200 and r["body"] == "hello from 192.0.2.10\n",
          "https GET: %r\n%s" % (r, open(t.medlog).read()))
    check("set-cookie" not in r["headers"], "Set-Cookie over https: %r" % r["headers"])
    reqs = [l for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(len(reqs) == 1 and reqs[0]["target"] == "/tls?x=1", "upstream: %r" % reqs)
    h = reqs[0]["headers"]
    check("authorization" not in h and "cookie" not in h and h.get("host") == "secure.test:8443",
          "https upstream headers: %r" % h)
    # The same address and certificate, asked for under another name: refused.
    r = get(env, t, "https://wrong.test:8443/")
    check(r["status"] == 502 and r["headers"].get("x-gensee-refusal") == "upstream_failed",
          "name mismatch: %r" % r)
    reqs = [l for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(len(reqs) == 1, "a request went over an unverified connection: %r" % reqs)
    # It did reach the pinned address (so the refusal was the verification).
    conns = [l for l in upstream_lines(t.uplog) if l["event"] == "connect" and l["port"] == 8443]
    check(len(conns) == 2, "TLS connections: %r" % conns)
    ev = evidence(env)
    check([e["scheme"] for e in ev] == ["https", "https"] and
          all(e["decision"] == "allow" for e in ev), "evidence: %r" % ev)


def mediator_help_version_usage(env):
    """--help (stdout, 0), --version, usage errors exit 2 as the other daemons;
    not started as root: refused (it has nothing to drop)."""
    run = lambda *a, **kw: subprocess.run([MEDIATORD] + list(a), capture_output=True, text=True,
                                          timeout=30, **kw)
    r = run("--help")
    check(r.returncode == 0 and r.stdout.startswith("usage: gensee-httpmediatord"), "%r" % r)
    r = run("--version")
    check(r.returncode == 0 and r.stdout.startswith("gensee-httpmediatord "), "%r" % r)
    for bad in ([], ["--runtime-dir"], ["--runtime-dir", "relative"], ["--bogus"],
                ["--runtime-dir", env.runtime, "extra"]):
        r = run(*bad)
        check(r.returncode == 2 and "usage: gensee-httpmediatord" in r.stderr, "%r: %r" % (bad, r))
    mediatord = env.user_binary("daemons/httpmediatord/gensee-httpmediatord")
    r = subprocess.run([mediatord, "--runtime-dir", env.runtime], capture_output=True, text=True,
                       timeout=30, user=env.uid, group=env.gid, extra_groups=[])
    check(r.returncode == 1 and "must be started as root" in r.stderr, "non-root: %r" % r)
    r = run("--runtime-dir", env.runtime, "--user", "gensee-no-such-user")
    check(r.returncode == 1 and "no such user" in r.stderr, "unknown user: %r" % r)


def mediator_bounds(env):
    """max_response_bytes and max_request_bytes from the config bound the bodies."""
    t = setup(env, proxy_extra={"max_response_bytes": 10, "max_request_bytes": 16})
    r = get(env, t, "http://up.test:8080/big")
    check(r["status"] == 502 and r["headers"].get("x-gensee-refusal") == "response_too_large",
          "response over max_response_bytes: %r" % r)
    body = "x" * 100
    r = request(env, t, "GET http://up.test:8080/body HTTP/1.1\r\nHost: up.test:8080\r\n"
                "Content-Length: %d\r\n\r\n%s" % (len(body), body))
    check(r["status"] == 413, "request over max_request_bytes: %r" % r)
    r = request(env, t, "GET http://up.test:8080/small HTTP/1.1\r\nHost: up.test:8080\r\n"
                "Content-Length: 4\r\n\r\nabcd")
    check(r["status"] == 400 and r["headers"].get("x-gensee-refusal") == "request_body_refused",
          "GET with a body: %r" % r)
    targets = [l["target"] for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(targets == ["/big"], "upstream saw %r" % targets)


def mediator_follows_operation_end(env):
    """When the operation ends the mediator stops listening for it, and
    boundaryd refuses what was still in flight."""
    t = setup(env, proxy_extra={"io_timeout_seconds": 300})
    r = get(env, t, "http://up.test:8080/")
    check(r["status"] == 200, "before the end: %r" % r)
    # A connection accepted before the end, idle: it ends with the operation
    # (not with evhttp's idle timeout).
    idle = Held(env, t)
    r = env.root_call("operation.end", {"operation_id": OP, "kill": True})
    check(r["result"]["state"] == "ended", "%r" % r)
    env.wait_for("the mediator to close its listener",
                 lambda: "%s: no longer configured" % OP in open(t.medlog).read())
    w = idle.wait_closed(10)
    check(w["closed"] in ("eof", "reset") and w["data"] == "",
          "an accepted connection outlived its operation: %r" % w)
    try:
        get(env, t, "http://up.test:8080/after")
        raise Failure("the mediator still listens after the end")
    except subprocess.CalledProcessError as e:
        check("ConnectionRefusedError" in e.stderr, "after the end: %s" % e.stderr)
    # boundaryd itself refuses the ended operation, whoever asks.
    pw = pwd.getpwnam(MEDIATOR_USER)
    r = subprocess.run(["/usr/bin/python3", "-c", harness.USER_CALL,
                        os.path.join(env.runtime, "mediator.sock"), "mediator.authorize",
                        json.dumps({"operation_id": OP, "client_address": "198.51.100.12",
                                    "method": "GET", "scheme": "http", "host": "up.test",
                                    "port": 8080, "path": "/", "url": "http://up.test:8080/",
                                    "addresses": ["192.0.2.10"]})],
                       capture_output=True, text=True, timeout=30, user=pw.pw_uid,
                       group=pw.pw_gid, extra_groups=[], env=env.user_env(), cwd="/")
    res = json.loads(r.stdout)["result"]
    check(res["decision"] == "deny" and res["reason"] == "operation_not_running", "%r" % res)


def mediator_silent_boundaryd_denies(env):
    """A boundaryd that does not answer (stopped, not dead) is a refusal: 503
    after the mediator's 5 s authorization deadline; its late answer is not
    acted on."""
    t = setup(env)
    env.proc.send_signal(signal.SIGSTOP)
    try:
        r = get(env, t, "http://up.test:8080/while-stopped")
        check(r["status"] == 503 and r["headers"].get("x-gensee-refusal") == "authority_timeout",
              "silent boundaryd: %r" % r)
    finally:
        env.proc.send_signal(signal.SIGCONT)
    r = get(env, t, "http://up.test:8080/after")
    check(r["status"] == 200, "after SIGCONT: %r" % r)
    targets = [l["target"] for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(targets == ["/after"], "upstream saw %r" % targets)


def mediator_fails_closed_without_boundaryd(env):
    t = setup(env)
    r = get(env, t, "http://up.test:8080/before")
    check(r["status"] == 200, "before: %r" % r)
    env.kill9()
    r = get(env, t, "http://up.test:8080/after")
    check(r["status"] == 503 and r["headers"].get("x-gensee-refusal") == "authority_unavailable",
          "without boundaryd: %r" % r)
    reqs = [l["target"] for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(reqs == ["/before"], "upstream saw %r" % reqs)
    check(t.med.poll() is None, "the mediator died with boundaryd")


def mediator_confined(env):
    probe = os.path.join(tempfile.mkdtemp(prefix="gensee-it-probe."), "readable")
    env.cleanup_dirs.append(os.path.dirname(probe))
    os.chmod(os.path.dirname(probe), 0o755)
    with open(probe, "w") as f:
        f.write("x")
    os.chmod(probe, 0o644)
    t = setup(env, selftest=["@CA@", "/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", probe,
                             "/etc/shadow", os.path.join(env.state, "boundaryd.lock")])
    st = {}
    with open("/proc/%d/status" % t.med.pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            st[k] = v.split()
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        check(int(st[k][0], 16) == 0, "%s %s" % (k, st[k]))
    check(st["NoNewPrivs"] == ["1"] and st["Seccomp"] == ["2"], "nnp/seccomp: %r" % st)
    check(st["Uid"] == [str(t.uid)] * 4, "uid: %r" % st["Uid"])
    check(st["Gid"][0] != "0" and st["Groups"] == [], "gid/groups: %r %r" % (st["Gid"], st.get("Groups")))
    log = open(t.medlog).read()
    check("selftest-read %s: allowed" % t.ca in log, log)
    # World-readable, so only Landlock can refuse them (the system bundle
    # too: only the configured --ca-file is readable):
    check("selftest-read /etc/ssl/certs/ca-certificates.crt: denied" in log, log)
    check("selftest-read /etc/passwd: denied" in log, log)
    check("selftest-read %s: denied" % probe in log, log)
    check("selftest-read /etc/shadow: denied" in log, log)
    check("selftest-read %s: denied" % os.path.join(env.state, "boundaryd.lock") in log, log)
    # Still serving after all that (the denials were refusals, not kills).
    r = get(env, t, "http://up.test:8080/")
    check(r["status"] == 200, "after selftest: %r" % r)


def mediator_sock_peer_checked(env):
    t = setup(env, start_mediator=False)
    sock = os.path.join(env.runtime, "mediator.sock")
    s = os.stat(sock)
    check(s.st_uid == t.uid and (s.st_mode & 0o777) == 0o600, "mediator.sock mode/owner")
    # Root (not the mediator's uid): connected by DAC, closed by SO_PEERCRED.
    r = call_as(env, sock, 0, 0)
    check("oserror" in r, "root was answered on mediator.sock: %r" % r)
    check("refused %s connection from uid 0" % sock in env.daemon_log(),
          "root not refused by the peer check:\n" + env.daemon_log())
    # The test user: refused (by the socket's mode first; SO_PEERCRED behind it).
    r = call_as(env, sock, env.uid, env.gid)
    check("oserror" in r, "gensee-test was answered on mediator.sock: %r" % r)
    # The mediator's uid is answered.
    pw = pwd.getpwnam(MEDIATOR_USER)
    r = call_as(env, sock, pw.pw_uid, pw.pw_gid)
    check("result" in r, "mediator uid refused: %r" % r)
    ops = r["result"]["operations"]
    check([o["operation_id"] for o in ops] == [OP], "config: %r" % ops)
    # boundaryd decides on its own state, whatever the mediator claims.
    base = {"operation_id": OP, "client_address": "198.51.100.12", "method": "GET",
            "scheme": "http", "host": "up.test", "port": 8080, "path": "/p?secret=1",
            "url": "http://up.test:8080/p?secret=1", "addresses": ["192.0.2.10"]}
    for change, reason in (({}, "within_envelope"),
                           ({"client_address": "198.51.100.13"}, "client_address_mismatch"),
                           ({"method": "POST"}, "method_not_allowed"),
                           ({"scheme": "ftp"}, "scheme_not_supported"),
                           ({"port": 8081, "url": "http://up.test:8081/p?secret=1"},
                            "not_granted"),
                           ({"addresses": []}, "no_addresses"),
                           ({"addresses": ["192.0.2.10", "10.0.0.1"]}, "restricted_destination"),
                           ({"addresses": ["192.0.2.10", "192.0.2.20"]}, "not_granted"),
                           ({"operation_id": "op_other"}, "operation_not_running"),
                           # boundaryd parses the URL itself and holds the fields to it
                           ({"url": "http://up.test:8080/p/../q"}, "bad_url"),
                           ({"url": "http://UP.test:8080/p?secret=1"}, "bad_url"),
                           ({"url": "http://up.test/p?secret=1"}, "url_mismatch"),
                           ({"url": "http://other.test:8080/p?secret=1"}, "url_mismatch"),
                           ({"url": "https://up.test:8080/p?secret=1"}, "url_mismatch"),
                           ({"path": "/q?secret=1"}, "url_mismatch"),
                           ({"redirect_hop": 4}, "redirect_limit"),
                           ({"redirect_hop": 3}, "within_envelope"),
                           # an IP literal: what it embeds, and nothing but itself
                           ({"host": "::ffff:127.0.0.1", "url":
                             "http://[::ffff:127.0.0.1]:8080/p?secret=1"},
                            "restricted_destination"),
                           ({"host": "64:ff9b::a9fe:a9fe", "url":
                             "http://[64:ff9b::a9fe:a9fe]:8080/p?secret=1",
                             "addresses": ["64:ff9b::a9fe:a9fe"]}, "restricted_destination"),
                           ({"host": "192.0.2.10", "url": "http://192.0.2.10:8080/p?secret=1",
                             "addresses": ["192.0.2.20"]}, "url_mismatch")):
        p = dict(base, **change)
        r = call_as(env, sock, pw.pw_uid, pw.pw_gid, "mediator.authorize", p)
        check(r.get("result", {}).get("reason") == reason and
              r["result"]["decision"] == ("allow" if reason == "within_envelope" else "deny"),
              "%r: %r" % (change, r))
    for change in ({"host": "a@b"}, {"path": "relative"}, {"operation_id": "x/../y"},
                   {"addresses": ["not-an-address"]}):
        r = call_as(env, sock, pw.pw_uid, pw.pw_gid, "mediator.authorize", dict(base, **change))
        ok = r.get("error", {}).get("code") == "invalid_params" or \
            r.get("result", {}).get("decision") == "deny"
        check(ok, "%r accepted: %r" % (change, r))
    check("secret=1" not in open(os.path.join(env.state, "network-operations", OP,
                                                "http-mediator.jsonl")).read(), "query in evidence")
    # The mediator methods exist on mediator.sock only, even for root.
    r = env.root_call("mediator.authorize", dict(base, path="/", url="http://up.test:8080/"))
    check(r.get("error", {}).get("code") == "not_authorized", "boundary.sock: %r" % r)
    r = env.user_call(env.client_sock, "mediator.config")
    check(r.get("error", {}).get("code") == "not_authorized", "client.sock: %r" % r)
    # Without --mediator-user there is no mediator.sock at all.
    env.stop()
    env.start()
    check(not os.path.exists(sock), "mediator.sock without --mediator-user")


def mediator_channel_loss_closes_connections(env):
    """boundaryd gone (SIGKILL): nothing can be authorized, so the mediator
    closes the connections it had accepted instead of keeping them for a
    request no one may allow; a request written on one gets nothing."""
    # evhttp's own idle timeout must not be what closes them.
    t = setup(env, proxy_extra={"io_timeout_seconds": 300})
    idle = Held(env, t)
    late = Held(env, t)
    env.kill9()
    w = idle.wait_closed(10)
    check(w["closed"] in ("eof", "reset") and w["data"] == "",
          "an accepted connection outlived the boundaryd channel: %r" % w)
    late.send(raw_get("http://up.test:8080/after-loss"))
    got = late.read(5)
    check(got["closed"] in ("eof", "reset") and status_of(got["data"]) in (None, 503),
          "a request after the channel loss: %r" % got)
    check("boundaryd channel lost" in open(t.medlog).read(), "the mediator did not see the loss")


# Reads everything the mediator sends on one connection until it closes
# (or 8 s pass), so a second response would be seen.
RAW_ALL = r"""
import json, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=8)
s.sendall(sys.stdin.buffer.read())
data, closed = b"", False
try:
    while True:
        c = s.recv(65536)
        if not c:
            closed = True
            break
        data += c
except (socket.timeout, ConnectionResetError):
    closed = closed or False
print(json.dumps({"data": data.decode("latin-1"), "closed": closed}))
"""


def raw_all(env, t, raw):
    r = env.ns_run(t.ctr, ["/usr/bin/python3", "-c", RAW_ALL, "198.51.100.1", "3128"], input=raw)
    check(t.med.poll() is None, "the mediator died:\n%s" % open(t.medlog).read())
    return json.loads(r.stdout)


SMUGGLED = "GET http://up.test:8080/smuggled HTTP/1.1\r\nHost: up.test:8080\r\n\r\n"
H = "Host: up.test:8080\r\n"


def mediator_strict_http(env):
    """Request smuggling forms: each refused 400 with its code, the
    connection closed, a deny evidence line, and the request written
    behind it (GET /smuggled) never answered or sent upstream."""
    t = setup(env)
    forms = [
        ("http_duplicate_content_length", "POST http://up.test:8080/a HTTP/1.1\r\n" + H +
         "Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED)),
        ("http_content_length_with_transfer_encoding", "POST http://up.test:8080/a HTTP/1.1\r\n" +
         H + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("http_transfer_encoding_on_get_head", "GET http://up.test:8080/a HTTP/1.1\r\n" + H +
         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("http_bad_transfer_encoding", "POST http://up.test:8080/a HTTP/1.1\r\n" + H +
         "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        ("http_bad_header", "POST http://up.test:8080/a HTTP/1.1\r\n" + H +
         "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n"),
        ("http_obs_fold", "GET http://up.test:8080/a HTTP/1.1\r\n" + H + "X-A: 1\r\n 2\r\n\r\n"),
        ("http_bare_lf", "GET http://up.test:8080/a HTTP/1.1\nHost: up.test:8080\n\n"),
        ("http_bare_cr", "GET http://up.test:8080/a HTTP/1.1\r\nHost: up.test:8080\rX: 1\r\n\r\n"),
    ]
    for code, raw in forms:
        r = raw_all(env, t, raw + SMUGGLED)
        check(r["data"].count("HTTP/1.1 ") == 1 and status_of(r["data"]) == 400 and
              ("X-Gensee-Refusal: %s\r\n" % code) in r["data"] and r["closed"],
              "%s: want one 400 %s and the connection closed, got %r" % (code, code, r))
    # A chunked POST that is well framed reaches the usual checks (no token: refused).
    r = raw_all(env, t, "POST http://up.test:8080/c HTTP/1.1\r\n" + H +
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
    check(status_of(r["data"]) in (400, 403) and "X-Gensee-Refusal: http_" not in r["data"],
          "well-framed chunked POST: %r" % r)
    # A good request pipelined before a refused one is still served, not refused with it.
    r = raw_all(env, t, "GET http://up.test:8080/first HTTP/1.1\r\n" + H + "\r\n" +
                forms[0][1] + SMUGGLED)
    check(status_of(r["data"]) == 200 and "smuggled" not in r["data"],
          "a good request before a refused one: %r" % r)
    targets = [l["target"] for l in upstream_lines(t.uplog) if l["event"] == "request"]
    check(not any("smuggled" in x for x in targets), "a smuggled request went upstream: %r" %
          targets)
    ev = [e for e in evidence(env) if e.get("stage") == "request_head"][:len(forms)]
    check(sorted(e["reason"] for e in ev) == sorted(c for c, _ in forms) and
          all(e["decision"] == "deny" and e["status"] == 400 and
              e["client_address"] == "198.51.100.12" for e in ev), "evidence: %r" % ev)
    check(not any(e["decision"] == "allow" and "smuggled" in (e.get("url") or "")
                  for e in evidence(env)), "a smuggled request was allowed: %r" % evidence(env))


def mediator_head_too_large_evidence(env):
    """A head over 64 KiB: 431, the connection closed, and a deny line in
    the evidence (before, evhttp answered it and nothing was recorded)."""
    t = setup(env)
    raw = "GET http://up.test:8080/big-head HTTP/1.1\r\n" + H + "X-Big: " + "a" * 70000 + \
        "\r\n\r\n"
    r = raw_all(env, t, raw)
    check(status_of(r["data"]) == 431 and "X-Gensee-Refusal: http_head_too_large" in r["data"]
          and r["closed"], "head over the limit: %r" % r)
    ev = evidence(env)
    check(len(ev) == 1 and ev[0]["decision"] == "deny" and ev[0]["reason"] ==
          "http_head_too_large" and ev[0]["status"] == 431, "evidence: %r" % ev)
    # A body over max_request_bytes (65536 here) is refused before evhttp, with evidence.
    r = raw_all(env, t, "POST http://up.test:8080/ HTTP/1.1\r\n" + H +
                "Content-Length: 70000\r\n\r\n")
    check(status_of(r["data"]) == 413 and "X-Gensee-Refusal: request_too_large" in r["data"],
          "body over max_request_bytes: %r" % r)
    ev = evidence(env)
    check(len(ev) == 2 and ev[1]["decision"] == "deny" and ev[1]["reason"] ==
          "request_too_large" and ev[1]["method"] == "POST", "evidence: %r" % ev)
    check(upstream_lines(t.uplog) == [], "upstream saw %r" % upstream_lines(t.uplog))


def mediator_chunked_refusals(env):
    """A chunked body is refused where evhttp already holds its head: over
    max_request_bytes (one chunk, or the sum of two) is 413
    request_too_large and malformed chunk framing 400 http_bad_chunk, each
    answered, the connection closed, a deny evidence line, and nothing
    upstream (before, the first was evhttp's own 413 with no evidence and
    the second a close without an answer)."""
    t = setup(env)
    head = "POST http://up.test:8080/chunked HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
    cases = [
        (413, "request_too_large", head + "%x\r\n" % 70000),
        (413, "request_too_large", head + "8000\r\n" + "a" * 0x8000 + "\r\n8001\r\n"),
        (400, "http_bad_chunk", head + "zz\r\n"),
        (400, "http_bad_chunk", head + "3\r\nabcXY"),
    ]
    for status, code, raw in cases:
        r = raw_all(env, t, raw)
        check(r["data"].count("HTTP/1.1 ") == 1 and status_of(r["data"]) == status and
              ("X-Gensee-Refusal: %s\r\n" % code) in r["data"] and r["closed"],
              "%s: want one %d and the connection closed, got %r" % (code, status, r))
    ev = evidence(env)
    check([(e["decision"], e["reason"], e["status"], e.get("method")) for e in ev] ==
          [("deny", c, st, "POST") for st, c, _ in cases], "evidence: %r" % ev)
    # Exactly max_request_bytes in chunks is not refused by the framing check.
    r = raw_all(env, t, head.replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n", 1) +
                "8000\r\n" + "a" * 0x8000 + "\r\n8000\r\n" + "b" * 0x8000 + "\r\n0\r\n\r\n")
    check(status_of(r["data"]) is not None and "request_too_large" not in r["data"] and
          "X-Gensee-Refusal: http_" not in r["data"], "a body of exactly the limit: %r" % r)
    check(upstream_lines(t.uplog) == [], "upstream saw %r" % upstream_lines(t.uplog))


def mediator_connection_flood(env):
    """One client opens 2,000 connections with half-sent heads (within 20 s):
    at most --max-connections-per-client stay open, the mediator's
    descriptors stay bounded, and meanwhile the operation's own client and
    another operation are answered; a held head ends at --head-timeout
    with 408 and a deny line."""
    def prepare(t):
        t.med_args = ["--max-connections-per-client", "64", "--head-timeout", "4"]
    t = setup(env, before_mediator=prepare, proxy_extra=LONG_IDLE)
    other = start_other_op(env, t)
    env.ns_run(t.ctr, ["ip", "addr", "add", "198.51.100.14/24", "dev", "mc0"])
    fds_before = mediator_fds(t)
    flood = subprocess.Popen(env.ns_prefix(t.ctr) + ["/usr/bin/python3", env.tool("floodclient.py"),
                             "198.51.100.14", "198.51.100.1", "3128", "2000", "20"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    env.children.append(flood)
    r, _, _ = select.select([flood.stdout], [], [], 40)
    check(r, "the flood client did not finish within 40 s")
    opened = json.loads(flood.stdout.readline())
    check(opened["opened"] + opened["refused"] >= 1000, "flood: %r" % opened)
    # During the flood (the kept connections still hold their heads):
    fds = mediator_fds(t)
    check(fds < fds_before + 64 + 32, "the mediator holds %d descriptors (%d before)" %
          (fds, fds_before))
    r = get(env, t, "http://up.test:8080/during-flood")
    check(r["status"] == 200, "the operation's client during the flood: %r" % r)
    r2 = env.ns_run(t.ctr, ["/usr/bin/python3", env.tool("httpclient.py"), "--source",
                            "198.51.100.13", "198.51.100.1", "3129"],
                    input=raw_get("http://up.test:8080/other-during-flood"))
    check(json.loads(r2.stdout)["status"] == 200, "the other operation during the flood: %r" %
          r2.stdout)
    flood.stdin.write("\n")
    flood.stdin.flush()
    r, _, _ = select.select([flood.stdout], [], [], 30)
    check(r, "the flood client did not report")
    still = json.loads(flood.stdout.readline())
    check(still["open"] <= 64, "%d flood connections stayed open (limit 64)" % still["open"])
    flood.wait(timeout=10)
    # A head held past --head-timeout: 408 http_head_timeout, and evidence.
    h = Held(env, t)
    h.send("GET http://up.test:8080/slow HTTP/1.1\r\nHost: up")
    got = h.read(8)
    check(status_of(got["data"]) == 408 and "http_head_timeout" in got["data"],
          "a head held past the deadline: %r" % got)
    h.close()
    env.wait_for("the head timeout evidence", lambda: any(
        e.get("reason") == "http_head_timeout" and e["decision"] == "deny"
        for e in evidence(env)), timeout=10)
    check("max-connections-per-client" in open(t.medlog).read(), "no limit line in the log")
    check(t.med.poll() is None, "the mediator died")
    del other


if __name__ == "__main__":
    main({f.__name__: f for f in (mediator_get_allowed_and_stripped, mediator_refusals,
                                  mediator_https_verified, mediator_bounds,
                                  mediator_help_version_usage, mediator_silent_boundaryd_denies,
                                  mediator_follows_operation_end,
                                  mediator_channel_loss_closes_connections,
                                  mediator_fails_closed_without_boundaryd, mediator_confined,
                                  mediator_sock_peer_checked, mediator_strict_http,
                                  mediator_head_too_large_evidence,
                                  mediator_chunked_refusals,
                                  mediator_connection_flood)})
