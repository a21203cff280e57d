"""Chat templates: how each served model turns a conversation into token ids.

Each of the docs' three names is served in the chat format of its family, written
here from the formats' public descriptions (not copied from any vendor's template):
  harmony (gpt-oss-120b)
      <|start|>ROLE<|message|>TEXT<|end|> ... <|start|>assistant<|message|>
  mistral (Mistral-Large-3-675B-Instruct-2512)
      <s>[SYSTEM_PROMPT]TEXT[/SYSTEM_PROMPT][INST]TEXT[/INST]ANSWER</s>
  gemma (gemma-4-31B-it)
      <bos><start_of_turn>user\\nTEXT<end_of_turn>\\n<start_of_turn>model\\n
The markers are special tokens of the tokenizer (aitestbed.metis.bpe): a user's text
that contains one is encoded as its bytes, so no one injects a turn. The trainer
renders its chat examples in all three formats, so one set of weights answers in each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aitestbed.metis.bpe import ByteBPE

ROLES = ("system", "developer", "user", "assistant")
Message = dict  # {"role": ..., "content": str}


@dataclass(frozen=True)
class Template:
    name: str
    specials: tuple[str, ...]
    end: tuple[str, ...]  # the markers that end an answer
    # (tokenizer, messages, with the assistant's opening) -> ids
    render_fn: Callable[[ByteBPE, list[Message], bool], list[int]]

    def render(self, tokenizer: ByteBPE, messages: list[Message]) -> list[int]:
        """The prompt: the conversation and the opening of the assistant's answer."""
        return self.render_fn(tokenizer, messages, True)

    def example(self, tokenizer: ByteBPE, messages: list[Message]) -> list[int]:
        """A whole conversation whose last message is the assistant's (for training)."""
        return self.render_fn(tokenizer, messages, False) + [tokenizer.special(self.end[0])]

    def end_ids(self, tokenizer: ByteBPE) -> frozenset[int]:
        return frozenset(tokenizer.special(name) for name in self.end)


def _harmony(tok: ByteBPE, messages: list[Message], opening: bool) -> list[int]:
    start, body, end = (tok.special(s) for s in ("<|start|>", "<|message|>", "<|end|>"))
    ids: list[int] = []
    for i, m in enumerate(messages):
        ids += [start, *tok.encode(m["role"]), body, *tok.encode(m["content"])]
        if opening or i < len(messages) - 1:
            ids.append(end)
    if opening:
        ids += [start, *tok.encode("assistant"), body]
    return ids


def _mistral(tok: ByteBPE, messages: list[Message], opening: bool) -> list[int]:
    s = {name: tok.special(name) for name in
         ("<s>", "</s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]")}
    ids = [s["<s>"]]
    for i, m in enumerate(messages):
        text = tok.encode(m["content"])
        if m["role"] in ("system", "developer"):
            ids += [s["[SYSTEM_PROMPT]"], *text, s["[/SYSTEM_PROMPT]"]]
        elif m["role"] == "user":
            ids += [s["[INST]"], *text, s["[/INST]"]]
        else:
            ids += text
            if opening or i < len(messages) - 1:
                ids.append(s["</s>"])
    return ids


def _gemma(tok: ByteBPE, messages: list[Message], opening: bool) -> list[int]:
    bos, start, end = (tok.special(s) for s in ("<bos>", "<start_of_turn>", "<end_of_turn>"))
    newline = tok.encode("\n")
    ids = [bos]
    system = [m["content"] for m in messages if m["role"] in ("system", "developer")]
    turns = [m for m in messages if m["role"] not in ("system", "developer")]
    for i, m in enumerate(turns):
        role = "model" if m["role"] == "assistant" else "user"
        text = m["content"]
        if system and i == 0 and role == "user":  # gemma has no system turn
            text = "\n\n".join(system) + "\n\n" + text
        ids += [start, *tok.encode(role), *newline, *tok.encode(text)]
        if opening or i < len(turns) - 1:
            ids += [end, *newline]
    if opening:
        ids += [start, *tok.encode("model"), *newline]
    return ids


TEMPLATES = {
    "harmony": Template("harmony", ("<|start|>", "<|message|>", "<|end|>", "<|return|>"),
                        ("<|end|>", "<|return|>"), _harmony),
    "mistral": Template("mistral", ("<s>", "</s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]",
                                    "[/SYSTEM_PROMPT]"), ("</s>",), _mistral),
    "gemma": Template("gemma", ("<bos>", "<start_of_turn>", "<end_of_turn>"),
                      ("<end_of_turn>",), _gemma),
}
# Every marker of every template: the tokenizer holds them all.
SPECIALS = [name for t in TEMPLATES.values() for name in t.specials]


def template(name: str) -> Template:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ValueError(f"no chat template {name!r}: one of {', '.join(TEMPLATES)}") from None
