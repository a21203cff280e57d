"""PrettyTable's default look (prettytable itself when it is installed)."""

from __future__ import annotations


def render(field_names: list[str], rows: list[tuple]) -> str:
    try:
        from prettytable import PrettyTable
    except ImportError:
        PrettyTable = None  # noqa: N806
    if PrettyTable is not None:
        table = PrettyTable()
        table.field_names = field_names
        for row in rows:
            table.add_row(row)
        return str(table)
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(field_names)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values):
        cells = (f" {v.center(w)} " for v, w in zip(values, widths, strict=True))
        return "|" + "|".join(cells) + "|"

    return "\n".join([rule, line(field_names), rule, *(line(r) for r in cells), rule])
