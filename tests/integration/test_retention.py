"""Retention: `gensee operation prune` (root), the host's --retain-days and
--retain-count, and the operations index operation.list reads instead of
every record."""

import json
import os
import tempfile

from harness import call, check, main


def ops_dir(env):
    return os.path.join(env.state, "operations")


def listed(env, as_root=True):
    r = env.gensee("operation", "list", "--json", as_root=as_root)
    check(r.returncode == 0, "list: %d %s" % (r.returncode, r.stderr))
    return json.loads(r.stdout)


def run_ops(env, n):
    ids = []
    for _ in range(n):
        r = env.gensee("run", "--json", "--", "/bin/true")
        check(r.returncode == 0, "run: %d %s" % (r.returncode, r.stderr))
        ids.append(json.loads(r.stdout)["operation_id"])
    return ids


def held(env):
    """A running operation that waits for a line on a fifo."""
    d = tempfile.mkdtemp(prefix="gensee-it-fifo.", dir="/var/tmp")
    env.cleanup_dirs.append(d)
    os.chmod(d, 0o755)
    fifo = os.path.join(d, "go")
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    p = env.gensee_bg("run", "--", "/bin/sh", "-c", "read x < %s" % fifo)
    opid = env.wait_for("operation", lambda: env.running_ops())[0]
    return p, opid, fifo


def age(env, opid, when="2020-01-01T00:00:00.000Z"):
    """Make an ended operation's record old (boundaryd is stopped)."""
    path = os.path.join(ops_dir(env), opid, "record.json")
    rec = json.load(open(path))
    rec["lifecycle"]["created_at"] = when
    rec["lifecycle"]["ended_at"] = when
    with open(path, "w") as f:
        json.dump(rec, f)


def prune(env, *args):
    r = env.gensee("operation", "prune", "--json", *args, as_root=True)
    check(r.returncode == 0, "prune %r: %d %s" % (args, r.returncode, r.stderr))
    return json.loads(r.stdout)


def prune_by_age_and_count(env):
    env.start()
    ids = run_ops(env, 5)
    # Two of them are made old; the index learns it when it is rebuilt.
    env.stop()
    for opid in ids[:2]:
        age(env, opid)
    os.unlink(os.path.join(env.state, "operations.index.jsonl"))
    env.start()
    p, running, fifo = held(env)
    # Only root may prune: the method is not on client.sock, the CLI refused.
    reply = env.user_call(env.client_sock, "operation.prune", {"keep": 0})
    check(reply["error"]["code"] == "not_authorized", "%r" % reply)
    r = env.gensee("operation", "prune", "--keep", "0")
    check(r.returncode != 0 and not any(o not in os.listdir(ops_dir(env)) for o in ids),
          "the test user pruned: %r" % r)
    # Neither limit: a usage error, nothing happens.
    r = env.gensee("operation", "prune", as_root=True)
    check(r.returncode == 125, "prune without limits: %d" % r.returncode)
    # By age: a dry run names exactly the old ones and removes nothing.
    res = prune(env, "--older-than", "30d", "--dry-run")
    check(res["dry_run"] and sorted(res["pruned"]) == sorted(ids[:2]), "%r" % res)
    check(all(o in os.listdir(ops_dir(env)) for o in ids), "a dry run removed something")
    res = prune(env, "--older-than", "30d")
    check(sorted(res["pruned"]) == sorted(ids[:2]) and res["kept"] == 3, "%r" % res)
    for opid in ids[:2]:
        check(not os.path.exists(os.path.join(ops_dir(env), opid)), "%s still there" % opid)
    got = {o["operation_id"] for o in listed(env)}
    check(got == set(ids[2:]) | {running}, "list after prune by age: %r" % got)
    # By count: keep the newest ended one; the running one is never a candidate.
    res = prune(env, "--keep", "1")
    check(sorted(res["pruned"]) == sorted(ids[2:4]), "%r" % res)
    got = {o["operation_id"] for o in listed(env)}
    check(got == {ids[4], running}, "list after prune by count: %r" % got)
    # Everything ended, right now: the running operation stays, and still runs.
    res = prune(env, "--older-than", "0s")
    check(res["pruned"] == [ids[4]], "%r" % res)
    check(os.path.exists(os.path.join(ops_dir(env), running, "record.json")), "running pruned")
    check(env.record(running)["lifecycle"]["state"] == "running", "running op disturbed")
    # The user sees the same through client.sock.
    got = {o["operation_id"] for o in listed(env, as_root=False)}
    check(got == {running}, "user's list: %r" % got)
    with open(fifo, "w") as f:
        f.write("go\n")
    rc, out, err = env.finish(p)
    check(rc == 0, "held run: %d %s" % (rc, err))
    # Once it has ended it can go too, and the list follows.
    env.wait_for("ended in the list", lambda: [o for o in listed(env)
                                               if o["state"] == "exited"])
    res = prune(env, "--keep", "0")
    check(res["pruned"] == [running], "%r" % res)
    check(listed(env) == [], "list not empty: %r" % listed(env))
    # A restart agrees (the index file was rewritten).
    env.stop()
    env.start()
    check(listed(env) == [], "after restart: %r" % listed(env))


def list_survives_index_loss(env):
    env.start()
    ids = run_ops(env, 3)
    p, running, fifo = held(env)
    before = listed(env)
    check({o["operation_id"] for o in before} == set(ids) | {running}, "%r" % before)
    st = env.root_call("system.status")["result"]["index"]
    check(st["operations"] >= 3, "index %r" % st)
    index = os.path.join(env.state, "operations.index.jsonl")
    check(os.path.exists(index), "no index file")
    with open(fifo, "w") as f:
        f.write("go\n")
    env.finish(p)
    env.wait_for("ended", lambda: all(o["state"] != "running" for o in listed(env)))
    before = listed(env)
    # The list of ended operations does not read their records: a record
    # made unreadable under it changes nothing in the list (inspect, which
    # reads it, says so).
    path = os.path.join(ops_dir(env), ids[2], "record.json")
    saved = open(path).read()
    with open(path, "w") as f:
        f.write("\x00garbage{")
    check(listed(env) == before, "list read the records")
    reply = env.root_call("operation.inspect", {"operation_id": ids[2]})
    check(reply["error"]["code"] == "state_error", "%r" % reply)
    with open(path, "w") as f:
        f.write(saved)
    for damage in ("missing", "garbage", "torn", "stale"):
        env.stop()
        if damage == "missing":
            os.unlink(index)
        elif damage == "garbage":
            with open(index, "w") as f:
                f.write("{not json\n")
        elif damage == "torn":
            with open(index, "a") as f:
                f.write('{"operation_id": "op_')
        else:
            # Lines that say less than the records: one lost, one still "running".
            lines = open(index).read().splitlines()
            keep = [l for l in lines if ids[0] not in l]
            keep = [l.replace('"exited"', '"running"') if ids[1] in l else l for l in keep]
            with open(index, "w") as f:
                f.write("\n".join(keep) + "\n")
        env.start()
        after = listed(env)
        check(after == before, "%s index: list changed:\n%r\n%r" % (damage, before, after))
        rebuilt = env.root_call("system.status")["result"]["index"]["rebuilt"]
        check(rebuilt == (1 if damage != "stale" else 0), "%s: rebuilt %r" % (damage, rebuilt))
    # Users still see only their own; state and limit filters still work.
    check(listed(env, as_root=False) == before, "user list")
    reply = env.user_call(env.client_sock, "operation.list", {"state": "exited", "limit": 2})
    got = reply["result"]["operations"]
    check([o["operation_id"] for o in got] == [o["operation_id"] for o in before][-2:],
          "limit keeps the newest: %r" % got)
    reply = env.user_call(env.client_sock, "operation.list", {}, uid=65534)
    check(reply["result"]["operations"] == [], "nobody sees others': %r" % reply)


def host_retention(env):
    env.start()
    ids = run_ops(env, 4)
    env.stop()
    age(env, ids[0])
    os.unlink(os.path.join(env.state, "operations.index.jsonl"))
    # At start: older than 30 days goes, and beyond the 2 newest.
    env.start(args=["--retain-days", "30", "--retain-count", "2"])
    st = env.root_call("system.status")["result"]["retention"]
    check(st == {"days": 30, "count": 2}, "%r" % st)
    # The prepared cells' directories are no operations.
    left = sorted(set(os.listdir(ops_dir(env))) - env.spare_ids())
    check(left == sorted(ids[2:]), "left %r of %r" % (left, ids))
    check({o["operation_id"] for o in listed(env)} == set(ids[2:]), "list %r" % listed(env))
    # Bad values are refused like any bad argument.
    rc, log = env.start(expect_fail=True, args=["--retain-days", "0"])
    check(rc == 2, "--retain-days 0: exit %d" % rc)


if __name__ == "__main__":
    main({f.__name__: f for f in (prune_by_age_and_count, list_survives_index_loss,
                                  host_retention)})
