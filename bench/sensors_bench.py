"""Sensor benchmarks, run by bench/run (root).

1. Cost of open()+close() for files outside sensitive paths and for allowed
   (observe-rule) files inside one: no listener; gensee-sensord running
   with the opener outside every operation; the opener inside a supervised
   operation; fapolicyd (Debian's, --permissive, its default rules; run as
   root because this VM refuses its uid switch).
2. Time from a rejected connect to its trace-derived fault being recorded,
   and to the program's own successful retry (a lease), over 20 ports.
"""

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COUNT = 5000


def open_tree():
    d = tempfile.mkdtemp(prefix="gensee-bench-open.")
    for cls in ("plain", "secret"):
        os.mkdir(os.path.join(d, cls))
        for i in range(64):
            with open(os.path.join(d, cls, "f%d" % i), "w") as f:
                f.write("x")
    os.chmod(d, 0o755)
    return d


def run_open(argv, env=None, cwd=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    for line in r.stdout.splitlines():
        if line.startswith("{") and "plain_median_ns" in line:
            res = json.loads(line)
            # Timing opens that failed would measure nothing (the sandbox's
            # private /tmp once made every open inside an operation ENOENT).
            if res.get("errors"):
                raise SystemExit("open_bench: %d opens failed: %s" % (res["errors"], argv))
            return res
    raise SystemExit("open_bench failed: %s %s" % (r.stdout, r.stderr))


def bench_open(Env, build):
    ob = os.path.join(build, "bench", "open_bench")
    d = open_tree()
    res = {}
    try:
        res["no_listener"] = run_open([ob, d, str(COUNT)])
        env = Env()
        try:
            env.start()
            env.start_sensord()
            home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
            with open(os.path.join(home, "policy.json"), "w") as f:
                json.dump({"linux": {"fanotify": {"enabled": True, "paths": ["**/.env"],
                                                  "rules": [{"path": d + "/secret/**",
                                                             "action": "observe"}]}}}, f)
            os.chmod(home, 0o755)
            uenv = env.user_env({"HOME": home, "GENSEE_HOME": home})
            # A supervised run puts the marks in place; measure while another runs.
            holder = subprocess.Popen([env.cli, "run", "--sandbox", "linux", "--deny-all",
                                       "--linux-fanotify", "--", "sleep", "600"], env=uenv,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            env.children.append(holder)
            env.wait_for("holder", lambda: env.running_ops())
            time.sleep(0.5)
            res["sensord_outside_operation"] = run_open([ob, d, str(COUNT)])
            # The tree is the run's workspace: the mount view binds it back
            # (it is under /tmp) and Landlock lets it be read.
            res["sensord_inside_operation"] = run_open(
                [env.cli, "run", "--sandbox", "linux", "--deny-all", "--linux-fanotify", "--",
                 ob, d, str(COUNT)], env=uenv, cwd=d)
            # End the holder through boundaryd, which then removes its table and cgroup.
            for op in env.running_ops():
                env.root_call("operation.end", {"operation_id": op, "kill": True})
        finally:
            env.cleanup()
        fapd = shutil.which("fapolicyd")
        conf = "/etc/fapolicyd/fapolicyd.conf"
        if fapd and shutil.which("fagenrules") and os.path.exists(conf):
            # Debian ships rules.d; the daemon reads the compiled file.
            subprocess.run(["fagenrules"], capture_output=True, timeout=60)
            # This VM refuses fapolicyd's switch to its own uid ("Cannot change
            # to uid"): run it as root for the measurement, restore the file after.
            saved = open(conf).read()
            with open(conf, "w") as f:
                f.write(saved.replace("uid = fapolicyd", "uid = root").replace(
                    "gid = fapolicyd", "gid = root"))
            # --debug-deny keeps it in the foreground without printing every
            # allowed open; --permissive so the default deny-execute rule only logs.
            p = subprocess.Popen([fapd, "--debug-deny", "--permissive"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            try:
                time.sleep(4)  # trust database load
                if p.poll() is None:
                    res["fapolicyd_permissive"] = run_open([ob, d, str(COUNT)])
                else:
                    res["fapolicyd_permissive"] = {"error": "fapolicyd exited: " + p.stderr.read()[-300:]}
            finally:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                with open(conf, "w") as f:
                    f.write(saved)
        else:
            res["fapolicyd_permissive"] = {"error": "fapolicyd is not installed (peer missing)"}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return res


def parse_ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp() * 1000


def bench_fault(Env, top):
    env = Env()
    try:
        env.use_netns()
        env.start()
        env.start_sensord()
        ports = list(range(8000, 8020))
        env.serve(env.netns, *["tcp,203.0.113.40,%d" % p for p in ports])
        probe = os.path.join(env.bindir, "fault_probe.py")
        shutil.copy(os.path.join(top, "bench", "fault_probe.py"), probe)
        os.chmod(probe, 0o755)
        r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--lease-scope",
                       "203.0.113.40,tcp,8000-8019", "--max-lease-ttl", "60", "--json", "--",
                       "/usr/bin/python3", probe, "203.0.113.40", ",".join(map(str, ports)),
                       timeout=300)
        # --json: stdout is the run's JSON alone; the probe's line is on stderr.
        rows = json.loads([l for l in r.stderr.splitlines() if l.startswith("[")][-1])
        opid = json.loads(r.stdout)["operation_id"]
        faults = [json.loads(l) for l in open(os.path.join(env.state, "network-operations",
                                                           opid, "faults.jsonl"))]
        fault_ms, retry_ms = [], []
        for row in rows:
            f = [x for x in faults if x["source"] == "nft_trace" and
                 x["capability"]["port"] == row["port"]]
            if f:
                fault_ms.append(parse_ts(f[0]["time"]) - row["t0_ms"])
            if row["retry_ok_ms"] is not None:
                retry_ms.append(row["retry_ok_ms"])
        return {"ports": len(rows), "faults_recorded": len(fault_ms),
                "retries_ok": len(retry_ms),
                "reject_to_fault_median_ms": statistics.median(fault_ms) if fault_ms else None,
                "reject_to_retry_ok_median_ms": statistics.median(retry_ms) if retry_ms else None}
    finally:
        env.cleanup()


def main(Env, build, top, results):
    o = bench_open(Env, build)
    results["open_cost"] = o
    base = o["no_listener"]
    print("open()+close() (median of %d, ns; ratio to no listener):" % COUNT)
    for name, row in o.items():
        if "error" in row:
            print("  %-28s %s" % (name, row["error"]))
            continue
        print("  %-28s plain %7d ns (x%.2f)   sensitive, allowed %7d ns (x%.2f)" % (
            name, row["plain_median_ns"], row["plain_median_ns"] / base["plain_median_ns"],
            row["secret_median_ns"], row["secret_median_ns"] / base["secret_median_ns"]))
    f = bench_fault(Env, top)
    results["trace_fault"] = f
    print("rejected connect -> trace fault recorded: median %.1f ms; -> retry succeeded: "
          "median %.1f ms (%d/%d ports)" % (f["reject_to_fault_median_ms"] or -1,
                                             f["reject_to_retry_ok_median_ms"] or -1,
                                             f["retries_ok"], f["ports"]))
