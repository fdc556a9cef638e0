"""Text columns for ``east-train``: find and check them, drop empty texts, tokenize every split in batches.

``text_columns`` names the text column (and the pair column) of a table: the one given, or, for a text model, the
one column of long strings. ``drop_empty_texts`` leaves out rows whose text is missing or blank, counted by Arrow
compute (no Python per row). ``tokenize_splits`` runs the tokenizer's batch call through ``datasets.map(batched=True)``
(cached by ``datasets`` under a key of the split's rows and the tokenizer, ``num_proc`` honoured), truncating at
``max_length``; padding is the collator's (``DataCollatorWithPadding``), per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from east_hf.hf.data.messages import closest_columns
from east_hf.hf.data.rows import json_text, read_batches, read_column
from east_hf.hf.data.sources import DataError

__all__ = [
    "LONG_TEXT_CHARS",
    "drop_empty_texts",
    "ensure_pad_token",
    "not_text_message",
    "text_columns",
    "tokenize_splits",
]

logger = logging.getLogger(__name__)

LONG_TEXT_CHARS = 16  # mean characters per cell from which a string column counts as text, not a category
_SAMPLE_ROWS = 1000  # rows read to find the text column


def _is_string(feature: Any) -> bool:
    return getattr(feature, "dtype", None) in ("string", "large_string")


def _check_column(ds, column: str, what: str, dataset_name: str) -> None:
    """Refuse a missing column (with the closest names), an empty one, or one that does not hold strings, naming the
    first row whose value is not a string (a JSON-lines column of several types names its first non-string, not its
    first value)."""
    if column not in ds.column_names:
        raise DataError(f"{what} {column!r} not found in {dataset_name!r}; {closest_columns(column, ds.column_names)}")
    feature = ds.features[column]
    if _is_string(feature):
        return
    import json

    import pyarrow.compute as pc

    values = read_column(ds, column)
    if len(values) and values.null_count == len(values):  # a CSV column of empty cells reads as float64 NaN
        flag = "--text_pair_column" if "pair" in what else "--text_column"
        raise DataError(
            f"Expected some non-empty texts in column {column!r}, got all {len(values)} texts empty (an empty "
            f"column): pass the column that holds the texts ({flag})"
        )
    kind, decode = f"{getattr(feature, 'dtype', type(feature).__name__)} values", None
    if (text := json_text(values)) is not None:  # JSON lines of several types: find the first non-string
        values = text
        first = pc.utf8_slice_codeunits(pc.utf8_ltrim_whitespace(values), 0, 1)
        wrong = pc.fill_null(pc.not_equal(first, '"'), False)  # a null is a missing text, dropped later
        kind, decode = "JSON values of several types", json.loads
    else:
        wrong = pc.is_valid(values)
    found = pc.indices_nonzero(wrong) if len(values) else []
    row = int(found[0].as_py()) if len(found) else 0
    example = values[row].as_py() if len(values) else None
    if decode is not None and example is not None:
        example = decode(example)
    raise DataError(not_text_message(what, column, kind, row, example))


def not_text_message(what: str, column: str, kind: str, row: int, example: Any) -> str:
    """The one line for a text column whose values are not strings (east-train's and east-predict's): ``kind`` names
    what it holds (``"int64 values"``), ``row`` (counting from 0) the first such row and ``example`` its value."""
    return (
        f"{what} {column!r} holds {kind}, not text (row {row}: {example!r}); pass the column of strings, or convert it"
    )


def text_columns(ds, text_column: str | None, pair_column: str | None, dataset_name: str) -> tuple[str, str | None]:
    """(text column, pair column or None) of ``ds``, a split with its ``label`` column already encoded.

    Without ``text_column`` the text column is the one string column whose first rows average at least
    ``LONG_TEXT_CHARS`` characters; none or several is an error that names the candidates.
    """
    if text_column is None:
        import pyarrow.compute as pc

        head = ds.data.slice(0, _SAMPLE_ROWS)
        found = []
        for name, feature in ds.features.items():
            if name == "label" or name == pair_column or not _is_string(feature):
                continue
            mean = pc.mean(pc.utf8_length(head.column(name))).as_py()
            if mean is not None and mean >= LONG_TEXT_CHARS:
                found.append(name)
        if len(found) != 1:
            which = f"several long-text columns ({', '.join(found)})" if found else "no column of long texts"
            raise DataError(
                f"{dataset_name!r} has {which}: set --text_column; columns are: {', '.join(ds.column_names)}"
            )
        text_column = found[0]
        logger.info(f"text column: {text_column!r}")
    _check_column(ds, text_column, "text column", dataset_name)
    if pair_column is not None:
        _check_column(ds, pair_column, "text pair column", dataset_name)
    return text_column, pair_column


def drop_empty_texts(dsd, columns: Sequence[str]) -> tuple[Any, int]:
    """(``dsd`` without the rows whose text in any of ``columns`` is missing or blank, the number left out); a split
    whose every text is missing or blank is refused."""
    import datasets
    import pyarrow.compute as pc

    dropped = 0
    kept = {}
    for split, ds in dsd.items():
        keep = None
        for column in columns:
            values = ds.data.column(column)
            ok = pc.fill_null(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(values)), 0), False)
            keep = ok if keep is None else pc.and_(keep, ok)
        mask = keep.to_numpy(zero_copy_only=False) if keep is not None else np.ones(len(ds), dtype=bool)
        if ds._indices is not None:  # a selection: the mask is over the underlying table
            mask = mask[ds._indices.column(0).to_numpy()]
        if mask.all():
            kept[split] = ds
            continue
        if not mask.any():  # nothing left to split or train on: say so before carving splits out of no rows
            where = f" of split {split!r}" if len(dsd) > 1 else ""
            named = f"column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in columns)}"
            raise DataError(
                f"Expected some non-empty texts in {named}, got all {len(mask)} texts{where} empty or blank: pass "
                "the column that holds the texts (--text_column)"
            )
        dropped += int((~mask).sum())
        kept[split] = ds.select(np.flatnonzero(mask))
    if dropped:
        logger.warning(
            f"dropped {dropped} row{'s' if dropped != 1 else ''} with an empty or missing text in {', '.join(columns)}"
        )
    return datasets.DatasetDict(kept), dropped


def ensure_pad_token(tokenizer) -> None:
    """Give a tokenizer without a pad token its eos (else unk) token as padding, with one warning; refuse one with
    neither: ``DataCollatorWithPadding`` pads every batch."""
    if tokenizer.pad_token is not None:
        return
    for name in ("eos_token", "unk_token"):
        token = getattr(tokenizer, name, None)
        if token is not None:
            tokenizer.pad_token = token
            logger.warning(f"the tokenizer has no pad token: padding with its {name.split('_')[0]} token {token!r}")
            return
    raise ValueError("the tokenizer has no pad, eos or unk token to pad batches with: add a pad token to it")


def _check_pairs(tokenizer) -> None:
    """A tokenizer takes pairs when it marks where the second text starts (a separator or token type)."""
    if tokenizer.num_special_tokens_to_add(pair=True) <= tokenizer.num_special_tokens_to_add(pair=False):
        raise ValueError(
            f"the tokenizer ({type(tokenizer).__name__}) adds no separator between two texts, so it cannot take "
            "text pairs: drop --text_pair_column or use a tokenizer made for pairs (BERT-style)"
        )


def default_max_length(tokenizer, model) -> int:
    """The model's longest input: ``max_position_embeddings`` where the config has it, bounded by the tokenizer's
    ``model_max_length`` (a huge number when the tokenizer sets none)."""
    limits = [getattr(getattr(model, "config", None), "max_position_embeddings", None), tokenizer.model_max_length]
    limits = [int(x) for x in limits if isinstance(x, int) and 0 < x < 1_000_000]
    if not limits:
        raise ValueError("neither the model nor the tokenizer says its longest input: set --max_length")
    return min(limits)


def _tokenized_fingerprint(ds, encode) -> str:
    """The cache key of a split's tokenization: its rows' content (not ``ds._fingerprint``, which differs between a
    split built from freshly read rows and the same split from east_hf's cached rows) and ``encode`` as ``datasets``
    hashes it (the tokenizer's state, ``max_length``, the columns)."""
    import hashlib

    import pyarrow as pa
    from datasets.fingerprint import Hasher

    digest = hashlib.sha256()
    for batch in read_batches(ds, ds.column_names, 8192):  # the split's rows, a block at a time: no copy of them all
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_table(batch)
        digest.update(sink.getvalue())
    digest.update(Hasher.hash(encode).encode())
    return digest.hexdigest()[:16]


def tokenize_splits(
    data,
    tokenizer,
    model,
    max_length: int | None = None,
    num_proc: int | None = None,
) -> None:
    """Replace the text columns of ``data`` (an ``EASTData`` of modality ``"text"``) by the tokenizer's inputs.

    Every split is tokenized by ``datasets.map(batched=True)``: one tokenizer call per batch of 1,000 texts, cached by
    ``datasets``, ``num_proc`` processes. Texts are truncated at ``max_length`` (default ``default_max_length``);
    one warning gives the share of training texts that were.
    """
    ensure_pad_token(tokenizer)
    if data.text_pair_column is not None:
        _check_pairs(tokenizer)
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if max_length is not None and isinstance(positions, int) and max_length > positions:
        raise ValueError(f"Expected max_length <= {positions} (the model's longest input), got {max_length}")
    max_length = default_max_length(tokenizer, model) if max_length is None else max_length
    special = tokenizer.num_special_tokens_to_add(pair=data.text_pair_column is not None)
    if max_length < special + 1:  # truncation keeps the special tokens: no token of the text would be left
        raise ValueError(
            f"Expected max_length >= {special + 1} (the tokenizer adds {special} special tokens"
            f"{' to a pair' if data.text_pair_column is not None else ''}, plus one token of text), got {max_length}"
        )
    text, pair = data.text_column, data.text_pair_column

    def encode(batch):
        enc = tokenizer(
            batch[text], batch[pair] if pair else None, truncation=True, max_length=max_length, return_length=True
        )
        # a text cut short fills max_length exactly; one that fits it exactly counts too (a small overcount)
        enc["truncated"] = [n >= max_length for n in enc.pop("length")]
        return enc

    for split in ("train", "validation", "test"):
        ds = getattr(data, split)
        if ds is None:
            continue
        ds = ds.map(
            encode,
            batched=True,
            num_proc=num_proc,
            remove_columns=[c for c in ds.column_names if c != "label"],
            desc=f"tokenizing {split}",
            new_fingerprint=_tokenized_fingerprint(ds, encode),
        )
        share = float(np.mean(ds.data.column("truncated").to_numpy(zero_copy_only=False))) if len(ds) else 0.0
        if share > 0 and split == "train":
            logger.warning(f"{share:.1%} of the training texts are longer than max_length={max_length}: truncated")
        setattr(data, split, ds.remove_columns("truncated"))
    tokenizer.model_max_length = max_length  # saved with the tokenizer: a pipeline truncates where training did
    data.preprocessor = tokenizer
