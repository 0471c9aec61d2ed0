"""The wire protocol and boundaryd's front door: authorization, bad frames,
stalled clients, unsafe state roots, hardened binaries."""

import json
import os
import socket
import struct
import subprocess
import tempfile
import time

from harness import BUILD, SOURCE, Failure, call, check, encode_frame, main, read_frame


def root_only_method_refused(env):
    env.start()
    # The test user on client.sock: the method table refuses system.shutdown.
    reply = env.user_call(env.client_sock, "system.shutdown", {})
    check(reply.get("error", {}).get("code") == "not_authorized", "%r" % reply)
    # boundary.sock does not even accept the test user's connection.
    reply = env.user_call(env.boundary_sock, "system.status", {})
    check(reply.get("oserror") == "PermissionError", "%r" % reply)
    # Even root may not shut down through client.sock.
    reply = call(env.client_sock, "system.shutdown")
    check(reply.get("error", {}).get("code") == "not_authorized", "%r" % reply)
    # Unknown methods and bad params get stable codes; the daemon keeps serving.
    reply = env.user_call(env.client_sock, "no.such.method", {})
    check(reply["error"]["code"] == "unknown_method", "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.create", {"pid": "1", "start_time_ticks": 0})
    check(reply["error"]["code"] == "invalid_params", "%r" % reply)
    reply = env.user_call(env.client_sock, "operation.list", {"bogus": 1})
    check(reply["error"]["code"] == "invalid_params" and "bogus" in reply["error"]["message"], "%r" % reply)
    reply = env.user_call(env.client_sock, "system.status", {})
    check(reply["result"]["daemon"] == "gensee-boundaryd", "%r" % reply)
    # Root on boundary.sock may, and the daemon then exits cleanly.
    reply = env.root_call("system.shutdown")
    check(reply["result"]["shutting_down"] is True, "%r" % reply)
    check(env.proc.wait(timeout=10) == 0, "boundaryd exit status")
    env.proc = None
    check(not os.path.exists(env.client_sock), "client.sock left behind")


def connect():
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)


def closed_by_server(s, timeout):
    """True when the server closes s within timeout seconds."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def bad_frames_close_only_their_connection(env):
    env.start()
    path = env.client_sock
    cases = {
        "oversized header": struct.pack(">I", 1024 * 1024 + 1),
        "zero length": struct.pack(">I", 0),
        "invalid utf-8": struct.pack(">I", 4) + b'{"\xff"',
        "not an object": struct.pack(">I", 2) + b"[]",
        "trailing data": struct.pack(">I", 5) + b"{} {}",
        "not json": struct.pack(">I", 3) + b"{x}",
    }
    # A well-behaved client stays connected throughout.
    good = connect()
    good.connect(path)
    for name, data in cases.items():
        s = connect()
        s.connect(path)
        s.sendall(data)
        check(closed_by_server(s, 3), "%s: connection not closed" % name)
        s.close()
        good.sendall(encode_frame({"proto": 1, "id": 3, "method": "system.status", "params": {}}))
        good.settimeout(5)
        reply = read_frame(good)
        check(reply.get("id") == 3 and "result" in reply, "%s: good client got %r" % (name, reply))
    # Two requests in one write are both answered, in order.
    good.sendall(encode_frame({"proto": 1, "id": 10, "method": "system.status"}) +
                 encode_frame({"proto": 1, "id": 11, "method": "system.status"}))
    check([read_frame(good)["id"], read_frame(good)["id"]] == [10, 11], "pipelined replies")
    # A wrong protocol version is an error reply, not a closed connection.
    good.sendall(encode_frame({"proto": 2, "id": 12, "method": "system.status"}))
    reply = read_frame(good)
    check(reply["error"]["code"] == "unsupported_proto", "%r" % reply)
    good.close()


def stalled_client_does_not_delay_others(env):
    env.start()
    path = env.client_sock
    # A client that sends half a frame and stalls ...
    stall = connect()
    stall.connect(path)
    frame = encode_frame({"proto": 1, "id": 1, "method": "system.status", "params": {}})
    stall.sendall(frame[: len(frame) // 2])
    # ... and one whose header announces far more than the limit.
    big = connect()
    big.connect(path)
    big.sendall(struct.pack(">I", 64 * 1024 * 1024) + b"{" * 1000)
    t0 = time.monotonic()
    for i in range(20):
        reply = call(path, "system.status")
        check("result" in reply, "status %d: %r" % (i, reply))
    served = time.monotonic() - t0
    check(closed_by_server(big, 1), "oversized client not cut off")
    # The status requests were all served while the stalled frame was pending
    # (the server cuts it off only at its 5 s frame deadline).
    stall.settimeout(0)
    try:
        still_open = stall.recv(1) != b""
    except BlockingIOError:
        still_open = True
    check(still_open and served < 5, "status waited for the stalled client (%.2fs)" % served)
    check(closed_by_server(stall, 10), "stalled client never cut off")
    reply = call(path, "system.status")
    check("result" in reply, "%r" % reply)


def connection_cap(env):
    env.start()
    socks = []
    try:
        for _ in range(300):
            s = connect()
            s.connect(env.client_sock)
            socks.append(s)
        time.sleep(0.5)
        refused = sum(1 for s in socks if closed_by_server(s, 0.01))
        check(refused >= 300 - 256, "only %d connections refused past the cap" % refused)
    finally:
        for s in socks:
            s.close()
    reply = env.wait_for("status after the flood", lambda: call(env.client_sock, "system.status"))
    check("result" in reply, "%r" % reply)


def unsafe_roots_refused(env):
    good = tempfile.mkdtemp(prefix="gensee-it-good.")
    link = good + ".link"
    os.symlink(good, link)
    gw = tempfile.mkdtemp(prefix="gensee-it-gw.")
    os.chmod(gw, 0o770)
    other = tempfile.mkdtemp(prefix="gensee-it-other.")
    os.chown(other, env.uid, env.gid)
    parent = tempfile.mkdtemp(prefix="gensee-it-parent.")
    os.chmod(parent, 0o777)  # writable by others, not sticky
    inner = os.path.join(parent, "state")
    os.mkdir(inner, 0o700)
    try:
        for state, why in ((link, "is a symlink"), (gw, "group- or other-writable"),
                           (other, "not owned by root"), (inner, "writable by others and not sticky"),
                           ("relative/dir", "not an absolute path")):
            rc, log = env.start(state=state, expect_fail=True)
            check(rc != 0, "accepted state root %s" % state)
            check("refusing state root" in log and why in log, "%s: %s" % (state, log))
            check(not os.path.exists(os.path.join(state, "operations")), "wrote into %s" % state)
        rc, log = env.start(runtime=link, expect_fail=True)
        check(rc != 0 and "refusing runtime dir" in log, log)
        # Not root: refused before anything else.
        r = subprocess.run([env.user_binary("daemons/boundaryd/gensee-boundaryd"),
                            "--state-root", good, "--runtime-dir", env.runtime],
                           capture_output=True, text=True, timeout=10, user=env.uid, group=env.gid,
                           extra_groups=[])
        check(r.returncode != 0 and "must run as root" in r.stderr, r.stderr)
        # GENSEE_HOME in the environment is ignored.
        os.environ["GENSEE_HOME"] = link
        try:
            env.start()
        finally:
            del os.environ["GENSEE_HOME"]
        check(os.path.isdir(os.path.join(env.state, "operations")), "state root not used")
    finally:
        os.unlink(link)
        for d in (good, gw, other, inner, parent):
            os.rmdir(d) if os.path.isdir(d) and not os.listdir(d) else None


def binaries_hardened(env):
    """The daemons and the CLI are PIE, fully RELRO (BIND_NOW), with a stack
    protector, no executable stack, and _FORTIFY_SOURCE where the build can
    have it (not with the sanitizers, whose interceptors it conflicts with)."""
    del env
    for rel in ("cli/gensee", "daemons/boundaryd/gensee-boundaryd",
                "daemons/sensord/gensee-sensord", "daemons/httpmediatord/gensee-httpmediatord",
                "daemons/tcloned/gensee-tcloned"):
        path = os.path.join(BUILD, rel)

        def readelf(*flags):
            r = subprocess.run(["readelf", "-W"] + list(flags) + [path], capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 0, "readelf %s: %s" % (flags, r.stderr))
            return r.stdout
        check("DYN (Position-Independent Executable file)" in readelf("-h"), "%s: not PIE" % rel)
        dyn = readelf("-d")
        check("BIND_NOW" in dyn or "Flags: NOW" in dyn, "%s: not BIND_NOW:\n%s" % (rel, dyn))
        segs = readelf("-l")
        check("GNU_RELRO" in segs, "%s: no RELRO" % rel)
        stack = [l for l in segs.splitlines() if "GNU_STACK" in l]
        check(stack and not stack[0].split()[-2].endswith("E"), "%s: executable stack %r" % (
            rel, stack))
        syms = readelf("--dyn-syms")
        check("__stack_chk_fail" in syms, "%s: no stack protector" % rel)
        if "__asan_init" not in syms:
            check("_chk@" in syms.replace("__stack_chk_fail@", ""), "%s: no _FORTIFY_SOURCE" % rel)


# Runs as the test user: open up to 130 connections to client.sock, pipeline
# a few thousand system.status requests on each and never read a reply.
# Keeps pushing (nonblocking) until killed.
FLOOD = r"""
import json, os, socket, struct, sys, time
path, n, reqs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = json.dumps({"proto": 1, "id": 1, "method": "system.status", "params": {}}).encode()
batch = (struct.pack(">I", len(d)) + d) * reqs
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.setblocking(False)
    socks.append([s, 0])
print("connected", flush=True)
while True:
    busy = False
    for e in socks:
        s, off = e
        if s is None or off >= len(batch):
            continue
        try:
            e[1] += s.send(batch[off:off + 65536])
            busy = True
        except BlockingIOError:
            pass
        except OSError:
            e[0] = None
    if not busy:
        time.sleep(0.01)
"""


def vm_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise Failure("no %s for pid %d" % (key, pid))


def unread_replies_bounded(env):
    """A flood of clients that never read their replies, from one uid, stays
    within that uid's queue budget: root and another user are still answered,
    and boundaryd's memory stays bounded (VmHWM, not a timing)."""
    # Under AddressSanitizer freed memory sits in a 256 MB quarantine, which
    # would measure the sanitizer, not the bound: shrink it for this daemon.
    asan = "__asan_init" in subprocess.run(["readelf", "--dyn-syms", env.boundaryd],
                                           capture_output=True, text=True).stdout
    saved = os.environ.get("ASAN_OPTIONS")
    if asan:
        os.environ["ASAN_OPTIONS"] = (saved + ":" if saved else "") + \
            "quarantine_size_mb=8:thread_local_quarantine_size_kb=64"
    try:
        env.start()
    finally:
        if asan:
            if saved is None:
                del os.environ["ASAN_OPTIONS"]
            else:
                os.environ["ASAN_OPTIONS"] = saved
    pid = env.proc.pid
    base_kib = vm_kib(pid, "VmRSS")
    flood = subprocess.Popen(["/usr/bin/python3", "-c", FLOOD, env.client_sock, "130", "4000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             user=env.uid, group=env.gid, extra_groups=[], cwd="/")
    env.children.append(flood)
    check(flood.stdout.readline().strip() == "connected", "flood did not connect")
    per_uid = 96  # CONTROL_MAX_PER_UID

    # Every connection of the flood that was accepted (at least 96: the cap
    # refuses only while 96 are open) ends up either paused (boundaryd
    # stopped reading it) or closed for the uid's budget; none can drain,
    # since the flood never reads. How many of the 130 were refused depends
    # on when drops freed slots, so it is not counted here
    # (connection_flood_per_uid tests the cap).
    def settled():
        cb = call(env.boundary_sock, "system.status")["result"]["connection_budget"]
        return cb if cb["paused"] + cb["dropped"] >= per_uid and cb["dropped"] >= 1 else None
    cb = env.wait_for("the flood to be paused or dropped", settled, timeout=120, interval=0.2)
    check(cb["queued_bytes"] <= cb["queue_max_per_uid"] + 2 * 1024 * 1024,
          "queued %d bytes, over the per-uid budget %d" % (cb["queued_bytes"],
                                                          cb["queue_max_per_uid"]))
    # Root (both sockets) and another uid are answered while the flood holds on.
    for sock in (env.client_sock, env.boundary_sock):
        reply = call(sock, "system.status")
        check("result" in reply, "root status on %s: %r" % (sock, reply))
    reply = env.user_call(env.client_sock, "system.status", {}, uid=65534)
    check("result" in reply, "nobody's status during the flood: %r" % reply)
    r = env.gensee("status", "--json", as_root=True, timeout=30)
    check(r.returncode == 0, "gensee status during the flood: %d %s" % (r.returncode, r.stderr))
    # Memory: without the bounds 96 connections x ~5 MB of replies (~500 MB).
    # The budget is 16 MiB of queue for the uid; allow generously for the
    # allocator and a sanitizer build.
    hwm = vm_kib(pid, "VmHWM")
    rss = vm_kib(pid, "VmRSS")
    limit = base_kib + 160 * 1024
    check(hwm < limit, "boundaryd peaked at %d KiB (started at %d KiB)" % (hwm, base_kib))
    print("boundaryd RSS %d KiB, peak %d KiB, at start %d KiB; %r" % (rss, hwm, base_kib, cb))
    flood.kill()
    flood.wait()
    reply = env.wait_for("status after the flood", lambda: call(env.client_sock, "system.status"))
    check("result" in reply, "%r" % reply)


if __name__ == "__main__":
    main({f.__name__: f for f in (root_only_method_refused, bad_frames_close_only_their_connection,
                                  stalled_client_does_not_delay_others, connection_cap,
                                  unread_replies_bounded,
                                  unsafe_roots_refused, binaries_hardened)})
