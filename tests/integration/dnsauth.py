"""A small authoritative test DNS server: `dnsauth.py LOG ZONE ADDR ...`
answers on UDP and TCP port 53 of each ADDR from ZONE, a JSON object
{"name": [["A"|"AAAA"|"CNAME", value, ttl], ...]}. A CNAME is followed
within the zone (as a recursive resolver would return it); a name not in
the zone is NXDOMAIN. Every query is logged to LOG as one JSON line
{"addr", "from", "proto", "name", "type"}, so a test can prove a name never
reached it. Prints "ready" once every socket is bound. Runs inside a test
network namespace."""

import json
import selectors
import socket
import struct
import sys

TYPES = {"A": 1, "CNAME": 5, "AAAA": 28}
NAMES = {v: k for k, v in TYPES.items()}

log = open(sys.argv[1], "a", buffering=1)
zone = {k.lower(): v for k, v in json.load(open(sys.argv[2])).items()}


def enc_name(n):
    out = b""
    for label in n.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def read_name(msg, off):
    labels = []
    while True:
        ln = msg[off]
        if ln == 0:
            return ".".join(labels), off + 1
        labels.append(msg[off + 1:off + 1 + ln].decode())
        off += 1 + ln


def rr(name, typ, ttl, value):
    if typ == "A":
        data = socket.inet_pton(socket.AF_INET, value)
    elif typ == "AAAA":
        data = socket.inet_pton(socket.AF_INET6, value)
    else:
        data = enc_name(value)
    return enc_name(name) + struct.pack(">HHIH", TYPES[typ], 1, ttl, len(data)) + data


def answer(msg, addr, proto, peer):
    qid, flags = struct.unpack(">HH", msg[:4])
    name, off = read_name(msg, 12)
    qtype, qclass = struct.unpack(">HH", msg[off:off + 4])
    question = msg[12:off + 4]
    name = name.lower()
    log.write(json.dumps({"addr": addr, "from": peer, "proto": proto, "name": name,
                          "type": NAMES.get(qtype, qtype)}) + "\n")
    records, cur, rcode = [], name, 0
    if cur not in zone:
        rcode = 3
    for _ in range(10):
        rrs = zone.get(cur, [])
        cn = [r for r in rrs if r[0] == "CNAME"]
        if cn:
            records.append(rr(cur, "CNAME", cn[0][2], cn[0][1]))
            cur = cn[0][1].lower()
            continue
        for r in rrs:
            if TYPES[r[0]] == qtype:
                records.append(rr(cur, r[0], r[2], r[1]))
        break
    hdr = struct.pack(">HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(records), 0, 0)
    return hdr + question + b"".join(records)


sel = selectors.DefaultSelector()
for a in sys.argv[3:]:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((a, 53))
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((a, 53))
    t.listen(16)
    sel.register(u, selectors.EVENT_READ, ("udp", a))
    sel.register(t, selectors.EVENT_READ, ("tcp", a))
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        proto, a = key.data
        try:
            if proto == "udp":
                msg, peer = key.fileobj.recvfrom(4096)
                key.fileobj.sendto(answer(msg, a, "udp", peer[0]), peer)
            else:
                c, peer = key.fileobj.accept()
                c.settimeout(2)
                ln = struct.unpack(">H", c.recv(2))[0]
                msg = b""
                while len(msg) < ln:
                    chunk = c.recv(ln - len(msg))
                    if not chunk:
                        break
                    msg += chunk
                out = answer(msg, a, "tcp", peer[0])
                c.sendall(struct.pack(">H", len(out)) + out)
                c.close()
        except (OSError, IndexError, ValueError, struct.error):
            pass
