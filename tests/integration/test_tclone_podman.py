"""gensee-tcloned's Podman (runc) runtime: a podman source, forks, diff and
merge; the container's processes are in the operation's cgroup and the
network boundary holds; discard/delete remove containers (and orphans);
missing podman, a caller-named podman and a missing image fail closed.
Real kernel, real boundaryd, real podman and runc, a private store."""

import contextlib
import glob
import json
import os
import tempfile

from harness import call, check, main, process_tree
from podimage import PODMAN, Store
from test_tclone import AGENT, Tclone


@contextlib.contextmanager
def podman_tclone(env, tmux=True, args=None):
    store = Store()
    t = None
    old = os.environ.get("CONTAINERS_STORAGE_CONF")
    try:
        image = store.build(tmux=tmux)
        # tcloned's own environment names the store (the operator's choice).
        os.environ["CONTAINERS_STORAGE_CONF"] = store.conf
        t = Tclone(env, ["--podman", PODMAN, "--podman-image", image] + list(args or []))
        t.start()
        t.store, t.image = store, image
        yield t
    finally:
        if old is None:
            os.environ.pop("CONTAINERS_STORAGE_CONF", None)
        else:
            os.environ["CONTAINERS_STORAGE_CONF"] = old
        if t is not None:
            t.cleanup()
        store.cleanup()
        # What runc left in v1 hierarchies (hybrid hosts) for this case's operations.
        opdir = os.path.join(env.state, "operations")
        for d in (os.listdir(opdir) if os.path.isdir(opdir) else []):
            for top in glob.glob("/sys/fs/cgroup/*/%s/%s" % (env.cgroup_base, d)):
                if "/unified/" in top:
                    continue
                for sub, dirs, _ in os.walk(top, topdown=False):
                    for n in dirs:
                        with contextlib.suppress(OSError):
                            os.rmdir(os.path.join(sub, n))
                with contextlib.suppress(OSError):
                    os.rmdir(top)


def psource(t, *extra, cmd=("sh", "agent.sh")):
    return t.g("run", "--runtime", "tclone", "--podman", "--json", *extra, "--", *cmd,
               json_out=True)


def container_pids(t, name):
    """Every process of the container: its init and the init's descendants."""
    r = t.store.podman("inspect", "--format", "{{.State.Pid}}", name, check=False)
    if r.returncode != 0:
        return []
    init = int(r.stdout.strip() or 0)
    if init <= 0:
        return []
    return process_tree(init)


def cgroup_of(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def in_op_cgroup(env, t, run, least=2):
    """Every container process of run is in its operation's cgroup subtree."""
    rec = env.record(run["operation_id"])
    op_rel = "/" + os.path.relpath(rec["cgroup"]["path"], env.cgmount)
    pids = container_pids(t, run["container"])
    check(len(pids) >= least, "container %s has processes %r" % (run["container"], pids))
    for p in pids:
        cg = cgroup_of(p)
        check(cg is not None and (cg == op_rel or cg.startswith(op_rel + "/")),
              "%s: pid %d in cgroup %s, not below %s" % (run["run_id"], p, cg, op_rel))
    return pids


def podman_lifecycle(env):
    env.start()
    with podman_tclone(env) as t:
        t.workspace({"shared.txt": "base\n", "gone.txt": "old\n"})
        st = call(os.path.join(env.runtime, "tclone.sock"), "tclone.status")["result"]["podman"]
        check(st["available"] is True and st["default_image"] == t.image and
              st["oci_runtime"] == "runc", "podman status %r" % st)
        src = psource(t)
        sid = src["run_id"]
        check(src["runtime"] == "podman" and src["image"] == t.image and src["tmux"] is True and
              src["container"] == "gensee-tclone-" + sid, "source %r" % src)
        check(src["confinement"]["runtime"] == "podman" and
              src["confinement"]["oci_runtime"] == "runc", "confinement %r" % src["confinement"])
        t.wait_done(sid)
        check(t.diff(sid).get("started.txt") == "added", "source diff %r" % t.diff(sid))
        check(not os.path.exists(os.path.join(t.ws, "started.txt")), "the workspace was written")
        check("gensee-tclone-" + sid in t.store.containers(), "no container %r" %
              t.store.containers())
        # exec runs inside the container's tmux session: its uid, its operation.
        r = t.g("run", "exec", sid, "--", "sh", "-c", "id -u; hostname; echo $GENSEE_RUN_ID")
        check(r.stdout.split() == [str(env.uid), "gensee-tclone", sid], "exec: %r" % r.stdout)

        fk = t.g("run", "fork", sid, "--copies", "2", "--name", "try", "--approach", "alpha",
                 "--approach", "beta", "--json", json_out=True)
        forks = fk["forks"]
        f0, f1 = forks[0]["run_id"], forks[1]["run_id"]
        for f in forks:
            check(f["runtime"] == "podman" and f["image"] == t.image and
                  f["container"] == "gensee-tclone-" + f["run_id"], "fork %r" % f)
            check(f["authority"]["authority_delta"] == {} and
                  f["authority"]["network"] == {"mode": "allowlist", "allow": []},
                  "fork authority %r" % f["authority"])
            check(f["operation_id"] != src["operation_id"], "fork shares the operation")
        t.check_agent_forks(f0, f1)
        names = t.store.containers()
        check(all("gensee-tclone-" + x in names for x in (sid, f0, f1)), "containers %r" % names)

        m = t.g("run", "merge", f0, "--into", sid, "--filesystem", "--json", json_out=True)
        check(m["status"] == "merged", "merge %r" % m)
        out = t.g("run", "exec", sid, "--", "cat", "shared.txt", "alpha.txt").stdout
        check(out == "alpha\nalpha\n", "the source's container sees the merge: %r" % out)
        r = t.g("run", "merge", f1, "--into", sid, "--filesystem", "--json", ok=False)
        c = json.loads(r.stdout)
        check(r.returncode == 1 and c["status"] == "conflict" and
              [x["path"] for x in c["conflicts"]] == ["shared.txt"], "conflict %r" % c)
        out = t.g("run", "exec", sid, "--", "cat", "shared.txt").stdout
        check(out == "alpha\n", "a conflicting merge changed the source: %r" % out)

        # discard ends the fork's operation and removes its container.
        d = t.g("run", "discard", f1, "--json", json_out=True)
        check(d["state"] == "discarded", "discard %r" % d)
        check("gensee-tclone-" + f1 not in t.store.containers(), "discarded container left %r"
              % t.store.containers())
        env.wait_for("fork1 operation ended",
                     lambda: env.record(forks[1]["operation_id"])["lifecycle"]["state"] !=
                     "running")
        # An orphan of this user (a container no run knows) and one of another user.
        t.store.podman("create", "--name", "gensee-tclone-run_orphan", "--label",
                       "gensee.tclone=1", "--label", "gensee.tclone.uid=%d" % env.uid,
                       t.image, "true")
        t.store.podman("create", "--name", "gensee-tclone-run_other", "--label",
                       "gensee.tclone=1", "--label", "gensee.tclone.uid=65534", t.image, "true")
        res = t.g("run", "delete", "--all", "--json", json_out=True)
        check(res.get("orphan_containers") == ["gensee-tclone-run_orphan"],
              "orphans reaped %r" % res)
        left = t.store.containers()
        check(left == ["gensee-tclone-run_other"], "containers after delete --all: %r" % left)
        check(t.g("run", "list", "--json", json_out=True)["runs"] == [], "runs left")
        for op in (src["operation_id"], forks[0]["operation_id"]):
            env.wait_for("operation %s ended" % op,
                         lambda: env.record(op)["lifecycle"]["state"] != "running")
        # History records the podman runs' lifecycle as any other.
        outcomes = [(h["action"], h["outcome"]) for h in t.history()]
        for want in (("start", "succeeded"), ("fork", "succeeded"), ("merge", "succeeded"),
                     ("discard", "succeeded"), ("delete", "succeeded")):
            check(want in outcomes, "history lacks %r: %r" % (want, outcomes))


NETPROBE = r"""
# stdout is the agent's probe-RUN.txt
echo "allowed $(nc -w 2 198.51.100.1 8470 </dev/null 2>&1 | head -c 20 | tr -d "\n")"
echo "denied $(nc -w 2 192.0.2.1 8471 </dev/null 2>&1 | head -c 20 | tr -d "\n")"
echo "cgroup $(grep '^0::' /proc/self/cgroup)"
echo "uid $(id -u)"
echo "capeff $(grep '^CapEff' /proc/self/status | tr -d ' \t' | cut -d: -f2)"
echo "nnp $(grep '^NoNewPrivs' /proc/self/status | tr -d ' \t' | cut -d: -f2)"
for p in TC_SOCK TC_ROOT; do
  eval "v=\$$p"; if [ -e "$v" ]; then echo "$p visible" ; else echo "$p hidden"; fi
done
if (echo x > /escape-$GENSEE_RUN_ID) 2>/dev/null; then echo "rootfs written"; else echo "rootfs read-only"; fi
"""


def podman_boundaries(env):
    """The container is inside the operation: its cgroup, its nftables
    policy (only the allowed destination connects, in source and fork), and
    the operation's end (cgroup.kill) ends every process of it."""
    ns = env.use_netns()
    env.start()
    env.serve(ns, "tcp,198.51.100.1,8470", "tcp,192.0.2.1,8471")
    with podman_tclone(env) as t:
        # What the agent must not reach: tcloned's socket and the authority root.
        probe = ('TC_SOCK=%s TC_ROOT=%s\n' % (os.path.join(env.runtime, "tclone.sock"),
                                              t.root)) + NETPROBE
        t.workspace({"shared.txt": "base\n", "probe.sh": probe})
        with open(os.path.join(t.ws, "agent.sh"), "w") as f:
            f.write(AGENT.replace('[ -n "$TCLONE_PROBE" ] && sh "$TCLONE_PROBE"', "sh probe.sh"))
        os.chown(os.path.join(t.ws, "agent.sh"), env.uid, env.gid)
        leased = psource(t, "--allow-net", "198.51.100.1,tcp,8470")
        closed = psource(t)
        fork = t.g("run", "fork", leased["run_id"], "--json", json_out=True)["forks"][0]
        runs = [leased, closed, fork]
        for r in runs:
            t.wait_done(r["run_id"])
        for r in runs:
            # The probe is in the run's own diff (written in its snapshot).
            text = t.g("run", "exec", r["run_id"], "--", "cat",
                       "probe-%s.txt" % r["run_id"]).stdout
            res = dict((line + " ").split(" ", 1) for line in text.strip().splitlines())
            res = {k: v.strip() for k, v in res.items()}
            check("cgroup" in res and "rootfs" in res, "%s: probe %r" % (r["run_id"], text))
            op_rel = "/" + os.path.relpath(env.record(r["operation_id"])["cgroup"]["path"],
                                           env.cgmount)
            check(res["cgroup"].startswith("0::" + op_rel + "/"),
                  "%s: the agent's cgroup %s is not below %s" % (r["run_id"], res["cgroup"],
                                                                   op_rel))
            check(res["uid"] == str(env.uid), "%s: uid %s" % (r["run_id"], res["uid"]))
            check(res["capeff"] == "0000000000000000" and res["nnp"] == "1",
                  "%s: capabilities %r" % (r["run_id"], res))
            check(res["TC_SOCK"] == "hidden" and res["TC_ROOT"] == "hidden" and
                  res["rootfs"] == "read-only",
                  "%s reaches outside its container: %r" % (r["run_id"], res))
            want_allowed = r is not closed
            check(("ok" in res["allowed"]) == want_allowed,
                  "%s: allowed destination %r" % (r["run_id"], res))
            check("ok" not in res["denied"], "%s: denied destination %r" % (r["run_id"], res))
            in_op_cgroup(env, t, r)
        # The refusal is the operation's policy, not a missing server.
        outside = env.probe_outside(ns, "tcp,192.0.2.1,8471")
        check(list(outside.values()) == ["ok"], "from outside: %r" % outside)
        # The fork's operation has exactly the leased source's envelope.
        envs = [json.dumps({k: env.root_call("network.inspect", {"operation_id": r[
            "operation_id"]})["result"]["envelope"][k] for k in ("mode", "grants", "deny")},
            sort_keys=True) for r in (leased, fork)]
        check(envs[0] == envs[1] and "198.51.100.1" in envs[0], "envelopes %r" % envs)
        # The operation's end (boundaryd's cgroup.kill) takes every container process.
        pids = container_pids(t, fork["container"])
        env.root_call("operation.end", {"operation_id": fork["operation_id"], "kill": True})
        env.wait_for("the fork's container processes gone",
                     lambda: not any(os.path.exists("/proc/%d" % p) for p in pids), timeout=20)
        env.wait_for("the fork's container removed",
                     lambda: fork["container"] not in t.store.containers(), timeout=30)
        st = [x["state"] for x in t.g("run", "list", "--json", json_out=True)["runs"]
              if x["run_id"] == fork["run_id"]]
        check(st == ["exited"], "fork state after its operation ended: %r" % st)
        t.g("run", "delete", "--all")
        check(t.store.containers() == [], "containers left %r" % t.store.containers())


def podman_refusals(env):
    """Fail closed, with stable codes, and nothing left behind."""
    env.start()
    with podman_tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        r = t.g("run", "--runtime", "tclone", "--podman", "--image",
                "localhost/gensee-no-such-image:%d" % os.getpid(), "--", "sh", "agent.sh",
                ok=False)
        check(r.returncode == 125 and "podman_image_missing" in r.stderr,
              "missing image: %d %s" % (r.returncode, r.stderr))
        # The seed's variable may ask for podman, but never name the binary root runs.
        fake = os.path.join(t.ws, "podman")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ntouch /tmp/gensee-it-pwned\n")
        os.chmod(fake, 0o755)
        r = t.g("run", "--runtime", "tclone", "--", "sh", "agent.sh", ok=False,
                env={"GENSEE_TCLONE_PODMAN": fake})
        check(r.returncode == 125 and "podman_not_allowed" in r.stderr,
              "caller-named podman: %d %s" % (r.returncode, r.stderr))
        # GENSEE_TCLONE_IMAGE is honoured (here: a missing one, refused).
        r = t.g("run", "--runtime", "tclone", "--podman", "--", "sh", "agent.sh", ok=False,
                env={"GENSEE_TCLONE_IMAGE": "localhost/gensee-none:%d" % os.getpid()})
        check(r.returncode == 125 and "podman_image_missing" in r.stderr,
              "GENSEE_TCLONE_IMAGE: %s" % r.stderr)
        r = t.g("run", "--runtime", "tclone", "--podman", "--image", "-bad", "--", "true",
                ok=False)
        check(r.returncode != 0 and "invalid_params" in r.stderr, "option-like image: %s" %
              r.stderr)
        check(t.g("run", "list", "--json", json_out=True)["runs"] == [], "runs after refusals")
        check(t.store.containers() == [], "containers after refusals %r" %
              t.store.containers())
        check(t.mounts() == [], "mounts left %r" % t.mounts())
        fails = [h for h in t.history() if h["action"] == "start" and h["outcome"] == "failed"]
        check(len(fails) == 2, "failed starts recorded %r" % fails)
        # An image without tmux: the agent is the container's main process, and says so.
        plain = t.store.build(tmux=False)
        src = psource(t, "--image", plain, cmd=("sh", "-c", "echo direct > d.txt; exec sleep 600"))
        check(src["tmux"] is False and "no /usr/bin/tmux" in
              src["confinement"]["tmux_reason"], "no-tmux source %r" % src)
        env.wait_for("the direct agent", lambda: "d.txt" in t.diff(src["run_id"]), timeout=30)
        in_op_cgroup(env, t, src, least=1)
        t.g("run", "delete", "--all")
        check(t.store.containers() == [], "containers left %r" % t.store.containers())
    # A tcloned whose podman is not there refuses podman runs (and only those).
    with podman_tclone(env, args=["--podman", "/nonexistent/podman"]) as t:
        t.workspace({"a.txt": "a\n"})
        st = call(os.path.join(env.runtime, "tclone.sock"), "tclone.status")["result"]["podman"]
        check(st["available"] is False and "/nonexistent/podman" in st["reason"],
              "status of a missing podman %r" % st)
        r = t.g("run", "--runtime", "tclone", "--podman", "--", "true", ok=False)
        check(r.returncode == 125 and "podman_unavailable" in r.stderr,
              "no podman: %s" % r.stderr)
    check(not os.path.exists("/tmp/gensee-it-pwned"), "a caller-named binary ran")


def podman_tcloned_restart(env):
    """tcloned dies with a podman source running: boundaryd ends the
    operation (its launcher is gone), and the next tcloned marks the run
    lost and removes its container from the store."""
    env.start()
    with podman_tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        src = psource(t)
        t.wait_done(src["run_id"])
        pids = in_op_cgroup(env, t, src)
        t.kill9()
        env.wait_for("the operation ended with its launcher",
                     lambda: env.record(src["operation_id"])["lifecycle"]["state"] != "running",
                     timeout=20)
        env.wait_for("the container's processes gone",
                     lambda: not any(os.path.exists("/proc/%d" % p) for p in pids), timeout=20)
        t.start()
        runs = t.g("run", "list", "--json", json_out=True)["runs"]
        check([r["state"] for r in runs] == ["lost"], "after restart %r" % runs)
        check(src["container"] not in t.store.containers(), "container kept %r" %
              t.store.containers())
        check(t.diff(src["run_id"]).get("started.txt") == "added", "snapshot lost")
        t.g("run", "delete", "--all")


def podman_file_rules(env):
    """A podman run gets the same boundary as one our launcher starts: the
    user's fanotify rules reach its operation (boundaryd holds the create
    until sensord has the marks), as they do for the same workspace run
    without Podman."""
    env.start()
    env.start_sensord()
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    os.makedirs(os.path.join(home, ".ssh"))
    with open(os.path.join(home, "policy.json"), "w") as f:
        json.dump({"linux": {"fanotify": {"enabled": True,
                                          "paths": [os.path.join(home, ".ssh")]}}}, f)
    env.chown_to_user(home)
    os.chmod(home, 0o755)
    uenv = {"HOME": home, "GENSEE_HOME": home}
    with podman_tclone(env) as t:
        t.workspace({"a.txt": "a\n"})
        pod = t.g("run", "--runtime", "tclone", "--podman", "--json", "--", "sh", "agent.sh",
                  json_out=True, env=uenv)
        ns = t.g("run", "--runtime", "tclone", "--json", "--", "sh", "agent.sh",
                 json_out=True, env=uenv)
        for r in (pod, ns):
            t.wait_done(r["run_id"])
            rec = env.record(r["operation_id"])
            fa = rec.get("fanotify") or {}
            check(fa.get("enabled") is True and any(
                p.startswith(os.path.join(home, ".ssh")) for p in json.dumps(fa).split('"')),
                  "%s: operation fanotify %r" % (r["run_id"], fa))
            check(rec["sensors"]["fanotify"] == "active", "%s: sensors %r" % (
                r["run_id"], rec["sensors"]))
        t.g("run", "delete", "--all")


if __name__ == "__main__":
    main({f.__name__: f for f in (podman_lifecycle, podman_boundaries, podman_refusals,
                                  podman_file_rules,
                                  podman_tcloned_restart)})
