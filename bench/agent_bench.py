#!/usr/bin/env python3
"""Agent turn benchmark (root): one non-interactive turn of each real agent
CLI (codex, claude, gemini: the pinned npm packages of
tests/integration/agents.py) against the same mock model server, timed
three ways in the same run, interleaved:

  none    the agent alone;
  gensee  `gensee run --sandbox linux --allow-net model.example.com,tcp,8080
          -- AGENT ...` (the agent's profile chosen from the executable, as
          a user runs it: the profile overlays its state directory);
  srt     `srt --settings FILE -- AGENT ...` (Anthropic's sandbox runtime,
          npm @anthropic-ai/sandbox-runtime at SRT_VERSION: bubblewrap with
          its own network namespace, its HTTP/SOCKS proxy outside reached
          over socat-bridged Unix sockets, seccomp against new Unix sockets).

Run by bench/run; also on its own:

usage: bench/agent_bench.py [BUILD_DIR [AGENT ...]]
       (AGENT_BENCH_ROUNDS=N sets the rounds, default ROUNDS, at most 20)

Topology: tests/integration/test_agents.py's real_agent. One network
namespace made here (test_dns.local_setup: boundaryd, the HTTP mediator,
the authoritative test resolver dnsauth.py on 192.0.2.53 with test_dns.ZONE
plus model.example.com -> 192.0.2.10), and mockmodel.py for the agent's API
on 192.0.2.10:8080. Nothing leaves that namespace: the agents' telemetry and
update hosts do not resolve there (the only network outside it this bench
uses is the npm registry and apt, to install what is missing).

Every turn, whatever the mode, is the same command line around the mode's
own part, run with the same environment from the same cwd:
  nsenter --net=NS -- unshare -m --propagation private sh -c 'SETUP && exec ...'
      setpriv --reuid=TEST --regid=TEST --clear-groups --  [MODE PREFIX] AGENT ARGV
SETUP binds a resolv.conf naming 192.0.2.53 over /etc/resolv.conf, so that
with no sandbox (and for srt's proxy, which resolves the name itself) the
model host resolves through the test resolver; under Gensee the
operation's table redirects every port-53 query to its DNS proxy anyway,
which asks the same resolver and leases the answer. Gensee gives the agent
a private /tmp; for none and srt SETUP mounts a fresh tmpfs on /tmp, and
for srt makes /tmp/claude in it (the TMPDIR srt hands its command and
makes writable only if it exists: Claude Code creates it before it runs
srt). The rest is the same in all three: the test user, the environment
(agents.env over the harness's user environment), the argv (agents.argv
unmodified: codex keeps its bypass flag in all three), the cwd (the
workspace), and before every turn a fresh copy of the same home at the
same path, so the state a turn leaves (Gensee's agent store included)
never reaches the next. Two homes, each measured on its own: "fresh", as
agents.prepare_home writes it (the agent's first run), and "used", that
home after one earlier untimed turn with no sandbox (databases made,
bundled skills unpacked, one earlier session: every later run).

Method: per agent and home, one warm-up round (each mode once, not
counted), then ROUNDS rounds, each running the three modes once in an order
rotated per round. A turn is the wall time of the whole command, from spawn
to exit, under a TURN_TIMEOUT bound. A turn counts only if it exits 0, its
workspace notes.txt holds the mock's tool mark and the mock answered at
least two requests (the tool call, the final answer); anything else fails
the bench with the turn's output and no figure. Processes of the test user
left in the namespace after a turn are killed and counted. Figures:
median, min and max seconds per agent, home and mode; ratios of medians
gensee/none, srt/none and gensee/srt; each turn split by the mock's clock
into start-up to the first answer, the tool call and the rest of the
exchange, and the last answer to exit; the same command lines with
/bin/true for the agent (each mode's fixed cost). To tell whether a mode
did the same work, the bench also compares which of the agent's state
files each turn wrote (under Gensee: what reached the store's upper
layers) with the turns without a sandbox, and prints any difference.
Results go to stdout, into bench/run's results (agent_turn) and, run
alone, to bench/results/agent.json. Never run by the test suites; no
assertion on time.

srt is installed like the agents (npm install --prefix into
agents.CACHE/srt-VERSION); bubblewrap, socat and ripgrep come from Debian
(apt-get if missing). Its settings (per agent, written next to the homes):
network allowed to model.example.com:8080 and to 192.0.2.10:8080 (srt's
proxy refuses a name that resolves to an address of one of the host's own
interfaces unless that literal is allowed too, and the mock's address is on
the namespace's lo), writes allowed to the workspace and the agent's state
directory (CODEX_HOME, CLAUDE_CONFIG_DIR, ~/.gemini), reads unrestricted
(srt's default).
"""

import fcntl
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debpkg  # noqa: E402

SRT_PACKAGE = "@anthropic-ai/sandbox-runtime"
SRT_VERSION = "0.0.83"
AGENTS = ("codex", "claude", "gemini")
MODES = ("none", "gensee", "srt")
# The home each turn starts from (a fresh copy of it every turn): "fresh" as
# agents.prepare_home writes it (the agent's first run), "used" the same
# after one earlier turn with no sandbox (every later run).
VARIANTS = ("fresh", "used")
ROUNDS = 9
TURN_TIMEOUT = 180
MARK = "gensee-tool-ran"
PROMPT = "append a line to notes.txt"
MODEL_HOST, MODEL_ADDR, MODEL_PORT = "model.example.com", "192.0.2.10", 8080
RESOLVER = "192.0.2.53"
DEBIAN = {"bwrap": "bubblewrap", "socat": "socat", "rg": "ripgrep"}


# -- installs --

def install_debian():
    debpkg.install(DEBIAN, "for srt")


def srt_dir(agents):
    return os.path.join(agents.CACHE, "srt-%s" % SRT_VERSION)


def srt_bin(agents):
    return os.path.join(srt_dir(agents), "node_modules", ".bin", "srt")


def srt_version(agents):
    """srt's --version, run in a network namespace with nothing in it."""
    home = tempfile.mkdtemp(prefix="gensee-bench-srt-version.", dir="/var/tmp")
    try:
        r = subprocess.run(["unshare", "--net", "--", srt_bin(agents), "--version"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home})
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        shutil.rmtree(home, ignore_errors=True)


def ensure_srt(agents):
    """srt at SRT_VERSION in the agents' cache (npm install --prefix, the
    registry the only network used), unless it is there already."""
    os.makedirs(agents.CACHE, exist_ok=True)
    with open(os.path.join(agents.CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if srt_version(agents) == SRT_VERSION:
            return srt_bin(agents)
        d = srt_dir(agents)
        tmp = d + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        cmd = ["npm", "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
               "--loglevel=warn", "%s@%s" % (SRT_PACKAGE, SRT_VERSION)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SystemExit("%s failed:\n%s" % (" ".join(cmd), r.stdout + r.stderr))
        shutil.rmtree(d, ignore_errors=True)
        os.rename(tmp, d)
        if srt_version(agents) != SRT_VERSION:
            raise SystemExit("srt installed in %s does not answer --version %s" % (d, SRT_VERSION))
        return srt_bin(agents)


# -- the bench --

def kill_leftovers(env, ns):
    """Kill the test user's processes still in the namespace; their count."""
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10)
    n = 0
    for pid in r.stdout.split():
        try:
            with open("/proc/%s/status" % pid) as f:
                uid = next(int(l.split()[1]) for l in f if l.startswith("Uid:"))
            if uid == env.uid:
                os.kill(int(pid), signal.SIGKILL)
                n += 1
        except (OSError, StopIteration, ValueError):
            pass
    return n


def tail(path, n=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def file_sig(path):
    st = os.lstat(path)
    return (st.st_mode, st.st_size, st.st_mtime_ns)


def tree_sigs(top):
    """Files under top by path relative to it, each with its signature."""
    out = {}
    for d, _, files in os.walk(top):
        for n in files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, top)] = file_sig(p)
    return out


def is_whiteout(sig):
    return (sig[0] & 0o170000) == 0o020000


def normalize(path):
    """A state file's path without what differs from turn to turn (UUIDs,
    then ids, timestamps and counters: any run of hex digits with a decimal
    digit in it), and None for SQLite's transient side files."""
    if re.search(r"-(wal|shm|journal)$", path):
        return None
    path = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "ID", path)
    return re.sub(r"[0-9a-f]*[0-9][0-9a-f]*", "N", path)


class Bench:
    def __init__(self, env, agents, srt):
        self.env, self.agents, self.srt = env, agents, srt

    def setup(self):
        import test_dns
        env = self.env
        test_dns.ZONE[MODEL_HOST] = [["A", MODEL_ADDR, 60]]
        self.ns, d, self.dnslog, self.medlog = test_dns.local_setup(env)
        self.dir = tempfile.mkdtemp(prefix="gensee-bench-agent.", dir="/var/tmp")
        env.cleanup_dirs.append(self.dir)
        os.chmod(self.dir, 0o755)
        self.resolv = os.path.join(self.dir, "resolv.conf")
        with open(self.resolv, "w") as f:
            f.write("nameserver %s\n" % RESOLVER)
        os.chmod(self.resolv, 0o644)
        self.mock = None

    def start_mock(self, name):
        env = self.env
        self.stop_mock()
        self.mocklog = os.path.join(self.dir, "mock-%s.jsonl" % name)
        open(self.mocklog, "w").close()
        p = subprocess.Popen(env.ns_prefix(self.ns) + [
            "/usr/bin/python3", env.tool("mockmodel.py"), self.agents.AGENTS[name]["mock"],
            MODEL_ADDR, str(MODEL_PORT), self.mocklog, "notes.txt"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        env.children.append(p)
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("mockmodel did not start: %s" % p.stderr.read())
        self.mock = p

    def stop_mock(self):
        if self.mock is not None and self.mock.poll() is None:
            self.mock.kill()
            self.mock.wait(timeout=10)
        self.mock = None

    def prepare(self, name):
        """Agent name's turn: its home (one path for every turn and mode),
        the fresh template (agents.prepare_home), workspace, environment,
        argv and srt's settings file."""
        agents = self.agents
        base = "http://%s:%d" % (MODEL_HOST, MODEL_PORT)
        home = os.path.join(self.dir, "home-" + name)
        ws = os.path.join(home, "ws")
        os.makedirs(ws)
        os.chmod(home, 0o755)
        agents.prepare_home(name, home, base, ws)
        aenv = agents.env(name, base, home)
        state = {"codex": aenv.get("CODEX_HOME"), "claude": aenv.get("CLAUDE_CONFIG_DIR"),
                 "gemini": os.path.join(home, ".gemini")}[name]
        template = os.path.join(self.dir, "template-%s-fresh" % name)
        shutil.copytree(home, template, symlinks=True)
        settings = {
            "network": {"allowedDomains": ["%s:%d" % (MODEL_HOST, MODEL_PORT),
                                           "%s:%d" % (MODEL_ADDR, MODEL_PORT)],
                        "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowWrite": [ws, state], "denyWrite": []},
        }
        sfile = os.path.join(self.dir, "srt-settings-%s.json" % name)
        with open(sfile, "w") as f:
            json.dump(settings, f, indent=2)
        os.chmod(sfile, 0o644)
        return {"home": home, "template": template, "ws": ws, "state": state,
                "env": self.env.user_env(aenv), "argv": agents.argv(name, PROMPT, ws),
                "srt_settings": sfile, "settings": settings}

    def used_template(self, name, t):
        """The home after one earlier turn with no sandbox (untimed): what a
        user's home holds once the agent has run there before (databases
        made and migrated, bundled skills and plugins unpacked, one earlier
        session), the workspace file removed."""
        self.turn(name, "none", t)
        os.unlink(os.path.join(t["ws"], "notes.txt"))
        template = os.path.join(self.dir, "template-%s-used" % name)
        shutil.rmtree(template, ignore_errors=True)
        shutil.copytree(t["home"], template, symlinks=True)
        return template

    def command(self, mode, t):
        """The turn's whole command line. Gensee gives the agent a private
        /tmp of its own; without it (none, srt) the mount namespace gets a
        fresh tmpfs on /tmp, so no turn sees what an earlier one left there.
        For srt that /tmp holds /tmp/claude, the TMPDIR srt hands the command
        and makes writable when it exists (it does not create it; Claude
        Code does before it runs srt)."""
        env = self.env
        setup = 'mount --bind "$1" /etc/resolv.conf'
        if mode != "gensee":
            setup += ' && mount -t tmpfs -o mode=1777,size=1g gensee-bench-tmp /tmp'
        if mode == "srt":
            setup += ' && mkdir -m 0700 /tmp/claude && chown "$2" /tmp/claude'
        inner = {
            "none": [],
            "gensee": [env.cli, "run", "--sandbox", "linux", "--allow-net",
                       "%s,tcp,%d" % (MODEL_HOST, MODEL_PORT), "--"],
            "srt": [self.srt, "--settings", t["srt_settings"], "--"],
        }[mode]
        return (env.ns_prefix(self.ns) +
                ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 setup + ' && shift 2 && exec "$@"', "sh", self.resolv,
                 "%d:%d" % (env.uid, env.gid)] +
                env.user_prefix() + inner + t["argv"])

    def reset_home(self, t):
        shutil.rmtree(t["home"], ignore_errors=True)
        shutil.copytree(t["template"], t["home"], symlinks=True)
        self.env.chown_to_user(t["home"])

    def written(self, name, mode, t, before):
        """The agent's state files a turn created, changed or removed (a
        removal as "-PATH"), normalized; under Gensee what landed in the
        store's upper layers (where the turn's writes go; a file copied up
        unchanged, same size and mtime as below, was opened for writing but
        not written) and any change to the real directory (there should be
        none)."""
        out = set()
        after = tree_sigs(t["state"])
        for p, sig in after.items():
            if before.get(p) != sig:
                out.add(p)
        out |= {"-" + p for p in before if p not in after}
        if mode == "gensee":
            store = os.path.join(t["home"], ".gensee", "agents", name)
            for layer in sorted(os.listdir(store)) if os.path.isdir(store) else []:
                upper = os.path.join(store, layer, "upper")
                if os.path.isdir(upper):
                    for p, sig in tree_sigs(upper).items():
                        if is_whiteout(sig):
                            out.add("-" + p)
                        elif before.get(p, (None,))[1:] != sig[1:]:
                            out.add(p)
        return {n for n in (normalize(p) for p in out) if n}

    def turn(self, name, mode, t):
        self.reset_home(t)
        before = tree_sigs(t["state"])
        kill_leftovers(self.env, self.ns)
        with open(self.mocklog) as f:
            nreq = sum(1 for l in f if l.strip())
        with open(self.dnslog) as f:
            ndns = sum(1 for l in f if l.strip())
        argv = self.command(mode, t)
        w0 = time.time()
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=t["env"], cwd=t["ws"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="replace", start_new_session=True)
        try:
            out, err = p.communicate(timeout=TURN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate(timeout=30)
            p.returncode = "timeout after %d s" % TURN_TIMEOUT
        secs = time.perf_counter() - t0
        w1 = w0 + secs
        left = kill_leftovers(self.env, self.ns)
        notes = os.path.join(t["ws"], "notes.txt")
        text = open(notes).read() if os.path.exists(notes) else ""
        with open(self.mocklog) as f:
            answered = [json.loads(l)["time"] for l in list(f)[nreq:] if l.strip()]
        with open(self.dnslog) as f:
            names = {"%s %s" % (q.get("name"), q.get("type")) for q in
                     (json.loads(l) for l in list(f)[ndns:] if l.strip())}
        if p.returncode != 0 or MARK not in text or len(answered) < 2:
            raise SystemExit(
                "agent bench FAILED (no figures): %s under %s: rc %s, notes.txt %r, the mock "
                "answered %d requests\nargv: %s\n--- stdout ---\n%s\n--- stderr ---\n%s\n"
                "--- mock ---\n%s\n--- mediator ---\n%s" % (
                    name, mode, p.returncode, text[:200], len(answered), json.dumps(argv),
                    out[-4000:], err[-8000:], tail(self.mocklog), tail(self.medlog, 2000)))
        # Where the turn's time went, by the mock's clock (it logs each
        # request once answered): start-up to the first answer, the tool call
        # and the rest of the model exchange, the last answer to exit.
        phases = {"to_first_answer": answered[0] - w0,
                  "first_to_last_answer": answered[-1] - answered[0],
                  "last_answer_to_exit": w1 - answered[-1]}
        return {"secs": secs, "leftovers": left, "dns": names, "phases": phases,
                "written": self.written(name, mode, t, before)}

    def measure(self, name, t, rounds):
        """One warm-up round (not counted), then rounds interleaved rounds."""
        turns = {m: [] for m in MODES}
        for mode in MODES:
            self.turn(name, mode, t)
        for r in range(rounds):
            for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
                x = self.turn(name, mode, t)
                turns[mode].append(x)
                print("  %s (%s home) round %d %-6s %7.2f s" % (
                    name, t["variant"], r + 1, mode, x["secs"]), flush=True)
        secs = {m: [x["secs"] for x in v] for m, v in turns.items()}
        med = {m: statistics.median(v) for m, v in secs.items()}
        # The same work? State files every turn without a sandbox wrote that
        # no turn of a mode did, and the other way round.
        always = {m: set.intersection(*(x["written"] for x in v)) for m, v in turns.items()}
        ever = {m: set.union(*(x["written"] for x in v)) for m, v in turns.items()}
        diff = {m: {"not_written": sorted(always["none"] - ever[m]),
                    "written_only_here": sorted(always[m] - ever["none"])} for m in MODES[1:]}
        for m, dd in diff.items():
            if dd["not_written"] or dd["written_only_here"]:
                print("  note: %s (%s home) under %s writes other state than without a "
                      "sandbox: not written %s; written only there %s" % (
                          name, t["variant"], m, dd["not_written"], dd["written_only_here"]),
                      flush=True)
        return {
            "turns_s": {m: [round(x, 3) for x in v] for m, v in secs.items()},
            "median_s": {m: round(v, 3) for m, v in med.items()},
            "min_s": {m: round(min(v), 3) for m, v in secs.items()},
            "max_s": {m: round(max(v), 3) for m, v in secs.items()},
            "ratios": {"gensee/none": round(med["gensee"] / med["none"], 3),
                       "srt/none": round(med["srt"] / med["none"], 3),
                       "gensee/srt": round(med["gensee"] / med["srt"], 3)},
            "phase_median_s": {m: {k: round(statistics.median(x["phases"][k] for x in v), 3)
                                   for k in v[0]["phases"]} for m, v in turns.items()},
            "state_written_vs_none": diff,
            "state_written_by_none": sorted(always["none"]),
            "leftover_processes_killed": {m: sum(x["leftovers"] for x in v)
                                          for m, v in turns.items()},
            # What reached the test resolver (under Gensee only what its DNS
            # proxy let through: the allowed name).
            "dns_queries_at_resolver": {m: sorted(set.union(*(x["dns"] for x in v)))
                                        for m, v in turns.items()},
        }

    def launch(self, name, t, rounds):
        """The fixed cost of each mode: the same command line with /bin/true
        for the agent (srt with this agent's settings), median of rounds
        interleaved runs after one warm-up."""
        tt = dict(t, argv=["/bin/true"])
        secs = {m: [] for m in MODES}
        for r in range(rounds + 1):
            for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
                self.reset_home(tt)
                t0 = time.perf_counter()
                p = subprocess.run(self.command(mode, tt), env=tt["env"], cwd=tt["ws"],
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   errors="replace", timeout=TURN_TIMEOUT)
                dt = time.perf_counter() - t0
                if p.returncode != 0:
                    raise SystemExit("agent bench FAILED: /bin/true under %s: rc %d\n%s" % (
                        mode, p.returncode, p.stderr[-3000:]))
                if r:
                    secs[mode].append(dt)
        return {m: round(statistics.median(v), 3) for m, v in secs.items()}

    def run_agent(self, name, rounds):
        self.start_mock(name)
        t = self.prepare(name)
        out = {"version": self.agents.AGENTS[name]["version"], "srt_settings": t["settings"],
               "argv": t["argv"]}
        out["true_median_s"] = self.launch(name, t, rounds)
        for variant in VARIANTS:
            if variant == "used":
                t["template"] = self.used_template(name, t)
            t["variant"] = variant
            out[variant] = self.measure(name, t, rounds)
        self.stop_mock()
        return out


def report(figures, rounds):
    print("Agent turn against the mock model, wall time of the whole command (s): "
          "median [min-max] of %d interleaved rounds" % rounds)
    print("  %-16s %-22s %-22s %-22s %11s %9s %11s" % (
        "agent (home)", "none", "gensee", "srt", "gensee/none", "srt/none", "gensee/srt"))
    for name, a in figures.items():
        for v in VARIANTS:
            f = a[v]
            cells = ["%6.2f [%5.2f-%5.2f]" % (f["median_s"][m], f["min_s"][m], f["max_s"][m])
                     for m in MODES]
            print("  %-16s %-22s %-22s %-22s %10.3fx %8.3fx %10.3fx" % (
                "%s (%s)" % (name, v), cells[0], cells[1], cells[2],
                f["ratios"]["gensee/none"], f["ratios"]["srt/none"], f["ratios"]["gensee/srt"]))
    print("  the same command lines with /bin/true for the agent, median s: " + "   ".join(
        "%s: %s" % (name, " ".join("%s %.3f" % (m, a["true_median_s"][m]) for m in MODES))
        for name, a in figures.items()))
    print("  phases by the mock's clock, median s (spawn -> first answer / first -> last "
          "answer / last answer -> exit):")
    for name, a in figures.items():
        for v in VARIANTS:
            f = a[v]
            print("  %-16s %s" % ("%s (%s)" % (name, v), "   ".join(
                "%s %5.2f / %5.2f / %5.2f" % ((m,) + tuple(f["phase_median_s"][m][k] for k in (
                    "to_first_answer", "first_to_last_answer", "last_answer_to_exit")))
                for m in MODES)))


def main(Env, build, top, results, names=AGENTS, rounds=ROUNDS):
    import agents
    install_debian()
    exes = {n: agents.ensure(n) for n in names}
    srt = ensure_srt(agents)
    figures = {}
    load = [round(x, 2) for x in os.getloadavg()]
    with Env() as env:
        import hashlib
        with open(env.cli, "rb") as f:
            cli_sha = hashlib.sha256(f.read()).hexdigest()
        b = Bench(env, agents, srt)
        b.setup()
        for n in names:
            print("agent bench: %s (%s)" % (n, exes[n]), flush=True)
            figures[n] = b.run_agent(n, rounds)
    report(figures, rounds)
    load_end = [round(x, 2) for x in os.getloadavg()]
    print("  load average (1, 5, 15 min) at the start %s, at the end %s (%d cores)" % (
        load, load_end, os.cpu_count()))
    results["agent_turn"] = {"rounds": rounds, "warmup_rounds": 1, "homes": VARIANTS,
                             "turn_timeout_s": TURN_TIMEOUT, "prompt": PROMPT,
                             "srt": {"package": SRT_PACKAGE, "version": SRT_VERSION},
                             "loadavg_start": load, "loadavg_end": load_end,
                             "cpus": os.cpu_count(), "gensee_cli_sha256": cli_sha,
                             "figures": figures}


def _killed(signum, frame):
    raise SystemExit("agent bench: killed by signal %d" % signum)


if __name__ == "__main__":
    if os.geteuid() != 0:
        raise SystemExit("agent_bench needs root (namespaces, boundaryd)")
    _top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(_top, "build"))
    _names = tuple(sys.argv[2:]) or AGENTS
    for _n in _names:
        if _n not in AGENTS:
            raise SystemExit("usage: bench/agent_bench.py [BUILD_DIR [AGENT ...]] (agents: %s)"
                             % " ".join(AGENTS))
    os.environ["GENSEE_BUILD_ROOT"] = _build
    sys.path.insert(0, os.path.join(_top, "tests", "integration"))
    from harness import Env as _Env
    for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(_sig, _killed)
    _results = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    main(_Env, _build, _top, _results, _names,
         max(1, min(20, int(os.environ.get("AGENT_BENCH_ROUNDS", ROUNDS)))))
    os.makedirs(os.path.join(_top, "bench", "results"), exist_ok=True)
    with open(os.path.join(_top, "bench", "results", "agent.json"), "w") as f:
        json.dump(_results, f, indent=2)
