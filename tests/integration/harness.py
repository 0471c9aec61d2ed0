"""Integration harness: real daemons, real kernel, driven only through the
CLI and the sockets.

Every case gets a private state root and runtime dir, a boundaryd started
from the build tree, and an unprivileged test user to run the CLI as. All
kernel state a case creates (cgroups, processes) is removed when it ends,
even when it fails.
"""

import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

BUILD = os.environ.get("GENSEE_BUILD_ROOT") or sys.exit("GENSEE_BUILD_ROOT is not set")
SOURCE = os.environ.get("GENSEE_SOURCE_ROOT", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
TEST_USER = "gensee-test"


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                return left.split()[4].replace("\\040", " ")
    raise Failure("no cgroup2 mount")


def ensure_test_user():
    try:
        pw = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", TEST_USER], check=True)
        pw = pwd.getpwnam(TEST_USER)
    return pw.pw_uid, pw.pw_gid


def encode_frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def read_frame(sock):
    (n,) = struct.unpack(">I", recv_exact(sock, 4))
    return json.loads(recv_exact(sock, n))


def call(path, method, params=None, timeout=10):
    """One request on a fresh connection; returns the whole reply object."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        s.sendall(encode_frame({"proto": 1, "id": 1, "method": method, "params": params or {}}))
        return read_frame(s)
    finally:
        s.close()


# Runs as the test user: the same request, printed as JSON (or the error).
USER_CALL = r"""
import json, socket, struct, sys
path, method, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(10); s.connect(path)
    d = json.dumps({"proto": 1, "id": 1, "method": method, "params": params}).encode()
    s.sendall(struct.pack(">I", len(d)) + d)
    def rx(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c: raise ConnectionError("closed")
            b += c
        return b
    (n,) = struct.unpack(">I", rx(4)); print(json.dumps(json.loads(rx(n))))
except OSError as e:
    print(json.dumps({"oserror": e.__class__.__name__, "errno": e.errno}))
"""


class Env:
    """A private boundaryd plus the test user; use as a context manager."""

    def __init__(self):
        self.uid, self.gid = ensure_test_user()
        self.cgmount = cgroup2_mount()
        self.state = tempfile.mkdtemp(prefix="gensee-it-state.")
        self.runtime = tempfile.mkdtemp(prefix="gensee-it-run.")
        os.chmod(self.runtime, 0o755)
        # The CLI must be executable by the test user wherever the build is.
        # Outside /tmp: a sandboxed run has a private /tmp, and runs these tools.
        self.bindir = tempfile.mkdtemp(prefix="gensee-it-bin.", dir="/var/tmp")
        os.chmod(self.bindir, 0o755)
        self.cli = self.user_binary("cli/gensee")
        self.boundaryd = os.path.join(BUILD, "daemons", "boundaryd", "gensee-boundaryd")
        self.proc = None
        self.logs = []
        self.children = []
        self.cleanup_dirs = []
        self.netns = None      # the namespace boundaryd and the CLI run in
        self.cli_prefix = []   # runs (as root) before the CLI's namespace and user switch
        self.namespaces = []   # every namespace this case created
        # The cgroup base boundaryd uses. The shared "gensee" is never removed
        # (another instance may be using it); a case that needs to remove its
        # base sets a private one (use_private_cgroup_base).
        self.cgroup_base = "gensee"
        self.mounts = []       # mounts this case made (unmounted in cleanup, newest first)

    # -- network namespaces: all test traffic stays inside them --

    def add_netns(self, name):
        full = "gensee-it-%d-%s" % (os.getpid(), name)
        subprocess.run(["ip", "netns", "add", full], check=True)
        self.namespaces.append(full)
        self.ns_run(full, ["ip", "link", "set", "lo", "up"])
        return full

    def ns_run(self, ns, argv, check=True, **kw):
        return subprocess.run(["ip", "-n", ns] + argv[1:] if argv[0] == "ip" else
                              ["nsenter", "--net=/run/netns/" + ns, "--"] + argv,
                              check=check, capture_output=True, text=True, timeout=60, **kw)

    def use_netns(self, name="main"):
        """Run boundaryd and the CLI in a fresh namespace with test addresses."""
        ns = self.add_netns(name)
        self.netns = ns
        # Test addresses on the namespace's own lo (this kernel has no dummy
        # driver): traffic to them is local to the namespace.
        for a in ("192.0.2.1/24", "198.51.100.1/24", "203.0.113.40/24"):
            self.ns_run(ns, ["ip", "addr", "add", a, "dev", "lo"])
        for a in ("2001:db8::1/64", "2001:db8:1::1/64"):
            self.ns_run(ns, ["ip", "addr", "add", a, "dev", "lo", "nodad"])
        return ns

    def host_policy(self, policy, mode=0o644):
        """Every later CLI call sees policy as /etc/gensee/policy.json: an overlay
        on /etc in a mount namespace of the call's own, so the host's /etc (and an
        administrator's real host policy) is never touched."""
        top = tempfile.mkdtemp(prefix="gensee-it-etc.", dir="/var/tmp")
        self.cleanup_dirs.append(top)
        upper, work = os.path.join(top, "upper"), os.path.join(top, "work")
        os.makedirs(os.path.join(upper, "gensee"))
        os.mkdir(work)
        os.chmod(top, 0o755)
        os.chmod(upper, 0o755)
        os.chmod(os.path.join(upper, "gensee"), 0o755)
        path = os.path.join(upper, "gensee", "policy.json")
        with open(path, "w") as f:
            json.dump(policy, f)
        os.chmod(path, mode)
        self.cli_prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                           'mount -t overlay gensee-it-etc -o lowerdir=/etc,upperdir="$1",'
                           'workdir="$2" /etc && shift 2 && exec "$@"', "sh", upper, work]
        return path

    def use_private_cgroup_base(self):
        """A cgroup base of this case alone (boundaryd --cgroup-base)."""
        self.cgroup_base = "gensee-it-%d" % os.getpid()
        return os.path.join(self.cgmount, self.cgroup_base)

    def mount_tmpfs(self, path, size):
        """A small tmpfs of this case's own over path (its private state dir,
        say): a disk that can be filled or made read-only without touching
        the host's. Unmounted in cleanup, even on failure."""
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700,uid=0,gid=0" % size,
                        "gensee-it-disk", path], check=True)
        self.mounts.append(path)

    def remount(self, path, opt):
        """Remount one of this case's own mounts (ro or rw). A write in
        flight makes a read-only remount EBUSY: it is retried, never timed."""
        check(path in self.mounts, "not this case's mount: %s" % path)
        for _ in range(200):
            r = subprocess.run(["mount", "-o", "remount," + opt, path], capture_output=True,
                               text=True)
            if r.returncode == 0:
                return
            time.sleep(0.05)
        raise Failure("remount %s %s: %s" % (opt, path, r.stderr))

    # Whatever runs as the test user (or inside a sandbox) is run from a copy
    # in bindir: the clone may sit under a parent that user cannot traverse
    # (root's own 0700 home), and a sandbox hides /tmp. Nothing a test runs
    # as another user is ever named by its place in the source or build tree.

    def tool(self, name):
        """A copy of a helper script that the test user can read."""
        return self._user_copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), name)

    def user_binary(self, rel):
        """A copy of the build tree's binary rel (e.g. "cli/gensee") that the
        test user can run."""
        return self._user_copy(os.path.join(BUILD, rel), os.path.basename(rel))

    def _user_copy(self, src, name):
        dst = os.path.join(self.bindir, name)
        if not os.path.exists(dst):
            shutil.copy2(src, dst)
            os.chmod(dst, 0o755)
        return dst

    def serve(self, ns, *targets):
        """Start netserve.py in namespace ns; returns once it listens."""
        p = subprocess.Popen(self.ns_prefix(ns) + ["/usr/bin/python3", self.tool("netserve.py")] +
                             list(targets), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.children.append(p)
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.kill()
            raise Failure("netserve did not start: %r %s" % (line, p.stderr.read()))
        return p

    def probe_outside(self, ns, *targets):
        """Probes from a process in ns that is in no operation."""
        r = self.ns_run(ns, ["/usr/bin/python3", self.tool("netprobe.py")] + list(targets))
        return json.loads(r.stdout)

    def ns_prefix(self, ns=None):
        ns = ns or self.netns
        return ["nsenter", "--net=/run/netns/" + ns, "--"] if ns else []

    def user_prefix(self):
        return ["setpriv", "--reuid=%d" % self.uid, "--regid=%d" % self.gid, "--clear-groups", "--"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    @property
    def client_sock(self):
        return os.path.join(self.runtime, "client.sock")

    @property
    def boundary_sock(self):
        return os.path.join(self.runtime, "boundary.sock")

    def start(self, state=None, runtime=None, expect_fail=False, args=()):
        log = tempfile.NamedTemporaryFile(prefix="gensee-it-bd.", suffix=".log", delete=False)
        self.logs.append(log.name)
        argv = self.ns_prefix() + [self.boundaryd, "--foreground", "--state-root",
                                   state or self.state, "--runtime-dir", runtime or self.runtime]
        if self.cgroup_base != "gensee":
            argv += ["--cgroup-base", self.cgroup_base]
        argv += list(args)
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        if expect_fail:
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise Failure("boundaryd started with %r" % (argv,))
            return rc, open(log.name).read()
        self.proc = proc
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise Failure("boundaryd exited %d:\n%s" % (proc.returncode, open(log.name).read()))
            try:
                if "result" in call(self.client_sock, "system.status", timeout=1):
                    return proc
            except OSError:
                pass
            time.sleep(0.05)
        raise Failure("boundaryd did not answer in time")

    def start_sensord(self, args=()):
        """Start gensee-sensord and wait until boundaryd says it registered."""
        log = tempfile.NamedTemporaryFile(prefix="gensee-it-sd.", suffix=".log", delete=False)
        self.logs.append(log.name)
        argv = self.ns_prefix() + [os.path.join(BUILD, "daemons", "sensord", "gensee-sensord"),
                                   "--foreground", "--runtime-dir", self.runtime] + list(args)
        self.sensord = subprocess.Popen(argv, stdout=log, stderr=log)
        self.children.append(self.sensord)

        def registered():
            if self.sensord.poll() is not None:
                raise Failure("sensord exited %d:\n%s" % (self.sensord.returncode,
                                                          open(log.name).read()))
            st = self.root_call("system.status")["result"]
            return st["sensord"]["connected"] and st["sensord"]["sensors"]
        return self.wait_for("sensord registration", registered)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc is not None else None
        self.proc = None
        return rc

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def chown_to_user(self, top):
        """Give the tree at top (a test home or workspace) to the test user."""
        for d, _, files in os.walk(top):
            os.chown(d, self.uid, self.gid)
            for n in files:
                os.chown(os.path.join(d, n), self.uid, self.gid)

    def user_env(self, extra=None):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "GENSEE_RUNTIME_DIR": self.runtime,
               "HOME": "/nonexistent", "LANG": "C.UTF-8"}
        env.update(extra or {})
        # Sanitizer builds: the CLI's reports should fail the test, not be lost.
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        return env

    def gensee(self, *args, as_root=False, timeout=60, env=None, cwd="/"):
        """Run the CLI (as the test user unless as_root) and wait for it."""
        argv, kw = self._cli_argv(args, as_root)
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout, env=self.user_env(env), cwd=cwd, **kw)
        no_sanitizer_report(r.stderr)
        return r

    def finish(self, p, timeout=60):
        """Wait for a background CLI; returns (rc, stdout, stderr)."""
        out, err = p.communicate(timeout=timeout)
        no_sanitizer_report(err)
        return p.returncode, out, err

    def gensee_bg(self, *args, as_root=False, env=None):
        argv, kw = self._cli_argv(args, as_root)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=self.user_env(env),
                             cwd="/", **kw)
        self.children.append(p)
        return p

    def _cli_argv(self, args, as_root):
        """The CLI's argv: in the case's namespace, as the test user unless root."""
        pre = self.cli_prefix
        if self.netns is None and not pre:
            kw = {} if as_root else {"user": self.uid, "group": self.gid, "extra_groups": []}
            return [self.cli] + list(args), kw
        user = [] if as_root else self.user_prefix()
        return pre + self.ns_prefix() + user + [self.cli] + list(args), {}

    def user_call(self, path, method, params=None, uid=None):
        uid = self.uid if uid is None else uid
        gid = self.gid if uid == self.uid else uid
        r = subprocess.run(["/usr/bin/python3", "-c", USER_CALL, path, method,
                            json.dumps(params or {})], capture_output=True, text=True,
                           timeout=30, user=uid, group=gid, extra_groups=[],
                           env=self.user_env(), cwd="/")
        check(r.returncode == 0, "user call failed: %s" % r.stderr)
        return json.loads(r.stdout)

    def root_call(self, method, params=None):
        return call(self.boundary_sock, method, params)

    def record(self, opid):
        reply = self.root_call("operation.inspect", {"operation_id": opid})
        check("result" in reply, "inspect %s: %r" % (opid, reply))
        return reply["result"]["record"]

    def wait_for(self, what, fn, timeout=15, interval=0.05):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = fn()
            if v:
                return v
            time.sleep(interval)
        raise Failure("timed out waiting for " + what)

    def running_ops(self):
        reply = self.root_call("operation.list", {"state": "running"})
        return [o["operation_id"] for o in reply["result"]["operations"]]

    def spare_ids(self):
        """Ids of the prepared cells boundaryd keeps for the next network
        operation (STATE/spares/ID: an empty cgroup and a deny-all table)."""
        d = os.path.join(self.state, "spares")
        return set(os.listdir(d)) if os.path.isdir(d) else set()

    def op_cgroups(self):
        base = os.path.join(self.cgmount, self.cgroup_base)
        if not os.path.isdir(base):
            return []
        mine = set(os.listdir(os.path.join(self.state, "operations"))) if os.path.isdir(
            os.path.join(self.state, "operations")) else set()
        mine |= self.spare_ids()
        return [d for d in os.listdir(base) if d in mine]

    def table_owner(self, name, ns=None):
        t = subprocess.run(self.ns_prefix(ns) + ["nft", "list", "table", "inet", name],
                           capture_output=True, text=True)
        m = re.search(r'owner=(op_[0-9a-f]+)', t.stdout)
        return m.group(1) if m else None

    def op_tables(self, ns=None):
        """The gensee_ tables in ns (default: the case's namespace), without
        the prepared cell's (its owner is a spare id)."""
        ns = ns or self.netns
        r = subprocess.run(self.ns_prefix(ns) + ["nft", "list", "tables"], capture_output=True,
                           text=True)
        names = [l.split()[-1] for l in r.stdout.splitlines() if "gensee_" in l]
        spares = self.spare_ids()
        return [n for n in names if self.table_owner(n, ns) not in spares or
                self.table_owner(n, ns) is None]

    def cleanup(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        if self.proc is not None:
            try:
                self.stop()
            except Exception:
                traceback.print_exc()
        # Kill and remove any cgroup this case's operations left behind.
        base = os.path.join(self.cgmount, self.cgroup_base)
        for d in self.op_cgroups():
            path = os.path.join(base, d)
            try:
                with open(os.path.join(path, "cgroup.kill"), "w") as f:
                    f.write("1")
                for _ in range(200):
                    with open(os.path.join(path, "cgroup.events")) as f:
                        if "populated 0" in f.read():
                            break
                    time.sleep(0.02)
                # Empty child cgroups a case's operation made (podman's runc does).
                for sub, dirs, _ in os.walk(path, topdown=False):
                    for n in dirs:
                        os.rmdir(os.path.join(sub, n))
                os.rmdir(path)
            except OSError as e:
                print("cleanup: %s: %s" % (path, e))
        if self.cgroup_base != "gensee":
            try:
                os.rmdir(base)  # this case's own base; the shared one is never removed
            except OSError:
                pass
        self.drop_host_tables()
        for ns in self.namespaces:
            # Killing what still runs inside, then the namespace (and its tables) goes.
            subprocess.run(["ip", "netns", "pids", ns], capture_output=True)
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces = []
        for m in reversed(self.mounts):
            if subprocess.run(["umount", m], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", m], capture_output=True)
        self.mounts = []
        for d in [self.state, self.runtime, self.bindir] + self.cleanup_dirs:
            shutil.rmtree(d, ignore_errors=True)
        for name in self.logs:
            try:
                os.unlink(name)
            except OSError:
                pass

    def anchor_name(self, state=None):
        """The hook anchor table boundaryd keeps for a state root (netop.c)."""
        h = hashlib.blake2b((state or self.state).encode(), digest_size=8).hexdigest()
        return "gsanchor_" + h

    def drop_host_tables(self):
        """Delete the host namespace's nftables tables of this case's operations.
        boundaryd leaves a running operation's table in place when it stops (fail
        closed until the next instance reconciles); a case that ends that way must
        not leave it to the host. Tables are matched by the owner in their comment."""
        # The hook anchor of this case's state root, if a killed boundaryd left it.
        subprocess.run(["nft", "delete", "table", "inet", self.anchor_name()],
                       capture_output=True)
        opdir = os.path.join(self.state, "operations")
        mine = set(os.listdir(opdir)) if os.path.isdir(opdir) else set()
        mine |= self.spare_ids()  # a killed boundaryd leaves its prepared cell
        if not mine:
            return
        r = subprocess.run(["nft", "list", "tables", "inet"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            name = line.split()[-1]
            if not name.startswith("gensee_"):
                continue
            t = subprocess.run(["nft", "list", "table", "inet", name], capture_output=True, text=True)
            m = re.search(r'owner=(op_[0-9a-f]+)', t.stdout)
            if m and m.group(1) in mine:
                subprocess.run(["nft", "delete", "table", "inet", name], capture_output=True)

    def daemon_log(self):
        return "".join(open(n).read() for n in self.logs if os.path.exists(n))


def no_sanitizer_report(text):
    for bad in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        check(bad not in (text or ""), "sanitizer report:\n" + (text or ""))


def process_tree(root, limit=1000):
    """root and its descendants (the children of every thread), depth first,
    at most limit of them."""
    found, unvisited = [], [root]
    while unvisited and len(found) < limit:
        p = unvisited.pop()
        found.append(p)
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    unvisited += [int(c) for c in f.read().split()]
            except OSError:
                pass
    return found


def pids_with_cmdline(needle):
    """Processes whose argv is exactly needle (b"sleep 301" means argv
    ["sleep", "301"]), so a CLI whose arguments mention it does not count."""
    want = needle.replace(b" ", b"\0") + b"\0"
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if f.read() == want:
                    found.append(int(d))
        except OSError:
            pass
    return found


def main(cases):
    if os.geteuid() != 0:
        print("integration tests need root (they use cgroups and start boundaryd)")
        sys.exit(1)
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print("usage: %s CASE\ncases: %s" % (sys.argv[0], " ".join(sorted(cases))))
        sys.exit(2)
    name = sys.argv[1]
    env = Env()

    # Killed (meson's timeout, an operator's Ctrl-C): a failure like any
    # other, so every finally and the cleanup below still run and the case
    # leaves no namespace, cgroup, table, mount or loop device behind.
    def killed(signum, frame):
        raise Failure("killed by signal %d" % signum)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, killed)
    try:
        cases[name](env)
    except Exception as e:
        traceback.print_exc()
        print("--- boundaryd log ---\n" + env.daemon_log())
        env.cleanup()
        print("FAIL %s: %s" % (name, e))
        sys.exit(1)
    log = env.daemon_log()
    env.cleanup()
    for bad in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        if bad in log:
            print("--- boundaryd log ---\n" + log)
            print("FAIL %s: sanitizer report in boundaryd log" % name)
            sys.exit(1)
    print("PASS %s" % name)
