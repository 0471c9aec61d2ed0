"""CLI commands that observe: watch and status."""

import json
import subprocess
import time

from harness import check, main


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
    r = env.gensee("status", "--json")
    check(r.returncode == 0, r.stderr)
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


if __name__ == "__main__":
    main({f.__name__: f for f in (watch_records_descendant_execs, status_reports_host_and_daemons)})
