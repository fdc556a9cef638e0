"""The three splits of ``east-train``: found by name, resampled to a long tail, carved by the paper's protocol, capped.

``find_splits`` names the training, validation and test splits (the ones given, else the usual names).
``carve_splits`` completes them: ``imbalance_ratio`` keeps a fraction ratio**(k/(C-1)) of class k (in every split
before carving, or in the training split after it: ``imbalance_splits``); a missing test and validation split are
carved from the training split, stratified by label (multi-label: by each row's rarest positive label), 64 % train /
16 % validation / 20 % test of the whole with a fixed seed; ``max_*_samples`` caps each split.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from east_hf.hf.data.labels import label_ids
from east_hf.hf.data.multilabel import label_matrix, label_strata, mergeable_strata
from east_hf.hf.data.sources import DataError

__all__ = ["VALIDATION_NAMES", "carve_splits", "find_splits"]

VALIDATION_NAMES = ("validation", "valid", "val", "dev")


def find_splits(dsd, args) -> dict[str, Any]:
    """``{"train": ..., "validation": ... or None, "test": ... or None}`` of ``dsd``, by the ``DataArguments``'
    split names, else the usual ones (``VALIDATION_NAMES``, ``test``)."""
    train = _find_split(dsd, args.train_split, (), "train")
    validation = _find_split(dsd, args.validation_split, VALIDATION_NAMES, "validation")
    test = _find_split(dsd, args.test_split, ("test",), "test")
    return {
        "train": dsd[train],
        "validation": dsd[validation] if validation else None,
        "test": dsd[test] if test else None,
    }


def _find_split(dsd, requested: str | None, candidates: Sequence[str], what: str):
    if requested is not None:
        if requested not in dsd:
            raise DataError(f"{what} split {requested!r} not found; splits are: {', '.join(dsd)}")
        return requested
    return next((c for c in candidates if c in dsd), None)


def carve_splits(splits: dict[str, Any], args, num_classes: int, multi_label: bool = False) -> dict[str, Any]:
    """``splits`` resampled (``imbalance_ratio``), completed (a missing test / validation split carved from the
    training split) and capped (``max_train_samples``, ``max_eval_samples``, ``max_test_samples``)."""
    splits = dict(splits)
    seed, val, test = args.split_seed, args.val_size, args.test_size
    long_tail = args.imbalance_ratio is not None and args.imbalance_ratio < 1
    if long_tail and args.imbalance_splits != "train":  # "all": before carving, so every split has the long tail
        for key in ("train", "validation", "test"):
            if splits[key] is not None:
                splits[key] = _imbalance(splits[key], args.imbalance_ratio, num_classes, seed)
    if splits["test"] is None:
        # Without a validation split both are carved: test_size of the whole, then val_size of the whole from the rest.
        fraction = test if splits["validation"] is None else test / (1 - val)
        splits["train"], splits["test"] = _stratified_split(splits["train"], fraction, seed, "test", multi_label)
    if splits["validation"] is None:
        splits["train"], splits["validation"] = _stratified_split(
            splits["train"], val / (1 - test), seed, "validation", multi_label
        )
    if long_tail and args.imbalance_splits == "train":  # after carving: validation and test keep the original mix
        splits["train"] = _imbalance(splits["train"], args.imbalance_ratio, num_classes, seed)
    caps = {"train": args.max_train_samples, "validation": args.max_eval_samples, "test": args.max_test_samples}
    return {key: _cap(splits[key], cap, seed) for key, cap in caps.items()}


def _imbalance(ds, ratio: float, num_classes: int, seed: int):
    """Keep a fraction ratio**(k/(C-1)) of class k (at least one sample): a long-tailed subsample."""
    labels = label_ids(ds)
    rng = np.random.default_rng(seed)
    keep = []
    for k in range(num_classes):
        members = np.flatnonzero(labels == k)
        n = max(1, int(round(len(members) * ratio ** (k / (num_classes - 1))))) if len(members) else 0
        keep.append(rng.permutation(members)[:n])
    return ds.select(np.sort(np.concatenate(keep)))


def _stratified_split(ds, fraction: float, seed: int, what: str, multi_label: bool = False):
    """(rest, carved): ``fraction`` of ``ds`` carved off, stratified by label; multi-label by each row's rarest
    positive label (``east_hf.hf.data.multilabel.label_strata``, strata too small to split merged)."""
    from sklearn.model_selection import train_test_split

    labels = mergeable_strata(label_strata(label_matrix(ds)), fraction) if multi_label else label_ids(ds)
    try:
        rest, carved = train_test_split(np.arange(len(ds)), test_size=fraction, stratify=labels, random_state=seed)
    except ValueError as e:
        counts = np.bincount(labels)
        raise DataError(
            f"cannot carve a stratified {what} split ({fraction:.3g} of {len(ds)} samples, smallest "
            f"{'stratum' if multi_label else 'class'} {counts[counts > 0].min() if len(labels) else 0} samples): {e}"
        ) from None
    return ds.select(np.sort(rest)), ds.select(np.sort(carved))


def _cap(ds, n: int | None, seed: int):
    return ds if n is None or n >= len(ds) else ds.shuffle(seed=seed).select(range(n))
