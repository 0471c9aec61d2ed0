#!/usr/bin/env python3
"""HTTP mediator benchmark (root): requests per second and p50/p99 latency
through gensee-httpmediatord for 1 KiB and 100 KiB bodies, beside direct
requests, tinyproxy and squid, all in the same run and the same topology.

usage: bench/mediator_bench.py [BUILD_DIR]

Topology (network namespaces made here, documentation addresses, as in
tests/integration/test_mediator.py): wrk runs in the client namespace
(198.51.100.12); the mediator (198.51.100.1:3128, with boundaryd deciding
every request over mediator.sock), tinyproxy (:3129) and squid (:3130)
listen in the gateway namespace; nginx serves /1k and /100k on
192.0.2.10:8081 in the upstream namespace. "direct" is wrk to nginx through
the gateway's forwarding, the same two veth hops without a proxy. wrk sends
absolute-form requests (a Lua script sets the target and Host) over
keep-alive connections. The mediator opens one upstream connection per
request (it sends Connection: close upstream, and each request costs one
mediator.authorize round trip and one evidence line in boundaryd);
tinyproxy and squid may keep upstream connections. Loopback cannot be used
for the upstream: the mediator refuses restricted destinations, and
loopback is one.

Peers (wrk, tinyproxy, squid, nginx-light) are Debian packages; missing ones
are installed with apt-get (a policy-rc.d that refuses keeps their services
from starting), or their figures are skipped with a message. Never run by
the test suites; no assertion on time. Results go to stdout and to
bench/results/mediator.json.
"""

import json
import os
import pwd
import shutil
import subprocess
import sys
import time

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, "build"))
os.environ["GENSEE_BUILD_ROOT"] = build
sys.path.insert(0, os.path.join(top, "tests", "integration"))
sys.path.insert(0, os.path.join(top, "bench"))
import debpkg  # noqa: E402
import test_mediator as tm  # noqa: E402
from harness import Env  # noqa: E402

PEERS = {"wrk": "wrk", "tinyproxy": "tinyproxy", "squid": "squid", "nginx": "nginx-light"}
DURATION = 5
CONNECTIONS = 16
UP = "192.0.2.10:8081"
SIZES = {"1k": 1024, "100k": 102400}


which = debpkg.which


def install_peers():
    debpkg.install(PEERS)


def wait_port(env, ns, addr, port, what, proc):
    code = ("import socket,sys\ns=socket.socket()\ns.settimeout(1)\n"
            "sys.exit(0 if s.connect_ex((%r,%d))==0 else 1)\n" % (addr, port))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("%s exited %d" % (what, proc.returncode))
        if env.ns_run(ns, ["/usr/bin/python3", "-c", code], check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise SystemExit("%s did not listen on %s:%d" % (what, addr, port))


def start_nginx(env, t):
    www = os.path.join(t.dir, "www")
    os.makedirs(www, exist_ok=True)
    for name, n in SIZES.items():
        with open(os.path.join(www, name), "wb") as f:
            f.write(b"x" * n)
    os.chmod(www, 0o755)
    conf = os.path.join(t.dir, "nginx.conf")
    tmp = os.path.join(t.dir, "nginx-tmp")
    os.makedirs(tmp, exist_ok=True)
    with open(conf, "w") as f:
        f.write("""daemon off; worker_processes 1; pid %(d)s/nginx.pid;
error_log %(d)s/nginx-error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  client_body_temp_path %(t)s; proxy_temp_path %(t)s; fastcgi_temp_path %(t)s;
  uwsgi_temp_path %(t)s; scgi_temp_path %(t)s;
  default_type application/octet-stream;
  server { listen %(up)s; root %(w)s; } }
""" % {"d": t.dir, "t": tmp, "w": www, "up": UP})
    p = subprocess.Popen(env.ns_prefix(t.ext) + [which("nginx"), "-c", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.children.append(p)
    wait_port(env, t.ext, "192.0.2.10", 8081, "nginx", p)


def start_tinyproxy(env, t):
    conf = os.path.join(t.dir, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write('Port 3129\nListen 198.51.100.1\nTimeout 30\nMaxClients 256\n'
                'Allow 198.51.100.12\nLogLevel Critical\nUser nobody\nGroup nogroup\n'
                'DisableViaHeader Yes\nPidFile "%s/tinyproxy.pid"\n' % t.dir)
    p = subprocess.Popen(env.ns_prefix(t.gw) + [which("tinyproxy"), "-d", "-c", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.children.append(p)
    wait_port(env, t.gw, "198.51.100.1", 3129, "tinyproxy", p)


def start_squid(env, t):
    d = os.path.join(t.dir, "squid")
    os.makedirs(d, exist_ok=True)
    pw = pwd.getpwnam("proxy")
    os.chown(d, pw.pw_uid, pw.pw_gid)
    conf = os.path.join(d, "squid.conf")
    with open(conf, "w") as f:
        f.write("""http_port 198.51.100.1:3130
acl client src 198.51.100.12
http_access allow client
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_log %(d)s/cache.log
pid_filename %(d)s/squid.pid
coredump_dir %(d)s
cache_effective_user proxy
via off
forwarded_for delete
shutdown_lifetime 1 seconds
""" % {"d": d})
    p = subprocess.Popen(env.ns_prefix(t.gw) + [which("squid"), "-N", "-f", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.children.append(p)
    wait_port(env, t.gw, "198.51.100.1", 3130, "squid", p)


LUA = """wrk.method = "GET"
wrk.path = "%(path)s"
wrk.headers["Host"] = "%(host)s"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {"requests": %%d, "duration_us": %%d, "errors": %%d, ' ..
    '"non2xx": %%d, "p50_us": %%d, "p99_us": %%d}\\n', summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status, latency:percentile(50),
    latency:percentile(99)))
end
"""


def run_wrk(env, t, name, url, path, duration=DURATION):
    script = os.path.join(t.dir, "wrk-%s.lua" % name)
    with open(script, "w") as f:
        f.write(LUA % {"path": path, "host": UP})
    os.chmod(script, 0o644)
    argv = [which("wrk"), "-t1", "-c%d" % CONNECTIONS, "-d%ds" % duration, "--timeout", "5s",
            "-s", script, url]
    r = env.ns_run(t.ctr, argv, check=False)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
            return res
    raise SystemExit("wrk %s: %s %s" % (name, r.stdout, r.stderr))


def main():
    if os.geteuid() != 0:
        raise SystemExit("mediator_bench needs root (namespaces, boundaryd)")
    install_peers()
    for cmd in ("wrk", "nginx"):
        if which(cmd) is None:
            raise SystemExit("%s is needed and not available: no figures" % cmd)
    env = Env()
    results = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "duration_s": DURATION, "connections": CONNECTIONS, "figures": {}}
    try:
        t = tm.setup(env, proxy_extra={"max_response_bytes": 1 << 20},
                     grants_extra=[{"destination": "192.0.2.10", "protocol": "tcp",
                                    "ports": [8081]},
                                   {"destination": "198.51.100.1", "protocol": "tcp",
                                    "ports": [3129, 3130]}])
        start_nginx(env, t)
        # direct: the gateway forwards, the client routes the upstream network through it
        env.ns_run(t.gw, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        env.ns_run(t.ctr, ["ip", "route", "add", "192.0.2.0/24", "via", "198.51.100.1"])
        targets = [("direct", "http://%s" % UP, False), ("mediator", "http://198.51.100.1:3128", True)]
        if which("tinyproxy"):
            start_tinyproxy(env, t)
            targets.append(("tinyproxy", "http://198.51.100.1:3129", True))
        else:
            print("tinyproxy not available: its figures are skipped")
        if which("squid"):
            start_squid(env, t)
            targets.append(("squid", "http://198.51.100.1:3130", True))
        else:
            print("squid not available: its figures are skipped")
        for size in SIZES:
            for name, url, proxied in targets:
                path = ("http://%s/%s" % (UP, size)) if proxied else "/" + size
                run_wrk(env, t, name + "-warm", url, path, duration=1)
                res = run_wrk(env, t, "%s-%s" % (name, size), url, path)
                # wrk counts a server closing the connection after a response
                # as a read error (the mediator and tinyproxy close after each).
                if res["non2xx"]:
                    print("warning: %s %s: %d non-2xx answers" % (name, size, res["non2xx"]))
                if res["errors"]:
                    print("note: %s %s: %d socket errors/closes (wrk reconnects)" % (
                        name, size, res["errors"]))
                results["figures"]["%s/%s" % (name, size)] = res
                print("%-10s %-5s %9.0f req/s  p50 %7.2f ms  p99 %7.2f ms" % (
                    name, size, res["rps"], res["p50_us"] / 1000, res["p99_us"] / 1000),
                    flush=True)
        print("ratios (mediator / peer): req/s, p50, p99")
        ratios = {}
        for size in SIZES:
            m = results["figures"]["mediator/%s" % size]
            for name, _, _ in targets:
                if name == "mediator":
                    continue
                p = results["figures"]["%s/%s" % (name, size)]
                r = {"rps": m["rps"] / p["rps"], "p50": m["p50_us"] / max(p["p50_us"], 1),
                     "p99": m["p99_us"] / max(p["p99_us"], 1)}
                ratios["%s/%s" % (name, size)] = r
                print("  %-5s vs %-10s x%.2f  x%.2f  x%.2f" % (size, name, r["rps"], r["p50"],
                                                             r["p99"]))
        results["ratios"] = ratios
    finally:
        env.cleanup()
    out = os.path.join(top, "bench", "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "mediator.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
