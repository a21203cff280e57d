"""The documentation at /software/sambanova/docs/latest, written from our own docs.

The guide (seed 002, "Documentation") lists twelve PDFs there and has users copy
them with `scp -r ALCFUserID@sambanova.alcf.anl.gov:/software/sambanova/docs/latest/* .`.
SambaNova's PDFs are not ours to ship: each file of the same name here is the
aitestbed emulator's documentation of that topic, says so on every page, and is
made from the project's docs/sambanova.md (the parts that fit the title); where we
have nothing on a topic the file says plainly what the emulation has and lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from aitestbed.sambanova.pdf import Document

SOURCE = "docs/sambanova.md"
# Fixed, so that a rebuild gives the image's bytes (the guide's documentation is of 2023).
DATE = "D:20230601000000Z"
HEADER = "aitestbed emulator documentation - not SambaNova's"


class DocsError(ValueError):
    """Our docs no longer have a part a PDF is made from."""


@dataclass(frozen=True)
class Part:
    """A part of docs/sambanova.md: the text before its first bullet ("intro"), the
    bullet whose text starts with `lead`, or the section under the heading `lead`."""

    kind: str  # intro | bullet | section
    lead: str = ""


@dataclass(frozen=True)
class Pdf:
    name: str
    guide: str  # what the guide says the file is
    parts: tuple[Part | str, ...]  # a str is a paragraph of its own


INTRO = Part("intro")
SND = Part("bullet", "**`snd` owns each node's RDUs**")
SAMBAFLOW = Part("bullet", "**`sambaflow`**")
TIME = Part("bullet", "**Time is the device's**")
ENVIRONMENT = Part("bullet", "**Environment.**")
APPS = Part("bullet", "**Apps, ours, at reduced scale with real training**")
DATA = Part("bullet", "**Data is offline.**")
ACCURACY = Part("bullet", "**Accuracy**")
VENDOR = Part("section", "## Vendor code that runs unmodified")

# The guide's list, in its order.
PDFS: tuple[Pdf, ...] = (
    Pdf("getting-started.pdf", "Getting Started with SambaFlow",
        (INTRO, SND, SAMBAFLOW, ENVIRONMENT, DATA)),
    Pdf("accuracy-debugging-tools.pdf", "Introduction to the model accuracy debugging tools.",
        ("The emulation has none of SambaNova's accuracy debugging tools. What it has: an "
         "app's `test` command runs the RDU side in bfloat16 (CPU autocast) against the CPU's "
         "fp32 copy of the model and reports each output's and gradient's error (see "
         "sambaflow below), and training is real, so losses and accuracies are measured.",
         SAMBAFLOW, ACCURACY)),
    Pdf("compiler-options.pdf",
        "Provides advanced compiler options for the compile command.",
        ("The emulation has no document of SambaNova's advanced compiler options. Its "
         "compile traces the model on the CPU and writes a PEF recording the batch size, "
         "tiles, world size and the graph's digest; what it accepts and prints is below.",
         SAMBAFLOW, TIME)),
    Pdf("conversion-to-sambaflow.pdf", "Converting existing models to SambaFlow",
        ("What of SambaFlow's Python surface the emulation has, and which of SambaNova's "
         "public tutorials run on it unmodified:", SAMBAFLOW, VENDOR)),
    Pdf("intermediate-tutorial.pdf", "SambaFlow intermediate model",
        ("The emulation has no intermediate tutorial of its own. The apps it ships, and "
         "SambaNova's public tutorials it was tried with:", APPS, VENDOR)),
    Pdf("intro-tutorial-pytorch.pdf", "A peek into the code of the above example program.",
        ("The starters' code (lenet, ffn_mnist, logreg) is in /opt/sambaflow/apps/starters "
         "on the SN30 nodes: read it there. How to run them, as the guide does:",
         INTRO, APPS)),
    Pdf("release-notes.pdf",
        "Provide new feature and bug fixes updates for each release version.",
        ("These are not SambaNova's release notes. The nodes run SambaFlow {version} as "
         "emulated by aitestbed (`sambaflow.__version__`); the emulation's changes are in "
         "the aitestbed project's history. What this release of the emulation has:",
         SAMBAFLOW, ENVIRONMENT)),
    Pdf("run-examples-language.pdf", "Run BERT on RDU",
        ("The emulation has no BERT. Its language model is GPT-1.5B (the guide's "
         "transformers_hook.py runs), described under the apps below.", APPS, TIME)),
    Pdf("run-examples-pytorch.pdf", "Run Power PCA and micro models like GEMM on RDU",
        ("The emulation has no Power PCA and no micro models such as GEMM. Its PyTorch "
         "examples are the starters and apps below.", APPS)),
    Pdf("run-examples-vision.pdf", "Run UNET on RDU.", (APPS, TIME, DATA)),
    Pdf("using-layernorm.pdf", "Example to use LayerNorm instead of BatchNorm",
        ("The emulation has no document on this topic. Models run on CPU PyTorch, so "
         "torch.nn.LayerNorm and torch.nn.BatchNorm2d compute as they do in PyTorch; the "
         "emulation's timing model does not tell them apart.", SAMBAFLOW)),
    Pdf("using-venvs.pdf", "Python Virtual Environment.", (ENVIRONMENT,)),
)

NAMES = tuple(pdf.name for pdf in PDFS)


def _bullets(markdown: str) -> list[str]:
    """The top-level bullets' texts ("- " at the start of a line, continued while indented)."""
    out: list[str] = []
    current: list[str] | None = None
    for line in markdown.split("\n"):
        if line.startswith("- "):
            current = [line[2:]]
            out.append("")
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line.strip())
        else:
            current = None
            continue
        out[-1] = " ".join(current)
    return out


def extract(markdown: str, part: Part) -> str:
    """The markdown of `part`; DocsError when our docs no longer have it."""
    if part.kind == "intro":
        body = markdown.split("\n- ", 1)[0]
        return re.sub(r"\A# .*\n", "", body).strip()
    if part.kind == "bullet":
        for text in _bullets(markdown):
            if text.startswith(part.lead):
                return text
        raise DocsError(f"{SOURCE} has no bullet starting {part.lead!r}")
    if part.kind == "section":
        lines = markdown.split("\n")
        level = len(part.lead) - len(part.lead.lstrip("#"))
        try:
            start = lines.index(part.lead)
        except ValueError:
            raise DocsError(f"{SOURCE} has no heading {part.lead!r}") from None
        end = next((i for i in range(start + 1, len(lines))
                    if re.match(rf"#{{1,{level}}} ", lines[i])), len(lines))
        return "\n".join(lines[start:end]).strip()
    raise DocsError(f"unknown part {part.kind!r}")


def _plain(text: str) -> str:
    """Inline markdown as plain text: no ** or backticks."""
    return text.replace("**", "").replace("`", "")


def _render(document: Document, markdown: str) -> None:
    """Markdown (headings, code fences, bullets, tables, paragraphs) into the document."""
    fence: list[str] | None = None
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            text = " ".join(paragraph)
            bullet = text.startswith("- ")
            document.paragraph(_plain(text[2:] if bullet else text),
                               indent="- " if bullet else "")
            paragraph.clear()

    for line in markdown.split("\n"):
        if fence is not None:
            if line.startswith("```"):
                document.code("\n".join(fence))
                fence = None
            else:
                fence.append(line)
        elif line.startswith("```"):
            flush()
            fence = []
        elif line.startswith("#"):
            flush()
            document.heading(_plain(line.lstrip("#").strip()), level=2)
        elif line.startswith("|"):
            flush()
            if not re.fullmatch(r"[|\-: ]+", line):
                cells = [_plain(cell.strip()) for cell in line.strip("|").split(" | ")]
                document.paragraph(" / ".join(cells), indent="- ")
        elif not line.strip():
            flush()
        elif line.startswith("- "):
            flush()
            paragraph.append(line)
        else:
            paragraph.append(line.strip())
    flush()
    if fence is not None:
        document.code("\n".join(fence))


def build(pdf: Pdf, read: Callable[[str], str], version: str) -> bytes:
    """One PDF's bytes; `read` gives a file of the project by its path (docs/...)."""
    markdown = read(SOURCE)
    document = Document(
        title=f"{pdf.guide.rstrip('.')} (aitestbed emulator)", header=HEADER,
        footer=f"{pdf.name} (aitestbed, emulated SambaFlow {version})",
        info={"Author": "aitestbed (ALCF AI Testbed emulator)",
              "Subject": f"The emulated SambaFlow {version}: not SambaNova's documentation",
              "Producer": "aitestbed.sambanova.pdf", "CreationDate": DATE, "ModDate": DATE})
    document.heading(f"{pdf.name}: {pdf.guide.rstrip('.')}", level=1)
    document.paragraph(
        f"This is the aitestbed emulator's documentation, not SambaNova's. The ALCF guide "
        f"lists a file of this name in /software/sambanova/docs/latest ('{pdf.guide}'); "
        f"SambaNova's document is not reproduced here. This file describes what the "
        f"emulated SambaFlow {version} on this cluster does, made from the aitestbed "
        f"project's {SOURCE}. SambaNova's documentation: https://docs.sambanova.ai")
    for part in pdf.parts:
        if isinstance(part, str):
            document.paragraph(_plain(part.format(version=version)))
        else:
            _render(document, extract(markdown, part))
    return document.to_bytes()


def build_all(read: Callable[[str], str], version: str) -> dict[str, bytes]:
    return {pdf.name: build(pdf, read, version) for pdf in PDFS}
