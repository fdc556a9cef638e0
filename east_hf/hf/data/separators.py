"""Whether ``label_separator`` is the character that separates a multi-label column's labels.

A separator that is not the one the cells use trains on wrong labels without a word: one absent from every cell makes
each cell a label named after its whole list (``drama|comedy``), and one that also occurs inside label names cuts
them into fragments (``-`` on ``comedy|sci-fi`` gives ``comedy|sci`` and ``fi``). ``check_separator`` refuses both in
one line naming the separator to pass. The usual separators rank from the one least likely inside a label name
(``SEPARATORS``): where a cell holds the given separator and one ranked above it, the labels are listed by the higher
one.

>>> check_separator("genres", "|", ["comedy|sci-fi", "drama"])
>>> check_separator("genres", "-", ["comedy|sci-fi", "drama|film-noir", "drama"])
Traceback (most recent call last):
...
east_hf.hf.data.sources.DataError: label_separator '-' cuts the label names of column 'genres' into fragments
('comedy|sci-fi' -> 'comedy|sci', 'fi'): the cells list their labels by '|' (2 of 3 cells); pass --label_separator '|'
"""

from __future__ import annotations

from collections.abc import Sequence

from east_hf.hf.data.sources import DataError

__all__ = ["SEPARATORS", "check_separator"]

SEPARATORS = ("|", "\t", ";", ",", "/")  # the usual ones, from the least likely inside a label name


def check_separator(column: str, separator: str, cells: Sequence[str | None]) -> None:
    """Refuse a ``separator`` that no cell holds while another usual separator splits the cells into shared labels,
    or one that cuts label names where the cells list their labels by a usual separator ranked above it."""
    cells = list(dict.fromkeys(v for v in cells if v))
    if any(separator in v for v in cells):
        _refuse_fragments(column, separator, cells)
    else:
        _refuse_absent(column, separator, cells)


def _rank(separator: str) -> int:
    return SEPARATORS.index(separator) if separator in SEPARATORS else len(SEPARATORS)


def _refuse_fragments(column: str, separator: str, cells: list[str]) -> None:
    for other in SEPARATORS[: _rank(separator)]:
        both = next((v for v in cells if separator in v and other in v), None)
        if both is None:
            continue
        parts = ", ".join(repr(p.strip()) for p in both.split(separator) if p.strip())
        holding = sum(other in v for v in cells)
        raise DataError(
            f"label_separator {separator!r} cuts the label names of column {column!r} into fragments ({both!r} -> "
            f"{parts}): the cells list their labels by {other!r} ({holding} of {len(cells)} cells); pass "
            f"--label_separator {other!r}"
        )


def _refuse_absent(column: str, separator: str, cells: list[str]) -> None:
    """A ``separator`` found in no cell, while another usual separator splits the cells into labels that several cells
    share (``a|b``, ``b|c``): the cells would each become one label named after the whole list. Cells with no
    separator at all, or names that merely hold one (``sci/tech``), are a multi-label set of one label per row, which
    is kept."""
    for other in (s for s in SEPARATORS if s != separator):
        holding = [v for v in cells if other in v]
        if not holding:
            continue
        shared: dict[str, int] = {}
        for v in cells:
            for part in {p.strip() for p in v.split(other)} - {""}:
                shared[part] = shared.get(part, 0) + 1
        if any(shared[p.strip()] > 1 for v in holding for p in v.split(other) if p.strip()):
            raise DataError(
                f"Expected labels separated by {separator!r} in label column {column!r}, got none; the cells hold "
                f"{other!r} (e.g. {holding[0]!r}): pass --label_separator {other!r}"
            )
