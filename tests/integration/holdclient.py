"""A client that holds one TCP connection to the mediator and does what it is
told on stdin, one command a line, answering each with one JSON line:
  `holdclient.py [--source ADDR] HOST PORT` connects, prints {"connected": true}
  wait SECONDS   wait (at most SECONDS) for the server to close the connection:
                 {"closed": "eof"|"reset"|null, "data": "..."} (null: still open)
  send HEX       send these bytes: {"sent": true} or {"sent": false, "error": "..."}
  read SECONDS   read until the server closes or SECONDS pass:
                 {"data": "...", "closed": "eof"|"reset"|null}
  quit
Every wait is bounded by its SECONDS (at most 30). Runs inside a test network
namespace."""

import json
import select
import socket
import sys
import time


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read_until_close(s, seconds):
    deadline = time.monotonic() + min(float(seconds), 30.0)
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, None
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return data, None
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return data, "reset"
        except OSError as e:
            return data, "error:%s" % e.__class__.__name__
        if not chunk:
            return data, "eof"
        data += chunk


def main():
    args = sys.argv[1:]
    source = None
    if args[0] == "--source":
        source, args = args[1], args[2:]
    host, port = args[0], int(args[1])
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    if source:
        s.bind((source, 0))
    s.connect((host, port))
    s.setblocking(True)
    s.settimeout(None)
    out({"connected": True, "local_port": s.getsockname()[1]})
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "wait" or cmd == "read":
            data, closed = read_until_close(s, arg or "5")
            out({"closed": closed, "data": data.decode("latin-1")})
        elif cmd == "send":
            try:
                s.sendall(bytes.fromhex(arg))
                out({"sent": True})
            except OSError as e:
                out({"sent": False, "error": e.__class__.__name__})
        elif cmd == "quit":
            break
    s.close()


main()
