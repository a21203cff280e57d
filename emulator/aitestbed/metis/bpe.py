"""A byte-level BPE tokenizer, trained by our code on a corpus and saved as JSON.

Ids 0..255 are the bytes themselves, so any text encodes (no unknown token); then one
id per learned merge, in the order it was learned; then the special tokens (the chat
templates' markers, aitestbed.metis.chat), which `encode` never produces from text:
a user who types "<|end|>" gets its bytes, not the marker. Training is deterministic
(ties between pairs go to the smaller pair), so one corpus gives one tokenizer.
"""

from __future__ import annotations

import heapq
import json
import re
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

# Words, numbers, runs of punctuation, each with its leading space; whitespace alone.
PRETOKEN = re.compile(r"'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+"
                      r"|\s+(?!\S)|\s+")
FORMAT = "aitestbed-byte-bpe/1"


class TokenizerError(ValueError):
    pass


class ByteBPE:
    def __init__(self, merges: list[tuple[int, int]], specials: list[str]):
        self.merges = [tuple(m) for m in merges]
        self.ranks = {pair: 256 + i for i, pair in enumerate(self.merges)}
        self.vocab: list[bytes] = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.specials = list(specials)
        self.special_ids = {name: len(self.vocab) + i for i, name in enumerate(self.specials)}
        self._cache: dict[str, tuple[int, ...]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + len(self.specials)

    def special(self, name: str) -> int:
        try:
            return self.special_ids[name]
        except KeyError:
            raise TokenizerError(f"the tokenizer has no special token {name!r}") from None

    def _encode_word(self, word: str) -> tuple[int, ...]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:
            best = min(((self.ranks.get(p, 1 << 30), i) for i, p in enumerate(pairwise(ids))),
                       default=(1 << 30, -1))
            if best[0] == 1 << 30:
                break
            pair = (ids[best[1]], ids[best[1] + 1])
            merged, i = [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                    merged.append(best[0])
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        result = tuple(ids)
        if len(self._cache) < 50_000:
            self._cache[word] = result
        return result

    def encode(self, text: str) -> list[int]:
        """The ids of `text` (never a special token)."""
        out: list[int] = []
        for word in PRETOKEN.findall(text):
            out.extend(self._encode_word(word))
        return out

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token stands for; b"" for a special token."""
        return self.vocab[token] if 0 <= token < len(self.vocab) else b""

    def decode(self, ids: Iterable[int]) -> str:
        return b"".join(self.token_bytes(t) for t in ids).decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        return {"format": FORMAT, "merges": [list(m) for m in self.merges],
                "specials": self.specials}

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()) + "\n")

    @classmethod
    def load(cls, path: Path) -> ByteBPE:
        try:
            data = json.loads(Path(path).read_text())
            if data.get("format") != FORMAT:
                raise TokenizerError(f"{path} is not an {FORMAT} tokenizer")
            return cls([tuple(m) for m in data["merges"]], data["specials"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise TokenizerError(f"cannot read the tokenizer {path}: {err}") from None

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, specials: list[str]) -> ByteBPE:
        """Learn merges from `texts` until the vocabulary (bytes, merges, specials) has
        `vocab_size` ids, or no pair occurs twice."""
        n_merges = vocab_size - 256 - len(specials)
        if n_merges < 0:
            raise TokenizerError(f"a vocabulary of {vocab_size} cannot hold the 256 bytes "
                                 f"and {len(specials)} special tokens")
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(PRETOKEN.findall(text))
        words = [list(w.encode("utf-8")) for w in sorted(counts)]
        freqs = [counts[w] for w in sorted(counts)]
        pairs: Counter[tuple[int, int]] = Counter()
        where: dict[tuple[int, int], set[int]] = {}
        for index, (word, freq) in enumerate(zip(words, freqs, strict=True)):
            for pair in pairwise(word):
                pairs[pair] += freq
                where.setdefault(pair, set()).add(index)
        heap = [(-count, pair) for pair, count in pairs.items()]
        heapq.heapify(heap)
        merges: list[tuple[int, int]] = []
        while len(merges) < n_merges and heap:
            negative, pair = heapq.heappop(heap)
            if pairs.get(pair, 0) != -negative:
                continue  # a stale entry: the pair's count changed since
            if -negative < 2:
                break
            new_id = 256 + len(merges)
            merges.append(pair)
            changed: set[tuple[int, int]] = set()
            for index in sorted(where.pop(pair, ())):
                word, freq = words[index], freqs[index]
                if len(word) < 2:
                    continue
                for old in pairwise(word):
                    pairs[old] -= freq
                    changed.add(old)
                merged, i = [], 0
                while i < len(word):
                    if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                        merged.append(new_id)
                        i += 2
                    else:
                        merged.append(word[i])
                        i += 1
                words[index] = merged
                for new in pairwise(merged):
                    pairs[new] += freq
                    where.setdefault(new, set()).add(index)
                    changed.add(new)
            pairs.pop(pair, None)
            for p in changed:
                if pairs.get(p, 0) > 0:
                    heapq.heappush(heap, (-pairs[p], p))
                else:
                    pairs.pop(p, None)
        return cls(merges, specials)
