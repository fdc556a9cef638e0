"""Streamed training rows (``DataArguments.streaming``): data larger than memory or disk, read as it trains.

The training split is opened with ``datasets``' ``streaming=True``. A first pass before training reads every row once,
counting the labelled rows and each class (the class names, the length of an epoch, and the counts the default loss's
priors come from unless ``east_class_priors`` gives them), and keeping the first ``SAMPLE_ROWS`` rows (with the first
row of each class they do not hold). That sample goes through
``load_data``'s pipeline beside the validation and test splits: it fits the tabular feature encoding (one-hot
categories, standardisation) or, for ``text_tiny``, the tokenizer, and it checks the columns and labels. The first
pass also notes the text cells of every column: a text cell in a column the encoding reads as numbers is refused
before training in one line naming the file, the row, the column and the value (it would stop training where the
stream reaches it), and the values of a one-hot column first seen after the sample, which the encoding makes all
zeros as it does any unknown value, are named in one warning. Training then reads the stream again, shuffled in a
buffer of ``SHUFFLE_BUFFER`` rows, each batch encoded as it is read.

Limits: no stratified split of a stream, so the data set needs a validation split (a ``validation.csv`` beside
``train.csv`` in one folder, a Hub split, or ``validation_split``), refused in one line before training without one;
the validation and test splits are read whole; one class per row, tabular or text (images and multi-label data are
refused); ``resplit``, ``imbalance_ratio`` and ``positive_classes`` are refused, since each needs the whole split.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

import torch

from east_hf.hf.data.messages import listed, rows_text
from east_hf.hf.data.missing import csv_options
from east_hf.hf.data.sources import FILE_BUILDERS, DataError, local_path, quiet_datasets
from east_hf.hf.data.splits import VALIDATION_NAMES, find_splits

__all__ = ["SAMPLE_ROWS", "SHUFFLE_BUFFER", "CountedStream", "StreamedData", "load_streamed"]

SAMPLE_ROWS = 10_000  # training rows the feature encoding or text_tiny's tokenizer is fitted on
SHUFFLE_BUFFER = 10_000  # rows of the stream's shuffle buffer (datasets' IterableDataset.shuffle)
_PASS_BATCH = 10_000  # rows read per batch in the first pass
_ENCODE_BATCH = 1_000  # rows encoded per batch while training
_LATER_VALUES = 1_024  # distinct values a column's record of the rows after the sample keeps (one-hot: at most 256)

logger = logging.getLogger(__name__)


class CountedStream(torch.utils.data.IterableDataset):
    """A stream of model-ready training rows with the length the first pass counted: the Trainer turns epochs into
    steps (``num_train_epochs``, a warm start in epochs) as for a data set in memory. ``set_epoch`` reshuffles."""

    def __init__(self, stream: Any, length: int):
        self.stream = stream
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        return iter(self.stream)

    def set_epoch(self, epoch: int) -> None:
        self.stream.set_epoch(epoch)


class StreamedData:
    """``load_data``'s ``EASTData`` whose training rows stream (``load_streamed`` makes one of both classes). ``train``
    is the prepared sample of the first pass until ``start_stream`` replaces it by the ``CountedStream`` of every
    training row, encoded with ``preprocessor`` (the fitted feature extractor, or the tokenizer once
    ``tokenize_splits`` has run).

    ``rows``: the training stream as ``datasets`` opened it, its label column named ``label``; ``train_counts``: the
    training rows per class (the first pass); ``label_ids``: raw label cells -> class indices (-1: no label);
    ``columns``: the stream's columns; ``cap``: ``max_train_samples``; ``seed``: the shuffle's."""

    rows: Any
    train_counts: list[int]
    label_ids: Callable[[list], list[int]]
    columns: list[str]
    cap: int | None
    seed: int

    @property
    def train_rows(self) -> int:
        return sum(self.train_counts)

    def class_counts(self, split: str = "train") -> list[int]:
        return list(self.train_counts) if split == "train" else super().class_counts(split)  # EASTData's

    def start_stream(self) -> None:
        """Replace the sample in ``train`` by the stream of every training row, encoded as ``validation`` is: the
        rows the first pass counted (labelled, up to ``cap``, with their texts), shuffled in a buffer."""
        encode = _tabular_encoder(self) if self.modality == "tabular" else _text_encoder(self)
        rows = self.rows.filter(lambda batch: [k >= 0 for k in self.label_ids(batch["label"])], batched=True)
        if self.cap is not None:
            rows = rows.take(self.cap)
        texts = [c for c in (self.text_column, self.text_pair_column) if c is not None]
        if texts:
            rows = rows.filter(
                lambda batch: [not any(map(_blank, row)) for row in zip(*(batch[c] for c in texts))], batched=True
            )
        rows = rows.shuffle(seed=self.seed, buffer_size=SHUFFLE_BUFFER)
        rows = rows.map(encode, batched=True, batch_size=_ENCODE_BATCH, remove_columns=self.columns)
        self.train = CountedStream(rows.with_format("torch") if self.modality == "tabular" else rows, self.train_rows)


def _tabular_encoder(data: StreamedData) -> Callable[[dict], dict]:
    import pandas as pd

    extractor = data.preprocessor

    def encode(batch: dict[str, list]) -> dict[str, Any]:
        rows = pd.DataFrame({c: batch[c] for c in extractor.columns})
        return {"input_features": extractor.transform(rows, split="train"), "labels": data.label_ids(batch["label"])}

    return encode


def _text_encoder(data: StreamedData) -> Callable[[dict], dict]:
    tokenizer, text, pair = data.preprocessor, data.text_column, data.text_pair_column

    def encode(batch: dict[str, list]) -> dict[str, Any]:
        pairs = batch[pair] if pair else None
        enc = tokenizer(batch[text], pairs, truncation=True, max_length=tokenizer.model_max_length)
        return {**enc, "label": data.label_ids(batch["label"])}

    return encode


def _refuse_unstreamable(args) -> None:
    """The settings that need a whole split, refused in one line each."""
    for name, why in (
        ("resplit", "pools every split"),
        ("imbalance_ratio", "subsamples each class of a whole split"),
        ("positive_classes", "relabels the classes of a whole split"),
    ):
        if getattr(args, name):
            raise DataError(f"Expected streaming without {name} ({name} {why}), got {name}={getattr(args, name)!r}")
    if args.multi_label:
        raise DataError("Expected one label column for streaming (one class per row), got multi-label settings")
    if args.dataset_name is None or args.dataset_name.startswith("sklearn:"):
        raise DataError(
            f"Expected a data file, folder or Hub id for streaming, got {args.dataset_name!r} "
            "(bundled sets fit in memory)"
        )


def _open_streams(args):
    """The ``IterableDatasetDict`` of ``args.dataset_name`` (``streaming=True``): a local file or folder,
    or a Hub id."""
    import datasets

    path = local_path(args.dataset_name)
    labels = [args.label_column] if args.label_column else None
    csv = [] if path is None else [path] if path.is_file() else sorted(path.rglob("*"))
    # label cells read literally, as load_data reads them (east_hf.hf.data.missing)
    options = csv_options([f for f in csv if f.suffix.lower() in (".csv", ".tsv")], labels)
    if path is not None and path.is_file():
        builder = FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise DataError(f"dataset file {args.dataset_name!r}: expected one of {sorted(FILE_BUILDERS)}")
        kwargs = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
        return datasets.load_dataset(builder, data_files=str(path), streaming=True, **kwargs, **options)
    name = str(path) if path is not None else args.dataset_name
    try:
        return datasets.load_dataset(name, args.dataset_config, streaming=True, **options)
    except Exception as e:  # noqa: BLE001 - datasets raises many kinds; the user needs the one line either way
        raise DataError(f"could not stream dataset {args.dataset_name!r}: {' '.join(str(e).split())}") from None


def _label_ids(names: list[str], class_label: bool) -> Callable[[list], list[int]]:
    """Raw label cells -> class indices by ``names`` (-1: an empty cell, -100, or a class not among them)."""
    index = {name: k for k, name in enumerate(names)}

    def ids(cells: list) -> list[int]:
        if class_label:
            return [k if isinstance(k, int) and 0 <= k < len(names) else -1 for k in cells]
        return [index.get(_name(v), -1) for v in cells]

    return ids


def _name(v: Any) -> str | None:
    """A label cell as the class name the pipeline gives it (``3.0`` and ``3`` are ``"3"``); None: no label."""
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, str):
        v = v.strip()
        return None if not v or v == "-100" else v
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float)) and float(v).is_integer():
        return None if v == -100 else str(int(v))
    return str(v)


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


@functools.lru_cache(maxsize=1 << 16)
def _is_number(text: str) -> bool:
    """Whether a stripped cell reads as a number (as the encoding reads a numeric column's text cells)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclasses.dataclass
class _TextCells:
    """The text cells (neither blank nor a number) of one column in the training rows the stream trains on: the first
    one (its row in the stream, counting from 0, and its value), how many, and, of the rows after the sample, how
    many hold each stripped value (the first ``_LATER_VALUES`` distinct ones)."""

    first: tuple[int, str] | None = None
    count: int = 0
    later: collections.Counter = dataclasses.field(default_factory=collections.Counter)


@dataclasses.dataclass
class _FirstPass:
    """What one read of the training stream found: the sample (the first ``SAMPLE_ROWS`` labelled rows and the first
    row of each class they lack, as columns), the labelled rows by (class name, the columns blank in the row), and the
    rows without a label by reason."""

    sample: dict[str, list] = dataclasses.field(default_factory=dict)
    rows: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unlabelled: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    text: dict[str, _TextCells] = dataclasses.field(default_factory=dict)  # per column but the label's
    read_rows: int = 0  # rows of the stream read so far, labelled or not

    @classmethod
    def read(cls, train, label: str, cap: int | None) -> _FirstPass:
        """Read ``train`` once (``cap``: stop after that many labelled rows)."""
        found, seen, total = cls(), set(), 0
        for batch in train.iter(batch_size=_PASS_BATCH):
            used, in_sample, capped = [], set(), False  # the batch's rows that train, those of the sample
            for i, cell in enumerate(batch[label]):
                name = _name(cell)
                if name is None:
                    found.unlabelled["empty label" if _blank(cell) or cell != cell else "label -100"] += 1
                    continue
                if cap is not None and total >= cap:
                    capped = True
                    break
                if total < SAMPLE_ROWS or name not in seen:
                    in_sample.add(i)
                    for column, values in batch.items():
                        found.sample.setdefault(column, []).append(values[i])
                blank = frozenset(c for c, values in batch.items() if c != label and _blank(values[i]))
                found.rows[name, blank] += 1
                seen.add(name)
                used.append(i)
                total += 1
            found._note_text(batch, label, used, in_sample)
            found.read_rows += len(batch[label])
            if capped:
                break
        return found

    def _note_text(self, batch: dict[str, list], label: str, used: list[int], in_sample: set[int]) -> None:
        """Note the text cells of the batch's rows ``used`` (positions in the batch) in ``text``. Python looks at each
        distinct string once; the cells themselves are typed and counted in C (``map``, ``set``, ``Counter``)."""
        for column, values in batch.items():
            if column == label:
                continue
            record = self.text.setdefault(column, _TextCells())
            cells = values if len(used) == len(values) else [values[i] for i in used]
            if str not in set(map(type, cells)):
                continue
            counts = collections.Counter(v for v in cells if v.__class__ is str)
            text = {v: v.strip() for v in counts}
            text = {v: stripped for v, stripped in text.items() if stripped and not _is_number(stripped)}
            if not text:
                continue
            record.count += sum(counts[v] for v in text)
            if record.first is None:
                at = next(k for k, v in enumerate(cells) if v.__class__ is str and v in text)
                record.first = (self.read_rows + used[at], cells[at])
            if in_sample:  # the rows after the sample only
                later = (values[i] for i in used if i not in in_sample)
                counts = collections.Counter(v for v in later if v.__class__ is str)
            for value, stripped in text.items():
                n = counts.get(value, 0)
                if n and (stripped in record.later or len(record.later) < _LATER_VALUES):
                    record.later[stripped] += n

    def class_counts(self, names: list[str], class_label: bool, texts: list[str]) -> list[int]:
        """Training rows per class, rows with a blank text (in ``texts``) left out as the stream leaves them out."""
        counts = [0] * len(names)
        index = {name: k for k, name in enumerate(names)}
        for (name, blank), n in self.rows.items():
            k = int(name) if class_label else index.get(name)
            if k is not None and 0 <= k < len(names) and not blank.intersection(texts):
                counts[k] += n
        return counts

    def dropped(self, texts: list[str]) -> dict[str, int]:
        empty = sum(n for (_, blank), n in self.rows.items() if blank.intersection(texts))
        return {**self.unlabelled, **({"empty text": empty} if empty else {})}


def _held_out(splits: dict[str, Any], features) -> dict[str, Any]:
    """The validation and test streams read whole (None: no test split)."""
    import datasets

    return {
        k: None if splits[k] is None else datasets.Dataset.from_list(list(splits[k]), features=features)
        for k in ("validation", "test")
    }


def _open_splits(args) -> dict[str, Any]:
    """The training, validation and test streams of ``args``; one line without a validation split."""
    with quiet_datasets():
        streams = _open_streams(args)
    if args.train_split not in streams:
        raise DataError(f"train split {args.train_split!r} not found; splits are: {', '.join(streams)}")
    splits = find_splits(streams, args)
    if splits["validation"] is None:
        raise DataError(
            f"Expected a validation split to stream beside {args.train_split!r} (streamed rows are not split "
            f"stratified), got splits {list(streams)} in {args.dataset_name!r}: put train and validation files in one "
            f"folder (train.csv, validation.csv), or name the split with validation_split (found by name: "
            f"{', '.join(VALIDATION_NAMES)})"
        )
    return splits


@functools.cache
def _streamed_type(base: type) -> type:
    """``StreamedData`` over ``base`` (``load_data``'s ``EASTData``, which this module does not import: the pipeline
    imports it)."""
    return type("StreamedData", (StreamedData, base), {"__module__": __name__, "__doc__": StreamedData.__doc__})


def load_streamed(args, text: bool, prepare: Callable[..., Any]) -> StreamedData:
    """The ``StreamedData`` of ``args`` (``DataArguments`` with ``streaming``); ``prepare`` is ``load_data``'s
    pipeline, run on the first pass's sample and the validation and test splits (see the module docstring)."""
    import datasets

    _refuse_unstreamable(args)
    splits = _open_splits(args)
    train = splits["train"]
    first = next(iter(train.take(1)), None)
    if first is None:
        raise DataError(f"Expected training rows in {args.dataset_name!r}, got an empty training split")
    label = _label_column(args, first)
    found = _FirstPass.read(train, label, args.max_train_samples)
    features = train.features
    class_label = features is not None and isinstance(features.get(label), datasets.ClassLabel)
    held_out = _held_out(splits, features)
    stand_in = held_out["test"] is None  # the validation split stands in for a test split, which is not carved
    sample = _numbers_read_as_text(found.sample, label) if _csv_source(args) else found.sample
    whole = {"train": datasets.Dataset.from_dict(sample, features=features), **held_out}
    if stand_in:
        whole["test"] = held_out["validation"]
    plain = dataclasses.replace(args, streaming=False, train_split="train", validation_split="validation")
    fitted = len(whole["train"])
    prepared = prepare(
        datasets.DatasetDict(whole), dataclasses.replace(plain, test_split="test"), None, text, fitted_rows=fitted
    )
    if prepared.modality not in ("tabular", "text"):
        raise DataError(f"Expected tabular or text data for streaming, got {prepared.modality} data")
    if prepared.modality == "tabular":
        _check_text_cells(found, prepared.preprocessor, fitted, lambda row: _where(args, train, row))
    texts = [c for c in (prepared.text_column, prepared.text_pair_column) if c is not None]
    fields = {f.name: getattr(prepared, f.name) for f in dataclasses.fields(prepared)}
    fields["test"] = None if stand_in else prepared.test
    fields["dropped"] = _dropped(found, prepared.dropped, _sample_blanks(found.sample, texts), texts, stand_in)
    data = _streamed_type(type(prepared))(**fields)
    data.rows = train if label == "label" else train.rename_column(label, "label")
    data.train_counts = found.class_counts(prepared.label_names, class_label, texts)
    data.label_ids = _label_ids(prepared.label_names, class_label)
    data.columns = ["label" if c == label else c for c in first]
    data.cap, data.seed = args.max_train_samples, args.split_seed
    return data


def _csv_source(args) -> bool:
    """Whether the stream reads local CSV / TSV files, which pandas types chunk by chunk of rows."""
    path = local_path(args.dataset_name)
    if path is None:
        return False
    return any(f.suffix.lower() in (".csv", ".tsv") for f in ([path] if path.is_file() else path.rglob("*")))


def _numbers_read_as_text(sample: dict[str, list], label: str) -> dict[str, list]:
    """The sample of a CSV stream with each column whose cells are all numbers or blank, some written as text, made
    numbers (a blank cell None), as the file's other chunks read them: the CSV reader reads a chunk of rows as text
    where one of its cells is text, beyond the sample too. A column with a text cell stays as it is."""

    def number(v: Any) -> bool:
        return v is None or isinstance(v, (int, float)) or (isinstance(v, str) and (not v.strip() or _is_number(v)))

    out = {}
    for column, values in sample.items():
        if column != label and str in set(map(type, values)) and all(map(number, values)):
            values = [(float(v) if v.strip() else None) if isinstance(v, str) else v for v in values]
        out[column] = values
    return out


def _check_text_cells(found: _FirstPass, extractor, fitted: int, where: Callable[[int], str]) -> None:
    """Refuse a text cell in a column the encoding (``extractor``, fitted on the ``fitted`` rows of the sample) reads
    as numbers, naming its place (``where``: a row of the stream, counting from 0, as "data row R of FILE"); warn
    once about the values of a one-hot column first seen after the sample, which the encoding makes all zeros."""
    for column in extractor.numeric:
        record = found.text.get(column)
        if record is not None and record.first is not None:
            row, value = record.first
            more = f" and {rows_text(record.count - 1)} more" if record.count > 1 else ""
            raise DataError(
                f"Expected numbers in column {column!r} (numbers in the first {fitted} training rows, which the "
                f"encoder was fitted on), got {value!r} in {where(row)}{more}: fix or empty those cells (an empty "
                "cell is imputed), or leave the column out with feature_columns"
            )
    late = []
    for column, categories in extractor.categories.items():
        record = found.text.get(column)
        known = set(categories)
        values = {v: n for v, n in (record.later if record is not None else {}).items() if v not in known}
        if values:
            named = listed([repr(v) for v in sorted(values)], "values")
            late.append(f"{column!r}: {named} ({rows_text(sum(values.values()))} of train)")
    if late:
        logger.warning(
            f"values first seen after the {fitted} training rows the encoder was fitted on are encoded as unknown "
            f"(all zeros) in {listed(late, 'columns')}: shuffle the training rows, or put a row of each value among "
            f"the first {fitted}"
        )


def _where(args, train, row: int) -> str:
    """``data row R of FILE`` for the ``row``-th row (from 0) of the training stream: its split's one file, or the
    file whose shard holds it; ``row R of the train split of NAME`` where its files are not known."""
    files = _split_files(args)
    if len(files) == 1:
        return f"data row {row + 1} of {files[0]}"
    if files and train.num_shards == len(files):  # one shard per file, read in order
        start = 0
        for k, file in enumerate(files):
            rows = sum(len(next(iter(b.values()))) for b in train.shard(len(files), k).iter(batch_size=_PASS_BATCH))
            if row < start + rows:
                return f"data row {row - start + 1} of {file}"
            start += rows
    return f"row {row + 1} of the {args.train_split} split of {args.dataset_name!r}"


def _split_files(args) -> list[str]:
    """The data files of the training split, as ``datasets`` resolves them ([] where it cannot say)."""
    import datasets

    path = local_path(args.dataset_name)
    if path is not None and path.is_file():
        return [str(path)]
    try:
        with quiet_datasets():
            builder = datasets.load_dataset_builder(str(path or args.dataset_name), args.dataset_config)
        return [str(f) for f in (builder.config.data_files or {}).get(args.train_split) or []]
    except Exception:  # noqa: BLE001  (only the message's wording depends on it)
        return []


def _sample_blanks(sample: dict[str, list], texts: list[str]) -> int:
    """Rows of the sample with a blank text: ``prepare`` dropped and counted them."""
    rows = zip(*(sample[c] for c in texts)) if texts else ()
    return sum(any(_blank(v) for v in row) for row in rows)


def _dropped(found: _FirstPass, prepared: dict[str, int], sample_blanks: int, texts, stand_in: bool) -> dict[str, int]:
    """Rows left out by reason: the training stream's (the first pass), and the validation and test splits' (what
    ``prepare`` counted, less the sample's, the validation split's counted once where it stood in for the test)."""
    held = dict(prepared)
    if sample_blanks:
        held["empty text"] = held.get("empty text", 0) - sample_blanks
    if stand_in:
        held = {k: n // 2 for k, n in held.items()}
    out = collections.Counter(found.dropped(texts))
    out.update(held)
    return {k: n for k, n in out.items() if n}


def _label_column(args, first: dict[str, Any]) -> str:
    """The label column of the stream's first row, as ``load_data`` finds it (one line naming the columns if not)."""
    import datasets

    from east_hf.hf.data.labels import find_label_column

    return find_label_column({"train": datasets.Dataset.from_list([first])}, args.label_column, args.dataset_name)
