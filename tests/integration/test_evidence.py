"""Evidence for dashboards and SIEMs: boundaryd --ocsf emits a valid OCSF
1.1.0 event for every decision of real operations; every fanotify decision
is recorded or counted as dropped; the record shows a running operation's
counters and boundaries while it runs."""

import json
import os
import signal
import stat
import tempfile

from harness import check, main, pids_with_cmdline
from ocsf_check import validate
from test_network import run_sandboxed
from test_sensors import make_home


def ocsf_lines(env):
    path = os.path.join(env.state, "ocsf.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f.read().splitlines() if l.strip()]


def make_fifo(env, name):
    """A fifo the test user's agent can read: the test writes to release it."""
    path = os.path.join(env.bindir, name)
    os.mkfifo(path)
    os.chmod(path, 0o666)
    return path


def release(env, gate):
    """Open the gate an agent is reading: once it has the fifo open (a
    nonblocking open fails until then), so a test never hangs on an agent
    that did not get there."""
    def opened():
        try:
            return os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return None
    fd = env.wait_for("the agent to read " + os.path.basename(gate), opened, timeout=60)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


def validator_rejects():
    # The validator is not vacuous: each of these faults is caught.
    good = {"class_uid": 2004, "category_uid": 2, "activity_id": 1, "type_uid": 200401,
            "severity_id": 4, "status_id": 1, "time": 1764700000000,
            "metadata": {"version": "1.1.0", "product": {"vendor_name": "gensee"}},
            "finding_info": {"uid": "x", "title": "t"}}
    check(validate(good) == [], "validator refuses a valid record: %r" % validate(good))
    for mutate in (lambda r: r.pop("finding_info"),
                   lambda r: r.update(type_uid=200402),
                   lambda r: r.update(severity_id=7),
                   lambda r: r.update(time=1764700000),
                   lambda r: r.update(activity_id=4, type_uid=200404),
                   lambda r: r["finding_info"].pop("uid"),
                   lambda r: r.update(made_up=1),
                   lambda r: r["metadata"].update(version="1.0.0")):
        bad = json.loads(json.dumps(good))
        mutate(bad)
        check(validate(bad) != [], "validator accepted %r" % bad)


def ocsf_records_validate(env):
    validator_rejects()
    env.use_netns()
    env.start(args=["--ocsf"])
    env.start_sensord()
    home, ws = make_home(env)
    key = os.path.join(home, ".ssh", "id_ed25519")
    gate = make_fifo(env, "gate")
    # One sandboxed agent: a denied file read (fanotify), a denied connect
    # (nft trace in this namespace), then it waits on the gate so the
    # trace's fault lands while the operation still runs.
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--json", "--", "sh", "-c",
                      "cat %s; /usr/bin/python3 %s tcp,203.0.113.40,9999; "
                      "/usr/bin/head -c 3 %s >/dev/null; exit 3"
                      % (key, env.tool("netprobe.py"), gate),
                      env={"HOME": home, "GENSEE_HOME": home})
    opid = env.wait_for("operation", lambda: env.running_ops())[0]

    def traced():
        path = os.path.join(env.state, "network-operations", opid, "faults.jsonl")
        return os.path.exists(path) and any(
            json.loads(l).get("source") == "nft_trace" for l in open(path))
    env.wait_for("the trace fault", traced)

    def head_launched():
        return any(e["class_uid"] == 1007 and e["activity_id"] == 1 and
                   e["process"].get("file", {}).get("path", "").endswith("/head")
                   for e in ocsf_lines(env))
    # head waits on the gate: the poll sees it launch (no timing involved).
    env.wait_for("head's launch event", head_launched)
    release(env, gate)
    rc, out, err = env.finish(p)
    check(rc == 3, "agent rc %d: %s" % (rc, err))

    # A violation: the agent kills its launcher (launcher_lost).
    r = env.gensee("run", "--", "sh", "-c", "kill -9 $PPID; sleep 316", timeout=30)
    check(r.returncode == -signal.SIGKILL, "launcher rc %d: %s" % (r.returncode, r.stderr))
    ops = [o["operation_id"] for o in env.root_call("operation.list", {})["result"]["operations"]]
    lost = [o for o in ops if o != opid][0]
    env.wait_for("launcher_lost", lambda: env.record(lost)["lifecycle"]["state"] != "running")
    env.wait_for("the tree to die", lambda: not pids_with_cmdline(b"sleep 316"))

    # gensee timeline --ocsf uses the same mapping: its events validate too.
    for op in (opid, lost):
        tl = env.gensee("timeline", "--operation", op, "--ocsf")
        check(tl.returncode == 0, tl.stderr)
        evs = [json.loads(l) for l in tl.stdout.splitlines()]
        check(evs, "timeline --ocsf of %s is empty" % op)
        for e in evs:
            check(validate(e) == [], "timeline --ocsf: %r: %r" % (validate(e), e))

    def have_all():
        classes = {e["class_uid"] for e in ocsf_lines(env)}
        return {1001, 1007, 2004, 4001} <= classes
    env.wait_for("all four classes in ocsf.jsonl", have_all)
    status = env.root_call("system.status")["result"]["evidence"]
    check(status["ocsf"] is True and status["ocsf_dropped"] == 0, "status evidence %r" % status)
    env.stop()  # drains the sink: every queued event is in the file now
    evs = ocsf_lines(env)
    st = os.stat(os.path.join(env.state, "ocsf.jsonl"))
    check(st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600, "ocsf.jsonl mode %o" % st.st_mode)
    for e in evs:
        problems = validate(e)
        check(problems == [], "invalid OCSF record %r: %r" % (problems, e))
        check("status_id" in e, "no status_id: %r" % e)
    mine = [e for e in evs if e["metadata"].get("correlation_uid") == opid]
    # The denied connect: Network Activity, Refuse, to the address and port.
    net = [e for e in mine if e["class_uid"] == 4001 and e["activity_id"] == 5 and
           e["dst_endpoint"].get("ip") == "203.0.113.40" and e["dst_endpoint"].get("port") == 9999]
    check(net and all(e["status_id"] == 2 and e["connection_info"]["protocol_num"] == 6
                      for e in net), "no refused-connect event: %r" % [e for e in mine
                                                                       if e["class_uid"] == 4001])
    check(any(e["unmapped"].get("source") == "nft_trace" for e in net), "no nft trace denial %r" % net)
    # The denied read: File System Activity, Open, failed, with the reader.
    fil = [e for e in mine if e["class_uid"] == 1001 and e["file"].get("path") == key]
    check(fil and fil[0]["activity_id"] == 14 and fil[0]["status_id"] == 2 and
          fil[0]["actor"]["process"].get("pid"), "file events %r" % fil)
    # Launches and exits of the tree, with the root's exit code.
    proc = [e for e in mine if e["class_uid"] == 1007]
    launched = {e["process"].get("file", {}).get("path") for e in proc if e["activity_id"] == 1}
    # (In a network namespace sensord has no proc connector: lineage is polled
    # every 100 ms, so the short cat and probe may be missed; head, held on
    # the gate, is seen.)
    check(any(x and x.endswith("/head") for x in launched), "launches %r in %r" % (
        launched, [e["unmapped"] for e in proc]))
    check(any(e["activity_id"] == 2 and e["process"].get("file", {}).get("path", "").endswith("/head")
              for e in proc), "no termination of head in %r" % [e["unmapped"] for e in proc])
    # The violation: a Detection Finding of the other operation, and its kill.
    fnd = [e for e in evs if e["class_uid"] == 2004 and e["metadata"].get("correlation_uid") == lost]
    check(any("launcher_lost" in e["finding_info"]["title"] for e in fnd), "findings %r" % fnd)
    killed = [e for e in evs if e["class_uid"] == 1007 and e["metadata"].get("correlation_uid") == lost
              and e["activity_id"] == 2 and e["actor"]["process"].get("name") == "gensee-boundaryd"]
    check(killed, "no kill by the supervisor recorded")
    # Times are the events' own: ordered within a second of each other, not the emit time.
    t = [e["time"] for e in mine]
    check(min(t) > 10**12, "times %r" % t[:3])


def file_decisions_all_counted(env):
    # Issue 10: under load some fanotify denials were missing from files.jsonl.
    # Now every decision is a line of files.jsonl or counted as dropped.
    env.start()
    env.start_sensord()
    home, ws = make_home(env)
    key = os.path.join(home, ".ssh", "id_ed25519")
    n = 3000
    rc, lines, summary, err = run_sandboxed(env, ["--deny-all"], [
        "/usr/bin/python3", "-c",
        "import sys\nd = 0\nfor i in range(%d):\n"
        "    try:\n        open(sys.argv[1]).close()\n"
        "    except PermissionError:\n        d += 1\nprint(d)" % n, key],
        extra_env={"HOME": home, "GENSEE_HOME": home})
    check(rc == 0 and lines == [str(n)], "agent: rc %d %r %s" % (rc, lines, err))
    opid = summary["operation_id"]

    def counted():
        ev = env.record(opid).get("evidence")
        return ev if ev and ev["files_recorded"] + ev["files_dropped"] >= n else None
    ev = env.wait_for("every decision recorded or counted", counted)
    with open(os.path.join(env.state, "operations", opid, "files.jsonl")) as f:
        recorded = [json.loads(l) for l in f]
    check(all(d["path"] == key and d["decision"] == "deny" for d in recorded),
          "unexpected decisions %r" % [d for d in recorded if d["path"] != key][:3])
    check(len(recorded) == ev["files_recorded"], "files.jsonl %d lines, record says %r"
          % (len(recorded), ev))
    check(ev["files_recorded"] + ev["files_dropped"] == n, "%d decisions, record %r" % (n, ev))
    st = env.root_call("system.status")["result"]["evidence"]
    check(st["files_recorded"] + st["files_dropped"] == n, "status evidence %r" % st)
    if ev["files_dropped"]:
        check(env.record(opid)["counts"]["violations"] >= 1, "drops without a violation")


BURST = """
import os, sys
key, gate1, gate2, out, n = sys.argv[1:6]
open(out + ".ready", "w").close()
open(gate1).read()
d = 0
for i in range(int(n)):
    try:
        open(key).close()
    except PermissionError:
        d += 1
with open(out + ".tmp", "w") as f:
    f.write(str(d))
os.rename(out + ".tmp", out)
open(gate2).read()
"""


def file_decisions_dropped_are_counted(env):
    # Force real drops: boundaryd is away while the agent makes more denials
    # than sensord's backlog (4,096) holds. What sensord could not keep comes
    # back as a count, so recorded + dropped is still every decision made.
    env.start()
    env.start_sensord()
    home, ws = make_home(env)
    key = os.path.join(home, ".ssh", "id_ed25519")
    g1, g2 = make_fifo(env, "g1"), make_fifo(env, "g2")
    outdir = tempfile.mkdtemp(prefix="out.", dir=env.bindir)
    os.chmod(outdir, 0o777)
    out = os.path.join(outdir, "denied")
    n = 6000
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--json", "--",
                      "/usr/bin/python3", "-c", BURST, key, g1, g2, out, str(n),
                      env={"HOME": home, "GENSEE_HOME": home})
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    # Only once the agent runs (it was released and is at the gate).
    env.wait_for("the agent", lambda: os.path.exists(out + ".ready"))
    env.kill9()
    release(env, g1)
    env.wait_for("the burst", lambda: os.path.exists(out), timeout=120)
    with open(out) as f:
        denied = int(f.read())
    check(denied == n, "%d of %d opens denied" % (denied, n))
    env.start()  # adopts the operation; sensord reconnects and sends what it kept

    def counted():
        ev = env.record(opid).get("evidence")
        return ev if ev and ev["files_recorded"] + ev["files_dropped"] >= n else None
    ev = env.wait_for("every decision recorded or counted", counted, timeout=60)
    check(ev["files_recorded"] + ev["files_dropped"] == n, "%d decisions, record %r" % (n, ev))
    print("evidence %r" % ev)
    check(ev["files_dropped"] >= n - 4096, "sensord kept more than its backlog? %r" % ev)
    with open(os.path.join(env.state, "operations", opid, "files.jsonl")) as f:
        recorded = sum(1 for _ in f)
    check(recorded == ev["files_recorded"], "files.jsonl %d lines, record %r" % (recorded, ev))
    check(env.record(opid)["counts"]["violations"] >= 1, "drops without a violation")
    release(env, g2)
    rc, _, err = env.finish(p, timeout=120)
    check(rc == 0, "rc %d: %s" % (rc, err))


def record_live_while_running(env):
    # Issue 10: counters and mediation boundaries reached record.json only at
    # the end. The agent holds on a gate the test opens: everything checked
    # before that is seen while the operation still runs.
    env.use_netns()
    # A record startup recovery cannot validate: informational recovery health.
    bad = "op_" + "0" * 32
    os.makedirs(os.path.join(env.state, "operations", bad), 0o700)
    with open(os.path.join(env.state, "operations", bad, "record.json"), "w") as f:
        f.write('{"schema_version": 1')
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    with open(os.path.join(home, "policy.json"), "w") as f:
        json.dump({"linux": {"mount_view": {"mode": "off"}, "landlock": {"mode": "off"}}}, f)
    os.chown(home, env.uid, env.gid)
    os.chown(os.path.join(home, "policy.json"), env.uid, env.gid)
    os.chmod(home, 0o755)
    gate = make_fifo(env, "gate")
    p = env.gensee_bg("run", "--sandbox", "linux", "--allow-net", "192.0.2.1,tcp,8080",
                      "--json", "--", "sh", "-c",
                      "/usr/bin/python3 %s tcp,192.0.2.1,8080 tcp,192.0.2.1,8081; read x < %s"
                      % (env.tool("netprobe.py"), gate), env={"HOME": home, "GENSEE_HOME": home})
    opid = env.wait_for("operation", lambda: env.running_ops())[0]

    def live():
        rec = env.record(opid)
        net = rec["counts"]["network"]
        b = [m for m in rec["mediation_boundaries"] if m["kind"] == "network"]
        return rec if (net["allowed_packets"] > 0 and net["blocked_packets"] > 0 and
                       net.get("blocked_destinations") and b and
                       rec["recovery_health"]["status"] == "degraded") else None
    try:
        rec = env.wait_for("live counters in record.json", live)
    except Exception:
        print(json.dumps(env.record(opid), indent=1))
        raise
    # The agent is still held on the gate: this is the running operation.
    check(rec["lifecycle"]["state"] == "running", "lifecycle %r" % rec["lifecycle"])
    b = [m for m in rec["mediation_boundaries"] if m["kind"] == "network"][0]
    check(b["state"] == "active" and b["mechanism"] == "nftables" and b["generation"] >= 1 and
          b["mode"] == "allowlist", "boundary %r" % b)
    rh = rec["recovery_health"]
    check([e["operation_id"] for e in rh["entries"]] == [bad] and rec["counts"]["violations"] == 0,
          "recovery health %r (informational, not a violation)" % rh)
    top = rec["counts"]["network"]["blocked_destinations"]["top"]
    check(any(t["destination"] == "192.0.2.1" and t["port"] == 8081 for t in top), "top %r" % top)
    live_counts = dict(rec["counts"]["network"])
    release(env, gate)
    rc, out, err = env.finish(p)
    check(rc == 0, "rc %d: %s" % (rc, err))
    final = env.record(opid)
    net = final["counts"]["network"]
    for k in ("allowed_packets", "allowed_bytes", "blocked_packets", "blocked_bytes"):
        check(net[k] >= live_counts[k], "%s went down: %r -> %r" % (k, live_counts, net))
    # Live snapshots and the end are not counted twice: the record's counts
    # are the kernel's final counters.
    with open(os.path.join(env.state, "network-operations", opid, "counters.jsonl")) as f:
        last = [json.loads(l) for l in f if l.strip()][-1]
    check(last.get("final") and all(net[k] == last[k] for k in
                                    ("allowed_packets", "allowed_bytes", "blocked_packets",
                                     "blocked_bytes")), "record %r, final counters %r" % (net, last))
    b = [m for m in final["mediation_boundaries"] if m["kind"] == "network"]
    check(len(b) == 1 and b[0]["state"] == "ended", "boundary at the end %r" % b)


if __name__ == "__main__":
    main({f.__name__: f for f in (ocsf_records_validate, file_decisions_all_counted,
                                  file_decisions_dropped_are_counted,
                                  record_live_while_running)})
