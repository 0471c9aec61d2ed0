#!/usr/bin/env python3
"""The effect coordinator: `gensee run network transaction-execute`.

test_transactions.py's topology (namespaces this case creates, documentation
addresses). The configured executable is nsenter, which runs a harmless
python worker in the mediated client's namespace (ctr): it fetches one URL
through the mediator and then behaves as the request's parameters say
(exit 0, exit 3, kill itself, or sleep). The request text reaches the
worker as exactly one argv element.
"""

import json
import os
import shutil
import signal
import time

import test_mediator as tm
import test_transactions as tt
from harness import check, main, process_tree

OP = tm.OP
WORKER = r"""
import json, os, signal, socket, sys, time
req = json.loads(sys.argv[1])
out = os.environ["WORKER_OUT"]
with open(os.path.join(out, "worker.json"), "w") as f:
    json.dump({"argc": len(sys.argv), "pid": os.getpid(), "env": sorted(os.environ),
               "cwd": os.getcwd(), "request": req}, f)
s = socket.create_connection(("198.51.100.1", 3128), timeout=10)
s.sendall(b"GET http://up.test:8080/v1/data/worker HTTP/1.1\r\nHost: up.test:8080\r\nConnection: close\r\n\r\n")
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
with open(os.path.join(out, "fetch.txt"), "wb") as f:
    f.write(data)
mode = req["parameters"]["mode"]
if mode == "fail":
    sys.exit(3)
if mode == "selfkill":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "sleep":
    time.sleep(60)
"""


def setup(env, **over):
    t = tt.setup(env)
    t.cdir = os.path.join(t.dir, "coord")
    os.mkdir(t.cdir, 0o755)
    t.out = os.path.join(t.dir, "out")
    os.mkdir(t.out, 0o755)
    py = os.path.realpath("/usr/bin/python3")
    cfg = {"schema_version": 1, "executor_label": "mediated_worker",
           "supervisor_socket": t.sup, "operation_id": OP,
           "operation_class": "document_lookup", "effect": "external_http_read",
           "ttl_seconds": 60,
           "command": {"executable": "/usr/bin/nsenter",
                       "args": ["--net=/run/netns/" + t.ctr, "--", py, "-c", WORKER,
                                "{effect_request_json}"],
                       "environment": {"WORKER_OUT": t.out}, "working_directory": "/"}}
    for k, v in over.items():
        if k in cfg["command"]:
            cfg["command"][k] = v
        else:
            cfg[k] = v
    t.cfg = os.path.join(t.cdir, "coordinator.json")
    write(t.cfg, cfg)
    return t


def write(path, obj, mode=0o600):
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    os.chmod(path, mode)


def request(t, name="req.json", mode="ok", **over):
    p = os.path.join(t.cdir, name)
    r = {"schema_version": 1, "request_id": "http_tx_123", "operation_class": "document_lookup",
         "parameters": {"mode": mode, "document_id": "doc --flag; rm -rf /", "query": "summary"}}
    r.update(over)
    write(p, r)
    return p


def execute(env, t, req, txid, cfg=None, bg=False):
    args = ("run", "network", "transaction-execute", "--config", cfg or t.cfg, "--request", req,
            "--transaction", txid)
    return env.gensee_bg(*args, as_root=True) if bg else env.gensee(*args, as_root=True)


def lifecycle(env):
    return [(e["type"], e["transaction_id"]) for e in tt.jsonl(env, "http-transactions.jsonl")
            if e["type"] in ("http_transaction_started", "http_transaction_ended",
                             "http_transaction_revoked")]


def coordinator_end_on_success(env):
    t = setup(env)
    r = execute(env, t, request(t), "http_tx_ok")
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    w = json.load(open(os.path.join(t.out, "worker.json")))
    # One argv element for the whole request; no ambient environment; the cwd.
    check(w["argc"] == 2 and w["request"]["parameters"]["document_id"] == "doc --flag; rm -rf /",
          "worker argv: %r" % w)
    # (LC_CTYPE is python's own PEP 538 coercion in an empty environment.)
    check([k for k in w["env"] if k != "LC_CTYPE"] == ["WORKER_OUT"] and w["cwd"] == "/",
          "worker env/cwd: %r" % w)
    fetched = open(os.path.join(t.out, "fetch.txt"), "rb").read()
    check(fetched.startswith(b"HTTP/1.1 200") and b"hello from 192.0.2.10" in fetched,
          "the worker's fetch: %r" % fetched)
    check(lifecycle(env) == [("http_transaction_started", "http_tx_ok"),
                             ("http_transaction_ended", "http_tx_ok")], "%r" % lifecycle(env))
    # Ended: the mediated client has no access any more; the id is used.
    r2 = tm.get(env, t, "http://up.test:8080/v1/data/after")
    check(r2["status"] == 403 and tt.refusal(r2) == "transaction_required", "after: %r" % r2)
    r = execute(env, t, request(t), "http_tx_ok")
    check(r.returncode == 1 and "transaction_replayed" in r.stderr, "replay: %r" % r.stderr)


def coordinator_revokes_on_failure(env):
    t = setup(env)
    r = execute(env, t, request(t, mode="fail"), "http_tx_f")
    check(r.returncode == 3 and "non-zero exit: transaction http_tx_f revoked" in r.stderr,
          "exit 3: %d %s" % (r.returncode, r.stderr))
    r = execute(env, t, request(t, mode="selfkill"), "http_tx_k")
    check(r.returncode == 128 + 9 and "child signal: transaction http_tx_k revoked" in r.stderr,
          "signal: %d %s" % (r.returncode, r.stderr))
    bad = setup_cfg_variant(env, t, working_directory="/nonexistent-gensee-it")
    r = execute(env, t, request(t), "http_tx_s", cfg=bad)
    check(r.returncode == 1 and "spawn error: transaction http_tx_s revoked" in r.stderr,
          "spawn error: %d %s" % (r.returncode, r.stderr))
    check(lifecycle(env) == [("http_transaction_started", "http_tx_f"),
                             ("http_transaction_revoked", "http_tx_f"),
                             ("http_transaction_started", "http_tx_k"),
                             ("http_transaction_revoked", "http_tx_k"),
                             ("http_transaction_started", "http_tx_s"),
                             ("http_transaction_revoked", "http_tx_s")], "%r" % lifecycle(env))


def setup_cfg_variant(env, t, **cmd):
    cfg = json.load(open(t.cfg))
    cfg["command"].update(cmd)
    p = os.path.join(t.cdir, "variant.json")
    write(p, cfg)
    return p


def coordinator_child_killed_revokes(env):
    """Killing the coordinator's child revokes: the mediated client loses access."""
    t = setup(env)
    p = execute(env, t, request(t, mode="sleep"), "http_tx_c", bg=True)
    env.wait_for("the worker", lambda: os.path.exists(os.path.join(t.out, "fetch.txt")))
    r = tm.get(env, t, "http://up.test:8080/v1/data/during")
    check(r["status"] == 200, "during: %r" % r)
    pid = json.load(open(os.path.join(t.out, "worker.json")))["pid"]
    os.kill(pid, signal.SIGKILL)
    rc, _, err = env.finish(p, timeout=30)
    check(rc == 137 and "child signal: transaction http_tx_c revoked" in err, "%d %s" % (rc, err))
    r = tm.get(env, t, "http://up.test:8080/v1/data/after")
    check(r["status"] == 403 and tt.refusal(r) == "transaction_required", "after: %r" % r)


def coordinator_sigterm_revokes(env):
    t = setup(env)
    p = execute(env, t, request(t, mode="sleep"), "http_tx_t", bg=True)
    env.wait_for("the worker", lambda: os.path.exists(os.path.join(t.out, "fetch.txt")))
    pid = json.load(open(os.path.join(t.out, "worker.json")))["pid"]
    # The CLI may run under a wrapper (nsenter): signal the gensee process itself.
    gpid = coordinator_pid(p.pid)
    os.kill(gpid, signal.SIGTERM)
    rc, _, err = env.finish(p, timeout=30)
    check(rc == 128 + 15 and "SIGTERM: transaction http_tx_t revoked" in err, "%d %s" % (rc, err))
    check(not os.path.exists("/proc/%d" % pid) or
          open("/proc/%d/stat" % pid).read().split()[2] == "Z", "the worker still runs")
    r = tm.get(env, t, "http://up.test:8080/v1/data/after")
    check(r["status"] == 403 and tt.refusal(r) == "transaction_required", "after: %r" % r)


def coordinator_pid(top):
    """The gensee process at or below top (the harness may wrap it in nsenter)."""
    for p in process_tree(top):
        try:
            if os.path.basename(os.readlink("/proc/%d/exe" % p)) == "gensee":
                return p
        except OSError:
            pass
    raise AssertionError("no gensee process below %d" % top)


def coordinator_refuses_untrusted(env):
    """Nothing starts unless the config, the executable and the request are
    what root said: no transaction is begun for any of these."""
    t = setup(env)
    good = request(t)
    cases = []
    # A config the test user owns, or group-writable, or a symlink to a good one.
    p = setup_cfg_variant(env, t)
    os.chown(p, env.uid, env.gid)
    cases.append(("user-owned config", p, good, "root-owned regular file"))
    p2 = os.path.join(t.cdir, "gw.json")
    shutil.copy(t.cfg, p2)
    os.chmod(p2, 0o660)
    cases.append(("group-writable config", p2, good, "root-owned regular file"))
    p3 = os.path.join(t.cdir, "link.json")
    os.symlink(t.cfg, p3)
    cases.append(("symlinked config", p3, good, "root-owned regular file"))
    # A config in a directory the test user can write.
    ud = os.path.join(t.dir, "userdir")
    os.mkdir(ud)
    os.chown(ud, env.uid, env.gid)
    p4 = os.path.join(ud, "c.json")
    shutil.copy(t.cfg, p4)
    cases.append(("config under a user directory", p4, good, "not a root-controlled directory"))
    # A symlinked executable, an argv template that embeds the placeholder.
    cases.append(("symlinked executable", setup_cfg_variant(env, t, executable="/usr/bin/python3"),
                  good, "root-owned regular file"))
    v = json.load(open(t.cfg))
    v["command"]["args"] = ["--x={effect_request_json}"]
    p5 = os.path.join(t.cdir, "embed.json")
    write(p5, v)
    cases.append(("embedded placeholder", p5, good, "whole argument"))
    v["command"]["args"] = ["{effect_request_json}", "{effect_request_json}"]
    p6 = os.path.join(t.cdir, "twice.json")
    write(p6, v)
    cases.append(("placeholder twice", p6, good, "exactly once"))
    # Requests: another class, extra fields, too big, duplicate keys, not JSON.
    cases.append(("wrong class", t.cfg, request(t, "r1.json", operation_class="admin"),
                  "operation_class is not"))
    cases.append(("extra field", t.cfg, request(t, "r2.json", executable="/bin/sh"),
                  "unknown_field"))
    big = os.path.join(t.cdir, "big.json")
    write(big, {"schema_version": 1, "request_id": "x", "operation_class": "document_lookup",
                "parameters": {"x": "a" * 70000}})
    cases.append(("oversized request", t.cfg, big, "over 65536 bytes"))
    dup = os.path.join(t.cdir, "dup.json")
    write(dup, '{"schema_version":1,"request_id":"x","operation_class":"document_lookup",'
               '"operation_class":"admin","parameters":{}}')
    cases.append(("duplicate keys", t.cfg, dup, "request"))
    for what, cfg, req, want in cases:
        r = execute(env, t, req, "http_tx_u", cfg=cfg)
        check(r.returncode != 0 and want in r.stderr, "%s: rc %d %s" % (what, r.returncode,
                                                                         r.stderr))
    check(not os.path.exists(os.path.join(env.state, "network-operations", OP,
                                          "http-transactions.json")),
          "a transaction was begun for a refused config or request")
    check(not os.path.exists(os.path.join(t.out, "worker.json")), "the worker ran")
    # As a non-root user: refused before anything else.
    r = env.gensee("run", "network", "transaction-execute", "--config", t.cfg, "--request", good,
                   "--transaction", "http_tx_u")
    check(r.returncode == 1 and "must run as root" in r.stderr, "non-root: %r" % r.stderr)


def coordinator_lost_start_reply_revokes(env):
    """The start reply is lost (boundaryd stopped after receiving it): the
    coordinator revokes at once and the transaction does not stay active."""
    t = setup(env)
    env.proc.send_signal(signal.SIGSTOP)
    # The CLI's timeout (10 s) passes while boundaryd is stopped with the
    # start request queued; it then commits when resumed, before the revoke.
    p = execute(env, t, request(t), "http_tx_l", bg=True)
    time.sleep(10.5)
    env.proc.send_signal(signal.SIGCONT)
    rc, _, err = env.finish(p, timeout=40)
    check(rc == 1 and "lost start reply: transaction http_tx_l revoked" in err,
          "%d %s" % (rc, err))
    check(not os.path.exists(os.path.join(t.out, "worker.json")), "the worker ran")
    st = json.load(open(os.path.join(env.state, "network-operations", OP,
                                     "http-transactions.json")))
    check(st["current"]["transaction_id"] == "http_tx_l" and st["current"]["state"] == "revoked",
          "state: %r" % st)


def coordinator_sigterm_during_start(env):
    """SIGTERM while the start is in flight: the coordinator revokes what
    the start committed and never spawns the command."""
    t = setup(env)
    # A command that leaves its mark at once (touch, in the output directory),
    # and a request without a slash (it becomes a file name there too).
    cfg = setup_cfg_variant(env, t, executable="/usr/bin/touch",
                            args=["{effect_request_json}", "spawned"], working_directory=t.out)
    req = os.path.join(t.cdir, "plain.json")
    write(req, {"schema_version": 1, "request_id": "r1", "operation_class": "document_lookup",
                "parameters": {"mode": "ok"}})
    env.proc.send_signal(signal.SIGSTOP)
    try:
        p = execute(env, t, req, "http_tx_st", cfg=cfg, bg=True)
        gpid = None
        deadline = time.monotonic() + 10
        while gpid is None and time.monotonic() < deadline:
            try:
                gpid = coordinator_pid(p.pid)
            except AssertionError:
                time.sleep(0.05)
        time.sleep(0.5)  # the start request is sent and waits for the stopped boundaryd
        os.kill(gpid, signal.SIGTERM)
        time.sleep(0.2)
    finally:
        env.proc.send_signal(signal.SIGCONT)
    rc, _, err = env.finish(p, timeout=30)
    check(rc == 128 + 15 and "SIGTERM: transaction http_tx_st revoked" in err, "%d %s" % (rc, err))
    check(os.listdir(t.out) == [], "the command ran: %r" % os.listdir(t.out))
    check(lifecycle(env) == [("http_transaction_started", "http_tx_st"),
                             ("http_transaction_revoked", "http_tx_st")], "%r" % lifecycle(env))


if __name__ == "__main__":
    main({f.__name__: f for f in (coordinator_end_on_success, coordinator_revokes_on_failure,
                                  coordinator_child_killed_revokes, coordinator_sigterm_revokes,
                                  coordinator_refuses_untrusted,
                                  coordinator_lost_start_reply_revokes,
                                  coordinator_sigterm_during_start)})
