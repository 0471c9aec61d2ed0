"""Test servers: `netserve.py proto,addr,port ...` answers b"ok" on each
TCP connection and each UDP datagram, until killed; a TCP connection stays
open and gets b"ok" again for every byte it sends, so a probe can hold a
flow. Prints "ready" once every socket is bound. Runs inside a test
network namespace."""

import selectors
import socket
import sys

sel = selectors.DefaultSelector()
for spec in sys.argv[1:]:
    proto, addr, port = spec.split(",")
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(fam, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    if proto == "tcp":
        s.listen(512)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, proto)
print("ready", flush=True)
MAX_CONNS = 256  # held connections; the oldest is closed beyond that
conns = []
while True:
    for key, _ in sel.select():
        s = key.fileobj
        try:
            if key.data == "tcp":
                c, _ = s.accept()
                c.settimeout(2)
                c.sendall(b"ok")
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, "conn")
                conns.append(c)
                if len(conns) > MAX_CONNS:
                    old = conns.pop(0)
                    sel.unregister(old)
                    old.close()
            elif key.data == "conn":
                data = s.recv(64)
                if data:
                    s.sendall(b"ok" * len(data))
                else:
                    raise OSError("closed")
            else:
                _, peer = s.recvfrom(2048)
                s.sendto(b"ok", peer)
        except OSError:
            if key.data == "conn":
                sel.unregister(s)
                conns.remove(s)
                s.close()
