"""Operation supervisor: supervised runs, exit codes, timeouts, lineage."""

import json
import os
import stat
import time

from harness import Failure, check, main, pids_with_cmdline


def run_exit_code(env):
    env.start()
    # The caller's own GENSEE_OPERATION_ID is replaced (once), the rest of
    # its environment kept; an operation without a CONNECT egress leaves
    # the caller's proxy variables alone.
    r = env.gensee("run", "--json", "--", "sh", "-c",
                   'echo "op=$GENSEE_OPERATION_ID" >&2; env >&2; exit 7',
                   env={"GENSEE_OPERATION_ID": "op_forged", "HTTPS_PROXY": "http://mine:1",
                        "KEEP_ME": "kept"})
    check(r.returncode == 7, "exit status %d, want 7: %s" % (r.returncode, r.stderr))
    out = json.loads(r.stdout)
    opid = out["operation_id"]
    check(("op=" + opid) in r.stderr, "child did not see GENSEE_OPERATION_ID=%s: %s" % (opid, r.stderr))
    check(r.stderr.count("GENSEE_OPERATION_ID=") == 1 and "op_forged" not in r.stderr,
          "the caller's GENSEE_OPERATION_ID reached the agent: %s" % r.stderr)
    check("KEEP_ME=kept" in r.stderr and "HTTPS_PROXY=http://mine:1" in r.stderr, r.stderr)
    check(out["state"] == "exited", "state %r" % out["state"])
    check(out["exit"] == {"reported_by": "launcher", "code": 7, "signal": None}, "exit %r" % out["exit"])
    rec = env.record(opid)
    check(rec["source"]["uid"] == env.uid, "record uid %r" % rec["source"]["uid"])
    check(rec["root_process"]["start_time_ticks"] > 0, "no root start time")
    check(rec["cgroup"]["cleanup"]["state"] == "removed", "cleanup %r" % rec["cgroup"])
    check(not os.path.exists(rec["cgroup"]["path"]), "cgroup left behind")
    path = os.path.join(env.state, "operations", opid, "record.json")
    st = os.stat(path)
    check(st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600, "record mode %o uid %d" % (st.st_mode, st.st_uid))
    # A plain run without --json exits with the child's status, too.
    r = env.gensee("run", "--", "/bin/false")
    check(r.returncode == 1, "false exited %d" % r.returncode)
    r = env.gensee("run", "--", "/nonexistent/cmd")
    check(r.returncode == 127, "missing command exited %d" % r.returncode)
    # The user sees their operations; list and inspect through the CLI.
    r = env.gensee("operation", "list", "--json")
    ids = [o["operation_id"] for o in json.loads(r.stdout)]
    check(opid in ids and len(ids) == 3, "list %r" % ids)
    r = env.gensee("operation", "inspect", opid)
    check(r.returncode == 0 and opid in r.stdout and "exited" in r.stdout, r.stdout + r.stderr)


def timeout_kills_tree(env):
    env.start()
    # The root forks a background child, a double-forked orphan that leaves
    # the root's subtree (reparented away), and a nested shell; all outlive
    # the timeout.
    script = 'sleep 301 & (sleep 302 &) ; sh -c "sleep 303" & exec sleep 304'
    t0 = time.monotonic()
    # --kill-grace 0: the kill itself (SIGTERM first is test_cli.timeout_terms_then_kills).
    r = env.gensee("run", "--timeout", "2", "--kill-grace", "0", "--json", "--", "sh", "-c",
                   script, timeout=30)
    elapsed = time.monotonic() - t0
    check(r.returncode == 124, "exit status %d, want 124: %s" % (r.returncode, r.stderr))
    check(elapsed < 15, "took %.1fs" % elapsed)
    out = json.loads(r.stdout)
    check(out["state"] == "timed_out", "state %r" % out["state"])
    for n in (b"sleep 301", b"sleep 302", b"sleep 303", b"sleep 304"):
        check(not pids_with_cmdline(n), "%r survived the timeout" % n)
    rec = env.record(out["operation_id"])
    lin = rec["lineage"]
    check(len(lin) >= 5, "lineage has %d entries: %r" % (len(lin), lin))
    check(all(e["start_time_ticks"] > 0 and e["exited_at"] for e in lin), "lineage %r" % lin)
    killed = [e for e in lin if e["killed_by_supervisor"]]
    check(len(killed) >= 4, "killed %r" % killed)
    exes = {e["executable"] for e in lin}
    check(any(x.endswith("/sleep") for x in exes), "no sleep in %r" % exes)
    orphan = [e for e in lin if e["ppid"] != rec["root_process"]["pid"] and e["pid"] != rec["root_process"]["pid"]]
    check(orphan, "the double-forked orphan is missing from lineage: %r" % lin)
    check(rec["lifecycle"]["end_reason"] == "timeout", "reason %r" % rec["lifecycle"])
    check(rec["cgroup"]["cleanup"]["state"] == "removed", "cleanup %r" % rec["cgroup"])
    check(rec["cgroup"]["cleanup"]["killed_leftovers"] >= 4, "killed count %r" % rec["cgroup"])
    check(not os.path.exists(rec["cgroup"]["path"]), "cgroup left behind")


def leftovers_killed_at_root_exit(env):
    env.start()
    r = env.gensee("run", "--json", "--", "sh", "-c", "(sleep 305 &) ; exit 0")
    check(r.returncode == 0, "exit %d %s" % (r.returncode, r.stderr))
    out = json.loads(r.stdout)
    rec = env.wait_for("cleanup", lambda: (lambda x: x if x["cgroup"]["cleanup"]["state"] != "pending" else None)(env.record(out["operation_id"])))
    check(not pids_with_cmdline(b"sleep 305"), "leftover survived the root's exit")
    check(rec["cgroup"]["cleanup"]["killed_leftovers"] >= 1, "leftover not recorded: %r" % rec["cgroup"])
    check(any(e["killed_by_supervisor"] for e in rec["lineage"]), "no killed entry: %r" % rec["lineage"])


def end_by_request(env):
    env.start()
    p = env.gensee_bg("run", "--json", "--", "sleep", "306")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    r = env.gensee("operation", "inspect", opid, "--json")
    check(json.loads(r.stdout)["lifecycle"]["state"] == "running", r.stdout)
    reply = env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    check("result" in reply and reply["result"]["state"] == "ended", "end: %r" % reply)
    rc, out, err = env.finish(p)
    check(rc == 137, "rc %d: %s" % (rc, err))
    check(json.loads(out)["exit"]["signal"] == 9, out)


def no_supervisor_no_run(env):
    # Without boundaryd, run refuses; the command never starts.
    marker = os.path.join(env.bindir, "ran")
    r = env.gensee("run", "--", "sh", "-c", "touch " + marker, as_root=True)
    check(r.returncode == 125, "exit %d" % r.returncode)
    check("unavailable" in r.stderr, r.stderr)
    check(not os.path.exists(marker), "the command ran unsupervised")


def nested_run_refused(env):
    # A supervised process cannot lift a child out of its own operation.
    env.start()
    r = env.gensee("run", "--", env.cli, "run", "--", "true")
    check(r.returncode == 125, "nested run exited %d: %s" % (r.returncode, r.stderr))
    check("conflict" in r.stderr, r.stderr)


def not_child_refused(env):
    env.start()
    # pid 1 is nobody's child; the caller's own child with a wrong start time.
    reply = env.user_call(env.client_sock, "operation.create", {"pid": 1, "start_time_ticks": 1})
    check(reply.get("error", {}).get("code") in ("identity_mismatch", "not_caller_child"), "%r" % reply)
    code = r"""
import json, os, socket, struct, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(5); os._exit(0)
start = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[19])
out = {}
# A child's start time may be left out (boundaryd reads it); that must not
# open the way to a process that is not the caller's live child.
gone = os.fork()
if gone == 0:
    os._exit(0)
os.waitpid(gone, 0)
for name, params in (("wrong_start", {"pid": pid, "start_time_ticks": start + 1}),
                     ("grandparent", {"pid": os.getppid(), "start_time_ticks": 0}),
                     ("no_start_grandparent", {"pid": os.getppid()}),
                     ("no_start_init", {"pid": 1}),
                     ("no_start_reaped", {"pid": gone})):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    d = json.dumps({"proto": 1, "id": 1, "method": "operation.create", "params": params}).encode()
    s.sendall(struct.pack(">I", len(d)) + d)
    n = struct.unpack(">I", s.recv(4))[0]; buf = b""
    while len(buf) < n: buf += s.recv(n - len(buf))
    out[name] = json.loads(buf)
os.kill(pid, 9); os.waitpid(pid, 0)
print(json.dumps(out))
"""
    import subprocess
    r = subprocess.run(["/usr/bin/python3", "-c", code, env.client_sock], capture_output=True,
                       text=True, timeout=30, user=env.uid, group=env.gid, extra_groups=[],
                       env=env.user_env(), cwd="/")
    check(r.returncode == 0, r.stderr)
    out = json.loads(r.stdout)
    check(out["wrong_start"]["error"]["code"] == "identity_mismatch", "%r" % out)
    check(out["grandparent"]["error"]["code"] in ("identity_mismatch", "not_caller_child"), "%r" % out)
    for name in ("no_start_grandparent", "no_start_init", "no_start_reaped"):
        check(out[name].get("error", {}).get("code") == "not_caller_child", "%s: %r" % (name, out))
    # Root adopting a tree it did not start must name its start time.
    tree = subprocess.Popen(["sleep", "30"])
    env.children.append(tree)
    reply = env.root_call("operation.create", {"pid": tree.pid, "adopt_existing": True,
                                               "action_class": "watch"})
    check(reply.get("error", {}).get("code") == "invalid_params" and
          "start_time_ticks" in reply["error"]["message"], "%r" % reply)
    check(env.running_ops() == [], "an operation was created")


def users_see_only_their_own(env):
    env.start()
    r = env.gensee("run", "--json", "--", "true", as_root=True)
    root_op = json.loads(r.stdout)["operation_id"]
    reply = env.user_call(env.client_sock, "operation.inspect", {"operation_id": root_op})
    check(reply.get("error", {}).get("code") == "not_found", "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.end", {"operation_id": root_op, "kill": True})
    check(reply.get("error", {}).get("code") == "not_found", "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.observe", {"operation_id": root_op})
    check(reply.get("error", {}).get("code") == "not_found", "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.list", {})
    check(reply["result"]["operations"] == [], "%r" % reply)
    reply = env.root_call("operation.inspect", {"operation_id": root_op})
    check("result" in reply, "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.inspect", {"operation_id": "../../etc"})
    check(reply.get("error", {}).get("code") == "invalid_params", "%r" % reply)


def short_root_recorded_as_what_it_ran(env):
    # The root lives 50 ms, half of boundaryd's poll interval: only the
    # launcher's operation.observe after the exec lets boundaryd see it.
    env.start()
    for _ in range(3):
        r = env.gensee("run", "--json", "--", "/bin/sleep", "0.05")
        check(r.returncode == 0, r.stderr)
        opid = json.loads(r.stdout)["operation_id"]
        rec = env.record(opid)
        check(rec["root_process"]["executable"] == "/usr/bin/sleep",
              "root recorded as %r" % rec["root_process"]["executable"])
        check(any(p.get("executable") == "/usr/bin/sleep" for p in rec["lineage"]),
              "lineage %r" % rec["lineage"])
    # Once it has ended there is nothing to look at, and that is no error.
    reply = env.user_call(env.client_sock, "operation.observe", {"operation_id": opid})
    check(reply.get("result") == {"observed": False}, "%r" % reply)


def end_after_idle_close(env):
    # The launcher keeps the create's connection for observe and end; a run
    # longer than boundaryd's idle timeout finds it closed. The end must
    # still be reported (on a new connection), and no SIGPIPE may kill the
    # launcher on the way.
    env.start(args=["--idle-timeout-seconds", "1"])
    r = env.gensee("run", "--json", "--", "sh", "-c", "sleep 2.5; exit 3")
    check(r.returncode == 3, "exit status %d: %s" % (r.returncode, r.stderr))
    out = json.loads(r.stdout)
    check(out["state"] == "exited" and out["exit"]["code"] == 3, "%r" % out)
    check("cannot report" not in r.stderr, r.stderr)
    rec = env.record(out["operation_id"])
    check(rec["lifecycle"]["exit"]["reported_by"] == "launcher", "%r" % rec["lifecycle"])
    check(rec["cgroup"]["cleanup"]["state"] == "removed", "%r" % rec["cgroup"])
    log = open(env.logs[-1]).read()
    check("idle for 1s" in log,
          "the connection was not closed as idle, so nothing was tested:\n" + log[-2000:])


def per_user_limit(env):
    env.start()
    for i in range(64):
        env.gensee_bg("run", "--", "sleep", "307")
    env.wait_for("64 operations", lambda: len(env.running_ops()) == 64, timeout=60)
    r = env.gensee("run", "--", "true")
    check(r.returncode == 125 and "limit_exceeded" in r.stderr, "%d %s" % (r.returncode, r.stderr))
    # Root is not limited.
    r = env.gensee("run", "--", "true", as_root=True)
    check(r.returncode == 0, r.stderr)


if __name__ == "__main__":
    main({f.__name__: f for f in (run_exit_code, timeout_kills_tree, leftovers_killed_at_root_exit,
                                  end_by_request, no_supervisor_no_run, nested_run_refused,
                                  not_child_refused, users_see_only_their_own, per_user_limit,
                                  short_root_recorded_as_what_it_ran, end_after_idle_close)})
