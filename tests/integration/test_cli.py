"""CLI commands: watch, status, help and usage, and ending operations."""

import json
import os
import re
import subprocess
import time

from harness import BUILD, check, main


def watch_records_descendant_execs(env):
    # The test user watches their own tree: root sh -> sleep, sh -> sleep.
    tree = subprocess.Popen(["sh", "-c", "sleep 0.5; sh -c 'sleep 0.6; sleep 0.4'; sleep 0.3"],
                            user=env.uid, group=env.gid, extra_groups=[], cwd="/")
    env.children.append(tree)
    r = env.gensee("watch", "--pid", str(tree.pid), "--duration-seconds", "20", "--json", timeout=30)
    tree.wait(timeout=10)
    check(r.returncode == 0, "watch exited %d: %s" % (r.returncode, r.stderr))
    events = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    execs = [e for e in events if e["type"] == "exec"]
    exits = [e for e in events if e["type"] == "exit"]
    sleeps = [e for e in execs if e["executable"].endswith("/sleep")]
    check(len(sleeps) >= 3, "sleep execs: %r" % execs)
    check(any(e["depth"] == 2 for e in sleeps), "no grandchild exec: %r" % execs)
    check(any(e["pid"] == tree.pid and e["depth"] == 0 for e in execs), "no root event")
    check(any(e["pid"] == tree.pid for e in exits), "root exit missing: %r" % exits)
    check(all(e["start_time_ticks"] > 0 for e in events), "events without start time")
    r = env.gensee("watch", "--pid", "999999999")
    check(r.returncode != 0, "watch of a missing pid succeeded")


def status_reports_host_and_daemons(env):
    # No boundaryd: the report is printed and the exit status says so.
    r = env.gensee("status", "--json")
    check(r.returncode == 3, "rc %d: %s" % (r.returncode, r.stderr))
    out = json.loads(r.stdout)
    check(out["daemons"]["gensee-boundaryd"]["answering"] is False, "answering with no daemon")
    env.start()
    for as_root in (False, True):
        r = env.gensee("status", "--json", as_root=as_root)
        check(r.returncode == 0, r.stderr)
        out = json.loads(r.stdout)
        host = out["host"]
        for key in ("fanotify_permission_events", "seccomp", "cgroup_v2", "nftables", "landlock",
                    "user_namespaces", "bpf_mount", "apparmor", "selinux", "proc_connector", "speculation_backends"):
            check(isinstance(host[key]["available"], bool), "%s: %r" % (key, host.get(key)))
        check(host["cgroup_v2"]["mount"] == env.cgmount, "cgroup mount %r" % host["cgroup_v2"])
        # This host lets unprivileged users make them (the escape suite relies on it).
        check(host["user_namespaces"]["available"] is True, "%r" % host["user_namespaces"])
        bd = out["daemons"]["gensee-boundaryd"]
        check(bd["answering"] is True and bd["status"]["daemon"] == "gensee-boundaryd", "%r" % bd)
        # What counts is what the daemons can do, for any caller: no sensord
        # yet, so no fanotify enforcement, whoever asks; nftables is boundaryd's.
        fan = host["fanotify_permission_events"]
        check(fan["available"] is False and fan["source"] == "daemons" and
              "not connected" in fan["detail"], "%r" % fan)
        check(host["nftables"]["available"] is True and host["nftables"]["source"] == "daemons",
              "%r" % host["nftables"])
        # The caller's own probe is kept beside it: it needs root.
        if not as_root:
            check(fan["caller"]["available"] is False and "root" in fan["caller"]["detail"],
                  "%r" % fan)
        else:
            check(fan["caller"]["available"] is True, "%r" % fan)
    # With sensord: a normal user sees fanotify available, and sensord's own pid.
    env.start_sensord()
    sensord = env.sensord
    r = env.gensee("status", "--json")
    out = json.loads(r.stdout)
    fan = out["host"]["fanotify_permission_events"]
    check(fan["available"] is True and "pid %d" % sensord.pid in fan["detail"], "%r" % fan)
    sd = out["daemons"]["gensee-sensord"]
    check(sd["answering"] is True and sd["status"]["pid"] == sensord.pid, "%r" % sd)
    r = env.gensee("status")
    check("pid %d" % sensord.pid in r.stdout, r.stdout)
    r = env.gensee("status")
    check(r.returncode == 0 and "gensee-boundaryd" in r.stdout and "cgroup_v2" in r.stdout, r.stdout)


def help_version_and_usage_codes(env):
    """--help on every command (stdout, 0), --version on every binary, and usage
    errors that exit 125, never a status a launched command could have."""
    helps = [["--help"], ["run", "--help"], ["run", "network", "--help"], ["run", "fault", "--help"],
             ["status", "--help"], ["watch", "--help"], ["operation", "--help"],
             ["operation", "list", "--help"], ["operation", "inspect", "--help"],
             ["operation", "end", "--help"], ["operation", "prune", "--help"],
             ["timeline", "--help"], ["policy", "--help"], ["debug", "--help"],
             ["debug", "plan", "--help"]]
    for args in helps:
        r = env.gensee(*args)
        check(r.returncode == 0 and "usage" in r.stdout.lower() and r.stderr == "",
              "%r: rc %d out %r err %r" % (args, r.returncode, r.stdout[:200], r.stderr[:200]))
    r = env.gensee("--version")
    check(r.returncode == 0 and re.match(r"^gensee \d+\.\d+\.\d+\n$", r.stdout), r.stdout)
    for d in ("daemons/boundaryd/gensee-boundaryd", "daemons/sensord/gensee-sensord"):
        p = subprocess.run([os.path.join(BUILD, d), "--version"], capture_output=True, text=True)
        check(p.returncode == 0 and p.stdout.startswith(os.path.basename(d) + " "), p.stdout)
        p = subprocess.run([os.path.join(BUILD, d), "--help"], capture_output=True, text=True)
        check(p.returncode == 0 and "usage" in p.stdout, p.stdout)
    for args in (["run", "--bogus", "--", "true"], ["run"], ["nonsense"], ["operation"],
                 ["timeline", "--bogus"], ["status", "--bogus"], ["debug", "nonsense"],
                 ["policy", "get", "linux.nope"], ["operation", "prune"],
                 ["operation", "prune", "--older-than", "3x"], ["operation", "prune", "--keep", "-1"]):
        r = env.gensee(*args)
        check(r.returncode == 125 and r.stderr, "%r: rc %d %s" % (args, r.returncode, r.stderr))
    # --help after the command is the command's, not gensee's.
    env.start()
    r = env.gensee("run", "--", "sh", "-c", "echo \"$1\"; exit 2", "sh", "--help")
    check(r.returncode == 2 and r.stdout == "--help\n", "rc %d %r" % (r.returncode, r.stdout))
    # --quiet: the agent's streams carry only the agent's output.
    r = env.gensee("run", "--quiet", "--", "sh", "-c", "echo out; echo err >&2; exit 4")
    check(r.returncode == 4 and r.stdout == "out\n" and r.stderr == "err\n",
          "rc %d out %r err %r" % (r.returncode, r.stdout, r.stderr))


# A root that records the SIGTERM it got (then exits 7), or one that ignores it.
TRAPS = 'trap "echo term > $1; exit 7" TERM; echo ready > $1.ready; while :; do sleep 0.05; done'
IGNORES = 'trap "" TERM; echo ready > $1.ready; while :; do sleep 0.05; done'


def _marker(env, name):
    d = os.path.join(env.bindir, "marks")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o777)
    path = os.path.join(d, name)
    env.cleanup_dirs.append(d)
    return path


def _opid(p):
    """The operation id a background `gensee run` printed on stderr."""
    line = p.stderr.readline()
    m = re.search(r"operation (op_[0-9a-f]{32})", line)
    check(m is not None, "no operation line: %r" % line)
    return m.group(1)


def timeout_terms_then_kills(env):
    """At the timeout the tree gets SIGTERM and its handler runs; a tree that
    ignores it is killed after the grace. Both are timed_out (124)."""
    env.start()
    mark = _marker(env, "t1")
    r = env.gensee("run", "--timeout", "1", "--kill-grace", "5", "--json", "--",
                   "sh", "-c", TRAPS, "sh", mark)
    check(r.returncode == 124, "rc %d %s" % (r.returncode, r.stderr))
    check(os.path.exists(mark) and open(mark).read() == "term\n",
          "the root never saw SIGTERM (killed outright)")
    rec = env.record(json.loads(r.stdout)["operation_id"])
    t = rec.get("termination") or {}
    check(rec["lifecycle"]["state"] == "timed_out" and t.get("signal") == "SIGTERM" and
          t.get("escalated") is False and t.get("grace_seconds") == 5 and
          t.get("processes_signaled", 0) >= 1, "%r %r" % (rec["lifecycle"], t))
    check(rec["lifecycle"].get("kill_grace_seconds") == 5, "%r" % rec["lifecycle"])
    # Ignored: killed when the grace runs out.
    mark = _marker(env, "t2")
    t0 = time.monotonic()
    r = env.gensee("run", "--timeout", "1", "--kill-grace", "1", "--json", "--",
                   "sh", "-c", IGNORES, "sh", mark)
    check(r.returncode == 124, "rc %d %s" % (r.returncode, r.stderr))
    rec = env.record(json.loads(r.stdout)["operation_id"])
    t = rec.get("termination") or {}
    check(t.get("escalated") is True and t.get("killed_after_grace") is True, "%r" % t)
    check(rec["lifecycle"]["state"] == "timed_out", "%r" % rec["lifecycle"])
    check(time.monotonic() - t0 < 30, "the kill after the grace never came")
    # --kill-grace 0: the kill at once, as before (no termination step).
    r = env.gensee("run", "--timeout", "1", "--kill-grace", "0", "--json", "--",
                   "sh", "-c", IGNORES, "sh", _marker(env, "t3"))
    rec = env.record(json.loads(r.stdout)["operation_id"])
    check(r.returncode == 124 and "termination" not in rec, "%d %r" % (r.returncode, rec.get("termination")))


def operation_end_command(env):
    """`gensee operation end OP` from another terminal of the same user asks
    with SIGTERM; --kill kills at once; another uid cannot end it."""
    env.start()
    mark = _marker(env, "e1")
    p = env.gensee_bg("run", "--", "sh", "-c", TRAPS, "sh", mark)
    opid = _opid(p)
    env.wait_for("the root to start", lambda: os.path.exists(mark + ".ready"))
    # Someone else: refused, and the operation keeps running.
    other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            env.cli, "operation", "end", opid], capture_output=True, text=True,
                           env=env.user_env(), timeout=60)
    check(other.returncode != 0 and p.poll() is None, "another uid ended it: %s" % other.stdout)
    r = env.gensee("operation", "end", opid, "--json")
    check(r.returncode == 0, r.stderr)
    res = json.loads(r.stdout)
    check(res["state"] == "ended" and res["end_reason"] == "ended_by_request", "%r" % res)
    t = res["record"].get("termination") or {}
    check(t.get("signal") == "SIGTERM" and t.get("escalated") is False, "%r" % t)
    check(open(mark).read() == "term\n", "the root's handler did not run")
    out, err = p.communicate(timeout=30)
    check(p.returncode == 7, "launcher rc %d: %s" % (p.returncode, err))
    # --kill: at once, even for a root that would ignore SIGTERM.
    mark = _marker(env, "e2")
    p = env.gensee_bg("run", "--", "sh", "-c", IGNORES, "sh", mark)
    opid = _opid(p)
    env.wait_for("the root to start", lambda: os.path.exists(mark + ".ready"))
    r = env.gensee("operation", "end", opid, "--kill")
    check(r.returncode == 0 and "ended (ended_by_request)" in r.stdout, r.stdout + r.stderr)
    p.communicate(timeout=30)
    check(p.returncode == 128 + 9, "launcher rc %d" % p.returncode)
    check("termination" not in env.record(opid), "a kill is not a termination")
    # Usage errors are 125, as everywhere.
    r = env.gensee("operation", "end", opid, "--kill", "--grace", "2")
    check(r.returncode == 125, "rc %d" % r.returncode)


def list_command_and_timeline(env):
    """operation list shows the command line (quoted, control bytes made
    harmless); every timeline line names its operation; timeline --follow
    prints events recorded after it started and ends with the operation."""
    env.start()
    r = env.gensee("run", "--json", "--", "sh", "-c", "exit 3", "x\x1b[2J", "it's")
    check(r.returncode == 3, r.stderr)
    opid = json.loads(r.stdout[r.stdout.find("{"):])["operation_id"]
    r = env.gensee("operation", "list")
    line = [l for l in r.stdout.splitlines() if opid in l]
    check(line and line[0].endswith("sh -c 'exit 3' 'x?[2J' 'it'\\''s'"), "list: %r" % line)
    check("\x1b" not in r.stdout, "a control byte reached the terminal")
    r = env.gensee("operation", "inspect", opid)
    check("command     sh -c 'exit 3'" in r.stdout, r.stdout)
    tl = env.gensee("timeline", "--operation", opid)
    lines = [l for l in tl.stdout.splitlines() if l.strip()]
    check(lines and all(opid in l for l in lines), "timeline lines without the operation: %r" % lines)
    tl = env.gensee("timeline", "--operation", opid, "--json")
    check(all(json.loads(l)["operation_id"] == opid for l in tl.stdout.splitlines()), tl.stdout)
    # --follow: a process started after the follow is printed, and the follow ends by itself.
    go = _marker(env, "follow-go")
    p = env.gensee_bg("run", "--", "sh", "-c",
                      "while [ ! -e %s ]; do sleep 0.05; done; /bin/sleep 0.3" % go)
    opid = _opid(p)
    f = env.gensee_bg("timeline", "--operation", opid, "--follow")
    time.sleep(1)
    open(go, "w").close()
    p.communicate(timeout=30)
    out, err = f.communicate(timeout=30)
    check(f.returncode == 0, "follow rc %d: %s" % (f.returncode, err))
    check(any("/bin/sleep" in l or "/usr/bin/sleep" in l for l in out.splitlines()) and
          all(opid in l for l in out.splitlines() if l.strip()), "follow: %r" % out)
    check(env.gensee("timeline", "--follow").returncode == 125, "--follow needs --operation")


if __name__ == "__main__":
    main({f.__name__: f for f in (watch_records_descendant_execs, status_reports_host_and_daemons,
                                  help_version_and_usage_codes, timeout_terms_then_kills,
                                  operation_end_command, list_command_and_timeline)})
