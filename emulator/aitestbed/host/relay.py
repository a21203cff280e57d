"""ssh ProxyCommand for round-robin names: connect to one of the given
127.0.0.1 ports at random and relay stdin/stdout over it.

Usage: python -m aitestbed.host.relay [--address ADDRESS] PORT [PORT ...]
(ADDRESS: where the cluster publishes them, 127.0.0.1 unless a workshop's
`classroom create --listen` moved them)
"""

from __future__ import annotations

import os
import random
import selectors
import socket
import sys


def relay(ports: list[int], address: str = "127.0.0.1") -> int:
    random.shuffle(ports)
    for port in ports:
        try:
            sock = socket.create_connection((address, port), timeout=5)
            break
        except OSError:
            continue
    else:
        print(f"aitestbed relay: no login node answers on {address}:{ports}", file=sys.stderr)
        return 1
    sock.settimeout(None)
    selector = selectors.DefaultSelector()
    stdin = sys.stdin.fileno()
    selector.register(stdin, selectors.EVENT_READ, "in")
    selector.register(sock, selectors.EVENT_READ, "sock")
    while True:
        for key, _ in selector.select():
            if key.data == "in":
                data = os.read(stdin, 65536)
                if not data:
                    sock.shutdown(socket.SHUT_WR)
                    selector.unregister(stdin)
                    continue
                sock.sendall(data)
            else:
                data = sock.recv(65536)
                if not data:
                    return 0
                os.write(sys.stdout.fileno(), data)


if __name__ == "__main__":
    try:
        args = sys.argv[1:]
        where = "127.0.0.1"
        if args[:1] == ["--address"]:
            where, args = args[1], args[2:]
        sys.exit(relay([int(p) for p in args] or [int("")], where))
    except (ValueError, IndexError):
        print("usage: python -m aitestbed.host.relay [--address ADDRESS] PORT [PORT ...]",
              file=sys.stderr)
        sys.exit(2)
    except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        sys.exit(0)
