"""The wording the data layer's refusals and warnings share: the columns of a split with the closest names, a list
cut at five items, a row count.

>>> closest_columns("lable", ["x", "label"])
'columns are: x, label; closest: label'
>>> listed(["'a'", "'b'", "'c'", "'d'", "'e'", "'f'"], "labels")
"'a', 'b', 'c', 'd', 'e' and 1 more labels"
>>> rows_text(1), rows_text(3)
('1 row', '3 rows')
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = ["closest_columns", "columns_message", "listed", "rows_text"]

SHOWN = 5  # items a message names before "and N more"


def columns_message(ds) -> str:
    """The columns of ``ds``, comma-separated."""
    return ", ".join(ds.column_names)


def closest_columns(name: str, columns: Sequence[str]) -> str:
    """``columns are: ...`` and, where some look like ``name``, ``; closest: ...`` (a missing column's hint)."""
    close = difflib.get_close_matches(name, list(columns), n=3)
    return f"columns are: {', '.join(columns)}" + (f"; closest: {', '.join(close)}" if close else "")


def listed(found: Sequence[str], noun: str = "") -> str:
    """The first ``SHOWN`` of ``found``, comma-separated, then ``and N more`` (``and N more <noun>``)."""
    more = len(found) - SHOWN
    return ", ".join(found[:SHOWN]) + (f" and {more} more{' ' + noun if noun else ''}" if more > 0 else "")


def rows_text(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"
