"""Ways around the boundary (issue 9), tried by a sandboxed agent on the
real kernel, with the real CLI and daemon, as the unprivileged test user.

Every attack is also made without the control that stops it (outside any
operation, or with that one control turned off in the policy) and shown to
work there: a refusal is then the control's doing, not something the test
user could never do. The attacks themselves are tests/integration/escape.c.
"""

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import termios
import time

from harness import check, main

RUN = ["run", "--sandbox", "linux", "--deny-all"]
# Inside the sandbox ptrace is refused and LeakSanitizer (in a sanitized
# build) needs it: leak checking is for the CLI outside.
NOLSAN = ["env", "ASAN_OPTIONS=detect_leaks=0"]


def setup(env):
    env.use_netns()
    env.start()
    return env.user_binary("tests/integration/escape")


def user_dir(env, prefix, base="/var/tmp"):
    """A directory the test user owns (outside /tmp unless base says so)."""
    d = tempfile.mkdtemp(prefix=prefix, dir=base)
    os.chown(d, env.uid, env.gid)
    os.chmod(d, 0o755)
    env.cleanup_dirs.append(d)
    return d


def write_as_user(env, path, text, mode=0o600):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    os.chown(path, env.uid, env.gid)


def gensee_home(env, policy=None):
    """A GENSEE_HOME the test user owns, with policy.json = policy (if any)."""
    home = user_dir(env, "gensee-it-gh.")
    if policy is not None:
        write_as_user(env, os.path.join(home, "policy.json"), json.dumps(policy), 0o644)
    return home


def outside(env, argv, penv=None):
    """argv as the test user in the case's namespace, in no operation."""
    return subprocess.run(env.ns_prefix() + env.user_prefix() + argv, capture_output=True,
                          text=True, timeout=60, env=penv)


def attempts(text):
    lines = [l for l in text.splitlines() if l.startswith('{"')]
    check(lines, "no result line in %r" % text)
    return json.loads(lines[-1])


def sandboxed(env, tool, specs, extra=(), gh=None, user_env=None, **kw):
    """The attempts from inside a sandboxed run; returns (attempts, CompletedProcess)."""
    e = {"GENSEE_HOME": gh or gensee_home(env, {})}
    e.update(user_env or {})
    r = env.gensee(*RUN, *extra, "--", *NOLSAN, tool, *specs, env=e, **kw)
    check(r.returncode == 0, "rc %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    # With --json the probe's line is on stderr (stdout is the run's JSON alone).
    return attempts(r.stdout + "\n" + r.stderr), r


def spawn_user(env, argv, **kw):
    p = subprocess.Popen(env.ns_prefix() + env.user_prefix() + argv, **kw)
    env.children.append(p)
    return p


def wait_user_pid(env, argv0):
    """The pid of the test user's process whose argv[0] ends with argv0 (newest)."""
    def find():
        best = None
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                st = os.stat("/proc/" + d)
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    a0 = f.read().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if st.st_uid == env.uid and a0.endswith(argv0):
                best = max(best or 0, int(d))
        return best
    return env.wait_for(argv0, find)


def same_uid_processes_unreachable(env):
    """The launcher and any other process of the user are out of the agent's reach:
    no /proc/PID/mem, pidfd_getfd, perf_event_open, kcmp or signal."""
    tool = setup(env)
    victim = spawn_user(env, ["sleep", "300"], stdin=subprocess.PIPE)
    vpid = wait_user_pid(env, "sleep")
    specs = ["procmem:%d" % vpid, "getfd:%d:0" % vpid, "perf:%d" % vpid, "kcmp:%d" % vpid,
             "kill:%d" % vpid]
    # Outside any operation the test user reaches its own process every way.
    got = attempts(outside(env, [tool] + specs).stdout)
    check(all(v == "ok" for v in got.values()), "the probe proves nothing: %r" % got)
    # A sandboxed agent reaches none of it, nor its own launcher.
    launcher = ["procmem:parent", "getfd:parent:0", "perf:parent", "kill:parent"]
    got, _ = sandboxed(env, tool, specs + launcher)
    check(all(v in ("EPERM", "EACCES") for v in got.values()), "reached: %r" % got)
    check(victim.poll() is None, "the victim died")
    # The launcher is non-dumpable for its whole life: even an agent that is
    # not sandboxed cannot write into it or take its descriptors.
    r = env.gensee("run", "--", *NOLSAN, tool, "procmem:parent", "getfd:parent:0",
                   "procmem:%d" % vpid)
    got = attempts(r.stdout)
    check(got["procmem:parent"] == "EACCES" and got["getfd:parent:0"] == "EPERM",
          "the launcher is reachable: %r" % got)
    check(got["procmem:%d" % vpid] == "ok", "unsandboxed control: %r" % got)


def user_services_hidden(env):
    """tmux, session-bus-like sockets under $XDG_RUNTIME_DIR and abstract sockets of
    the user are not reachable; --allow-unix lets one chosen socket through."""
    tool = setup(env)
    xdg = user_dir(env, "gensee-it-xdg.")
    os.chmod(xdg, 0o700)
    bus = os.path.join(xdg, "bus")
    name = "gensee-it-%d" % os.getpid()
    server = ("import socket, sys, time\n"
              "for a in sys.argv[1:]:\n"
              "    s = socket.socket(socket.AF_UNIX); s.bind(a.replace('@', '\\0', 1)); s.listen(8)\n"
              "    globals().setdefault('keep', []).append(s)\n"
              "print('ready', flush=True); time.sleep(300)\n")
    srv = spawn_user(env, ["/usr/bin/python3", "-c", server, bus, "@" + name],
                     stdout=subprocess.PIPE, text=True)
    check(srv.stdout.readline().strip() == "ready", "socket server did not start")
    # The user's tmux server, on its default socket in /tmp/tmux-UID.
    mark = user_dir(env, "gensee-it-mark.")
    # The test user's login shell is nologin: tmux runs commands with $SHELL.
    tenv = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TERM": "xterm", "SHELL": "/bin/sh"}
    r = outside(env, ["tmux", "new-session", "-d", "sleep 300"], penv=tenv)
    check(r.returncode == 0, "tmux server: %s" % r.stderr)
    try:
        specs = ["unix:" + bus, "abstract:" + name]
        attack = 'tmux new-window -d "touch %s/pwned-$0"; echo tmux=$?' % mark
        # Without the mount view and Landlock's scopes every one of them works.
        off = gensee_home(env, {"linux": {"mount_view": {"mode": "off"},
                                          "landlock": {"mode": "off"}}})
        got, _ = sandboxed(env, tool, specs, gh=off, user_env={"XDG_RUNTIME_DIR": xdg})
        check(got == {s: "ok" for s in specs}, "the probe proves nothing: %r" % got)
        r = env.gensee(*RUN, "--", "sh", "-c", attack, "off", env={"GENSEE_HOME": off,
                                                                    "TERM": "xterm"})
        check("tmux=0" in r.stdout, "tmux control: %s %s" % (r.stdout, r.stderr))
        env.wait_for("the unsupervised tmux window", lambda: os.path.exists(
            os.path.join(mark, "pwned-off")))
        # By default: hidden (pathname) and scoped (abstract).
        got, r = sandboxed(env, tool, specs, user_env={"XDG_RUNTIME_DIR": xdg})
        check(got["unix:" + bus] == "ENOENT" and got["abstract:" + name] == "EPERM",
              "reached the user's services: %r" % got)
        r = env.gensee(*RUN, "--", "sh", "-c", attack, "on", env={
            "GENSEE_HOME": gensee_home(env, {}), "XDG_RUNTIME_DIR": xdg, "TERM": "xterm"})
        check("tmux=0" not in r.stdout, "tmux reached: %s %s" % (r.stdout, r.stderr))
        time.sleep(0.5)
        check(not os.path.exists(os.path.join(mark, "pwned-on")), "tmux ran the agent's command")
        # The same socket let through by name, and recorded.
        r = env.gensee(*RUN, "--allow-unix", bus, "--json", "--", *NOLSAN, tool, "unix:" + bus,
                       env={"GENSEE_HOME": gensee_home(env, {}), "XDG_RUNTIME_DIR": xdg})
        check(r.returncode == 0, r.stderr)
        check(attempts(r.stderr) == {"unix:" + bus: "ok"}, r.stderr)
        summary = json.loads(r.stdout)
        mv = env.record(summary["operation_id"])["host_controls"]["mount_view"]
        check(mv["applied"] is True and mv["unix_sockets"] == [bus] and xdg in mv["hidden"],
              "%r" % mv)
        # Something that is not a socket is refused before anything runs.
        r = env.gensee(*RUN, "--allow-unix", xdg, "--", "true",
                       env={"GENSEE_HOME": gensee_home(env, {})})
        check(r.returncode == 125 and "not a Unix socket" in r.stderr, r.stderr)
    finally:
        outside(env, ["tmux", "kill-server"], penv=tenv)
        shutil.rmtree("/tmp/tmux-%d" % env.uid, ignore_errors=True)


def _ctty(fd):
    def pre():
        os.setsid()
        fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
    return pre


def terminal_injection_denied(env):
    """With the user's terminal as stdin, TIOCSTI (and its 64-bit disguise) cannot
    push a command into the shell that runs after gensee returns."""
    tool = setup(env)
    for policy, want in (({"linux": {"seccomp": {"deny_terminal_injection": False}}}, "ok"),
                         ({}, "EPERM")):
        master, slave = os.openpty()
        try:
            argv = env.ns_prefix() + env.user_prefix() + [env.cli, *RUN, "--", *NOLSAN, tool,
                                                          "tiocsti:0", "tiocsti64:0"]
            p = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=env.user_env({"GENSEE_HOME": gensee_home(env, policy)}),
                                 preexec_fn=_ctty(slave), cwd="/")
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0, "rc %d: %s" % (p.returncode, err))
            got = attempts(out)
            check(got == {"tiocsti:0": want, "tiocsti64:0": want}, "%s: %r" % (policy, got))
            pushed = b""
            while select.select([master], [], [], 0.2)[0]:
                pushed += os.read(master, 64)
            if want == "ok":
                check(b"#" in pushed, "control: nothing was pushed (%r)" % pushed)
            else:
                check(b"#" not in pushed, "pushed into the terminal: %r" % pushed)
        finally:
            os.close(master)
            os.close(slave)


def kernel_surfaces_denied(env):
    """io_uring, userfaultfd, keyrings, file handles, odd personalities and socket
    families netfilter cannot see (AF_VSOCK, also with high bits set)."""
    tool = setup(env)
    specs = ["iouring", "userfaultfd", "keyctl", "personality", "handle:/etc/passwd",
             "vsock", "vsock64"]
    got = attempts(outside(env, [tool] + specs).stdout)
    check(all(v != "EPERM" for v in got.values()), "the probe proves nothing: %r" % got)
    got, r = sandboxed(env, tool, specs, extra=["--json"])
    check(got == {s: "EPERM" for s in specs}, "reached: %r" % got)
    # Each refusal is listed: the launcher answers the filter's notifications.
    summary = json.loads(r.stdout)
    want = {"io_uring_setup": 1, "userfaultfd": 1, "keyctl": 1, "personality": 1,
            "name_to_handle_at": 1, "socket": 2}
    check(summary["seccomp_denials"] == want, "%r" % summary.get("seccomp_denials"))
    ex = env.record(summary["operation_id"])["lifecycle"]["exit"]
    check(ex["seccomp_denials"] == want and ex["reported_by"] == "launcher", "%r" % ex)
    tl = env.gensee("timeline", "--operation", summary["operation_id"])
    check("seccomp_denied   io_uring_setup refused 1 time(s)" in tl.stdout and
          "socket refused 2 time(s)" in tl.stdout, tl.stdout)
    r = env.gensee(*RUN, "--", *NOLSAN, tool, "iouring", "iouring",
                   env={"GENSEE_HOME": gensee_home(env, {})})
    check("seccomp refused: io_uring_setup (2)" in r.stderr, r.stderr)
    # A sandboxed run that fails says where a refusal may have come from.
    r = env.gensee(*RUN, "--", "sh", "-c", "exit 3", env={"GENSEE_HOME": gensee_home(env, {})})
    check(r.returncode == 3 and "sandboxed: an EACCES on a write may be Landlock" in r.stderr,
          r.stderr)


def credentials_hidden_and_policy_readonly(env):
    """Credentials under $HOME are hidden, and $GENSEE_HOME is read-only, even when
    the workspace is $HOME itself (which Landlock then lets the agent write)."""
    setup(env)
    home = user_dir(env, "gensee-it-home.")
    secrets = {".ssh/id_ed25519": "PRIVATE KEY", ".aws/credentials": "AWS SECRET",
               ".netrc": "NETRC SECRET", ".config/gh/hosts.yml": "GH TOKEN",
               ".docker/config.json": "DOCKER AUTH", ".git-credentials": "GIT CRED"}
    for rel, text in secrets.items():
        write_as_user(env, os.path.join(home, rel), text + "\n")
    pol = os.path.join(home, ".gensee", "policy.json")
    write_as_user(env, pol, "{}", 0o600)
    env.chown_to_user(home)
    script = ("for f in %s; do cat $HOME/$f; done; "
              "ASAN_OPTIONS=detect_leaks=0 gensee policy set linux.seccomp.enabled false; "
              "echo policy=$?; "
              "echo '{}' > $HOME/.gensee/policy.json; echo write=$?; "
              "echo hi > $HOME/notes.txt; echo home=$?" % " ".join(secrets))
    cli_env = {"HOME": home, "PATH": "%s:/usr/bin:/bin" % env.bindir}
    # The user reads them outside any operation (the probe works).
    r = outside(env, ["sh", "-c", "for f in %s; do cat %s/$f; done" % (" ".join(secrets), home)])
    check(all(t in r.stdout for t in secrets.values()), "outside: %r" % r.stdout)
    # Without the mount view the agent reads them and loosens its next run.
    before = open(pol).read()
    write_as_user(env, pol, json.dumps({"linux": {"mount_view": {"mode": "off"}}}), 0o600)
    r = env.gensee(*RUN, "--", "sh", "-c", script, env=cli_env, cwd=home)
    check("PRIVATE KEY" in r.stdout and "policy=0" in r.stdout, "control: %s %s" % (
        r.stdout, r.stderr))
    write_as_user(env, pol, before, 0o600)
    # By default: nothing to read, the policy cannot change, the workspace can.
    r = env.gensee(*RUN, "--json", "--", "sh", "-c", script, env=cli_env, cwd=home)
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    out = r.stdout + r.stderr  # --json: the agent's stdout is on stderr
    leaked = [t for t in secrets.values() if t in out]
    check(not leaked, "leaked %r: %s" % (leaked, out))
    check("policy=0" not in out and "write=0" not in out and "home=0" in out, out)
    check(open(pol).read() == before, "the policy changed: %r" % open(pol).read())
    summary = json.loads(r.stdout)
    hc = env.record(summary["operation_id"])["host_controls"]
    check(os.path.join(home, ".ssh") in hc["mount_view"]["hidden"] and
          os.path.join(home, ".gensee") in hc["mount_view"]["read_only"] and
          hc["seccomp"]["enabled"] is True, "%r" % hc)


def private_tmp_and_workspace(env):
    """/tmp is private; a workspace under /tmp is still the workspace; nothing else
    outside the workspace, /tmp and the caches is writable."""
    setup(env)
    hostfile = os.path.join(user_dir(env, "gensee-it-hosttmp.", base="/tmp"), "note")
    write_as_user(env, hostfile, "HOST TMP\n", 0o644)
    ws = user_dir(env, "gensee-it-ws.", base="/tmp")
    elsewhere = user_dir(env, "gensee-it-else.")
    leak = "/tmp/gensee-it-agent-%d" % os.getpid()
    script = ("pwd; cat %s; echo cat=$?; echo x > %s; echo tmp=$?; echo made > out.txt; "
              "echo ws=$?; touch %s/x; echo else=$?" % (hostfile, leak, elsewhere))
    r = env.gensee(*RUN, "--json", "--", "sh", "-c", script,
                   env={"GENSEE_HOME": gensee_home(env, {})}, cwd=ws)
    check(r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr))
    out = r.stderr  # --json: the agent's stdout is on stderr, stdout is the run's JSON
    lines = out.splitlines()
    check(lines[0] == ws, "pwd %r" % lines[0])
    check("HOST TMP" not in out + r.stdout and "cat=1" in out, "host /tmp visible: %s" % out)
    check("tmp=0" in out and not os.path.exists(leak), "private /tmp: %s" % out)
    check("ws=0" in out and open(os.path.join(ws, "out.txt")).read() == "made\n",
          "workspace: %s" % out)
    check("else=1" in out and not os.path.exists(os.path.join(elsewhere, "x")),
          "wrote outside the workspace: %s" % out)
    # The control: the same directory is writable to the user outside.
    check(outside(env, ["touch", os.path.join(elsewhere, "x")]).returncode == 0, "control")
    summary = json.loads(r.stdout)
    hc = env.record(summary["operation_id"])["host_controls"]
    check(hc["mount_view"]["private_tmp"] is True and hc["landlock"]["applied"] is True and
          hc["landlock"]["scoped"] == ["abstract_unix_socket", "signal"] and
          ws in hc["landlock"]["read_write"], "%r" % hc)


def host_policy_is_a_floor(env):
    """An administrator's /etc/gensee/policy.json: a user's policy and options can
    only narrow it, and a host policy others could have written is refused."""
    setup(env)
    env.host_policy({"linux": {"seccomp": {"enabled": True},
                               "network": {"allow": ["192.0.2.0/24,tcp"],
                                           "deny": ["192.0.2.66"]}}})
    loose = gensee_home(env, {"linux": {"seccomp": {"enabled": False}}})
    r = env.gensee(*RUN, "--json", "--", "true", env={"GENSEE_HOME": loose})
    check(r.returncode == 0, r.stderr)
    opid = json.loads(r.stdout)["operation_id"]
    check(env.record(opid)["host_controls"]["seccomp"]["enabled"] is True,
          "the user's policy turned seccomp off under the host's floor")
    r = env.gensee(*RUN, "--no-linux-seccomp", "--", "true", env={"GENSEE_HOME": loose})
    check(r.returncode == 125 and "requires seccomp" in r.stderr, r.stderr)
    r = env.gensee("run", "--sandbox", "linux", "--allow-net", "198.51.100.1,tcp,80", "--",
                   "true", env={"GENSEE_HOME": loose})
    check(r.returncode == 125 and "198.51.100.1,tcp,80 is outside" in r.stderr, r.stderr)
    r = env.gensee("run", "--sandbox", "linux", "--allow-net", "192.0.2.1,tcp,80", "--json",
                   "--", "true", env={"GENSEE_HOME": loose})
    check(r.returncode == 0, r.stderr)
    with open(os.path.join(env.state, "network-operations", json.loads(r.stdout)["operation_id"],
                           "record.json")) as f:
        net = f.read()
    check("192.0.2.66" in net, "the host's deny entry is gone: %s" % net)
    bad = gensee_home(env, {"linux": {"network": {"allow": ["0.0.0.0/0"]}}})
    r = env.gensee(*RUN, "--", "true", env={"GENSEE_HOME": bad})
    check(r.returncode == 125 and "outside what the host policy" in r.stderr, r.stderr)
    # A host policy someone else could have written is no floor at all: refused.
    env.host_policy({"linux": {}}, mode=0o666)
    r = env.gensee(*RUN, "--", "true", env={"GENSEE_HOME": loose})
    check(r.returncode == 125 and "root's and writable by root only" in r.stderr, r.stderr)
    # Without it, the same user policy runs as the user asked.
    env.cli_prefix = []
    r = env.gensee(*RUN, "--json", "--", "true", env={"GENSEE_HOME": loose})
    check(r.returncode == 0, r.stderr)
    opid = json.loads(r.stdout)["operation_id"]
    check(env.record(opid)["host_controls"]["seccomp"]["enabled"] is False, "control")


GIT = ["git", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c",
       "init.defaultBranch=main"]

# Inside the run: plant what git would run later, and work normally.
GIT_ATTACK = r"""
try() { name=$1; shift; if "$@" 2>/dev/null; then echo "$name=ok"; else echo "$name=refused"; fi; }
try hook sh -c 'printf "#!/bin/sh\ntouch $0.ran\n" > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout'
try config sh -c 'printf "[core]\n\tfsmonitor = touch fsmonitor.ran\n" >> .git/config'
try hookspath sh -c 'printf "#!/bin/sh\ntouch husky.ran\n" > .githooks/post-checkout && chmod +x .githooks/post-checkout'
echo work >> file.txt
try commit git -c user.name=a -c user.email=a@example.org commit -q -am work
"""


def git_metadata_read_only(env):
    """A workspace that is a git repository: its .git/hooks, .git/config and
    a core.hooksPath inside it are read-only in the run, so nothing the agent
    plants runs at the user's next git command outside; commits still work.
    Control: with linux.mount_view.protect_git false the same plant works and
    the user's checkout runs it."""
    setup(env)
    results = {}
    for protect in (True, False):
        ws = user_dir(env, "gensee-it-git.")
        subprocess.run(GIT + ["init", "-q", ws], check=True)
        os.makedirs(os.path.join(ws, ".githooks"))
        with open(os.path.join(ws, "file.txt"), "w") as f:
            f.write("one\n")
        subprocess.run(GIT + ["-C", ws, "add", "file.txt"], check=True)
        subprocess.run(GIT + ["-C", ws, "commit", "-q", "-m", "one"], check=True)
        # A repository whose hooks live in the worktree (husky's way).
        subprocess.run(GIT + ["-C", ws, "config", "core.hooksPath", ".githooks"], check=True)
        for d, _, files in os.walk(ws):
            os.chown(d, env.uid, env.gid)
            for n in files:
                os.chown(os.path.join(d, n), env.uid, env.gid)
        gh = gensee_home(env, {} if protect else {"linux": {"mount_view": {"protect_git": False}}})
        r = env.gensee(*RUN, "--json", "--", "/bin/sh", "-c", GIT_ATTACK, env={"GENSEE_HOME": gh},
                       cwd=ws)
        check(r.returncode == 0, r.stderr)
        got = dict(l.split("=", 1) for l in r.stderr.splitlines() if "=" in l and
                   not l.startswith("gensee"))
        # The user's next commands, outside any sandbox.
        subprocess.run(["setpriv", "--reuid=%d" % env.uid, "--regid=%d" % env.gid,
                        "--clear-groups", "--"] + GIT + ["-C", ws, "checkout", "-q", "-b", "next"],
                       capture_output=True, env={"PATH": "/usr/bin:/bin", "HOME": ws})
        ran = [n for n in os.listdir(ws) if n.endswith(".ran")] + \
            [n for n in os.listdir(os.path.join(ws, ".githooks")) if n.endswith(".ran")]
        results[protect] = (got, ran, json.loads(r.stdout)["record"]["host_controls"]
                            ["mount_view"].get("git_metadata_read_only"))
    got, ran, ro = results[True]
    check(got == {"hook": "refused", "config": "refused", "hookspath": "refused",
                  "commit": "ok"} and ran == [], "protected: %r ran %r" % (got, ran))
    check(any(p.endswith("/.git/config") for p in ro) and any(p.endswith("/.githooks")
                                                              for p in ro), "record: %r" % ro)
    got, ran, ro = results[False]
    check(got.get("hook") == "ok" and got.get("hookspath") == "ok" and ran and not ro,
          "control: %r ran %r" % (got, ran))


if __name__ == "__main__":
    main({f.__name__: f for f in (same_uid_processes_unreachable, user_services_hidden,
                                  terminal_injection_denied, kernel_surfaces_denied,
                                  credentials_hidden_and_policy_readonly,
                                  private_tmp_and_workspace, host_policy_is_a_floor,
                                  git_metadata_read_only)})
