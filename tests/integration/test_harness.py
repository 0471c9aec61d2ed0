"""The harness itself: the suite passes from a clone wherever it is.

A natural place for a clone is root's own home, mode 0700, which the test
user cannot traverse. Every binary and script a case runs as that user (or
inside a sandbox) must therefore come from a copy the harness made
(Env.user_binary, Env.tool), never from its place in the tree.
"""

import os
import subprocess
import sys
import tempfile

from harness import BUILD, SOURCE, check, main

# Cases that run something of the tree as the test user: the CLI, a daemon
# refusing a non-root start, a built helper, helper scripts inside a
# sandbox, the CLI inside a tclone run.
AS_USER = (
    ("test_supervisor", "run_exit_code"),
    ("test_protocol", "unsafe_roots_refused"),
    ("test_mediator", "mediator_help_version_usage"),
    ("test_hostctl", "seccomp_other_abis_killed"),
    ("test_escape", "same_uid_processes_unreachable"),
    ("test_network", "allowlist_tcp_udp_v4_v6"),
    ("test_tclone_bridge", "bridge_control"),
)


def private_parent(env):
    """The source and build trees under a 0700 parent (bind mounts, so
    nothing is copied): the cases above still pass from there."""
    parent = tempfile.mkdtemp(prefix="gensee-it-private.", dir="/var/tmp")
    os.chmod(parent, 0o700)
    build = os.path.join(parent, "build")
    source = os.path.join(parent, "source")
    os.mkdir(build)
    os.mkdir(source)
    mounted = []
    try:
        for tree, at in ((BUILD, build), (SOURCE, source)):
            subprocess.run(["mount", "--bind", tree, at], check=True)
            mounted.append(at)
        # The setup really is the one that broke: the test user cannot reach
        # the tree's own CLI there.
        cli = os.path.join(build, "cli", "gensee")
        r = subprocess.run(["test", "-x", cli], user=env.uid, group=env.gid, extra_groups=[])
        check(r.returncode != 0, "the test user can reach %s: not a private parent" % cli)
        sub = dict(os.environ, GENSEE_BUILD_ROOT=build, GENSEE_SOURCE_ROOT=source)
        failed = []
        for script, case in AS_USER:
            r = subprocess.run([sys.executable,
                                os.path.join(source, "tests", "integration", script + ".py"), case],
                               capture_output=True, text=True, timeout=240, env=sub, cwd="/")
            if r.returncode != 0:
                failed.append("%s.%s: rc %d\n%s%s" % (script, case, r.returncode,
                                                       r.stdout[-3000:], r.stderr[-2000:]))
        check(not failed, "from a 0700 parent:\n" + "\n".join(failed))
    finally:
        # Unmounted before anything is removed, and removed with rmdir (never
        # rmtree), so a mount that would not go cannot take the trees with it.
        for m in reversed(mounted):
            if subprocess.run(["umount", m], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", m], capture_output=True)
        for d in (build, source, parent):
            try:
                os.rmdir(d)
            except OSError as e:
                print("cleanup: %s: %s" % (d, e))

if __name__ == "__main__":
    main({"private_parent": private_parent})
