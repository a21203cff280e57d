"""Train the Metis room's language model on a text corpus, on the CPU.

    python -m aitestbed.metis.train --corpus docs/*.md --out DIR [--steps N] [--size small]
        [--if-changed]

A corpus directory stands for its *.md files (sorted by name). With --if-changed nothing
is trained when DIR's model.json already has this corpus (its SHA-256), size and steps
(the gateway's image build: roles/metis_gateway).

The corpus is the project's own documentation (our text, so the weights' licence is
ours). From it the trainer makes: the tokenizer (aitestbed.metis.bpe), plain text, and
chat examples: each Markdown section becomes a question about its heading answered by
the section's first lines, rendered in each of the three chat templates in turn
(aitestbed.metis.chat), so one set of weights serves the three names. Deterministic:
the same corpus, size and steps give the same weights (on the same torch build and
thread count). DIR receives weights.pt, tokenizer.json and model.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F  # noqa: N812

from aitestbed.metis import chat, lm
from aitestbed.metis.bpe import ByteBPE


@dataclass(frozen=True)
class Size:
    vocab: int
    window: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    batch: int
    seq: int
    lr: float


SIZES = {
    # the tests' model: trains in a few seconds, still really generates
    "tiny": Size(vocab=360, window=128, d_model=48, n_layers=2, n_heads=2, d_ff=96,
                 batch=8, seq=64, lr=5e-3),
    # the served model: ~0.4 M parameters, about a minute on 2 free cores (400 steps)
    "small": Size(vocab=768, window=256, d_model=96, n_layers=3, n_heads=4, d_ff=384,
                  batch=8, seq=96, lr=3e-3),
}
QUESTIONS = ("What is {h}?", "Tell me about {h}.", "Explain {h} in simple terms.",
             "How does {h} work?")
HEADING = re.compile(r"^#{1,4}\s+(.+?)\s*$", re.MULTILINE)


class TrainError(RuntimeError):
    pass


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each Markdown section with some text under it."""
    found = []
    marks = list(HEADING.finditer(text))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        body = text[mark.end():following.start() if following else len(text)].strip()
        heading = mark.group(1).strip("`* ")
        if len(body) >= 40 and heading:
            found.append((heading, body))
    return found


def answer_of(body: str, limit: int = 360) -> str:
    """The first lines of a section, cut at a sentence or line end near `limit`."""
    text = body[:limit]
    cut = max(text.rfind(". "), text.rfind(".\n"), text.rfind("\n"))
    return text[:cut + 1].strip() if cut > limit // 3 else text.strip()


def token_stream(texts: list[str], tokenizer: ByteBPE) -> list[int]:
    """The training tokens: each document, then its sections as chat examples in the
    three templates in turn (the order fixed, so training is deterministic)."""
    names = sorted(chat.TEMPLATES)
    stream: list[int] = []
    n = 0
    for text in texts:
        stream += tokenizer.encode(text)
        for heading, body in sections(text):
            question = QUESTIONS[n % len(QUESTIONS)].format(h=heading)
            messages = [{"role": "user", "content": question},
                        {"role": "assistant", "content": answer_of(body)}]
            stream += chat.TEMPLATES[names[n % len(names)]].example(tokenizer, messages)
            n += 1
    return stream


def train(texts: list[str], out: Path, *, steps: int = 400, size: str = "small",
          name: str = "aitestbed-metis-lm", corpus_names: list[str] | None = None,
          log=print) -> dict:
    """Train and save into `out`; returns model.json's content."""
    if size not in SIZES:
        raise TrainError(f"no size {size!r}: one of {', '.join(SIZES)}")
    if not any(t.strip() for t in texts):
        raise TrainError("the corpus is empty")
    s = SIZES[size]
    started = time.monotonic()
    torch.manual_seed(0)
    rng = random.Random(0)
    tokenizer = ByteBPE.train(texts, s.vocab, chat.SPECIALS)
    data = torch.tensor(token_stream(texts, tokenizer))
    if len(data) < s.seq + 2:
        raise TrainError(f"the corpus is too small: {len(data)} tokens for sequences of "
                         f"{s.seq}")
    model = lm.TinyLM(lm.LMConfig(tokenizer.vocab_size, s.window, s.d_model, s.n_layers,
                                  s.n_heads, s.d_ff))
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=0.01)
    warmup = max(1, steps // 20)
    loss = float("nan")
    model.train()
    for step in range(steps):
        lr = s.lr * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = [rng.randrange(len(data) - s.seq - 1) for _ in range(s.batch)]
        batch = torch.stack([data[i:i + s.seq + 1] for i in starts])
        logits, _ = model(batch[:, :-1])
        loss_t = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss = float(loss_t)
        if log and (step % max(1, steps // 10) == 0 or step == steps - 1):
            log(f"step {step + 1}/{steps}  loss {loss:.3f}")
    model.eval()
    info = {"name": name, "size": size, "steps": steps, "final_loss": round(loss, 4),
            "training_tokens": len(data), "train_seconds": round(time.monotonic() - started, 1),
            "corpus": corpus_names or [], "corpus_sha256": corpus_digest(texts)}
    lm.save(Path(out), model, tokenizer, info)
    return json.loads((Path(out) / lm.MODEL_JSON).read_text())


def corpus_files(paths: list[Path]) -> list[Path]:
    """The files given, a directory standing for its *.md (sorted)."""
    return [f for p in paths for f in (sorted(p.glob("*.md")) if p.is_dir() else [p])]


def corpus_digest(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()


def up_to_date(out: Path, texts: list[str], size: str, steps: int) -> bool:
    """Whether `out` holds weights trained on these texts with this size and steps."""
    try:
        info = json.loads((out / lm.MODEL_JSON).read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(info, dict) and info.get("corpus_sha256") == corpus_digest(texts)
            and info.get("size") == size and info.get("steps") == steps
            and (out / lm.WEIGHTS).is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aitestbed.metis.train",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", required=True, type=Path, metavar="FILE",
                        help="text files to train on (e.g. docs/*.md; a directory: its *.md)")
    parser.add_argument("--out", required=True, type=Path, help="directory to write into")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps (400)")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's)")
    parser.add_argument("--if-changed", action="store_true", help="train only if DIR's model "
                        "was not trained on this corpus with this size and steps")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        files = corpus_files(args.corpus)
        texts = [path.read_text(encoding="utf-8") for path in files]
        if args.if_changed and up_to_date(args.out, texts, args.size, args.steps):
            print(f"train: {args.out} is up to date (the same corpus, size and steps)")
            return 0
        info = train(texts, args.out, steps=args.steps, size=args.size,
                     corpus_names=[p.name for p in files])
    except (OSError, UnicodeDecodeError) as err:
        print(f"train: cannot read the corpus: {err}", file=sys.stderr)
        return 2
    except (TrainError, lm.ModelError) as err:
        print(f"train: {err}", file=sys.stderr)
        return 2
    print(f"train: {info['parameters']:,} parameters, loss {info['final_loss']} after "
          f"{info['steps']} steps in {info['train_seconds']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
