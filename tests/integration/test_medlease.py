#!/usr/bin/env python3
"""Mediator leases (`gensee run network grant-http` / `revoke-http`) and
credential injection from a host file (proxy.credentials).

test_mediator.py's topology (namespaces this case creates, documentation
addresses). The credential's value lives only in a root-owned owner-only
file: the upstream listener (which logs request headers) is the only place
it may show up; every evidence file and log is grepped for it.
"""

import hashlib
import json
import os
import tempfile
import time

import test_mediator as tm
from harness import check, main

OP = tm.OP


def setup(env, policy_extra=None, proxy_more=None):
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
         "header": "Authorization", "file": cred}], **(proxy_more or {})},
        policy_extra=policy_extra)
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


def commit_token(env, t, method, url, body, ttl=None):
    params = {"operation_id": OP, "method": method, "url": url,
              "body_sha256": hashlib.sha256(body.encode()).hexdigest()}
    if ttl:
        params["ttl_seconds"] = ttl
    r = env.root_call("network.commit_token", params)
    check("result" in r, "commit_token: %r" % r)
    return r["result"]["token"]


def post(env, t, url, body, token=None, method="POST"):
    lines = ["%s %s HTTP/1.1" % (method, url), "Host: " + tm.authority(url),
             "Content-Length: %d" % len(body), "Content-Type: text/plain"]
    if token is not None:
        lines.append("X-Gensee-Commit-Token: " + token)
    return tm.request(env, t, "\r\n".join(lines) + "\r\n\r\n" + body)


def medlease_commit_token(env):
    """A method other than GET/HEAD needs the policy's opt-in, an active
    mediator lease and a one-use commit token bound to the gateway, the
    exact URL, the method and the body's digest; replay and every mismatch
    are refused and nothing reaches the upstream for them."""
    t = setup(env, policy_extra={"http_gateway_methods": ["GET", "HEAD", "POST", "PUT"]})
    time.sleep(1.1)  # tokens issued in boundaryd's first second count as stale
    url = "http://up.test:8080/submit/1"
    body = '{"order": 42}'
    tok = commit_token(env, t, "POST", url, body)
    # No lease yet.
    r = post(env, t, url, body, tok)
    check(r["status"] == 403 and tm_ref(r) == "mediator_lease_required", "no lease: %r" % r)
    check(grant(env, t).returncode == 0, "grant")
    r = post(env, t, url, body)
    check(r["status"] == 403 and tm_ref(r) == "commit_token_required", "no token: %r" % r)
    for what, args, code in (
            ("another body", (url, body + " "), "commit_token_wrong_body"),
            ("another URL", ("http://up.test:8080/submit/2", body), "commit_token_wrong_url"),
            ("another method", (url, body), "commit_token_wrong_method"),
            ("a forged token", (url, body), "commit_token_bad_signature")):
        m = "PUT" if what == "another method" else "POST"
        tk = tok[:-4] + ("AAAA" if tok[-4:] != "AAAA" else "BBBB") if what == "a forged token" \
            else tok
        r = post(env, t, args[0], args[1], tk, method=m)
        check(r["status"] == 403 and tm_ref(r) == code, "%s: %r" % (what, r))
    r = post(env, t, url, body, tok, method="DELETE")
    check(r["status"] == 403 and tm_ref(r) == "method_not_allowed", "DELETE: %r" % r)
    check([l for l in tm.upstream_lines(t.uplog) if l["event"] == "body"] == [],
          "the upstream was reached by a refused request")
    # The right one: performed once, with its body, without the token header.
    r = post(env, t, url, body, tok)
    check(r["status"] == 200, "the bound request: %r\n%s" % (r, open(t.medlog).read()))
    ups = [l for l in tm.upstream_lines(t.uplog) if l["event"] == "body"]
    check(len(ups) == 1 and ups[0]["sha256"] == hashlib.sha256(body.encode()).hexdigest() and
          ups[0]["method"] == "POST" and ups[0]["target"] == "/submit/1", "upstream: %r" % ups)
    reqs = [l for l in tm.upstream_lines(t.uplog) if l["event"] == "request"]
    check("x-gensee-commit-token" not in reqs[-1]["headers"], "token forwarded: %r" % reqs[-1])
    # Replay.
    r = post(env, t, url, body, tok)
    check(r["status"] == 403 and tm_ref(r) == "commit_token_replayed", "replay: %r" % r)
    check(len([l for l in tm.upstream_lines(t.uplog) if l["event"] == "body"]) == 1, "replayed")
    # Revoking the lease stops an unused token too.
    tok2 = commit_token(env, t, "POST", url, body)
    lease = json.loads(env.gensee("run", "network", "inspect", "--socket", t.sup, "--json",
                                  as_root=True).stdout)["mediator_leases"][0]["lease_id"]
    check(env.gensee("run", "network", "revoke-http", "--socket", t.sup, "--lease", lease,
                     as_root=True).returncode == 0, "revoke-http")
    r = post(env, t, url, body, tok2)
    check(r["status"] == 403 and tm_ref(r) == "mediator_lease_required", "after revoke: %r" % r)
    # Only root issues tokens; the evidence has the token id, never the token.
    r = env.user_call(env.client_sock, "network.commit_token",
                      {"operation_id": OP, "method": "POST", "url": url, "body_sha256": "0" * 64})
    check(r.get("error", {}).get("code") == "not_authorized", "user token: %r" % r)
    ev = [e for e in tm.evidence(env) if e.get("commit_token_id")]
    check(len(ev) == 1 and ev[0]["method"] == "POST", "evidence: %r" % ev)
    for p in (os.path.join(env.state, "network-operations", OP, f) for f in
              ("effects.jsonl", "http-mediator.jsonl")):
        check(tok not in open(p).read() and tok2 not in open(p).read(), "token in %s" % p)
    check(tok not in env.daemon_log() and tok not in open(t.medlog).read(), "token in a log")


def medlease_restart_fails_closed(env):
    """A boundaryd restart drops mediator leases (no credential, no
    effectful method until root grants again) and refuses commit tokens
    issued before it started: the replay store did not survive, so an old
    token, used or not, is never accepted again."""
    t = setup(env, policy_extra={"http_gateway_methods": ["GET", "HEAD", "POST"]})
    time.sleep(1.1)
    url, body = "http://up.test:8080/submit/r", "payload"
    check(grant(env, t).returncode == 0, "grant")
    used = commit_token(env, t, "POST", url, body)
    unused = commit_token(env, t, "POST", url, body)
    r = post(env, t, url, body, used)
    check(r["status"] == 200, "before the restart: %r" % r)
    env.stop()
    env.start(args=["--mediator-user", tm.MEDIATOR_USER])
    env.wait_for("the mediator to reconnect", lambda: open(t.medlog).read().count(
        "connected to boundaryd in") >= 1, timeout=20)
    r = tm.get(env, t, "http://up.test:8080/private/after")
    check(r["status"] == 200 and upstream_auth(t, "/private/after") is None,
          "a credential without a lease after the restart")
    r = post(env, t, url, body, unused)
    check(r["status"] == 403 and tm_ref(r) == "mediator_lease_required", "no lease: %r" % r)
    check(grant(env, t).returncode == 0, "grant again")
    for tok in (used, unused):
        r = post(env, t, url, body, tok)
        check(r["status"] == 403 and tm_ref(r) == "commit_token_stale", "old token: %r" % r)
    check(len([l for l in tm.upstream_lines(t.uplog) if l["event"] == "body"]) == 1,
          "an old token reached the upstream")
    time.sleep(1.1)
    r = post(env, t, url, body, commit_token(env, t, "POST", url, body))
    check(r["status"] == 200, "a new token: %r" % r)



def raw_post(url, body, token):
    return ("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n"
            "X-Gensee-Commit-Token: %s\r\n\r\n%s" % (url, tm.authority(url), len(body), token,
                                                       body))


def shut(h, what, seconds=10):
    w = h.wait_closed(seconds)
    check(w["closed"] in ("eof", "reset") and w["data"] == "",
          "%s: not shut down: %r" % (what, w))


def medlease_end_closes_connections(env):
    """Revoking a mediator lease, and its expiry, shut down every accepted
    client connection of the operation at once. A connection accepted under
    the lease that sends its effectful request right after the revoke is
    refused (nothing reaches the upstream); a request written on a shut
    connection never reaches the upstream, while a new connection still
    serves GET (which needs no lease): it was the connection that was cut.
    Another operation's proxy connection is not touched."""
    t = setup(env, policy_extra={"http_gateway_methods": ["GET", "HEAD", "POST"]},
              proxy_more=tm.LONG_IDLE)
    time.sleep(1.1)  # tokens issued in boundaryd's first second count as stale
    tm.start_other_op(env, t)
    g = grant(env, t, "--ttl-seconds", "30")
    check(g.returncode == 0, "grant: %s" % g.stderr)
    lease = json.loads(g.stdout)["lease_id"]
    url, body = "http://up.test:8080/submit/held", "payload"
    tok = commit_token(env, t, "POST", url, body)
    idle = tm.Held(env, t)
    late = tm.Held(env, t)
    theirs = tm.Held(env, t, source="198.51.100.13", port=3129)
    r = env.gensee("run", "network", "revoke-http", "--socket", t.sup, "--lease", lease,
                   as_root=True)
    check(r.returncode == 0, "revoke-http: %s" % r.stderr)
    late.send(raw_post(url, body, tok))
    got = late.read(10)
    check(got["closed"] in ("eof", "reset") and tm.status_of(got["data"]) in (None, 403) and
          "hello" not in got["data"], "late POST on an accepted connection: %r" % got)
    shut(idle, "idle connection at revoke")
    idle.send(tm.raw_get("http://up.test:8080/public/after"))
    got = idle.read(3)
    check(tm.status_of(got["data"]) is None, "a request after the shutdown answered: %r" % got)
    ups = tm.upstream_lines(t.uplog)
    check([l for l in ups if l["event"] == "body"] == [] and
          [l for l in ups if l["event"] == "request"] == [], "upstream reached: %r" % ups)
    r = tm.get(env, t, "http://up.test:8080/public/fresh")
    check(r["status"] == 200, "a new connection after the revoke: %r" % r)
    check(theirs.send(tm.raw_get("http://up.test:8080/other/ok"))["sent"], "other op send")
    got = theirs.read(10)
    check(tm.status_of(got["data"]) == 200, "the other operation's connection: %r" % got)
    log = open(t.medlog).read()
    check("mediator lease %s revoked: closing its connections" % lease in log and
          "mediator_lease_closed:" in log, "mediator did not act on the revoke:\n" + log)
    # Expiry, with no call.
    g = grant(env, t, "--ttl-seconds", "2")
    check(g.returncode == 0, "grant 2: %s" % g.stderr)
    lease2 = json.loads(g.stdout)["lease_id"]
    idle2 = tm.Held(env, t)
    shut(idle2, "idle connection at expiry", 15)
    check(any(e["kind"] == "mediator_lease_expired" and e["lease_id"] == lease2
              for e in tm_effects(env)), "no expiry evidence")
    idle2.send(tm.raw_get("http://up.test:8080/public/after2"))
    got = idle2.read(3)
    check(tm.status_of(got["data"]) is None, "a request after expiry answered: %r" % got)
    check("mediator lease %s expired: closing its connections" % lease2 in open(t.medlog).read(),
          "mediator did not act on the expiry")
    targets = [l["target"] for l in tm.upstream_lines(t.uplog) if l["event"] == "request"]
    check(targets == ["/public/fresh", "/other/ok"], "upstream: %r" % targets)
    for h in (idle, late, theirs, idle2):
        h.close()


def medlease_commit_token_cli(env):
    """`gensee run network commit-token` issues a token boundaryd signs:
    plain output is the token alone (for $(...)), --json its id and expiry.
    The token works once through the mediator; replay, another body digest,
    URL or method are refused; a non-root caller gets none; usage errors
    exit 125."""
    t = setup(env, policy_extra={"http_gateway_methods": ["GET", "HEAD", "POST", "PUT"]})
    time.sleep(1.1)
    check(grant(env, t).returncode == 0, "grant")
    url = "http://up.test:8080/submit/cli"
    body = '{"order": 7}\n'
    bf = os.path.join(t.dir, "body.json")
    with open(bf, "w") as f:
        f.write(body)
    os.chmod(bf, 0o644)
    digest = hashlib.sha256(body.encode()).hexdigest()

    def token(*args, as_root=True, sock=None):
        return env.gensee("run", "network", "commit-token", "--socket", sock or t.sup,
                          "--operation", OP, *args, as_root=as_root)

    r = token("--method", "POST", "--url", url, "--body-file", bf)
    check(r.returncode == 0, "commit-token: %s" % r.stderr)
    lines = r.stdout.split("\n")
    check(len(lines) == 2 and lines[1] == "" and len(lines[0]) > 40 and " " not in lines[0],
          "plain output is not the token alone: %r" % r.stdout)
    tok = lines[0]
    check(tok not in r.stderr, "the token on stderr")
    r = post(env, t, url, body, tok)
    check(r["status"] == 200, "the CLI's token: %r" % r)
    r = post(env, t, url, body, tok)
    check(r["status"] == 403 and tm_ref(r) == "commit_token_replayed", "replay: %r" % r)
    # --body-sha256 binds the digest given (upper case accepted as sha256sum's lower);
    # --json shows token, token_id and expires_at.
    r = token("--method", "POST", "--url", url, "--body-sha256", digest.upper(),
              "--ttl-seconds", "60", "--json")
    check(r.returncode == 0, "--json: %s" % r.stderr)
    j = json.loads(r.stdout)
    check(set(("token", "token_id", "expires_at")) <= set(j) and
          j["expires_at"] - time.time() <= 61, "--json: %r" % j)
    ev = [e for e in tm_effects(env) if e.get("kind") == "commit_token_issued"]
    check(len(ev) == 2 and ev[1]["token_id"] == j["token_id"] and ev[1]["path"] == "/submit/cli",
          "evidence: %r" % ev)
    r = post(env, t, url, body, j["token"])
    check(r["status"] == 200, "--body-sha256 token: %r" % r)
    # Tokens for another body, URL or method are refused for this request.
    for what, args, code in (
            ("another body", ("--method", "POST", "--url", url, "--body-sha256",
                              hashlib.sha256(b"other").hexdigest()), "commit_token_wrong_body"),
            ("another URL", ("--method", "POST", "--url", "http://up.test:8080/submit/x",
                             "--body-file", bf), "commit_token_wrong_url"),
            ("another method", ("--method", "PUT", "--url", url, "--body-file", bf),
             "commit_token_wrong_method")):
        r = token(*args)
        check(r.returncode == 0, "%s: %s" % (what, r.stderr))
        r = post(env, t, url, body, r.stdout.strip())
        check(r["status"] == 403 and tm_ref(r) == code, "%s: %r" % (what, r))
    check(len([l for l in tm.upstream_lines(t.uplog) if l["event"] == "body"]) == 2,
          "upstream bodies: %r" % tm.upstream_lines(t.uplog))
    # Only root: the test user on boundary.sock and on the supervisor socket.
    for sock in (env.boundary_sock, t.sup):
        r = token("--method", "POST", "--url", url, "--body-file", bf, as_root=False, sock=sock)
        # Refused by boundaryd, or unable to reach a root-only socket at all.
        check(r.returncode == 1 and r.stdout == "" and
              (": not_authorized:" in r.stderr or (": unavailable:" in r.stderr and
                                                   "Permission denied" in r.stderr)),
              "non-root %s: rc %d %s" % (sock, r.returncode, r.stderr))
    # The wrong operation for the socket fails closed.
    r = env.gensee("run", "network", "commit-token", "--socket", t.sup, "--operation",
                   "op_other", "--method", "POST", "--url", url, "--body-file", bf, as_root=True)
    check(r.returncode == 1 and "not_authorized" in r.stderr, "wrong operation: %s" % r.stderr)
    # boundaryd's own refusals, with their codes.
    for args, code in ((("--method", "GET", "--url", url, "--body-file", bf), "method_not_allowed"),
                       (("--method", "POST", "--url", "http://up.test:8080/a/%2e%2e/b",
                         "--body-file", bf), "invalid_params")):
        r = token(*args)
        check(r.returncode == 1 and code in r.stderr and r.stdout == "", "%r: %s" % (args, r.stderr))
    # Usage errors: 125, nothing issued.
    n = len([e for e in tm_effects(env) if e.get("kind") == "commit_token_issued"])
    for args in ((), ("--method", "POST", "--url", url),
                 ("--method", "POST", "--url", url, "--body-file", bf, "--body-sha256", digest),
                 ("--method", "POST", "--url", url, "--body-sha256", "abc"),
                 ("--method", "POST", "--url", url, "--body-sha256", "g" * 64),
                 ("--method", "POST", "--url", url, "--body-file", bf, "--ttl-seconds", "0"),
                 ("--method", "POST", "--url", url, "--body-file", bf, "--ttl-seconds", "3601"),
                 ("--method", "POST", "--url", url, "--body-file", bf, "extra")):
        r = token(*args)
        check(r.returncode == 125 and r.stdout == "", "usage %r: rc %d" % (args, r.returncode))
    r = env.gensee("run", "network", "commit-token", "--operation", OP, "--method", "POST",
                   "--url", url, "--body-file", bf, as_root=True)
    check(r.returncode == 125, "no --socket: rc %d" % r.returncode)
    r = token("--method", "POST", "--url", url, "--body-file", "/nonexistent/body")
    check(r.returncode == 1 and "/nonexistent/body" in r.stderr, "missing body file: %s" %
          r.stderr)
    check(len([e for e in tm_effects(env) if e.get("kind") == "commit_token_issued"]) == n,
          "a refused invocation issued a token")
    r = env.gensee("run", "network", "commit-token", "--help")
    check(r.returncode == 0 and "--body-sha256" in r.stdout, "--help: %r" % r.stdout)

def tm_ref(r):
    return r["headers"].get("x-gensee-refusal")


if __name__ == "__main__":
    main({f.__name__: f for f in (medlease_credential_injection, medlease_ttl,
                                  medlease_credential_file_checks,
                                  medlease_config_refuses_values, medlease_commit_token,
                                  medlease_restart_fails_closed,
                                  medlease_end_closes_connections,
                                  medlease_commit_token_cli)})
