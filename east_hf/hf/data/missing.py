"""Which label cells are missing: an empty cell, and the markers a user names (``DataArguments.label_na_values``).

pandas' CSV reader, which ``datasets`` uses, reads ``NA``, ``None``, ``null``, ``n/a`` and a dozen other markers as a
missing value in every column, so a class named ``"None"`` (or ``"NA"``: North America, not applicable) would lose its
rows as if their labels were empty. ``csv_options`` keeps the reader's markers for the other columns and reads a label
column literally, an empty cell its only missing value; ``missing_markers`` turns ``label_na_values`` into the cells
the label encoders read as missing, ``"default"`` standing for the reader's own markers (``READER_MARKERS``).

>>> sorted(missing_markers(["NA", " None "]))
['NA', 'None']
>>> "null" in missing_markers(["default"]), missing_markers(None)
(True, frozenset())
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "LABEL_COLUMNS",
    "READER_MARKERS",
    "csv_options",
    "marker_reason",
    "missing_markers",
    "parse_markers",
    "warn_markers",
]

logger = logging.getLogger(__name__)

LABEL_COLUMNS = ("label", "labels")  # the label column's default names, in the order they are looked for
# pandas' default missing-value markers (pandas._libs.parsers.STR_NA_VALUES, pandas 1.x-3.x), the empty cell aside
READER_MARKERS = (
    "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL",
    "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip


def parse_markers(values: str | Sequence[str] | None) -> list[str] | None:
    """``label_na_values`` as a list of stripped markers (``"NA,None"`` or ``["NA", "None"]``); ``None`` for none."""
    if values is None:
        return None
    items = [values] if isinstance(values, str) else list(values)
    found = [m.strip() for item in items for m in str(item).split(",")]
    return [m for m in dict.fromkeys(found) if m] or None


def missing_markers(values: Sequence[str] | None) -> frozenset[str]:
    """The label cells read as missing besides an empty one: ``values`` with ``"default"`` as ``READER_MARKERS``."""
    markers = parse_markers(values) or []
    return frozenset(m for v in markers for m in (READER_MARKERS if v == "default" else (v,)))


def marker_reason(text: str) -> str:
    """The ``EASTData.dropped`` reason of the rows whose label cell is the marker ``text``: ``"label 'NA'"``."""
    return f"label {text!r}"


def _header(path: Path) -> list[str]:
    """The column names of a CSV / TSV file; none where pandas cannot read them (``datasets`` then says why)."""
    import pandas as pd

    try:
        return [str(c) for c in pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",", nrows=0).columns]
    except ValueError:  # not UTF-8, not CSV, no header
        return []


def csv_options(files: Iterable[Path], label_columns: Sequence[str] | None) -> dict:
    """``datasets``' csv builder options (pandas ``read_csv``'s) that read the label columns literally, an empty cell
    their only missing value, and every other column with the reader's markers; ``{}`` without a label column.

    ``label_columns``: the label column(s) given, ``None`` for the default one (the first of ``LABEL_COLUMNS`` in a
    file's header)."""
    headers = [_header(f) for f in files]
    columns = list(dict.fromkeys(c for h in headers for c in h))
    found = (next((n for n in LABEL_COLUMNS if n in h), None) for h in headers)
    labels = set(label_columns) if label_columns else {c for c in found if c}
    if not labels & set(columns):
        return {}
    markers = ["", *READER_MARKERS]
    return {
        "keep_default_na": False,  # only the markers named per column below
        "na_values": {c: [""] if c in labels else markers for c in columns},
    }


def warn_markers(dsd, columns: Sequence[str], markers: frozenset[str]) -> None:
    """One warning line counting the cells of the label ``columns`` (text columns of every split of ``dsd``) read as
    missing because they are among ``markers``."""
    if not markers:
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    from east_hf.hf.data.rows import read_column

    found: dict[str, int] = {}
    for ds in dsd.values():
        for name in columns:
            column = read_column(ds, name)
            if not len(column) or not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                continue
            values, counts = pc.value_counts(pc.utf8_trim_whitespace(column)).flatten()
            for v, n in zip(values.to_pylist(), counts.to_pylist()):
                if v in markers:
                    found[v] = found.get(v, 0) + n
    if found:
        total = sum(found.values())
        cells = ", ".join(f"{v!r} ({n})" for v, n in sorted(found.items(), key=lambda p: (-p[1], p[0])))
        logger.warning(f"label_na_values: read {total} label cell{'s' if total != 1 else ''} as missing: {cells}")
