"""A small PDF writer: headings, wrapped paragraphs, monospaced blocks, page breaks.

Enough for the documentation the emulated system ships (/software/sambanova/docs):
PDF 1.4 with the standard Type 1 fonts (nothing embedded), uncompressed content
streams and a classic cross-reference table. The output depends only on the input:
no clock is read, so a rebuild gives the same bytes.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

PAGE_WIDTH, PAGE_HEIGHT = 612, 792  # US Letter, in points
MARGIN = 72
FONTS = {"F1": "Helvetica", "F2": "Helvetica-Bold", "F3": "Courier", "F4": "Helvetica-Oblique"}
BODY_SIZE, CODE_SIZE, HEADING_SIZE, TITLE_SIZE, NOTE_SIZE = 10, 8.5, 13, 18, 8
# Characters per line: Helvetica's average width is about half its size (a margin
# kept), Courier's 0.6 of it.
BODY_CHARS = int((PAGE_WIDTH - 2 * MARGIN) / (BODY_SIZE * 0.52))
CODE_CHARS = int((PAGE_WIDTH - 2 * MARGIN) / (CODE_SIZE * 0.6))
# What WinAnsiEncoding lacks, as the nearest ASCII.
_ASCII = {"\u2192": "->", "\u2190": "<-", "\u2264": "<=", "\u2265": ">=", "\u2026": "...",
          "\u2248": "~", "\u2212": "-", "\u2502": "|", "\u2588": "#", "\u258f": "|"}


def _latin(text: str) -> bytes:
    for char, ascii_ in _ASCII.items():
        text = text.replace(char, ascii_)
    return text.encode("cp1252", errors="replace")


def _literal(text: str) -> bytes:
    """A PDF string literal: (text) with \\, ( and ) escaped."""
    data = _latin(text).replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    return b"(" + data + b")"


@dataclass
class Document:
    """Blocks laid out top to bottom; `header` and `footer` are printed on every page."""

    title: str
    header: str = ""
    footer: str = ""
    info: dict[str, str] = field(default_factory=dict)
    _pages: list[list[bytes]] = field(default_factory=lambda: [[]])
    _y: float = PAGE_HEIGHT - MARGIN

    # -- layout --------------------------------------------------------------------------
    def _line(self, font: str, size: float, text: str, gap: float = 0.0) -> None:
        height = size * 1.3
        if self._y - height - gap < MARGIN:
            self.page_break()
        else:
            self._y -= gap
        self._y -= height
        self._pages[-1].append(b"BT /%s %g Tf %d %g Td %s Tj ET" % (
            font.encode(), size, MARGIN, round(self._y, 2), _literal(text)))

    def page_break(self) -> None:
        if self._pages[-1]:
            self._pages.append([])
        self._y = PAGE_HEIGHT - MARGIN

    def heading(self, text: str, level: int = 2) -> None:
        size = TITLE_SIZE if level <= 1 else HEADING_SIZE
        # A heading does not end a page: keep it with at least three lines after it.
        if self._y - size * 1.3 - 3 * BODY_SIZE * 1.3 - 12 < MARGIN:
            self.page_break()
        for line in textwrap.wrap(text, int(BODY_CHARS * BODY_SIZE / size)) or [""]:
            self._line("F2", size, line, gap=12 if self._pages[-1] else 0)

    def paragraph(self, text: str, indent: str = "") -> None:
        lines = textwrap.wrap(" ".join(text.split()), BODY_CHARS, initial_indent=indent,
                              subsequent_indent=" " * len(indent) * 2)
        for index, line in enumerate(lines):
            self._line("F1", BODY_SIZE, line, gap=6 if index == 0 and self._pages[-1] else 0)

    def code(self, text: str) -> None:
        first = True
        for raw in text.rstrip("\n").split("\n"):
            for line in textwrap.wrap(raw, CODE_CHARS, subsequent_indent="    ",
                                      drop_whitespace=False) or [""]:
                self._line("F3", CODE_SIZE, line, gap=6 if first and self._pages[-1] else 0)
                first = False

    # -- output --------------------------------------------------------------------------
    def _decorations(self, number: int, count: int) -> bytes:
        top = PAGE_HEIGHT - MARGIN / 2
        parts = []
        if self.header:
            parts.append(b"BT /F4 %g Tf %d %g Td %s Tj ET" % (
                NOTE_SIZE, MARGIN, top, _literal(self.header)))
        footer = f"{self.footer} - page {number} of {count}" if self.footer \
            else f"page {number} of {count}"
        parts.append(b"BT /F4 %g Tf %d %g Td %s Tj ET" % (
            NOTE_SIZE, MARGIN, MARGIN / 2, _literal(footer)))
        return b"\n".join(parts)

    def to_bytes(self) -> bytes:
        pages = self._pages if self._pages[-1] or len(self._pages) == 1 else self._pages[:-1]
        count = len(pages)
        fonts = list(FONTS.items())
        # Object numbers: 1 catalog, 2 pages, 3 info, fonts, then (page, content) pairs.
        font_ids = {name: 4 + i for i, (name, _base) in enumerate(fonts)}
        first_page = 4 + len(fonts)
        page_ids = [first_page + 2 * i for i in range(count)]
        objects: dict[int, bytes] = {
            1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
                b" ".join(b"%d 0 R" % i for i in page_ids), count),
            3: b"<< " + b" ".join(b"/%s %s" % (key.encode(), _literal(value))
                                  for key, value in [("Title", self.title), *self.info.items()])
               + b" >>",
        }
        for name, base in fonts:
            objects[font_ids[name]] = (b"<< /Type /Font /Subtype /Type1 /BaseFont /%s "
                                       b"/Encoding /WinAnsiEncoding >>" % base.encode())
        resources = b"<< /Font << %s >> >>" % b" ".join(
            b"/%s %d 0 R" % (name.encode(), font_ids[name]) for name, _base in fonts)
        for number, (page_id, content) in enumerate(zip(page_ids, pages, strict=True), 1):
            stream = b"\n".join([self._decorations(number, count), *content]) + b"\n"
            objects[page_id] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
                                b"/Resources %s /Contents %d 0 R >>" % (
                                    PAGE_WIDTH, PAGE_HEIGHT, resources, page_id + 1))
            objects[page_id + 1] = (b"<< /Length %d >>\nstream\n" % len(stream) + stream
                                    + b"endstream")
        out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets = {}
        for number in sorted(objects):
            offsets[number] = len(out)
            out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
        xref = len(out)
        size = max(objects) + 1
        out += b"xref\n0 %d\n0000000000 65535 f \n" % size
        for number in range(1, size):
            out += b"%010d 00000 n \n" % offsets[number]
        out += b"trailer\n<< /Size %d /Root 1 0 R /Info 3 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
            size, xref)
        return bytes(out)
