"""What `meson install` ships, checked in a DESTDIR: every promised file, the
paths inside the units and profiles, the units under systemd-analyze verify,
the profiles under apparmor_parser, the man pages under groff's warnings, the
bash completion in bash, and the example host policy read by the CLI."""

import glob
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile

from harness import BUILD, SOURCE, check, main

DAEMONS = ("gensee-boundaryd", "gensee-sensord", "gensee-httpmediatord", "gensee-tcloned")


def introspect(section):
    r = subprocess.run(["meson", "introspect", "--" + section, BUILD], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, "meson introspect: " + r.stderr)
    return json.loads(r.stdout)


def dirs():
    """The directories the build was configured with, as the build resolved them."""
    opts = {o["name"]: o["value"] for o in introspect("buildoptions")}
    prefix = opts["prefix"]
    pc = lambda pkg, var, dflt: (subprocess.run(  # noqa: E731
        ["pkg-config", "--variable=" + var, pkg], capture_output=True, text=True).stdout.strip()
        or dflt)
    d = {
        "sbindir": os.path.join(prefix, opts["sbindir"]),
        "bindir": os.path.join(prefix, opts["bindir"]),
        "mandir": os.path.join(prefix, opts["mandir"]),
        "docdir": os.path.join(prefix, opts["docdir"]) if opts["docdir"] else
        os.path.join(prefix, opts["datadir"], "doc", "gensee"),
        "unitdir": opts["systemdsystemunitdir"] or pc("systemd", "systemdsystemunitdir",
                                                      os.path.join(prefix, "lib/systemd/system")),
        "tmpfilesdir": opts["tmpfilesdir"] or pc("systemd", "tmpfilesdir",
                                                 os.path.join(prefix, "lib/tmpfiles.d")),
        "sysusersdir": opts["sysusersdir"] or pc("systemd", "sysusersdir",
                                                 os.path.join(prefix, "lib/sysusers.d")),
        "apparmordir": opts["apparmordir"],
        "compdir": opts["bashcompletiondir"] or pc("bash-completion", "completionsdir",
                                                   "/usr/share/bash-completion/completions"),
    }
    d["profile_prefix"] = d["sbindir"].strip("/").replace("/", ".") + "."
    return d


class Installed:
    """meson install --destdir into a fresh directory, removed at exit."""

    def __init__(self, env):
        self.root = tempfile.mkdtemp(prefix="gensee-it-install.", dir="/var/tmp")
        env.cleanup_dirs.append(self.root)
        r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                            "--destdir", self.root], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "meson install: %s%s" % (r.stdout, r.stderr))
        self.d = dirs()

    def path(self, *parts):
        return os.path.join(self.root, os.path.join(*parts).lstrip("/"))

    def read(self, *parts):
        with open(self.path(*parts)) as f:
            return f.read()


def promised(d):
    """Every file an install promises (absolute paths on the target)."""
    files = [os.path.join(d["bindir"], "gensee")]
    files += [os.path.join(d["sbindir"], n) for n in DAEMONS]
    if d["unitdir"] != "no":  # -Dsystemdsystemunitdir=no: a build without units
        files += [os.path.join(d["unitdir"], n + ".service") for n in DAEMONS]
    files += [os.path.join(d["tmpfilesdir"], "gensee.conf"),
              os.path.join(d["sysusersdir"], "gensee.conf")]
    if d["apparmordir"] != "no":
        files += [os.path.join(d["apparmordir"], d["profile_prefix"] + n) for n in DAEMONS]
    files += [os.path.join(d["mandir"], "man1", "gensee.1")]
    files += [os.path.join(d["mandir"], "man8", n + ".8") for n in DAEMONS]
    files += [os.path.join(d["docdir"], os.path.basename(p))
              for p in glob.glob(os.path.join(SOURCE, "docs", "*.md"))]
    files += [os.path.join(d["docdir"], "README.md"),
              os.path.join(d["docdir"], "examples", "policy.json.example"),
              os.path.join(d["compdir"], "gensee")]
    return files


def long_options(*sources):
    """The long options a C file's getopt_long tables define."""
    names = set()
    for src in sources:
        with open(os.path.join(SOURCE, src)) as f:
            names |= set(re.findall(r'\{\s*"([a-z0-9-]+)",\s*(?:no|required|optional)_argument',
                                    f.read()))
    return {"--" + n for n in names}


def install_tree_complete(env):
    """Every promised file is installed (the binaries executable, nothing
    group/other-writable); the tmpfiles entry makes the roots with the modes
    boundaryd checks."""
    inst = Installed(env)
    for p in promised(inst.d):
        full = inst.path(p)
        check(os.path.isfile(full), "not installed: %s" % p)
        st = os.stat(full)
        check(not st.st_mode & 0o022, "%s is group/other-writable" % p)
    for p in [os.path.join(inst.d["bindir"], "gensee")] + [
            os.path.join(inst.d["sbindir"], n) for n in DAEMONS]:
        check(os.access(inst.path(p), os.X_OK), "%s not executable" % p)
    # The example is valid JSON and never installed as an active policy.
    json.loads(inst.read(inst.d["docdir"], "examples", "policy.json.example"))
    check(not os.path.exists(inst.path("/etc/gensee/policy.json")), "an active host policy")
    # tmpfiles.d: systemd-tmpfiles applies it under the DESTDIR as root.
    conf = inst.path(inst.d["tmpfilesdir"], "gensee.conf")
    r = subprocess.run(["systemd-tmpfiles", "--root=" + inst.root, "--create", conf],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and not r.stderr.strip(), "systemd-tmpfiles: " + r.stderr)
    # sysusers.d: the mediator's user, made under the DESTDIR (its own
    # /etc/passwd), never the host's.
    conf = inst.path(inst.d["sysusersdir"], "gensee.conf")
    os.makedirs(inst.path("/etc"), exist_ok=True)
    r = subprocess.run(["systemd-sysusers", "--root=" + inst.root, conf],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "systemd-sysusers: " + r.stderr)
    users = [l.split(":") for l in inst.read("/etc/passwd").splitlines()]
    med = [u for u in users if u[0] == "gensee-mediator"]
    check(med and 0 < int(med[0][2]) < 1000 and med[0][6] == "/usr/sbin/nologin",
          "sysusers made no system user gensee-mediator: %r" % med)
    for path, mode in (("/run/gensee", 0o755), ("/var/lib/gensee", 0o700)):
        st = os.lstat(inst.path(path))
        check(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == mode and st.st_uid == 0,
              "%s: mode %o uid %d" % (path, stat.S_IMODE(st.st_mode), st.st_uid))


def units_verify_as_installed(env):
    """The installed units name the installed binaries, man pages and docs, and
    pass systemd-analyze verify against the DESTDIR (the host's own units
    copied in for the targets they depend on). sensord's syscall filter
    allows what fanotify needs."""
    inst = Installed(env)
    d = inst.d
    units = []
    for n in DAEMONS:
        path = os.path.join(d["unitdir"], n + ".service")
        text = inst.read(path)
        check("/usr/local" not in text or d["sbindir"].startswith("/usr/local"),
              "%s still names /usr/local" % n)
        m = re.search(r"^ExecStart=(\S+)", text, re.M)
        check(m and m.group(1) == os.path.join(d["sbindir"], n), "%s ExecStart %r" % (
            n, m and m.group(1)))
        docs = re.findall(r"file:(\S+)", text)
        check(docs, "%s: no file: documentation" % n)
        for doc in docs:
            check(os.path.isfile(inst.path(doc)), "%s documents a missing %s" % (n, doc))
        for man in re.findall(r"man:(\S+)\((\d)\)", text):
            check(os.path.isfile(inst.path(d["mandir"], "man" + man[1], "%s.%s" % man)),
                  "%s documents a missing man page %r" % (n, man))
        for key in ("NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectSystem=strict",
                    "SystemCallArchitectures=native", "RestrictAddressFamilies=",
                    "SystemCallFilter=@system-service"):
            check(key in text, "%s lacks %s" % (n, key))
        units.append(inst.path(path))
    sensord = inst.read(d["unitdir"], "gensee-sensord.service")
    allowed = " ".join(re.findall(r"^SystemCallFilter=([^~].*)$", sensord, re.M)).split()
    for sc in ("fanotify_init", "fanotify_mark", "open_by_handle_at"):
        check(sc in allowed, "sensord's SystemCallFilter lacks %s: %r" % (sc, allowed))
    # verify resolves dependencies (sysinit.target ...) under --root: give it the host's.
    hostunits = "/usr/lib/systemd/system"
    dst = inst.path(hostunits)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if not os.path.exists(dst):
        shutil.copytree(hostunits, dst, symlinks=True)
    else:
        for name in os.listdir(hostunits):
            if not os.path.lexists(os.path.join(dst, name)):
                src = os.path.join(hostunits, name)
                if os.path.islink(src):
                    os.symlink(os.readlink(src), os.path.join(dst, name))
                elif os.path.isfile(src):
                    shutil.copy2(src, dst)
    r = subprocess.run(["systemd-analyze", "verify", "--man=yes", "--root=" + inst.root] + units,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MANPATH=inst.path(d["mandir"])))
    out = r.stdout + r.stderr
    problems = [l for l in out.splitlines() if "gensee" in l]
    check(r.returncode == 0 and not problems, "systemd-analyze verify:\n" + out)
    # The check can fail: a unit naming a binary that is not there is refused.
    bad = inst.path(d["unitdir"], "gensee-broken.service")
    with open(bad, "w") as f:
        f.write(inst.read(d["unitdir"], "gensee-sensord.service").replace(
            "sbin/gensee-sensord ", "sbin/gensee-absent "))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", "--root=" + inst.root, bad],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode != 0 and "gensee-absent" in r.stdout + r.stderr,
          "verify accepted a missing binary:\n" + r.stdout + r.stderr)


def apparmor_profiles_parse(env):
    """One profile per daemon, attached to the installed binary, each parsed
    (syntax and semantics, not loaded: AppArmor is not active here) by
    apparmor_parser."""
    inst = Installed(env)
    d = inst.d
    for n in DAEMONS:
        path = inst.path(d["apparmordir"], d["profile_prefix"] + n)
        text = open(path).read()
        check(re.search(r"^profile %s %s " % (re.escape(n), re.escape(
            os.path.join(d["sbindir"], n))), text, re.M), "%s: not attached to %s/%s" % (
                n, d["sbindir"], n))
        check("@" + "SBINDIR@" not in text and "@" + "VERSION@" not in text,
              "%s: unsubstituted" % n)
        # Nothing broad: no write or exec anywhere, every capability or network.
        for line in (l.strip() for l in text.splitlines()):
            check(line not in ("capability,", "network,", "file,", "unix,", "ptrace,",
                               "signal,", "mount,", "dbus,"), "%s: broad rule %r" % (n, line))
            m = re.match(r"^(?:owner\s+)?/\*\*\s+(\S+),$", line)
            check(not m or not re.search(r"[wakxmlu]", m.group(1)),
                  "%s: broad rule %r" % (n, line))
        r = subprocess.run(["apparmor_parser", "-Q", "-T", "-K", path], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, "apparmor_parser %s: %s" % (n, r.stderr))
    # The parser does refuse a broken profile (so the checks above can fail).
    bad = inst.path(d["apparmordir"], "broken")
    with open(bad, "w") as f:
        f.write(open(inst.path(d["apparmordir"], d["profile_prefix"] + DAEMONS[0])).read()
                .replace("capability kill,", "capability killl,"))
    r = subprocess.run(["apparmor_parser", "-Q", "-T", "-K", bad], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode != 0, "apparmor_parser accepted a broken profile")


def man_pages_clean(env):
    """The man pages render without a groff or man warning, name every long
    option their program takes, and point at the installed docs."""
    inst = Installed(env)
    d = inst.d
    pages = {"gensee": (os.path.join(d["mandir"], "man1", "gensee.1"),
                        long_options("cli/run.c", "cli/watch.c", "cli/status.c",
                                     "cli/timeline.c", "cli/txncmd.c", "cli/coordinator.c") |
                        {"--version"}),
             "gensee-boundaryd": (os.path.join(d["mandir"], "man8", "gensee-boundaryd.8"),
                                  long_options("daemons/boundaryd/boundaryd.c")),
             "gensee-sensord": (os.path.join(d["mandir"], "man8", "gensee-sensord.8"),
                                long_options("daemons/sensord/sensord.c")),
             "gensee-httpmediatord": (os.path.join(d["mandir"], "man8",
                                                   "gensee-httpmediatord.8"),
                                      long_options("daemons/httpmediatord/httpmediatord.c")),
             "gensee-tcloned": (os.path.join(d["mandir"], "man8", "gensee-tcloned.8"),
                                long_options("daemons/tcloned/tcloned.c"))}
    for name, (page, opts) in pages.items():
        path = inst.path(page)
        check(len(opts) > 2, "%s: no options found in the source" % name)
        for argv in (["groff", "-ww", "-z", "-man", path],
                     ["man", "--warnings", "-E", "UTF-8", "-l", path]):
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
            check(r.returncode == 0 and not r.stderr.strip(), "%s: %s" % (argv, r.stderr))
        text = subprocess.run(["man", "-l", path], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8",
                                       MAN_KEEP_FORMATTING="0")).stdout
        text = re.sub(r".\x08", "", text).replace("\u2010", "-")
        for o in sorted(opts):
            check(o in text, "%s(%s) does not mention %s" % (name, page[-1], o))
        check(d["docdir"] in text, "%s: no pointer to %s" % (name, d["docdir"]))
    # A page with a broken macro does warn (the check above can fail).
    bad = inst.path("/broken.1")
    with open(bad, "w") as f:
        f.write(".TH X 1\n.SH NAME\nx \\- y\n.BOGUS\n")
    r = subprocess.run(["groff", "-ww", "-z", "-man", bad], capture_output=True, text=True,
                       timeout=60)
    check(r.stderr.strip(), "groff -ww said nothing about an unknown macro")


COMPLETE = r"""
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
complete -p gensee >/dev/null || exit 3
_gensee gensee "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" || exit 4
printf '%s\n' "${COMPREPLY[@]}"
"""


def bash_completion_completes(env):
    """The installed completion loads in a plain bash and in bash-completion's
    loader, offers every command and every long option of run, watch, status
    and timeline (taken from the C sources), and completes the supervised
    command after `run --`."""
    inst = Installed(env)
    script = inst.path(inst.d["compdir"], "gensee")

    def complete(*words):
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", COMPLETE, "bash", script,
                            "gensee"] + list(words), capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        check(r.returncode == 0 and not r.stderr, "completion of %r: rc %d %s" % (
            words, r.returncode, r.stderr))
        return set(r.stdout.split())

    cmds = complete("")
    for c in ("run", "status", "watch", "operation", "timeline", "policy", "debug"):
        check(c in cmds, "gensee <TAB> lacks %s: %r" % (c, cmds))
    for cmd, src in (("run", "cli/run.c"), ("watch", "cli/watch.c"),
                     ("status", "cli/status.c"), ("timeline", "cli/timeline.c")):
        want = long_options(src)
        got = complete(cmd, "--")
        check(want and want <= got, "gensee %s --<TAB> lacks %r" % (cmd, sorted(want - got)))
    check(complete("run", "--sandbox", "") == {"linux"}, "--sandbox takes linux")
    check(complete("run", "--sandbox", "linux", "--allow-n") == {"--allow-net"},
          "options after --sandbox linux")
    check("true" in complete("run", "--timeout", "5", "--", "tru"), "the command after --")
    check(not any(w.startswith("--") for w in complete("run", "--", "ls", "--")),
          "gensee's options offered to the supervised command")
    check({"inspect", "list"} <= complete("operation", ""), "operation subcommands")
    net = complete("run", "network", "")
    want = {"transaction-begin", "transaction-activate", "transaction-end",
            "transaction-revoke", "transaction-execute"} | long_options("cli/txncmd.c") | \
        long_options("cli/coordinator.c")
    check(want <= net, "gensee run network <TAB> lacks %r" % sorted(want - net))
    check("seccomp-profile" in complete("debug", ""), "debug subcommands")
    # bash-completion's on-demand loader finds it where it was installed.
    if os.path.exists("/usr/share/bash-completion/bash_completion"):
        r = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c",
             'source /usr/share/bash-completion/bash_completion; '
             '_completion_loader gensee; complete -p gensee'],
            capture_output=True, text=True, timeout=60,
            env={"PATH": "/usr/bin:/bin", "XDG_DATA_DIRS": os.path.dirname(os.path.dirname(
                os.path.dirname(script.rstrip("/")))), "HOME": "/nonexistent"})
        check("_gensee" in r.stdout, "bash-completion did not load it: %s %s" % (
            r.stdout, r.stderr))


def example_host_policy_accepted(env):
    """The installed example host policy, used as /etc/gensee/policy.json, is
    read by the CLI: a sandboxed run inside it works, one asking for more than
    it allows is refused."""
    inst = Installed(env)
    example = json.loads(inst.read(inst.d["docdir"], "examples", "policy.json.example"))
    env.use_netns()
    env.start()
    env.host_policy(example)
    r = env.gensee("run", "--sandbox", "linux", "--json", "--", "true")
    check(r.returncode == 0, "run under the example host policy: %s" % r.stderr)
    opid = json.loads(r.stdout)["operation_id"]
    check(env.record(opid)["host_controls"]["seccomp"]["enabled"] is True, "seccomp floor")
    r = env.gensee("run", "--sandbox", "linux", "--allow-net", "10.0.0.0/8,tcp,443", "--",
                   "true")
    check(r.returncode == 125 and "outside" in r.stderr, "rc %d: %s" % (r.returncode, r.stderr))


if __name__ == "__main__":
    main({f.__name__: f for f in (install_tree_complete, units_verify_as_installed,
                                  apparmor_profiles_parse, man_pages_clean,
                                  bash_completion_completes, example_host_policy_accepted)})
