"""Streamed training rows (``DataArguments.streaming``): data larger than memory or disk, read as it trains.

The training split is opened with ``datasets``' ``streaming=True``. A first pass before training reads every row once,
counting the labelled rows and each class (the class names, the length of an epoch, and the counts the default loss's
priors come from unless ``east_class_priors`` gives them), and keeping the first ``SAMPLE_ROWS`` rows (with the first
row of each class they do not hold). That sample goes through
``load_data``'s pipeline beside the validation and test splits: it fits the tabular feature encoding (one-hot
categories, standardisation) or, for ``text_tiny``, the tokenizer, and it checks the columns and labels. Training then
reads the stream again, shuffled in a buffer of ``SHUFFLE_BUFFER`` rows, each batch encoded as it is read.

Limits: no stratified split of a stream, so the data set needs a validation split (a ``validation.csv`` beside
``train.csv`` in one folder, a Hub split, or ``validation_split``), refused in one line before training without one;
the validation and test splits are read whole; one class per row, tabular or text (images and multi-label data are
refused); ``resplit``, ``imbalance_ratio`` and ``positive_classes`` are refused, since each needs the whole split.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from east_hf.hf.data.missing import csv_options
from east_hf.hf.data.sources import FILE_BUILDERS, DataError, local_path, quiet_datasets
from east_hf.hf.data.splits import VALIDATION_NAMES, find_splits

__all__ = ["SAMPLE_ROWS", "SHUFFLE_BUFFER", "CountedStream", "StreamedData", "load_streamed"]

SAMPLE_ROWS = 10_000  # training rows the feature encoding or text_tiny's tokenizer is fitted on
SHUFFLE_BUFFER = 10_000  # rows of the stream's shuffle buffer (datasets' IterableDataset.shuffle)
_PASS_BATCH = 10_000  # rows read per batch in the first pass
_ENCODE_BATCH = 1_000  # rows encoded per batch while training


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
            f"Expected a data file, folder or Hub id for streaming, got {args.dataset_name!r} (bundled sets fit in memory)"
        )


def _open_streams(args):
    """The ``IterableDatasetDict`` of ``args.dataset_name`` (``streaming=True``): a local file or folder, or a Hub id."""
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


@dataclasses.dataclass
class _FirstPass:
    """What one read of the training stream found: the sample (the first ``SAMPLE_ROWS`` labelled rows and the first
    row of each class they lack, as columns), the labelled rows by (class name, the columns blank in the row), and the
    rows without a label by reason."""

    sample: dict[str, list] = dataclasses.field(default_factory=dict)
    rows: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unlabelled: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @classmethod
    def read(cls, train, label: str, cap: int | None) -> _FirstPass:
        """Read ``train`` once (``cap``: stop after that many labelled rows)."""
        found, seen, total = cls(), set(), 0
        for batch in train.iter(batch_size=_PASS_BATCH):
            for i, cell in enumerate(batch[label]):
                name = _name(cell)
                if name is None:
                    found.unlabelled["empty label" if _blank(cell) or cell != cell else "label -100"] += 1
                    continue
                if cap is not None and total >= cap:
                    return found
                if total < SAMPLE_ROWS or name not in seen:
                    for column, values in batch.items():
                        found.sample.setdefault(column, []).append(values[i])
                blank = frozenset(c for c, values in batch.items() if c != label and _blank(values[i]))
                found.rows[name, blank] += 1
                seen.add(name)
                total += 1
        return found

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
    whole = {"train": datasets.Dataset.from_dict(found.sample, features=features), **held_out}
    if stand_in:
        whole["test"] = held_out["validation"]
    plain = dataclasses.replace(args, streaming=False, train_split="train", validation_split="validation")
    prepared = prepare(datasets.DatasetDict(whole), dataclasses.replace(plain, test_split="test"), None, text)
    if prepared.modality not in ("tabular", "text"):
        raise DataError(f"Expected tabular or text data for streaming, got {prepared.modality} data")
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
