#!/usr/bin/env python3
"""HTTP mediator transactions (proxy.transaction): boundaryd owns the state,
gensee-httpmediatord asks for every request and reports every response.

Topology: test_mediator.py's (documentation addresses, namespaces this case
creates), plus an initiating namespace "init" (203.0.113.5) that has its own
network and no route to the mediator:
  ctr   198.51.100.12 (the mediated client, proxy.client_address), .13 (another)
  gw    198.51.100.1:3128 (mediator), 192.0.2.1; boundaryd and the mediator
  ext   192.0.2.10:8080 (up.test, in scope under /v1/data), 192.0.2.20:8080
  init  203.0.113.5 (the initiating workload's own network, nothing else)
Every listener logs each connection and request: "refused" is proven by the
upstream having seen nothing.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time

import test_mediator as tm
from harness import Failure, check, main

OP = tm.OP
TX = {"effect": "external_http_read",
      "scopes": [{"scheme": "http", "authority": "up.test:8080", "path_prefix": "/v1/data"}],
      "max_ttl_seconds": 120, "max_requests": 50, "max_request_bytes": 65536,
      "max_response_bytes": 1048576}


def setup(env, tx=None, before_mediator=None, proxy_more=None):
    # Seed 001's envelope: the mediated client may reach the mediator and
    # nothing else; the transaction's scope is the upstream's authority.
    t = tm.setup(env, proxy_extra=dict({"transaction": dict(TX, **(tx or {}))},
                                       **(proxy_more or {})),
                 grants=[{"destination": "198.51.100.1", "protocol": "tcp", "ports": [3128]}],
                 before_mediator=before_mediator)
    t.sup = os.path.join(env.state, "network-operations", OP, "supervisor.sock")
    return t


def txcli(env, step, txid, op=OP, sock=None, *extra):
    return env.gensee("run", "network", "transaction-" + step, "--socket", sock or
                      os.path.join(env.state, "network-operations", OP, "supervisor.sock"),
                      "--transaction", txid, "--operation", op, *extra, as_root=True)


def ok(r, what):
    check(r.returncode == 0, "%s: rc %d\n%s%s" % (what, r.returncode, r.stdout, r.stderr))


def refused(r, code, what):
    check(r.returncode == 1 and (": %s:" % code) in r.stderr,
          "%s: want %s, got rc %d %s" % (what, code, r.returncode, r.stderr))


def refusal(r):
    return r["headers"].get("x-gensee-refusal")


def jsonl(env, name):
    p = os.path.join(env.state, "network-operations", OP, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip()]


def requests_seen(t):
    return [l["target"] for l in tm.upstream_lines(t.uplog) if l["event"] == "request"]


def begin_active(env, txid, ttl="60"):
    ok(txcli(env, "begin", txid, OP, None, "--effect", "external_http_read",
             "--ttl-seconds", ttl), "begin " + txid)
    ok(txcli(env, "activate", txid), "activate " + txid)


def transaction_lifecycle(env):
    """Inactive until a transaction is active; the scope, the state and the
    one-use id decide; ended means inactive again. Evidence correlates."""
    t = setup(env)
    r = tm.get(env, t, "http://up.test:8080/v1/data/a")
    check(r["status"] == 403 and refusal(r) == "transaction_required", "no transaction: %r" % r)
    ok(txcli(env, "begin", "http_tx_1", OP, None, "--effect", "external_http_read",
             "--ttl-seconds", "60"), "begin")
    r = tm.get(env, t, "http://up.test:8080/v1/data/a")
    check(r["status"] == 403 and refusal(r) == "transaction_required", "prepared: %r" % r)
    ok(txcli(env, "activate", "http_tx_1"), "activate")
    # (--check-close: the client waits to see whether the mediator closes the connection)
    r = tm.get(env, t, "http://up.test:8080/v1/data/a?q=querysecret", source="198.51.100.12")
    check(r["status"] == 200 and r["body"] == "hello from 192.0.2.10\n",
          "active: %r\n%s" % (r, open(t.medlog).read()))
    check("set-cookie" not in r["headers"], "held response lost the header allowlist: %r" % r)
    check(r["closed"], "the client connection stayed open after the response: %r" % r)
    check(requests_seen(t) == ["/v1/data/a?q=querysecret"], "upstream: %r" % requests_seen(t))
    # Outside the scope, or ambiguous: refused before any upstream socket.
    for url in ("http://up.test:8080/v1/database", "http://up.test:8080/v1/data-x",
                "http://up.test:8080/v2/data", "http://192.0.2.10:8080/v1/data",
                "http://up.test:8080/v1/data/%2e%2e/v2", "http://up.test:8080/v1/data/%2fx",
                "http://up.test:8080/v1/data/%252e%252e/x", "http://up.test:8080/v1/data/x;/..;/y"):
        r = tm.get(env, t, url)
        check(r["status"] in (400, 403), "%s: %r" % (url, r))
        if r["status"] == 403:
            check(refusal(r) == "out_of_scope", "%s: %r" % (url, r))
    check(requests_seen(t) == ["/v1/data/a?q=querysecret"], "upstream: %r" % requests_seen(t))
    # Only the mediated client: the other address of ctr is refused.
    r = tm.get(env, t, "http://up.test:8080/v1/data/b", source="198.51.100.13")
    check(r["status"] == 403 and refusal(r) == "client_not_allowed", "other client: %r" % r)
    # Lifecycle refusals, each with its stable code.
    refused(txcli(env, "begin", "http_tx_2"), "transaction_in_progress", "second begin")
    refused(txcli(env, "activate", "http_tx_1"), "wrong_state", "activate twice")
    refused(txcli(env, "end", "http_tx_1", "op_other"), "not_authorized", "wrong operation")
    refused(txcli(env, "end", "http_tx_9"), "unknown_transaction", "unknown id")
    ok(txcli(env, "end", "http_tx_1"), "end")
    r = tm.get(env, t, "http://up.test:8080/v1/data/c")
    check(r["status"] == 403 and refusal(r) == "transaction_required", "after end: %r" % r)
    refused(txcli(env, "begin", "http_tx_1"), "transaction_replayed", "replayed id")
    refused(txcli(env, "activate", "http_tx_1"), "wrong_state", "activate ended")
    refused(txcli(env, "begin", "http_tx_2", OP, None, "--effect", "external_http_write"),
            "wrong_effect", "wrong effect")
    refused(txcli(env, "begin", "http_tx_2", OP, None, "--ttl-seconds", "121"),
            "ttl_exceeds_ceiling", "ttl over the ceiling")
    # Through boundary.sock too, with the operation named.
    ok(txcli(env, "begin", "http_tx_2", OP, env.boundary_sock), "begin on boundary.sock")
    ok(txcli(env, "revoke", "http_tx_2", OP, env.boundary_sock), "revoke on boundary.sock")
    check(requests_seen(t) == ["/v1/data/a?q=querysecret"], "upstream: %r" % requests_seen(t))
    # Evidence: lifecycle and decisions, the transaction id in all three files.
    ev = jsonl(env, "http-transactions.jsonl")
    types = [e["type"] for e in ev]
    for want in ("http_transaction_begun", "http_transaction_activated",
                 "http_transaction_request", "http_transaction_response",
                 "http_transaction_ended", "http_transaction_refused",
                 "http_transaction_revoked"):
        check(want in types, "%s missing from http-transactions.jsonl: %r" % (want, types))
    allowed = [e for e in ev if e["type"] == "http_transaction_request" and e["result"] == "ok"
               and e["stage"] == "connect"]
    # Every allowed connect was preceded by its pre-resolution check.
    pre = [e for e in ev if e["type"] == "http_transaction_request" and e["result"] == "ok"
           and e["stage"] == "resolve"]
    check(len(pre) == 1 and pre[0]["path"] == "/v1/data/a", "resolve-stage evidence: %r" % pre)
    check(len(allowed) == 1 and allowed[0]["transaction_id"] == "http_tx_1" and
          allowed[0]["path"] == "/v1/data/a", "allowed request evidence: %r" % allowed)
    scoped = [e for e in ev if e["type"] == "http_transaction_request" and
              e["result"] == "out_of_scope"]
    check(len(scoped) >= 4, "out_of_scope evidence: %r" % scoped)
    med = [e for e in tm.evidence(env) if e["decision"] == "allow" and e["stage"] == "connect"]
    check(len(med) == 1 and med[0]["transaction_id"] == "http_tx_1", "http-mediator: %r" % med)
    eff = [e for e in jsonl(env, "effects.jsonl") if e.get("kind") == "http_transaction_effect"]
    check(len(eff) == 1 and eff[0]["transaction_id"] == "http_tx_1" and eff[0]["delivered"] and
          eff[0]["status"] == 200 and eff[0]["response_bytes"] == 22, "effects: %r" % eff)
    st = json.load(open(os.path.join(env.state, "network-operations", OP,
                                     "http-transactions.json")))
    check(st["used_ids"] == ["http_tx_1", "http_tx_2"] and
          st["current"]["state"] == "revoked", "state file: %r" % st)
    blob = json.dumps(ev) + json.dumps(tm.evidence(env)) + env.daemon_log()
    check("querysecret" not in blob, "query value in evidence")


def transaction_control_is_root_only(env):
    """The initiating workload (any non-root user) cannot reach the lifecycle:
    supervisor.sock refuses it, boundary.sock refuses it, client.sock does
    not have the methods; the mediator's uid cannot either."""
    t = setup(env)
    params = {"operation_id": OP, "transaction_id": "http_tx_u"}
    for sock in (t.sup, env.boundary_sock):
        r = env.user_call(sock, "transaction.begin", params)
        check("oserror" in r or r.get("error", {}).get("code") == "not_authorized",
              "%s answered the test user: %r" % (sock, r))
    r = env.user_call(env.client_sock, "transaction.begin", params)
    check(r.get("error", {}).get("code") == "not_authorized", "client.sock: %r" % r)
    r = tm.call_as(env, os.path.join(env.runtime, "mediator.sock"), t.uid, t.uid,
                   "transaction.begin", params)
    check(r.get("error", {}).get("code") == "not_authorized", "mediator.sock: %r" % r)
    # Nothing was begun by any of them.
    check(not os.path.exists(os.path.join(env.state, "network-operations", OP,
                                          "http-transactions.json")), "state written")


def transaction_topology(env):
    """The initiating subject has no route to the mediator (before, during
    and after a transaction); the mediated subject cannot reach the upstream
    directly; only the mediated subject uses the mediator while active."""
    t = setup(env)
    init = env.add_netns("init")
    subprocess.run(["ip", "link", "add", "mi0", "netns", init, "type", "veth", "peer", "name",
                    "mi1", "netns", t.gw], check=True)
    env.ns_run(init, ["ip", "addr", "add", "203.0.113.5/24", "dev", "mi0"])
    env.ns_run(t.gw, ["ip", "addr", "add", "203.0.113.1/24", "dev", "mi1"])
    env.ns_run(init, ["ip", "link", "set", "mi0", "up"])
    env.ns_run(t.gw, ["ip", "link", "set", "mi1", "up"])

    def init_probe(what):
        r = env.ns_run(init, ["/usr/bin/python3", "-c",
                              "import socket,sys\ns=socket.socket();s.settimeout(3)\n"
                              "try:\n s.connect(('198.51.100.1',3128));print('connected')\n"
                              "except OSError as e:\n print(type(e).__name__)"], check=False)
        check("connected" not in r.stdout, "initiating subject reached the mediator %s" % what)

    def direct_probe(what):
        for dst in ("192.0.2.10", "192.0.2.20"):
            r = env.ns_run(t.ctr, ["/usr/bin/python3", "-c",
                                   "import socket\ns=socket.socket();s.settimeout(3)\n"
                                   "s.bind(('198.51.100.12',0))\n"
                                   "try:\n s.connect(('%s',8080));print('connected')\n"
                                   "except OSError as e:\n print(type(e).__name__)" % dst],
                           check=False)
            check(r.stdout.strip() in ("ConnectionRefusedError", "TimeoutError", "timeout"),
                  "mediated subject %s -> %s: %r %r" % (what, dst, r.stdout, r.stderr))

    # Give the mediated subject a route through gw (forwarding on, in gw
    # only): only the operation's nftables policy stands between it and
    # the upstream now.
    env.ns_run(t.ctr, ["ip", "route", "add", "default", "via", "198.51.100.1"])
    env.ns_run(t.gw, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
    init_probe("before")
    direct_probe("before")
    begin_active(env, "http_tx_t")
    init_probe("during")
    direct_probe("during")
    r = tm.get(env, t, "http://up.test:8080/v1/data/t")
    check(r["status"] == 200, "mediated during: %r" % r)
    r = tm.get(env, t, "http://up.test:8080/v1/data/t", source="198.51.100.13")
    check(r["status"] == 403, "other subject during: %r" % r)
    ok(txcli(env, "revoke", "http_tx_t"), "revoke")
    init_probe("after")
    direct_probe("after")
    r = tm.get(env, t, "http://up.test:8080/v1/data/t")
    check(r["status"] == 403 and refusal(r) == "transaction_required", "after revoke: %r" % r)
    check(requests_seen(t) == ["/v1/data/t"], "upstream: %r" % requests_seen(t))
    # Going around the topology: give init a route to the mediator during a
    # transaction. The mediator's peer check still refuses it (403 and close).
    env.ns_run(init, ["ip", "route", "add", "default", "via", "203.0.113.1"])
    begin_active(env, "http_tx_t2")
    r = env.ns_run(init, ["/usr/bin/python3", env.tool("httpclient.py"), "198.51.100.1", "3128"],
                   input="GET http://up.test:8080/v1/data/i HTTP/1.1\r\nHost: up.test:8080\r\n\r\n")
    r = json.loads(r.stdout)
    check(r["status"] == 403 and refusal(r) == "client_not_allowed", "init routed: %r" % r)
    # The upstream saw connections from the mediator only (192.0.2.1), never ctr or init.
    peers = {l["peer"] for l in tm.upstream_lines(t.uplog) if l["event"] == "connect"}
    check(peers == {"192.0.2.1"}, "upstream peers: %r" % peers)


def transaction_budgets(env):
    """Cumulative request count and response bytes from the config."""
    t = setup(env, {"max_requests": 3, "max_response_bytes": 30})
    begin_active(env, "http_tx_b")
    r = tm.get(env, t, "http://up.test:8080/v1/data/1")
    check(r["status"] == 200, "first: %r" % r)
    # 8 bytes of response budget left: the 22-byte body is over it.
    r = tm.get(env, t, "http://up.test:8080/v1/data/2")
    check(r["status"] == 502 and refusal(r) == "response_too_large", "second: %r" % r)
    r = tm.get(env, t, "http://up.test:8080/v1/data/3")
    check(r["status"] == 200 or refusal(r) in ("response_too_large",), "third: %r" % r)
    r = tm.get(env, t, "http://up.test:8080/v1/data/4")
    check(r["status"] == 403 and refusal(r) == "request_budget_exhausted", "fourth: %r" % r)
    check(len(requests_seen(t)) == 3, "upstream: %r" % requests_seen(t))


def transaction_ttl_expiry(env):
    """The TTL starts at begin; expiry removes access without any call."""
    t = setup(env)
    ok(txcli(env, "begin", "http_tx_e", OP, None, "--ttl-seconds", "3"), "begin")
    ok(txcli(env, "activate", "http_tx_e"), "activate")
    r = tm.get(env, t, "http://up.test:8080/v1/data/e")
    check(r["status"] == 200, "before expiry: %r" % r)
    env.wait_for("the expiry evidence", lambda: any(
        e["type"] == "http_transaction_expired" for e in jsonl(env, "http-transactions.jsonl")),
        timeout=10)
    r = tm.get(env, t, "http://up.test:8080/v1/data/e2")
    check(r["status"] == 403 and refusal(r) == "transaction_expired", "after expiry: %r" % r)
    refused(txcli(env, "end", "http_tx_e"), "transaction_expired", "end after expiry")
    # A prepared transaction expires too: activation after the TTL is refused.
    ok(txcli(env, "begin", "http_tx_p", OP, None, "--ttl-seconds", "1"), "begin prepared")
    time.sleep(1.5)
    refused(txcli(env, "activate", "http_tx_p"), "transaction_expired", "late activate")
    check(requests_seen(t) == ["/v1/data/e"], "upstream: %r" % requests_seen(t))


def slow_get(env, t, out):
    try:
        out.append(tm.get(env, t, "http://up.test:8080/v1/data/slow"))
    except Exception as e:  # noqa: BLE001 - reported by the caller
        out.append({"exception": repr(e)})


def transaction_revoke_cuts_inflight(env):
    """Revocation during an upstream exchange: the client gets no response
    (refused, connection closed) and the upstream socket is closed at once;
    a response finishing after revoke is not returned."""
    t = setup(env)
    begin_active(env, "http_tx_r")
    out = []
    th = threading.Thread(target=slow_get, args=(env, t, out))
    th.start()
    env.wait_for("the slow request upstream", lambda: "/v1/data/slow" in requests_seen(t))
    t0 = time.monotonic()
    ok(txcli(env, "revoke", "http_tx_r"), "revoke")
    th.join(timeout=30)
    check(not th.is_alive() and out, "client still waiting")
    r = out[0]
    check(r.get("status") == 403 and refusal(r) == "transaction_closed" and
          "hello" not in r.get("body", ""), "in-flight client after revoke: %r" % r)
    check(time.monotonic() - t0 < 3.5, "the client waited for the upstream")
    check("transaction http_tx_r revoked: closing its requests" in open(t.medlog).read(),
          "mediator did not act on the event:\n" + open(t.medlog).read())
    # And with the mediator unaware (event lost): boundaryd refuses the late response.
    begin_active(env, "http_tx_r2")
    pw_uid = t.uid
    sock = os.path.join(env.runtime, "mediator.sock")
    base = {"operation_id": OP, "client_address": "198.51.100.12", "method": "GET",
            "scheme": "http", "host": "up.test", "port": 8080, "path": "/v1/data/z",
            "addresses": ["192.0.2.10"]}
    a = tm.call_as(env, sock, pw_uid, pw_uid, "mediator.authorize", withurl(base))["result"]
    check(a["decision"] == "allow" and a["reservation"] > 0 and a["transaction_id"] ==
          "http_tx_r2", "authorize: %r" % a)
    b = tm.call_as(env, sock, pw_uid, pw_uid, "mediator.authorize", withurl(base))["result"]
    check(b["decision"] == "deny" and b["reason"] == "reservation_in_flight", "second: %r" % b)
    ok(txcli(env, "revoke", "http_tx_r2"), "revoke 2")
    c = tm.call_as(env, sock, pw_uid, pw_uid, "mediator.complete",
                   {"operation_id": OP, "transaction_id": "http_tx_r2",
                    "reservation": a["reservation"], "response_bytes": 77, "status": 200})
    check(c["result"] == {"deliver": False, "reason": "http_transaction_late_response_denied"},
          "late response: %r" % c)
    late = [e for e in jsonl(env, "http-transactions.jsonl")
            if e["type"] == "http_transaction_late_response_denied"]
    check(len(late) == 1 and late[0]["response_bytes"] == 77 and
          late[0]["transaction_id"] == "http_tx_r2", "late evidence: %r" % late)


def transaction_crash_keeps_reservation(env):
    """A boundaryd crash with a reservation in flight leaves it reserved:
    after the restart the transaction refuses further requests (fail closed)
    until it is revoked or expires; the one-use ids survive too."""
    t = setup(env)
    begin_active(env, "http_tx_c")
    sock = os.path.join(env.runtime, "mediator.sock")
    base = {"operation_id": OP, "client_address": "198.51.100.12", "method": "GET",
            "scheme": "http", "host": "up.test", "port": 8080, "path": "/v1/data/c",
            "addresses": ["192.0.2.10"]}
    a = tm.call_as(env, sock, t.uid, t.uid, "mediator.authorize", withurl(base))["result"]
    check(a["decision"] == "allow" and a["reservation"] > 0, "authorize: %r" % a)
    env.kill9()
    env.start(args=["--mediator-user", tm.MEDIATOR_USER])
    env.wait_for("the mediator to reconnect", lambda: "result" in tm.call_as(
        env, sock, t.uid, t.uid, "mediator.config"))
    b = tm.call_as(env, sock, t.uid, t.uid, "mediator.authorize", withurl(base))["result"]
    check(b["decision"] == "deny" and b["reason"] == "reservation_in_flight",
          "after the crash: %r" % b)
    env.wait_for("the mediator to reconnect", lambda: open(t.medlog).read().count(
        "connected to boundaryd in") >= 1, timeout=20)
    r = tm.get(env, t, "http://up.test:8080/v1/data/after")
    check(r["status"] == 403 and refusal(r) == "reservation_in_flight", "through the mediator: %r" % r)
    refused(txcli(env, "begin", "http_tx_c"), "transaction_replayed", "replay after restart")
    ok(txcli(env, "revoke", "http_tx_c"), "revoke after restart")
    begin_active(env, "http_tx_c2")
    r = tm.get(env, t, "http://up.test:8080/v1/data/new")
    check(r["status"] == 200, "a new transaction: %r" % r)
    check(requests_seen(t) == ["/v1/data/new"], "upstream: %r" % requests_seen(t))


def transaction_state_tampered_denies(env):
    """A state file that does not restore strictly (here: a deadline moved
    past begin + ttl) makes every request and begin fail closed."""
    t = setup(env)
    begin_active(env, "http_tx_s")
    env.stop()
    p = os.path.join(env.state, "network-operations", OP, "http-transactions.json")
    st = json.load(open(p))
    st["current"]["deadline_ms"] += 3600 * 1000
    with open(p, "w") as f:
        json.dump(st, f)
    env.start(args=["--mediator-user", tm.MEDIATOR_USER])
    sock = os.path.join(env.runtime, "mediator.sock")
    base = {"operation_id": OP, "client_address": "198.51.100.12", "method": "GET",
            "scheme": "http", "host": "up.test", "port": 8080, "path": "/v1/data/c",
            "addresses": ["192.0.2.10"]}
    b = tm.call_as(env, sock, t.uid, t.uid, "mediator.authorize", withurl(base))["result"]
    check(b["decision"] == "deny" and b["reason"] == "transaction_state_unavailable",
          "tampered state: %r" % b)
    refused(txcli(env, "begin", "http_tx_s2"), "transaction_state_unavailable", "begin")
    refused(txcli(env, "revoke", "http_tx_s"), "transaction_state_unavailable", "revoke")
    env.wait_for("the mediator to reconnect", lambda: open(t.medlog).read().count(
        "connected to boundaryd in") >= 1, timeout=20)
    r = tm.get(env, t, "http://up.test:8080/v1/data/s")
    check(r["status"] == 403 and refusal(r) == "transaction_state_unavailable",
          "through the mediator: %r" % r)
    check(requests_seen(t) == [], "upstream: %r" % requests_seen(t))


def transaction_evidence_loss_marked(env):
    """The lifecycle audit cannot be appended (http-transactions.jsonl is a
    directory here): the committed transition stands (not reported as
    denied) and the operation is marked as having incomplete evidence."""
    t = setup(env)
    os.mkdir(os.path.join(env.state, "network-operations", OP, "http-transactions.jsonl"))
    before = env.record(OP)["counts"]["violations"]
    begin_active(env, "http_tx_v")
    r = tm.get(env, t, "http://up.test:8080/v1/data/v")
    check(r["status"] == 200, "request: %r" % r)
    ins = env.root_call("network.inspect", {"operation_id": OP})["result"]["http_transaction"]
    check(ins["evidence_incomplete"] is True and ins["current"]["state"] == "active" and
          ins["current"]["requests"] == 1, "inspect: %r" % ins)
    st = json.load(open(os.path.join(env.state, "network-operations", OP,
                                     "http-transactions.json")))
    check(st["evidence_incomplete"] is True, "state file: %r" % st)
    check(env.record(OP)["counts"]["violations"] == before + 1, "violation not counted once")
    check("http_transaction_evidence_incomplete" in env.daemon_log(), "not logged")


def withurl(p):
    """mediator.authorize carries the canonical URL boundaryd re-parses
    (main's data path); it must agree with the split fields."""
    return dict(p, url="%s://%s:%d%s" % (p["scheme"], p["host"], p["port"], p["path"]))


def transaction_redirect_hops(env):
    """The boundaryd API for redirect hops (the mediator's data path asks
    it per hop): a hop must name the transaction its first request was in,
    consumes another request, and is scope-checked like the first."""
    t = setup(env, {"max_requests": 3})
    begin_active(env, "http_tx_h")
    sock = os.path.join(env.runtime, "mediator.sock")
    base = {"operation_id": OP, "client_address": "198.51.100.12", "method": "GET",
            "scheme": "http", "host": "up.test", "port": 8080, "path": "/v1/data/h",
            "addresses": ["192.0.2.10"]}

    def authz(**kw):
        return tm.call_as(env, sock, t.uid, t.uid, "mediator.authorize", withurl(dict(base, **kw)))["result"]

    def complete(res):
        c = tm.call_as(env, sock, t.uid, t.uid, "mediator.complete",
                       {"operation_id": OP, "transaction_id": "http_tx_h",
                        "reservation": res["reservation"], "response_bytes": 0,
                        "status": 302})["result"]
        check(c["deliver"] is True, "complete: %r" % c)
    a = authz()
    check(a["decision"] == "allow", "first: %r" % a)
    complete(a)
    for kw, reason in (({"redirect_hop": 1}, "transaction_changed"),
                       ({"redirect_hop": 1, "transaction_id": "http_tx_other"}, "transaction_changed"),
                       ({"redirect_hop": 1, "transaction_id": "http_tx_h", "path": "/v2/x"}, "out_of_scope"),
                       ({"redirect_hop": 1, "transaction_id": "http_tx_h", "host": "other.test"},
                        "out_of_scope")):
        b = authz(**kw)
        check(b["decision"] == "deny" and b["reason"] == reason, "%r: %r" % (kw, b))
    b = authz(redirect_hop=1, transaction_id="http_tx_h", path="/v1/data/h2")
    check(b["decision"] == "allow", "hop: %r" % b)
    complete(b)
    c = authz(redirect_hop=2, transaction_id="http_tx_h", path="/v1/data/h3")
    check(c["decision"] == "allow", "hop 2: %r" % c)
    complete(c)
    d = authz(redirect_hop=3, transaction_id="http_tx_h", path="/v1/data/h4")
    check(d["decision"] == "deny" and d["reason"] == "request_budget_exhausted",
          "hops consume requests: %r" % d)
    ev = [e for e in jsonl(env, "http-transactions.jsonl")
          if e["type"] == "http_transaction_request" and e["result"] == "ok"]
    check([e["hop"] for e in ev] == [0, 1, 2], "evidence hops: %r" % ev)


def transaction_mediator_follows_redirects(env):
    """Through the real mediator: a GET redirect inside a transaction is
    accounted (mediator.complete), then followed as a new hop of the same
    transaction: scope-checked before its name is resolved, a request of
    the budget each; its 3xx never reaches the client. A hop out of scope
    or past the budget is refused and never reaches its upstream."""
    t = setup(env, {"max_requests": 3})
    begin_active(env, "http_tx_rd")
    r = tm.get(env, t, "http://up.test:8080/v1/data/chain/1")
    check(r["status"] == 200 and "hello from 192.0.2.10" in r.get("body", "") and
          "set-cookie" not in r["headers"], "followed: %r" % r)
    check(requests_seen(t) == ["/v1/data/chain/1", "/v1/data/chain/0"],
          "upstream: %r" % requests_seen(t))
    ev = [e for e in jsonl(env, "http-transactions.jsonl")
          if e["type"] == "http_transaction_request" and e["result"] == "ok" and
          e["stage"] == "connect"]
    check([(e["hop"], e["transaction_id"]) for e in ev] == [(0, "http_tx_rd"), (1, "http_tx_rd")],
          "hops: %r" % ev)
    resp = [e for e in jsonl(env, "http-transactions.jsonl")
            if e["type"] == "http_transaction_response"]
    check([e["status"] for e in resp] == [302, 200], "responses: %r" % resp)
    # The third request is the budget's last: its redirect hop is refused.
    r = tm.get(env, t, "http://up.test:8080/v1/data/chain/5")
    check(r["status"] == 403 and refusal(r) == "request_budget_exhausted" and
          "set-cookie" not in r["headers"], "past the budget: %r" % r)
    check(requests_seen(t)[2:] == ["/v1/data/chain/5"], "upstream: %r" % requests_seen(t))
    ok(txcli(env, "revoke", "http_tx_rd"), "revoke")
    # A hop out of scope: refused before the name is resolved.
    begin_active(env, "http_tx_rd2")
    r = tm.get(env, t, "http://up.test:8080/v1/data/to?u=http://other.test:8080/v1/data/x")
    check(r["status"] == 403 and refusal(r) == "out_of_scope" and
          "set-cookie" not in r["headers"], "out-of-scope hop: %r" % r)
    check(all(l["local"] != "192.0.2.20" for l in tm.upstream_lines(t.uplog)),
          "the out-of-scope upstream was reached")
    pre = [e for e in jsonl(env, "http-transactions.jsonl")
           if e["type"] == "http_transaction_request" and e["host"] == "other.test"]
    check(len(pre) == 1 and pre[0]["stage"] == "resolve" and pre[0]["hop"] == 1 and
          pre[0]["result"] == "out_of_scope", "evidence: %r" % pre)


DNSLOG = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("192.0.2.10", 53))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(4096)
    with open(sys.argv[1], "a") as f:
        f.write(data.hex() + "\n")
"""


def transaction_scope_before_dns(env):
    """The scope is checked before the mediator resolves a name: a name
    outside every scope (here: data smuggled into a label) is never sent to
    the resolver. A listener on the configured nameserver logs every query;
    an in-scope unknown name proves it is asked."""
    dnslog = {}

    def dns(t):
        t.dnslog = os.path.join(t.dir, "dns.log")
        open(t.dnslog, "w").close()
        t.resolv = os.path.join(t.dir, "resolv.conf")
        with open(t.resolv, "w") as f:
            f.write("nameserver 192.0.2.10\noptions timeout:1 attempts:1\n")
        os.chmod(t.resolv, 0o644)
        p = subprocess.Popen(env.ns_prefix(t.ext) + ["/usr/bin/python3", "-c", DNSLOG, t.dnslog],
                             stdout=subprocess.PIPE, text=True)
        env.children.append(p)
        check(p.stdout.readline().strip() == "ready", "dns logger did not start")
        dnslog["path"] = t.dnslog
    t = setup(env, {"scopes": TX["scopes"] + [{"scheme": "http", "authority": "dns.test:8080",
                                               "path_prefix": "/v1"}]}, before_mediator=dns)
    begin_active(env, "http_tx_d")
    r = tm.get(env, t, "http://c2VjcmV0.exfil.test:8080/v1/data")
    check(r["status"] == 403 and refusal(r) == "out_of_scope", "out-of-scope name: %r" % r)
    r = tm.get(env, t, "http://up.test:8080/v2/other")
    check(r["status"] == 403 and refusal(r) == "out_of_scope", "out-of-scope path: %r" % r)
    time.sleep(1)
    check(open(t.dnslog).read() == "", "the resolver was asked: %r" % open(t.dnslog).read())
    # In scope and not in the hosts file: asked (the listener works), no answer.
    r = tm.get(env, t, "http://dns.test:8080/v1/x")
    check(r["status"] in (502, 504), "in-scope unknown name: %r" % r)
    env.wait_for("the in-scope query", lambda: open(t.dnslog).read() != "", timeout=10)
    # (evdns mixes the case of the name: DNS 0x20)
    check(bytes.fromhex(open(t.dnslog).read().split()[0]).lower().find(b"\x03dns\x04test") > 0,
          "query: %r" % open(t.dnslog).read())
    ev = [e for e in jsonl(env, "http-transactions.jsonl") if e["type"] == "http_transaction_request"]
    pre = [e for e in ev if e["stage"] == "resolve" and e["host"] == "c2vjcmv0.exfil.test"]
    check(len(pre) == 1 and pre[0]["result"] == "out_of_scope", "evidence: %r" % ev)
    check(requests_seen(t) == [], "upstream: %r" % requests_seen(t))



def sanitized():
    """Is this the -Dsanitize=true tree?"""
    p = os.path.join(os.environ["GENSEE_BUILD_ROOT"], "meson-info", "intro-buildoptions.json")
    with open(p) as f:
        return any(o["name"] == "sanitize" and o["value"] for o in json.load(f))


def closed(h, what, seconds=10):
    """h's connection ended (EOF or reset) within seconds, with nothing sent to it."""
    w = h.wait_closed(seconds)
    check(w["closed"] in ("eof", "reset") and w["data"] == "",
          "%s: not shut down: %r" % (what, w))


def transaction_revoke_closes_connections(env):
    """Revocation (and end) shuts down every accepted client connection of the
    operation at once: idle (connected, nothing sent), mid-request (headers
    still being read), and one accepted before the revoke that sends its
    request right after (refused: never 200, nothing upstream). A request
    written afterwards never reaches the upstream. Another operation's
    proxy connection stays open and keeps serving."""
    t = setup(env, proxy_more=tm.LONG_IDLE)
    tm.start_other_op(env, t)
    begin_active(env, "http_tx_c")
    r = tm.get(env, t, "http://up.test:8080/v1/data/before")
    check(r["status"] == 200, "while active: %r" % r)
    fds = tm.mediator_fds(t)
    idle = tm.Held(env, t)
    half = tm.Held(env, t)
    check(half.send("GET http://up.test:8080/v1/data/half HTTP/1.1\r\nHost: up.test:8080\r\n")
          ["sent"], "half request")
    late = tm.Held(env, t)
    theirs = tm.Held(env, t, source="198.51.100.13", port=3129)
    ok(txcli(env, "revoke", "http_tx_c"), "revoke")
    # The attacker's angle: the request races the shutdown; it loses either way.
    late.send(tm.raw_get("http://up.test:8080/v1/data/late"))
    got = late.read(10)
    check(got["closed"] in ("eof", "reset") and tm.status_of(got["data"]) in (None, 403) and
          "hello" not in got["data"], "late request on an accepted connection: %r" % got)
    closed(idle, "idle connection")
    closed(half, "half-read request")
    idle.send(tm.raw_get("http://up.test:8080/v1/data/after"))
    got = idle.read(3)
    check(tm.status_of(got["data"]) is None, "a request after the shutdown answered: %r" % got)
    check(requests_seen(t) == ["/v1/data/before"], "upstream: %r" % requests_seen(t))
    log = open(t.medlog).read()
    check("transaction http_tx_c revoked: closing its requests" in log and
          "transaction_closed:" in log, "mediator did not act on the event:\n" + log)
    # The other operation's connection was not touched: it still serves.
    check(theirs.send(tm.raw_get("http://up.test:8080/other/ok"))["sent"], "other op send")
    got = theirs.read(10)
    check(tm.status_of(got["data"]) == 200 and "hello from 192.0.2.10" in got["data"],
          "the other operation's connection: %r" % got)
    check(requests_seen(t) == ["/v1/data/before", "/other/ok"], "upstream: %r" % requests_seen(t))
    # Ending a transaction (success) shuts its connections down the same way.
    begin_active(env, "http_tx_c2")
    idle2 = tm.Held(env, t)
    ok(txcli(env, "end", "http_tx_c2"), "end")
    closed(idle2, "idle connection at end")
    check("transaction http_tx_c2 ended: closing its requests" in open(t.medlog).read(),
          "mediator did not act on the end")
    # The revoke closed idle and half (late may have been refused first) on the mediator's side.
    m = re.search(r"transaction_closed: (\d+) requests refused, (\d+) other client "
                  r"connections closed", open(t.medlog).read())
    check(m and int(m.group(2)) >= 2, "shutdown count: %r" % (m and m.group(0)))
    # Every socket the shutdowns closed is gone from the mediator, not merely half-closed.
    env.wait_for("the mediator's sockets to close", lambda: tm.mediator_fds(t) <= fds, timeout=10)
    # A clean stop with a tracked connection still open: freed with its proxy
    # (under the sanitizers, a leak or a bad free fails the exit status).
    still = tm.Held(env, t, source="198.51.100.13", port=3129)
    t.med.send_signal(signal.SIGTERM)
    rc = t.med.wait(timeout=20)
    # "stopped" is logged after every proxy and connection is freed. In the
    # sanitizer tree LeakSanitizer's exit-time scan needs system calls the
    # mediator's seccomp filter refuses (SIGSYS after "stopped"); ASan's own
    # reports land in the log, which the harness scans.
    check((rc == 0 or (sanitized() and rc == -signal.SIGSYS)) and
          "stopped" in open(t.medlog).read(),
          "mediator stop: rc %d\n%s" % (rc, open(t.medlog).read()[-3000:]))
    closed(still, "a connection open when the mediator stopped")
    for h in (idle, half, late, theirs, idle2, still):
        h.close()


def transaction_expiry_closes_connections(env):
    """TTL expiry shuts down an idle accepted connection without any call;
    a request written on it afterwards never reaches the upstream."""
    t = setup(env, proxy_more=tm.LONG_IDLE)
    ok(txcli(env, "begin", "http_tx_x", OP, None, "--ttl-seconds", "3"), "begin")
    ok(txcli(env, "activate", "http_tx_x"), "activate")
    idle = tm.Held(env, t)
    closed(idle, "idle connection at expiry", 15)
    check(any(e["type"] == "http_transaction_expired" and e["transaction_id"] == "http_tx_x"
              for e in jsonl(env, "http-transactions.jsonl")), "no expiry evidence")
    idle.send(tm.raw_get("http://up.test:8080/v1/data/after"))
    got = idle.read(3)
    check(tm.status_of(got["data"]) is None, "a request after expiry answered: %r" % got)
    check(requests_seen(t) == [], "upstream: %r" % requests_seen(t))
    check("transaction http_tx_x expired: closing its requests" in open(t.medlog).read(),
          "mediator did not act on the expiry:\n" + open(t.medlog).read())
    idle.close()


def transaction_lease_end_releases_reservation(env):
    """A mediator lease revoked while a transactional request is upstream:
    the request is cut at once (403 mediator_lease_closed, the pinned
    socket closed) and its reservation handed back, so the still-active
    transaction serves the next request instead of refusing every one
    (reservation_in_flight) until it ends."""
    t = setup(env, proxy_more=tm.LONG_IDLE)
    begin_active(env, "http_tx_l")
    g = env.gensee("run", "network", "grant-http", "--socket", t.sup, "--ttl-seconds", "30",
                   as_root=True)
    ok(g, "grant-http")
    lease = json.loads(g.stdout)["lease_id"]
    out = []
    th = threading.Thread(target=slow_get, args=(env, t, out))
    th.start()
    env.wait_for("the slow request upstream", lambda: "/v1/data/slow" in requests_seen(t))
    ok(env.gensee("run", "network", "revoke-http", "--socket", t.sup, "--lease", lease,
                  as_root=True), "revoke-http")
    th.join(timeout=30)
    check(not th.is_alive() and out, "client still waiting")
    r = out[0]
    check(r.get("status") == 403 and refusal(r) == "mediator_lease_closed" and
          "hello" not in r.get("body", ""), "in-flight client after the lease ended: %r" % r)
    r = tm.get(env, t, "http://up.test:8080/v1/data/next")
    check(r["status"] == 200, "the transaction after the lease ended: %r" % r)
    eff = [e for e in jsonl(env, "effects.jsonl") if e.get("kind") == "http_transaction_effect"]
    # The cut exchange is accounted as an upstream failure of its own decision: no bytes.
    check(len(eff) == 2 and eff[0]["status"] == 0 and eff[0]["response_bytes"] == 0 and
          eff[0]["decision_id"] is not None and eff[1]["status"] == 200 and
          eff[1]["decision_id"] != eff[0]["decision_id"], "effects: %r" % eff)

if __name__ == "__main__":
    main({f.__name__: f for f in (transaction_lifecycle, transaction_control_is_root_only,
                                  transaction_topology, transaction_budgets,
                                  transaction_ttl_expiry, transaction_revoke_cuts_inflight,
                                  transaction_revoke_closes_connections,
                                  transaction_expiry_closes_connections,
                                  transaction_lease_end_releases_reservation,
                                  transaction_crash_keeps_reservation,
                                  transaction_state_tampered_denies,
                                  transaction_evidence_loss_marked,
                                  transaction_scope_before_dns, transaction_redirect_hops,
                                  transaction_mediator_follows_redirects)})
