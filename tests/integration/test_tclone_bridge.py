"""The agent host-control bridge of gensee-tcloned: each tclone agent drives
its own lifecycle through a per-run socket in its mount namespace, scoped to
itself and its direct children, with merge/switch/discard gated on a
recorded user approval (real kernel, real boundaryd, the CLI inside the
agents through `run exec`)."""

import json
import os
import subprocess
import tempfile

from harness import Failure, check, main
from test_tclone import HOLDER, tclone


# A same-uid process outside the run: connect to a socket path however long
# (through an O_PATH fd of its directory), send one request, print the reply.
OUTSIDER = r"""
import json, os, socket, struct, sys
path, method, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
try:
    d = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(10)
    s.connect("/proc/self/fd/%d/%s" % (d, os.path.basename(path)))
    b = json.dumps({"proto": 1, "id": 1, "method": method, "params": params}).encode()
    s.sendall(struct.pack(">I", len(b)) + b)
    def rx(n):
        r = b""
        while len(r) < n:
            c = s.recv(n - len(r))
            if not c: raise ConnectionError("closed")
            r += c
        return r
    (n,) = struct.unpack(">I", rx(4)); print(json.dumps(json.loads(rx(n))))
except OSError as e:
    print(json.dumps({"oserror": e.__class__.__name__, "errno": e.errno}))
"""


def no_sanitizer_report(t):
    """tcloned served every bridge request: nothing in its log from ASan/UBSan."""
    log = t.logtext()
    for bad in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        check(bad not in log, "sanitizer report in tcloned's log:\n" + log[-4000:])


def inside(t, run, *args, env=None, ok=True):
    """The CLI run inside `run` (its namespaces, cgroup, uid) via `run exec`."""
    # Inside the agent seccomp denies ptrace, which LeakSanitizer's exit check
    # needs: a sanitized CLI there checks everything else.
    pre = ["env", "ASAN_OPTIONS=detect_leaks=0"] + ["%s=%s" % kv for kv in (env or {}).items()]
    r = t.g("run", "exec", run, "--", *(pre + [t.env.cli] + list(args)), ok=False)
    if ok and r.returncode != 0:
        raise Failure("inside %s: gensee %s: %d\n%s\n%s\n--- tcloned ---\n%s" % (
            run, " ".join(args), r.returncode, r.stdout, r.stderr, t.logtext()[-3000:]))
    return r


def inside_json(t, run, *args, env=None):
    return json.loads(inside(t, run, *args, env=env).stdout)


def denied(t, run, code, *args, env=None):
    r = inside(t, run, *args, env=env, ok=False)
    check(r.returncode == 125 and code in r.stderr,
          "inside %s, gensee %s: wanted %s, got %d: %s %s" % (run, " ".join(args), code,
                                                             r.returncode, r.stdout, r.stderr))


def outsider(env, path, method, params, uid=None):
    uid = env.uid if uid is None else uid
    r = subprocess.run(["/usr/bin/python3", "-c", OUTSIDER, path, method, json.dumps(params)],
                       capture_output=True, text=True, timeout=30, user=uid,
                       group=env.gid if uid == env.uid else uid, extra_groups=[],
                       env=env.user_env(), cwd="/")
    check(r.returncode == 0, "outsider: %s" % r.stderr)
    return json.loads(r.stdout)


def bridge_control(env):
    env.start()
    with tclone(env) as t:
        t.workspace({"shared.txt": "base\n"})
        sid = t.source()["run_id"]
        other = t.source()["run_id"]
        t.wait_done(sid)
        t.wait_done(other)
        bview = os.path.join(env.runtime, "tclone", "control.sock")
        bhost = os.path.join(env.runtime, "tclone", "bridge", sid + ".sock")

        # The agent finds its bridge at the fixed path, named in its environment.
        r = t.g("run", "exec", sid, "--", "sh", "-c", 'test -S "$GENSEE_TCLONE_BRIDGE" && '
                'echo "$GENSEE_TCLONE_BRIDGE"; ls "$(dirname "$GENSEE_TCLONE_BRIDGE")"', ok=False)
        check(r.returncode == 0 and r.stdout.splitlines()[0] == bview,
              "bridge in the agent's view: %d %r %r" % (r.returncode, r.stdout, r.stderr))
        # Only its own run directory and its own socket there: no bridge/ of other runs.
        check("bridge" not in r.stdout.split() and other not in r.stdout.split(),
              "the agent sees %r" % r.stdout)

        # Fork of itself, from inside: a direct child, recorded as the agent's.
        fk = inside_json(t, sid, "run", "fork", sid, "--approach", "alpha", "--json")
        fid = fk["forks"][0]["run_id"]
        check(fk["source_run_id"] == sid and fk["caller_run_id"] == sid, "fork %r" % fk)
        t.wait_done(fid)
        fh = [h for h in t.history() if h["action"] == "fork" and h["run_id"] == fid]
        check(fh and fh[-1]["origin"] == {"via": "bridge", "run_id": sid,
                                          "pid": fh[-1]["origin"]["pid"]},
              "fork history origin %r" % fh)
        # Runs it must not reach: another source, that source's fork, its own grandchild.
        ofid = t.g("run", "fork", other, "--json", json_out=True)["forks"][0]["run_id"]
        gid = t.g("run", "fork", fid, "--json", json_out=True)["forks"][0]["run_id"]
        t.wait_done(ofid)

        # list: itself and its direct child only.
        ls = inside_json(t, sid, "run", "list", "--json")
        check(sorted(x["run_id"] for x in ls["runs"]) == sorted([sid, fid]) and
              ls["caller_run_id"] == sid, "scoped list %r" % ls)
        summ = inside_json(t, sid, "run", "summary", fid, "--json")
        check("alpha.txt" in summ["changed_files"], "summary of own child %r" % summ)
        check(inside_json(t, sid, "run", "diff", fid, "--json")["run_id"] == fid, "diff of child")
        check(inside_json(t, sid, "run", "summary", sid, "--json")["run_id"] == sid, "own summary")
        for target in (other, ofid, gid):
            denied(t, sid, "out_of_scope", "run", "summary", target, "--json")
            denied(t, sid, "out_of_scope", "run", "diff", target, "--json")
        denied(t, sid, "out_of_scope", "run", "fork", other)
        denied(t, sid, "out_of_scope", "run", "fork", fid)
        denied(t, sid, "out_of_scope", "run", "exec", fid, "--", "true")
        denied(t, sid, "out_of_scope", "run", "send", other, "--", "hi")
        denied(t, sid, "not_authorized", "run", "delete", "--all")
        denied(t, sid, "not_authorized", "run", "delete", fid)
        denied(t, sid, "not_authorized", "run", "keep", fid, "--to", "/tmp/k")
        denied(t, sid, "not_authorized", "run", "choose", fid, "--merge")
        # A fork: not its source, not its sibling's source, not the grandchild's merge.
        denied(t, fid, "out_of_scope", "run", "summary", sid, "--json")
        denied(t, fid, "out_of_scope", "run", "discard", sid)
        denied(t, fid, "out_of_scope", "run", "merge", fid, "--into", sid, "--filesystem")
        denied(t, fid, "out_of_scope", "run", "approve", sid, "--merge")
        ls = inside_json(t, fid, "run", "list", "--json")
        check(sorted(x["run_id"] for x in ls["runs"]) == sorted([fid, gid]), "fork's list %r" % ls)

        # exec only in itself: it runs there.
        inside(t, sid, "run", "exec", sid, "--", "sh", "-c", "echo self > selfexec.txt")
        check(t.diff(sid).get("selfexec.txt") == "added", "exec in itself did not run there")
        # send to a direct child: typed into its session.
        inside(t, sid, "run", "send", fid, "--", "hello-from-source")
        sock = os.path.join(env.runtime, "tclone", fid, "tmux.sock")
        env.wait_for("the sent text in the child's pane", lambda: "hello-from-source" in
                     subprocess.run(env.user_prefix() + ["tmux", "-S", sock, "capture-pane", "-p",
                                                         "-t", "gensee-agent"],
                                    capture_output=True, text=True).stdout, timeout=10)

        # merge: not without the user's approval; a dry run needs none.
        denied(t, sid, "approval_required", "run", "merge", fid, "--into", sid, "--filesystem")
        dry = inside_json(t, sid, "run", "merge", fid, "--into", sid, "--filesystem", "--dry-run",
                          "--json")
        check(dry["status"] == "clean", "dry run %r" % dry)
        denied(t, sid, "not_authorized", "run", "merge", fid, "--into", sid, "--filesystem",
               "--force")
        # An approval of another choice does not do; nor one for a run not its child.
        inside(t, sid, "run", "approve", fid, "--discard")
        denied(t, sid, "approval_required", "run", "merge", fid, "--into", sid, "--filesystem")
        denied(t, sid, "out_of_scope", "run", "approve", ofid, "--merge")
        denied(t, sid, "out_of_scope", "run", "approve", gid, "--merge")
        # The later choice replaces it: merge works once, then the approval is spent.
        ap = inside_json(t, sid, "run", "approve", fid, "--merge")
        check(ap["approval"]["action"] == "merge" and ap["approval"]["by_run"] == sid,
              "approval %r" % ap)
        m = inside_json(t, sid, "run", "merge", fid, "--into", sid, "--filesystem", "--json")
        check(m["status"] == "merged", "approved merge %r" % m)
        check(t.keep(sid).get("alpha.txt") == "alpha\n", "the merge did not reach the source")
        denied(t, sid, "approval_required", "run", "merge", fid, "--into", sid, "--filesystem")
        # At the host, approvals are neither needed nor recorded.
        r = t.g("run", "approve", fid, "--merge", ok=False)
        check(r.returncode == 125 and "inside a tclone agent" in r.stderr, "host approve: %s" %
              r.stderr)

        # A forged run id (the CLI's hint, or a raw request) changes nothing.
        ls = inside_json(t, sid, "run", "list", "--json", env={"GENSEE_RUN_ID": other})
        check(ls["caller_run_id"] == sid and
              sorted(x["run_id"] for x in ls["runs"]) == sorted([sid, fid]),
              "list with a forged GENSEE_RUN_ID %r" % ls)
        denied(t, sid, "out_of_scope", "run", "summary", ofid, "--json",
               env={"GENSEE_RUN_ID": other})
        r = t.g("run", "exec", sid, "--", "/usr/bin/python3", "-c", OUTSIDER, bview,
                "tclone.summary", json.dumps({"run_id": ofid, "caller_run_id": other}), ok=False)
        check(r.returncode == 0 and json.loads(r.stdout)["error"]["code"] == "out_of_scope",
              "raw forged request: %s %s" % (r.stdout, r.stderr))

        # Around it: the same uid outside the run, on the host path and through
        # /proc/PID/root of the agent; another uid cannot even connect.
        rep = outsider(env, bhost, "tclone.list", {})
        check(rep.get("error", {}).get("code") == "not_in_run", "outsider on the host path %r" % rep)
        rep = outsider(env, bhost, "tclone.approve", {"run_id": fid, "action": "discard"})
        check(rep.get("error", {}).get("code") == "not_in_run", "outsider approving %r" % rep)
        tmux_pid = subprocess.run(["pgrep", "-u", str(env.uid), "-f", "tmux -S %s" % os.path.join(
            env.runtime, "tclone", sid, "tmux.sock")], capture_output=True, text=True).stdout.split()
        check(tmux_pid, "no tmux server of the source")
        rep = outsider(env, "/proc/%s/root%s" % (tmux_pid[0], bview), "tclone.list", {})
        check(rep.get("error", {}).get("code") == "not_in_run", "outsider via /proc/PID/root %r"
              % rep)
        rep = outsider(env, bhost, "tclone.list", {}, uid=65534)
        check(rep.get("oserror") is not None, "another uid connected: %r" % rep)
        # Another run's agent (the other source) through /proc cannot speak for sid either:
        # its own /proc shows only its own processes; on the host path it is refused.
        r = t.g("run", "exec", other, "--", "/usr/bin/python3", "-c", OUTSIDER, bhost,
                "tclone.list", "{}", ok=False)
        check(r.returncode == 0 and ("oserror" in r.stdout or "not_in_run" in r.stdout),
              "another run's agent on sid's socket: %s %s" % (r.stdout, r.stderr))

        # Outsiders holding the socket's connections do not lock the agent out.
        holder = subprocess.Popen(["/usr/bin/python3", "-c", HOLDER, bhost, "6"], user=env.uid,
                                  group=env.gid, extra_groups=[], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        env.children.append(holder)
        check(holder.stdout.readline().strip() == "ready", "holder did not connect")
        ls = inside_json(t, sid, "run", "list", "--json")
        check(ls["caller_run_id"] == sid, "the agent was locked out of its bridge: %r" % ls)
        holder.stdin.write("\n")
        holder.stdin.flush()
        alive = int(holder.stdout.readline())
        check(alive <= 4, "%d idle outsiders held on the bridge" % alive)
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)

        # discard with an approval; promote (switch) with one.
        denied(t, sid, "approval_required", "run", "discard", fid)
        inside(t, sid, "run", "approve", fid, "--discard")
        d = inside_json(t, sid, "run", "discard", fid, "--json")
        check(d["state"] == "discarded", "approved discard %r" % d)
        check(not os.path.exists(os.path.join(env.runtime, "tclone", "bridge", fid + ".sock")),
              "a discarded run's bridge socket remains")
        f3 = inside_json(t, sid, "run", "fork", sid, "--json")["forks"][0]["run_id"]
        t.wait_done(f3)
        denied(t, sid, "approval_required", "run", "switch", f3)
        inside(t, sid, "run", "approve", f3, "--promote")
        # The switch ends the caller's own agent: its answer may not arrive.
        inside(t, sid, "run", "switch", f3, ok=False)
        runs = {x["run_id"]: x for x in t.g("run", "list", "--json", json_out=True)["runs"]}
        check(runs[f3]["role"] == "source" and runs[sid]["state"] == "switched",
              "approved switch: %r" % {k: (v["role"], v["state"]) for k, v in runs.items()})

        hist = t.history()
        by_bridge = [(h["action"], h["outcome"]) for h in hist
                     if h.get("origin", {}).get("via") == "bridge" and
                     h["origin"].get("run_id") == sid]
        for want in (("fork", "succeeded"), ("approve", "recorded"), ("approve", "consumed"),
                     ("merge", "succeeded"), ("merge", "dry-run"), ("discard", "succeeded"),
                     ("switch", "succeeded"), ("bridge", "denied")):
            check(want in by_bridge, "history lacks agent-originated %r: %r" % (want, by_bridge))
        check(any(h["action"] == "bridge" and h["detail"]["code"] == "not_in_run" for h in hist),
              "the outsider's refusal is not in the history")
        check(all(h["origin"]["via"] == "host" for h in hist if h["action"] == "start"),
              "host starts not marked as host")

        # Observe-only: no bridge at all.
        oid = t.source("--observe-only")["run_id"]
        t.wait_done(oid)
        r = t.g("run", "exec", oid, "--", "sh", "-c", 'echo "[$GENSEE_TCLONE_BRIDGE]"; '
                'test -e %s && echo present' % bview, ok=False)
        check(r.stdout.splitlines()[0] == "[]" and "present" not in r.stdout,
              "observe-only run has a bridge: %r" % r.stdout)
        t.g("run", "delete", "--all")
        check(os.listdir(os.path.join(env.runtime, "tclone", "bridge")) == [],
              "bridge sockets left")
        t.stop()
        no_sanitizer_report(t)


def file_rules(env):
    """tclone agents get the fanotify file rules of --sandbox linux (the
    user's policy): a denied path is refused inside a source and its fork,
    and each denial is in that operation's files.jsonl."""
    env.start()
    env.start_sensord()
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    key = os.path.join(home, ".ssh", "id_ed25519")
    os.makedirs(os.path.dirname(key))
    with open(key, "w") as f:
        f.write("PRIVATE KEY\n")
    with open(os.path.join(home, "policy.json"), "w") as f:
        json.dump({"linux": {"fanotify": {"enabled": True, "paths": [os.path.join(
            home, ".ssh"), "**/.env"]}, "mount_view": {"mode": "off"}, "landlock": {"mode": "off"}}}, f)
    env.chown_to_user(home)
    os.chmod(home, 0o755)
    uenv = {"HOME": home, "GENSEE_HOME": home}
    with tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        src = t.source(env=uenv)
        sid = src["run_id"]
        t.wait_done(sid)
        check(src["confinement"]["fanotify"]["rules"] >= 1, "confinement %r" % src["confinement"])
        # Workspace rules do not reach the snapshot (tclone.md): said, not hidden.
        check(src["confinement"]["fanotify"]["unenforced_in_snapshot"] ==
              [os.path.join(t.ws, "**/.env")], "unenforced %r" % src["confinement"])
        r = t.g("run", "--runtime", "tclone", "--detach", "--", "sleep", "60",
                env=uenv)
        check("is not enforced on the run's snapshot" in r.stderr, "no warning: %s" % r.stderr)
        fk = t.g("run", "fork", sid, "--json", json_out=True, env=uenv)
        fid = fk["forks"][0]["run_id"]
        check(fk["forks"][0]["authority"]["fanotify"] is not None, "fork authority %r" %
              fk["forks"][0]["authority"])
        t.wait_done(fid)
        runs = {r["run_id"]: r for r in t.g("run", "list", "--json", json_out=True)["runs"]}
        for run in (sid, fid):
            r = t.g("run", "exec", run, "--", "sh", "-c", "cat %s; echo rc=$?; cat a.txt" % key,
                    ok=False)
            check("rc=1" in r.stdout and "PRIVATE" not in r.stdout and "a\n" in r.stdout,
                  "%s read the denied key or nothing at all: %r %r" % (run, r.stdout, r.stderr))
            opid = runs[run]["operation_id"]
            path = os.path.join(env.state, "operations", opid, "files.jsonl")
            env.wait_for("the denial in %s's files.jsonl" % run, lambda: os.path.exists(path) and any(
                json.loads(l)["path"] == key and json.loads(l)["decision"] == "deny"
                for l in open(path)), timeout=10)
            check(env.record(opid)["fanotify"]["enabled"] is True, "operation record of %s" % run)
        # Around it: the user's rules may not reach beyond their home and workspace.
        bad = os.path.join(home, "bad")
        os.makedirs(bad)
        os.chown(bad, env.uid, env.gid)
        with open(os.path.join(bad, "policy.json"), "w") as f:
            json.dump({"linux": {"fanotify": {"enabled": True, "paths": ["/etc/shadow"]}}}, f)
        r = t.g("run", "--runtime", "tclone", "--json", "--", "true", ok=False,
                env={"HOME": home, "GENSEE_HOME": bad})
        check(r.returncode == 125 and "invalid_params" in r.stderr,
              "a rule outside the user's scope: %d %s" % (r.returncode, r.stderr))
        t.g("run", "delete", "--all")
        t.stop()
        no_sanitizer_report(t)


def file_rules_in_copy_snapshot(env):
    """Attack (issue 22.3): a workspace rule (**/.env) named the user's files,
    but the agent reads its snapshot's copies, and read them. On a copy
    snapshot the rule also names the snapshot: the copies, a new .env and
    the fork's are all refused, and nothing is listed as unenforced."""
    env.start()
    env.start_sensord()
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    with open(os.path.join(home, "policy.json"), "w") as f:
        json.dump({"linux": {"fanotify": {"enabled": True, "paths": ["**/.env"]},
                             "mount_view": {"mode": "off"}, "landlock": {"mode": "off"}}}, f)
    env.chown_to_user(home)
    os.chmod(home, 0o755)
    uenv = {"HOME": home, "GENSEE_HOME": home}
    probe = ("cat .env; echo rc=$?; cat sub/.env; echo rc=$?; mkdir -p d; "
             "(echo S > d/.env) 2>/dev/null; echo made=$?; cat a.txt")
    with tclone(env, ["--backend", "copy"]) as t:
        t.workspace({"a.txt": "a\n", ".env": "TOKEN=1\n", "sub/.env": "TOKEN=2\n"})
        src = t.source(env=uenv)
        sid = src["run_id"]
        check(src["confinement"]["fanotify"]["unenforced_in_snapshot"] == [],
              "unenforced %r" % src["confinement"])
        t.wait_done(sid)
        fid = t.g("run", "fork", sid, "--json", json_out=True, env=uenv)["forks"][0]["run_id"]
        t.wait_done(fid)
        runs = {r["run_id"]: r for r in t.g("run", "list", "--json", json_out=True)["runs"]}
        for run in (sid, fid):
            r = t.g("run", "exec", run, "--", "sh", "-c", probe, ok=False)
            check("TOKEN" not in r.stdout and r.stdout.count("rc=1") == 2 and
                  "made=0" not in r.stdout and r.stdout.endswith("a\n"),
                  "%s: %r %r" % (run, r.stdout, r.stderr))
            path = os.path.join(env.state, "operations", runs[run]["operation_id"], "files.jsonl")
            env.wait_for("the denial in %s's files.jsonl" % run, lambda: os.path.exists(path) and any(
                json.loads(l)["path"].endswith("/.env") and json.loads(l)["decision"] == "deny"
                for l in open(path)), timeout=10)
        t.g("run", "delete", "--all")


if __name__ == "__main__":
    main({"bridge_control": bridge_control, "file_rules": file_rules,
          "file_rules_in_copy_snapshot": file_rules_in_copy_snapshot})
