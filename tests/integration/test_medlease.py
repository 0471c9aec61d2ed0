#!/usr/bin/env python3
"""Mediator leases (`gensee run network grant-http` / `revoke-http`) and
credential injection from a host file (proxy.credentials).

test_mediator.py's topology (namespaces this case creates, documentation
addresses). The credential's value lives only in a root-owned owner-only
file: the upstream listener (which logs request headers) is the only place
it may show up; every evidence file and log is grepped for it.
"""

import json
import os
import tempfile
import time

import test_mediator as tm
from harness import check, main

OP = tm.OP


def setup(env):
    secret = "Bearer gensee-it-secret-%d" % os.getpid()
    # A root-owned owner-only file in a directory of its own; only its path is configured.
    d = tempfile.mkdtemp(prefix="gensee-it-cred.")
    env.cleanup_dirs.append(d)
    os.chmod(d, 0o755)
    cred = os.path.join(d, "api.token")
    with open(cred, "w") as f:
        f.write(secret + "\n")
    os.chmod(cred, 0o600)
    t = tm.setup(env, proxy_extra={"credentials": [
        {"handle_id": "cred_api", "url_prefix": "http://up.test:8080/private/",
         "header": "Authorization", "file": cred}]})
    t.secret = secret
    t.credfile = cred
    t.sup = os.path.join(env.state, "network-operations", OP, "supervisor.sock")
    return t


def grant(env, t, *extra):
    r = env.gensee("run", "network", "grant-http", "--socket", t.sup, *extra, as_root=True)
    return r


def upstream_auth(t, target):
    reqs = [l for l in tm.upstream_lines(t.uplog) if l["event"] == "request" and
            l["target"] == target]
    check(len(reqs) == 1, "upstream requests for %s: %r" % (target, reqs))
    return reqs[0]["headers"].get("authorization")


def no_secret_anywhere(env, t):
    blobs = []
    for root, _, files in os.walk(env.state):
        for f in files:
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    blobs.append((p, fh.read()))
    for p in env.logs:
        with open(p, "rb") as fh:
            blobs.append((p, fh.read()))
    for p, b in blobs:
        check(t.secret.encode() not in b and b"gensee-it-secret" not in b,
              "the credential leaked into %s" % p)
    check(len(blobs) > 5, "nothing was grepped: %r" % [p for p, _ in blobs])


def medlease_credential_injection(env):
    t = setup(env)
    r = tm.get(env, t, "http://up.test:8080/private/a")
    check(r["status"] == 200, "no lease: %r" % r)
    check(upstream_auth(t, "/private/a") is None, "injected without a lease")
    g = grant(env, t, "--ttl-seconds", "30")
    check(g.returncode == 0, "grant-http: %s" % g.stderr)
    lease = json.loads(g.stdout)["lease_id"]
    check(lease.startswith("lease_http_"), "lease id %r" % lease)
    r = tm.get(env, t, "http://up.test:8080/private/b?x=1",
               headers=["Authorization: Bearer client-supplied"])
    check(r["status"] == 200, "with a lease: %r" % r)
    check(upstream_auth(t, "/private/b?x=1") == t.secret, "not injected (or the client's kept)")
    # Outside the exact prefix: nothing injected.
    for target in ("/public/c", "/private", "/privatex/d"):
        r = tm.get(env, t, "http://up.test:8080" + target)
        check(r["status"] == 200, "%s: %r" % (target, r))
        check(upstream_auth(t, target) is None, "injected outside the prefix: %s" % target)
    r = tm.get(env, t, "http://192.0.2.10:8080/private/e")
    check(r["status"] == 200 and upstream_auth(t, "/private/e") is None,
          "injected for another authority")
    ev = [e for e in tm.evidence(env) if e.get("credential_handle_id")]
    check(len(ev) == 1 and ev[0]["credential_handle_id"] == "cred_api" and
          ev[0]["path"] == "/private/b", "evidence: %r" % ev)
    ins = env.root_call("network.inspect", {"operation_id": OP})["result"]
    check([l["lease_id"] for l in ins["mediator_leases"]] == [lease], "inspect: %r" % ins)
    # Only root grants; the test user cannot revoke root's operation's leases.
    r = env.user_call(env.client_sock, "network.grant_http", {"operation_id": OP})
    check(r.get("error", {}).get("code") == "not_authorized", "user grant: %r" % r)
    r = env.user_call(env.client_sock, "network.revoke_http", {"operation_id": OP,
                                                                "lease_id": lease})
    check(r.get("error", {}).get("code") == "not_found", "user revoke: %r" % r)
    r = env.gensee("run", "network", "revoke-http", "--socket", t.sup, "--lease", lease,
                   as_root=True)
    check(r.returncode == 0, "revoke-http: %s" % r.stderr)
    r = tm.get(env, t, "http://up.test:8080/private/f")
    check(r["status"] == 200 and upstream_auth(t, "/private/f") is None,
          "injected after revoke-http")
    r = env.gensee("run", "network", "revoke-http", "--socket", t.sup, "--lease", lease,
                   as_root=True)
    check(r.returncode == 1 and "not_found" in r.stderr, "second revoke: %s" % r.stderr)
    kinds = [e["kind"] for e in tm_effects(env) if e.get("lease_id") == lease]
    check(kinds == ["mediator_lease", "mediator_lease_revoked"], "effects: %r" % kinds)
    no_secret_anywhere(env, t)


def tm_effects(env):
    p = os.path.join(env.state, "network-operations", OP, "effects.jsonl")
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip()]


def medlease_ttl(env):
    t = setup(env)
    g = grant(env, t, "--ttl-seconds", "61")
    check(g.returncode == 1 and "ttl_exceeds_ceiling" in g.stderr, "over the ceiling: %s" %
          g.stderr)
    g = grant(env, t, "--ttl-seconds", "1")
    check(g.returncode == 0, "grant: %s" % g.stderr)
    r = tm.get(env, t, "http://up.test:8080/private/a")
    check(r["status"] == 200 and upstream_auth(t, "/private/a") == t.secret, "during: %r" % r)
    time.sleep(1.3)
    r = tm.get(env, t, "http://up.test:8080/private/b")
    check(r["status"] == 200 and upstream_auth(t, "/private/b") is None, "after the TTL")
    env.wait_for("the expiry evidence", lambda: any(
        e["kind"] == "mediator_lease_expired" for e in tm_effects(env)))
    no_secret_anywhere(env, t)


def medlease_credential_file_checks(env):
    """A credential file that is not root's, owner-only, one regular file
    of one printable line is never used: the request is refused
    (credential_unavailable) and nothing reaches the upstream. The file is
    read at each request, so each variant is made in place; the good file
    then works again (the checks, not the topology, refused)."""
    t = setup(env)
    g = grant(env, t)
    check(g.returncode == 0, "grant: %s" % g.stderr)
    cred = t.credfile
    good = open(cred).read()

    def restore():
        if os.path.islink(cred) or os.path.exists(cred):
            os.unlink(cred)
        with open(cred, "w") as f:
            f.write(good)
        os.chmod(cred, 0o600)

    def group_readable():
        os.chmod(cred, 0o640)

    def user_owned():
        os.chown(cred, env.uid, env.gid)

    def symlink():
        real = cred + ".real"
        os.rename(cred, real)
        os.symlink(real, cred)

    def hardlink():
        os.link(cred, cred + ".second")

    def two_lines():
        with open(cred, "w") as f:
            f.write("Bearer a\r\nX-Injected: 1\n")

    n = 0
    for what, mutate in (("group-readable", group_readable), ("user-owned", user_owned),
                         ("a symlink", symlink), ("a second link", hardlink),
                         ("two lines", two_lines)):
        mutate()
        n += 1
        r = tm.get(env, t, "http://up.test:8080/private/x%d" % n)
        check(r["status"] == 403 and r["headers"].get("x-gensee-refusal") ==
              "credential_unavailable", "%s: %r" % (what, r))
        check([l for l in tm.upstream_lines(t.uplog) if l["event"] == "request"] == [],
              "%s: the upstream was reached" % what)
        for extra in (cred + ".real", cred + ".second"):
            if os.path.lexists(extra):
                os.unlink(extra)
        restore()
    r = tm.get(env, t, "http://up.test:8080/private/ok")
    check(r["status"] == 200 and upstream_auth(t, "/private/ok") == t.secret,
          "the good file: %r" % r)
    no_secret_anywhere(env, t)


def medlease_config_refuses_values(env):
    """proxy.credentials names a file, never a value; prefixes are canonical."""
    d = tempfile.mkdtemp(prefix="gensee-it-credcfg.")
    env.cleanup_dirs.append(d)
    env.use_netns()
    env.start()
    base = {"schema_version": 3, "operation_id": OP, "source_address": "198.51.100.12",
            "envelope": {"grants": []},
            "policy": {"schema_version": 1, "restricted_destinations": [],
                       "in_place_lease_scopes": [], "max_in_place_lease_ttl_seconds": 60,
                       "http_gateway_available": True}}
    bad = [
        {"handle_id": "c", "url_prefix": "http://up.test:8080/p/", "header": "Authorization",
         "file": "/x", "value": "Bearer inline"},
        {"handle_id": "c", "url_prefix": "http://UP.test:8080/p/", "header": "Authorization",
         "file": "/x"},
        {"handle_id": "c", "url_prefix": "http://up.test:8080/p/%2e%2e/", "header": "X",
         "file": "/x"},
        {"handle_id": "c", "url_prefix": "http://up.test:8080/p/", "header": "Host",
         "file": "/x"},
        {"handle_id": "c", "url_prefix": "http://up.test:8080/p/", "header": "X-A:b",
         "file": "/x"},
        {"handle_id": "c", "url_prefix": "http://up.test:8080/p/", "header": "X",
         "file": "relative"},
    ]
    for i, c in enumerate(bad):
        cfg = dict(base, proxy={"listen": "198.51.100.1:3128", "client_address": "198.51.100.12",
                                "credentials": [c]})
        p = os.path.join(d, "c%d.json" % i)
        with open(p, "w") as f:
            json.dump(cfg, f)
        os.chmod(p, 0o600)
        r = env.root_call("network.start", {"config_path": p})
        check(r.get("error", {}).get("code") == "invalid_config", "%r accepted: %r" % (c, r))
    # The same config with a good entry starts (the refusals were the entries').
    good = {"handle_id": "c", "url_prefix": "http://up.test:8080/p/", "header": "X-Api-Key",
            "file": "/x"}
    cfg = dict(base, proxy={"listen": "198.51.100.1:3128", "client_address": "198.51.100.12",
                            "credentials": [good]})
    p = os.path.join(d, "good.json")
    with open(p, "w") as f:
        json.dump(cfg, f)
    os.chmod(p, 0o600)
    r = env.root_call("network.start", {"config_path": p})
    check("result" in r, "good config refused: %r" % r)


if __name__ == "__main__":
    main({f.__name__: f for f in (medlease_credential_injection, medlease_ttl,
                                  medlease_credential_file_checks,
                                  medlease_config_refuses_values)})
