"""Text cells of the CSV files this project writes for people to open, in a spreadsheet as
often as not: a spreadsheet runs a cell that starts with =, +, - or @ as a formula, so such a
text (or one that starts with a tab, a carriage return or the escape itself) is written
behind a single quote, which spreadsheets show as text and this project's readers remove.
Numbers are written as numbers: a negative one is not text and runs nothing."""

from __future__ import annotations

# Cells a spreadsheet would take for a formula (OWASP's list), and the escape itself.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"


def neutral(text: str) -> str:
    """`text` as a cell a spreadsheet shows as text."""
    return ESCAPE + text if text.startswith((*FORMULA_STARTS, ESCAPE)) else text


def read_back(cell: str) -> str:
    """The text `neutral` wrote."""
    return cell.removeprefix(ESCAPE)
