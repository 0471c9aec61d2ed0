"""DNS proxy benchmark, run by bench/run (root).

First-connect latency: the wall time from a DNS question to an
established TCP connection to the answered address, 200 times each, from
the same client namespace in the same run:
  proxied  the operation's address (198.51.100.12): its query to the
           resolver is redirected to the mediator's DNS proxy, which asks
           the resolver, has boundaryd lease the address in the kernel
           (an existing lease is extended: delete and re-add, one batch),
           and answers; then the connect passes the operation's table;
  direct   another address of the same client (198.51.100.13), in no
           operation: the same resolver answers it directly, same connect.
The resolver is tests/integration/dnsauth.py, the same for both; the
ratio is what the proxy and the lease add. The topology is test_dns's
(namespaces and documentation addresses only).
"""

import json

COUNT = 200


def main(Env, build, top, results):
    import test_dns
    with Env() as env:
        t = test_dns.setup(env)
        tool = env.tool("dnsclient.py")
        out = {}
        for label, source in (("proxied", None), ("direct", "198.51.100.13")):
            argv = ["/usr/bin/python3", tool, "--bench", str(COUNT), "192.0.2.53", "8443",
                    "api.example.com"]
            if source:
                argv.append(source)
            r = env.ns_run(t.ctr, argv)
            out[label] = json.loads(r.stdout)
        if out["proxied"]["median_ms"] and out["direct"]["median_ms"]:
            out["ratio_median"] = round(out["proxied"]["median_ms"] /
                                        out["direct"]["median_ms"], 2)
        results["dns_first_connect"] = out
        print("dns first connect (query -> established), median ms: proxied %s, direct %s, "
              "x%s" % (out["proxied"]["median_ms"], out["direct"]["median_ms"],
                       out.get("ratio_median")))
