"""Faults of the host under boundaryd: a state disk that fills up or turns
read-only, and a boundaryd killed half way through a create. Each case's
disk is a small tmpfs of its own over its private state dir; each case uses
a cgroup base of its own, so what it counts there is its own."""

import errno
import json
import os
import secrets
import signal
import subprocess
import tempfile

from harness import check, main, pids_with_cmdline


def status(env):
    return env.root_call("system.status")["result"]


def disk_record(env, opid):
    with open(os.path.join(env.state, "operations", opid, "record.json")) as f:
        return json.load(f)


def held_run(env):
    """A sandboxed gensee run with a network table (deny all) whose command
    waits, without forking, for a line on a fifo (so the lineage does not
    change while the disk is full)."""
    d = tempfile.mkdtemp(prefix="gensee-it-fifo.", dir="/var/tmp")
    env.cleanup_dirs.append(d)
    os.chmod(d, 0o755)
    fifo = os.path.join(d, "go")
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--", "/bin/sh", "-c",
                      "read x < %s; exit 7" % fifo)
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    return p, opid, fifo


def release(fifo):
    with open(fifo, "w") as f:
        f.write("go\n")


def fill(path):
    """Write path until the file system is full (ENOSPC)."""
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as e:
                check(e.errno == errno.ENOSPC, "filling: %s" % e)
                return


def op_dirs(env):
    """Operations' directories; the prepared cells' are not operations."""
    return set(os.listdir(os.path.join(env.state, "operations"))) - env.spare_ids()


def no_debris(env, ops_before, cgs_before, what):
    ops = op_dirs(env)
    check(ops == ops_before, "%s left operation directories: %r" % (what, ops - ops_before))
    cgs = op_cgroup_names(env)
    check(cgs == cgs_before, "%s left cgroups: %r" % (what, cgs - cgs_before))


def op_cgroup_names(env):
    """Operations' cgroups in the base; the prepared cell's is not one."""
    base = os.path.join(env.cgmount, env.cgroup_base)
    return {d for d in os.listdir(base) if d.startswith("op_")} - env.spare_ids()


def nft_tables(env):
    return env.op_tables()


def refused_create(env, what, *run_args):
    """A create on the broken disk: refused with the stable code, nothing left
    (no directory, no cgroup, no nftables table)."""
    ops = op_dirs(env)
    cgs = op_cgroup_names(env)
    tables = nft_tables(env)
    r = env.gensee("run", *run_args, "--", "/bin/echo", "must-not-run")
    check(nft_tables(env) == tables, "%s left a table: %r" % (what, nft_tables(env)))
    check(r.returncode == 125, "%s: create on a broken disk exited %d: %s" % (
        what, r.returncode, r.stderr))
    check("state_disk_unavailable" in r.stderr, "%s: stderr %r" % (what, r.stderr))
    check("must-not-run" not in r.stdout, "%s: the command ran" % what)
    no_debris(env, ops, cgs, what)


def check_truth(rec, where):
    life = rec["lifecycle"]
    check(life["state"] == "exited" and life["end_reason"] == "root_exited",
          "%s: %r" % (where, life))
    check(life["exit"] is not None and life["exit"]["code"] == 7, "%s: exit %r" % (where, life))
    check(rec["counts"]["violations"] == 0, "%s: a violation that never happened: %r" % (
        where, rec["counts"]))
    check(rec["cgroup"]["cleanup"]["state"] == "removed", "%s: %r" % (where, rec["cgroup"]))


def disk_fault_case(env, break_disk, repair, expect):
    # A namespace of its own: the nftables tables boundaryd sees are its own.
    env.use_netns()
    env.use_private_cgroup_base()
    env.mount_tmpfs(env.state, "4m")
    env.start()
    check(status(env)["state_disk"]["status"] == "ok", "%r" % status(env)["state_disk"])
    p, opid, fifo = held_run(env)
    env.wait_for("running on disk",
                 lambda: disk_record(env, opid)["lifecycle"]["state"] == "running")
    check(len(nft_tables(env)) == 1, "no table for the run: %r" % nft_tables(env))
    break_disk()
    # The first create after the disk broke finds out by trying (its status
    # was still ok): refused, its directory, cgroup and records taken back.
    refused_create(env, "first create", "--sandbox", "linux", "--deny-all")
    # The run ends while the disk refuses writes: its truth is kept in memory.
    release(fifo)
    rc, out, err = env.finish(p)
    check(rc == 7, "gensee run exited %d: %s" % (rc, err))
    sd = status(env)["state_disk"]
    check(sd["status"] == expect and sd["pending_records"] >= 1 and sd["since"],
          "state_disk %r" % sd)
    check_truth(env.record(opid), "inspect while the disk is %s" % expect)
    check(disk_record(env, opid)["lifecycle"]["state"] == "running",
          "the disk took a write it should not have")
    summary = [o for o in env.root_call("operation.list")["result"]["operations"]
               if o["operation_id"] == opid]
    check(summary and summary[0]["state"] == "exited", "list: %r" % summary)
    # Known bad: refused at once.
    refused_create(env, "create on a known-bad disk")
    # The disk comes back: the truth is written, creates work again.
    repair()
    env.wait_for("state disk ok", lambda: (lambda s: s["status"] == "ok" and
                                           s["pending_records"] == 0 and
                                           s["pending_lines"] == 0)(status(env)["state_disk"]),
                 timeout=30)
    check_truth(disk_record(env, opid), "on disk after repair")
    check(nft_tables(env) == [], "table left: %r" % nft_tables(env))
    with open(os.path.join(env.state, "network-operations", opid, "record.json")) as f:
        net = json.load(f)
    check(net["state"] == "ended", "network record %r" % net["state"])
    with open(os.path.join(env.state, "network-operations", opid, "counters.jsonl")) as f:
        finals = [json.loads(l) for l in f if l.strip()]
    check(finals and finals[-1].get("final") is True, "final counters lost: %r" % finals)
    r = env.gensee("run", "--", "/bin/true")
    check(r.returncode == 0, "create after repair: %d %s" % (r.returncode, r.stderr))
    # And a restart reads the truth from the disk: nothing to recover.
    env.stop()
    env.start()
    st = status(env)
    check(st["recovery_health"]["status"] == "ok", "%r" % st["recovery_health"])
    check_truth(env.record(opid), "after restart")


def disk_full_keeps_truth(env):
    filler = []

    def break_disk():
        path = os.path.join(env.state, "fill")
        fill(path)
        filler.append(path)

    disk_fault_case(env, break_disk, lambda: os.unlink(filler[0]), "full")


def disk_read_only_keeps_truth(env):
    disk_fault_case(env, lambda: env.remount(env.state, "ro"),
                    lambda: env.remount(env.state, "rw"), "read_only")


def half_created_taken_back(env):
    """boundaryd SIGKILLed between making an operation's directory (and
    cgroup) and writing its first record leaves exactly this: the directory
    with the record's lock file (and maybe a temporary first record), and
    the cgroup. It is built here on disk, deterministically, before the next
    instance starts: that instance removes both, kills anything found in
    such a cgroup, and its health is ok (the take-back is listed under
    recovery_health.cleaned, not as degraded)."""
    env.use_netns()  # the nftables tables boundaryd sees are its own
    base = env.use_private_cgroup_base()
    os.mkdir(base, 0o755)
    ops = os.path.join(env.state, "operations")
    os.mkdir(ops, 0o700)
    made = []
    sleeper = None
    try:
        ids = ["op_" + secrets.token_hex(16) for _ in range(2)]
        for i, opid in enumerate(ids):
            d = os.path.join(ops, opid)
            os.mkdir(d, 0o700)
            open(os.path.join(d, "record.json.lock"), "w").close()
            if i == 1:
                with open(os.path.join(d, "record.json.tmp"), "w") as f:
                    f.write('{"schema_version": 1, "operation_id": "%s", "rev' % opid)
            cg = os.path.join(base, opid)
            os.mkdir(cg)
            made.append(cg)
        # Something in the second one's cgroup: nothing may run there unsupervised.
        sleeper = subprocess.Popen(["sleep", "3131"])
        with open(os.path.join(made[1], "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        env.start()
        st = status(env)
        rh = st["recovery_health"]
        check(rh["status"] == "ok" and rh["entries"] == [], "health %r" % rh)
        cleaned = {e["operation_id"]: e for e in rh["cleaned"]}
        check(set(cleaned) == set(ids) and all(e["reason"] == "half_created"
                                               for e in cleaned.values()), "cleaned %r" % rh)
        check("killed" in cleaned[ids[1]]["detail"], "%r" % cleaned[ids[1]])
        for opid, cg in zip(ids, made):
            check(not os.path.exists(os.path.join(ops, opid)), "%s: directory left" % opid)
            check(not os.path.exists(cg), "%s: cgroup left" % opid)
        check(sleeper.wait(timeout=10) == -signal.SIGKILL, "the stray process was not killed")
        check(not pids_with_cmdline(b"sleep 3131"), "sleep 3131 survived")
        # The daemon serves normally.
        r = env.gensee("run", "--", "/bin/true")
        check(r.returncode == 0, "run after recovery: %d %s" % (r.returncode, r.stderr))
        # A restart does not bring anything back.
        env.stop()
        env.start()
        rh = status(env)["recovery_health"]
        check(rh["status"] == "ok" and rh["cleaned"] == [], "after restart %r" % rh)
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
        for cg in made:
            if os.path.isdir(cg):
                try:
                    os.rmdir(cg)
                except OSError as e:
                    print("cleanup %s: %s" % (cg, e))


if __name__ == "__main__":
    main({f.__name__: f for f in (disk_full_keeps_truth, disk_read_only_keeps_truth,
                                  half_created_taken_back)})
