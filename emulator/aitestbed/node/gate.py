"""The cluster's gate: the one container Docker publishes ports from.

The login nodes sit on the cluster's internal network only: Docker drops what would leave
it and publishes nothing from it. The gate sits on that network and on a small published one;
it runs this forwarder and nothing else (as nobody, without capabilities), each listening
port bound for good to one login node's sshd. So the offline guarantee is Docker's own,
for any user who can reach the engine: no firewall rule, no root (host/provider/docker).

Usage: python -m aitestbed.node.gate PORT=HOST:PORT [PORT=HOST:PORT ...]
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys

READY = "aitestbed gate: listening"
CONNECT_TIMEOUT = 10.0
CHUNK = 64 * 1024
_TARGET = re.compile(r"^(\d{1,5})=([A-Za-z0-9][A-Za-z0-9.-]*):(\d{1,5})$")


class UsageError(ValueError):
    pass


def parse_targets(argv: list[str]) -> dict[int, tuple[str, int]]:
    """{listening port: (host, port)} from PORT=HOST:PORT arguments."""
    if not argv:
        raise UsageError("no PORT=HOST:PORT given")
    targets: dict[int, tuple[str, int]] = {}
    for arg in argv:
        match = _TARGET.match(arg)
        if not match or not all(0 < int(match[i]) < 65536 for i in (1, 3)):
            raise UsageError(f"not PORT=HOST:PORT: {arg!r}")
        port = int(match[1])
        if port in targets:
            raise UsageError(f"port {port} given twice")
        targets[port] = (match[2], int(match[3]))
    return targets


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of file, then pass the half-close on (ssh's own end of a session)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


def _handler(host: str, port: int):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            target = await asyncio.wait_for(asyncio.open_connection(host, port),
                                            CONNECT_TIMEOUT)
        except (TimeoutError, OSError):
            writer.close()  # the login node is down: the client sees the connection close
            return
        up_reader, up_writer = target
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                end.close()
    return handle


async def serve(targets: dict[int, tuple[str, int]], address: str = "0.0.0.0",
                ready=None) -> None:
    """Listen on every port until cancelled; `ready(ports)` once all are bound."""
    servers = [await asyncio.start_server(_handler(host, port), address, listen)
               for listen, (host, port) in targets.items()]
    bound = [s.sockets[0].getsockname()[1] for s in servers]
    if ready:
        ready(bound)
    try:
        await asyncio.gather(*(s.serve_forever() for s in servers))
    finally:
        for server in servers:
            server.close()


def main(argv: list[str] | None = None) -> int:
    try:
        targets = parse_targets(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        print(f"usage: python -m aitestbed.node.gate PORT=HOST:PORT ...: {err}", file=sys.stderr)
        return 2

    async def run() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        await serve(targets, ready=lambda ports: print(
            f"{READY} on {', '.join(f'{p} -> {h}:{t}' for p, (h, t) in targets.items())}",
            flush=True))

    try:
        asyncio.run(run())
    except asyncio.CancelledError:
        pass
    except OSError as err:
        print(f"aitestbed gate: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
