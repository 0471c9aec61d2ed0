"""CLI commands that observe: watch and status."""

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
        # Permission events need root: as the test user the probe must say so.
        if not as_root:
            check(host["fanotify_permission_events"]["available"] is False and
                  "root" in host["fanotify_permission_events"]["detail"], "%r" % host["fanotify_permission_events"])
        else:
            check(host["fanotify_permission_events"]["available"] is True, "%r" % host["fanotify_permission_events"])
    r = env.gensee("status")
    check(r.returncode == 0 and "gensee-boundaryd" in r.stdout and "cgroup_v2" in r.stdout, r.stdout)


def help_version_and_usage_codes(env):
    """--help on every command (stdout, 0), --version on every binary, and usage
    errors that exit 125, never a status a launched command could have."""
    helps = [["--help"], ["run", "--help"], ["run", "network", "--help"], ["run", "fault", "--help"],
             ["status", "--help"], ["watch", "--help"], ["operation", "--help"],
             ["operation", "list", "--help"], ["operation", "inspect", "--help"],
             ["operation", "prune", "--help"], ["timeline", "--help"], ["policy", "--help"], ["debug", "--help"],
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


if __name__ == "__main__":
    main({f.__name__: f for f in (watch_records_descendant_execs, status_reports_host_and_daemons,
                                  help_version_and_usage_codes)})
