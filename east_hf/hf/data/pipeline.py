"""The data pipeline of ``east-train``: relabel, resample and split, then hand tabular rows to the preprocessor.

``load_data(DataArguments)`` returns an ``EASTData``: the label column becomes a ``ClassLabel`` named ``label``;
``positive_classes`` relabels to binary (those classes 1, the rest 0); ``imbalance_ratio`` keeps a fraction
ratio**(k/(C-1)) of class k; missing splits are carved from the training split by the paper's protocol (stratified,
64 % train / 16 % validation / 20 % test of the whole, fixed seed), and ``resplit`` pools every split first.
A validation/test label with no training rows is refused (``unseen_labels="error"``) or left out with its rows
(``"drop"``); any other class left without training rows gets a warning before training. The steps live beside
this module: ``labels`` encodes and checks one class per row, ``multilabel`` a set of labels per row, ``splits``
finds, resamples, carves and caps the splits, and ``tabular`` / ``text`` prepare the inputs.

Multi-label data (``label_columns``, ``label_separator`` or a list-valued label column; ``east_hf.hf.data.multilabel``)
goes the same way with a multi-hot ``label``: (L,) float32 of 0.0 / 1.0, -100 for an entry left out; the splits are
carved stratified by each row's rarest positive label, and a label never positive (or never negative) in training
gets a warning saying what its F1 will be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from east_hf.hf.data.arguments import multilabel_refusal
from east_hf.hf.data.cache_store import versions_kept
from east_hf.hf.data.fingerprint import one_listing
from east_hf.hf.data.images import drop_unreadable_images
from east_hf.hf.data.labels import binarize, encode_labels, labelled, unseen_labels, warn_untrained_classes
from east_hf.hf.data.messages import closest_columns
from east_hf.hf.data.missing import missing_markers
from east_hf.hf.data.multilabel import encode_multilabel, has_list_labels, positives, warn_untrainable_labels
from east_hf.hf.data.prepared_cache import captured_warnings, prepared_folder, read_prepared, staging, write_prepared
from east_hf.hf.data.rows import read_column
from east_hf.hf.data.sources import DataError, load_raw, local_path, quiet_datasets
from east_hf.hf.data.splits import VALIDATION_NAMES, carve_splits, find_splits
from east_hf.hf.data.tabular import tabular_splits
from east_hf.hf.data.text import drop_empty_texts, text_columns

__all__ = ["VALIDATION_NAMES", "EASTData", "load_data"]


@dataclass
class EASTData:
    """The three splits and what the model needs to know about them.

    ``train`` / ``validation`` / ``test``: ``datasets.Dataset``; tabular ones yield ``input_features`` (F,) float32 and
    ``labels``, image ones yield raw rows until ``set_image_transforms``. ``label_names[k]`` names class k.
    Text ones hold ``label`` and the text column(s) until ``east_hf.hf.data.text.tokenize_splits`` replaces them by
    the tokenizer's inputs. ``dropped`` counts the rows left out at load by reason: an empty label cell, the label
    -100 (the ignore index), a missing-value marker named by ``label_na_values`` (``"label 'NA'"``), or an empty
    text (``east_hf.hf.data.messages.dropped_text`` says them).

    ``multi_label``: every row carries a set of labels (``east_hf.hf.data.multilabel``); ``label_names`` are the L
    labels and each row's label is (L,) float32, 1.0 / 0.0, or -100 for an entry that does not count (an empty cell
    of a 0/1 column); a row with no entry left is dropped and counted as ``"empty label"``.
    """

    train: Any
    validation: Any
    test: Any | None
    label_names: list[str]
    modality: str  # "image", "tabular" or "text"
    image_column: str | None = None
    preprocessor: Any | None = None  # tabular: the fitted TabularFeatureExtractor; text: the tokenizer, once tokenized
    text_column: str | None = None
    text_pair_column: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)  # rows left out at load, by reason ("empty label": 3)
    multi_label: bool = False  # labels are (L,) float multi-hot vectors, not one class index per row

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.label_names))

    def class_counts(self, split: str = "train") -> list[int]:
        """Samples per class in a split (multi-label: positives per label), read as one Arrow column (no image
        decoded, no transform run)."""
        ds = getattr(self, split)
        if self.multi_label:
            return positives(ds).tolist()
        column = "labels" if "labels" in ds.column_names else "label"
        labels = read_column(ds, column).to_numpy()
        return np.bincount(np.asarray(labels, dtype=np.int64), minlength=self.num_labels).tolist()


def load_data(args, text: bool = False) -> EASTData:
    """Load, relabel, resample and split the data set of a ``DataArguments``; tabular rows are made model-ready.

    Tabular splits prepared from files are written once per content of the data as memory-mapped Arrow files in
    east_hf's cache (``east_hf.hf.data.prepared_cache``): a later call with the same bytes and arguments, such as
    another process of a distributed run after the main one (``TrainingArguments.main_process_first``), maps them
    instead of reading the rows and preparing them again, and the processes share their pages. The warnings of the
    preparation are repeated. The rows themselves are cached by content too (``east_hf.hf.data.rows_cache``).

    ``text``: the model takes text, so a table without ``text_column`` is read as text, its column of long strings
    the input (``east_hf.hf.data.text``); text splits are tokenized once the tokenizer is known, not here.
    """
    versions_kept()  # a bad EAST_HF_CACHE_VERSIONS is refused before anything is read or written
    if getattr(args, "streaming", False):  # the training rows stream (east_hf.hf.data.streaming)
        from east_hf.hf.data.streaming import load_streamed

        return load_streamed(args, text, _prepare)
    local = local_path(args.dataset_name)
    with quiet_datasets(), one_listing():
        dsd = None if local is not None else _load_raw(args)
        text = text or args.text_column is not None or args.text_pair_column is not None
        folder = None if text else prepared_folder(args, local, dsd)
        if folder is not None and (cached := read_prepared(folder)) is not None:
            return EASTData(**cached)
        if dsd is None:
            dsd = _load_raw(args)
        with staging(folder) as stage, captured_warnings("east_hf.hf.data") as warnings:
            data = _prepare(dsd, args, stage, text)
            if stage is None or data.modality != "tabular":
                return data
            write_prepared(stage, folder, data, warnings)
        return EASTData(**read_prepared(folder, repeat_warnings=False))


def _load_raw(args):
    """The raw splits of ``args.dataset_name``, a CSV's label columns read literally (``load_raw``)."""
    labels = args.label_columns or ([args.label_column] if args.label_column else None)
    return load_raw(args.dataset_name, args.dataset_config, label_columns=labels)


def _prepare(dsd, args, folder=None, text: bool = False, fitted_rows: int | None = None) -> EASTData:
    """``folder``: where tabular splits are written as Arrow files (``None``: kept in memory); ``text``: read as text;
    ``fitted_rows``: the training split is the first rows of a stream, so many (its warnings say so)."""
    import datasets

    multi_label = args.multi_label or has_list_labels(dsd, args.label_column)
    dsd, names, dropped = _encode(dsd, args, multi_label)
    texts = None
    if text:
        dsd, texts = _keep_texts(dsd, args, dropped)
    if args.positive_classes:
        dsd, names = binarize(dsd, args.positive_classes, names)
    if len(names) < 2:
        raise DataError(f"expected at least 2 classes in {args.dataset_name!r}, got {names}")
    if args.resplit and len(dsd) > 1:
        dsd = datasets.DatasetDict({"train": datasets.concatenate_datasets(list(dsd.values()))})
    splits = find_splits(dsd, args)
    if not multi_label:  # multi-label: a label without training positives is warned about below
        splits, names = unseen_labels(splits, names, args.unseen_labels)
        splits = {k: None if ds is None else labelled(ds) for k, ds in splits.items()}
    splits = carve_splits(splits, args, len(names), multi_label)
    held_out = {k: splits[k] for k in ("validation", "test")}
    if multi_label:
        warn_untrainable_labels(splits["train"], names, held_out)
    else:
        warn_untrained_classes(splits["train"], names, held_out)
    return _east_data(splits, names, args, folder, texts, dropped, multi_label, fitted_rows)


def _encode(dsd, args, multi_label: bool):
    """(splits with their ``label`` column encoded, the class or label names, rows dropped by reason)."""
    if not multi_label:
        return encode_labels(dsd, args.label_column, args.dataset_name, missing_markers(args.label_na_values))
    for name in ("positive_classes", "imbalance_ratio"):
        if getattr(args, name):
            raise DataError(multilabel_refusal(name))
    return encode_multilabel(dsd, args, args.dataset_name)


def _keep_texts(dsd, args, dropped: dict[str, int]):
    """(splits of ``label`` and the text column(s), rows with an empty text left out and counted in ``dropped``;
    (text column, pair column or None))."""
    import datasets

    text_column, pair_column = text_columns(
        next(iter(dsd.values())), args.text_column, args.text_pair_column, args.dataset_name
    )
    keep = ["label", text_column] + ([pair_column] if pair_column else [])
    dsd, empty = drop_empty_texts(
        datasets.DatasetDict({k: ds.select_columns(keep) for k, ds in dsd.items()}), keep[1:]
    )
    if empty:
        dropped["empty text"] = empty
    return dsd, (text_column, pair_column)


def _east_data(
    splits,
    names,
    args,
    folder,
    texts: tuple[str, str | None] | None,
    dropped: dict[str, int],
    multi_label: bool,
    fitted_rows: int | None = None,
) -> EASTData:
    """The ``EASTData`` of the final splits: text (``texts``: the text and pair columns), image (a split with an image
    column) or tabular (rows made ``input_features``, written to ``folder``)."""
    common = {"dropped": dropped, "multi_label": multi_label}
    parts = (splits["train"], splits["validation"], splits["test"], names)
    if texts is not None:
        return EASTData(*parts, "text", text_column=texts[0], text_pair_column=texts[1], **common)
    image_column = _image_column(splits["train"], args.image_column, args.dataset_name)
    if image_column is not None:
        splits = {k: ds.select_columns([image_column, "label"]) for k, ds in splits.items()}
        splits = drop_unreadable_images(splits, image_column, args.dataset_name, dropped)
        parts = (splits["train"], splits["validation"], splits["test"], names)
        return EASTData(*parts, "image", image_column, **common)
    splits, preprocessor = tabular_splits(
        splits, args.feature_columns, args.standardize, names, folder, multi_label=multi_label, fitted_rows=fitted_rows
    )
    parts = (splits["train"], splits["validation"], splits["test"], names)
    return EASTData(*parts, "tabular", preprocessor=preprocessor, **common)


def _image_column(ds, requested: str | None, dataset_name: str) -> str | None:
    import datasets

    if requested is not None:
        if requested not in ds.column_names:
            raise DataError(
                f"image column {requested!r} not found in {dataset_name!r}; "
                f"{closest_columns(requested, ds.column_names)}"
            )
        return requested
    return next((c for c, f in ds.features.items() if isinstance(f, datasets.Image)), None)
