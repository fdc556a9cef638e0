"""The multi-label losses as set losses: EAST's surrogate and the baselines.

- ``MultiLabelEASTLoss``: 1 - M of the statistics of the per-label soft predictions (``east_hf.core.multilabel``).

- ``BinaryCrossEntropySetLoss``: binary cross-entropy of every labelled entry, statistics (sum, weight), the loss their
  ratio (``F.binary_cross_entropy_with_logits``'s mean over the labelled entries). With ``pos_weight`` (L,) it is
  ``wce`` (neg_k / pos_k of the training split), with ``logit_adjustment`` (L,) ``la`` (log(pi_k / (1 - pi_k))
  added to the logits inside the loss only; Menon et al., 2021, per label).
- ``AsymmetricLoss``: Ridnik et al., 2021 ("Asymmetric Loss For Multi-Label Classification"), the mean over the
  labelled entries of L+ = (1 - p)^gamma_pos log(p) for a positive and L- = p_m^gamma_neg log(1 - p_m) for a
  negative, p_m = max(p - clip, 0), as the authors' ``AsymmetricLoss`` (its eps clamp of the logarithms included).

The multi-label registry (``east_hf.core.loss_registry.MULTILABEL_LOSSES``, ``build_loss(..., multi_label=True)``)
makes them by the multiclass registry's names (``ce``, ``wce``, ``la``) and ``asl``, from the training split's
``label_priors``.

Pure torch; every loss computed in float32 under autocast (float64 for float64 logits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from east_hf.core.annealing import DEFAULT_TEMPERATURE
from east_hf.core.east_loss import floored_beta
from east_hf.core.multilabel import (
    check_label_matrix,
    check_statistics,
    metric_of_statistics,
    multilabel_entries,
    multilabel_label_error,
    multilabel_metric_settings,
    soft_label_predictions,
    statistics_of_entries,
)
from east_hf.core.set_loss import BatchMemory, SetLoss, finite_vector
from east_hf.core.surrogate import NO_LABEL_FAULT
from east_hf.core.validation import (
    check_choice,
    check_int,
    check_multilabel_average,
    check_range,
    check_temperature,
    check_zero_division,
)

__all__ = [
    "AsymmetricLoss",
    "BinaryCrossEntropySetLoss",
    "MultiLabelEASTLoss",
    "label_logit_adjustment",
    "label_pos_weight",
]

_LOSS_METRICS = ("fbeta", "f1", "mcc", "jaccard", "precision", "recall")  # what MultiLabelEASTLoss trains
_PRIOR_FLOOR = 1e-6  # a label's positive rate is clipped to [floor, 1 - floor] so its weights stay finite


def _check_priors(label_priors: Sequence[float] | torch.Tensor) -> torch.Tensor:
    priors = torch.as_tensor(label_priors, dtype=torch.float64)
    if priors.ndim != 1 or priors.numel() < 1 or not bool(((priors >= 0) & (priors <= 1)).all()):
        raise ValueError(
            f"Expected label_priors as each label's positive rate in [0, 1], (L,), got {priors.flatten().tolist()}"
        )
    return priors.clamp(_PRIOR_FLOOR, 1 - _PRIOR_FLOOR)


def label_pos_weight(label_priors: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """``pos_weight`` (L,) of ``wce``: neg_k / pos_k = (1 - pi_k) / pi_k, pi_k the label's positive rate (clipped to
    [1e-6, 1 - 1e-6], so a label never positive in training gets a large but finite weight).

    >>> label_pos_weight([0.2, 0.5]).tolist()
    [4.0, 1.0]
    """
    priors = _check_priors(label_priors)
    return ((1 - priors) / priors).float()


def label_logit_adjustment(label_priors: Sequence[float] | torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """``logit_adjustment`` (L,) of ``la``: tau * log(pi_k / (1 - pi_k)), pi_k clipped as in ``label_pos_weight``.

    >>> [round(v, 4) for v in label_logit_adjustment([0.2, 0.5]).tolist()]
    [-1.3863, 0.0]
    """
    priors = _check_priors(label_priors)
    return (tau * torch.log(priors / (1 - priors))).float()


class _EntryLoss(SetLoss):
    """A mean over the labelled entries of a per-entry loss: statistics (sum of w * loss, sum of w), (2,)."""

    def _entry_loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def statistics(self, logits, labels, sample_weight=None, *, validate_args=True):
        check_label_matrix(logits, "logits")
        with torch.autocast(logits.device.type, enabled=False):
            z = logits if logits.dtype == torch.float64 else logits.float()  # (N, L)
            y, mask, w, fault = multilabel_entries(
                labels, z.shape, sample_weight, self.ignore_index, validate_args, z.dtype
            )
            if not validate_args:
                seen = self._label_fault
                self._label_fault = (
                    fault if seen is None or seen.device != fault.device else torch.maximum(seen, fault)
                )
            weight = mask * w.unsqueeze(1)  # (N, L) the entries that count, at their row's weight
            per_entry = self._entry_loss(z, y)  # (N, L)
            return torch.stack([(torch.where(weight > 0, per_entry, 0.0) * weight).sum(), weight.sum()])

    def loss_from_statistics(self, stats):
        # No labelled entry: the sum is 0 as well, and 0 / 1 is a loss of 0 with a zero gradient instead of 0 / 0.
        count = stats[1]
        return stats[0] / torch.where(count == 0, torch.ones_like(count), count)

    def is_empty(self, stats):
        return stats[1] == 0

    def raise_if_label_fault(self, fault: int | torch.Tensor | None = None) -> None:
        """As ``MultiLabelEASTLoss.raise_if_label_fault``."""
        fault = self._label_fault if fault is None else fault
        if fault is not None and (count := int(fault)) != NO_LABEL_FAULT:
            raise multilabel_label_error(f"{count} other entries in a training batch", self.ignore_index)

    def _check_width(self, what: str, value: torch.Tensor | None, num_labels: int) -> torch.Tensor | None:
        if value is not None and value.shape[0] != num_labels:
            raise ValueError(f"Expected {what} of {num_labels} labels, got {value.shape[0]}")
        return value


class BinaryCrossEntropySetLoss(_EntryLoss):
    """Multi-label binary cross-entropy as a set loss, equal to ``F.binary_cross_entropy_with_logits(logits, labels,
    pos_weight=pos_weight)`` over the labelled entries (each row also weighted by ``sample_weight``), and to the mean
    over the whole set when the statistics of several batches are summed first.

    Args:
        pos_weight: optional (L,) weight of each label's positive entries (``wce``: ``label_pos_weight``).
        logit_adjustment: optional (L,) offsets added to the logits inside the loss only (``la``:
            ``label_logit_adjustment``); the model's own logits, and so its predictions z > 0, are left as they are.

    >>> loss = BinaryCrossEntropySetLoss()
    >>> logits, labels = torch.tensor([[2.0, -1.0], [0.0, 1.0]]), torch.tensor([[1.0, 0.0], [0.0, -100.0]])
    >>> expected = F.binary_cross_entropy_with_logits(logits[labels != -100], labels[labels != -100])
    >>> torch.isclose(loss(logits, labels), expected).item()
    True
    """

    name = "ce"

    def __init__(
        self,
        ignore_index: int | None = -100,
        pos_weight: Sequence[float] | torch.Tensor | None = None,
        logit_adjustment: Sequence[float] | torch.Tensor | None = None,
    ):
        super().__init__(ignore_index)
        self.register_buffer("pos_weight", finite_vector("pos_weight", pos_weight, "L"), persistent=False)
        self.register_buffer(
            "logit_adjustment", finite_vector("logit_adjustment", logit_adjustment, "L"), persistent=False
        )

    def _entry_loss(self, z, y):
        L = z.shape[1]
        pos_weight = self._check_width("pos_weight", self.pos_weight, L)
        adjustment = self._check_width("logit_adjustment", self.logit_adjustment, L)
        if adjustment is not None:
            z = z + adjustment.to(z.dtype)
        pos_weight = None if pos_weight is None else pos_weight.to(z.dtype)
        return F.binary_cross_entropy_with_logits(z, y, pos_weight=pos_weight, reduction="none")  # (N, L)


class AsymmetricLoss(_EntryLoss):
    """The asymmetric loss (Ridnik et al., ICCV 2021) as a set loss: the mean over the labelled entries of

        L+ = -(1 - p)^gamma_pos log(p),    L- = -p_m^gamma_neg log(1 - p_m),    p_m = max(p - clip, 0),

    p = sigmoid(z), each logarithm's argument clamped at ``eps`` as the authors' code does (with ``clip = 0``, binary
    focal loss, the logarithms are ``logsigmoid``'s instead: no floor, so a confidently wrong entry keeps its
    gradient). The defaults are the
    paper's recommended ones (gamma_neg = 4, gamma_pos = 0, clip = 0.05); the gradient flows through the focusing
    weights (the authors' default, ``disable_torch_grad_focal_loss=False``).

    >>> loss = AsymmetricLoss()
    >>> round(loss(torch.tensor([[3.0, -3.0]]), torch.tensor([[1.0, 0.0]])).item(), 4)
    0.0243
    """

    name = "asl"

    def __init__(
        self,
        ignore_index: int | None = -100,
        gamma_neg: float = 4.0,
        gamma_pos: float = 0.0,
        clip: float = 0.05,
        eps: float = 1e-8,
    ):
        super().__init__(ignore_index)
        self.gamma_neg = check_range("gamma_neg", gamma_neg, 0, float("inf"), "[)")
        self.gamma_pos = check_range("gamma_pos", gamma_pos, 0, float("inf"), "[)")
        self.clip = check_range("clip", clip, 0, 1, "[)")
        self.eps = check_range("eps", eps, 0, 1, "()")

    def extra_repr(self) -> str:
        return f"gamma_neg={self.gamma_neg:g}, gamma_pos={self.gamma_pos:g}, clip={self.clip:g}"

    def _entry_loss(self, z, y):
        p = torch.sigmoid(z)  # (N, L)
        if self.clip == 0:  # no shift (binary focal loss): logsigmoid, so a confidently wrong entry keeps its gradient
            positive = torch.pow(torch.sigmoid(-z), self.gamma_pos) * F.logsigmoid(z)
            negative = torch.pow(p, self.gamma_neg) * F.logsigmoid(-z)
            return -torch.where(y > 0, positive, negative)
        q = (1 - p + self.clip).clamp(max=1)  # 1 - p_m, the shifted negative probability
        positive = torch.pow(1 - p, self.gamma_pos) * torch.log(p.clamp(min=self.eps))
        negative = torch.pow(1 - q, self.gamma_neg) * torch.log(q.clamp(min=self.eps))
        return -torch.where(y > 0, positive, negative)


class MultiLabelEASTLoss(BatchMemory, SetLoss):
    """The multi-label EAST surrogate ``1 - M(statistics(H_T^l(sigmoid(logits), 0.5), labels))``.

    Args:
        metric: ``"fbeta"`` (default; alias ``"f1"``), ``"mcc"``, ``"jaccard"``, ``"precision"`` or ``"recall"``.
        beta: F-beta's beta, a float or one value per label (not with ``average="samples"`` or ``"micro"``).
        average: ``"macro"`` (default), ``"micro"``, ``"weighted"`` or ``"samples"`` (``MULTILABEL_AVERAGES``).
        temperature: T in (0, 0.4), by default ``annealing.DEFAULT_TEMPERATURE``; ``set_stage`` sets it.
        num_labels: L; if given, logits of another width are refused (``bind_num_classes`` fixes it otherwise).
        ignore_index: the label value of an entry that does not count.
        zero_division: the value of a ratio whose denominator is 0 (as scikit-learn's).
        beta_floor: the surrogate trains each label at ``max(beta_k, beta_floor)`` (as ``EASTLoss``).
        confusion_memory: d in [0, 1): a detached, decayed memory of earlier batches' statistics at the same
            temperature is added to a training batch's (as ``EASTLoss``).

    Statistics: ``multilabel_statistics`` (4, L + 1) of the soft predictions, computed in float32 under autocast and
    additive across batches and processes. As T -> 0 the loss tends to 1 - scikit-learn's score of the hard
    predictions ``(logits > 0)``. With ``validate_args=False`` a label that is not 0, 1 or ``ignore_index`` counts
    for nothing and is recorded in ``label_fault`` (no host read).

    >>> loss_fn = MultiLabelEASTLoss(temperature=0.2)
    >>> logits = torch.tensor([[3.0, -2.0], [-1.0, 2.0], [2.0, 1.0]], requires_grad=True)
    >>> loss = loss_fn(logits, torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))
    >>> loss.backward()
    >>> 0.0 < loss.item() < 1.0, logits.grad.shape
    (True, torch.Size([3, 2]))
    """

    name = "east"

    def __init__(
        self,
        metric: str = "fbeta",
        beta: float | Sequence[float] = 1.0,
        average: str = "macro",
        temperature: float = DEFAULT_TEMPERATURE,
        num_labels: int | None = None,
        ignore_index: int | None = -100,
        zero_division: float = 0.0,
        beta_floor: float = 0.0,
        confusion_memory: float = 0.0,
    ):
        super().__init__(ignore_index)
        self.metric = check_choice("metric", metric, _LOSS_METRICS)
        self.average = check_multilabel_average(average)
        self.zero_division = check_zero_division(zero_division)
        self.beta_floor = check_range("beta_floor", beta_floor, 0, math.inf, "[)")
        self.confusion_memory = check_range("confusion_memory", confusion_memory, 0, 1, "[)")
        self.temperature = check_temperature(temperature)
        self.beta = beta
        self.num_labels = None if num_labels is None else check_int("num_labels", num_labels, 1)
        length = num_labels if num_labels is not None else (None if isinstance(beta, (int, float)) else len(beta))
        # fail now, not at the first step: beta's values and length, and beta against the average
        multilabel_metric_settings(self.metric, beta, self.average, 0.0, length or 1, torch.empty(0))

    def set_stage(self, temperature: float, ce_weight: float = 0.0) -> None:
        self.temperature = check_temperature(temperature)

    def bind_num_classes(self, num_classes: int) -> None:
        """Fix the number of labels L where it was not given: logits of another width are refused from then on."""
        if self.num_labels is None:
            self.num_labels = check_int("num_labels", num_classes, 1)
        elif self.num_labels != num_classes:
            raise ValueError(f"Expected logits with {self.num_labels} labels, got {num_classes}")

    @property
    def metric_name(self) -> str:
        """The metric trained (as ``EASTLoss.metric_name``)."""
        return self.metric

    @property
    def soft_metric_key(self) -> str:
        """The training log key of the batch's soft metric, 1 - loss (e.g. ``east_soft_fbeta``)."""
        return f"east_soft_{self.metric}"

    def extra_repr(self) -> str:
        floor = f", beta_floor={self.beta_floor:g}" if self.beta_floor > 0 else ""
        return (
            f"metric={self.metric!r}, beta={self.beta}{floor}, average={self.average!r}, "
            f"temperature={self.temperature:.4g}"
        )

    def _trained_beta(self, num_labels: int, like: torch.Tensor) -> torch.Tensor | None:
        """The (L,) betas the surrogate trains, max(beta_k, beta_floor), checked once per (L, dtype, device)."""
        if self.metric not in ("fbeta", "f1"):
            return None
        key = (repr(self.beta), self.beta_floor, num_labels, like.dtype, like.device)
        if getattr(self, "_beta_key", None) != key:
            beta = floored_beta(self.beta, self.beta_floor)
            self._beta_cache = multilabel_metric_settings(self.metric, beta, self.average, 0.0, num_labels, like)[1]
            self._beta_key = key
        return self._beta_cache

    def statistics(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
        *,
        validate_args: bool = True,
    ) -> torch.Tensor:
        """The batch's (4, L + 1) statistics of the soft predictions; ``validate_args`` as ``SetLoss.statistics``."""
        check_label_matrix(logits, "logits")
        L = logits.shape[1]
        if self.num_labels is not None and L != self.num_labels:
            raise ValueError(
                f"Expected logits with {self.num_labels} labels (N, {self.num_labels}), "
                f"got shape {tuple(logits.shape)}"
            )
        predictions = soft_label_predictions(logits, self.temperature)  # (N, L) float32 or float64
        with torch.autocast(logits.device.type, enabled=False):
            y, mask, w, fault = multilabel_entries(
                labels, predictions.shape, sample_weight, self.ignore_index, validate_args, predictions.dtype
            )
            if not validate_args:
                seen = self._label_fault
                self._label_fault = (
                    fault if seen is None or seen.device != fault.device else torch.maximum(seen, fault)
                )
            beta = self._trained_beta(L, predictions)
            samples_beta = 1.0 if beta is None or self.average != "samples" else float(self._samples_beta())
            return statistics_of_entries(predictions, y, mask, w, samples_beta, self.zero_division)

    def _samples_beta(self) -> float:
        """The one beta of ``average="samples"`` (checked at construction), raised to ``beta_floor``."""
        beta = self.beta if isinstance(self.beta, (int, float)) else float(torch.as_tensor(self.beta).flatten()[0])
        return max(float(beta), self.beta_floor)

    def raise_if_label_fault(self, fault: int | torch.Tensor | None = None) -> None:
        """Raise the one-line error of the entries that were not 0, 1 or ``ignore_index`` (``label_fault`` holds
        their number in a training batch), or of ``fault`` where given."""
        fault = self._label_fault if fault is None else fault
        if fault is not None and (count := int(fault)) != NO_LABEL_FAULT:
            raise multilabel_label_error(f"{count} other entries in a training batch", self.ignore_index)

    def loss_from_statistics(self, stats: torch.Tensor) -> torch.Tensor:
        """1 - M(stats), and 0 (with a zero gradient) for statistics without a labelled entry."""
        stats = check_statistics(stats)
        beta = self._trained_beta(stats.shape[-1] - 1, stats)
        metric = metric_of_statistics(stats, self.metric, beta, self.average, self.zero_division)
        return self._nothing_if_empty(stats, 1.0 - metric)

    def is_empty(self, stats: torch.Tensor) -> torch.Tensor:
        return stats[3, :-1].sum() == 0  # the labelled entries' total weight
