"""Network boundary: real connections inside network namespaces the test
creates, real nftables tables, real kernel verdicts."""

import json
import re
import os
import signal
import subprocess
import tempfile
import time

from harness import Failure, check, main

REFUSED = {"ECONNREFUSED", "EHOSTUNREACH", "EPERM", "EACCES", "ENETUNREACH"}


def run_sandboxed(env, net_args, cmd, as_root=False, timeout=120, extra_env=None):
    """gensee run --sandbox linux ... --json -- cmd: (rc, child stdout lines, run json, stderr)."""
    r = env.gensee("run", "--sandbox", "linux", *net_args, "--json", "--", *cmd,
                   as_root=as_root, timeout=timeout, env=extra_env)
    # With --json stdout is the run's JSON alone; the child's stdout is on stderr.
    try:
        summary = json.loads(r.stdout)
    except ValueError:
        raise Failure("no run summary (rc %d): %r %s" % (r.returncode, r.stdout, r.stderr))
    child = [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("gensee")]
    return r.returncode, child, summary, r.stderr


def probe_cmd(env, *targets):
    return ["/usr/bin/python3", env.tool("netprobe.py")] + list(targets)


def gensee_tables(env, ns=None):
    return env.op_tables(ns)


def allowlist_tcp_udp_v4_v6(env):
    env.use_netns()
    env.start()
    targets = ["tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081", "udp,192.0.2.1,5353",
               "tcp,2001:db8::1,8080", "tcp,2001:db8::1,8081", "udp,2001:db8::1,5353",
               "udp,198.51.100.1,5353", "tcp,198.51.100.1,8080"]
    env.serve(env.netns, *targets)
    allow = ["192.0.2.1,tcp,8080", "2001:db8::1,tcp,8080", "198.51.100.1,udp,5353",
             "2001:db8::1,udp,5353"]
    args = []
    for a in allow:
        args += ["--allow-net", a]
    rc, lines, summary, err = run_sandboxed(env, args, probe_cmd(env, *targets))
    check(rc == 0, "rc %d: %s" % (rc, err))
    got = json.loads(lines[0])
    want_ok = {"tcp,192.0.2.1,8080", "tcp,2001:db8::1,8080", "udp,198.51.100.1,5353",
               "udp,2001:db8::1,5353"}
    for t in targets:
        if t in want_ok:
            check(got[t] == "ok", "%s should be allowed: %r" % (t, got))
        else:
            check(got[t] in REFUSED, "%s should be refused at once: %r" % (t, got))
    # A process outside the operation is unaffected, in the same namespace.
    outside = env.probe_outside(env.netns, *targets)
    check(all(v == "ok" for v in outside.values()), "outside: %r" % outside)
    # Evidence: the envelope was copied into the operation record; the table
    # is gone with the operation; rejects were counted and reported.
    rec = summary["record"]
    check(rec["envelope"]["generation"] >= 1 and len(rec["envelope"]["grants"]) == 4,
          "envelope %r" % rec["envelope"])
    check(rec["counts"]["network"]["blocked_packets"] >= 4, "counts %r" % rec["counts"])
    check("NetworkBlocked" in err, err)
    check(gensee_tables(env) == [], "table left behind: %r" % gensee_tables(env))
    tl = env.gensee("timeline", "--operation", summary["operation_id"], "--json")
    events = [json.loads(l) for l in tl.stdout.splitlines()]
    kinds = [e.get("kind") for e in events]
    check("NetworkBlocked" in kinds and "exec" in kinds, "timeline %r" % kinds)
    # One NetworkBlocked per rejected destination tuple, from the kernel's
    # own per-element counters; nothing for an allowed one.
    blocked = {"%s,%s,%d" % (e["protocol"], e["destination"], e["port"]): e
               for e in events if e.get("kind") == "NetworkBlocked" and "protocol" in e}
    want_blocked = set(targets) - want_ok
    check(set(blocked) == want_blocked, "blocked %r, want %r" % (sorted(blocked), sorted(want_blocked)))
    check(all(e["packets"] >= 1 and e["bytes"] > 0 and e["reason"] == "outside_envelope"
              for e in blocked.values()), "%r" % blocked)
    bd = rec["counts"]["network"]["blocked_destinations"]
    check(bd["destinations"] == len(want_blocked) and len(bd["top"]) == len(want_blocked), "%r" % bd)
    check("tcp/8081" in err and "192.0.2.1" in err, "run end names the destinations: %s" % err)
    # ...and says how to allow each; the option it gives does allow it.
    hint = "to allow it: --allow-net 192.0.2.1,tcp,8081"
    check(hint in err, "no --allow-net hint: %s" % err)
    rc, lines, summary, err = run_sandboxed(env, args + hint.split(": ")[1].split(" "),
                                            probe_cmd(env, "tcp,192.0.2.1,8081"))
    check(rc == 0 and json.loads(lines[0])["tcp,192.0.2.1,8081"] == "ok",
          "the hinted option did not allow it: %r %s" % (lines, err))


def grants_are_tuples(env):
    env.use_netns()
    env.start()
    targets = ["tcp,192.0.2.1,8443", "udp,198.51.100.1,5353", "udp,192.0.2.1,5353",
               "tcp,198.51.100.1,8443"]
    env.serve(env.netns, *targets)
    rc, lines, summary, err = run_sandboxed(
        env, ["--allow-net", "192.0.2.1,tcp,8443", "--allow-net", "198.51.100.1,udp,5353"],
        probe_cmd(env, *targets))
    got = json.loads(lines[0])
    check(got["tcp,192.0.2.1,8443"] == "ok" and got["udp,198.51.100.1,5353"] == "ok", "%r" % got)
    check(got["udp,192.0.2.1,5353"] in REFUSED, "(A, udp, 53) allowed: %r" % got)
    check(got["tcp,198.51.100.1,8443"] in REFUSED, "(B, tcp, 443) allowed: %r" % got)


def first_action_is_held(env):
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8081")
    # The very first thing the process does is connect; the policy is
    # already on its cgroup, so even that is refused.
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--", "/bin/bash", "-c",
                   "exec 3<>/dev/tcp/192.0.2.1/8081")
    check(r.returncode != 0 and "refused" in r.stderr.lower(), "rc %d: %s" % (r.returncode, r.stderr))
    check(env.probe_outside(env.netns, "tcp,192.0.2.1,8081")["tcp,192.0.2.1,8081"] == "ok", "outside")


def lease_then_expiry(env):
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,203.0.113.40,8443", "tcp,203.0.113.40,9999", "tcp,127.0.0.1,8443")
    args = ["--deny-all", "--lease-scope", "203.0.113.40,tcp,8443", "--lease-scope",
            "127.0.0.1,tcp,8443", "--max-lease-ttl", "3"]
    rc, lines, summary, err = run_sandboxed(
        env, args, ["/usr/bin/python3", env.tool("netprobe.py"), "--lease", env.cli,
                    "tcp,203.0.113.40,8443", "2"])
    check(rc == 0, "rc %d %s" % (rc, err))
    got = json.loads(lines[0])
    check(got["before"] in REFUSED, "before the lease: %r" % got)
    f = got["fault"]
    check(isinstance(f, dict) and f["disposition"] == "lease" and f["retry"] is True, "fault %r" % f)
    check(f["lease"]["destination"] == "203.0.113.40" and f["lease"]["protocol"] == "tcp" and
          f["lease"]["ports"] == [8443], "lease %r" % f["lease"])
    check(got["after_lease"] == "ok", "retry after the lease: %r" % got)
    check(got["after_ttl"] in REFUSED, "after the TTL: %r" % got)
    check(got["held_open"] == "ok", "a connection inside the lease: %r" % got)
    check(got["held_after_ttl"] in REFUSED | {"ECONNRESET", "EPIPE"},
          "a flow established under the lease outlived it: %r" % got)
    opid = summary["operation_id"]
    rec = summary["record"]
    check(rec["leases"] == [], "expired lease not pruned: %r" % rec["leases"])
    faults = [json.loads(l) for l in open(os.path.join(env.state, "network-operations", opid,
                                                       "faults.jsonl"))]
    check(faults and faults[0]["capability"] == {"kind": "network.connect",
                                                  "destination": "203.0.113.40",
                                                  "protocol": "tcp", "port": 8443},
          "faults.jsonl %r" % faults)
    effects = [json.loads(l)["kind"] for l in open(os.path.join(env.state, "network-operations",
                                                                opid, "effects.jsonl"))]
    check("lease" in effects and "lease_expired" in effects, "effects %r" % effects)
    check(rec["counts"]["effects"] >= 1, "effect count %r" % rec["counts"])
    # The reject before the lease and the one after its expiry were counted
    # in different generations; the per-destination count holds both.
    blocked = [json.loads(l) for l in open(os.path.join(env.state, "network-operations", opid,
                                                        "effects.jsonl"))]
    blocked = [e for e in blocked if e["kind"] == "NetworkBlocked" and e.get("port") == 8443]
    check(len(blocked) == 1 and blocked[0]["destination"] == "203.0.113.40" and
          blocked[0]["packets"] >= 2 and blocked[0]["generation"] >= 2, "NetworkBlocked %r" % blocked)


def fault_denials(env):
    env.use_netns()
    env.start()
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--lease-scope",
                      "203.0.113.40,tcp,8443", "--lease-scope", "127.0.0.1,tcp,8443",
                      "--max-lease-ttl", "30", "--", "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    rec = env.record(opid)
    root = rec["root_process"]

    def fault(dst, port, pid=root["pid"], start=root["start_time_ticks"], op=opid):
        return env.user_call(env.client_sock, "fault.submit", {
            "operation_id": op, "fault": {"subject": {"pid": pid, "start_time_ticks": start},
                                          "capability": {"kind": "network.connect",
                                                         "destination": dst, "protocol": "tcp",
                                                         "port": port}}})["result"]

    r = fault("127.0.0.1", 8443)
    check(r["disposition"] == "deny" and r["reason"] == "restricted_destination", "%r" % r)
    r = fault("203.0.113.40", 9999)
    check(r["disposition"] == "deny" and r["reason"] == "not_eligible", "%r" % r)
    r = fault("203.0.113.40", 8443, pid=1, start=1)
    check(r["disposition"] == "deny" and r["reason"] == "unknown_peer", "%r" % r)
    r = fault("203.0.113.40", 8443, op="op_" + "f" * 32)
    check(r["disposition"] == "deny" and r["reason"] == "wrong_operation", "%r" % r)
    r = fault("203.0.113.0/24", 8443)
    check(r["disposition"] == "deny" and r["reason"] == "unbounded_destination", "%r" % r)
    # HTTP effects go to the mediator, which does not exist yet.
    r = env.user_call(env.client_sock, "network.event", {"operation_id": opid, "event": {
        "pid": root["pid"], "start_time_ticks": root["start_time_ticks"],
        "destination": "203.0.113.40", "protocol": "tcp", "port": 8443,
        "http": {"method": "GET", "url": "http://203.0.113.40:8443/"}}})["result"]
    check(r["disposition"] == "deny" and r["reason"] == "mediator_unavailable", "%r" % r)
    # Every one of them is evidence and counts as an effect of this operation
    # (the fault naming another operation has no operation to be recorded in).
    rec = env.record(opid)
    check(rec["counts"]["effects"] == 5, "effects %r" % rec["counts"])
    env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    env.finish(p)


def source_address_forward_and_input(env):
    ctr, gw, ext = env.add_netns("ctr"), env.add_netns("gw"), env.add_netns("ext")
    sh = lambda ns, *a: env.ns_run(ns, ["ip"] + list(a))
    subprocess.run(["ip", "link", "add", "gc0", "netns", ctr, "type", "veth", "peer", "name",
                    "gg0", "netns", gw], check=True)
    subprocess.run(["ip", "link", "add", "ge0", "netns", ext, "type", "veth", "peer", "name",
                    "gg1", "netns", gw], check=True)
    sh(ctr, "addr", "add", "198.51.100.2/24", "dev", "gc0")
    sh(gw, "addr", "add", "198.51.100.1/24", "dev", "gg0")
    sh(gw, "addr", "add", "203.0.113.1/24", "dev", "gg1")
    sh(ext, "addr", "add", "203.0.113.2/24", "dev", "ge0")
    for ns, dev in ((ctr, "gc0"), (gw, "gg0"), (gw, "gg1"), (ext, "ge0")):
        sh(ns, "link", "set", dev, "up")
    sh(ctr, "route", "add", "default", "via", "198.51.100.1")
    sh(ext, "route", "add", "198.51.100.0/24", "via", "203.0.113.1")
    env.ns_run(gw, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
    env.netns = gw
    env.start()
    env.serve(ext, "tcp,203.0.113.2,8080", "tcp,203.0.113.2,8081")
    env.serve(gw, "tcp,198.51.100.1,3128", "tcp,198.51.100.1,3129")
    targets = ["tcp,203.0.113.2,8080", "tcp,203.0.113.2,8081", "tcp,198.51.100.1,3128",
               "tcp,198.51.100.1,3129"]
    before = env.probe_outside(ctr, *targets)
    check(all(v == "ok" for v in before.values()), "topology broken: %r" % before)
    cfgdir = tempfile.mkdtemp(prefix="gensee-it-cfg.")
    cfg = os.path.join(cfgdir, "op_ctr_test.json")
    with open(cfg, "w") as f:
        json.dump({"schema_version": 3, "operation_id": "op_ctr_test", "source_run_id": "run_x",
                   "source_address": "198.51.100.2",
                   "envelope": {"grants": [
                       {"destination": "203.0.113.2", "protocol": "tcp", "ports": [8080]},
                       {"destination": "198.51.100.1", "protocol": "tcp", "ports": [3128]}]},
                   "policy": {"schema_version": 1, "restricted_destinations": [],
                              "in_place_lease_scopes": [], "max_in_place_lease_ttl_seconds": 60}}, f)
    os.chmod(cfg, 0o644)
    try:
        r = env.root_call("network.start", {"config_path": cfg})
        check(r.get("error", {}).get("code") == "invalid_config", "mode 0644 accepted: %r" % r)
        os.chmod(cfg, 0o600)
        r = env.root_call("network.start", {"config_path": cfg})
        check("result" in r, "network.start: %r" % r)
        got = env.probe_outside(ctr, *targets)
        check(got["tcp,203.0.113.2,8080"] == "ok" and got["tcp,198.51.100.1,3128"] == "ok", "%r" % got)
        check(got["tcp,203.0.113.2,8081"] in REFUSED, "forward not held: %r" % got)
        check(got["tcp,198.51.100.1,3129"] in REFUSED, "host input not held: %r" % got)
        # Another address is not this operation's subject.
        check(env.probe_outside(gw, "tcp,198.51.100.1,3129")["tcp,198.51.100.1,3129"] == "ok", "gw")
        r = env.root_call("fault.submit", {"operation_id": "op_ctr_test", "fault": {
            "subject": {"peer_address": "198.51.100.9"},
            "capability": {"kind": "network.connect", "destination": "203.0.113.2",
                           "protocol": "tcp", "port": 8081}}})
        check(r["result"]["reason"] == "unknown_peer", "%r" % r)
        r = env.root_call("operation.end", {"operation_id": "op_ctr_test", "kill": True})
        check(r["result"]["state"] == "ended", "%r" % r)
        check(gensee_tables(env, gw) == [], "table left after end")
    finally:
        os.unlink(cfg)
        os.rmdir(cfgdir)


def atomic_generation_swaps(env):
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    stop = os.path.join(env.bindir, "stop")
    p = env.gensee_bg("run", "--sandbox", "linux", "--allow-net", "192.0.2.1,tcp,8080",
                      "--allow-net", "198.51.100.0/24,tcp,1000-2000", "--json", "--",
                      "/usr/bin/python3", env.tool("netprobe.py"), "--loop", stop, "90",
                      "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    time.sleep(0.3)
    gens = set()
    for i in range(1000):
        r = env.root_call("network.reinstall", {"operation_id": opid})
        check("result" in r, "swap %d: %r" % (i, r))
        gens.add(r["result"]["generation"])
    open(stop, "w").close()
    rc, out, err = env.finish(p, timeout=120)
    # The probe's line is on stderr (stdout is the run's JSON alone).
    got = json.loads([l for l in err.splitlines() if l.startswith("{")][-1])
    check(len(gens) == 1000, "generations %d" % len(gens))
    check(got["rounds"] > 50, "too few rounds while swapping: %r" % got)
    check(got["allowed_failed"] == [], "allowed connections failed during swaps: %r" % got)
    check(got["denied_ok"] == 0, "a never-granted destination got through: %r" % got)


def sigkill_keeps_denying(env):
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081", "tcp,203.0.113.40,8443")
    p = env.gensee_bg("run", "--sandbox", "linux", "--allow-net", "192.0.2.1,tcp,8080",
                      "--lease-scope", "203.0.113.40,tcp,8443", "--max-lease-ttl", "60",
                      "--", "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    # The probes below join the cgroup unconfined: let boundaryd check the
    # tree's seccomp first, or it would rightly fail the operation for them.
    rec = env.wait_for("the host-control check", lambda: (lambda r: r if r.get(
        "host_controls_kernel", {}).get("state") == "verified" else None)(env.record(opid)))
    cg = rec["cgroup"]["path"]
    root = rec["root_process"]
    r = env.root_call("fault.submit", {"operation_id": opid, "fault": {
        "subject": {"pid": root["pid"], "start_time_ticks": root["start_time_ticks"]},
        "capability": {"kind": "network.connect", "destination": "203.0.113.40",
                       "protocol": "tcp", "port": 8443}, "requested_ttl_seconds": 2}})
    check(r["result"]["disposition"] == "lease", "%r" % r)

    def probe_inside(*targets):
        # A probe that joins the operation's cgroup first, so its sockets are the operation's.
        code = "echo $$ > %s/cgroup.procs && exec /usr/bin/python3 %s %s" % (
            cg, env.tool("netprobe.py"), " ".join(targets))
        return json.loads(env.ns_run(env.netns, ["sh", "-c", code]).stdout)

    check(probe_inside("tcp,203.0.113.40,8443")["tcp,203.0.113.40,8443"] == "ok", "lease inactive")
    env.kill9()
    got = probe_inside("tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    check(got["tcp,192.0.2.1,8080"] == "ok" and got["tcp,192.0.2.1,8081"] in REFUSED,
          "policy not held with boundaryd dead: %r" % got)
    time.sleep(3.5)  # the lease expires while no supervisor runs
    env.start()
    rec = env.record(opid)
    check(rec["leases"] == [], "expired lease survived the restart: %r" % rec["leases"])
    got = probe_inside("tcp,203.0.113.40,8443", "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    check(got["tcp,203.0.113.40,8443"] in REFUSED, "expired lease still enforced: %r" % got)
    check(got["tcp,192.0.2.1,8080"] == "ok" and got["tcp,192.0.2.1,8081"] in REFUSED, "%r" % got)
    effects = [json.loads(l) for l in open(os.path.join(env.state, "network-operations", opid,
                                                        "effects.jsonl"))]
    check(any(e.get("reason") == "expired_while_supervisor_down" for e in effects), "%r" % effects)
    env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    env.finish(p)
    check(gensee_tables(env) == [], "table left")


def restart_reconciles_tables(env):
    env.use_netns()
    env.start()
    p = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--", "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    check(len(gensee_tables(env)) == 1, "no table")
    env.kill9()
    env.ns_run(env.netns, ["nft", "add", "table", "inet", "gensee_0123456789abcdef01234567"])
    rec = json.load(open(os.path.join(env.state, "operations", opid, "record.json")))
    os.kill(rec["root_process"]["pid"], signal.SIGKILL)
    env.finish(p)
    env.start()
    rec = env.wait_for("cleanup", lambda: (lambda r: r if r["cgroup"]["cleanup"]["state"] == "removed" else None)(env.record(opid)))
    check(rec["lifecycle"]["state"] == "lost", "%r" % rec["lifecycle"])
    tables = gensee_tables(env)
    check(tables == ["gensee_0123456789abcdef01234567"], "tables after restart: %r" % tables)
    st = env.root_call("system.status")["result"]
    check(any(e["reason"] == "unvalidated_nft_table" for e in st["recovery_health"]["entries"]),
          "%r" % st["recovery_health"])


def policy_file_and_modes(env):
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    home = tempfile.mkdtemp(prefix="gensee-it-home.", dir=env.bindir)
    os.chmod(home, 0o755)
    pol = os.path.join(home, "policy.json")

    def write(net):
        with open(pol, "w") as f:
            json.dump({"linux": {"network": net}}, f)
        os.chmod(pol, 0o644)

    write({"mode": "allowlist", "allow": ["192.0.2.1,tcp,8080", "api.example.com"]})
    rc, lines, summary, err = run_sandboxed(env, [], probe_cmd(env, "tcp,192.0.2.1,8080",
                                                               "tcp,192.0.2.1,8081"),
                                            extra_env={"GENSEE_HOME": home})
    got = json.loads(lines[0])
    check(got == {"tcp,192.0.2.1,8080": "ok", "tcp,192.0.2.1,8081": got["tcp,192.0.2.1,8081"]} and
          got["tcp,192.0.2.1,8081"] in REFUSED, "%r" % got)
    check("api.example.com" in err and "skipped" in err, "no hostname warning: %s" % err)
    # Only deny set: deny-only monitor mode, everything else allowed.
    write({"deny": ["192.0.2.1,tcp,8081"]})
    rc, lines, summary, err = run_sandboxed(env, [], probe_cmd(env, "tcp,192.0.2.1,8080",
                                                               "tcp,192.0.2.1,8081"),
                                            extra_env={"GENSEE_HOME": home})
    got = json.loads(lines[0])
    check(got["tcp,192.0.2.1,8080"] == "ok" and got["tcp,192.0.2.1,8081"] in REFUSED, "%r" % got)
    check(summary["record"]["envelope"]["mode"] == "monitor", "%r" % summary["record"]["envelope"])
    # An invalid policy fails closed: nothing runs.
    with open(pol, "w") as f:
        f.write("{not json")
    r = env.gensee("run", "--sandbox", "linux", "--", "true", env={"GENSEE_HOME": home})
    check(r.returncode == 125, "invalid policy: rc %d %s" % (r.returncode, r.stderr))


def debug_plan_and_apply(env):
    env.use_netns()
    # network-plan needs no daemon and no root.
    sleeper = subprocess.Popen(env.ns_prefix() + env.user_prefix() + ["sleep", "60"])
    env.children.append(sleeper)
    time.sleep(0.2)
    pid = int(subprocess.run(["pgrep", "-P", str(sleeper.pid)], capture_output=True, text=True).stdout.split()[0]) \
        if subprocess.run(["pgrep", "-P", str(sleeper.pid)], capture_output=True, text=True).stdout.strip() else sleeper.pid
    r = env.gensee("debug", "network-plan", "--session-id", "claude-1", "--pid", str(pid),
                   "--allow", "10.0.0.0/8", "--deny", "169.254.169.254", "--allow",
                   "2001:db8::/32", "--allow", "example.com", "--json")
    check(r.returncode == 0, r.stderr)
    plan = json.loads(r.stdout)
    check(plan["pid"] == pid and plan["mode"] == "allowlist", "%r" % plan)
    check(len(plan["allow_elements"]) == 4 and len(plan["deny_elements"]) == 2, "%r" % plan)
    check(any("example.com" in w for w in plan["warnings"]), "%r" % plan["warnings"])
    check("socket cgroupv2 level 2" in plan["nft"] and "@allow4" in plan["nft"], plan["nft"])
    # The plan is what nft itself accepts.
    nsfile = tempfile.NamedTemporaryFile("w", suffix=".nft", delete=False)
    # The operation's cgroup does not exist yet: check against the v2 root.
    below = os.path.relpath(env.cgmount, "/sys/fs/cgroup")
    planned = plan["operation_cgroup"]
    check(planned.endswith("gensee/op_claude-1"), planned)
    nsfile.write(plan["nft"].replace('"%s"' % planned, '"%s"' % (below if below != "." else "")).replace(
        "socket cgroupv2 level 2", "socket cgroupv2 level 0"))
    nsfile.close()
    c = env.ns_run(env.netns, ["nft", "-c", "-f", nsfile.name], check=False)
    os.unlink(nsfile.name)
    check(c.returncode == 0, "nft -c rejected the plan: %s" % c.stderr)
    # network-apply (root) puts the running tree under a new operation.
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    r = env.gensee("debug", "network-apply", "--session-id", "claude-1", "--pid", str(pid),
                   "--allow", "192.0.2.1,tcp,8080", "--json", as_root=True)
    check(r.returncode == 0, r.stderr)
    opid = json.loads(r.stdout)["operation_id"]
    cg = env.record(opid)["cgroup"]["path"]
    code = "echo $$ > %s/cgroup.procs && exec /usr/bin/python3 %s tcp,192.0.2.1,8080 tcp,192.0.2.1,8081" % (
        cg, env.tool("netprobe.py"))
    got = json.loads(env.ns_run(env.netns, ["sh", "-c", code]).stdout)
    check(got["tcp,192.0.2.1,8080"] == "ok" and got["tcp,192.0.2.1,8081"] in REFUSED, "%r" % got)
    env.root_call("operation.end", {"operation_id": opid, "kill": True})


def supervisor_socket_forms(env):
    env.use_netns()
    env.start()
    p = env.gensee_bg("run", "--sandbox", "linux", "--allow-net", "192.0.2.1,tcp,8080", "--",
                      "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    sock = os.path.join(env.state, "network-operations", opid, "supervisor.sock")
    check(os.path.exists(sock), "no supervisor.sock")
    r = env.gensee("run", "network", "inspect", "--socket", sock, "--json", as_root=True)
    check(r.returncode == 0, r.stderr)
    got = json.loads(r.stdout)
    check(got["operation_id"] == opid and got["generation"] >= 1, "%r" % got)
    # The owner uses the main socket form; the per-operation socket is root's.
    r = env.gensee("run", "network", "inspect", "--operation", opid)
    check(r.returncode == 0 and opid in r.stdout, r.stdout + r.stderr)
    r = env.gensee("run", "network", "inspect", "--socket", sock)
    check(r.returncode != 0, "test user reached supervisor.sock")
    root = env.record(opid)["root_process"]
    evf = os.path.join(env.bindir, "event.json")
    with open(evf, "w") as f:
        json.dump({"schema_version": 1, "pid": root["pid"], "start_time_ticks": root["start_time_ticks"],
                   "destination": "192.0.2.1", "protocol": "tcp", "port": 8080}, f)
    os.chmod(evf, 0o644)
    r = env.gensee("run", "network", "event", "--socket", sock, "--event", evf, as_root=True)
    check(r.returncode == 0 and json.loads(r.stdout)["reason"] == "within_envelope", r.stdout + r.stderr)
    # A request on the socket may not name another operation.
    r = env.root_call("network.inspect", {"operation_id": opid})
    check("result" in r, "%r" % r)
    env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    env.finish(p)


def decisions_match_kernel(env):
    # Attack 1: a deny-listed tuple inside a lease scope got a lease with
    # retry: true while the kernel (deny list first) still refused it.
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,203.0.113.40,8443", "tcp,203.0.113.41,8443")
    args = ["--deny-all", "--lease-scope", "203.0.113.0/24,tcp,8443", "--deny-net",
            "203.0.113.40,tcp,8443", "--max-lease-ttl", "2"]
    rc, lines, summary, err = run_sandboxed(
        env, args, ["/usr/bin/python3", env.tool("netprobe.py"), "--lease", env.cli,
                    "tcp,203.0.113.40,8443", "1"])
    check(lines, "no probe output (rc %d): %s" % (rc, err))
    got = json.loads(lines[0])
    f = got["fault"]
    check(isinstance(f, dict) and f["disposition"] == "deny" and f["reason"] == "deny_list" and
          f["retry"] is False and f["lease"] is None, "fault %r" % f)
    check(got["before"] in REFUSED and got["after_lease"] in REFUSED, "kernel %r" % got)
    faults = [json.loads(l) for l in open(os.path.join(env.state, "network-operations",
                                                       summary["operation_id"], "faults.jsonl"))]
    check([x["disposition"] for x in faults] == ["deny"] and faults[0]["retry"] is False, "%r" % faults)
    # The rest of the scope still gets its lease, and the kernel agrees.
    rc, lines, summary, err = run_sandboxed(
        env, args, ["/usr/bin/python3", env.tool("netprobe.py"), "--lease", env.cli,
                    "tcp,203.0.113.41,8443", "1"])
    got = json.loads(lines[0])
    check(got["fault"]["disposition"] == "lease" and got["fault"]["retry"] is True and
          got["after_lease"] == "ok", "%r" % got)
    # Attack 2: in monitor mode a fault for traffic the kernel lets through
    # was answered deny. The answer is allow (monitor_mode), as the kernel does.
    rc, lines, summary, err = run_sandboxed(
        env, ["--monitor", "--deny-net", "203.0.113.41,tcp,8443"],
        ["/usr/bin/python3", env.tool("netprobe.py"), "--lease", env.cli, "tcp,203.0.113.40,8443", "1"])
    got = json.loads(lines[0])
    f = got["fault"]
    check(got["before"] == "ok" and got["after_lease"] == "ok", "kernel %r" % got)
    check(isinstance(f, dict) and f["disposition"] == "allow" and f["reason"] == "monitor_mode" and
          f["retry"] is True, "fault %r" % f)
    rc, lines, summary, err = run_sandboxed(
        env, ["--monitor", "--deny-net", "203.0.113.41,tcp,8443"],
        ["/usr/bin/python3", env.tool("netprobe.py"), "--lease", env.cli, "tcp,203.0.113.41,8443", "1"])
    got = json.loads(lines[0])
    check(got["before"] in REFUSED and got["fault"]["disposition"] == "deny" and
          got["fault"]["reason"] == "deny_list" and got["fault"]["retry"] is False, "%r" % got)


def broad_grant_never_opens_restricted(env):
    # Attack: --allow-net 0.0.0.0/0,tcp,8000 answered on 127.0.0.2. Only an
    # exact single-address grant may reach a restricted destination.
    env.use_netns()
    env.start()
    targets = ["tcp,192.0.2.1,8000", "tcp,127.0.0.2,8000", "tcp,127.0.0.3,8000", "tcp,::1,8000",
               "tcp,2001:db8::1,8000"]
    env.serve(env.netns, *targets)
    broad = ["--allow-net", "0.0.0.0/0,tcp,8000", "--allow-net", "::/0,tcp,8000"]
    rc, lines, summary, err = run_sandboxed(env, broad, probe_cmd(env, *targets) +
                                            ["tcp,::ffff:127.0.0.2,8000"])
    got = json.loads(lines[0])
    check(got["tcp,192.0.2.1,8000"] == "ok" and got["tcp,2001:db8::1,8000"] == "ok", "%r" % got)
    for t in ("tcp,127.0.0.2,8000", "tcp,127.0.0.3,8000", "tcp,::1,8000", "tcp,::ffff:127.0.0.2,8000"):
        check(got[t] in REFUSED, "%s reached under a broad grant: %r" % (t, got))
    # With an exact grant beside it, that one address (and only it) is reachable.
    args = broad + ["--allow-net", "127.0.0.3,tcp,8000"]
    rc, lines, summary, err = run_sandboxed(env, args, probe_cmd(env, *targets))
    check(lines, "rc %d: %s" % (rc, err))
    got = json.loads(lines[0])
    check(got["tcp,127.0.0.3,8000"] == "ok" and got["tcp,192.0.2.1,8000"] == "ok", "the exact grant: %r" % got)
    check(got["tcp,127.0.0.2,8000"] in REFUSED and got["tcp,::1,8000"] in REFUSED, "%r" % got)
    # The decision agrees: a fault for 127.0.0.2 is denied as restricted.
    p = env.gensee_bg("run", "--sandbox", "linux", *args, "--", "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    root = env.record(opid)["root_process"]
    for dst, want in (("127.0.0.2", ("deny", "restricted_destination")),
                      ("127.0.0.3", ("allow", "within_envelope")),
                      ("192.0.2.1", ("allow", "within_envelope"))):
        r = env.user_call(env.client_sock, "fault.submit", {"operation_id": opid, "fault": {
            "subject": {"pid": root["pid"], "start_time_ticks": root["start_time_ticks"]},
            "capability": {"kind": "network.connect", "destination": dst, "protocol": "tcp",
                           "port": 8000}}})["result"]
        check((r["disposition"], r["reason"]) == want and r["retry"] == (want[0] == "allow"),
              "%s: %r" % (dst, r))
    env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    env.finish(p)


def monitor_learns_policy(env):
    """A --monitor run lets through what its grants do not cover, records each
    such destination (NetworkWouldBlock) and prints the --allow-net that covers
    it; the deny list is still rejected. The learned options then make an
    allowlist run work."""
    env.use_netns()
    env.start()
    targets = ["tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081", "tcp,192.0.2.1,8082",
               "udp,198.51.100.1,5353"]
    env.serve(env.netns, *targets)
    args = ["--monitor", "--allow-net", "192.0.2.1,tcp,8080", "--deny-net", "192.0.2.1,tcp,8082"]
    rc, lines, summary, err = run_sandboxed(env, args, probe_cmd(env, *targets))
    got = json.loads(lines[0])
    check(got["tcp,192.0.2.1,8080"] == "ok" and got["tcp,192.0.2.1,8081"] == "ok" and
          got["udp,198.51.100.1,5353"] == "ok" and got["tcp,192.0.2.1,8082"] in REFUSED,
          "monitor must only reject its deny list: %r" % got)
    top = summary["record"]["counts"]["network"]["blocked_destinations"]["top"]
    why = {"%s,%s,%d" % (d["protocol"], d["destination"], d["port"]): d["reason"] for d in top}
    check(why.get("tcp,192.0.2.1,8081") == "monitor_would_block" and
          why.get("udp,198.51.100.1,5353") == "monitor_would_block" and
          why.get("tcp,192.0.2.1,8082") == "deny_list" and "tcp,192.0.2.1,8080" not in why,
          "recorded %r" % why)
    tl = env.gensee("timeline", "--operation", summary["operation_id"], "--json")
    kinds = {(e.get("kind"), e.get("port")) for e in map(json.loads, tl.stdout.splitlines())}
    check(("NetworkWouldBlock", 8081) in kinds and ("NetworkBlocked", 8082) in kinds and
          ("NetworkWouldBlock", 8082) not in kinds, "timeline %r" % kinds)
    learned = re.findall(r"to allow it: (--allow-net \S+)", err)
    check(sorted(learned) == ["--allow-net 192.0.2.1,tcp,8081", "--allow-net 198.51.100.1,udp,5353"],
          "learned %r from %s" % (learned, err))
    # The learned allowlist: everything the monitored run needed, nothing more.
    allow = ["--allow-net", "192.0.2.1,tcp,8080"] + [w for l in learned for w in l.split(" ")]
    rc, lines, summary, err = run_sandboxed(env, allow, probe_cmd(env, *targets))
    got = json.loads(lines[0])
    check(got["tcp,192.0.2.1,8081"] == "ok" and got["udp,198.51.100.1,5353"] == "ok" and
          got["tcp,192.0.2.1,8082"] in REFUSED, "the learned policy: %r" % got)


def hook_anchor_lifecycle(env):
    """boundaryd keeps one accept-only anchor table per state root while it
    runs (it holds the hooks' and the trace rule's static keys, so an
    operation's table commits without code patching): it never weakens a table's verdict, a restart after
    SIGKILL reuses it rather than adding another, a clean stop removes it, and
    --no-nft-anchor goes without."""
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080")
    name = env.root_call("system.status")["result"]["nftables"]["hook_anchor"]
    check(name == env.anchor_name(), "anchor %r, want %r" % (name, env.anchor_name()))

    def anchors():
        r = env.ns_run(env.netns, ["nft", "list", "tables"])
        return [l.split()[-1] for l in r.stdout.splitlines() if "gsanchor_" in l]
    check(anchors() == [name], "anchors %r" % anchors())
    text = env.ns_run(env.netns, ["nft", "list", "table", "inet", name]).stdout
    chains = re.findall(r"chain (\w+) \{\s*type filter hook (\w+) priority [^;]+; policy (\w+);\s*\}",
                        text)
    check(sorted(chains) == [("forward", "forward", "accept"), ("input", "input", "accept"),
                             ("output", "output", "accept")], "anchor has more than empty "
          "accept chains: %s" % text)
    # Its one rule: the trace key's pin, in a chain nothing jumps to.
    check(re.findall(r"chain pin \{\s*meta nftrace set 1\s*\}", text) and "jump" not in text and
          "goto" not in text and text.count("nftrace") == 1, "anchor rules: %s" % text)
    # Its accept decides nothing for an operation's table: deny-all still refuses.
    rc, lines, summary, err = run_sandboxed(env, ["--deny-all"],
                                            probe_cmd(env, "tcp,192.0.2.1,8080"))
    check(json.loads(lines[0])["tcp,192.0.2.1,8080"] in REFUSED, "%r" % lines)
    check(env.probe_outside(env.netns, "tcp,192.0.2.1,8080")["tcp,192.0.2.1,8080"] == "ok",
          "the server is not reachable outside gensee")
    # SIGKILL leaves it (accept-only); the next instance reuses it.
    env.kill9()
    check(anchors() == [name], "after SIGKILL: %r" % anchors())
    env.start()
    check(anchors() == [name], "after restart: %r" % anchors())
    text = env.ns_run(env.netns, ["nft", "list", "table", "inet", name]).stdout
    check(text.count("nftrace") == 1, "a reused anchor has one pin rule: %s" % text)
    env.stop()
    check(anchors() == [], "a clean stop left %r" % anchors())
    env.start(args=["--no-nft-anchor"])
    check(anchors() == [] and env.root_call("system.status")["result"]["nftables"][
        "hook_anchor"] is None, "--no-nft-anchor: %r" % anchors())
    rc, lines, summary, err = run_sandboxed(env, ["--deny-all"],
                                            probe_cmd(env, "tcp,192.0.2.1,8080"))
    check(json.loads(lines[0])["tcp,192.0.2.1,8080"] in REFUSED, "%r" % lines)


def prepared_cell(env):
    """boundaryd keeps two prepared cells, one for the next network operation
    and one for the next operation without network policy: an id, its
    directory with the first record's files, its empty cgroup and, for the
    network cell, its network directory and deny-all table, made ahead so
    that none of it is on the launch path (spare.c). A cell grants nothing,
    no user can join it, nothing lists it as an operation, the operations
    that take them get exactly their own policy (refill, or nothing to do
    for deny-all), a SIGKILLed instance's cells are removed at the next
    start without a recovery note, and a clean stop removes them."""
    env.use_netns()
    env.start()
    env.serve(env.netns, "tcp,192.0.2.1,8080", "tcp,192.0.2.1,8081")
    base = os.path.join(env.cgmount, env.cgroup_base)
    ops = os.path.join(env.state, "operations")
    netops = os.path.join(env.state, "network-operations")

    def spare_tables(spare):
        r = env.ns_run(env.netns, ["nft", "list", "tables"])
        return [l.split()[-1] for l in r.stdout.splitlines()
                if "gensee_" in l and env.table_owner(l.split()[-1]) == spare]

    def cells(old=()):
        """(network cell, plain cell) once both are ready and neither is in old
        (a cell no operation took stays)."""
        st = env.root_call("system.status")["result"]["prepared_cell"]
        ids = env.spare_ids()
        if not (st["ready"] and st["plain_ready"] and len(ids) == 2) or ids & set(old):
            return None
        net = [i for i in ids if spare_tables(i)]
        return (net[0], (ids - set(net)).pop()) if len(net) == 1 else None

    net, plain = env.wait_for("prepared cells", cells)
    for cid in (net, plain):
        cg = os.path.join(base, cid)
        check(os.path.isdir(cg) and open(os.path.join(cg, "cgroup.procs")).read() == "",
              "cell %s: its cgroup is not there and empty" % cid)
        check(sorted(os.listdir(os.path.join(ops, cid))) ==
              ["record.json.lock", "record.json.spare0", "record.json.spare1",
               "record.json.spare2", "record.json.tmp"],
              "cell %s: %r" % (cid, os.listdir(os.path.join(ops, cid))))
    check(os.listdir(os.path.join(netops, net)) == [] and
          not os.path.exists(os.path.join(netops, plain)), "network directories of the cells")
    check(len(spare_tables(net)) == 1 and spare_tables(plain) == [] and env.op_tables() == [],
          "tables: network cell %r, plain cell %r, operations %r" % (
              spare_tables(net), spare_tables(plain), env.op_tables()))
    listed = [o["operation_id"] for o in env.root_call("operation.list")["result"]["operations"]]
    check(net not in listed and plain not in listed, "a cell is listed: %r" % listed)
    cg = os.path.join(base, net)
    # Attack: a user joins a cell, to be inside an operation's cgroup before
    # the operation (and its policy) exists.
    for cid in (net, plain):
        r = subprocess.run(env.user_prefix() + ["sh", "-c", "echo $$ > %s/cgroup.procs" %
                                                os.path.join(base, cid)],
                           capture_output=True, text=True)
        check(r.returncode != 0, "a user process joined the cell %s" % cid)
    # Whatever gets into the network cell has no network: its table rejects it.
    r = env.ns_run(env.netns, ["sh", "-c", "echo $$ > %s/cgroup.procs && exec /usr/bin/python3 %s %s"
                               % (cg, env.tool("netprobe.py"), "tcp,192.0.2.1,8080")])
    check(json.loads(r.stdout)["tcp,192.0.2.1,8080"] in REFUSED, "inside the cell: %s" % r.stdout)
    env.wait_for("the probe gone", lambda: open(os.path.join(cg, "cgroup.procs")).read() == "")
    # An operation without network policy takes the plain cell.
    r = env.gensee("run", "--json", "--", "/bin/true")
    check(r.returncode == 0 and json.loads(r.stdout)["operation_id"] == plain,
          "a plain run did not start from the plain cell: %s" % r.stdout)
    # An allowlist operation takes the network cell: sets and rules refilled.
    rc, lines, summary, err = run_sandboxed(env, ["--allow-net", "192.0.2.1,tcp,8080"],
                                            probe_cmd(env, "tcp,192.0.2.1,8080",
                                                      "tcp,192.0.2.1,8081"))
    got = json.loads(lines[0])
    check(summary["operation_id"] == net, "%s did not start from the cell %s" % (
        summary["operation_id"], net))
    check(got["tcp,192.0.2.1,8080"] == "ok" and got["tcp,192.0.2.1,8081"] in REFUSED,
          "refilled cell: %r" % got)
    check(summary["record"]["envelope"]["generation"] == 1, "%r" % summary["record"]["envelope"])
    # Its record's versions were the cell's files; no temporary file is left.
    check(sorted(f for f in os.listdir(os.path.join(ops, net))
                 if not f.startswith("record.json.spare")) == ["record.json", "record.json.lock"],
          "files of an operation from a cell: %r" % os.listdir(os.path.join(ops, net)))
    # The next cells; a deny-all operation takes the network one as it is.
    net2, plain2 = env.wait_for("the next cells", lambda: cells([net, plain]))
    rc, lines, summary, err = run_sandboxed(env, ["--deny-all"], probe_cmd(env, "tcp,192.0.2.1,8080"))
    check(summary["operation_id"] == net2, "deny-all did not start from the cell")
    check(json.loads(lines[0])["tcp,192.0.2.1,8080"] in REFUSED, "deny-all cell: %r" % lines)
    check(env.op_tables() == [], "operation tables left: %r" % env.op_tables())
    # SIGKILL leaves the cells; the next start removes them, with no recovery note.
    net3, plain3 = env.wait_for("third cells", lambda: cells([net, plain, net2]))
    check(plain3 == plain2, "the plain cell no one took was replaced")
    env.kill9()
    check(len(spare_tables(net3)) == 1 and os.path.isdir(os.path.join(base, net3)) and
          os.path.isdir(os.path.join(ops, plain3)), "the killed instance's cells are not there")
    env.start()
    for cid in (net3, plain3):
        check(not os.path.exists(os.path.join(base, cid)) and
              not os.path.exists(os.path.join(ops, cid)) and
              not os.path.exists(os.path.join(netops, cid)), "cell %s was not removed" % cid)
    check(spare_tables(net3) == [], "the killed instance's cell table is left")
    rh = env.root_call("system.status")["result"]["recovery_health"]
    check(rh["status"] == "ok" and rh["entries"] == [] and rh["cleaned"] == [], "%r" % rh)
    net4, plain4 = env.wait_for("cells after the restart", lambda: cells([net3, plain3]))
    env.stop()
    check(env.spare_ids() == set() and spare_tables(net4) == [] and
          not any(os.path.exists(os.path.join(d, c)) for d in (base, ops, netops)
                  for c in (net4, plain4)), "a clean stop left a cell")

if __name__ == "__main__":
    main({f.__name__: f for f in (allowlist_tcp_udp_v4_v6, grants_are_tuples, first_action_is_held,
                                  lease_then_expiry, fault_denials,
                                  source_address_forward_and_input, atomic_generation_swaps,
                                  sigkill_keeps_denying, restart_reconciles_tables,
                                  policy_file_and_modes, debug_plan_and_apply, prepared_cell,
                                  supervisor_socket_forms, decisions_match_kernel,
                                  broad_grant_never_opens_restricted, monitor_learns_policy,
                                  hook_anchor_lifecycle)})
