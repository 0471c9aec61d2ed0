"""The units as shipped, under systemd as PID 1.

This host has no systemd as PID 1, so the case boots one: systemd-nspawn
runs the host's own OS through an overlay whose upper layer is a tmpfs
(nothing it writes reaches the host), a private network namespace and the unified cgroup hierarchy,
with the build installed by `meson install --destdir` bound in at its
configured paths. Inside, a oneshot unit enables and starts the units with
systemctl, waits until boundaryd answers and sensord has registered, runs
gensee as the unprivileged test user through systemd-run (status, a plain
run, a denied and an allowed connection, a fanotify denial in a workspace
under /tmp), stops the units and powers the container off. The results come
back as one JSON file in a directory bound in read-write; they are checked
here, on the host.

Everything the case makes is removed even when it fails: the container
(bounded by a timeout, then killed), its cgroups (the container runs in
cgroups of this case's own), the DESTDIR and the results directory.
"""

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

from harness import SOURCE, TEST_USER, Failure, check, main
from test_install import Installed
from test_tclone import loop_btrfs

# The units this boot starts (the HTTP mediator's is verified by test_install,
# not booted here yet).
DAEMONS = ("gensee-boundaryd", "gensee-sensord", "gensee-tcloned")

BOOT_TIMEOUT = 420  # the whole boot, check and poweroff; it takes well under a minute idle

INSIDE = r'''
import json, os, pwd, shutil, subprocess, sys, time

OUT = "/gensee-it/results.json"
USER = sys.argv[1]
res = {}


def run(name, argv, timeout=120, **kw):
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
        res[name] = {"rc": r.returncode, "out": r.stdout, "err": r.stderr,
                     "ms": int((time.monotonic() - t0) * 1000)}
    except Exception as e:
        res[name] = {"rc": None, "out": "", "err": repr(e)}
    return res[name]


def as_user(name, argv, cwd="/", env=None):
    # The test user, with nothing of root's: setpriv, not systemd-run (this
    # minimal boot has no D-Bus for it to talk to).
    pw = pwd.getpwnam(USER)
    e = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/nonexistent",
         "USER": USER}
    e.update(env or {})
    return run(name, ["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                      "--clear-groups", "--"] + argv, cwd=cwd, env=e)


def user_tree(path, files):
    pw = pwd.getpwnam(USER)
    os.makedirs(path, exist_ok=True)
    for name, text in files.items():
        p = os.path.join(path, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    for d, _, fs in os.walk(path):
        os.chown(d, pw.pw_uid, pw.pw_gid)
        for n in fs:
            os.chown(os.path.join(d, n), pw.pw_uid, pw.pw_gid)


try:
    res["cgroup"] = open("/proc/self/mountinfo").read()
    # The container's / is an overlayfs, which cannot be an overlay's upper
    # layer: tcloned's authority root gets a tmpfs (on a host it is a real
    # filesystem). The unit itself makes the directory (StateDirectory=).
    os.makedirs("/var/lib/gensee-boundary", mode=0o700, exist_ok=True)
    run("auth_tmpfs", ["mount", "-t", "tmpfs", "-o", "mode=0700,nosuid,nodev",
                       "gensee-it-auth", "/var/lib/gensee-boundary"])
    run("verify", ["systemd-analyze", "verify", "gensee-boundaryd.service",
                   "gensee-sensord.service", "gensee-tcloned.service"])
    run("enable", ["systemctl", "enable", "--now", "gensee-boundaryd.service",
                   "gensee-sensord.service", "gensee-tcloned.service"])
    # Wait (bounded) until boundaryd answers and sensord has registered.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = run("status_root", ["gensee", "status", "--json"])
        try:
            if r["rc"] == 0 and json.loads(r["out"])["daemons"]["gensee-sensord"].get(
                    "answering"):
                break
        except (ValueError, KeyError):
            pass
        time.sleep(0.2)
    run("is_enabled", ["systemctl", "is-enabled", "gensee-boundaryd.service",
                       "gensee-sensord.service", "gensee-tcloned.service"])
    props = "Id,ActiveState,SubState,MainPID,NRestarts,FragmentPath"
    for d in ("gensee-boundaryd", "gensee-sensord", "gensee-tcloned"):
        r = run("show_" + d, ["systemctl", "show", "-p", props, d + ".service"])
        pid = dict(l.split("=", 1) for l in r["out"].splitlines() if "=" in l).get("MainPID")
        if pid and pid != "0":
            run("proc_" + d, ["cat", "/proc/%s/status" % pid])
    as_user("status_user", ["gensee", "status", "--json"])
    as_user("run_true", ["gensee", "run", "--json", "--", "/bin/true"])
    as_user("run_false", ["gensee", "run", "--", "/bin/false"])

    # The network boundary: one allowed and one denied destination.
    run("addr", ["ip", "addr", "add", "192.0.2.1/24", "dev", "lo"])
    run("lo_up", ["ip", "link", "set", "lo", "up"])
    srv = subprocess.Popen(["/usr/bin/python3", "/gensee-it/netserve.py", "tcp,192.0.2.1,8081",
                            "tcp,192.0.2.1,8082"], stdout=subprocess.PIPE, text=True)
    res["netserve"] = srv.stdout.readline().strip()
    as_user("net", ["gensee", "run", "--sandbox", "linux", "--allow-net", "192.0.2.1,tcp,8081",
                    "--json", "--", "/usr/bin/python3", "/gensee-it/netprobe.py",
                    "tcp,192.0.2.1,8081", "tcp,192.0.2.1,8082"])
    run("net_outside", ["/usr/bin/python3", "/gensee-it/netprobe.py", "tcp,192.0.2.1,8082"])
    srv.kill()
    srv.wait()

    # fanotify through sensord: a rootless rule read in a workspace under /tmp
    # (which boundaryd and sensord must see as the host's /tmp).
    home, ws = "/var/tmp/gensee-it-home", "/tmp/gensee-it-ws"
    user_tree(home, {"policy.json": json.dumps(
        {"linux": {"fanotify": {"enabled": True, "paths": ["**/.env"]}}})})
    user_tree(ws, {".env": "TOKEN=1\n", "notes.txt": "hello\n"})
    env = {"HOME": home, "GENSEE_HOME": home}
    for name, f in (("fan_denied", ".env"), ("fan_allowed", "notes.txt")):
        as_user(name, ["gensee", "run", "--sandbox", "linux", "--deny-all", "--linux-fanotify",
                       "--json", "--", "cat", os.path.join(ws, f)], cwd=ws, env=env)

    # tcloned under its unit: a tclone source as the user, on a snapshot of
    # a workspace, in its tmux session; list, diff, exec, delete.
    tws = "/var/tmp/gensee-it-tcws"
    user_tree(tws, {"shared.txt": "base\n", "agent.sh":
                    "id -u > uid.txt; hostname > host.txt; echo ok > started.txt\n"
                    "exec sleep 600\n"})
    tenv = {"HOME": "/nonexistent", "TERM": "dumb"}
    src = as_user("tc_start", ["gensee", "run", "--runtime", "tclone", "--json", "--", "sh",
                               "agent.sh"], cwd=tws, env=tenv)
    try:
        rid = json.loads(src["out"])["run_id"]
    except (ValueError, KeyError):
        rid = None
    if rid:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = as_user("tc_diff", ["gensee", "run", "diff", rid, "--json"], cwd=tws, env=tenv)
            if r["rc"] == 0 and "started.txt" in r["out"]:
                break
            time.sleep(0.2)
        as_user("tc_list", ["gensee", "run", "list", "--json"], cwd=tws, env=tenv)
        as_user("tc_exec", ["gensee", "run", "exec", rid, "--", "cat", "started.txt", "uid.txt",
                            "host.txt"], cwd=tws, env=tenv)
        # The agent's own confinement under the unit: /var/tmp is writable
        # to the user (1777) but not to the agent (Landlock: the workspace,
        # its private /tmp and its run directory only).
        as_user("tc_landlock", ["gensee", "run", "exec", rid, "--", "sh", "-c",
                                "echo x > /var/tmp/gensee-it-agent-wrote && echo wrote || "
                                "echo denied; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status"],
                cwd=tws, env=tenv)
        as_user("tc_fork", ["gensee", "run", "fork", rid, "--json"], cwd=tws, env=tenv)
        res["tc_ws_untouched"] = {"rc": 0 if not os.path.exists(
            os.path.join(tws, "started.txt")) else 1, "out": "", "err": ""}
        as_user("tc_delete", ["gensee", "run", "delete", "--all"], cwd=tws, env=tenv)
        as_user("tc_list_after", ["gensee", "run", "list", "--json"], cwd=tws, env=tenv)
    # On a terminal the CLI attaches to the agent's tmux session; script(1)
    # gives it one. The agent prints a mark and ends, which ends the attach.
    as_user("tc_attach", ["timeout", "60", "script", "-qec",
                          "gensee run --runtime tclone -- sh -c "
                          "'echo TC-ATTACHED-$((6*7)); sleep 1'", "/dev/null"],
            cwd=tws, env={"HOME": "/nonexistent", "TERM": "xterm"})
    as_user("tc_attach_list", ["gensee", "run", "list", "--json"], cwd=tws, env=tenv)
    as_user("tc_delete_attach", ["gensee", "run", "delete", "--all"], cwd=tws, env=tenv)
    run("tc_status", ["gensee", "status", "--json"])
    # sandbox_tcloned under the unit: its sets and its filter, as the kernel says.
    run("tc_sandbox", ["sh", "-c", "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' "
                       "/proc/$(systemctl show -p MainPID --value gensee-tcloned)/status"])

    # The btrfs backend under the unit: the authority root on a btrfs the
    # host made (a loop file, bound in at /gensee-btrfs; the container gets
    # no loop devices), so forks are subvolume snapshots made through the
    # unit's sandbox.
    run("tcb_stop", ["systemctl", "stop", "gensee-tcloned.service"])
    run("tcb_umount", ["umount", "/var/lib/gensee-boundary"])
    run("tcb_mount", ["mount", "--bind", "/gensee-btrfs", "/var/lib/gensee-boundary"])
    os.chmod("/var/lib/gensee-boundary", 0o700)
    run("tcb_unit", ["systemctl", "start", "gensee-tcloned.service"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = run("tcb_status", ["gensee", "status", "--json"])
        try:
            if json.loads(r["out"])["daemons"]["gensee-tcloned"].get("answering"):
                break
        except (ValueError, KeyError):
            pass
        time.sleep(0.2)
    src = as_user("tcb_start", ["gensee", "run", "--runtime", "tclone", "--json", "--", "sh",
                                "agent.sh"], cwd=tws, env=tenv)
    try:
        rid = json.loads(src["out"])["run_id"]
    except (ValueError, KeyError):
        rid = None
    if rid:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = as_user("tcb_diff", ["gensee", "run", "diff", rid, "--json"], cwd=tws, env=tenv)
            if r["rc"] == 0 and "started.txt" in r["out"]:
                break
            time.sleep(0.2)
        as_user("tcb_fork", ["gensee", "run", "fork", rid, "--json"], cwd=tws, env=tenv)
        run("tcb_subvols", ["btrfs", "subvolume", "list", "/var/lib/gensee-boundary"])
        as_user("tcb_delete", ["gensee", "run", "delete", "--all"], cwd=tws, env=tenv)
        run("tcb_subvols_after", ["btrfs", "subvolume", "list", "/var/lib/gensee-boundary"])

    run("stop", ["systemctl", "stop", "gensee-tcloned.service", "gensee-sensord.service",
                 "gensee-boundaryd.service"])
    run("after_stop", ["systemctl", "show", "-p", "Id,ActiveState,Result",
                       "gensee-boundaryd.service", "gensee-sensord.service",
                       "gensee-tcloned.service"])
    run("journal", ["journalctl", "--no-pager", "-o", "short-monotonic", "-u",
                    "gensee-boundaryd.service", "-u", "gensee-sensord.service",
                    "-u", "gensee-tcloned.service"])
finally:
    with open(OUT + ".tmp", "w") as f:
        json.dump(res, f)
    os.rename(OUT + ".tmp", OUT)
'''

CHECK_UNIT = """[Unit]
Description=gensee integration check (test_systemd.py)
After=basic.target
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/usr/bin/python3 /gensee-it/inside.py %s
TimeoutStartSec=360
StandardOutput=journal+console
"""


class CgroupPair:
    """A v2 cgroup and (on a hybrid host) a name=systemd v1 cgroup of this case,
    for systemd-nspawn to put its supervisor and payload in; killed and removed
    at the end."""

    def __init__(self, env):
        self.name = "gensee-it-nspawn-%d" % os.getpid()
        self.dirs = [os.path.join(env.cgmount, self.name)]
        if os.path.isfile("/sys/fs/cgroup/systemd/cgroup.procs") and \
                env.cgmount != "/sys/fs/cgroup":
            self.dirs.append(os.path.join("/sys/fs/cgroup/systemd", self.name))
        for d in self.dirs:
            os.mkdir(d)

    def enter(self):
        """In the child before exec: move into both cgroups."""
        for d in self.dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write("0")

    def remove(self):
        v2 = self.dirs[0]
        if os.path.isdir(v2):
            try:
                with open(os.path.join(v2, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
            for _ in range(500):
                with open(os.path.join(v2, "cgroup.events")) as f:
                    if "populated 0" in f.read():
                        break
                time.sleep(0.02)
        for d in self.dirs[1:]:  # v1: no cgroup.kill; kill what is left by pid
            for sub, _, _ in os.walk(d):
                try:
                    for pid in open(os.path.join(sub, "cgroup.procs")).read().split():
                        os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        for d in self.dirs:
            for sub, _, _ in sorted(os.walk(d), key=lambda x: -x[0].count("/")):
                for _ in range(100):
                    try:
                        os.rmdir(sub)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.05)
        return [d for d in self.dirs if os.path.exists(d)]


def units_run_under_systemd(env):
    nspawn = shutil.which("systemd-nspawn")
    check(nspawn, "systemd-nspawn is missing (package systemd-container)")
    inst = Installed(env)
    d = inst.d
    work = tempfile.mkdtemp(prefix="gensee-it-nspawn.", dir="/var/tmp")
    env.cleanup_dirs.append(work)
    os.chmod(work, 0o755)
    with open(os.path.join(work, "inside.py"), "w") as f:
        f.write(INSIDE)
    for tool in ("netprobe.py", "netserve.py"):
        shutil.copy(os.path.join(SOURCE, "tests", "integration", tool), work)
    with open(os.path.join(work, "gensee-it-check.service"), "w") as f:
        f.write(CHECK_UNIT % TEST_USER)
    for n in os.listdir(work):
        os.chmod(os.path.join(work, n), 0o644)

    # The install at its configured paths: the prefix tree, the units, the
    # tmpfiles entry. The prefix must not be the OS's own /usr.
    prefix = os.path.dirname(d["sbindir"])
    check(prefix not in ("/usr", "/"), "the nspawn case needs a build with a prefix other "
          "than /usr (this one: %s)" % prefix)
    binds = ["--bind-ro=%s:%s" % (inst.path(prefix), prefix)]
    for n in DAEMONS:
        unit = os.path.join(d["unitdir"], n + ".service")
        binds.append("--bind-ro=%s:%s" % (inst.path(unit), unit))
    conf = os.path.join(d["tmpfilesdir"], "gensee.conf")
    binds.append("--bind-ro=%s:%s" % (inst.path(conf), conf))
    binds.append("--bind-ro=%s:/etc/systemd/system/gensee-it-check.service" % os.path.join(
        work, "gensee-it-check.service"))
    binds.append("--bind=%s:/gensee-it" % work)
    # tcloned's btrfs backend inside: a btrfs the host mounts (below), bound in.
    btrfs_dir = os.path.join(work, "btrfs")
    os.mkdir(btrfs_dir)
    binds.append("--bind=%s:/gensee-btrfs" % btrfs_dir)
    # A sanitizer build: LeakSanitizer stops the world with ptrace at exit,
    # which the units' filter (~@debug) refuses by design, so the daemons
    # would fail their clean stop. Leak checking is left to the other suites
    # (a drop-in of this test only; the units themselves are as installed).
    syms = subprocess.run(["readelf", "-W", "--dyn-syms", inst.path(d["sbindir"],
                                                                 DAEMONS[0])],
                          capture_output=True, text=True, timeout=60).stdout
    if "__asan_init" in syms:
        for n in DAEMONS:
            dropin = os.path.join(work, n + "-sanitizer.conf")
            with open(dropin, "w") as f:
                f.write("[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0\n")
            os.chmod(dropin, 0o644)
            binds.append("--bind-ro=%s:/etc/systemd/system/%s.service.d/sanitizer.conf" % (
                dropin, n))

    # nspawn refuses --volatile=overlay on "/" itself: the root is an overlay
    # of the host's / with its upper layer on a tmpfs (so the layers do not
    # overlap), made in a mount namespace of its own that dies with nspawn.
    for sub in ("root", "upper"):
        os.mkdir(os.path.join(work, sub))
    overlay = ('set -e; mount -t tmpfs -o mode=0755 gensee-it-upper "$1/upper"; '
               'mkdir "$1/upper/u" "$1/upper/w"; '
               'mount -t overlay gensee-it-root -o lowerdir=/,upperdir="$1/upper/u",'
               'workdir="$1/upper/w" "$1/root"; shift; exec "$@"')
    machine = "gensee-it-%d" % os.getpid()
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", overlay, "sh", work,
            nspawn, "--quiet", "--directory=" + os.path.join(work, "root"), "--boot",
            "--register=no", "--keep-unit", "--machine=" + machine, "--private-network",
            "--console=pipe",
            # nspawn's own filter refuses these to a container; the unit's
            # filter is what this case is about, so let them through to it.
            "--system-call-filter=fanotify_init fanotify_mark open_by_handle_at "
            "landlock_create_ruleset landlock_add_rule landlock_restrict_self"] + binds + [
            "systemd.unit=gensee-it-check.service", "systemd.firstboot=off",
            "systemd.show_status=false"]
    log_path = os.path.join(work, "nspawn.log")
    cg = CgroupPair(env)
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(loop_btrfs(btrfs_dir))
        with open(log_path, "w") as log:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, preexec_fn=cg.enter,
                                 env=dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1",
                                          SYSTEMD_LOG_LEVEL="notice"))
            try:
                rc = p.wait(timeout=BOOT_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)  # nspawn asks the container to halt
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                raise Failure("the container did not finish in %d s:\n%s" % (
                    BOOT_TIMEOUT, open(log_path).read()[-6000:]))
    finally:
        left = cg.remove()
        stack.close()
        if left:
            print("cleanup: could not remove %s" % left)
    check(not left, "the container's cgroups are left: %r" % left)
    boot_log = open(log_path).read()
    results = os.path.join(work, "results.json")
    check(os.path.exists(results), "no results (nspawn exit %d):\n%s" % (rc, boot_log[-6000:]))
    with open(results) as f:
        res = json.load(f)

    for name, r in sorted(res.items()):
        if isinstance(r, dict):
            print("inside: %-16s rc %r %s ms  %s" % (name, r["rc"], r.get("ms"),
                                                     (r["out"] + r["err"]).strip()
                                                 .replace("\n", " | ")[:300]))

    def step(name):
        check(name in res, "step %s did not run; nspawn log:\n%s" % (name, boot_log[-4000:]))
        return res[name]

    def ok(name):
        r = step(name)
        check(r["rc"] == 0, "%s: rc %r\n%s\n%s\n--- daemons' journal ---\n%s" % (
            name, r["rc"], r["out"], r["err"], res.get("journal", {}).get("out", "")))
        return r

    # systemd as PID 1 in the container, with the unified hierarchy.
    check(any(l.split(" - ")[1].startswith("cgroup2 ") and l.split()[4] == "/sys/fs/cgroup"
              for l in res["cgroup"].splitlines() if " - " in l),
          "no cgroup2 at /sys/fs/cgroup in the container:\n" + res["cgroup"])
    verify = ok("verify")
    check(not [l for l in (verify["out"] + verify["err"]).splitlines() if "gensee" in l],
          "systemd-analyze verify inside: %s%s" % (verify["out"], verify["err"]))
    ok("enable")
    check(step("is_enabled")["out"].split() == ["enabled"] * len(DAEMONS),
          "is-enabled: %r" % res["is_enabled"]["out"])
    for n in DAEMONS:
        show = dict(l.split("=", 1) for l in ok("show_" + n)["out"].splitlines() if "=" in l)
        check(show.get("ActiveState") == "active" and show.get("SubState") == "running",
              "%s: %r\n%s" % (n, show, res.get("journal", {}).get("out", "")))
        check(show.get("FragmentPath") == os.path.join(d["unitdir"], n + ".service"),
              "%s loaded from %r" % (n, show.get("FragmentPath")))
        status = dict(l.split(":", 1) for l in ok("proc_" + n)["out"].splitlines() if ":" in l)
        # The unit's sandbox is on the daemon: no_new_privs and a seccomp filter.
        check(status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2",
              "%s: NoNewPrivs %s Seccomp %s" % (n, status["NoNewPrivs"], status["Seccomp"]))
    # gensee status as root and as the user: both daemons answer, sensord
    # has every sensor (fanotify needs the syscalls the unit now allows).
    for name in ("status_root", "status_user"):
        st = json.loads(ok(name)["out"])
        check(st["daemons"]["gensee-boundaryd"]["answering"] is True, "%s: %r" % (name, st))
        sd = st["daemons"]["gensee-sensord"]
        check(sd.get("answering") is True, "%s: sensord %r" % (name, sd))
    sensors = json.loads(res["status_root"]["out"])["daemons"]["gensee-sensord"]["sensors"]
    # The proc connector exists only in the initial network namespace, and the
    # container has a private one: sensord runs without it here.
    for s in ("fanotify", "nft_trace"):
        check(s in sensors, "sensord under its unit lacks %s: %r\n%s" % (
            s, sensors, res.get("journal", {}).get("out", "")))
    run = json.loads(ok("run_true")["out"])
    check(run.get("operation_id", "").startswith("op_"), "run: %r" % run)
    # The operation's cgroup is in the container's own v2 hierarchy.
    cgroup = run["record"]["cgroup"]
    check(cgroup["path"] == "/sys/fs/cgroup/gensee/" + run["operation_id"] and
          cgroup["attachment"] in ("attached", "released") and
          cgroup["cleanup"]["state"] == "removed", "the operation's cgroup: %r" % cgroup)
    check(step("run_false")["rc"] == 1, "gensee run -- false: %r" % res["run_false"])
    # One allowed and one denied connection through the per-operation table.
    check(step("netserve") == "ready", "netserve: %r" % res["netserve"])
    # --json: stdout is the run's JSON alone; the probe's line is on stderr.
    net = [l for l in ok("net")["err"].splitlines() if l.startswith("{")]
    check(net, "no probe line: %r" % res["net"])
    probes = json.loads(net[-1])
    check(probes.get("tcp,192.0.2.1,8081") == "ok", "allowed connection failed: %r" % probes)
    check(probes.get("tcp,192.0.2.1,8082") not in (None, "ok"), "denied connection: %r" % probes)
    check(json.loads(ok("net_outside")["out"]).get("tcp,192.0.2.1,8082") == "ok",
          "the denied port is not reachable outside gensee either")
    # fanotify: the workspace's .env is denied, another file is not.
    denied = step("fan_denied")
    check(denied["rc"] not in (0, None) and "TOKEN" not in denied["out"] + denied["err"],
          "fanotify did not deny .env: %r\n%s" % (denied, res.get("journal", {}).get("out")))
    check("Permission denied" in denied["err"] or "Operation not permitted" in denied["err"],
          "cat's error: %r" % denied["err"])
    check("hello" in ok("fan_allowed")["err"], "notes.txt: %r" % res["fan_allowed"])
    # tcloned: its socket answers the user, a tclone source runs under it.
    journal = res.get("journal", {}).get("out", "")
    tc = json.loads(ok("tc_status")["out"])["daemons"]["gensee-tcloned"]
    sb = dict(l.split(":\t") for l in ok("tc_sandbox")["out"].splitlines())
    # CAP_CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER KILL SETGID SETUID SYS_ADMIN: 0x2000ef.
    check(sb.get("CapEff") == sb.get("CapBnd") == "00000000002000ef" and
          sb.get("NoNewPrivs") == "1" and sb.get("Seccomp") == "2",
          "tcloned under its unit: %r" % sb)
    check(tc.get("answering") is True, "tcloned under its unit: %r\n%s" % (tc, journal))
    src = json.loads(ok("tc_start")["out"])
    rid = src["run_id"]
    check(src["role"] == "source" and src["operation_id"].startswith("op_"),
          "tclone source: %r" % src)
    check(isinstance(src.get("confinement", {}).get("landlock"), int),
          "Landlock is not applied to the agent under the unit: %r" % src.get("confinement"))
    check('"started.txt"' in ok("tc_diff")["out"], "the agent did not run: %r\n%s" % (
        res["tc_diff"], journal))
    runs = json.loads(ok("tc_list")["out"])["runs"]
    check([r["run_id"] for r in runs] == [rid] and runs[0]["state"] == "running",
          "run list --json: %r" % runs)
    uid = pwd.getpwnam(TEST_USER).pw_uid
    check(ok("tc_exec")["out"].split() == ["ok", str(uid), "gensee-tclone"],
          "run exec: %r" % res["tc_exec"])
    ll = ok("tc_landlock")["out"].split()
    check(ll == ["denied", "NoNewPrivs:", "1", "Seccomp:", "2"], "the agent's confinement: %r" %
          res["tc_landlock"])
    fk = json.loads(ok("tc_fork")["out"])
    check(fk["source_run_id"] == rid and len(fk["forks"]) == 1 and
          fk["forks"][0]["operation_id"] != src["operation_id"], "fork under systemd: %r" % fk)
    ok("tc_ws_untouched")
    ok("tc_delete")
    check(json.loads(ok("tc_list_after")["out"])["runs"] == [], "runs after delete: %r" %
          res["tc_list_after"])
    # The interactive form: attached through a pty, the agent's output came
    # through tmux, and the run ended when the agent did.
    check("TC-ATTACHED-42" in ok("tc_attach")["out"], "attach: %r" % res["tc_attach"])
    att = json.loads(ok("tc_attach_list")["out"])["runs"]
    check(len(att) == 1 and att[0]["state"] == "exited", "the attached run: %r" % att)
    ok("tc_delete_attach")
    # The btrfs backend under the unit: source and fork are subvolumes, gone after delete.
    tcb = json.loads(ok("tcb_status")["out"])["daemons"]["gensee-tcloned"]
    check(tcb.get("answering") is True, "tcloned on btrfs: %r\n%s" % (tcb, journal))
    bsrc = json.loads(ok("tcb_start")["out"])
    check(bsrc["backend"] == "btrfs", "source backend under the unit: %r" % bsrc)
    check('"started.txt"' in ok("tcb_diff")["out"], "the btrfs agent did not run: %r" %
          res["tcb_diff"])
    bfk = json.loads(ok("tcb_fork")["out"])["forks"][0]
    ids = [bsrc["btrfs"]["ws_subvolume_id"], bfk["btrfs"]["ws_subvolume_id"],
           bfk["btrfs"]["base_subvolume_id"]]
    check(all(isinstance(i, int) for i in ids) and len(set(ids)) == 3,
          "subvolume ids %r" % ids)
    listed = ok("tcb_subvols")["out"]
    check(listed.count(" path ") == 4 and bfk["run_id"] + "/ws" in listed,
          "subvolumes under the unit: %r" % listed)
    ok("tcb_delete")
    check(ok("tcb_subvols_after")["out"].strip() == "", "subvolumes left: %r" %
          res["tcb_subvols_after"])
    ok("stop")
    after = res["after_stop"]["out"]
    n = len(DAEMONS)
    check(after.count("ActiveState=inactive") == n and after.count("Result=success") == n,
          "after stop: %r" % after)


if __name__ == "__main__":
    main({f.__name__: f for f in (units_run_under_systemd,)})
