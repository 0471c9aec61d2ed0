"""gensee-tcloned: sources, forks, diff/compare, merge with conflicts and
rollback, discard/delete, crash recovery, and forks' boundaries (real kernel,
real boundaryd, the CLI as the test user)."""

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import BUILD, Failure, call, check, main

TCLONED = os.path.join(BUILD, "daemons", "tcloned", "gensee-tcloned")

# The agent every source runs: it marks itself started, and a fork acts on
# its approach label (each fork edits shared.txt its own way), then idles.
AGENT = r"""
case "$GENSEE_TCLONE_APPROACH" in
  alpha) echo alpha > alpha.txt; echo alpha > shared.txt; rm -f gone.txt ;;
  beta) echo beta > beta.txt; echo beta > shared.txt; mkdir -p newdir/deep; echo n > newdir/deep/n.txt ;;
  many) i=0; while [ $i -lt 30 ]; do echo "m$i" > "many-$i.txt"; i=$((i+1)); done; echo many > shared.txt ;;
  "") echo "$GENSEE_TCLONE_ROLE" > started.txt ;;
esac
[ -n "$TCLONE_PROBE" ] && sh "$TCLONE_PROBE" > "probe-$GENSEE_RUN_ID.txt" 2>&1
echo "$GENSEE_OPERATION_ID" > "done-$GENSEE_RUN_ID"
exec sleep 600
"""


class Tclone:
    """One gensee-tcloned of this case, its authority root and a workspace."""

    def __init__(self, env, args=()):
        self.env = env
        self.root = tempfile.mkdtemp(prefix="gensee-it-tc.")
        os.chmod(self.root, 0o700)
        self.args = list(args)
        self.proc = None
        self.log = tempfile.NamedTemporaryFile(prefix="gensee-it-tc.", suffix=".log",
                                               delete=False).name
        env.logs.append(self.log)
        self.ws = tempfile.mkdtemp(prefix="gensee-it-ws.", dir="/var/tmp")
        self.outside = []

    def start(self, args=None, expect_fail=False):
        argv = self.env.ns_prefix() + [TCLONED, "--authority-root", self.root, "--runtime-dir",
                                       self.env.runtime] + (self.args if args is None else args)
        if self.env.cgroup_base != "gensee":
            argv += ["--cgroup-base", self.env.cgroup_base]
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        self.env.children.append(self.proc)
        if expect_fail:
            try:
                return self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise Failure("tcloned started with %r" % argv)
        sock = os.path.join(self.env.runtime, "tclone.sock")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure("tcloned exited %d:\n%s" % (self.proc.returncode, self.logtext()))
            try:
                if "result" in call(sock, "tclone.status", timeout=2):
                    return self.proc
            except OSError:
                pass
            time.sleep(0.05)
        raise Failure("tcloned did not answer")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def logtext(self):
        with open(self.log) as f:
            return f.read()

    def workspace(self, files):
        for rel, text in files.items():
            path = os.path.join(self.ws, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        with open(os.path.join(self.ws, "agent.sh"), "w") as f:
            f.write(AGENT)
        for d, dirs, fs in os.walk(self.ws):
            for n in dirs + fs:
                os.chown(os.path.join(d, n), self.env.uid, self.env.gid)
        os.chown(self.ws, self.env.uid, self.env.gid)
        os.chmod(self.ws, 0o755)

    def g(self, *args, ok=True, json_out=False, timeout=120, env=None):
        r = self.env.gensee(*args, cwd=self.ws, timeout=timeout, env=env)
        if ok and r.returncode != 0:
            raise Failure("gensee %s: %d\n%s\n%s\n--- tcloned ---\n%s" % (
                " ".join(args), r.returncode, r.stdout, r.stderr, self.logtext()[-4000:]))
        if json_out:
            return json.loads(r.stdout)
        return r

    def source(self, *extra, env=None):
        return self.g("run", "--runtime", "tclone", "--json", *extra, "--", "sh", "agent.sh",
                      json_out=True, env=env)

    def diff(self, run):
        return {c["path"]: c["change"] for c in self.g("run", "diff", run, "--json",
                                                          json_out=True)["changes"]}

    def check_agent_forks(self, f0, f1):
        """Wait for two forks of AGENT (fork 0, fork 1) and check their diffs."""
        self.wait_done(f0)
        self.wait_done(f1)
        d0, d1 = self.diff(f0), self.diff(f1)
        check(d0.get("alpha.txt") == "added" and d0.get("shared.txt") == "modified" and
              d0.get("gone.txt") == "deleted" and "started.txt" not in d0, "fork0 diff %r" % d0)
        check(d1.get("beta.txt") == "added" and "alpha.txt" not in d1, "fork1 diff %r" % d1)

    def wait_done(self, run):
        return self.env.wait_for("agent of %s" % run,
                                 lambda: "done-" + run in self.diff(run), timeout=30)

    def keep(self, run):
        """The run's workspace as a dict {relpath: content}, through `run keep`."""
        parent = tempfile.mkdtemp(prefix="gensee-it-keep.", dir="/var/tmp")
        os.chown(parent, self.env.uid, self.env.gid)
        self.outside.append(parent)
        dst = os.path.join(parent, "kept")
        self.g("run", "keep", run, "--to", dst)
        tree = {}
        for d, dirs, fs in os.walk(dst):
            for n in fs:
                p = os.path.join(d, n)
                st = os.lstat(p)
                check(st.st_uid == self.env.uid, "kept file %s owned by %d" % (p, st.st_uid))
                with open(p, "rb") as f:
                    tree[os.path.relpath(p, dst)] = f.read().decode(errors="replace")
        return tree

    def history(self):
        path = os.path.join(self.root, "tclone", "history.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f]

    def mounts(self):
        with open("/proc/self/mountinfo") as f:
            return [line.split()[4] for line in f if line.split()[4].startswith(self.root + "/")]

    def cleanup(self):
        self.stop()
        for m in sorted(self.mounts(), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], check=False)
        for d in [self.root, self.ws] + self.outside:
            if os.path.isfile(d):
                os.unlink(d)
            else:
                shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def tclone(env, args=()):
    t = Tclone(env, args)
    try:
        t.start()
        yield t
    finally:
        t.cleanup()


def lifecycle(env):
    env.start()
    with tclone(env) as t:
        t.workspace({"shared.txt": "base\n", "gone.txt": "old\n", "src/keep.c": "int x;\n"})
        st = call(os.path.join(env.runtime, "tclone.sock"), "tclone.status")["result"]
        check("overlay" in st["backends"] and "copy" in st["backends"], "backends %r" % st)
        check(st["live_clone"]["available"] is False and "criu" in st["live_clone"]["reason"],
              "live clone %r" % st["live_clone"])
        # The reason is this host's own: `criu check` decides, never a guess.
        reason = st["live_clone"]["reason"]
        criu = shutil.which("criu", path="/usr/sbin:/usr/bin:/sbin:/bin")
        if criu is None:
            check(reason == "criu is not installed on this host", reason)
        elif subprocess.run([criu, "check"], capture_output=True, timeout=30).returncode != 0:
            check(reason.startswith("criu check fails on this host: "), reason)
        else:
            check(reason.startswith("criu check passes on this host, but"), reason)
        r = env.gensee("status")
        check("tcloned" in r.stdout and "overlay" in r.stdout, "gensee status: %s" % r.stdout)

        src = t.source()
        sid = src["run_id"]
        check(src["role"] == "source" and src["operation_id"].startswith("op_"), "source %r" % src)
        t.wait_done(sid)
        # The agent ran on a snapshot: the user's own directory is untouched.
        check(not os.path.exists(os.path.join(t.ws, "started.txt")), "the workspace was written")
        check(t.diff(sid).get("started.txt") == "added", "source diff %r" % t.diff(sid))
        rec = env.record(src["operation_id"])
        check(rec["lifecycle"]["state"] == "running", "source operation %r" % rec["lifecycle"])

        fk = t.g("run", "fork", sid, "--copies", "2", "--name", "try", "--approach", "alpha",
                 "--approach", "beta", "--json", json_out=True)
        forks = fk["forks"]
        check(len(forks) == 2 and [f["name"] for f in forks] == ["try-0", "try-1"],
              "forks %r" % forks)
        check(fk["authority_delta"] == {} and fk["live_clone"]["available"] is False,
              "fork result %r" % fk)
        f0, f1 = forks[0]["run_id"], forks[1]["run_id"]
        for f in forks:
            check(f["operation_id"] != src["operation_id"], "fork shares the operation")
            check(f["authority"]["authority_delta"] == {} and
                  f["authority"]["network"] == {"mode": "allowlist", "allow": []},
                  "fork authority %r" % f["authority"])
            check(f["group_id"] == fk["group_id"], "group %r" % f)
            check(env.record(f["operation_id"])["cgroup"]["path"] !=
                  rec["cgroup"]["path"], "fork shares the cgroup")
        t.wait_done(f0)
        t.wait_done(f1)
        d0, d1 = t.diff(f0), t.diff(f1)
        # A fork starts from the source as it was: started.txt is in its base.
        check(d0.get("alpha.txt") == "added" and d0.get("shared.txt") == "modified" and
              d0.get("gone.txt") == "deleted" and "started.txt" not in d0, "fork0 diff %r" % d0)
        check(d1.get("beta.txt") == "added" and d1.get("newdir/deep/n.txt") == "added" and
              "alpha.txt" not in d1, "fork1 diff %r" % d1)
        names = [r["name"] for r in t.g("run", "list", "--json", json_out=True)["runs"]]
        check("try-0" in names and "try-1" in names, "list %r" % names)

        cmp_ = t.g("run", "compare", f0, "--json", json_out=True)
        check(len(cmp_["forks"]) == 2 and cmp_["recommendation"]["run_id"] in (f0, f1),
              "compare %r" % cmp_)
        summ = t.g("run", "summary", f0, "--json", json_out=True)
        check("alpha.txt" in summ["changed_files"] and summ["approach"] == "alpha",
              "summary %r" % summ)

        before = t.keep(sid)
        dry = t.g("run", "merge", f0, "--into", sid, "--filesystem", "--dry-run", "--json",
                  json_out=True)
        check(dry["status"] == "clean" and dry["apply"] >= 3, "dry run %r" % dry)
        check(t.keep(sid) == before, "a dry run changed the source")
        m = t.g("run", "merge", f0, "--into", sid, "--filesystem", "--json", json_out=True)
        check(m["status"] == "merged" and m["merged"], "merge %r" % m)
        after = t.keep(sid)
        check(after.get("alpha.txt") == "alpha\n" and after.get("shared.txt") == "alpha\n" and
              "gone.txt" not in after and after.get("started.txt") == "source\n",
              "merged source %r" % after)

        # fork1 changed shared.txt too, differently: nothing at all is applied.
        r = t.g("run", "merge", f1, "--into", sid, "--filesystem", "--json", ok=False)
        check(r.returncode == 1, "conflicting merge exited %d: %s" % (r.returncode, r.stderr))
        c = json.loads(r.stdout)
        check(c["status"] == "conflict" and [x["path"] for x in c["conflicts"]] == ["shared.txt"],
              "conflict report %r" % c)
        check(t.keep(sid) == after, "a conflicting merge changed the source")
        # Only the chosen paths: beta.txt and the new directory, not shared.txt.
        m = t.g("run", "merge", f1, "--into", sid, "--paths", "beta.txt",
                os.path.join(t.ws, "newdir/deep/n.txt"), "--json", json_out=True)
        check(m["status"] == "merged", "paths merge %r" % m)
        now = t.keep(sid)
        check(now.get("beta.txt") == "beta\n" and now.get("newdir/deep/n.txt") == "n\n" and
              now.get("shared.txt") == "alpha\n", "paths merge result %r" % now)
        for bad in ("../etc/passwd", "/etc/passwd", "a/../../x", os.path.join(t.ws, "..", "x")):
            r = t.g("run", "merge", f1, "--into", sid, "--paths", bad, ok=False)
            check(r.returncode == 125 and "invalid_path" in r.stderr, "path %s: %s" % (bad, r.stderr))

        d = t.g("run", "discard", f1, "--json", json_out=True)
        check(d["state"] == "discarded", "discard %r" % d)
        r = t.g("run", "diff", f1, ok=False)
        check(r.returncode == 125 and "state_error" in r.stderr, "diff of discarded: %s" % r.stderr)
        # The clean names are taken by unresolved runs: the group gets a timestamp.
        again = [f["name"] for f in t.g("run", "fork", sid, "--name", "try", "--copies", "2",
                                         "--json", json_out=True)["forks"]]
        check(len(again) == 2 and all(n.startswith("try-20") for n in again) and
              again[0][:-2] == again[1][:-2] and again[0].endswith("-0"),
              "names of a repeated group %r" % again)
        env.wait_for("fork1 operation ended",
                     lambda: env.record(forks[1]["operation_id"])["lifecycle"]["state"] != "running")

        hist = t.history()
        forked = [h for h in hist if h["action"] == "fork" and h["outcome"] == "succeeded"]
        groups = {}
        for h in forked:
            groups.setdefault(h["group_id"], []).append(h["run_id"])
        check(len(groups) == 2 and sorted(groups[fk["group_id"]]) == sorted([f0, f1]),
              "fork history grouped as %r" % groups)
        outcomes = [(h["action"], h["outcome"]) for h in hist]
        for want in (("start", "succeeded"), ("merge", "dry-run"), ("merge", "succeeded"),
                     ("merge", "failed"), ("discard", "succeeded")):
            check(want in outcomes, "history lacks %r: %r" % (want, outcomes))

        t.g("run", "delete", f0)
        runs = [r["run_id"] for r in t.g("run", "list", "--json", json_out=True)["runs"]]
        check(f0 not in runs and sid in runs, "list after delete %r" % runs)
        t.g("run", "delete", "--all")
        check(t.g("run", "list", "--json", json_out=True)["runs"] == [], "runs left")
        check(t.mounts() == [], "mounts left: %r" % t.mounts())
        check(os.listdir(os.path.join(t.root, "tclone", "layers")) == [], "layers left")
        check(("delete", "succeeded") in [(h["action"], h["outcome"]) for h in t.history()],
              "no delete in history")
        env.wait_for("source operation ended",
                     lambda: env.record(src["operation_id"])["lifecycle"]["state"] != "running")


def switch_and_choose(env):
    env.start()
    with tclone(env) as t:
        t.workspace({"shared.txt": "base\n"})
        sid = t.source()["run_id"]
        t.wait_done(sid)
        fk = t.g("run", "fork", sid, "--copies", "2", "--approach", "alpha", "--approach", "beta",
                 "--json", json_out=True)
        f0, f1 = [f["run_id"] for f in fk["forks"]]
        t.wait_done(f0)
        t.wait_done(f1)
        ch = t.g("run", "choose", f0, "--merge", "--json", json_out=True)
        check(ch["result"]["status"] == "merged" and ch["discarded"] == [f1], "choose %r" % ch)
        check(t.keep(sid).get("shared.txt") == "alpha\n", "choose --merge did not merge")
        fk = t.g("run", "fork", sid, "--json", json_out=True)
        f2 = fk["forks"][0]["run_id"]
        sw = t.g("run", "switch", f2, "--json", json_out=True)
        check(sw["role"] == "source" and sw["run_id"] == f2, "switch %r" % sw)
        runs = {r["run_id"]: r for r in t.g("run", "list", "--json", json_out=True)["runs"]}
        check(runs[sid]["state"] == "switched", "old source %r" % runs[sid])
        # The promoted run can be forked: it is the source now.
        fk = t.g("run", "fork", f2, "--json", json_out=True)
        check(fk["source_run_id"] == f2, "fork of promoted %r" % fk)
        # Merging it into the old source, not its direct source, needs --force.
        f3 = fk["forks"][0]["run_id"]
        r = t.g("run", "merge", f3, "--into", sid, "--filesystem", ok=False)
        check(r.returncode == 125 and "not_direct_child" in r.stderr, "merge into a non-parent: %s"
              % r.stderr)
        m = t.g("run", "merge", f3, "--into", sid, "--filesystem", "--force", "--json",
                json_out=True)
        check(m["forced"] is True and m["status"] in ("merged", "nothing_to_merge"),
              "forced merge %r" % m)
        check(("merge", "forced") in [(h["action"], h["outcome"]) for h in t.history()],
              "no forced merge in the history")
        check(("switch", "succeeded") in [(h["action"], h["outcome"]) for h in t.history()],
              "no switch in history")
        t.g("run", "delete", "--all")
        check(t.mounts() == [], "mounts left: %r" % t.mounts())


def crash_mid_merge(env):
    env.start()
    with tclone(env, ["--debug-apply-pause-ms", "150"]) as t:
        crash_mid_merge_on(env, t)


def crash_mid_merge_on(env, t):
    t.workspace({"shared.txt": "base\n", "gone.txt": "x\n"})
    sid = t.source()["run_id"]
    t.wait_done(sid)
    f0 = t.g("run", "fork", sid, "--approach", "many", "--json",
             json_out=True)["forks"][0]["run_id"]
    t.wait_done(f0)
    before = t.keep(sid)
    p = env.gensee_bg("run", "merge", f0, "--into", sid, "--filesystem", "--json")

    def midway():
        for prog in glob.glob(os.path.join(t.root, "tclone", "txn", "*", "progress")):
            with open(prog, "rb") as f:
                b = f.read()
            if len(b) == 8 and int.from_bytes(b, "little", signed=True) >= 3:
                return True
        return False
    env.wait_for("the merge to be midway", midway, timeout=30)
    t.kill9()
    env.finish(p)
    t.start()
    # The source is whole again: exactly what it was before the merge.
    check(t.keep(sid) == before, "source after a crash mid-merge differs")
    failed = [h for h in t.history() if h["action"] == "merge" and h["outcome"] == "failed"]
    check(failed and failed[-1]["detail"]["rolled_back"] is True, "history %r" % failed)
    check(os.listdir(os.path.join(t.root, "tclone", "txn")) == [], "journal left")
    runs = {r["run_id"]: r for r in t.g("run", "list", "--json", json_out=True)["runs"]}
    check(runs[sid]["state"] == "lost", "source state after restart %r" % runs[sid])
    # And a merge after the restart works.
    m = t.g("run", "merge", f0, "--into", sid, "--filesystem", "--json", json_out=True)
    check(m["status"] == "merged", "merge after restart %r" % m)
    check(t.keep(sid).get("many-29.txt") == "m29\n", "merge after restart incomplete")
    t.g("run", "delete", "--all")


PROBE = r"""
python3 - "$@" <<'EOF'
import os, socket, sys
def conn(addr, port):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((addr, port)); return "connected"
    except OSError as e:
        return "blocked:" + (os.strerror(e.errno) if e.errno else type(e).__name__)
    finally:
        s.close()
print("allowed", conn("198.51.100.1", 8470))
print("denied", conn("192.0.2.1", 8471))
def can_read(p):
    try:
        os.listdir(p); return "readable"
    except OSError as e:
        return "refused"
print("root", can_read(os.environ["TC_ROOT"]))
print("runs", can_read(os.environ["TC_ROOT"] + "/tclone/runs"))
print("uid", os.getuid())
print("rundirs", ",".join(sorted(os.listdir(os.environ["TC_RT"]))))
print("hosttmp", "visible" if os.path.exists(os.environ["TC_MARK"]) else "hidden")
def can_write(d):
    try:
        with open(os.path.join(d, "w-%d" % os.getpid()), "w") as f:
            f.write("x")
        return "written"
    except OSError as e:
        return "refused"
print("outside", can_write(os.environ["TC_OPEN"]))
print("extra", can_write(os.environ["TC_EXTRA"]))
print("procs", len([d for d in os.listdir("/proc") if d.isdigit()]))
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.umount2(os.environ["GENSEE_WORKSPACE"].encode(), 2)
    print("umount", "ok" if rc == 0 else "refused")
except Exception as e:
    print("umount", "error", e)
try:
    rc = libc.unshare(0x10000000)  # CLONE_NEWUSER: then mount over its own view
    print("userns", "made" if rc == 0 else "refused")
except Exception as e:
    print("userns", "error", e)
try:
    s = socket.socket(socket.AF_UNIX); s.settimeout(3)
    s.connect(os.environ["TC_SOCK"])
    import json, struct
    d = json.dumps({"proto": 1, "id": 1, "method": "tclone.list", "params": {}}).encode()
    s.sendall(struct.pack(">I", len(d)) + d)
    n = struct.unpack(">I", s.recv(4))[0]
    print("tclone", json.loads(s.recv(n)).get("error", {}).get("code"))
except OSError as e:
    print("tclone", "oserror", e)
EOF
"""


def fork_boundaries(env, make=None):
    ns = env.use_netns()
    env.start()
    env.serve(ns, "tcp,198.51.100.1,8470", "tcp,192.0.2.1,8471")
    with (make or tclone)(env) as t:
        # Two directories the user may write (DAC): Landlock keeps the agent
        # out of the first; the second is given with --linux-landlock-rw.
        opened, extra = [tempfile.mkdtemp(prefix="gensee-it-open.", dir="/var/tmp")
                         for _ in range(2)]
        for d in (opened, extra):
            os.chown(d, env.uid, env.gid)
            t.outside.append(d)
        mark = "/tmp/gensee-it-mark-%d" % os.getpid()
        with open(mark, "w") as f:
            f.write("host")
        t.outside.append(mark)
        t.workspace({"shared.txt": "base\n", "probe.sh": PROBE.replace(
            'os.environ["TC_ROOT"]', repr(t.root)).replace(
            'os.environ["TC_SOCK"]', repr(os.path.join(env.runtime, "tclone.sock"))).replace(
            'os.environ["TC_RT"]', repr(os.path.join(env.runtime, "tclone"))).replace(
            'os.environ["TC_MARK"]', repr(mark)).replace(
            'os.environ["TC_OPEN"]', repr(opened)).replace(
            'os.environ["TC_EXTRA"]', repr(extra))})
        # The probe runs in the source and again in a fork (TCLONE_PROBE is in the
        # agent's own script, not the environment: agents get a clean one).
        with open(os.path.join(t.ws, "agent.sh"), "w") as f:
            f.write(AGENT.replace('[ -n "$TCLONE_PROBE" ] && sh "$TCLONE_PROBE"', "sh probe.sh"))
        os.chown(os.path.join(t.ws, "agent.sh"), env.uid, env.gid)
        sid = t.source("--allow-net", "198.51.100.1,tcp,8470", "--linux-landlock-rw",
                       extra)["run_id"]
        t.wait_done(sid)
        fid = t.g("run", "fork", sid, "--json", json_out=True)["forks"][0]["run_id"]
        t.wait_done(fid)
        results = {}
        for run in (sid, fid):
            text = t.keep(run if run == fid else sid)["probe-%s.txt" % run]
            results[run] = dict(line.split(" ", 1) for line in text.strip().splitlines())
        for run, res in results.items():
            check(res["allowed"] == "connected", "%s: allowed destination %r" % (run, res))
            check(res["denied"].startswith("blocked"), "%s: denied destination %r" % (run, res))
            check(res["root"] == "refused" and res["runs"] == "refused",
                  "%s reads the authority root: %r" % (run, res))
            check(res["uid"] == str(env.uid), "%s runs as uid %s" % (run, res["uid"]))
            check(int(res["procs"]) < 10, "%s sees %s processes" % (run, res["procs"]))
            check(res["umount"] == "refused", "%s unmounted its workspace" % run)
            check(res["userns"] == "refused", "%s made a user namespace" % run)
            check(res["tclone"] == "not_authorized", "%s used tclone.sock: %r" % (run, res))
            # Its own run directory only: no other run's tmux server to drive
            # (and its own control bridge socket, test_tclone_bridge).
            check(res["rundirs"] == "control.sock," + run, "%s sees run directories %r" %
                  (run, res["rundirs"]))
            check(res["hosttmp"] == "hidden", "%s sees the host's /tmp" % run)
            check(res["outside"] == "refused" and res["extra"] == "written",
                  "%s: Landlock outside %s, extra %s" % (run, res["outside"], res["extra"]))
        # The refusal is the operation's policy, not a missing server.
        outside = env.probe_outside(ns, "tcp,192.0.2.1,8471")
        check(list(outside.values()) == ["ok"], "from outside: %r" % outside)
        # The same authority in the operations boundaryd made: the same envelope.
        envs = []
        for r in t.g("run", "list", "--json", json_out=True)["runs"]:
            e = env.root_call("network.inspect", {"operation_id": r["operation_id"]})["result"]
            envs.append(json.dumps({k: e["envelope"][k] for k in ("mode", "grants", "deny")},
                                   sort_keys=True))
        check(len(envs) == 2 and len(set(envs)) == 1 and "198.51.100.1" in envs[0],
              "envelopes differ: %r" % envs)
        for r in t.g("run", "list", "--json", json_out=True)["runs"]:
            check(r["confinement"]["seccomp"] and r["confinement"]["namespaces"] ==
                  ["mnt", "pid", "uts", "ipc"] and isinstance(r["confinement"]["landlock"], int)
                  and r["confinement"]["landlock_rw"] == [extra],
                  "confinement %r" % r.get("confinement"))
        # The fork's writes are its own.
        check("probe-%s.txt" % fid not in t.diff(sid), "the fork wrote into the source")
        t.g("run", "delete", "--all")


def attacker_merge(env):
    """A fork and its source plant symlinks to steer a root merge outside the
    workspace; the merge refuses or keeps links as links, never follows them."""
    env.start()
    with tclone(env) as t:
        outside = tempfile.mkdtemp(prefix="gensee-it-outside.", dir="/var/tmp")
        t.outside.append(outside)
        os.chmod(outside, 0o755)
        evil = r"""
case "$GENSEE_TCLONE_APPROACH" in
  links) ln -s %(out)s escape; echo pwn > src/new.c; ln -s /etc/passwd pw ;;
  "") rm -rf src; ln -s %(out)s src ;;
esac
echo x > "done-$GENSEE_RUN_ID"
exec sleep 600
""" % {"out": outside}
        t.workspace({"src/keep.c": "k\n"})
        with open(os.path.join(t.ws, "agent.sh"), "w") as f:
            f.write(evil)
        os.chown(os.path.join(t.ws, "agent.sh"), env.uid, env.gid)
        sid = t.g("run", "--runtime", "tclone", "--json", "--", "sh", "-c",
                  "sleep 1; sh agent.sh", json_out=True)["run_id"]
        # Fork before the source swaps src for a symlink: the fork's base has a directory.
        fid = t.g("run", "fork", sid, "--approach", "links", "--json",
                  json_out=True)["forks"][0]["run_id"]
        t.wait_done(sid)
        t.wait_done(fid)
        r = t.g("run", "merge", fid, "--into", sid, "--filesystem", "--json", ok=False)
        res = json.loads(r.stdout) if r.stdout else {}
        check(r.returncode == 1 and "src/new.c" in [c["path"] for c in res.get("conflicts", [])],
              "merge through a planted symlink: %d %s %s" % (r.returncode, r.stdout, r.stderr))
        check(os.listdir(outside) == [], "written outside the workspace: %r" % os.listdir(outside))
        # Only the links themselves: they arrive as links, pointing where they pointed.
        m = t.g("run", "merge", fid, "--into", sid, "--paths", "escape", "pw", "--json",
                json_out=True)
        check(m["status"] == "merged", "link merge %r" % m)
        check(os.listdir(outside) == [], "written outside the workspace: %r" % os.listdir(outside))
        with open("/etc/passwd") as f:
            check("pwn" not in f.read(), "/etc/passwd changed")
        t.g("run", "delete", "--all")


def refusals(env):
    env.start()
    with tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        sid = t.source("--observe-only")["run_id"]
        r = t.g("run", "fork", sid, ok=False)
        check(r.returncode == 125 and "observe_only" in r.stderr, "observe-only fork: %s" % r.stderr)
        rec = env.record(t.g("run", "list", "--json", json_out=True)["runs"][0]["operation_id"])
        check(rec["lifecycle"]["state"] == "running", "observe-only source not recorded")
        # Another user sees nothing of it and can do nothing to it.
        sock = os.path.join(env.runtime, "tclone.sock")
        other = env.user_call(sock, "tclone.list", {}, uid=65534)
        check(other["result"]["runs"] == [], "another user lists %r" % other)
        for method, params in (("tclone.diff", {"run_id": sid}), ("tclone.discard", {"run_id": sid}),
                               ("tclone.fork", {"run_id": sid})):
            rep = env.user_call(sock, method, params, uid=65534)
            check(rep.get("error", {}).get("code") == "not_found", "%s by another user: %r" % (method, rep))
        # Unknown fields, bad ids, a workspace the user cannot read.
        rep = env.user_call(sock, "tclone.list", {"bogus": 1})
        check(rep["error"]["code"] == "invalid_params", "unknown field %r" % rep)
        rep = env.user_call(sock, "tclone.start", {"workspace": "/root", "argv": ["true"]})
        check(rep["error"]["code"] == "invalid_workspace", "/root as workspace %r" % rep)
        rep = env.user_call(sock, "tclone.start", {"workspace": t.root, "argv": ["true"]})
        check(rep["error"]["code"] == "invalid_workspace", "authority root as workspace %r" % rep)
        t.g("run", "delete", "--all")
        t.stop()
        # An authority root others can enter is refused at start.
        os.chmod(t.root, 0o755)
        rc = t.start(expect_fail=True)
        check(rc != 0 and "0700" in t.logtext(), "0755 authority root accepted: %s" % t.logtext())
        os.chmod(t.root, 0o700)
        # Owned by a user, or reached through a symlink: refused too.
        os.chown(t.root, env.uid, env.gid)
        rc = t.start(expect_fail=True)
        check(rc != 0, "a user-owned authority root accepted")
        os.chown(t.root, 0, 0)
        link = t.root + ".link"
        os.symlink(t.root, link)
        t.outside.append(link)
        rc = t.start(args=["--authority-root", link, "--runtime-dir", env.runtime],
                     expect_fail=True)
        check(rc != 0 and "refusing authority root" in t.logtext(), "a symlinked root accepted")
        os.unlink(link)
        t.outside.remove(link)


def exec_and_send(env):
    """exec runs where the agent runs (its snapshot, operation cgroup, uid);
    send types into its tmux session."""
    env.start()
    with tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        src = t.g("run", "--runtime", "tclone", "--json", "--", "sh", "-c",
                  'read line; echo "$line" > got.txt; exec sleep 600', json_out=True)
        sid = src["run_id"]
        fid = t.g("run", "fork", sid, "--json", json_out=True)["forks"][0]["run_id"]
        fop = t.g("run", "list", "--json", json_out=True)["runs"]
        fop = [r for r in fop if r["run_id"] == fid][0]["operation_id"]
        r = t.g("run", "exec", fid, "--", "sh", "-c",
                "echo made > exec.txt; id -u; cat /proc/self/cgroup; echo to-stderr >&2; "
                "echo '#{pane_id} $HOME' ; exit 7", ok=False)
        check(r.returncode == 7, "exec status %d: %s" % (r.returncode, r.stderr))
        check(str(env.uid) in r.stdout.split() and fop in r.stdout,
              "exec ran outside the fork's operation: %s" % r.stdout)
        check("#{pane_id}" in r.stdout, "tmux expanded a format in the command: %s" % r.stdout)
        check("to-stderr" in r.stderr, "stderr lost: %s" % r.stderr)
        check(t.diff(fid).get("exec.txt") == "added" and "exec.txt" not in t.diff(sid),
              "exec wrote outside its run")
        check(not os.path.exists(os.path.join(t.ws, "exec.txt")), "exec wrote the workspace")
        t.g("run", "send", sid, "--", "hello", "tclone")
        env.wait_for("the sent line", lambda: "got.txt" in t.diff(sid), timeout=15)
        r = t.g("run", "exec", sid, "--", "cat", "got.txt")
        check(r.stdout == "hello tclone\n", "sent text arrived as %r" % r.stdout)
        # Panes in the user's own tmux: the fork to the right, the next below it.
        host = os.path.join(tempfile.mkdtemp(prefix="gensee-it-tmux.", dir="/var/tmp"), "s")
        t.outside.append(os.path.dirname(host))
        os.chown(os.path.dirname(host), env.uid, env.gid)
        subprocess.run(env.user_prefix() + ["tmux", "-S", host, "-f", "/dev/null", "new-session",
                                            "-d", "-s", "host", "-x", "200", "-y", "50", "sleep",
                                            "600"], check=True, env={"PATH": "/usr/bin:/bin"})
        try:
            r = t.g("run", "fork", sid, "--copies", "2", "--attach", "tmux:right", "--json",
                    env={"TMUX": host + ",1,0", "TMUX_PANE": "%0"})
            panes = subprocess.run(env.user_prefix() + ["tmux", "-S", host, "list-panes", "-F",
                                                        "#{pane_id} #{pane_start_command}"],
                                   capture_output=True, text=True).stdout.splitlines()
            forks = [f["run_id"] for f in json.loads(r.stdout)["forks"]]
            check(len(panes) == 3 and all(any(f in p for p in panes) for f in forks),
                  "host panes %r for %r" % (panes, forks))
            r = t.g("run", "attach", sid, "--tmux", "right", ok=False)
            check(r.returncode == 125 and "inside tmux" in r.stderr, "attach outside tmux: %s" % r.stderr)
        finally:
            subprocess.run(env.user_prefix() + ["tmux", "-S", host, "kill-server"],
                           capture_output=True)
        # Another user cannot reach the session.
        other = env.user_call(os.path.join(env.runtime, "tclone.sock"), "tclone.attach",
                              {"run_id": sid}, uid=65534)
        check(other.get("error", {}).get("code") == "not_found", "attach by another %r" % other)
        t.g("run", "delete", "--all")


HOLDER = r"""
import os, socket, sys
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); socks.append(s)
print("ready", flush=True)
sys.stdin.readline()
# Still open? (EAGAIN: yes; b"": tcloned closed it)
alive = 0
for s in socks:
    s.setblocking(False)
    try:
        alive += s.recv(1) != b""
    except BlockingIOError:
        alive += 1
print(alive, flush=True)
sys.stdin.readline()
"""


def stalled_clients(env):
    """Clients that connect and send nothing delay no one; one uid holds at
    most 8 waiting connections, and root is never locked out by it."""
    env.start()
    with tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        sock = os.path.join(env.runtime, "tclone.sock")
        holder = subprocess.Popen(["/usr/bin/python3", "-c", HOLDER, sock, "8"], user=env.uid,
                                  group=env.gid, extra_groups=[], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        env.children.append(holder)
        check(holder.stdout.readline().strip() == "ready", "holder did not connect")
        # Root and other users are served while the 8 wait.
        check("result" in call(sock, "tclone.list"), "root not served")
        other = env.user_call(sock, "tclone.list", {}, uid=65534)
        check("result" in other, "another user not served: %r" % other)
        # The same uid is over its share: refused at once.
        mine = env.user_call(sock, "tclone.list", {})
        check("result" not in mine, "a 9th connection of one uid was served: %r" % mine)
        holder.stdin.write("\n")
        holder.stdin.flush()
        alive = int(holder.stdout.readline())
        # They were all still waiting when the others were served: nobody waited on them.
        check(alive == 8, "stalled connections closed before the others were served: %d" % alive)
        # Held open, they are cut off at their deadline, and the share is free again.
        env.wait_for("stalled connections timed out", lambda: t.logtext().count(
            "no request within") >= 8, timeout=20)
        check("result" in env.user_call(sock, "tclone.list", {}), "the share was not freed")
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)


def workspace_in_tmp(env):
    """A workspace under /tmp works although the agent gets a private /tmp:
    the snapshot is bound back at the same path, and nothing else of the
    host's /tmp is there."""
    env.start()
    with tclone(env) as t:
        shutil.rmtree(t.ws)
        t.ws = tempfile.mkdtemp(prefix="gensee-it-ws.", dir="/tmp")
        t.workspace({"a.txt": "a\n"})
        sid = t.source()["run_id"]
        t.wait_done(sid)
        r = t.g("run", "exec", sid, "--", "sh", "-c", "pwd; cat a.txt; ls /tmp")
        lines = r.stdout.splitlines()
        # Only the workspace and (in this test) the runtime dir, bound back.
        allowed = {os.path.basename(t.ws), os.path.basename(env.runtime)}
        check(lines[0] == t.ws and lines[1] == "a" and set(lines[2:]) <= allowed,
              "the agent's /tmp: %r" % lines)
        check("started.txt" in t.diff(sid), "diff %r" % t.diff(sid))
        t.g("run", "delete", "--all")
        # Nested, below a directory only the user may enter (mkdir -p with umask 077).
        top = tempfile.mkdtemp(prefix="gensee-it-priv.", dir="/tmp")
        t.outside.append(top)
        nested = os.path.join(top, "a", "b")
        os.makedirs(nested)
        for d in (top, os.path.join(top, "a"), nested):
            os.chown(d, env.uid, env.gid)
            os.chmod(d, 0o700)
        shutil.rmtree(t.ws)
        t.ws = nested
        t.workspace({"a.txt": "nested\n"})
        sid = t.source()["run_id"]
        t.wait_done(sid)
        r = t.g("run", "exec", sid, "--", "sh", "-c", "pwd; cat a.txt")
        check(r.stdout.splitlines() == [nested, "nested"], "nested workspace: %r" % r.stdout)
        t.g("run", "delete", "--all")


def copy_backend(env):
    """The copy backend (hosts without overlayfs): the same lifecycle on plain
    copies, reported as such."""
    env.start()
    with tclone(env, ["--backend", "copy"]) as t:
        st = call(os.path.join(env.runtime, "tclone.sock"), "tclone.status")["result"]
        check(st["backend"] == "copy", "backend %r" % st)
        t.workspace({"shared.txt": "base\n", "gone.txt": "x\n"})
        src = t.source()
        sid = src["run_id"]
        check(src["backend"] == "copy", "source backend %r" % src["backend"])
        t.wait_done(sid)
        fid = t.g("run", "fork", sid, "--approach", "alpha", "--json",
                  json_out=True)["forks"][0]["run_id"]
        t.wait_done(fid)
        d = t.diff(fid)
        check(d.get("alpha.txt") == "added" and d.get("gone.txt") == "deleted" and
              "started.txt" not in d, "copy fork diff %r" % d)
        m = t.g("run", "merge", fid, "--into", sid, "--filesystem", "--json", json_out=True)
        check(m["status"] == "merged", "copy merge %r" % m)
        kept = t.keep(sid)
        check(kept.get("shared.txt") == "alpha\n" and "gone.txt" not in kept, "merged %r" % kept)
        check(t.mounts() == [], "the copy backend mounted %r" % t.mounts())
        t.g("run", "delete", "--all")
        check(os.listdir(os.path.join(t.root, "tclone", "runs")) == [], "runs left")


GIT_AGENT = r"""
G="git -c user.name=agent -c user.email=agent@example.org"
case "$GENSEE_TCLONE_APPROACH" in
  alpha) echo alpha > shared.txt; $G commit -qam alpha; echo more >> other.txt ;;
  beta) echo beta > shared.txt ;;
esac
echo x > "done-$GENSEE_RUN_ID"
exec sleep 600
"""


def git_commit_workspace(env, t):
    """The workspace as the user's repository, everything in one commit."""
    subprocess.run(["chown", "-R", "%d:%d" % (env.uid, env.gid), t.ws], check=True)
    for argv in (["git", "init", "-q"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit",
                  "-qm", "base"]):
        subprocess.run(env.user_prefix() + argv, cwd=t.ws, check=True, capture_output=True,
                       env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


def git_merge(env):
    """--git (the default scope): the fork's commits and working changes since
    the fork point, applied all-or-nothing by git running as the user inside
    the source (never as root)."""
    env.start()
    with tclone(env) as t:
        t.workspace({"shared.txt": "base\n", "other.txt": "o\n"})
        with open(os.path.join(t.ws, "agent.sh"), "w") as f:
            f.write(GIT_AGENT)
        with open(os.path.join(t.ws, ".gitignore"), "w") as f:
            f.write("done-*\nagent.sh\n")
        git_commit_workspace(env, t)
        sid = t.source()["run_id"]
        t.wait_done(sid)
        fk = t.g("run", "fork", sid, "--copies", "2", "--approach", "alpha", "--approach", "beta",
                 "--json", json_out=True)
        f0, f1 = [f["run_id"] for f in fk["forks"]]
        t.wait_done(f0)
        t.wait_done(f1)
        dry = t.g("run", "merge", f0, "--into", sid, "--dry-run", "--json", json_out=True)
        check(dry["status"] == "clean" and dry["scope"] == "git" and dry["patch_bytes"] > 0,
              "git dry run %r" % dry)
        check(t.g("run", "exec", sid, "--", "cat", "shared.txt").stdout == "base\n",
              "a dry run changed the source")
        m = t.g("run", "merge", f0, "--into", sid, "--json", json_out=True)
        check(m["status"] == "merged", "git merge %r" % m)
        out = t.g("run", "exec", sid, "--", "cat", "shared.txt", "other.txt").stdout
        check(out == "alpha\no\nmore\n", "source after the git merge: %r" % out)
        r = t.g("run", "merge", f1, "--into", sid, "--json", ok=False)
        c = json.loads(r.stdout)
        check(r.returncode == 1 and c["status"] == "conflict" and
              "shared.txt" in [x["path"] for x in c["conflicts"]], "git conflict %r" % c)
        out = t.g("run", "exec", sid, "--", "cat", "shared.txt").stdout
        check(out == "alpha\n", "a conflicting git merge changed the source: %r" % out)
        scopes = [h.get("detail", {}).get("scope") for h in t.history() if h["action"] == "merge"]
        check("git" in scopes, "no git merge in the history: %r" % scopes)
        t.g("run", "delete", "--all")


HOSTILE_GIT_AGENT = r"""
G="git -c user.name=agent -c user.email=agent@example.org"
case "$GENSEE_TCLONE_APPROACH" in
  hostile) echo changed-a > a.txt; $G commit -qam a; echo changed-b > b.txt;
           echo new > untracked.txt ;;
  clash) echo clash > a.txt ;;
esac
echo x > "done-$GENSEE_RUN_ID"
exec sleep 600
"""

# What a hostile fork's repository would make a host-run git execute: each
# writes a marker (outside the workspace) and prints nothing, so a
# diff.external would also make every change vanish from the patch.
MARKER = "#!/bin/sh\nfor d in %(dirs)s; do touch $d/ran.$$.$(basename \"$0\"); done\nexit 0\n"


def git_merge_runs_nothing_of_the_fork(env):
    """Attack (issue 22.3): the fork's .git/config names diff.external, a
    clean/smudge filter, core.fsmonitor, a textconv and a hooksPath, its
    .gitattributes selects them, and its hooks are executable. A host-started
    merge --git used to run them (and diff.external hid both changed files:
    nothing_to_merge). Now git never sees the fork's repository: nothing of
    it runs, both tracked changes merge, the untracked file is listed as left
    out, and a conflict shows its hunks."""
    env.start()
    with tclone(env, ["--backend", "copy"]) as t:
        marks = tempfile.mkdtemp(prefix="gensee-it-marks.", dir="/var/tmp")
        t.outside.append(marks)
        os.chmod(marks, 0o1777)
        t.workspace({"a.txt": "a\n", "b.txt": "b\n"})
        with open(os.path.join(t.ws, "agent.sh"), "w") as f:
            f.write(HOSTILE_GIT_AGENT)
        with open(os.path.join(t.ws, ".gitignore"), "w") as f:
            f.write("done-*\nagent.sh\n")
        git_commit_workspace(env, t)
        sid = t.source()["run_id"]
        t.wait_done(sid)
        fk = t.g("run", "fork", sid, "--copies", "2", "--approach", "hostile", "--approach",
                 "clash", "--json", json_out=True)
        fid, cid = [f["run_id"] for f in fk["forks"]]
        t.wait_done(fid)
        t.wait_done(cid)
        # The fork's repository, as a hostile agent leaves it (planted from
        # outside: the agent's own .git/config is read-only under tclone).
        fws = os.path.join(t.root, "tclone", "runs", fid, "ws")
        sws = os.path.join(t.root, "tclone", "runs", sid, "ws")
        with open(os.path.join(fws, ".git", "evil.sh"), "w") as f:
            f.write(MARKER % {"dirs": " ".join((marks, t.ws, t.ws + "/.git"))})
        os.chmod(os.path.join(fws, ".git", "evil.sh"), 0o755)
        # Named as git inside the run sees it (the workspace's own path), and as the host does.
        marker = os.path.join(t.ws, ".git", "evil.sh")
        shutil.copy(os.path.join(fws, ".git", "evil.sh"), marker)

        def ran():
            return [n for d in (marks, fws, fws + "/.git", sws, sws + "/.git", t.ws, t.ws + "/.git")
                    for n in os.listdir(d) if n.startswith("ran.")]
        with open(os.path.join(fws, ".git", "config"), "a") as f:
            f.write("[diff]\n\texternal = %(m)s\n[core]\n\tfsmonitor = %(m)s\n"
                    "\thooksPath = .git/hooks\n\tattributesFile = %(a)s\n"
                    "[filter \"evil\"]\n\tclean = %(m)s\n\tsmudge = %(m)s\n\trequired = true\n"
                    "[diff \"evil\"]\n\ttextconv = %(m)s\n\tcommand = %(m)s\n"
                    "[include]\n\tpath = %(c)s\n" % {"m": marker,
                                                      "a": os.path.join(t.ws, ".git", "attrs"),
                                                      "c": os.path.join(t.ws, ".git", "evil.cfg")})
        for d in (fws, t.ws):
            with open(os.path.join(d, ".git", "attrs"), "w") as f:
                f.write("* filter=evil diff=evil\n")
            with open(os.path.join(d, ".git", "evil.cfg"), "w") as f:
                f.write("[diff]\n\texternal = %s\n" % marker)
        with open(os.path.join(fws, ".gitattributes"), "w") as f:
            f.write("* filter=evil diff=evil\n")
        hooks = os.path.join(fws, ".git", "hooks")
        os.makedirs(hooks, exist_ok=True)
        for h in ("pre-applypatch", "post-applypatch", "applypatch-msg", "post-checkout",
                  "post-merge", "post-index-change", "pre-commit", "reference-transaction"):
            shutil.copy(marker, os.path.join(hooks, h))
        subprocess.run(["chown", "-R", "%d:%d" % (env.uid, env.gid), fws], check=True)

        r = t.g("run", "merge", fid, "--into", sid, "--dry-run", "--json", ok=False)
        check(ran() == [], "the fork's repository ran: %r (%s)" % (ran(), r.stderr))
        dry = json.loads(r.stdout) if r.returncode == 0 else {}
        check(dry.get("status") == "clean" and dry.get("files") == ["a.txt", "b.txt"],
              "git dry run %d %r %s" % (r.returncode, dry, r.stderr))
        # The summary says what stays behind.
        h = t.g("run", "merge", fid, "--into", sid, "--dry-run").stdout
        check("left out: untracked.txt (added): untracked" in h and "2 file(s)" in h, h)
        m = t.g("run", "merge", fid, "--into", sid, "--json", json_out=True)
        check(m["status"] == "merged" and m["files"] == ["a.txt", "b.txt"], "git merge %r" % m)
        left = {x["path"]: x["reason"] for x in m["left_out"]}
        check("untracked.txt" in left and "untracked" in left["untracked.txt"] and
              ".gitattributes" in left, "left out %r" % m["left_out"])
        out = t.g("run", "exec", sid, "--", "cat", "a.txt", "b.txt").stdout
        check(out == "changed-a\nchanged-b\n", "source after the merge: %r" % out)
        check(ran() == [], "the fork's repository ran: %r" % ran())
        # The source kept its own repository: nothing of the fork's came along.
        check("evil" not in open(os.path.join(sws, ".git", "config")).read(),
              "the fork's config reached the source")
        # A conflict shows the hunks that do not apply, not git's raw text.
        r = t.g("run", "merge", cid, "--into", sid, "--json", ok=False)
        c = json.loads(r.stdout)
        conf = {x["path"]: x for x in c.get("conflicts", [])}
        check(r.returncode == 1 and c["status"] == "conflict" and "a.txt" in conf and
              "+clash" in conf["a.txt"].get("hunks", ""), "git conflict %r" % c)
        check(ran() == [], "the fork's repository ran: %r" % ran())
        t.g("run", "delete", "--all")


# What a fork leaves, planted in its copy as its user (the same files its
# agent could make).
METADATA_PLANTS = ("echo planted > .gitattributes; mkfifo pipe; echo '#!/bin/sh' > tool; "
                   "chmod 6755 tool; echo real > real.txt; "
                   "printf '#!/bin/sh\\ntouch /tmp/gensee-it-hook-ran\\n' > .git/hooks/post-checkout; "
                   "chmod 755 .git/hooks/post-checkout")


def filesystem_merge_skips_metadata(env):
    """Attack (issue 22.3): a fork plants a post-checkout hook in .git/, a
    .gitattributes, a fifo and a setuid file; --filesystem used to copy the
    hook (the user's next checkout in the source ran it) and made the fifo
    a conflict. Now repository metadata is merged only when a path names it,
    fifos are skipped, both are reported, and set-ID bits never come along."""
    env.start()
    with tclone(env, ["--backend", "copy"]) as t:
        t.workspace({"keep.txt": "k\n"})
        os.makedirs(os.path.join(t.ws, ".git", "hooks"))
        subprocess.run(["chown", "-R", "%d:%d" % (env.uid, env.gid), t.ws], check=True)
        sid = t.g("run", "--runtime", "tclone", "--json", "--", "sh", "-c",
                  "echo x > done-$GENSEE_RUN_ID; exec sleep 600", json_out=True)["run_id"]
        t.wait_done(sid)
        fid = t.g("run", "fork", sid, "--json", json_out=True)["forks"][0]["run_id"]
        t.wait_done(fid)
        fws = os.path.join(t.root, "tclone", "runs", fid, "ws")
        subprocess.run(env.user_prefix() + ["sh", "-ec", METADATA_PLANTS], cwd=fws, check=True)
        m = t.g("run", "merge", fid, "--into", sid, "--filesystem", "--json", json_out=True)
        skipped = {x["path"]: x["reason"] for x in m.get("skipped", [])}
        check(m["status"] == "merged" and ".git" in skipped and ".gitattributes" in skipped and
              "pipe" in skipped and "fifo" in skipped["pipe"], "merge %r" % m)
        sws = os.path.join(t.root, "tclone", "runs", sid, "ws")
        check(not os.path.exists(os.path.join(sws, ".git", "hooks", "post-checkout")),
              "the fork's hook reached the source")
        check(not os.path.exists(os.path.join(sws, ".gitattributes")) and
              not os.path.exists(os.path.join(sws, "pipe")), "skipped entries merged")
        check(open(os.path.join(sws, "real.txt")).read() == "real\n", "real.txt not merged")
        mode = os.stat(os.path.join(sws, "tool")).st_mode
        check(mode & 0o6000 == 0 and mode & 0o777 == 0o755, "tool merged with mode %o" % mode)
        # Named, the metadata merges (the user asked for it).
        m = t.g("run", "merge", fid, "--into", sid, "--paths", ".gitattributes", "--json",
                json_out=True)
        check(m["status"] == "merged" and
              open(os.path.join(sws, ".gitattributes")).read() == "planted\n", "named %r" % m)
        t.g("run", "delete", "--all")


GIT_PLANTS = ("for f in .git/hooks/post-checkout .git/modules/sub/hooks/post-checkout "
              ".husky/_/pre-commit; do (mkdir -p $(dirname $f) && echo 'touch /tmp/x' > $f) 2>/dev/null && "
              "echo planted $f || echo refused $f; done; "
              "(echo '[core] fsmonitor = /tmp/x' >> .git/config) 2>/dev/null && "
              "echo planted config || echo refused config")


def git_metadata_read_only_in_runs(env):
    """Attack (issue 22.4): inside a tclone source or fork, the agent plants
    a hook (the repository had no hooks directory), one under core.hooksPath
    (.husky/_), one in a submodule's repository, and a core.fsmonitor line:
    each would run at the user's next git command on a kept copy. Each is
    refused (read-only), in forks too; linux.mount_view.protect_git: false
    turns it off."""
    env.start()
    with tclone(env) as t:
        t.workspace({"a.txt": "a\n", ".husky/_/h": "h\n"})
        subprocess.run(["chown", "-R", "%d:%d" % (env.uid, env.gid), t.ws], check=True)
        for argv in (["git", "init", "-q"], ["git", "config", "core.hooksPath", ".husky/_"]):
            subprocess.run(env.user_prefix() + argv, cwd=t.ws, check=True, capture_output=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
        shutil.rmtree(os.path.join(t.ws, ".git", "hooks"))
        os.makedirs(os.path.join(t.ws, ".git", "modules", "sub"))
        with open(os.path.join(t.ws, ".git", "modules", "sub", "config"), "w") as f:
            f.write("[core]\n")
        subprocess.run(["chown", "-R", "%d:%d" % (env.uid, env.gid), t.ws], check=True)
        sid = t.g("run", "--runtime", "tclone", "--json", "--", "sh", "-c",
                  "echo x > done-$GENSEE_RUN_ID; exec sleep 600", json_out=True)["run_id"]
        t.wait_done(sid)
        fid = t.g("run", "fork", sid, "--json", json_out=True)["forks"][0]["run_id"]
        t.wait_done(fid)
        for run in (sid, fid):
            out = t.g("run", "exec", run, "--", "sh", "-c", GIT_PLANTS).stdout
            check("planted" not in out and out.count("refused") == 4, "%s: %r" % (run, out))
        t.g("run", "delete", "--all")
        # Opted out: the user's policy says so, and the writes go through.
        home = tempfile.mkdtemp(prefix="gensee-it-home.", dir="/var/tmp")
        t.outside.append(home)
        with open(os.path.join(home, "policy.json"), "w") as f:
            json.dump({"linux": {"mount_view": {"protect_git": False}}}, f)
        subprocess.run(["chown", "-R", "%d:%d" % (env.uid, env.gid), home], check=True)
        os.chmod(home, 0o755)
        oid = t.g("run", "--runtime", "tclone", "--json", "--", "sh", "-c",
                  "echo x > done-$GENSEE_RUN_ID; exec sleep 600", json_out=True,
                  env={"GENSEE_HOME": home})["run_id"]
        t.wait_done(oid)
        out = t.g("run", "exec", oid, "--", "sh", "-c", GIT_PLANTS).stdout
        check("planted config" in out and "planted .husky/_/pre-commit" in out, "off: %r" % out)
        t.g("run", "delete", "--all")


# -- btrfs: subvolume snapshots on a loop-file filesystem this case makes --

class BtrfsTclone(Tclone):
    """A tcloned whose authority root is the top of a fresh btrfs on a loop
    device (300M sparse file); cleanup unmounts and detaches it, even after
    a failure."""

    def __init__(self, env, args=()):
        super().__init__(env, args)
        self.img = os.path.join("/var/tmp", "gensee-it-btrfs.%d.%s.img" % (
            os.getpid(), os.path.basename(self.root)))
        self.loop = None
        self.mounted = False
        with open(self.img, "wb") as f:
            f.truncate(300 * 1024 * 1024)
        call_ok(["mkfs.btrfs", "-q", "-f", self.img])
        self.loop = call_ok(["losetup", "--find", "--show", self.img]).strip()
        call_ok(["mount", "-t", "btrfs", "-o", "nosuid,nodev", self.loop, self.root])
        self.mounted = True
        os.chmod(self.root, 0o700)

    def cleanup(self):
        self.stop()
        for m in sorted(self.mounts(), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], check=False)
        if self.mounted:
            subprocess.run(["umount", self.root], check=False, capture_output=True)
            if subprocess.run(["mountpoint", "-q", self.root]).returncode == 0:
                subprocess.run(["umount", "-l", self.root], check=False)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], check=False)
        if os.path.exists(self.img):
            os.unlink(self.img)
        for d in [self.root, self.ws] + self.outside:
            if os.path.isfile(d):
                os.unlink(d)
            else:
                shutil.rmtree(d, ignore_errors=True)

    def subvol(self, rel):
        """`btrfs subvolume show` of ROOT/tclone/REL as a dict (test side only)."""
        out = call_ok(["btrfs", "subvolume", "show", os.path.join(self.root, "tclone", rel)])
        info = {}
        for line in out.splitlines()[1:]:
            k, _, v = line.strip().partition(":")
            info[k.strip()] = v.strip()
        return info

    def subvols(self):
        out = call_ok(["btrfs", "subvolume", "list", "-a", self.root])
        return [line.split(" path ")[-1] for line in out.splitlines() if " path " in line]


def call_ok(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise Failure("%s: %d %s" % (" ".join(argv), r.returncode, r.stderr))
    return r.stdout


@contextlib.contextmanager
def btrfs_tclone(env, args=()):
    t = None
    try:
        t = BtrfsTclone(env, args)
        t.start()
        yield t
    finally:
        if t is not None:
            t.cleanup()


def btrfs_backend(env):
    """On btrfs: sources are subvolumes, forks are BTRFS_IOC_SNAP_CREATE_V2
    snapshots (read-only base, writable ws), and the whole lifecycle works."""
    env.start()
    with btrfs_tclone(env) as t:
        st = call(os.path.join(env.runtime, "tclone.sock"), "tclone.status")["result"]
        check(st["backend"] == "btrfs" and st["backends"][0] == "btrfs" and
              st["btrfs"].startswith("in use"), "status %r" % st)
        r = env.gensee("status")
        check("tcloned" in r.stdout and "(using btrfs)" in r.stdout, "gensee status: %s" % r.stdout)
        t.workspace({"shared.txt": "base\n", "gone.txt": "old\n", "src/keep.c": "int x;\n"})
        src = t.source()
        sid = src["run_id"]
        check(src["backend"] == "btrfs", "source backend %r" % src["backend"])
        t.wait_done(sid)
        check(not os.path.exists(os.path.join(t.ws, "started.txt")), "the workspace was written")
        check(t.diff(sid).get("started.txt") == "added", "source diff %r" % t.diff(sid))
        sws, sbase = t.subvol("runs/%s/ws" % sid), t.subvol("runs/%s/base" % sid)
        check("readonly" in sbase["Flags"] and "readonly" not in sws["Flags"],
              "source flags %r %r" % (sbase, sws))
        check(sbase["Parent UUID"] == sws["UUID"], "the source base is not a snapshot of ws")
        # A read-only base: not even root writes it.
        try:
            open(os.path.join(t.root, "tclone", "runs", sid, "base", "x"), "w").close()
            raise Failure("root wrote into the read-only base")
        except OSError as e:
            check(e.errno == 30, "writing the base: %r" % e)

        fk = t.g("run", "fork", sid, "--copies", "2", "--approach", "alpha", "--approach", "beta",
                 "--json", json_out=True)
        f0, f1 = [f["run_id"] for f in fk["forks"]]
        check(all(f["backend"] == "btrfs" for f in fk["forks"]), "fork backends %r" % fk)
        for f in (f0, f1):
            fb, fw = t.subvol("runs/%s/base" % f), t.subvol("runs/%s/ws" % f)
            # Proof of snapshots: each is a child of the source's ws by UUID,
            # a new subvolume id, and files keep their inode numbers.
            check(fb["Parent UUID"] == sws["UUID"] and "readonly" in fb["Flags"],
                  "fork base %r vs source ws %r" % (fb, sws))
            check(fw["Parent UUID"] == fb["UUID"] and "readonly" not in fw["Flags"],
                  "fork ws %r" % fw)
            check(fw["Subvolume ID"] not in (fb["Subvolume ID"], sws["Subvolume ID"]),
                  "fork ws shares a subvolume id")
            # tcloned's own view (BTRFS_IOC_INO_LOOKUP) agrees with btrfs-progs.
            fj = [x for x in fk["forks"] if x["run_id"] == f][0]
            check(fj["btrfs"] == {"ws_subvolume_id": int(fw["Subvolume ID"]),
                                  "base_subvolume_id": int(fb["Subvolume ID"])},
                  "fork btrfs ids %r vs %r %r" % (fj.get("btrfs"), fw, fb))
            a = os.lstat(os.path.join(t.root, "tclone", "runs", sid, "ws", "src", "keep.c"))
            b = os.lstat(os.path.join(t.root, "tclone", "runs", f, "ws", "src", "keep.c"))
            check(a.st_ino == b.st_ino and a.st_dev != b.st_dev, "inodes %r %r" % (a, b))
        t.check_agent_forks(f0, f1)
        cmp_ = t.g("run", "compare", f0, "--json", json_out=True)
        check(len(cmp_["forks"]) == 2, "compare %r" % cmp_)

        m = t.g("run", "merge", f0, "--into", sid, "--filesystem", "--json", json_out=True)
        check(m["status"] == "merged", "merge %r" % m)
        after = t.keep(sid)
        check(after.get("alpha.txt") == "alpha\n" and after.get("shared.txt") == "alpha\n" and
              "gone.txt" not in after and after.get("started.txt") == "source\n",
              "merged source %r" % after)
        r = t.g("run", "merge", f1, "--into", sid, "--filesystem", "--json", ok=False)
        c = json.loads(r.stdout)
        check(r.returncode == 1 and [x["path"] for x in c["conflicts"]] == ["shared.txt"],
              "conflict %r" % c)
        check(t.keep(sid) == after, "a conflicting merge changed the source")

        # The agent makes a subvolume of its own in its workspace (any user
        # may): discard and delete still remove everything.
        out = t.g("run", "exec", f1, "--", "sh", "-c",
                  "btrfs subvolume create nested >/dev/null && echo n > nested/f && "
                  "btrfs subvolume delete ../ 2>&1; echo rc=$?").stdout
        check("rc=0" not in out, "the agent destroyed a subvolume: %r" % out)
        check(os.path.exists(os.path.join(t.root, "tclone", "runs", f1, "ws", "nested", "f")),
              "the agent's nested subvolume was not made: %r" % out)
        d = t.g("run", "discard", f1, "--json", json_out=True)
        check(d["state"] == "discarded", "discard %r" % d)
        left = [p for p in t.subvols() if f1 in p]
        check(left == [], "subvolumes of a discarded fork left: %r" % left)
        check(not os.path.exists(os.path.join(t.root, "tclone", "runs", f1, "ws")), "ws left")
        t.g("run", "delete", "--all")
        check(t.g("run", "list", "--json", json_out=True)["runs"] == [], "runs left")
        check(t.subvols() == [], "subvolumes left: %r" % t.subvols())
        check(os.listdir(os.path.join(t.root, "tclone", "runs")) == [], "runs dirs left")
        check(t.mounts() == [], "mounts left: %r" % t.mounts())


def session_at_answer(env):
    """tclone.start answers once the agent's tmux session exists: a client
    that attaches right after the answer (the CLI on a terminal does) finds
    it, even for an agent that ends within a second."""
    env.start()
    with tclone(env) as t:
        t.workspace({"shared.txt": "base\n"})
        for i in range(5):
            src = t.g("run", "--runtime", "tclone", "--json", "--", "sleep", "1", json_out=True)
            r = subprocess.run(env.user_prefix() + ["tmux", "-S", src["tmux_socket"],
                                                    "has-session", "-t", src["tmux_session"]],
                               capture_output=True, text=True, timeout=30,
                               env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
            check(r.returncode == 0, "round %d: no session right after the answer: %s" % (
                i, r.stderr))
        t.g("run", "delete", "--all")


def btrfs_fork_boundaries(env):
    """fork_boundaries with the btrfs backend: the same network, file,
    namespace and socket boundaries for a source and its snapshot fork."""
    fork_boundaries(env, btrfs_tclone)


def btrfs_crash_mid_merge(env):
    """A crash of tcloned in the middle of a merge into a btrfs source leaves
    the source whole once it restarts."""
    env.start()
    with btrfs_tclone(env, ["--debug-apply-pause-ms", "150"]) as t:
        crash_mid_merge_on(env, t)
        check(t.subvols() == [], "subvolumes left: %r" % t.subvols())


@contextlib.contextmanager
def loop_btrfs(mnt, size_mb=128):
    """A fresh btrfs on a loop device mounted at mnt; unmounted, detached and
    removed on the way out, whatever happened."""
    img = "/var/tmp/gensee-it-btrfs2.%d.%s.img" % (os.getpid(), os.path.basename(
        os.path.dirname(mnt)) + os.path.basename(mnt))
    loop, mounted = None, False
    try:
        with open(img, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
        call_ok(["mkfs.btrfs", "-q", "-f", img])
        loop = call_ok(["losetup", "--find", "--show", img]).strip()
        call_ok(["mount", "-t", "btrfs", "-o", "nosuid,nodev", loop, mnt])
        mounted = True
        yield mnt
    finally:
        if mounted:
            if subprocess.run(["umount", mnt], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", mnt], check=False)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        if os.path.exists(img):
            os.unlink(img)


def btrfs_fails_closed(env):
    """A btrfs ioctl that fails fails the fork with a clear error and leaves
    no fork, no operation and no subvolume behind. Made to fail here: the
    source's ws is covered by another btrfs filesystem's root, so
    BTRFS_IOC_SNAP_CREATE_V2 answers EXDEV. --backend btrfs is refused on a
    root that is not btrfs."""
    env.start()
    with btrfs_tclone(env) as t:
        t.workspace({"shared.txt": "base\n"})
        sid = t.source()["run_id"]
        t.wait_done(sid)
        before = sorted(t.subvols())
        opsdir = os.path.join(env.state, "operations")
        ops_before = set(os.listdir(opsdir))
        with loop_btrfs(os.path.join(t.root, "tclone", "runs", sid, "ws")):
            r = t.g("run", "fork", sid, "--json", ok=False)
        check(r.returncode == 125 and "snapshot_failed" in r.stderr and
              "btrfs: snapshot base: Invalid cross-device link" in r.stderr,
              "fork with a failing snapshot ioctl: %d %s" % (r.returncode, r.stderr))
        runs = t.g("run", "list", "--json", json_out=True)["runs"]
        check([x["run_id"] for x in runs] == [sid], "runs after a failed fork %r" % runs)
        check(sorted(t.subvols()) == before, "subvolumes %r, were %r" % (t.subvols(), before))
        check(set(os.listdir(opsdir)) == ops_before, "an operation was made")
        check(sorted(os.listdir(os.path.join(t.root, "tclone", "runs"))) == [sid],
              "run dirs after a failed fork: %r" % os.listdir(os.path.join(t.root, "tclone",
                                                                            "runs")))
        failed = [h for h in t.history() if h["action"] == "fork" and h["outcome"] == "failed"]
        check(failed and "Invalid cross-device link" in failed[-1]["detail"]["reason"],
              "history %r" % failed)
        # The source is untouched and still forks once the cover is gone.
        fk = t.g("run", "fork", sid, "--json", json_out=True)
        check(len(fk["forks"]) == 1, "fork after %r" % fk)
        t.g("run", "delete", "--all")
        check(t.subvols() == [], "subvolumes left: %r" % t.subvols())
    # Not on btrfs: the backend cannot be asked for.
    t = Tclone(env, ["--backend", "btrfs"])
    try:
        rc = t.start(expect_fail=True)
        check(rc != 0 and "--backend btrfs: not available" in t.logtext(),
              "--backend btrfs on a non-btrfs root: %d %s" % (rc, t.logtext()))
    finally:
        t.cleanup()


if __name__ == "__main__":
    main({f.__name__: f for f in (lifecycle, switch_and_choose, crash_mid_merge, fork_boundaries,
                                  attacker_merge, refusals, exec_and_send, git_merge, git_merge_runs_nothing_of_the_fork,
                                  filesystem_merge_skips_metadata, git_metadata_read_only_in_runs,
                                  stalled_clients, workspace_in_tmp, copy_backend,
                                  btrfs_backend, btrfs_crash_mid_merge, btrfs_fails_closed,
                                  btrfs_fork_boundaries, session_at_answer)})
