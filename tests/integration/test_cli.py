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


if __name__ == "__main__":
    main({f.__name__: f for f in (watch_records_descendant_execs,)})
