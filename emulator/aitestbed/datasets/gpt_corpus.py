"""A synthetic, learnable pre-training corpus for the GPT-1.5B example (`/data/ANL/ss1024`).

SYNTHETIC DATA. The corpus the ALCF GPT-1.5B runs read (`--data_dir
/data/ANL/ss1024`: text tokenised with the GPT-2 tokenizer and packed into
sequences of 1,024 tokens) is not available offline. This module writes,
deterministically from a fixed seed, a stand-in that a language model can
really learn:

* English-like text from a small probabilistic grammar: documents about one
  topic each (a topic biases which nouns appear), sentences with determiners,
  adjectives, nouns and verbs that agree in number ("two old farmers sell"
  / "the old farmer sells"), prepositional phrases, adverbs and conjunctions,
  documents separated by `<|endoftext|>`;
* tokenised with a word-level vocabulary of a few hundred tokens (`vocab.json`,
  id 0 is `<|endoftext|>`), so that the emulator's reduced GPT trains on it
  without the 50,257-token GPT-2 vocabulary;
* packed into sequences of 1,024 token ids (uint16), stored as NumPy arrays:
  `train_<i>_of_<n>.npy` (shape (sequences, 1024)) and `dev_0_of_1.npy`.

A model that learns agreement and the topic structure gets well below the
uniform log(vocabulary) loss within a few dozen steps.

    python -m aitestbed.datasets.gpt_corpus --out /data/ANL/ss1024
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from aitestbed.datasets import build_once, command

SEQUENCE_LENGTH = 1024
TRAIN_SHARDS = 4
SEQUENCES_PER_SHARD = 256
DEV_SEQUENCES = 64
SEED = 20230418
EOS = "<|endoftext|>"
VERSION = "aitestbed-gpt-corpus-synthetic-1"

ADJECTIVES = """old young small large red green blue quiet loud bright dark happy tired busy
clever gentle brave careful strange famous ancient modern heavy light warm cold wet dry
rich poor early late simple curious patient quick slow friendly lonely proud calm wild
golden silver wooden broken hidden distant local northern southern tall short narrow wide
""".split()

# (singular, plural) nouns, grouped by topic.
TOPICS = {
    "farm": "farmer cow horse field barn tractor apple sheep goat fence orchard harvest",
    "sea": "sailor ship harbor wave island fish captain anchor storm lighthouse net shell",
    "city": "driver street tower market bus shop bridge crowd office train station lamp",
    "school": "teacher student book lesson pencil desk library exam class map question idea",
    "forest": "hunter tree wolf river path bird fox cabin stone deer mushroom trail",
    "kitchen": "cook bread knife oven soup plate cup table recipe garden onion kettle",
    "space": "pilot rocket planet star moon engine signal crew station orbit comet robot",
    "music": "singer song drum piano band stage concert violin guitar note choir player",
}
IRREGULAR = {"sheep": "sheep", "fish": "fish", "deer": "deer", "knife": "knives",
             "wolf": "wolves", "shelf": "shelves", "class": "classes", "bus": "buses",
             "box": "boxes", "fox": "foxes", "lunch": "lunches", "match": "matches",
             "church": "churches", "glass": "glasses", "torch": "torches"}

VERBS = """see find carry follow watch paint build clean open visit help call
remember count move push pull lift draw repair sell buy bring keep hold""".split()
INTRANSITIVE = "sleep wait listen rest sing work laugh travel dream wander".split()
ADVERBS = """quickly slowly quietly carefully often rarely happily early late again
together alone""".split()
PREPOSITIONS = "near under behind beside inside across beyond through".split()
CONJUNCTIONS = "and but because while so".split()
SINGULAR_DETERMINERS = "a the one this every that".split()
PLURAL_DETERMINERS = "the two three some many these those all".split()
PRONOUNS = {"he": True, "she": True, "it": True, "they": False, "we": False}


def _plural(noun: str) -> str:
    if noun in IRREGULAR:
        return IRREGULAR[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _third_person(verb: str) -> str:
    if verb.endswith(("s", "x", "ch", "sh")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def vocabulary() -> list[str]:
    """Every token, id order: <|endoftext|> first, punctuation, then the words."""
    words: list[str] = [EOS, ".", ",", "the", "a", "an"]
    nouns = sorted({n for group in TOPICS.values() for n in group.split()})
    groups = (ADJECTIVES, nouns, [_plural(n) for n in nouns], VERBS,
              [_third_person(v) for v in VERBS], INTRANSITIVE,
              [_third_person(v) for v in INTRANSITIVE], ADVERBS, PREPOSITIONS, CONJUNCTIONS,
              SINGULAR_DETERMINERS, PLURAL_DETERMINERS, list(PRONOUNS))
    for group in groups:
        for word in group:
            if word not in words:
                words.append(word)
    return words


class Grammar:
    """Sentences and documents, drawn from a seeded generator."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.topics = {t: words.split() for t, words in TOPICS.items()}
        self.all_nouns = sorted({n for words in self.topics.values() for n in words})

    def pick(self, items: list[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def noun_phrase(self, topic: list[str], singular: bool) -> list[str]:
        noun = self.pick(topic) if self.rng.random() < 0.8 else self.pick(self.all_nouns)
        words = [self.pick(SINGULAR_DETERMINERS if singular else PLURAL_DETERMINERS)]
        for _ in range(int(self.rng.choice([0, 0, 1, 1, 2]))):
            words.append(self.pick(ADJECTIVES))
        if words[0] == "a" and len(words) > 1 and words[1][0] in "aeiou":
            words[0] = "an"
        if words[0] == "a" and len(words) == 1 and noun[0] in "aeiou":
            words[0] = "an"
        words.append(noun if singular else _plural(noun))
        return words

    def clause(self, topic: list[str]) -> list[str]:
        if self.rng.random() < 0.15:
            pronoun = self.pick(list(PRONOUNS))
            singular, subject = PRONOUNS[pronoun], [pronoun]
        else:
            singular = bool(self.rng.random() < 0.6)
            subject = self.noun_phrase(topic, singular)
        if self.rng.random() < 0.75:
            verb = self.pick(VERBS)
            words = subject + [_third_person(verb) if singular else verb]
            words += self.noun_phrase(topic, bool(self.rng.random() < 0.6))
        else:
            verb = self.pick(INTRANSITIVE)
            words = subject + [_third_person(verb) if singular else verb]
        if self.rng.random() < 0.4:
            words += [self.pick(PREPOSITIONS)] + self.noun_phrase(topic, True)
        if self.rng.random() < 0.3:
            words.append(self.pick(ADVERBS))
        return words

    def sentence(self, topic: list[str]) -> list[str]:
        words = self.clause(topic)
        if self.rng.random() < 0.3:
            words += [","] + [self.pick(CONJUNCTIONS)] + self.clause(topic)
        return words + ["."]

    def document(self) -> list[str]:
        topic = self.topics[self.pick(sorted(self.topics))]
        words: list[str] = []
        for _ in range(int(self.rng.integers(3, 12))):
            words += self.sentence(topic)
        return words + [EOS]


def token_stream(count: int, seed: int) -> np.ndarray:
    """`count` token ids of concatenated documents."""
    ids = {word: i for i, word in enumerate(vocabulary())}
    grammar = Grammar(np.random.default_rng(seed))
    out = np.empty(count, dtype=np.uint16)
    filled = 0
    while filled < count:
        doc = [ids[w] for w in grammar.document()]
        take = min(len(doc), count - filled)
        out[filled:filled + take] = doc[:take]
        filled += take
    return out


def decode(tokens, vocab: list[str] | None = None) -> str:
    vocab = vocab or vocabulary()
    return " ".join(vocab[int(t)] for t in tokens)


def shard_names(shards: int = TRAIN_SHARDS) -> list[str]:
    return [f"train_{i}_of_{shards}.npy" for i in range(shards)]


def build(root: str | Path, *, seed: int = SEED, shards: int = TRAIN_SHARDS,
          sequences_per_shard: int = SEQUENCES_PER_SHARD, dev_sequences: int = DEV_SEQUENCES
          ) -> Path:
    """Write the corpus into `root` (the ss1024 directory itself); return root. Idempotent."""
    stamp = f"{VERSION} seed={seed} shards={shards}x{sequences_per_shard} dev={dev_sequences}\n"

    def write(tmp: Path) -> None:
        vocab = vocabulary()
        for i, name in enumerate(shard_names(shards)):
            tokens = token_stream(sequences_per_shard * SEQUENCE_LENGTH, seed + 1 + i)
            np.save(tmp / name, tokens.reshape(sequences_per_shard, SEQUENCE_LENGTH))
        dev = token_stream(dev_sequences * SEQUENCE_LENGTH, seed)
        np.save(tmp / "dev_0_of_1.npy", dev.reshape(dev_sequences, SEQUENCE_LENGTH))
        (tmp / "vocab.json").write_text(json.dumps({w: i for i, w in enumerate(vocab)}, indent=0))
        (tmp / "README.md").write_text(
            "# ss1024 (synthetic)\n\n"
            "SYNTHETIC pre-training corpus written by the aitestbed emulator\n"
            "(`python -m aitestbed.datasets.gpt_corpus`): grammar-generated English-like text,\n"
            f"word-level vocabulary of {len(vocab)} tokens (vocab.json), packed into sequences of\n"
            f"{SEQUENCE_LENGTH} uint16 token ids: {shards} train shards of {sequences_per_shard} "
            f"sequences, one dev shard of {dev_sequences}. Seed {seed}.\n")

    return build_once(root, stamp, write)


def main(argv: list[str] | None = None) -> None:
    command.main(
        argv, "gpt_corpus",
        "Write the synthetic GPT pre-training corpus (sequences of 1,024 tokens)",
        [command.out_option("the corpus directory to write, e.g. /data/ANL/ss1024"),
         command.seed_option(SEED)],
        lambda args: [f"{build(args.out, seed=args.seed)}: {TRAIN_SHARDS} x "
                      f"{SEQUENCES_PER_SHARD} training sequences of {SEQUENCE_LENGTH} tokens "
                      f"(synthetic, vocabulary {len(vocabulary())})"])


if __name__ == "__main__":
    sys.exit(main())
