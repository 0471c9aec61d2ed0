"""gensee-sensord: nftables traces become faults, the proc connector
becomes lineage, fanotify permission events guard sensitive paths."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from harness import Failure, check, main
from test_network import REFUSED, run_sandboxed



def fan_policy(fanotify):
    """A policy of fanotify rules alone: the mount view (which hides ~/.ssh)
    and Landlock's default lists are off, so each case proves what fanotify
    itself enforces. test_escape covers the layers together."""
    return {"linux": {"fanotify": fanotify, "mount_view": {"mode": "off"},
                      "landlock": {"mode": "off"}}}

def trace_fault_then_lease(env):
    env.use_netns()
    env.start()
    env.start_sensord()
    env.serve(env.netns, "tcp,203.0.113.40,8443", "tcp,203.0.113.40,9999")
    args = ["--deny-all", "--lease-scope", "203.0.113.40,tcp,8443", "--max-lease-ttl", "30"]
    # The program never asks for anything: the kernel's reject of its first
    # connect is traced, turned into a fault, and the approved lease lets
    # its own retry through.
    rc, lines, summary, err = run_sandboxed(env, args, [
        "/usr/bin/python3", env.tool("netprobe.py"), "--retry", "tcp,203.0.113.40,8443", "1.5"])
    got = json.loads(lines[0])
    check(got["first"] in REFUSED, "first connect: %r" % got)
    check(got["second"] == "ok", "retry after the trace fault: %r (%s)" % (got, err))
    opid = summary["operation_id"]
    faults = [json.loads(l) for l in open(os.path.join(env.state, "network-operations", opid,
                                                       "faults.jsonl"))]
    traced = [f for f in faults if f["source"] == "nft_trace"]
    check(traced and traced[0]["capability"]["destination"] == "203.0.113.40" and
          traced[0]["capability"]["protocol"] == "tcp" and traced[0]["capability"]["port"] == 8443,
          "faults.jsonl %r" % faults)
    check(traced[0]["disposition"] == "lease" and traced[0]["subject"]["nft_table"], "%r" % traced[0])
    # Outside the lease scope: the fault is recorded as denied and the retry stays refused.
    rc, lines, summary, err = run_sandboxed(env, args, [
        "/usr/bin/python3", env.tool("netprobe.py"), "--retry", "tcp,203.0.113.40,9999", "1.0"])
    got = json.loads(lines[0])
    check(got["first"] in REFUSED and got["second"] in REFUSED, "%r" % got)
    faults = [json.loads(l) for l in open(os.path.join(env.state, "network-operations",
                                                       summary["operation_id"], "faults.jsonl"))]
    check(any(f["source"] == "nft_trace" and f["disposition"] == "deny" and
              f["reason"] == "not_eligible" for f in faults), "%r" % faults)


def proc_connector_lineage(env):
    env.start()
    env.start_sensord()
    r = env.gensee("run", "--json", "--", "sh", "-c",
                   "/usr/bin/python3 -c 'import subprocess; subprocess.run([\"sleep\", \"0.05\"])'; exit 4")
    check(r.returncode == 4, "rc %d %s" % (r.returncode, r.stderr))
    rec = json.loads(r.stdout)["record"]
    lin = rec["lineage"]
    exes = [e["executable"] for e in lin]
    check(any(x.endswith("/python3") or "python3" in x for x in exes) and
          any(x.endswith("/sleep") for x in exes), "lineage %r" % exes)
    # sleep lives 50 ms: only the proc connector can see it reliably, with its exit.
    sl = [e for e in lin if e["executable"].endswith("/sleep")]
    check(sl and sl[0]["start_time_ticks"] > 0 and sl[0].get("exit_status") == {"code": 0, "signal": None},
          "sleep entry %r" % sl)
    root = [e for e in lin if e["pid"] == rec["root_process"]["pid"]]
    check(root and root[0].get("exit_status", {}).get("code") == 4, "root entry %r" % root)
    check(rec["sensors"]["proc_connector"] == "active", "%r" % rec.get("sensors"))


def fanotify_sensitive_paths(env):
    env.start()
    env.start_sensord()
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    os.makedirs(os.path.join(home, ".ssh"))
    ws = os.path.join(home, "work", "a", "b")
    os.makedirs(ws)
    for path, text in ((os.path.join(home, ".ssh", "id_ed25519"), "PRIVATE KEY\n"),
                       (os.path.join(ws, ".env"), "TOKEN=1\n"),
                       (os.path.join(ws, "ok.txt"), "fine\n")):
        with open(path, "w") as f:
            f.write(text)
    with open(os.path.join(home, "policy.json"), "w") as f:
        json.dump(fan_policy({"enabled": True, "paths": ["**/.env"]}), f)
    for d, _, files in os.walk(home):
        os.chown(d, env.uid, env.gid)
        for n in files:
            os.chown(os.path.join(d, n), env.uid, env.gid)
    os.chmod(home, 0o755)
    user_env = {"HOME": home, "GENSEE_HOME": home}
    key = os.path.join(home, ".ssh", "id_ed25519")
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--json", "--", "sh", "-c",
                   "cat %s; echo rc=$? >&2; cat %s/.env; echo rc=$? >&2; cat %s/ok.txt" % (key, ws, ws),
                   env=user_env)
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    check("PRIVATE KEY" not in r.stdout and "TOKEN" not in r.stdout, "secret leaked: %r" % r.stdout)
    check("fine" in r.stdout, "ordinary file not readable: %r" % r.stdout)
    check(r.stderr.count("rc=1") == 2 and "Operation not permitted" in r.stderr, r.stderr)
    # The same read by a process outside every operation succeeds.
    out = subprocess.run(env.user_prefix() + ["cat", key], capture_output=True, text=True)
    check(out.returncode == 0 and "PRIVATE KEY" in out.stdout, "unsupervised read failed: %r" % out)
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    opid = summary["operation_id"]
    tl = env.gensee("timeline", "--operation", opid, "--json")
    files = [json.loads(l) for l in tl.stdout.splitlines() if '"file"' in l]
    denied = {e["path"] for e in files if e["decision"] == "deny"}
    check(key in denied and os.path.join(ws, ".env") in denied, "timeline file decisions %r" % files)


def fanotify_follows_links_and_renames(env):
    # A hard link or a rename of a key out of ~/.ssh is still the key: matched by inode.
    env.start()
    env.start_sensord()
    home, ws = make_home(env)
    second = os.path.join(home, ".ssh", "id_rsa")
    with open(second, "w") as f:
        f.write("OTHER KEY\n")
    os.chown(second, env.uid, env.gid)
    key = os.path.join(home, ".ssh", "id_ed25519")
    linked, moved = os.path.join(ws, "notes.txt"), os.path.join(ws, "moved.txt")
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--json", "--", "sh", "-c",
                   "ln %s %s && cat %s; echo rc=$? >&2; mv %s %s && cat %s; echo rc=$? >&2"
                   % (key, linked, linked, second, moved, moved),
                   env={"HOME": home, "GENSEE_HOME": home})
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    check(os.path.exists(linked) and os.path.exists(moved), "link or rename did not happen: %s" % r.stderr)
    check("PRIVATE KEY" not in r.stdout and "OTHER KEY" not in r.stdout, "secret leaked: %r" % r.stdout)
    check(r.stderr.count("rc=1") == 2, r.stderr)
    opid = json.loads(r.stdout[r.stdout.index("{"):])["operation_id"]
    tl = env.gensee("timeline", "--operation", opid, "--json")
    denied = {e["path"] for e in map(json.loads, tl.stdout.splitlines()) if e.get("decision") == "deny"}
    check(linked in denied and moved in denied, "timeline file decisions %r" % denied)


def fanotify_suffix_files_follow_renames(env):
    # The run's directory is its workspace: the .env files already in it are
    # marked by inode, so renaming or linking one to an innocent name and
    # reading it there is still denied.
    env.start()
    env.start_sensord()
    home, ws = make_home(env, with_policy=False)
    work = os.path.join(home, "work")
    local = os.path.join(ws, ".env.local")
    with open(local, "w") as f:
        f.write("LOCAL TOKEN\n")
    os.chown(local, env.uid, env.gid)
    with open(os.path.join(home, "policy.json"), "w") as f:
        json.dump(fan_policy({"enabled": True, "paths": ["**/.env", "**/.env.*"]}), f)
    moved, linked = os.path.join(ws, "moved.txt"), os.path.join(work, "linked.txt")
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--json", "--", "sh", "-c",
                   "mv a/b/.env a/b/moved.txt && cat a/b/moved.txt; echo rc=$? >&2; "
                   "ln a/b/.env.local linked.txt && cat linked.txt; echo rc=$? >&2",
                   env={"HOME": home, "GENSEE_HOME": home}, cwd=work)
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    check(os.path.exists(moved) and os.path.exists(linked), "rename or link did not happen: %s" % r.stderr)
    check("TOKEN" not in r.stdout, "secret leaked: %r" % r.stdout)
    check(r.stderr.count("rc=1") == 2, r.stderr)
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    check(summary["record"]["fanotify"].get("workspace") == work, "%r" % summary["record"]["fanotify"])
    tl = env.gensee("timeline", "--operation", summary["operation_id"], "--json")
    denied = {e["path"] for e in map(json.loads, tl.stdout.splitlines()) if e.get("decision") == "deny"}
    check(moved in denied and linked in denied, "timeline file decisions %r" % denied)


def fanotify_inode_hits_use_own_policy(env):
    # Two operations name the same files with different actions: the first
    # only observes them, the second denies them. A hard link of a marked
    # file is judged by the opener's own policy, not by whichever
    # operation's rule the shared mark happens to carry.
    env.start()
    env.start_sensord()
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    keys, ws = os.path.join(home, "keys"), os.path.join(home, "work")
    os.makedirs(keys)
    os.makedirs(ws)
    key = os.path.join(keys, "deploy.pem")
    with open(key, "w") as f:
        f.write("DEPLOY KEY\n")
    homes = {}
    for name, action in (("observer", "observe"), ("denier", "deny")):
        gh = os.path.join(home, name)
        os.makedirs(gh)
        with open(os.path.join(gh, "policy.json"), "w") as f:
            json.dump(fan_policy({"enabled": True, "rules": [
                {"path": keys + "/**", "action": action}]}), f)
        homes[name] = gh
    for d, _, files in os.walk(home):
        os.chown(d, env.uid, env.gid)
        for n in files:
            os.chown(os.path.join(d, n), env.uid, env.gid)
    os.chmod(home, 0o755)
    obs = env.gensee_bg("run", "--sandbox", "linux", "--deny-all", "--", "sleep", "30",
                        env={"HOME": home, "GENSEE_HOME": homes["observer"]})
    observer = env.wait_for("the observing operation", lambda: env.running_ops())[0]
    env.wait_for("its file rules", lambda: env.record(observer).get("sensors", {}).get("fanotify") == "active")
    linked = os.path.join(ws, "notes.txt")
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--json", "--", "sh", "-c",
                   "cat %s; echo rc=$? >&2; ln %s %s && cat %s; echo rc=$? >&2"
                   % (key, key, linked, linked),
                   env={"HOME": home, "GENSEE_HOME": homes["denier"]})
    env.user_call(env.client_sock, "operation.end", {"operation_id": observer, "kill": True})
    env.finish(obs)
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    check(os.path.exists(linked), "the link was not made: %s" % r.stderr)
    check("DEPLOY KEY" not in r.stdout, "secret leaked: %r" % r.stdout)
    check(r.stderr.count("rc=1") == 2, r.stderr)


def fanotify_needs_sensord(env):
    env.start()
    marker = os.path.join(env.bindir, "ran")
    r = env.gensee("run", "--sandbox", "linux", "--deny-all", "--linux-fanotify", "--", "sh", "-c",
                   "touch " + marker)
    check(r.returncode == 125 and "sensor_unavailable" in r.stderr, "rc %d %s" % (r.returncode, r.stderr))
    check(not os.path.exists(marker), "ran without its sensitive-path guard")


def sensor_exit_is_violation(env):
    env.start()
    env.start_sensord()
    p = env.gensee_bg("run", "--", "sleep", "60")
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    env.sensord.send_signal(signal.SIGKILL)
    env.sensord.wait()
    rec = env.wait_for("violation", lambda: (lambda r: r if r["counts"]["violations"] >= 1 else None)(env.record(opid)))
    check(rec["sensors"]["proc_connector"] == "lost", "%r" % rec["sensors"])
    env.user_call(env.client_sock, "operation.end", {"operation_id": opid, "kill": True})
    env.finish(p)


def make_home(env, with_policy=True):
    home = tempfile.mkdtemp(prefix="home.", dir=env.bindir)
    os.makedirs(os.path.join(home, ".ssh"))
    ws = os.path.join(home, "work", "a", "b")
    os.makedirs(ws)
    for path, text in ((os.path.join(home, ".ssh", "id_ed25519"), "PRIVATE KEY\n"),
                       (os.path.join(ws, ".env"), "TOKEN=1\n")):
        with open(path, "w") as f:
            f.write(text)
    if with_policy:
        with open(os.path.join(home, "policy.json"), "w") as f:
            json.dump(fan_policy({"enabled": True, "paths": ["**/.env"]}), f)
    for d, _, files in os.walk(home):
        os.chown(d, env.uid, env.gid)
        for n in files:
            os.chown(os.path.join(d, n), env.uid, env.gid)
    os.chmod(home, 0o755)
    return home, ws


def watch_attaches_fanotify(env):
    env.start()
    env.start_sensord()
    home, ws = make_home(env)
    key = os.path.join(home, ".ssh", "id_ed25519")
    tree = subprocess.Popen(env.user_prefix() + ["sh", "-c", "sleep 1.5; cat %s; echo rc=$? >&2; "
                                                  "exec sleep 30" % key],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.children.append(tree)
    time.sleep(0.2)
    before = open("/proc/%d/cgroup" % tree.pid).read()
    r = env.gensee("watch", "--pid", str(tree.pid), "--linux-fanotify", "--duration-seconds", "4",
                   "--json", as_root=True, env={"HOME": home, "GENSEE_HOME": home}, timeout=30)
    check(r.returncode == 0, "watch rc %d: %s" % (r.returncode, r.stderr))
    opid = r.stderr.split("operation ")[1].split()[0]
    # The tree outlived the watch and is back where it was, unsupervised.
    check(tree.poll() is None, "the watched tree was killed")
    after = open("/proc/%d/cgroup" % tree.pid).read()
    check(after == before, "tree not detached: %r -> %r" % (before, after))
    rec = env.record(opid)
    check(rec["lifecycle"]["state"] == "ended" and rec["lifecycle"]["end_reason"] == "detached", "%r" % rec["lifecycle"])
    tree.kill()
    out, err = tree.communicate(timeout=10)
    check("PRIVATE KEY" not in out and "rc=1" in err, "the watched read was not denied: %r %r" % (out, err))
    tl = env.gensee("timeline", "--operation", opid, "--json", as_root=True)
    check(any('"deny"' in l and "id_ed25519" in l for l in tl.stdout.splitlines()), tl.stdout)


def debug_fanotify_commands(env):
    home, ws = make_home(env)
    r = env.gensee("debug", "fanotify-plan", "--json", env={"HOME": home, "GENSEE_HOME": home})
    check(r.returncode == 0, r.stderr)
    plan = json.loads(r.stdout)
    pats = {x["pattern"]: x for x in plan["rules"]}
    check("~/.ssh/**" in pats and pats["~/.ssh/**"]["builtin"] and "**/.env" in pats, "%r" % pats)
    check(pats["**/.env"]["kind"] == "suffix" and plan["marks"], "%r" % plan)
    check(any(".aws" in w for w in plan["warnings"]), "no warning for a missing root: %r" % plan["warnings"])
    r = env.gensee("debug", "plan", "--json", env={"HOME": home, "GENSEE_HOME": home})
    check(r.returncode == 0, r.stderr)
    full = json.loads(r.stdout)
    for k in ("seccomp", "landlock", "fanotify", "network", "posture", "speculation"):
        check(k in full, "debug plan lacks %s" % k)
    check(full["fanotify"]["enabled"] is True and full["posture"] == "enforce", "%r" % full["fanotify"])
    # fanotify-once: the debug enforcer judges one open, by anyone.
    p = subprocess.Popen([env.cli, "debug", "fanotify-once", "--seconds", "15", "--events", "1",
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env.user_env({"HOME": home, "GENSEE_HOME": home}))
    env.children.append(p)
    line = ""
    deadline = time.monotonic() + 10
    while "judging" not in line and time.monotonic() < deadline:
        line = p.stderr.readline()
    check("judging" in line, "fanotify-once did not start")
    c = subprocess.run(["cat", os.path.join(home, ".ssh", "id_ed25519")], capture_output=True, text=True)
    out, err = p.communicate(timeout=20)
    check(c.returncode != 0 and "PRIVATE" not in c.stdout, "read not denied: %r" % c)
    got = json.loads(out.splitlines()[0])
    check(got["decision"] == "deny" and got["path"].endswith("id_ed25519"), "%r" % got)


if __name__ == "__main__":
    main({f.__name__: f for f in (trace_fault_then_lease, proc_connector_lineage,
                                  fanotify_sensitive_paths, fanotify_follows_links_and_renames,
                                  fanotify_inode_hits_use_own_policy,
                                  fanotify_suffix_files_follow_renames,
                                  fanotify_needs_sensord,
                                  sensor_exit_is_violation, watch_attaches_fanotify,
                                  debug_fanotify_commands)})
