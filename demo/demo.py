#!/usr/bin/env python3
"""The Gensee demo: what the system can do so far, on this machine, for real.

Starts gensee-boundaryd from the build tree on a private runtime dir and
state root, runs supervised agents as an unprivileged user through the
gensee CLI, prints what happened, and stops the daemon it started.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
os.environ["GENSEE_BUILD_ROOT"] = build
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Env, pids_with_cmdline  # noqa: E402


def say(text):
    print("\n\033[1m== %s\033[0m" % text, flush=True)


def show(cmd, r):
    print("$ gensee " + " ".join(cmd))
    sys.stdout.write(r.stdout)
    sys.stdout.write(r.stderr)
    print("(exit status %d)" % r.returncode, flush=True)


def main():
    env = Env()
    try:
        say("Starting gensee-boundaryd (state %s, runtime %s)" % (env.state, env.runtime))
        env.start()
        print("boundaryd pid %d; the CLI runs as the unprivileged user %s (uid %d)"
              % (env.proc.pid, "gensee-test", env.uid))

        say("Host capabilities and daemons")
        r = env.gensee("status")
        show(["status"], r)

        say("A supervised agent: its exit status passes through")
        cmd = ["run", "--", "sh", "-c", 'echo "agent running as $(id -un) in $GENSEE_OPERATION_ID"; exit 3']
        show(cmd, env.gensee(*cmd))

        say("A runaway agent: workers, a double-forked daemon, a 3 s timeout")
        script = ("sleep 600 & (sleep 601 &) ; sh -c 'sleep 602' & "
                  "echo 'agent: started workers, now hanging' >&2; sleep 603")
        cmd = ["run", "--timeout", "3", "--json", "--", "sh", "-c", script]
        t0 = time.monotonic()
        r = env.gensee(*cmd)
        out = json.loads(r.stdout)
        print("$ gensee " + " ".join(cmd[:5]) + " sh -c '...'")
        print(r.stderr.strip())
        print("exit status %d after %.1f s, state %s" % (r.returncode, time.monotonic() - t0,
                                                         out["state"]))
        survivors = sum(len(pids_with_cmdline(b"sleep %d" % n)) for n in range(600, 604))
        print("processes of the tree still alive: %d" % survivors)

        say("Its record: every descendant, with (pid, start time), and what was killed")
        show(["operation", "inspect", out["operation_id"]],
             env.gensee("operation", "inspect", out["operation_id"]))

        say("Watching a running tree from outside: exec events of every descendant")
        tree = subprocess.Popen(["sh", "-c", "sleep 0.3; /bin/true; sh -c 'sleep 0.2; ls / >/dev/null'; sleep 0.3"],
                                user=env.uid, group=env.gid, extra_groups=[])
        r = env.gensee("watch", "--pid", str(tree.pid), "--duration-seconds", "5")
        tree.wait()
        show(["watch", "--pid", str(tree.pid), "--duration-seconds", "5"], r)

        say("A sandboxed agent: mount view, Landlock, seccomp, an nftables envelope, fanotify")
        env.stop()
        env.use_netns()          # all traffic stays in a namespace of its own
        env.start()
        env.start_sensord()
        env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081", "tcp,203.0.113.40,8443")
        home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
        os.makedirs(os.path.join(home, ".ssh"))
        with open(os.path.join(home, ".ssh", "id_ed25519"), "w") as f:
            f.write("-----BEGIN OPENSSH PRIVATE KEY-----\n")
        project = os.path.join(home, "project")
        os.makedirs(project)
        with open(os.path.join(project, ".env"), "w") as f:
            f.write("API_TOKEN=demo\n")
        os.makedirs(os.path.join(home, ".gensee"))
        with open(os.path.join(home, ".gensee", "policy.json"), "w") as f:
            f.write('{"linux": {"fanotify": {"paths": ["**/.env"]}}}\n')
        for d, _, files in os.walk(home):
            os.chown(d, env.uid, env.gid)
            for n in files:
                os.chown(os.path.join(d, n), env.uid, env.gid)
        os.chmod(home, 0o755)
        probe = env.tool("netprobe.py")
        agent = ("unshare -U true 2>/dev/null && echo 'unshare: allowed' || echo 'unshare: refused (seccomp)'; "
                 "cat ~/.ssh/id_ed25519 >/dev/null 2>&1 && echo 'ssh key: read' || echo 'ssh key: hidden (mount view)'; "
                 "cat .env >/dev/null 2>&1 && echo '.env: read' || echo '.env: refused (fanotify)'; "
                 "(echo x >> ~/.bashrc) 2>/dev/null && echo '~/.bashrc: written' || echo '~/.bashrc: refused (Landlock)'; "
                 "kill -0 $PPID 2>/dev/null && echo 'launcher: signalled' || echo 'launcher: out of reach (Landlock scope)'; "
                 "python3 %s tcp,192.0.2.1,8080 tcp,192.0.2.1,8081; "
                 "python3 %s --retry tcp,203.0.113.40,8443 1.5" % (probe, probe))
        cmd = ["run", "--sandbox", "linux", "--linux-fanotify", "--allow-net", "192.0.2.1,tcp,8080",
               "--lease-scope", "203.0.113.40,tcp,8443", "--max-lease-ttl", "30", "--", "sh", "-c", "..."]
        r = env.gensee(*(cmd[:-1] + [agent]), env={"HOME": home}, cwd=project)
        print("$ gensee " + " ".join(cmd))
        sys.stdout.write(r.stdout)
        sys.stdout.write(r.stderr)
        print("(the first connect to 203.0.113.40:8443 was rejected; its nftables trace became a\n"
              " capability fault, the lease scope approved it, and the agent's own retry got through)")
        opid = r.stderr.split("operation ")[1].split(":")[0]
        say("Its timeline: execs, the file decision, faults, leases, blocked packets")
        show(["timeline", "--operation", opid], env.gensee("timeline", "--operation", opid))

        say("All operations of this user")
        show(["operation", "list"], env.gensee("operation", "list"))

        say("Fail closed: with boundaryd stopped, nothing runs unsupervised")
        env.stop()
        cmd = ["run", "--", "echo", "this must not print"]
        show(cmd, env.gensee(*cmd))
    finally:
        env.cleanup()
    say("Done: the daemon was stopped and its private state removed")


if __name__ == "__main__":
    main()
