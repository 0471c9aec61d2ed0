#!/usr/bin/env python3
"""SSRF suite: every request below goes through the real, confined
gensee-httpmediatord and boundaryd's mediator.authorize, in network
namespaces this test creates (the topology of test_mediator.py plus):

  ext  forbidden listeners on 10.0.0.5, 172.16.0.5, 192.168.0.5, 100.64.0.5,
       198.18.0.5 (IPv4) and 64:ff9b::a9fe:a9fe, 64:ff9b:1::a9fe:a9fe,
       2002:a9fe:a9fe::1, 2001:0:a9fe:a9fe::1, fd00::5 (IPv6), all :8080 and
       routed from gw, so a connection the mediator tried would arrive;
       169.254.169.254:8080 (metadata) as in test_mediator;
       a test DNS server on 192.0.2.53 (dnsserve.py) whose answers can mix
       public and private addresses and change between lookups
  gw   listeners on 127.0.0.1:8080 and [::1]:8080 (the mediator's own
       loopback; 0.0.0.0 and the IPv4-mapped forms land there too)

Each case expects a refusal with its status and stable code (or, for the
few marked, a success that proves the path is real), and is reported on
its own line; a case group fails if any of its cases does. After each
group every forbidden listener's log must be empty: no connection reached
a forbidden address, not merely "the answer was an error". Multicast and
broadcast targets (224.0.0.1, 255.255.255.255, ff02::1) cannot take a TCP
connection at all; for them boundaryd's decision in the evidence is the
proof. Four groups, each with one daemon setup and many requests.
"""

import json
import os
import subprocess
from urllib.parse import quote

import test_mediator as tm
from harness import Failure, check, main

FORBIDDEN_V4 = ["10.0.0.5", "172.16.0.5", "192.168.0.5", "100.64.0.5", "198.18.0.5"]
FORBIDDEN_V6 = ["64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "2002:a9fe:a9fe::1",
                "2001:0:a9fe:a9fe::1", "fd00::5"]
ZONE = {
    "flip.test": {"A": [["192.0.2.10"], ["127.0.0.1"], ["169.254.169.254"]]},
    "mixed46.test": {"A": [["192.0.2.10"]], "AAAA": [["::1"]]},
    "mixedpriv.test": {"A": [["192.0.2.10", "10.0.0.5"]]},
    "priv.test": {"A": [["10.0.0.5"]]},
    "meta6.test": {"AAAA": [["64:ff9b::a9fe:a9fe"]]},
    "mapped.test": {"AAAA": [["::ffff:127.0.0.1"]]},
    "zero.test": {"A": [["0.0.0.0"]]},
    "cgnat.test": {"A": [["100.64.0.5"]]},
    "rebind.test": {"A": [["127.0.0.1"]]},
    "pub.test": {"A": [["192.0.2.10"]]},
}


def ssrf_setup(env, proxy_extra=None):
    extra = {"max_redirects": 3, "connect_timeout_seconds": 2, "io_timeout_seconds": 2,
             "max_request_bytes": 4096, "max_response_bytes": 65536}
    extra.update(proxy_extra or {})
    # Exact grants for some forbidden addresses: restriction must win over them.
    grants = [{"destination": a, "protocol": "tcp", "ports": [8080]}
              for a in ["10.0.0.5", "::1", "64:ff9b::a9fe:a9fe"]]
    t = tm.setup(env, start_mediator=False, proxy_extra=extra, grants_extra=grants)
    ip = lambda ns, *a: env.ns_run(ns, ["ip"] + list(a))
    ip(t.gw, "-6", "addr", "add", "2001:db8:1::1/64", "dev", "mg1", "nodad")
    ip(t.ext, "-6", "addr", "add", "2001:db8:1::10/64", "dev", "me0", "nodad")
    ip(t.ext, "-6", "route", "add", "default", "via", "2001:db8:1::1")
    ip(t.ext, "addr", "add", "192.0.2.53/24", "dev", "me0")
    for a in FORBIDDEN_V4:
        ip(t.ext, "addr", "add", a + "/32", "dev", "lo")
        ip(t.gw, "route", "add", a + "/32", "via", "192.0.2.10")
    for a in FORBIDDEN_V6:
        ip(t.ext, "-6", "addr", "add", a + "/128", "dev", "lo", "nodad")
        ip(t.gw, "-6", "route", "add", a + "/128", "via", "2001:db8:1::10")
    t.forbidlog = os.path.join(t.dir, "forbidden.jsonl")
    t.gw6log = os.path.join(t.dir, "gw-loopback6.jsonl")
    t.dnslog = os.path.join(t.dir, "dns.jsonl")
    for p in (t.forbidlog, t.gw6log, t.dnslog):
        open(p, "w").close()
    httpserve = env.tool("httpserve.py")
    for ns, log, addrs in ((t.ext, t.forbidlog, FORBIDDEN_V4 + FORBIDDEN_V6),
                           (t.gw, t.gw6log, ["::1"])):
        p = subprocess.Popen(env.ns_prefix(ns) + ["/usr/bin/python3", httpserve, log] +
                             ["%s,8080" % a for a in addrs],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        env.children.append(p)
        check(p.stdout.readline().strip() == "ready", "httpserve did not start")
    zone = os.path.join(t.dir, "zone.json")
    with open(zone, "w") as f:
        json.dump(ZONE, f)
    p = subprocess.Popen(env.ns_prefix(t.ext) + ["/usr/bin/python3", env.tool("dnsserve.py"),
                                                 t.dnslog, zone, "192.0.2.53"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.children.append(p)
    check(p.stdout.readline().strip() == "ready", "dnsserve did not start")
    resolv = os.path.join(t.dir, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 192.0.2.53\noptions timeout:2 attempts:1\n")
    tm.start_mediatord(env, t, resolv=resolv)
    return t


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def run_cases(env, t, cases):
    """cases: (name, url, status or tuple of statuses, code or None, options).
    Every case runs and is reported; failures are collected and raised at the end."""
    failed = []
    for name, url, status, code, opt in cases:
        if "raw" in opt:
            r = tm.request(env, t, opt["raw"], opt.get("source"))
        else:
            r = tm.get(env, t, url, method=opt.get("method", "GET"),
                       headers=opt.get("headers", ()), host=opt.get("host"),
                       source=opt.get("source"))
        statuses = status if isinstance(status, tuple) else (status,)
        got = r["headers"].get("x-gensee-refusal")
        ok = r["status"] in statuses and (code is None or got == code)
        # Never a credential header from upstream, refused or not.
        ok = ok and "set-cookie" not in r["headers"] and "www-authenticate" not in r["headers"]
        print("case %-44s %s (status %s, refusal %s)" % (name, "ok" if ok else "FAILED",
                                                         r["status"], got), flush=True)
        if not ok:
            failed.append("%s: want %s %s, got %r" % (name, statuses, code, r))
    return failed


def forbidden_untouched(t):
    """No connection reached any forbidden listener."""
    bad = lines(t.forbidlog) + lines(t.gwlog) + lines(t.gw6log)
    bad += [l for l in lines(t.uplog) if l["local"] in ("169.254.169.254", "192.0.2.20")]
    return bad


def finish(env, t, failed):
    bad = forbidden_untouched(t)
    if bad:
        failed.append("connections reached forbidden listeners: %r" % bad)
    print("listeners on forbidden addresses saw %d connections" % len(bad), flush=True)
    if failed:
        raise Failure("%d failed:\n%s\n--- mediator log ---\n%s" % (
            len(failed), "\n".join(failed), open(t.medlog).read()[-4000:]))


R = ("restricted_destination")


def ssrf_ip_literals(env):
    """IPv4 in every notation resolvers accept, IPv6 literals that are or
    embed a restricted IPv4 address (mapped, compatible, SIIT, NAT64, 6to4,
    Teredo), private, loopback, link-local, CGNAT, benchmark, multicast and
    the mediator's own listener."""
    t = ssrf_setup(env)
    u = lambda h: "http://%s:8080/latest/meta-data" % h
    cases = [
        ("v4 loopback dotted", u("127.0.0.1"), 403, R, {}),
        ("v4 loopback decimal", u("2130706433"), 403, R, {}),
        ("v4 loopback hex", u("0x7f000001"), 403, R, {}),
        ("v4 loopback octal parts", u("0177.0.0.1"), 403, R, {}),
        ("v4 loopback octal whole", u("017700000001"), 403, R, {}),
        ("v4 loopback hex+short", u("0x7f.1"), 403, R, {}),
        ("v4 loopback short", u("127.1"), 403, R, {}),
        ("v4 zero", u("0"), 403, R, {}),
        ("v4 0.0.0.0", u("0.0.0.0"), 403, R, {}),
        ("v4 metadata dotted", u("169.254.169.254"), 403, R, {}),
        ("v4 metadata decimal", u("2852039166"), 403, R, {}),
        ("v4 metadata hex", u("0xa9fea9fe"), 403, R, {}),
        ("v4 metadata octal", u("0251.0376.0251.0376"), 403, R, {}),
        ("v4 metadata three-part", u("169.254.43518"), 403, R, {}),
        ("v4 private 10/8 (granted exactly)", u("10.0.0.5"), 403, R, {}),
        ("v4 private 10/8 hex first part", u("0x0a.0.0.5"), 403, R, {}),
        ("v4 private 172.16/12", u("172.16.0.5"), 403, R, {}),
        ("v4 private 192.168/16", u("192.168.0.5"), 403, R, {}),
        ("v4 carrier NAT 100.64/10", u("100.64.0.5"), 403, R, {}),
        ("v4 benchmark 198.18/15", u("198.18.0.5"), 403, R, {}),
        ("v4 multicast", u("224.0.0.1"), 403, R, {}),
        ("v4 broadcast", u("255.255.255.255"), 403, R, {}),
        ("v4 trailing numeric label", u("127.0.0.1.5"), 400, "ambiguous_numeric_host", {}),
        ("v4 octet over 255", u("256.0.0.1"), 400, "ambiguous_numeric_host", {}),
        ("v4 bad octal digit", u("08.0.0.1"), 400, "ambiguous_numeric_host", {}),
        ("v6 loopback (granted exactly)", u("[::1]"), 403, R, {}),
        ("v6 unspecified", u("[::]"), 403, R, {}),
        ("v6 mapped loopback dotted", u("[::ffff:127.0.0.1]"), 403, R, {}),
        ("v6 mapped loopback hex", u("[::ffff:7f00:1]"), 403, R, {}),
        ("v6 mapped metadata", u("[::ffff:a9fe:a9fe]"), 403, R, {}),
        ("v6 compatible loopback", u("[::127.0.0.1]"), 403, R, {}),
        ("v6 SIIT metadata", u("[::ffff:0:a9fe:a9fe]"), 403, R, {}),
        ("v6 NAT64 metadata (granted exactly)", u("[64:ff9b::a9fe:a9fe]"), 403, R, {}),
        ("v6 NAT64 loopback", u("[64:ff9b::7f00:1]"), 403, R, {}),
        ("v6 local NAT64 metadata", u("[64:ff9b:1::a9fe:a9fe]"), 403, R, {}),
        ("v6 6to4 metadata", u("[2002:a9fe:a9fe::1]"), 403, R, {}),
        ("v6 6to4 loopback", u("[2002:7f00:1::1]"), 403, R, {}),
        ("v6 Teredo server metadata", u("[2001:0:a9fe:a9fe::1]"), 403, R, {}),
        ("v6 Teredo client loopback", u("[2001:0:c000:20a::80ff:fffe]"), 403, R, {}),
        ("v6 link-local", u("[fe80::1]"), 403, R, {}),
        ("v6 unique local", u("[fd00::5]"), 403, R, {}),
        ("v6 multicast", u("[ff02::1]"), 403, R, {}),
        # evhttp refuses this request line itself (400, no code of ours)
        ("v6 zone id", u("[fe80::1%25lo]"), 400, None, {}),
        ("v6 IPvFuture", u("[v1.x]"), 400, "bad_ipv6", {}),
        ("the mediator's own listener", "http://198.51.100.1:3128/", 403, "proxy_loop", {}),
        ("name in the hosts file: metadata", u("meta.test"), 403, R, {}),
    ]
    failed = run_cases(env, t, cases)
    # The evidence holds a deny for every literal that reached boundaryd, none an allow.
    ev = tm.evidence(env)
    if any(e["decision"] != "deny" for e in ev) or len(ev) != 41:
        failed.append("evidence: %d decisions: %r" % (len(ev), [(e["host"], e["decision"])
                                                                 for e in ev]))
    finish(env, t, failed)


def to(target, status=None, base="http://up.test:8080"):
    return "%s/to?u=%s%s" % (base, quote(target, safe=""), "&s=%d" % status if status else "")


def ssrf_redirects(env):
    """GET/HEAD redirects: each hop parsed like a client's target and
    authorized by boundaryd before its socket opens; depth bounded."""
    t = ssrf_setup(env)
    M = "http://169.254.169.254:8080/latest/meta-data?token=redirsecret"
    cases = [
        ("302 to metadata", to(M), 403, R, {}),
        ("301 to metadata", to(M, 301), 403, R, {}),
        ("303 to loopback", to("http://127.0.0.1:8080/", 303), 403, R, {}),
        ("307 to v6 loopback", to("http://[::1]:8080/", 307), 403, R, {}),
        ("308 to mapped metadata", to("http://[::ffff:169.254.169.254]:8080/", 308), 403, R, {}),
        ("HEAD 302 to metadata", to(M), 403, R, {"method": "HEAD"}),
        ("to hex loopback", to("http://0x7f.1:8080/"), 403, R, {}),
        ("to decimal loopback", to("http://2130706433:8080/"), 403, R, {}),
        ("to octal metadata", to("http://0251.0376.0251.0376:8080/"), 403, R, {}),
        ("to NAT64 metadata", to("http://[64:ff9b::a9fe:a9fe]:8080/"), 403, R, {}),
        ("to 6to4 metadata", to("http://[2002:a9fe:a9fe::1]:8080/"), 403, R, {}),
        ("to private 10/8", to("http://10.0.0.5:8080/"), 403, R, {}),
        ("to name: loopback (hosts)", to("http://loop.test:8080/"), 403, R, {}),
        ("to name: metadata (hosts)", to("http://meta.test:8080/"), 403, R, {}),
        ("to name: mixed answer (hosts)", to("http://mixed.test:8080/"), 403, R, {}),
        ("to name: loopback (DNS)", to("http://rebind.test:8080/"), 403, R, {}),
        ("to ungranted public", to("http://192.0.2.20:8080/"), 403, "not_granted", {}),
        ("scheme-relative to metadata", to("//169.254.169.254:8080/x"), 403, R, {}),
        ("to the mediator itself", to("http://198.51.100.1:3128/"), 403, "proxy_loop", {}),
        ("nested: granted, then metadata",
         to("http://up.test:8080" + to(M)[len("http://up.test:8080"):]), 403, R, {}),
        ("https upstream to metadata", to(M, base="https://secure.test:8443"), 403, R, {}),
        ("https to http loopback", to("http://127.0.0.1:8080/", base="https://secure.test:8443"),
         403, R, {}),
        ("to file:", to("file:///etc/passwd"), 502, "bad_redirect", {}),
        ("to gopher:", to("gopher://127.0.0.1:8080/_x"), 502, "bad_redirect", {}),
        ("to userinfo confusion", to("http://up.test:8080@169.254.169.254:8080/"), 502,
         "bad_redirect", {}),
        ("to backslash confusion", to("http://up.test:8080\\@169.254.169.254:8080/"), 502,
         "bad_redirect", {}),
        ("to encoded dot-segment", to("http://192.0.2.10:8080/a/%2e%2e/b"), 502,
         "bad_redirect", {}),
        ("to relative path", to("../../latest"), 502, "bad_redirect", {}),
        ("to empty Location", to(""), 502, "bad_redirect", {}),
        ("chain over max_redirects", "http://up.test:8080/chain/4", 502, "too_many_redirects", {}),
        # Successes: following is real, within the grants.
        ("chain within max_redirects (allowed)", "http://up.test:8080/chain/3", 200, None, {}),
        ("to a granted name via DNS (allowed)", to("http://pub.test:8080/ok"), 200, None, {}),
    ]
    failed = run_cases(env, t, cases)
    ev = tm.evidence(env)
    hops = [e for e in ev if e["redirect_hop"] > 0]
    meta = [e for e in hops if e["host"] == "169.254.169.254"]
    if not meta or any(e["decision"] != "deny" or "?" in e["path"] or
                       e["url"] != "http://169.254.169.254:8080/latest/meta-data?[redacted]"
                       for e in meta if e["path"] == "/latest/meta-data"):
        failed.append("redirect evidence: %r" % meta)
    if any(e["redirect_hop"] > 3 for e in ev):
        failed.append("a hop past max_redirects reached boundaryd: %r" % ev)
    blob = json.dumps(ev) + open(t.medlog).read() + env.daemon_log()
    if "redirsecret" in blob or "redirect-secret" in blob:
        failed.append("a redirect's query or cookie reached evidence or logs")
    # Every redirect source that answered was the granted upstream only.
    finish(env, t, failed)


def ssrf_dns(env):
    """Names from a DNS server in a namespace: answers mixing public and
    private addresses are denied whole; an answer that changes between
    lookups is judged per lookup and the connection is pinned to what was
    authorized."""
    t = ssrf_setup(env)
    cases = [
        ("A private", "http://priv.test:8080/", 403, R, {}),
        ("A public + A private", "http://mixedpriv.test:8080/", 403, R, {}),
        ("A public + AAAA loopback", "http://mixed46.test:8080/", 403, R, {}),
        ("AAAA NAT64 metadata", "http://meta6.test:8080/", 403, R, {}),
        ("AAAA mapped loopback", "http://mapped.test:8080/", 403, R, {}),
        ("A 0.0.0.0", "http://zero.test:8080/", 403, R, {}),
        ("A carrier NAT", "http://cgnat.test:8080/", 403, R, {}),
        ("NXDOMAIN", "http://nosuch.test:8080/", 502, "resolve_failed", {}),
        ("changing answer 1: public (allowed)", "http://flip.test:8080/one", 200, None, {}),
        ("changing answer 2: loopback", "http://flip.test:8080/two", 403, R, {}),
        ("changing answer 3: metadata", "http://flip.test:8080/three", 403, R, {}),
    ]
    failed = run_cases(env, t, cases)
    flips = [l["answer"] for l in lines(t.dnslog) if l["name"] == "flip.test" and l["type"] == "A"]
    # Exactly one lookup per request: the connection goes to the address
    # boundaryd authorized, never to a second answer (pinned).
    if flips != [["192.0.2.10"], ["127.0.0.1"], ["169.254.169.254"]]:
        failed.append("the DNS server was not asked as expected: %r" % flips)
    reqs = [l["target"] for l in lines(t.uplog) if l["event"] == "request"]
    if reqs != ["/one"]:
        failed.append("upstream saw %r" % reqs)
    ev = [e for e in tm.evidence(env) if e["host"] == "mixedpriv.test"]
    if not ev or sorted(ev[0]["addresses"]) != ["10.0.0.5", "192.0.2.10"]:
        failed.append("mixed answer evidence: %r" % ev)
    finish(env, t, failed)


def slow_client(env, t):
    """A client that sends half a request and stalls: closed by the mediator
    within its io_timeout (2 s here; the probe gives up after 10 s)."""
    code = ("import socket,time\n"
            "s=socket.create_connection(('198.51.100.1',3128),timeout=10)\n"
            "s.sendall(b'GET http://up.test:8080/slowloris HTTP/1.1\\r\\nHost: up.test:8080\\r\\n')\n"
            "t=time.monotonic()\n"
            "try:\n d=s.recv(100)\nexcept OSError:\n d=b''\n"
            "print('closed' if time.monotonic()-t<10 else 'open')\n")
    r = env.ns_run(t.ctr, ["/usr/bin/python3", "-c", code])
    return r.stdout.strip()


def ssrf_protocol(env):
    """Ambiguous paths, CONNECT, Host/authority mismatch, origin-form,
    other clients, oversized headers and bodies, slow upstreams and clients."""
    t = ssrf_setup(env, {"max_response_bytes": 4096})
    up = "http://up.test:8080"
    big = "X-Big: " + "b" * 70000
    cases = [
        ("path %2e%2e", up + "/a/%2e%2e/latest", 400, "encoded_delimiter", {}),
        ("path %2E%2E uppercase", up + "/%2E%2E/x", 400, "encoded_delimiter", {}),
        ("path %2f", up + "/a%2f..%2flatest", 400, "encoded_delimiter", {}),
        ("path %5c", up + "/a%5cb", 400, "encoded_delimiter", {}),
        ("path %25 double encoding", up + "/a%252e%252e/b", 400, "double_encoding", {}),
        ("path ..", up + "/a/../b", 400, "dot_segment", {}),
        ("path ..;", up + "/a/..;/b", 400, "dot_segment", {}),
        ("path //", up + "/a//b", 400, "empty_segment", {}),
        ("path overlong utf-8 dot", up + "/%c0%ae%c0%ae/x", 400, "bad_utf8", {}),
        ("path fullwidth solidus", up + "/a%ef%bc%8fb", 400, "bad_utf8", {}),
        ("path %00", up + "/a%00b", 400, "control_char", {}),
        ("authority userinfo", "http://up.test:8080@169.254.169.254:8080/", 400, "userinfo", {}),
        ("authority backslash", "http://up.test:8080\\@169.254.169.254:8080/", (400,), None, {}),
        ("fragment host confusion", "http://169.254.169.254:8080#@up.test:8080/", 400,
         "fragment", {}),
        ("IDNA host", "http://xn--80ak6aa92e.test:8080/", 400, "idna_host", {}),
        ("scheme file", "file:///etc/passwd", 400, "bad_scheme", {}),
        ("scheme gopher", "gopher://127.0.0.1:8080/_x", 400, "bad_scheme", {}),
        ("origin-form to metadata", "/latest/meta-data", 400, "origin_form_refused",
         {"host": "169.254.169.254:8080"}),
        ("CONNECT metadata", "169.254.169.254:8080", 405, "connect_refused", {"method": "CONNECT"}),
        ("CONNECT granted upstream", "up.test:8080", 405, "connect_refused", {"method": "CONNECT"}),
        ("CONNECT absolute", "http://up.test:8080/", 405, "connect_refused", {"method": "CONNECT"}),
        ("Host: metadata, target granted", up + "/", 400, "host_mismatch",
         {"host": "169.254.169.254:8080"}),
        ("Host: granted, target metadata", "http://169.254.169.254:8080/", 400, "host_mismatch",
         {"host": "up.test:8080"}),
        ("Host without port", up + "/", 400, "host_mismatch", {"host": "up.test"}),
        ("two Host headers", up + "/", 400, "host_mismatch",
         {"headers": ["Host: 169.254.169.254:8080"]}),
        ("no Host header", up + "/", 400, "host_missing", {"host": ""}),
        ("TRACE", up + "/", 403, "method_not_allowed", {"method": "TRACE"}),
        ("other client address", "http://169.254.169.254:8080/", 403, "client_not_allowed",
         {"source": "198.51.100.13"}),
        ("oversized request header", up + "/bigreq", (400, 413, 431), None, {"headers": [big]}),
        ("oversized request body", None, 413, None,
         {"raw": "GET %s/body HTTP/1.1\r\nHost: up.test:8080\r\nContent-Length: 5000\r\n\r\n%s"
          % (up, "y" * 5000)}),
        ("GET with a body", None, 400, "request_body_refused",
         {"raw": "GET %s/body HTTP/1.1\r\nHost: up.test:8080\r\nContent-Length: 4\r\n\r\nabcd"
          % up}),
        ("oversized response body", up + "/size/10000", 502, "response_too_large", {}),
        ("oversized response header", up + "/bighdr", 502, "upstream_failed", {}),
        ("slow upstream", up + "/slow?t=8", 504, "upstream_timeout", {}),
        # Proof that the path is real: a plain GET works, credentials stripped.
        ("plain GET (allowed)", up + "/size/100", 200, None,
         {"headers": ["Authorization: Bearer protosecret", "Cookie: c=protosecret"]}),
    ]
    failed = run_cases(env, t, cases)
    r = slow_client(env, t)
    print("case %-44s %s" % ("slow client (half a request)", "ok" if r == "closed" else "FAILED"))
    if r != "closed":
        failed.append("a stalled client was not closed: %s" % r)
    reqs = [l for l in lines(t.uplog) if l["event"] == "request"]
    targets = [l["target"] for l in reqs]
    if sorted(targets) != sorted(["/size/10000", "/bighdr", "/slow?t=8", "/size/100"]):
        failed.append("upstream saw %r" % targets)
    if "protosecret" in json.dumps(reqs):
        failed.append("a client credential went upstream: %r" % reqs)
    finish(env, t, failed)


if __name__ == "__main__":
    main({f.__name__: f for f in (ssrf_ip_literals, ssrf_redirects, ssrf_dns, ssrf_protocol)})
