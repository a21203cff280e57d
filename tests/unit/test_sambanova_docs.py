"""/software/sambanova/docs/latest: the guide's PDF names, our own documentation in them."""

import re
from pathlib import Path

import pytest
from aitestbed.host.errors import AitestbedError
from aitestbed.host.systems import sambanova as sambanova_entry
from aitestbed.sambanova import docs
from aitestbed.sambanova.pdf import Document

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# The guide's list (seed 002, "Documentation"), in its order.
GUIDE = ["getting-started.pdf", "accuracy-debugging-tools.pdf", "compiler-options.pdf",
         "conversion-to-sambaflow.pdf", "intermediate-tutorial.pdf",
         "intro-tutorial-pytorch.pdf", "release-notes.pdf", "run-examples-language.pdf",
         "run-examples-pytorch.pdf", "run-examples-vision.pdf", "using-layernorm.pdf",
         "using-venvs.pdf"]


def read(path: str) -> str:
    return (ROOT / path).read_text()


def check_structure(data: bytes) -> dict[int, bytes]:
    """Parse the file as a reader does (from the end): startxref, the xref table, every
    object at its offset, the trailer's Root and Info; the objects by number."""
    assert data.startswith(b"%PDF-1.4\n") and data.endswith(b"%%EOF\n")
    xref = int(re.search(rb"startxref\n(\d+)\n%%EOF\n\Z", data).group(1))
    assert data[xref:xref + 5] == b"xref\n"
    head = re.match(rb"xref\n0 (\d+)\n", data[xref:])
    size = int(head.group(1))
    table = data[xref + head.end():xref + head.end() + 20 * size]
    entries = [table[i:i + 20] for i in range(0, len(table), 20)]
    assert entries[0] == b"0000000000 65535 f \n"
    objects = {}
    for number, entry in enumerate(entries[1:], 1):
        assert re.fullmatch(rb"\d{10} 00000 n \n", entry), entry
        offset = int(entry[:10])
        assert data[offset:].startswith(b"%d 0 obj\n" % number)
        end = data.index(b"\nendobj\n", offset)
        objects[number] = data[offset + len(b"%d 0 obj\n" % number):end]
    trailer = data[xref + head.end() + 20 * size:]
    assert trailer.startswith(b"trailer\n<< /Size %d /Root 1 0 R /Info 3 0 R >>" % size)
    assert objects[1] == b"<< /Type /Catalog /Pages 2 0 R >>"
    kids = [int(k) for k in re.findall(rb"(\d+) 0 R", objects[2])]
    assert int(re.search(rb"/Count (\d+)", objects[2]).group(1)) == len(kids) >= 1
    for kid in kids:
        page = objects[kid]
        assert page.startswith(b"<< /Type /Page /Parent 2 0 R")
        for font in re.findall(rb"/F\d (\d+) 0 R", page):
            assert b"/Type /Font" in objects[int(font)]
        stream = objects[int(re.search(rb"/Contents (\d+) 0 R", page).group(1))]
        length = int(re.match(rb"<< /Length (\d+) >>\nstream\n", stream).group(1))
        body = stream[stream.index(b"stream\n") + 7:]
        assert len(body) == length + len(b"endstream")
    return objects


def text_of(objects: dict[int, bytes]) -> str:
    """The shown strings, unescaped, joined with spaces."""
    shown = []
    for body in objects.values():
        for literal in re.findall(rb"\(((?:[^()\\]|\\.)*)\) Tj", body):
            shown.append(re.sub(rb"\\(.)", rb"\1", literal).decode("cp1252"))
    return " ".join(shown)


def test_the_writer_makes_a_valid_pdf_with_the_text_and_page_breaks():
    document = Document(title="A (test)", header="the header", footer="f")
    document.heading("Heading one", level=1)
    document.paragraph("word " * 1000 + "back\\slash (paren)")
    document.code("$ echo (hi)\n  indented")
    document.page_break()
    document.paragraph("after the break \u2192 arrow, 88.3 %, \u00d7")
    data = document.to_bytes()
    objects = check_structure(data)
    text = text_of(objects)
    assert "Heading one" in text and "back\\slash (paren)" in text
    assert "$ echo (hi)" in text and "  indented" in text
    assert "after the break -> arrow, 88.3 %, \u00d7" in text
    pages = int(re.search(rb"/Count (\d+)", objects[2]).group(1))
    assert pages == 3  # 1,000 words fill more than a page, then the break
    assert text.count("the header") == pages and f"page {pages} of {pages}" in text
    assert b"/Title (A \\(test\\))" in objects[3]
    assert document.to_bytes() == data


def test_the_twelve_files_are_the_guides_names_and_say_they_are_ours():
    assert list(docs.NAMES) == GUIDE
    pdfs = docs.build_all(read, "1.11.5")
    assert list(pdfs) == GUIDE
    for name, data in pdfs.items():
        objects = check_structure(data)
        text = text_of(objects)
        assert "aitestbed emulator documentation - not SambaNova's" in text, name
        assert "This is the aitestbed emulator's documentation, not SambaNova's" in text
        assert f"{name} (aitestbed, emulated SambaFlow 1.11.5)" in text
        assert b"/CreationDate (D:20230601000000Z)" in objects[3]
    started = text_of(check_structure(pdfs["getting-started.pdf"]))
    assert "ssh sn30-r1-h1" in started and "snd owns each node's RDUs" in started
    assert "The emulation has no BERT" in text_of(check_structure(
        pdfs["run-examples-language.pdf"]))
    assert "Vendor code that runs unmodified" in text_of(check_structure(
        pdfs["conversion-to-sambaflow.pdf"]))


def test_a_rebuild_gives_the_same_bytes(tmp_path):
    first = sambanova_entry.write_sambanova_docs(ROOT, tmp_path / "a", "1.11.5")
    second = sambanova_entry.write_sambanova_docs(ROOT, tmp_path / "b", "1.11.5")
    assert [p.name for p in first] == GUIDE
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_a_part_our_docs_lost_fails_the_build_in_one_line(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "sambanova.md").write_text("# SambaNova\n\nNothing else.\n")
    with pytest.raises(AitestbedError, match="cannot write the SambaNova documentation: "
                       "docs/sambanova.md has no bullet starting"):
        sambanova_entry.write_sambanova_docs(tmp_path, tmp_path / "out", "1.11.5")
