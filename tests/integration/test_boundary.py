"""boundaryd holds against the ways around it (issue 9, sections 2 and 7): the
supervised tree cannot loosen or end its own supervision, only the launcher
reports exits, claimed host controls are checked against the kernel, losing
the launcher ends the operation, and one user cannot starve the others.
Each case performs the attack and fails without the fix."""

import errno
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

from harness import Failure, call, check, main, pids_with_cmdline

# A small client for code that runs as the test user (inside or outside an
# operation): call(method, params) on one connection, and code(reply).
CLIENT = r"""
import json, os, socket, struct, sys, time
def rx(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise ConnectionError("closed")
        b += c
    return b
def call(path, method, params):
    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path)
    d = json.dumps({"proto": 1, "id": 1, "method": method, "params": params}).encode()
    s.sendall(struct.pack(">I", len(d)) + d)
    r = json.loads(rx(s, struct.unpack(">I", rx(s, 4))[0])); s.close()
    return r
def code(r):
    return r.get("error", {}).get("code", "ok")
"""

# Runs inside an operation: everything it may not do, and what it may.
INSIDE = CLIENT + r"""
path, other = sys.argv[1], sys.argv[2]
mine = os.environ["GENSEE_OPERATION_ID"]
fault = {"subject": {"pid": os.getpid(), "start_time_ticks": 1},
         "capability": {"kind": "network.connect", "destination": "192.0.2.1",
                        "protocol": "tcp", "port": 1}}
out = {
    "end_other": code(call(path, "operation.end", {"operation_id": other, "kill": True})),
    "end_own": code(call(path, "operation.end", {"operation_id": mine, "kill": True})),
    "exit_own": code(call(path, "operation.end", {"operation_id": mine, "exit_code": 0})),
    "observe_other": code(call(path, "operation.observe", {"operation_id": other})),
    "revoke_other": code(call(path, "network.revoke", {"operation_id": other,
                                                        "lease_id": "lease_x"})),
    "inspect_other": code(call(path, "operation.inspect", {"operation_id": other})),
    "evidence_other": code(call(path, "operation.evidence", {"operation_id": other})),
    "fault_other": call(path, "fault.submit", {"operation_id": other, "fault": fault}),
    "create": code(call(path, "operation.create", {"pid": os.getpid(), "start_time_ticks": 0})),
    "inspect_own": code(call(path, "operation.inspect", {"operation_id": mine})),
    "list": [o["operation_id"] for o in
             call(path, "operation.list", {})["result"]["operations"]],
    "status": code(call(path, "system.status", {})),
}
print(json.dumps(out))
"""


def in_operation_reduced_methods(env):
    # Issue 9 §2: a process inside an operation's cgroup, same uid as the
    # owner of another running operation, tries to end, observe and revoke
    # it (and its own), and to read it. Before: end_other ended it.
    env.start()
    p = env.gensee_bg("run", "--", "sleep", "311")
    other = env.wait_for("operation", lambda: env.running_ops())[0]
    r = env.gensee("run", "--json", "--", "/usr/bin/python3", "-c", INSIDE, env.client_sock,
                   other, timeout=60)
    check(r.returncode == 0, "inside script: %d %s" % (r.returncode, r.stderr))
    # --json: stdout is the run's JSON alone, the script's line is on stderr.
    first = [l for l in r.stderr.splitlines() if l.startswith("{")][-1]
    out, mine = json.loads(first), json.loads(r.stdout)["operation_id"]
    for k in ("end_other", "end_own", "exit_own", "observe_other", "revoke_other"):
        check(out[k] == "not_authorized", "%s: %r" % (k, out))
    for k in ("inspect_other", "evidence_other"):
        check(out[k] == "not_found", "%s: %r" % (k, out))
    # Refused outright, or answered deny: never decided for the other operation.
    check(out["fault_other"].get("error", {}).get("code") == "not_authorized" or
          out["fault_other"].get("result", {}).get("reason") == "wrong_operation",
          "fault_other: %r" % out)
    check(out["create"] == "conflict", "create: %r" % out)
    check(out["inspect_own"] == "ok" and out["status"] == "ok", "%r" % out)
    check(out["list"] == [mine], "list %r, want only %s" % (out["list"], mine))
    check(other in env.running_ops(), "the other operation was ended from inside %s" % mine)
    # The same user outside any operation keeps the whole method set.
    reply = env.user_call(env.client_sock, "operation.inspect", {"operation_id": other})
    check("result" in reply, "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.end", {"operation_id": other, "kill": True})
    check(reply.get("result", {}).get("state") == "ended", "%r" % reply)
    env.finish(p)


def exit_report_only_from_launcher(env):
    # Issue 9 §2: another process of the same uid writes an exit status the
    # root never had. Before: the record said exit 0, reported by "launcher".
    env.start()
    p = env.gensee_bg("run", "--json", "--", "sleep", "312")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    reply = env.user_call(env.client_sock, "operation.end",
                          {"operation_id": opid, "exit_code": 0, "kill": True})
    check(reply.get("error", {}).get("code") == "not_launcher", "forged exit: %r" % reply)
    check(opid in env.running_ops(), "the forged report ended the operation")
    reply = env.user_call(env.client_sock, "operation.end",
                          {"operation_id": opid, "exit_signal": 9})
    check(reply.get("error", {}).get("code") == "not_launcher", "forged signal: %r" % reply)
    # Ending it (no exit report) is still the user's right; the launcher reports.
    reply = env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    check(reply.get("result", {}).get("state") == "ended", "%r" % reply)
    rc, out, err = env.finish(p)
    check(rc == 137, "rc %d: %s" % (rc, err))
    rec = env.record(opid)
    ex = rec["lifecycle"].get("exit") or {}
    check(ex.get("reported_by") == "launcher" and ex.get("signal") == 9 and ex.get("code") != 0,
          "exit %r" % ex)


# A launcher that claims seccomp and never applies it: the held child execs
# sleep unconfined. Prints what happened to the child.
LIAR = CLIENT + r"""
path = sys.argv[1]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)
    os.execv("/bin/sleep", ["sleep", "313"])
os.close(r)
start = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[19])
claim = {"seccomp": {"enabled": True, "profile": "default", "denied": ["ptrace"]},
         "landlock": {"mode": "best_effort", "abi": 0, "applied": False, "read_only": [],
                      "read_write": [], "skipped": []}}
res = call(path, "operation.create", {"pid": pid, "start_time_ticks": start,
                                      "host_controls": claim})
opid = res["result"]["operation_id"]
os.write(w, b"x")
time.sleep(0.3)
call(path, "operation.observe", {"operation_id": opid})
deadline, status = time.monotonic() + 10, None
while time.monotonic() < deadline:
    got, st = os.waitpid(pid, os.WNOHANG)
    if got == pid:
        status = st
        break
    time.sleep(0.05)
survived = status is None
if survived:
    os.kill(pid, 9); os.waitpid(pid, 0)
end = call(path, "operation.end", {"operation_id": opid, "exit_signal": 9})
print(json.dumps({"operation_id": opid, "survived": survived,
                  "signal": os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status)
                  else None, "end": code(end)}))
"""


def host_controls_verified(env):
    # Issue 9 §2: host_controls were stored on the launcher's word. Before:
    # the record said seccomp enabled while the tree ran with Seccomp: 0.
    env.use_netns()
    env.start()
    r = subprocess.run(["/usr/bin/python3", "-c", LIAR, env.client_sock], capture_output=True,
                       text=True, timeout=60, user=env.uid, group=env.gid, extra_groups=[],
                       env=env.user_env(), cwd="/")
    check(r.returncode == 0, "liar: %s" % r.stderr)
    out = json.loads(r.stdout)
    check(not out["survived"] and out["signal"] == 9, "unconfined child not killed: %r" % out)
    rec = env.record(out["operation_id"])
    life = rec["lifecycle"]
    check(life["state"] == "failed" and life["end_reason"] == "host_controls_unverified",
          "lifecycle %r" % life)
    kern = rec["host_controls_kernel"]
    check(kern["state"] == "mismatch" and kern["offender"]["seccomp"] == 0 and
          kern["required"]["seccomp"] == 2, "host_controls_kernel %r" % kern)
    check(rec["host_controls"]["seccomp"]["enabled"] is True, "the claim is kept beside it")
    check(not pids_with_cmdline(b"sleep 313"), "the unconfined tree survived")
    # The real launcher's controls are what the kernel shows.
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--linux-seccomp", "--json", "--",
                   "sleep", "1")
    check(r.returncode == 0, "sandboxed run: %d %s" % (r.returncode, r.stderr))
    rec = env.record(json.loads(r.stdout)["operation_id"])
    kern = rec.get("host_controls_kernel")
    check(kern is not None and kern["state"] == "verified" and kern["offender"] is None and
          kern["processes_checked"] >= 1, "host_controls_kernel %r" % kern)
    check(rec["lifecycle"]["state"] == "exited", "lifecycle %r" % rec["lifecycle"])


# Pipelines N fault.submit on one connection; prints the count of each answer.
FLOOD_FAULTS = CLIENT + r"""
path, opid, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(path)
buf = b""
for i in range(n):
    f = {"subject": {"pid": 1, "start_time_ticks": 1}, "source": "explicit",
         "capability": {"kind": "network.connect", "destination": "203.0.113.40",
                        "protocol": "tcp", "port": 9000}}
    d = json.dumps({"proto": 1, "id": i, "method": "fault.submit",
                    "params": {"operation_id": opid, "fault": f}}).encode()
    buf += struct.pack(">I", len(d)) + d
s.sendall(buf)
counts = {}
for i in range(n):
    r = json.loads(rx(s, struct.unpack(">I", rx(s, 4))[0]))
    k = code(r)
    counts[k] = counts.get(k, 0) + 1
print(json.dumps(counts))
"""


def fault_label_and_rate_limited(env):
    # Issue 9 §2 and §7: a caller labels its own fault nft_trace (kernel
    # evidence); a caller floods its operation with faults; lease requests
    # without bound. Before: all three were accepted.
    env.use_netns()
    env.start()
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--lease-scope",
                      "203.0.113.40,tcp,2000-2200", "--max-lease-ttl", "60", "--", "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    root = env.record(opid)["root_process"]
    fault = {"subject": {"pid": root["pid"], "start_time_ticks": root["start_time_ticks"]},
             "capability": {"kind": "network.connect", "destination": "203.0.113.40",
                            "protocol": "tcp", "port": 2000}, "source": "nft_trace"}
    reply = env.user_call(env.client_sock, "fault.submit", {"operation_id": opid, "fault": fault})
    check(reply.get("error", {}).get("code") == "not_authorized", "user nft_trace: %r" % reply)
    reply = call(env.client_sock, "fault.submit", {"operation_id": opid, "fault": fault})
    check(reply.get("error", {}).get("code") == "not_authorized", "root client nft_trace: %r" % reply)
    reply = env.user_call(env.client_sock, "network.event", {"operation_id": opid, "event": {
        "pid": root["pid"], "start_time_ticks": root["start_time_ticks"],
        "destination": "203.0.113.40", "protocol": "tcp", "port": 2000, "source": "nft_trace"}})
    check(reply.get("error", {}).get("code") == "not_authorized", "event nft_trace: %r" % reply)
    faults = os.path.join(env.state, "network-operations", opid, "faults.jsonl")
    text = open(faults).read() if os.path.exists(faults) else ""
    check('"nft_trace"' not in text, "a self-labelled nft_trace fault was recorded")
    # A flood from the owner: the bucket answers rate_limited beyond its burst.
    r = subprocess.run(["/usr/bin/python3", "-c", FLOOD_FAULTS, env.client_sock, opid, "300"],
                       capture_output=True, text=True, timeout=60, user=env.uid, group=env.gid,
                       extra_groups=[], env=env.user_env(), cwd="/")
    check(r.returncode == 0, r.stderr)
    counts = json.loads(r.stdout)
    check(counts.get("rate_limited", 0) >= 150 and counts.get("ok", 0) >= 32,
          "flood answers %r" % counts)
    # Leases (root on boundary.sock is not rate limited): at most 128 per operation.
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(env.boundary_sock)
    from harness import encode_frame, read_frame
    seen = {}
    for i in range(132):
        f = dict(fault, source="explicit")
        f["capability"] = dict(fault["capability"], port=2000 + i)
        s.sendall(encode_frame({"proto": 1, "id": i, "method": "fault.submit",
                                "params": {"operation_id": opid, "fault": f}}))
        res = read_frame(s)["result"]
        key = res["disposition"] + ":" + res["reason"]
        seen[key] = seen.get(key, 0) + 1
    s.close()
    check(seen.get("deny:lease_limit") == 132 - 128 and
          sum(v for k, v in seen.items() if k.startswith("lease")) == 128, "leases %r" % seen)
    reply = env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    check("result" in reply, "%r" % reply)
    env.finish(p)


def launcher_loss_ends_operation(env):
    # Issue 9 §2: the agent kills its launcher and runs on. Before: the
    # marker was written 4 s later and the tree ran with no supervisor.
    env.start()
    d = tempfile.mkdtemp(prefix="gensee-it-marker.")
    os.chmod(d, 0o777)
    marker = os.path.join(d, "still-running")
    try:
        t0 = time.monotonic()
        r = env.gensee("run", "--", "sh", "-c", "kill -9 $PPID; sleep 314; touch " + marker,
                       timeout=30)
        check(r.returncode == -signal.SIGKILL, "launcher rc %d: %s" % (r.returncode, r.stderr))
        ops = env.root_call("operation.list", {})["result"]["operations"]
        check(len(ops) == 1, "%r" % ops)
        opid = ops[0]["operation_id"]

        def ended():
            rec = env.record(opid)
            return rec if rec["lifecycle"]["state"] != "running" else None
        rec = env.wait_for("the operation to end", ended, timeout=15)
        elapsed = time.monotonic() - t0
        check(rec["lifecycle"]["state"] == "ended" and
              rec["lifecycle"]["end_reason"] == "launcher_lost", "lifecycle %r" % rec["lifecycle"])
        check(1.5 <= elapsed < 10, "ended after %.1fs (grace 2 s)" % elapsed)
        env.wait_for("the tree to die", lambda: not pids_with_cmdline(b"sleep 314"), timeout=10)
        check(not os.path.exists(marker), "the agent ran on after its launcher died")
        check(rec["counts"]["violations"] >= 1, "counts %r" % rec["counts"])
    finally:
        if os.path.exists(marker):
            os.unlink(marker)
        os.rmdir(d)


def launcher_loss_across_restart(env):
    # The launcher dies while boundaryd is down: the next instance adopts the
    # operation, finds its recorded launcher gone and ends it after the grace.
    env.start()
    p = env.gensee_bg("run", "--", "sleep", "315")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    env.kill9()
    p.kill()
    p.wait()
    check(pids_with_cmdline(b"sleep 315"), "the tree should outlive its launcher so far")
    env.start()

    def ended():
        rec = env.record(opid)
        return rec if rec["lifecycle"]["state"] != "running" else None
    rec = env.wait_for("the adopted operation to end", ended, timeout=15)
    check(rec["lifecycle"]["end_reason"] == "launcher_lost", "lifecycle %r" % rec["lifecycle"])
    check(rec["supervisor"]["adopted"] is True, "supervisor %r" % rec["supervisor"])
    env.wait_for("the tree to die", lambda: not pids_with_cmdline(b"sleep 315"), timeout=10)


# Holds as many client.sock connections as it gets; prints how many stay open.
FLOOD_CONNS = r"""
import json, socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        socks.append(s)
    except OSError:
        s.close()
time.sleep(1)
open_ = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            continue
    except BlockingIOError:
        pass
    except OSError:
        continue
    open_ += 1
print(json.dumps({"open": open_}), flush=True)
time.sleep(120)
"""


def connection_flood_per_uid(env):
    # Issue 9 §7: 300 idle connections from one unprivileged uid. Before:
    # every other user, root's `gensee run` and sensord were locked out.
    env.use_netns()
    env.start()
    flood = subprocess.Popen(["/usr/bin/python3", "-c", FLOOD_CONNS, env.client_sock, "300"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             user=env.uid, group=env.gid, extra_groups=[], env=env.user_env(),
                             cwd="/")
    env.children.append(flood)
    held = json.loads(flood.stdout.readline())["open"]
    st = env.root_call("system.status")["result"]
    budget = st["connection_budget"]
    check(held <= budget["client_max_per_uid"], "one uid holds %d connections" % held)
    check(budget["refused"] >= 300 - budget["client_max_per_uid"], "budget %r" % budget)
    # Another unprivileged user (nobody) is still served ...
    reply = env.user_call(env.client_sock, "system.status", {}, uid=65534)
    check("result" in reply, "another user locked out: %r" % reply)
    # ... and so are root's runs and sensord on boundary.sock.
    reply = call(env.client_sock, "system.status")
    check("result" in reply, "root on client.sock: %r" % reply)
    r = env.gensee("run", "--", "true", as_root=True)
    check(r.returncode == 0, "root gensee run: %d %s" % (r.returncode, r.stderr))
    env.start_sensord()
    flood.kill()
    flood.wait()


def second_instance_refused(env):
    # Issue 9 §7: a second boundaryd on the same state and runtime dirs.
    # Before: it ran, then unlinked both sockets when it exited.
    env.start()
    first = env.root_call("system.status")["result"]["pid"]
    rc, log = env.start(expect_fail=True)
    check(rc == 3, "second instance exit status %r:\n%s" % (rc, log))
    check("already serves state root" in log and "pid %d" % first in log, log)
    for name in ("client.sock", "boundary.sock"):
        check(os.path.exists(os.path.join(env.runtime, name)), "%s was removed" % name)
    st = call(env.client_sock, "system.status")["result"]
    check(st["pid"] == first, "status from %r" % st["pid"])
    r = env.gensee("run", "--", "true")
    check(r.returncode == 0, r.stderr)
    # A second instance on another state root but the same runtime dir: refused too.
    other = tempfile.mkdtemp(prefix="gensee-it-state2.")
    try:
        rc, log = env.start(state=other, expect_fail=True)
        check(rc == 3 and "already serves runtime dir" in log, "%r %s" % (rc, log))
        check(not os.path.exists(os.path.join(other, "operations")), "wrote into %s" % other)
    finally:
        for n in os.listdir(other):
            os.unlink(os.path.join(other, n))
        os.rmdir(other)
    check("result" in call(env.client_sock, "system.status"), "first instance unreachable")


def cgroup_base_recreated(env):
    # Issue 9 §7: the cgroup base disappears (another tool removed it while
    # empty). Before: every later operation.create failed. The base is this
    # case's own (--cgroup-base), so no other instance's is touched.
    # A prepared cell (an empty cgroup in the base) keeps the base from
    # being removed while boundaryd runs; without one (--no-prepared-cell,
    # or a host where none could be made) the base can go.
    base = env.use_private_cgroup_base()
    check(not os.path.exists(base), "%s exists already" % base)
    env.start(args=["--no-prepared-cell"])
    r = env.gensee("run", "--json", "--", "true")
    check(r.returncode == 0, r.stderr)
    rec = env.record(json.loads(r.stdout)["operation_id"])
    check(rec["cgroup"]["path"].startswith(base + "/op_"), "cgroup %r" % rec["cgroup"]["path"])
    st = env.root_call("system.status")["result"]["cgroup"]
    check(st["base"] == env.cgroup_base and st["base_present"] is True, "%r" % st)
    os.rmdir(base)
    st = env.root_call("system.status")["result"]["cgroup"]
    check(st["base_present"] is False, "status does not show the missing base: %r" % st)
    r = env.gensee("run", "--json", "--", "true")
    check(r.returncode == 0, "run after the base vanished: %d %s" % (r.returncode, r.stderr))
    st = env.root_call("system.status")["result"]["cgroup"]
    check(st["base_present"] is True and st["base_recreated"] == 1, "%r" % st)
    b = os.stat(base)
    check(b.st_uid == 0 and (b.st_mode & 0o777) == 0o755, "base mode %o" % b.st_mode)
    env.stop()
    env.start()
    env.wait_for("a prepared cell", lambda: env.root_call("system.status")["result"][
        "prepared_cell"]["ready"])
    try:
        os.rmdir(base)
        raise Failure("the base was removed under a prepared cell")
    except OSError as e:
        check(e.errno == errno.EBUSY, "rmdir of the base: %s" % e)


if __name__ == "__main__":
    main({f.__name__: f for f in (in_operation_reduced_methods, exit_report_only_from_launcher,
                                  host_controls_verified, fault_label_and_rate_limited,
                                  launcher_loss_ends_operation, launcher_loss_across_restart,
                                  connection_flood_per_uid,
                                  second_instance_refused, cgroup_base_recreated)})
