"""gensee policy setup|show|get|set as the test user, on a private GENSEE_HOME.

No daemon: the policy file is the user's own, read and written by the CLI.
"""

import json
import os
import stat
import tempfile

from harness import check, main


def private_home(env):
    """A directory the test user owns, and a GENSEE_HOME in it that does not exist yet."""
    base = tempfile.mkdtemp(prefix="gensee-it-policy.", dir=env.bindir)
    os.chown(base, env.uid, env.gid)
    os.chmod(base, 0o700)
    home = os.path.join(base, "home")
    return base, home, os.path.join(home, "policy.json")


def policy(env, home, *args):
    return env.gensee("policy", *args, env={"GENSEE_HOME": home})


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def setup_creates_private_file(env):
    base, home, pol = private_home(env)
    r = policy(env, home, "setup")
    check(r.returncode == 0, "setup: %d %s" % (r.returncode, r.stderr))
    check(pol in r.stdout, "setup does not say where it wrote: %r" % r.stdout)
    st = os.stat(home)
    check(stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == env.uid, "home mode %o uid %d" %
          (stat.S_IMODE(st.st_mode), st.st_uid))
    st = os.lstat(pol)
    check(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == env.uid,
          "policy.json mode %o uid %d" % (stat.S_IMODE(st.st_mode), st.st_uid))
    with open(pol) as f:
        doc = json.load(f)
    lx = doc["linux"]
    check(lx["posture"] == "enforce" and lx["seccomp"]["enabled"] is True and
          lx["seccomp"]["deny_mount_namespace_changes"] is True and
          lx["landlock"]["default_paths"] is True and lx["fanotify"]["enabled"] is False and
          lx["mount_view"]["mode"] == "required" and lx["unix_sockets"]["allow"] == [] and
          lx["fanotify"]["action"] == "deny" and lx["fanotify"]["paths"] == [] and
          lx["network"]["max_lease_ttl_seconds"] == 0, "defaults: %r" % doc)
    # The network mode follows allow/deny unless set, and the Landlock mode the
    # kernel, so setup leaves them out.
    check("mode" not in lx["network"], "setup fixed the network mode: %r" % lx["network"])
    check("mode" not in lx["landlock"], "setup fixed the Landlock mode: %r" % lx["landlock"])
    # No temporary file is left beside it.
    check(os.listdir(home) == ["policy.json"], "left in home: %r" % os.listdir(home))
    # An existing policy is kept without --force.
    r = policy(env, home, "set", "linux.posture", "warn")
    check(r.returncode == 0, r.stderr)
    before = read_bytes(pol)
    r = policy(env, home, "setup")
    check(r.returncode != 0 and "--force" in r.stderr, "setup over a policy: %d %s" %
          (r.returncode, r.stderr))
    check(read_bytes(pol) == before, "setup without --force changed the file")
    r = policy(env, home, "setup", "--force", "--json")
    check(r.returncode == 0 and json.loads(r.stdout)["path"] == pol, r.stdout + r.stderr)
    r = policy(env, home, "get", "linux.posture")
    check(r.stdout == "enforce\n", "after setup --force: %r" % r.stdout)


def set_get_round_trips(env):
    base, home, pol = private_home(env)
    # set on no file creates it (and its directory).
    cases = [
        ("linux.posture", "isolate", "isolate", '"isolate"'),
        ("linux.seccomp.enabled", "false", "false", "false"),
        ("linux.seccomp.deny_bpf", "true", "true", "true"),
        ("linux.landlock.mode", "best_effort", "best_effort", '"best_effort"'),
        ("linux.fanotify.enabled", "true", "true", "true"),
        ("linux.fanotify.action", "speculate", "speculate", '"speculate"'),
        ("linux.network.mode", "monitor", "monitor", '"monitor"'),
        ("linux.network.max_lease_ttl_seconds", "3600", "3600", "3600"),
        # A single item is a one-item list (seed 003).
        ("linux.fanotify.paths", "/tmp/gensee-demo-secret/**", '["/tmp/gensee-demo-secret/**"]',
         None),
        ("linux.landlock.read_only", '["/usr", "/etc"]', '["/usr","/etc"]', None),
        ("linux.landlock.read_write", "/tmp", '["/tmp"]', None),
        ("linux.network.deny", "169.254.169.254", '["169.254.169.254"]', None),
        ("linux.network.lease_scopes", '["192.0.2.0/24,tcp,443", "2001:db8::/32,udp,5000-5100"]',
         '["192.0.2.0/24,tcp,443","2001:db8::/32,udp,5000-5100"]', None),
        ("linux.fanotify.rules", '{"path": "~/.aws/**", "action": "ask"}',
         '[{"path":"~/.aws/**","action":"ask"}]', None),
    ]
    for key, value, plain, as_json in cases:
        r = policy(env, home, "set", key, value)
        check(r.returncode == 0, "set %s %s: %d %s" % (key, value, r.returncode, r.stderr))
        r = policy(env, home, "get", key)
        check(r.returncode == 0 and r.stdout == plain + "\n", "get %s: %r %s" % (key, r.stdout, r.stderr))
        r = policy(env, home, "get", key, "--json")
        check(r.returncode == 0 and json.loads(r.stdout) == json.loads(as_json or plain),
              "get --json %s: %r" % (key, r.stdout))
    # Every earlier set survived the later ones.
    with open(pol) as f:
        doc = json.load(f)
    lx = doc["linux"]
    check(lx["posture"] == "isolate" and lx["seccomp"] == {"enabled": False, "deny_bpf": True} and
          lx["fanotify"]["paths"] == ["/tmp/gensee-demo-secret/**"] and
          lx["network"]["max_lease_ttl_seconds"] == 3600 and
          lx["fanotify"]["rules"] == [{"path": "~/.aws/**", "action": "ask"}], "%r" % doc)
    check(stat.S_IMODE(os.stat(pol).st_mode) == 0o600, "mode after set")
    # Unset keys read as their defaults.
    r = policy(env, home, "get", "linux.seccomp.deny_ptrace")
    check(r.stdout == "true\n", "default: %r" % r.stdout)
    r = policy(env, home, "get", "linux.network.allow", "--json")
    check(json.loads(r.stdout) == [], "default list: %r" % r.stdout)
    # A hostname is kept, with a warning that enforcement skips it.
    r = policy(env, home, "set", "linux.network.allow", '["1.1.1.1,tcp,443", "api.example.com"]',
               "--json")
    check(r.returncode == 0, r.stderr)
    out = json.loads(r.stdout)
    check(out["key"] == "linux.network.allow" and out["value"] == ["1.1.1.1,tcp,443", "api.example.com"],
          "%r" % out)
    check("api.example.com" in r.stderr and "skipped" in r.stderr, "no warning: %r" % r.stderr)
    check(any("api.example.com" in w for w in out["warnings"]), "%r" % out)
    # Unknown keys are usage errors.
    for args in (("get", "linux.nope"), ("set", "linux.seccomp", "true"), ("get", "linux")):
        r = policy(env, home, *args)
        check(r.returncode == 125 and args[1] in r.stderr, "%r: %d %s" % (args, r.returncode,
                                                                            r.stderr))


def invalid_value_refused_file_unchanged(env):
    base, home, pol = private_home(env)
    r = policy(env, home, "setup")
    check(r.returncode == 0, r.stderr)
    r = policy(env, home, "set", "linux.network.allow", "10.0.0.0/8")
    check(r.returncode == 0, r.stderr)
    before = read_bytes(pol)
    before_stat = os.stat(pol)
    bad = [
        ("linux.posture", "strict"),
        ("linux.seccomp.enabled", "yes"),
        ("linux.landlock.mode", "best-effort"),
        ("linux.fanotify.action", "block"),
        ("linux.network.mode", "deny_all"),
        ("linux.network.max_lease_ttl_seconds", "86401"),
        ("linux.network.max_lease_ttl_seconds", "1h"),
        ("linux.fanotify.paths", "../secret/**"),
        ("linux.fanotify.paths", "relative/**"),
        ("linux.fanotify.paths", '["/ok/**", "/a/../b"]'),
        ("linux.landlock.read_only", "usr"),
        ("linux.landlock.read_write", "[1]"),
        ("linux.network.allow", "10.0.0.0/33"),
        ("linux.network.allow", "10.0.0.1,icmp"),
        ("linux.network.deny", "10.0.0.1,tcp,70000"),
        ("linux.network.allow", '["10.0.0.1"'),
        ("linux.network.allow", '[], "v": ["1.1.1.1"]'),
        ("linux.fanotify.rules", "~/.ssh/**"),
        ("linux.fanotify.rules", '[{"path": "~/.ssh/**", "action": "maybe"}]'),
        ("linux.fanotify.rules", '[{"path": "~/.ssh/**", "action": "deny", "why": 1}]'),
    ]
    for key, value in bad:
        r = policy(env, home, "set", key, value)
        check(r.returncode == 125, "set %s %r: rc %d %s" % (key, value, r.returncode, r.stderr))
        check(key in r.stderr, "set %s %r: key not named: %s" % (key, value, r.stderr))
        check(read_bytes(pol) == before, "set %s %r changed the file" % (key, value))
    st = os.stat(pol)
    check(st.st_ino == before_stat.st_ino and st.st_mtime_ns == before_stat.st_mtime_ns,
          "the file was rewritten")
    check(sorted(os.listdir(home)) == ["policy.json"], "left in home: %r" % os.listdir(home))
    # A refused value with no policy yet creates nothing.
    base2, home2, pol2 = private_home(env)
    r = policy(env, home2, "set", "linux.posture", "strict")
    check(r.returncode == 125 and not os.path.exists(home2), "created %s" % home2)


def symlinked_policy_refused(env):
    base, home, pol = private_home(env)
    r = policy(env, home, "setup")
    check(r.returncode == 0, r.stderr)
    # The link points at a valid policy the user owns: it is refused all the same.
    target = os.path.join(base, "elsewhere.json")
    os.rename(pol, target)
    os.symlink(target, pol)
    os.lchown(pol, env.uid, env.gid)
    before = read_bytes(target)
    for args in (("get", "linux.posture"), ("show",), ("show", "--json"),
                 ("set", "linux.posture", "warn"), ("setup",), ("setup", "--force")):
        r = policy(env, home, *args)
        check(r.returncode != 0 and "symlink" in r.stderr, "%r: rc %d %s" % (args, r.returncode, r.stderr))
    check(read_bytes(target) == before, "the link target changed")
    check(os.path.islink(pol), "the link was replaced")


def show_json_defaults(env):
    base, home, pol = private_home(env)
    # No file: the effective policy is all defaults.
    r = policy(env, home, "show", "--json")
    check(r.returncode == 0, r.stderr)
    doc = json.loads(r.stdout)
    lx = doc["linux"]
    check(set(doc) == {"linux"} and set(lx) == {"posture", "seccomp", "landlock", "mount_view",
                                                "unix_sockets", "agents", "fanotify",
                                                "network"},
          "%r" % doc)
    check(lx["posture"] == "enforce" and all(lx["seccomp"][k] is True for k in
          ("enabled", "deny_ptrace", "deny_bpf", "deny_kernel_modules", "deny_mount_namespace_changes",
           "deny_kernel_attack_surface", "deny_terminal_injection", "deny_socket_families")),
          "%r" % lx)
    # This kernel has Landlock: on, required, from the default lists.
    check(lx["landlock"] == {"mode": "required", "default_paths": True, "read_only": [],
                             "read_write": []}, "%r" % lx["landlock"])
    check(lx["mount_view"] == {"mode": "required", "protect_git": True, "hide": []} and
          lx["unix_sockets"] == {"allow": []}, "%r" % lx)
    check(lx["fanotify"] == {"enabled": False, "paths": [], "action": "deny", "rules": [],
                             "on_sensor_loss": "freeze"},
          "%r" % lx["fanotify"])
    check(lx["network"] == {"mode": "allowlist", "allow": [], "deny": [], "lease_scopes": [],
                            "http_methods": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
                                             "OPTIONS"],
                            "max_lease_ttl_seconds": 0}, "%r" % lx["network"])
    check(not os.path.exists(home), "show created %s" % home)
    r = policy(env, home, "show")
    check(r.returncode == 0 and "linux.posture" in r.stdout and "(default)" in r.stdout, r.stdout)
    # Deny only: monitor mode, as run decides; values set show as set.
    r = policy(env, home, "set", "linux.network.deny", "169.254.169.254")
    check(r.returncode == 0, r.stderr)
    doc = json.loads(policy(env, home, "show", "--json").stdout)
    check(doc["linux"]["network"]["mode"] == "monitor" and
          doc["linux"]["network"]["deny"] == ["169.254.169.254"], "%r" % doc["linux"]["network"])
    lines = {l.split()[0]: l for l in policy(env, home, "show").stdout.splitlines()
             if l and not l.startswith("#")}
    check("(default)" not in lines["linux.network.deny"] and "(default)" in lines["linux.posture"],
          "%r" % lines)


def corrupted_policy_fails_closed(env):
    base, home, pol = private_home(env)
    r = policy(env, home, "setup")
    check(r.returncode == 0, r.stderr)
    bad = [
        (b"{not json", "not valid JSON"),
        (b"", "empty"),
        (b'{"linux": {"posture": "enforce"}} x', "after"),
        (b'{"linux": {}, "linux": {}}', "repeats"),
        (b'{"linux": {"postur": "enforce"}}', "unknown key linux.postur"),
        (b'{"linux": {"seccomp": {"enabled": "yes"}}}', "linux.seccomp.enabled"),
        (b'{"linux": {"network": {"allow": ["10.0.0.0/33"]}}}', "linux.network.allow[0]"),
        (b'{"linux": {"fanotify": {"paths": ["../x"]}}}', "linux.fanotify.paths[0]"),
    ]
    for content, why in bad:
        with open(pol, "wb") as f:
            f.write(content)
        os.chown(pol, env.uid, env.gid)
        for args in (("get", "linux.posture"), ("show",), ("show", "--json"),
                     ("set", "linux.posture", "warn"), ("setup",)):
            r = policy(env, home, *args)
            check(r.returncode != 0 and why in r.stderr and pol in r.stderr,
                  "%r with %r: rc %d %s" % (args, content, r.returncode, r.stderr))
            check(r.stdout == "", "%r printed %r" % (args, r.stdout))
            check(read_bytes(pol) == content, "%r rewrote %r" % (args, content))
    # setup --force is the way out.
    r = policy(env, home, "setup", "--force")
    check(r.returncode == 0, r.stderr)
    r = policy(env, home, "get", "linux.posture")
    check(r.returncode == 0 and r.stdout == "enforce\n", r.stdout + r.stderr)


if __name__ == "__main__":
    main({f.__name__: f for f in (setup_creates_private_file, set_get_round_trips,
                                  invalid_value_refused_file_unchanged, symlinked_policy_refused,
                                  show_json_defaults, corrupted_policy_fails_closed)})
