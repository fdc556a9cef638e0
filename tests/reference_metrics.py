"""A test oracle: scikit-learn's label semantics over the functional core, for the evaluate metrics to match.

The packaged evaluate metrics (``macro_fbeta``, ``mcc``) take lists of class labels, as scikit-learn does, and compute
with numpy alone; the core (``east_hf.core``) takes a (C, C) confusion matrix. This module scores the same lists
through the core, so the tests check the metric modules against scikit-learn and against the core. Its only job is
the label bookkeeping scikit-learn does:

- ``labels=None`` scores the sorted union of the labels present in ``references`` and ``predictions``;
- ``labels`` given scores those labels in that order, absent ones included (their counts are zero);
- a label present in the data but left out of ``labels`` still counts as a false positive or false negative of the
  scored labels; such labels are pooled into one extra row and column of the matrix ("the rest"), which leaves every
  scored label's TP, FP and FN unchanged and is dropped before averaging;
- a single scored label gets an empty second class, since the core needs C >= 2 (an empty class changes no count).

When the matrix holds exactly the scored labels the core averages them; only when "the rest" or the padding class
is present does this module average the core's per-class values over the scored labels itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from east_hf.core import (
    confusion_from_memberships,
    fbeta,
    mcc,
    precision,
    precision_recall_fbeta,
    recall,
)
from east_hf.core.validation import check_average, check_zero_division

__all__ = ["label_confusion_matrix", "fbeta_report", "mcc_report"]

_CHUNK_CELLS = 1 << 22  # one-hot rows per chunk * classes: bounds the (chunk, C) memberships to 32 MiB of float64


def _as_labels(values, name: str) -> torch.Tensor:
    t = torch.as_tensor(values)
    if t.ndim != 1:
        raise ValueError(f"Expected {name} as a flat list of class labels, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"Expected integer class labels in {name}, got dtype {t.dtype}")
    return t.long()


def _as_weight(sample_weight, n: int) -> torch.Tensor | None:
    if sample_weight is None:
        return None
    w = torch.as_tensor(sample_weight, dtype=torch.float64)
    if w.shape != (n,):
        raise ValueError(f"Expected sample_weight of shape ({n},), got shape {tuple(w.shape)}")
    return w


def label_confusion_matrix(
    references: torch.Tensor,
    predictions: torch.Tensor,
    labels: Sequence[int] | None = None,
    sample_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, list[int]]:
    """The (M, M) float64 confusion matrix of the scored labels, and those labels (K of them, M >= K).

    Rows and columns 0..K-1 are the scored labels in order; if M > K, the last row and column pool the labels left
    out of ``labels`` (or pad a single scored label to the two classes the core needs).

    >>> cm, labels = label_confusion_matrix(torch.tensor([3, 7, 7, 9]), torch.tensor([3, 7, 9, 9]), labels=[7, 3])
    >>> labels, cm.tolist()
    ([7, 3], [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    """
    references, predictions = _as_labels(references, "references"), _as_labels(predictions, "predictions")
    if references.shape != predictions.shape:
        raise ValueError(
            f"Expected as many predictions as references, got {predictions.numel()} and {references.numel()}"
        )
    if references.numel() == 0:
        raise ValueError("Expected at least one prediction, got none")
    weight = _as_weight(sample_weight, references.numel())
    if labels is None:
        scored = torch.unique(torch.cat([references, predictions]))  # sorted
    else:
        scored = _as_labels(list(labels), "labels")
        if scored.numel() == 0 or torch.unique(scored).numel() != scored.numel():
            raise ValueError(f"Expected labels as a non-empty list of distinct labels, got {scored.tolist()}")
    K = scored.numel()
    order = torch.argsort(scored)
    ordered = scored[order]

    def index(x: torch.Tensor) -> torch.Tensor:  # position in ``scored``, or K for "the rest"
        pos = torch.searchsorted(ordered, x).clamp(max=K - 1)
        return torch.where(ordered[pos] == x, order[pos], K)

    true, pred = index(references), index(predictions)
    rest = bool((true == K).any() or (pred == K).any())
    M = max(K + int(rest), 2)
    confmat = torch.zeros(M, M, dtype=torch.float64)
    step = max(1, _CHUNK_CELLS // M)
    for s in range(0, true.numel(), step):
        memberships = F.one_hot(pred[s : s + step], M).double()  # (chunk, M): the hard predictions as memberships
        w = None if weight is None else weight[s : s + step]
        confmat += confusion_from_memberships(memberships, true[s : s + step], w)
    return confmat, scored.tolist()


def _scored_labels(references, predictions, labels, average: str, pos_label: int) -> list[int] | None:
    """scikit-learn's checks for ``average="binary"``; the labels to score (None: those present)."""
    if average != "binary":
        return None if labels is None else list(labels)
    if labels is not None:
        if pos_label not in list(labels):
            raise ValueError(f"Expected pos_label among labels {list(labels)} for average='binary', got {pos_label}")
        return list(labels)
    present = torch.unique(torch.cat([_as_labels(references, "references"), _as_labels(predictions, "predictions")]))
    present = present.tolist()
    if pos_label not in present:
        if len(present) >= 2:
            raise ValueError(f"pos_label={pos_label} is not a valid label. It should be one of {present}")
        present = sorted(present + [pos_label])  # scikit-learn scores pos_label alone: zero_division applies
    return present


def _average_scored(per_class: torch.Tensor, support: torch.Tensor, average: str, pos: int) -> torch.Tensor:
    """Average (K,) per-class values of the scored labels, as the core does for a matrix of exactly those labels.

    Weighted with zero total support falls back to the plain mean, as scikit-learn's ``_nanaverage``.
    """
    if average == "binary":
        return per_class[pos]
    if average == "weighted" and support.sum() > 0:
        return (per_class * support).sum() / support.sum()
    return per_class.mean()


def _micro_scored(confmat: torch.Tensor, K: int, beta: float, zero_division: float) -> tuple[float, float, float]:
    """Micro precision, recall and F-beta pooled over the first K classes only (TP, FP, FN summed over them)."""
    tp = confmat.diagonal()[:K].sum().item()
    predicted, support = confmat.sum(dim=0)[:K].sum().item(), confmat.sum(dim=1)[:K].sum().item()
    b2 = beta**2

    def divide(num: float, den: float) -> float:
        return zero_division if den == 0 else num / den

    return divide(tp, predicted), divide(tp, support), divide((1 + b2) * tp, b2 * support + predicted)


def fbeta_report(
    references,
    predictions,
    beta: float | Sequence[float] = 1.0,
    average: str = "macro",
    labels: Sequence[int] | None = None,
    pos_label: int = 1,
    zero_division: float = 0.0,
    sample_weight=None,
) -> dict:
    """F-beta, precision and recall averaged, and per class, as ``sklearn.metrics.precision_recall_fscore_support``.

    ``beta`` is a float, or one value per scored label (in the order of ``labels``, or of the sorted labels present
    when ``labels`` is None). ``average="binary"`` scores ``pos_label`` (a label value) one-vs-rest; unlike
    scikit-learn it also accepts multiclass data.

    Returns ``{"fbeta", "precision", "recall"}`` (floats, averaged), ``{"fbeta_per_class", "precision_per_class",
    "recall_per_class"}`` (lists aligned with ``"labels"``) and ``"labels"``.

    >>> r = fbeta_report([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 1], beta=[1.0, 2.0, 0.5])
    >>> round(r["fbeta"], 4), r["labels"], [round(f, 4) for f in r["fbeta_per_class"]]
    (0.2667, [0, 1, 2], [0.8, 0.0, 0.0])
    """
    check_average(average)
    zero_division = check_zero_division(zero_division)
    scored = _scored_labels(references, predictions, labels, average, pos_label)
    confmat, scored = label_confusion_matrix(references, predictions, scored, sample_weight)
    K, M = len(scored), confmat.shape[0]
    if isinstance(beta, bool):
        raise TypeError("Expected beta as a positive float or one value per scored label, got bool")
    if torch.as_tensor(beta).ndim == 0:
        betas = [float(beta)] * M
    else:
        betas = torch.as_tensor(beta, dtype=torch.float64).flatten().tolist()
        if len(betas) != K:
            raise ValueError(
                f"Expected beta as a float or one value per scored label {scored}, got {len(betas)} values"
            )
        betas = betas + [1.0] * (M - K)  # "the rest" and the padding class are not scored
    if average == "micro" and len(set(betas[:K])) > 1:
        raise ValueError(f"Expected one beta for average='micro' (classes are pooled), got {betas[:K]}")
    pos = scored.index(pos_label) if average == "binary" else 1
    p, r, f, support = precision_recall_fbeta(confmat, betas, zero_division)  # (M,) each
    if M == K:  # the matrix holds exactly the scored labels: the core averages
        args = {"average": average, "pos_label": pos, "zero_division": zero_division}
        score_f = fbeta(confmat, betas, **args).item()
        score_p, score_r = precision(confmat, **args).item(), recall(confmat, **args).item()
    elif average == "micro":
        score_p, score_r, score_f = _micro_scored(confmat, K, betas[0], zero_division)
    else:
        score_p, score_r, score_f = (_average_scored(v[:K], support[:K], average, pos).item() for v in (p, r, f))
    return {
        "fbeta": score_f,
        "precision": score_p,
        "recall": score_r,
        "fbeta_per_class": f[:K].tolist(),
        "precision_per_class": p[:K].tolist(),
        "recall_per_class": r[:K].tolist(),
        "labels": scored,
    }


def mcc_report(references, predictions, sample_weight=None) -> dict:
    """Multiclass Matthews correlation of label lists, as ``sklearn.metrics.matthews_corrcoef``: ``{"mcc": float}``.

    >>> round(mcc_report([1, 3, 2, 0, 3, 2], [1, 2, 2, 0, 3, 3])["mcc"], 4)
    0.5385
    """
    confmat, _ = label_confusion_matrix(references, predictions, None, sample_weight)
    return {"mcc": mcc(confmat).item()}
