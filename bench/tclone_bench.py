"""gensee-tcloned benchmarks, run by bench/run (root), or alone:
`GENSEE_BUILD_ROOT=build python3 bench/tclone_bench.py`.

On a 40,000-file workspace (400 directories of 100 files, 200 bytes each),
median of 3 each, all in the same run:
1. source start (the workspace snapshot, the namespaces, the operation, the
   tmux session) against `cp -a` of the workspace, the peer every naive
   fork pays;
2. fork latency (`gensee run fork SRC --json`, the source having changed 100
   files) against `cp -a` of the workspace;
3. merge time of a fork that changed 100 files and added 100
   (`gensee run merge --filesystem`) against `cp -a` of the workspace.
Ratios are gensee / cp -a: below 1 is faster than copying.

The three are measured twice in the same run: with the default backend on
the host's filesystem (overlay where the kernel has it), and with the btrfs
backend, its authority root on a fresh btrfs (a 1 GiB sparse loop file,
unmounted and detached afterwards), where a fork is two subvolume
snapshots. cp -a is measured once per round, from the same workspace.
With the default backend each round also measures the Podman (runc) peer,
a bare `podman run --rm IMG /bin/true` from a private store and a local
image (tests/integration/podimage.py), and a podman source start and fork.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DIRS, FILES = 400, 100
AGENT = r"""
case "$GENSEE_TCLONE_APPROACH" in
  edit) i=0; while [ $i -lt 100 ]; do echo "fork $i" > "d$i/f0"; echo new > "d$i/new"; i=$((i+1)); done ;;
  "") i=0; while [ $i -lt 100 ]; do echo "source $i" > "d$((i+200))/f1"; i=$((i+1)); done ;;
esac
echo x > "done-$GENSEE_RUN_ID"
exec sleep 3600
"""


def make_workspace(uid, gid):
    ws = tempfile.mkdtemp(prefix="gensee-bench-ws.", dir="/var/tmp")
    blob = "x" * 199 + "\n"
    for d in range(DIRS):
        p = os.path.join(ws, "d%d" % d)
        os.mkdir(p)
        for f in range(FILES):
            with open(os.path.join(p, "f%d" % f), "w") as fh:
                fh.write(blob)
    with open(os.path.join(ws, "agent.sh"), "w") as fh:
        fh.write(AGENT)
    subprocess.run(["chown", "-R", "%d:%d" % (uid, gid), ws], check=True)
    os.chmod(ws, 0o755)
    return ws


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return (time.monotonic() - t0) * 1000, out


def cp_a(ws):
    dst = tempfile.mkdtemp(prefix="gensee-bench-cp.", dir="/var/tmp")
    shutil.rmtree(dst)
    ms, _ = timed(lambda: subprocess.run(["cp", "-a", ws, dst], check=True))
    shutil.rmtree(dst)
    return ms


def podman_true(store, image):
    """The peer: a bare `podman run --rm IMG /bin/true` (runc, cgroupfs, no network).
    The ulimits are the caller's own (a host without CAP_SYS_RESOURCE refuses podman's
    raised defaults), as tcloned gives its containers."""
    import resource
    nf = resource.getrlimit(resource.RLIMIT_NOFILE)
    npc = [min(x, 32768) for x in resource.getrlimit(resource.RLIMIT_NPROC)]
    # A cgroup parent of the bench's own (removed after), not podman's shared libpod_parent.
    ms, r = timed(lambda: store.podman("run", "--rm", "--network", "none",
                                       "--cgroup-parent", "/gensee-bench-%d" % os.getpid(),
                                       "--ulimit",
                                       "nofile=%d:%d" % nf, "--ulimit", "nproc=%d:%d" % tuple(npc),
                                       "--entrypoint", "/bin/true", image))
    return ms


def rounds(env, build, root, ws, label, store=None, image=None):
    """Three rounds of source start, fork, merge on a tcloned whose authority
    root is root; cp -a of ws in each round. With a podman store, also a bare
    podman start and a podman (runc) source start and fork in each round."""
    argv = [os.path.join(build, "daemons", "tcloned", "gensee-tcloned"),
            "--authority-root", root, "--runtime-dir", env.runtime]
    if store is not None:
        argv += ["--podman", "/usr/bin/podman", "--podman-image", image]
    tc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=store.env if store is not None else None)
    try:
        sock = os.path.join(env.runtime, "tclone.sock")
        for _ in range(300):
            if os.path.exists(sock):
                break
            time.sleep(0.05)

        def g(*args):
            r = env.gensee(*args, cwd=ws, timeout=600)
            if r.returncode not in (0, 1):
                raise SystemExit("gensee %s: %s" % (" ".join(args), r.stderr))
            return json.loads(r.stdout)

        def wait_done(run):
            for _ in range(1200):
                d = g("run", "diff", run, "--json")
                if any(c["path"] == "done-" + run for c in d["changes"]):
                    return
                time.sleep(0.25)
            raise SystemExit("agent of %s did not finish" % run)

        rows = {"source_start": [], "fork": [], "merge": [], "cp_a": []}
        if store is not None:
            rows.update({"podman_run_true": [], "podman_source_start": [], "podman_fork": []})
        for _ in range(3):
            rows["cp_a"].append(cp_a(ws))
            ms, src = timed(lambda: g("run", "--runtime", "tclone", "--json", "--", "sh",
                                      "agent.sh"))
            if src.get("backend") != label and label != "default":
                raise SystemExit("backend %r, wanted %s" % (src.get("backend"), label))
            backend = src.get("backend")
            rows["source_start"].append(ms)
            sid = src["run_id"]
            wait_done(sid)
            ms, fk = timed(lambda: g("run", "fork", sid, "--approach", "edit", "--json"))
            rows["fork"].append(ms)
            fid = fk["forks"][0]["run_id"]
            wait_done(fid)
            ms, m = timed(lambda: g("run", "merge", fid, "--into", sid, "--filesystem", "--json"))
            if m.get("status") != "merged":
                raise SystemExit("merge did not merge: %r" % m)
            rows["merge"].append(ms)
            g("run", "delete", "--all")
            if store is not None:
                # Podman (runc), same round: the bare start, then a podman source and fork.
                rows["podman_run_true"].append(podman_true(store, image))
                ms, src = timed(lambda: g("run", "--runtime", "tclone", "--podman", "--json",
                                          "--", "sh", "agent.sh"))
                rows["podman_source_start"].append(ms)
                sid = src["run_id"]
                wait_done(sid)
                ms, fk = timed(lambda: g("run", "fork", sid, "--approach", "edit", "--json"))
                rows["podman_fork"].append(ms)
                wait_done(fk["forks"][0]["run_id"])
                g("run", "delete", "--all")
        med = {k: statistics.median(v) for k, v in rows.items()}
        out = {"files": DIRS * FILES, "backend": backend, "median_ms": med,
               "ratio_to_cp_a": {k: med[k] / med["cp_a"] for k in ("source_start", "fork",
                                                                   "merge")}}
        print("tclone (%s backend) on a %d-file workspace (median of 3, ms; ratio to cp -a):" % (
            backend, DIRS * FILES))
        print("  cp -a %.0f   source start %.0f (x%.2f)   fork %.0f (x%.2f)   merge %.0f (x%.2f)" % (
            med["cp_a"], med["source_start"], out["ratio_to_cp_a"]["source_start"], med["fork"],
            out["ratio_to_cp_a"]["fork"], med["merge"], out["ratio_to_cp_a"]["merge"]))
        if store is not None:
            out["podman_ratio_to_podman_run_true"] = {
                k: med[k] / med["podman_run_true"] for k in ("podman_source_start", "podman_fork",
                                                             "fork")}
            out["podman_ratio_to_cp_a"] = {k: med[k] / med["cp_a"] for k in (
                "podman_run_true", "podman_source_start", "podman_fork")}
            pr = out["podman_ratio_to_podman_run_true"]
            print("  podman run --rm IMG /bin/true %.0f   podman source start %.0f (x%.2f)   "
                  "podman fork %.0f (x%.2f)   our-launcher fork x%.2f of a podman start" % (
                      med["podman_run_true"], med["podman_source_start"],
                      pr["podman_source_start"], med["podman_fork"], pr["podman_fork"],
                      pr["fork"]))
        return out
    finally:
        tc.terminate()
        tc.wait()
        with open("/proc/self/mountinfo") as f:
            mnts = [l.split()[4] for l in f if l.split()[4].startswith(root + "/")]
        for m in sorted(mnts, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], check=False)


def main(Env, build, top, results):
    env = Env()
    root = tempfile.mkdtemp(prefix="gensee-bench-tc.")
    os.chmod(root, 0o700)
    broot = tempfile.mkdtemp(prefix="gensee-bench-tcb.")
    img = "/var/tmp/gensee-bench-btrfs.%d.img" % os.getpid()
    loop, mounted, ws, store = None, False, None, None
    try:
        env.start()
        from podimage import Store
        store = Store(tag="gensee-tclone-bench")
        image = store.build()
        ws = make_workspace(env.uid, env.gid)
        out = rounds(env, build, root, ws, "default", store, image)
        results["tclone"] = out
        with open(img, "wb") as f:
            f.truncate(1024 * 1024 * 1024)
        subprocess.run(["mkfs.btrfs", "-q", "-f", img], check=True)
        loop = subprocess.run(["losetup", "--find", "--show", img], check=True,
                              capture_output=True, text=True).stdout.strip()
        subprocess.run(["mount", "-t", "btrfs", "-o", "nosuid,nodev", loop, broot], check=True)
        mounted = True
        os.chmod(broot, 0o700)
        results["tclone_btrfs"] = rounds(env, build, broot, ws, "btrfs")
        return out
    finally:
        if mounted:
            subprocess.run(["umount", broot], check=False)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        if os.path.exists(img):
            os.unlink(img)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(broot, ignore_errors=True)
        if ws:
            shutil.rmtree(ws, ignore_errors=True)
        if store is not None:
            store.cleanup()
            import glob
            for top in glob.glob("/sys/fs/cgroup/*/gensee-bench-%d" % os.getpid()) + glob.glob(
                    "/sys/fs/cgroup/gensee-bench-%d" % os.getpid()):
                for sub, dirs, _ in os.walk(top, topdown=False):
                    for n in dirs:
                        try:
                            os.rmdir(os.path.join(sub, n))
                        except OSError:
                            pass
                try:
                    os.rmdir(top)
                except OSError:
                    pass
        env.cleanup()


if __name__ == "__main__":
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.environ.get("GENSEE_BUILD_ROOT") or os.path.join(top, "build")
    os.environ["GENSEE_BUILD_ROOT"] = build
    sys.path.insert(0, os.path.join(top, "tests", "integration"))
    from harness import Env
    main(Env, build, top, {})
