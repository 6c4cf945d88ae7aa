"""CSV that a spreadsheet opens as data, never as formulas: every CSV the studio writes goes through `to_csv`,
and a CSV it reads back (the ratings import) passes each cell through `unguard`.

A spreadsheet runs a cell that begins with = + - or @ as a formula (`=cmd|' /C calc'!A0`), and some strip a
leading tab or carriage return first. Following OWASP's advice on CSV injection, the rule is:

- a number the studio writes (an int or a float, such as a latency of -3.5 or a cost) is written as it is: it is
  the studio's own figure, not text someone typed, and a spreadsheet reads it as a number;
- a text cell that begins with = + - @, a tab or a carriage return gets one single quote in front (`'=cmd…`),
  which spreadsheets show as text and never evaluate. So does a text cell that begins with the single quote
  itself, so that reading back is exact;
- reading back (`unguard`) removes that one quote: `unguard(guard(text)) == text` for every text.

Rows end in CRLF (RFC 4180), so a cell holding a line break of either kind is quoted and stays one cell.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from numbers import Number
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
GUARD = "'"
_GUARDED = (*FORMULA_STARTS, GUARD)


def guard(value: Any) -> Any:
    """The cell as written: a number unchanged, None empty, a text that a spreadsheet would run quoted."""
    if value is None:
        return ""
    if isinstance(value, Number):
        return value
    text = str(value)
    return GUARD + text if text.startswith(_GUARDED) else text


def unguard(cell: str) -> str:
    """A cell as `guard` meant it: its guard quote removed (a quote before anything else is left alone)."""
    if cell.startswith(GUARD) and cell[1:].startswith(_GUARDED):
        return cell[1:]
    return cell


def to_csv(rows: Iterable[Mapping[str, Any]], columns: tuple[str, ...]) -> str:
    """The rows as CSV text: a header of `columns`, each row's cells guarded (missing keys and None empty)."""
    buf = io.StringIO()
    # CRLF rows (RFC 4180): the csv module quotes a cell holding any character of the line terminator, so a
    # carriage return inside a cell (an error text) is quoted too instead of breaking the row in a spreadsheet
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow([guard(c) for c in columns])
    for row in rows:
        w.writerow([guard(row.get(c)) for c in columns])
    return buf.getvalue()
