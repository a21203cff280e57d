"""Figures of the Metis inference gateway (printed, gating nothing): `make bench`.

No cluster: the gateway runs here as its own process (`python -m aitestbed.metis.server`)
with the room's model (trained from docs/*.md unless --weights names a trained one),
and this script is its client. Issue 45's targets in brackets:
  - time to first token of a hot model at AITESTBED_TIME_SCALE=0 [<= 0.5 s], p50 of 10;
  - tokens/s of one stream at time scale 0 [>= 20], and at 1 (paced to SN40L's figure);
  - 16 concurrent streams [no error]: each stream's tokens/s, and all of them together;
  - a cold model's time from first asked to Live at time scale 1 [<= 15 s], and the
    timing model's figure for each served name;
  - the gateway's resident memory, idle, with its models loaded [<= 600 MiB].
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from aitestbed.metis import timing
from aitestbed.metis.client import MetisClient
from aitestbed.metis.tokens import JsonTokenStore

ROOT = Path(__file__).resolve().parents[2]
HELLO = [{"role": "user", "content": "What is the Metis inference service?"}]


def start_gateway(workdir: Path, weights: Path, models: list[dict], scale: str
                  ) -> tuple[subprocess.Popen, str]:
    """The gateway's process (on a free port) and its root URL."""
    config = workdir / f"metis-{scale}.yaml"
    config.write_text(yaml.safe_dump({
        "listen": {"host": "127.0.0.1", "port": 0}, "weights": str(weights),
        "tokens": str(workdir / "tokens.json"), "models": models,
        "limits": {"requests_per_minute": 1000, "concurrent": 32}}))
    env = {**os.environ, "AITESTBED_TIME_SCALE": scale,
           "PYTHONPATH": str(ROOT / "emulator")}
    process = subprocess.Popen([sys.executable, "-m", "aitestbed.metis.server", "--config",
                                str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env)
    line = process.stdout.readline()
    if "serving" not in line:
        process.kill()
        sys.exit(f"bench: the gateway did not start: {line}{process.stdout.read()}")
    return process, line.split()[2].split("/resource_server")[0]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed_stream(client: MetisClient, model: str, max_tokens: int, seed: int
                 ) -> tuple[float, float, int]:
    """(time to first content, total seconds, completion tokens) of one stream."""
    started, first = time.monotonic(), None
    usage = {}
    for chunk in client.stream(model, HELLO, max_tokens=max_tokens, seed=seed,
                               stream_options={"include_usage": True}):
        if first is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
            first = time.monotonic() - started
        usage = chunk.get("usage") or usage
    total = time.monotonic() - started
    return first if first is not None else total, total, usage.get("completion_tokens", 0)


def long_seed(client: MetisClient, model: str, tokens: int) -> int:
    for seed in range(50):
        answer = client.chat(model, HELLO, max_tokens=tokens, seed=seed)
        if answer["choices"][0]["finish_reason"] == "length":
            return seed
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, help="a trained model (default: train one)")
    parser.add_argument("--steps", type=int, default=400, help="training steps if training")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-metis-"))
    weights = args.weights
    if weights is None:
        weights = workdir / "lm"
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "aitestbed.metis.train", "--corpus",
                        *map(str, sorted((ROOT / "docs").glob("*.md"))), "--out", str(weights),
                        "--steps", str(args.steps)], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "emulator")})
        print(f"training (docs/*.md, {args.steps} steps): {time.monotonic() - started:.1f} s")
    store = JsonTokenStore(workdir / "tokens.json")
    store.add_user("bench")
    token = store.issue("bench")
    hot = [{"name": "gpt-oss-120b", "template": "harmony"},
           {"name": "Mistral-Large-3-675B-Instruct-2512", "template": "mistral"},
           {"name": "gemma-4-31B-it", "template": "gemma"}]
    gateway, url = start_gateway(workdir, weights, hot, "0")
    try:
        time.sleep(1.0)
        print(f"idle RSS with {len(hot)} names (one set of weights) loaded: "
              f"{rss_mib(gateway.pid):.0f} MiB [<= 600]")
        client = MetisClient(url, token)
        seed = long_seed(client, "gpt-oss-120b", 200)
        ttfts = [timed_stream(client, "gpt-oss-120b", 4, seed)[0] for _ in range(10)]
        print(f"time to first token, hot, scale 0: p50 {statistics.median(ttfts):.3f} s, "
              f"max {max(ttfts):.3f} s [<= 0.5]")
        first, total, tokens = timed_stream(client, "gpt-oss-120b", 200, seed)
        print(f"one stream, scale 0: {tokens / max(total - first, 1e-9):.0f} tokens/s "
              f"({tokens} tokens) [>= 20]")
        results, errors = [], []

        def one(i: int) -> None:
            try:
                results.append(timed_stream(client, "gpt-oss-120b", 64, i))
            except Exception as err:  # noqa: BLE001 - counted and printed
                errors.append(repr(err))
        started = time.monotonic()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - started
        rates = [n / max(tot - f, 1e-9) for f, tot, n in results if n > 1]
        print(f"16 concurrent streams, scale 0: {len(results)} finished, {len(errors)} errors "
              f"[0]; per stream min {min(rates):.0f} / median {statistics.median(rates):.0f} "
              f"tokens/s; together {sum(n for _, _, n in results) / wall:.0f} tokens/s")
        print(f"idle RSS after the load: {rss_mib(gateway.pid):.0f} MiB")
    finally:
        gateway.terminate()
        gateway.wait(10)
    cold = [{"name": "gpt-oss-120b", "template": "harmony"},
            {"name": "gemma-4-31B-it", "template": "gemma", "hot": False}]
    gateway, url = start_gateway(workdir, weights, cold, "1")
    try:
        client = MetisClient(url, token)
        first, total, tokens = timed_stream(client, "gpt-oss-120b", 200,
                                            long_seed(client, "gpt-oss-120b", 200))
        print(f"one stream, scale 1: time to first token {first:.3f} s, "
              f"{tokens / max(total - first, 1e-9):.0f} tokens/s (SN40L figure: "
              f"{timing.TIMINGS['gpt-oss-120b'].tokens_per_second})")
        started, states = time.monotonic(), []
        asking = threading.Thread(target=lambda: client.chat("gemma-4-31B-it", HELLO,
                                                             max_tokens=2))
        asking.start()
        while asking.is_alive():
            state = client.states()["gemma-4-31B-it"]
            if not states or states[-1] != state:
                states.append(state)
            time.sleep(0.1)
        live = time.monotonic() - started
        print(f"cold model (gemma-4-31B-it), scale 1: {' -> '.join(states)} -> answered in "
              f"{live:.1f} s [<= 15]")
        for name, t in timing.TIMINGS.items():
            print(f"  cold start in the timing model, {name}: {t.cold_start_seconds():.1f} s; "
                  f"{t.tokens_per_second:.0f} tokens/s; first token (100-token prompt) "
                  f"{t.first_token_seconds(100):.2f} s")
    finally:
        gateway.terminate()
        gateway.wait(10)


if __name__ == "__main__":
    main()
