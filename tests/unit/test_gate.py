"""The gate's forwarder (aitestbed.node.gate): each port bound to one target for good,
both directions and the half-close passed on, a target that is down closes the client's
connection, bad arguments get usage and exit 2."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from aitestbed.node import gate

pytestmark = pytest.mark.unit


async def _upper_until_eof(reader, writer):
    """A target that answers what it read, upper-cased, once the client half-closed."""
    data = await reader.read()
    writer.write(data.upper() + b"|bye")
    await writer.drain()
    writer.close()


def _free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_connection_is_forwarded_both_ways_and_the_half_close_passes():
    async def scenario():
        target = await asyncio.start_server(_upper_until_eof, "127.0.0.1", 0)
        target_port = target.sockets[0].getsockname()[1]
        listen = _free_port()
        ready = asyncio.Event()
        task = asyncio.create_task(gate.serve({listen: ("127.0.0.1", target_port)},
                                              "127.0.0.1", lambda ports: ready.set()))
        await asyncio.wait_for(ready.wait(), 5)
        reader, writer = await asyncio.open_connection("127.0.0.1", listen)
        writer.write(b"ssh-2.0 hello " * 10000)  # more than one read
        await writer.drain()
        writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        task.cancel()
        target.close()
        return answer

    answer = asyncio.run(scenario())
    assert answer == b"SSH-2.0 HELLO " * 10000 + b"|bye"


def test_a_target_that_is_down_closes_the_clients_connection():
    async def scenario():
        listen, nobody = _free_port(), _free_port()
        ready = asyncio.Event()
        task = asyncio.create_task(gate.serve({listen: ("127.0.0.1", nobody)}, "127.0.0.1",
                                              lambda ports: ready.set()))
        await asyncio.wait_for(ready.wait(), 5)
        reader, writer = await asyncio.open_connection("127.0.0.1", listen)
        answer = await asyncio.wait_for(reader.read(), 15)
        writer.close()
        task.cancel()
        return answer

    assert asyncio.run(scenario()) == b""


def test_targets_are_parsed_and_bad_ones_refused():
    assert gate.parse_targets(["2201=gc-login-01:22", "2202=sm-login.example:22"]) == {
        2201: ("gc-login-01", 22), 2202: ("sm-login.example", 22)}
    for bad, why in [([], "no PORT=HOST:PORT"), (["2201"], "not PORT=HOST:PORT"),
                     (["0=h:22"], "not PORT"), (["2201=h:70000"], "not PORT"),
                     (["2201=-h:22"], "not PORT"), (["1=a:22", "1=b:22"], "given twice")]:
        with pytest.raises(gate.UsageError, match=why):
            gate.parse_targets(bad)


def test_the_command_line_says_its_usage_and_exits_2():
    result = subprocess.run([sys.executable, "-m", "aitestbed.node.gate", "nonsense"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m aitestbed.node.gate PORT=HOST:PORT")
    assert "Traceback" not in result.stderr


def test_the_command_line_says_it_listens_and_stops_on_sigterm():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aitestbed.node.gate",
                             f"{port}=127.0.0.1:9"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"{gate.READY} on {port} -> 127.0.0.1:9"), line
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
