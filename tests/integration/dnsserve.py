"""Test DNS server: `dnsserve.py LOG ZONE ADDR` answers UDP queries on ADDR:53
from ZONE, a JSON file {"name": {"A": [[addr...], [addr...]], "AAAA": [...]}}:
the nth query for a name and type gets the nth list (the last one again
after that), so an answer can change between lookups. TTL 0. Unknown names
are NXDOMAIN; a known name without the type answers NOERROR with no
records. Every query is appended to LOG as a JSON line. Prints "ready"
once it listens. Runs inside a test network namespace; answers only what
it is asked (no recursion, no forwarding)."""

import json
import socket
import struct
import sys

LOG, ZONE, ADDR = sys.argv[1], sys.argv[2], sys.argv[3]
with open(ZONE) as f:
    zone = {k.lower(): v for k, v in json.load(f).items()}
count = {}
TYPES = {1: ("A", socket.AF_INET), 28: ("AAAA", socket.AF_INET6)}

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((ADDR, 53))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(4096)
    if len(data) < 12:
        continue
    qid, flags, qd = struct.unpack("!HHH", data[:6])
    if qd != 1:
        continue
    i, labels = 12, []
    try:
        while data[i] != 0:
            n = data[i]
            labels.append(data[i + 1:i + 1 + n].decode("ascii"))
            i += 1 + n
        qend = i + 5
        qtype, qclass = struct.unpack("!HH", data[i + 1:qend])
    except (IndexError, UnicodeDecodeError, struct.error):
        continue
    name = ".".join(labels).lower()
    question = data[12:qend]
    answers = []
    rcode = 0
    tname = TYPES.get(qtype, ("?", None))[0]
    if name not in zone:
        rcode = 3
    elif tname in zone[name]:
        seq = zone[name][tname]
        k = count.get((name, tname), 0)
        count[(name, tname)] = k + 1
        answers = seq[min(k, len(seq) - 1)]
    with open(LOG, "a") as f:
        f.write(json.dumps({"name": name, "type": tname, "answer": answers, "rcode": rcode}) + "\n")
    out = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(answers), 0, 0) + question
    for a in answers:
        fam = TYPES[qtype][1]
        rdata = socket.inet_pton(fam, a)
        out += struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, len(rdata)) + rdata
    s.sendto(out, peer)
