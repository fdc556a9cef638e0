"""The wording the data layer's refusals, warnings and summary line share: the columns of a split with the closest
names, a list cut at five items, a row count, the rows left out at load, the per-class counts.

>>> closest_columns("lable", ["x", "label"])
'columns are: x, label; closest: label'
>>> listed(["'a'", "'b'", "'c'", "'d'", "'e'", "'f'"], "labels")
"'a', 'b', 'c', 'd', 'e' and 1 more labels"
>>> rows_text(1), rows_text(3)
('1 row', '3 rows')
>>> dropped_text({"empty label": 2, "label 'NA'": 5, "label -100": 1})
"2 rows with an empty label, 5 rows labelled 'NA' (label_na_values), 1 labelled -100"
>>> counts_text([f"c{k}" for k in range(30)], list(range(30)))
'30 classes, 0 to 29 each (median 14.5); fewest: c0: 0, c1: 1, c2: 2, c3: 3, c4: 4;
 most: c29: 29, c28: 28, c27: 27, c26: 26, c25: 25'
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = ["closest_columns", "columns_message", "counts_text", "dropped_text", "listed", "rows_text"]

SHOWN = 5  # items a message names before "and N more"
UNREADABLE_IMAGE = "unreadable image"  # EASTData.dropped's reason for a row whose image file PIL cannot open
SHOWN_COUNTS = 20  # classes whose counts a summary line lists; past it the fewest and the most


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


def dropped_text(dropped: dict[str, int]) -> str:
    """The rows left out at load (``EASTData.dropped``), by reason, as a summary line says them."""
    what = {
        "empty label": "with an empty label",
        "empty text": "with an empty text",
        UNREADABLE_IMAGE: "with an image PIL cannot open",
    }
    parts = []
    for reason, n in dropped.items():
        if reason in what:
            parts.append(f"{rows_text(n)} {what[reason]}")
        elif reason == "label -100":
            parts.append(f"{n} labelled -100")
        else:  # a missing-value marker: "label 'NA'"
            parts.append(f"{rows_text(n)} labelled {reason.removeprefix('label ')} (label_na_values)")
    return ", ".join(parts)


def counts_text(names: Sequence[str], counts: Sequence[int], noun: str = "classes") -> str:
    """``name: count`` per class; past ``SHOWN_COUNTS`` classes (``noun``) their range and median, the fewest and the
    most."""
    pairs = list(zip(names, counts))
    if len(pairs) <= SHOWN_COUNTS:
        return ", ".join(f"{n}: {c}" for n, c in pairs)
    ranked = sorted(pairs, key=lambda p: p[1])  # stable: ties keep the class order
    few = ", ".join(f"{n}: {c}" for n, c in ranked[:SHOWN])
    most = ", ".join(f"{n}: {c}" for n, c in sorted(pairs, key=lambda p: -p[1])[:SHOWN])
    middle = sorted(counts)
    median = (middle[(len(middle) - 1) // 2] + middle[len(middle) // 2]) / 2
    return (
        f"{len(pairs)} {noun}, {ranked[0][1]} to {ranked[-1][1]} each (median {median:g}); fewest: {few}; most: {most}"
    )
