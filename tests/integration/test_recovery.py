"""boundaryd killed with SIGKILL mid-run: what it left is contained, and the
next instance reconciles it."""

import json
import os
import signal
import subprocess
import time

from harness import Failure, check, main, pids_with_cmdline


def cgroup_members(rec):
    with open(os.path.join(rec["cgroup"]["path"], "cgroup.procs")) as f:
        return [int(x) for x in f.read().split()]


def sigkill_adopt_and_timeout(env):
    env.start()
    first = env.root_call("system.status")["result"]["instance"]
    p = env.gensee_bg("run", "--timeout", "4", "--json", "--", "sh", "-c", "sleep 311 & sleep 312")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    env.wait_for("lineage", lambda: len(env.record(opid)["lineage"]) >= 3)
    env.kill9()
    # With no supervisor the tree is still held in its cgroup.
    rec = json.load(open(os.path.join(env.state, "operations", opid, "record.json")))
    members = cgroup_members(rec)
    check(len(members) >= 3, "tree not contained: %r" % members)
    check(pids_with_cmdline(b"sleep 311") and pids_with_cmdline(b"sleep 312"), "tree died early")
    env.start()
    st = env.root_call("system.status")["result"]
    check(st["instance"] != first and st["operations"]["active"] == 1, "%r" % st)
    # The adopted operation keeps its original deadline.
    rc, out, err = env.finish(p, timeout=30)
    check(rc == 124, "rc %d: %s" % (rc, err))
    check(not pids_with_cmdline(b"sleep 311") and not pids_with_cmdline(b"sleep 312"), "survivors")
    rec = env.record(opid)
    check(rec["lifecycle"]["state"] == "timed_out", "%r" % rec["lifecycle"])
    check(rec["supervisor"]["adopted"] is True and rec["supervisor"]["instance"] == st["instance"],
          "%r" % rec["supervisor"])
    check(rec["cgroup"]["cleanup"]["state"] == "removed", "%r" % rec["cgroup"])
    check(rec["recovery_health"]["status"] == "ok", "adoption is not a violation: %r" % rec["recovery_health"])
    check(rec["counts"]["violations"] == 0, "%r" % rec["counts"])


def pid_gone_or_zombie(pid):
    # The pid may be reaped between any two looks: reading once and treating
    # a vanished file as "gone" is the only race-free check.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[1][0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def sigkill_root_gone_is_cleaned(env):
    env.start()
    p = env.gensee_bg("run", "--json", "--", "sh", "-c", "sleep 313 & sleep 314")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    env.wait_for("lineage", lambda: len(env.record(opid)["lineage"]) >= 3)
    rec = env.record(opid)
    root = rec["root_process"]["pid"]
    env.kill9()
    try:
        os.kill(root, signal.SIGKILL)  # the root dies while no supervisor watches
    except ProcessLookupError:
        raise Failure("root %d already gone; record %r; cli %r" % (root, rec, p.poll()))
    env.wait_for("root gone", lambda: pid_gone_or_zombie(root))
    check(pids_with_cmdline(b"sleep 313"), "leftover should still be contained")
    env.start()
    rec = env.wait_for("cleanup", lambda: (lambda r: r if r["cgroup"]["cleanup"]["state"] == "removed" else None)(env.record(opid)))
    check(rec["lifecycle"]["state"] == "lost", "%r" % rec["lifecycle"])
    check(rec["lifecycle"]["end_reason"] == "root_exited_while_supervisor_down", "%r" % rec["lifecycle"])
    check(not pids_with_cmdline(b"sleep 313"), "leftover survived reconciliation")
    # The launcher, retrying its end report, reaches the new instance.
    rc, out, err = env.finish(p, timeout=30)
    check(rc == 137, "rc %d: %s" % (rc, err))
    rec = env.record(opid)
    check(rec["lifecycle"]["exit"]["signal"] == 9, "%r" % rec["lifecycle"])


def invalid_record_is_recovery_health(env):
    # In a namespace of its own: tables of other instances on the host would
    # (rightly) show up in recovery health too.
    env.use_netns()
    env.start()
    r = env.gensee("run", "--json", "--", "true")
    good = json.loads(r.stdout)["operation_id"]
    env.stop()
    bad = "op_" + "0" * 32
    d = os.path.join(env.state, "operations", bad)
    os.mkdir(d, 0o700)
    with open(os.path.join(d, "record.json"), "w") as f:
        f.write('{"schema_version": 1, "operation_id": "op_%s"' % ("1" * 32))  # truncated, wrong id
    before = open(os.path.join(d, "record.json")).read()
    env.start()
    st = env.root_call("system.status")["result"]
    rh = st["recovery_health"]
    check(rh["status"] == "degraded", "%r" % rh)
    check([e["operation_id"] for e in rh["entries"]] == [bad], "%r" % rh)
    check(rh["entries"][0]["reason"] == "invalid_record", "%r" % rh)
    check(open(os.path.join(d, "record.json")).read() == before, "invalid record was rewritten")
    # The good, ended operation is untouched and still visible.
    rec = env.record(good)
    check(rec["lifecycle"]["state"] == "exited" and rec["recovery_health"]["status"] == "ok", "%r" % rec)


def nft_tables(env):
    return env.op_tables()


def record_loss_keeps_enforcement(env):
    # Attack: a running --deny-all operation, boundaryd SIGKILLed, its record
    # made unreadable (garbage, or a future schema version), restart: the
    # table was deleted as "of an ended operation" and the tree ran on with
    # no table. Now the tree is killed first and the table is kept.
    env.use_netns()
    env.start()
    runs, ops = [], []
    for n in (341, 342):
        runs.append(env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--", "sh", "-c",
                                  "sleep %d & sleep %d" % (n, n + 10)))
        ops.append(env.wait_for("operation", lambda: [o for o in env.running_ops() if o not in ops])[0])
        env.wait_for("lineage", lambda: len(env.record(ops[-1])["lineage"]) >= 3)
    tables = nft_tables(env)
    check(len(tables) == 2, "%r" % tables)
    env.kill9()
    garbage, future = (os.path.join(env.state, "operations", o, "record.json") for o in ops)
    with open(garbage, "w") as f:
        f.write("\x00garbage{")
    rec = json.load(open(future))
    rec["schema_version"] = 99
    with open(future, "w") as f:
        json.dump(rec, f)
    env.start()
    for n in (341, 342, 351, 352):
        check(not pids_with_cmdline(b"sleep %d" % n), "sleep %d runs on" % n)
    check(sorted(nft_tables(env)) == sorted(tables), "table removed: %r" % nft_tables(env))
    rh = env.root_call("system.status")["result"]["recovery_health"]
    got = {e["operation_id"]: e for e in rh["entries"] if "enforcement" in e}
    check(set(got) == set(ops) and all(e["enforcement"] == "tree_killed_table_kept" and
                                       e["reason"] == "invalid_record" for e in got.values()), "%r" % rh)
    for p in runs:
        try:
            env.finish(p, timeout=30)
        except Exception:
            p.kill()


def network_record_lost_ends_closed(env):
    # operation.create answers before it writes the network record (launch
    # latency); a boundaryd killed in that moment leaves a running operation
    # whose table is in the kernel but whose network record is missing. The
    # restart must end it closed: tree killed, violation recorded, table gone.
    env.use_netns()
    env.start()
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--", "sh", "-c",
                      "sleep 361 & sleep 362")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    env.wait_for("lineage", lambda: len(env.record(opid)["lineage"]) >= 3)
    check(len(nft_tables(env)) == 1, "%r" % nft_tables(env))
    env.kill9()
    os.unlink(os.path.join(env.state, "network-operations", opid, "record.json"))
    env.start()
    env.wait_for("tree killed", lambda: not pids_with_cmdline(b"sleep 361") and
                 not pids_with_cmdline(b"sleep 362"))
    rec = env.wait_for("cleanup", lambda: (lambda r: r if r["cgroup"]["cleanup"]["state"] == "removed" else None)(env.record(opid)))
    check(rec["lifecycle"]["end_reason"] == "network_restore_failed", "%r" % rec["lifecycle"])
    check(rec["counts"]["violations"] >= 1, "%r" % rec["counts"])
    # The table outlives it (nothing restored it; it matches a removed
    # cgroup, so it holds no one); the next start deletes it as an ended
    # operation's.
    env.kill9()
    env.start()
    env.wait_for("table gone", lambda: nft_tables(env) == [])
    try:
        env.finish(p, timeout=30)
    except Exception:
        p.kill()


def adopted_tree_moved_whole_and_handed_back(env):
    # Attack: adopting a running tree moved only its root; an existing child
    # read the key unjudged and connected out. And after a restart the
    # adopted tree lost its origin and detach flag, so it could not be
    # handed back. Now every process moves, and the restart keeps both.
    env.start()
    env.start_sensord()
    tree = subprocess.Popen(env.user_prefix() + ["sh", "-c", "sleep 361 & sleep 362 & wait"])
    env.children.append(tree)
    kids = env.wait_for("the children", lambda: (lambda v: v if len(v) == 2 else None)(
        pids_with_cmdline(b"sleep 361") + pids_with_cmdline(b"sleep 362")))
    before = {p: open("/proc/%d/cgroup" % p).read() for p in kids + [tree.pid]}
    w = env.gensee_bg("watch", "--pid", str(tree.pid), "--linux-fanotify", "--duration-seconds", "6",
                      "--json", as_root=True)
    opid = env.wait_for("the watch operation", lambda: env.running_ops())[0]
    cg = env.record(opid)["cgroup"]["path"]
    members = set(cgroup_members(env.record(opid)))
    check(set(kids) | {tree.pid} <= members, "not all of the tree moved: %r in %r" % (kids, members))
    check(env.record(opid)["adoption"]["detach"] is True, "%r" % env.record(opid).get("adoption"))
    env.kill9()
    env.start()
    env.wait_for("sensord to re-register", lambda: env.root_call("system.status")["result"]["sensord"]["connected"])
    rc, out, err = env.finish(w, timeout=30)
    check(rc == 0 and "ending" not in err, "watch rc %d: %s" % (rc, err))
    check(tree.poll() is None and all(os.path.exists("/proc/%d" % p) for p in kids), "the watched tree was killed")
    after = {p: open("/proc/%d/cgroup" % p).read() for p in kids + [tree.pid]}
    check(after == before, "not handed back: %r -> %r" % (before, after))
    rec = env.record(opid)
    check(rec["lifecycle"]["end_reason"] == "detached", "%r" % rec["lifecycle"])
    tree.kill()
    for p in kids:
        os.kill(p, signal.SIGKILL)


if __name__ == "__main__":
    main({f.__name__: f for f in (sigkill_adopt_and_timeout, sigkill_root_gone_is_cleaned,
                                  invalid_record_is_recovery_health, record_loss_keeps_enforcement, network_record_lost_ends_closed,
                                  adopted_tree_moved_whole_and_handed_back)})
