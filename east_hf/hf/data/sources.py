"""Where the rows come from: a Hub id, a local folder or file, or a set bundled with scikit-learn (offline)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import numpy as np

from east_hf.hf.data.fingerprint import MEDIA_SUFFIXES, source_files
from east_hf.hf.data.missing import csv_options
from east_hf.hf.data.rows_cache import cached_rows

__all__ = [
    "FILE_BUILDERS",
    "RARE_POSITIVE",
    "SKLEARN_SETS",
    "SYNTHETIC_BINARY",
    "DataError",
    "load_raw",
    "local_path",
    "quiet_datasets",
]

# digits_tabular: the same 1,797 digits as 64 pixel-intensity features (a tabular task of a useful size).
SKLEARN_SETS = ("digits", "digits_tabular", "breast_cancer", "wine", "iris", "make_classification", "rare_positive")
# sklearn:make_classification, always the same rows: an imbalanced binary task with overlapping classes.
SYNTHETIC_BINARY = dict(
    n_samples=20_000,
    n_features=20,
    n_informative=8,
    n_redundant=4,
    n_clusters_per_class=2,
    weights=[0.9],
    flip_y=0.02,
    class_sep=1.0,
    random_state=0,
)
# sklearn:rare_positive, always the same rows: 7 % positives that are hard to separate (3 informative features, 5 %
# flipped labels). Argmax of a cross-entropy MLP finds few of them (F1 ~0.3), a tuned threshold ~0.4: a task where
# the choice of loss and decision rule matters (the demo).
RARE_POSITIVE = dict(
    SYNTHETIC_BINARY, n_informative=3, n_redundant=2, weights=[0.95], flip_y=0.05, class_sep=0.6, random_state=1
)
SYNTHETIC_SETS = {"make_classification": SYNTHETIC_BINARY, "rare_positive": RARE_POSITIVE}
FILE_BUILDERS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".json": "json", ".jsonl": "json"}


class DataError(ValueError):
    """A data input the user must fix (a path, an id, a column); the message is one self-contained line."""


def _sklearn(name: str):
    import datasets
    from PIL import Image
    from sklearn import datasets as skd

    if name not in SKLEARN_SETS:
        raise DataError(
            f"unknown bundled data set 'sklearn:{name}'; expected one of "
            + ", ".join(f"sklearn:{n}" for n in SKLEARN_SETS)
        )
    if name in SYNTHETIC_SETS:
        x, y = skd.make_classification(**SYNTHETIC_SETS[name])
        columns = {f"x{i}": x[:, i].astype(np.float32) for i in range(x.shape[1])}
        label = datasets.ClassLabel(names=["negative", "positive"])
        features = datasets.Features({**{c: datasets.Value("float32") for c in columns}, "label": label})
        return datasets.DatasetDict(
            {"train": datasets.Dataset.from_dict({**columns, "label": y.tolist()}, features=features)}
        )
    bunch = getattr(skd, f"load_{name.removesuffix('_tabular')}")()
    names = [str(n) for n in bunch.target_names]
    label = datasets.ClassLabel(names=names)
    if name == "digits":  # 8x8 grey levels 0..16 -> 8-bit greyscale PIL images, so they take the image path
        images = [Image.fromarray((img * (255 / 16)).round().astype(np.uint8)) for img in bunch.images]
        features = datasets.Features({"image": datasets.Image(), "label": label})
        ds = datasets.Dataset.from_dict({"image": images, "label": bunch.target.tolist()}, features=features)
    else:
        columns = {
            str(c).replace(" ", "_"): bunch.data[:, i].astype(np.float32) for i, c in enumerate(bunch.feature_names)
        }  # digits_tabular: pixel_0_0 .. pixel_7_7
        features = datasets.Features({**{c: datasets.Value("float32") for c in columns}, "label": label})
        ds = datasets.Dataset.from_dict({**columns, "label": bunch.target.tolist()}, features=features)
    return datasets.DatasetDict({"train": ds})


@contextlib.contextmanager
def quiet_datasets(quiet: bool = True):
    """Without ``datasets``' progress bars: they help for a Hub download, not for in-memory relabelling."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    if quiet:
        disable_progress_bars()
    try:
        yield
    finally:
        if quiet and not was_disabled:
            enable_progress_bars()


def _looks_like_path(name: str) -> bool:
    return (
        name.startswith(("/", "./", "../", "~")) or Path(name).suffix.lower() in FILE_BUILDERS or os.path.exists(name)
    )


def local_path(dataset_name: str | None) -> Path | None:
    """The local file or folder a data set name points to; ``None`` for ``sklearn:<name>``, a Hub id or a missing
    path."""
    if not dataset_name or dataset_name.startswith("sklearn:") or not _looks_like_path(dataset_name):
        return None
    path = Path(dataset_name).expanduser()
    return path if path.exists() else None


def _data_files(path: Path) -> list[Path]:
    """The CSV / Parquet / JSON files ``datasets`` reads from a local file or folder (hidden ones skipped)."""
    if path.is_file():
        return [path] if path.suffix.lower() in FILE_BUILDERS else []
    return [
        Path(f) for name, f, _ in source_files(path, stat=False) if os.path.splitext(name)[1].lower() in FILE_BUILDERS
    ]


def _media(path: Path) -> bool:
    """Whether a folder holds images, audio or video: ``datasets`` reads it with a folder builder, its CSV files as
    metadata."""
    return path.is_dir() and any(
        os.path.splitext(n)[1].lower() in MEDIA_SUFFIXES for n, _, _ in source_files(path, False)
    )


def _first_lines(path: Path, n: int) -> int:
    """How many of the first ``n`` lines of a text file hold more than whitespace (reads no further)."""
    found = 0
    with path.open("rb") as f:
        for line in f:
            found += bool(line.strip())
            if found >= n:
                break
    return found


def _check_not_empty(files: list[Path]) -> None:
    """``DataError`` naming the first file without data rows: 0 bytes, blank lines only, a CSV header and no rows, or a
    Parquet file of 0 rows; checked before ``datasets``, whose own error names no file."""
    for f in files:
        builder = FILE_BUILDERS[f.suffix.lower()]
        if f.stat().st_size == 0:
            got = "an empty file (0 bytes)"
        elif builder == "parquet":
            import pyarrow.parquet as pq

            try:
                rows = pq.read_metadata(f).num_rows
            except Exception:  # noqa: BLE001 - not Parquet at all: datasets reports it with the file
                continue
            got = "a Parquet file of 0 rows" if rows == 0 else None
        else:
            lines = _first_lines(f, 2)  # a CSV's first line is its header
            got = {0: "blank lines only", 1: "a header and no rows" if builder == "csv" else None}.get(lines)
        if got:
            raise DataError(f"Expected data rows in dataset file {str(f)!r}, got {got}")


_PARSE_ERROR = re.compile(r"Failed to parse string: '(.*)' as a scalar of type (\w+)")


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from, outermost first."""
    chain = [error]
    while (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None and nxt not in chain:
        chain.append(nxt)
    return chain


def _text_in_numeric_column(error: BaseException, files: list[Path]) -> str | None:
    """The one-line message for Arrow's failure to read a text cell in a column typed as numbers from another file (or
    the first rows of the same one): the file, the column, the value and its row count; ``None`` for other errors."""
    match = next((m for c in _causes(error) if (m := _PARSE_ERROR.search(str(c)))), None)
    if match is None:
        return None
    import pandas as pd

    value, kind = match.groups()
    best = None  # (fraction of numbers, file, column, rows holding the value)
    for f in files:
        if FILE_BUILDERS[f.suffix.lower()] != "csv":
            continue
        frame = pd.read_csv(f, dtype=str, keep_default_na=False, sep="\t" if f.suffix.lower() == ".tsv" else ",")
        for column in frame.columns:
            cells = frame[column].to_numpy()
            rows = np.flatnonzero(cells == value)
            if len(rows):
                numbers = float(pd.to_numeric(frame[column], errors="coerce").notna().mean())
                if best is None or numbers > best[0]:
                    best = (numbers, f, column, rows)
    expected = "numbers" if kind.startswith(("double", "float", "int", "uint", "decimal")) else f"{kind} values"
    if best is None:
        return f"Expected {expected} in every cell of a numeric column, got text {value!r}"
    _, f, column, rows = best
    return (
        f"Expected {expected} in column {column!r} of {str(f)!r}, got text {value!r} in {len(rows)} "
        f"row{'s' if len(rows) != 1 else ''} (first: data row {rows[0] + 1}): fix or empty those cells (an empty "
        "cell is imputed)"
    )


def _saved_to_disk(path: Path) -> bool:
    """Whether ``path`` is a folder ``datasets``' ``save_to_disk`` wrote (a ``DatasetDict`` or a ``Dataset``)."""
    return (path / "dataset_dict.json").is_file() or (
        (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    )


def _load_from_disk(path: Path):
    """The ``DatasetDict`` of a folder written by ``save_to_disk`` (a ``Dataset`` is the training split)."""
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - a damaged folder: the user needs the one line
        raise DataError(f"could not load the save_to_disk folder {str(path)!r}: {' '.join(str(e).split())}") from None
    return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict({"train": loaded})


def _not_utf8(files: list[Path]) -> str | None:
    """The one line for the first CSV / JSON file of ``files`` that is not UTF-8 text (its line and byte), with how to
    convert it; ``None`` when every one is."""
    import codecs

    for f in files:
        if FILE_BUILDERS[f.suffix.lower()] == "parquet":
            continue
        decoder, line, at = codecs.getincrementaldecoder("utf-8")(), 1, 0
        with f.open("rb") as stream:
            while block := stream.read(1 << 20):
                try:
                    decoder.decode(block)
                except UnicodeDecodeError as e:
                    line += block[: e.start].count(b"\n")
                    byte = block[e.start : e.start + 1].hex()
                    return (
                        f"Expected UTF-8 text in dataset file {str(f)!r}, got byte 0x{byte} at line {line} (offset "
                        f"{at + e.start}), not UTF-8: convert the file, e.g. iconv -f latin1 -t utf-8 {f.name} > "
                        f"{f.stem}.utf8{f.suffix} (latin1, or the encoding it was written in)"
                    )
                line += block.count(b"\n")
                at += len(block)
    return None


def _local_loader(path: Path, dataset_name: str, dataset_config: str | None, label_columns):
    """(a ``datasets.load_dataset`` call taking the cache's keyword arguments, the CSV reading options) for a local
    file or folder: label columns read literally (``east_hf.hf.data.missing.csv_options``)."""
    import datasets

    files = _data_files(path)
    _check_not_empty(files)
    csv = bool(files) and all(FILE_BUILDERS[f.suffix.lower()] == "csv" for f in files) and not _media(path)
    options = csv_options(files, label_columns) if csv else {}
    if path.is_dir():
        return lambda **cache: datasets.load_dataset(str(path), dataset_config, **options, **cache), options
    builder = FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise DataError(f"dataset file {dataset_name!r}: expected one of {sorted(FILE_BUILDERS)}")
    if path.suffix.lower() == ".tsv":
        options = {"delimiter": "\t", **options}
    return lambda **cache: datasets.load_dataset(builder, data_files=str(path), **options, **cache), options


def _offline() -> bool:
    return any(os.environ.get(v, "0") not in ("0", "", "false") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def load_raw(
    dataset_name: str,
    dataset_config: str | None = None,
    revision: str | None = None,
    label_columns: list[str] | None = None,
):
    """A ``datasets.DatasetDict`` from a Hub id, a local folder or file, or ``sklearn:<name>``; ``DataError`` if not.

    The label columns of local CSV files (``label_columns``, else the first of ``label`` / ``labels``) are read
    literally, an empty cell their only missing value, so a class named ``None`` or ``NA`` keeps its rows. A folder
    written by ``save_to_disk`` is loaded as it is (``datasets.load_from_disk``). The rows of other local files and
    folders are cached by content (``east_hf.hf.data.rows_cache``): an edit is read again even when it keeps the
    file's modification time, and a folder read before maps its Arrow files without ``datasets`` resolving the
    folder again."""
    import datasets

    if dataset_name.startswith("sklearn:"):
        return _sklearn(dataset_name.split(":", 1)[1])
    path = None
    if _looks_like_path(dataset_name):
        path = Path(dataset_name).expanduser()
        if not path.exists():
            raise DataError(f"dataset path {dataset_name!r} does not exist")
        if path.is_dir() and _saved_to_disk(path):
            return _load_from_disk(path)
        loader, options = _local_loader(path, dataset_name, dataset_config, label_columns)
    else:
        loader = lambda: datasets.load_dataset(dataset_name, dataset_config, revision=revision)  # noqa: E731
    try:
        with quiet_datasets(path is not None):  # local files load in a blink; Hub downloads keep their bars
            dsd = loader() if path is None else cached_rows(path, dataset_config, loader, options)
    except Exception as e:  # noqa: BLE001 - datasets raises many kinds; the user needs the one line either way
        if not _looks_like_path(dataset_name) and (_offline() or isinstance(e, ConnectionError)):
            raise DataError(
                f"dataset {dataset_name!r} is not a local path and could not be reached on the Hub"
                + (" (HF_HUB_OFFLINE is set: only data sets already in the cache load)" if _offline() else f": {e}")
            ) from None
        files = _data_files(path) if path is not None else None
        found = files and (_text_in_numeric_column(e, files) or (_not_utf8(files) if _decoding_error(e) else None))
        if found:
            raise DataError(found) from None
        root = _causes(e)[-1]  # datasets wraps the reason ("An error occurred while generating the dataset")
        reason = f"{type(e).__name__}: {e}" + (f" ({type(root).__name__}: {root})" if root is not e else "")
        raise DataError(f"could not load dataset {dataset_name!r}: {' '.join(reason.split())}") from None
    if not isinstance(dsd, datasets.DatasetDict):
        dsd = datasets.DatasetDict({"train": dsd})
    return dsd


def _decoding_error(error: BaseException) -> bool:
    """Whether ``error`` comes from text that is not UTF-8 (Python's codec or Arrow's check)."""
    return any(isinstance(c, UnicodeDecodeError) or "Invalid UTF8" in str(c) for c in _causes(error))
