"""Losses of a whole set: EASTLoss, 1 - M(C_T), and the paper's baselines, behind one interface.

A confusion-matrix metric is a function of a whole set, not a mean over samples. Every loss here is therefore
written as additive *statistics* of a batch (``statistics(logits, labels)``: a tensor that sums over batches and
processes) and a *loss of those statistics* (``loss_from_statistics``). ``forward`` is the two in a row. The Trainer
layer sums statistics across processes (a differentiable all-reduce) before taking the loss of a training batch, and
across every evaluation batch before taking the loss of the evaluation set, whatever the loss:

- ``EASTLoss``: for the built-in metrics the (3, C) counts of the soft confusion matrix C_T (TP, support,
  predicted), for a metric callable C_T itself (C, C); the loss 1 - M(C_T).
- ``CrossEntropySetLoss``: (sum of cross-entropies, count); the loss is their ratio, the mean cross-entropy. With
  class weights it is ``wce`` (inverse training-class frequency), with logit adjustment ``la`` (Menon et al. 2021).
- ``SoftDiceLoss``: per class (sum p y, sum p^2, sum y); the loss 1 - mean_k Dice_k (Milletari et al., 2016).
- ``MixedSetLoss``: EAST plus a weighted cross-entropy (both statistics side by side), for an annealed
  cross-entropy weight.

Statistics with no labelled row (a batch whose labels are all ``ignore_index``, or whose sample weights are all 0)
give every loss a loss of 0 whose gradient is 0 and still reaches the graph, as cross-entropy's ``ignore_index``
treats each ignored row: such a batch contributes nothing, never 0 / 0. ``is_empty`` tells them apart, so a caller
that needs a labelled set (the Trainer's evaluation) can refuse one without labels.

A training step reads nothing from the device: ``statistics(..., validate_args=False)`` checks the labels there
(``device_rows``: rows out of range weigh 0) and records the first label out of range in ``label_fault``, which
``raise_if_label_fault`` turns into the usual one-line error where the caller next synchronises (EASTTrainer: at
logging). With ``validate_args=True`` (the default) the labels are checked at once, with one host read.

``build_loss(name, ...)`` makes one by its ``EASTConfig.east_loss`` name. Pure torch: nothing from transformers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from east_hf.core import METRICS, beta_vector, check_temperature, resolve_beta, valid_rows
from east_hf.core.baselines import soft_dice_from_statistics, soft_dice_statistics
from east_hf.core.fused import soft_confusion_from_logits, soft_counts_from_logits
from east_hf.core.fused_metric import FUSED_METRICS, MetricConstants, metric_loss, metric_loss_from_counts
from east_hf.core.metrics import metric_from_counts
from east_hf.core.surrogate import NO_LABEL_FAULT, device_rows, label_error
from east_hf.core.validation import check_average, check_choice, check_metric, check_num_classes, check_range

__all__ = [
    "LOSSES",
    "PRIOR_LOSSES",
    "CrossEntropySetLoss",
    "EASTLoss",
    "LossSpec",
    "MixedSetLoss",
    "SetLoss",
    "SoftDiceLoss",
    "build_loss",
    "class_weights_from_counts",
    "describe_losses",
    "floored_beta",
    "logit_adjustment_from_counts",
]


class SetLoss(nn.Module):
    """A loss of a set computed from additive statistics of its batches (see the module docstring).

    Subclasses set ``name`` and implement ``statistics``, ``loss_from_statistics`` and ``is_empty``; rows labelled
    ``ignore_index`` contribute nothing, and statistics without any labelled row have a loss of 0 with a zero gradient.
    """

    name: str = ""
    soft_metric_key: str | None = None  # a training log key for 1 - loss, where that is a soft metric

    def __init__(self, ignore_index: int | None = -100):
        super().__init__()
        self.ignore_index = ignore_index
        self._label_fault: torch.Tensor | None = None  # () int64: the largest label out of range seen
        self._label_classes = 0  # the number of classes it was out of

    def statistics(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
        *,
        validate_args: bool = True,
    ) -> torch.Tensor:
        """The batch's additive statistics. ``validate_args=False`` reads nothing from the device: labels are
        checked there and a label out of range is recorded in ``label_fault`` instead of raised."""
        raise NotImplementedError

    def loss_from_statistics(self, stats: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def is_empty(self, stats: torch.Tensor) -> torch.Tensor:
        """Whether ``stats`` hold no labelled row (all ignored, or all of weight 0): a () bool tensor on the
        statistics' device, so training reads it without a host synchronisation."""
        raise NotImplementedError

    def _nothing_if_empty(self, stats: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
        """``loss``, or 0 where ``stats`` hold no labelled row: ``stats.sum() * 0`` keeps the zero gradient connected
        to the graph, so backward and the optimizer step run as for any batch."""
        return torch.where(self.is_empty(stats), stats.sum() * 0, loss)

    def set_stage(self, temperature: float, ce_weight: float = 0.0) -> None:
        """Take an annealing stage's values (``AnnealingSchedule.temperature`` and ``.ce_weight``); a loss without a
        temperature or a cross-entropy weight ignores them."""

    def with_memory(self, stats: torch.Tensor) -> torch.Tensor:
        """A training batch's statistics with the loss's memory of earlier batches added (none here: ``stats``)."""
        return stats

    def loss_and_soft_metric(self, stats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The loss of ``stats`` and the soft metric logged under ``soft_metric_key`` (1 - loss, detached), or None
        where the loss is not one minus a metric."""
        loss = self.loss_from_statistics(stats)
        return loss, (None if self.soft_metric_key is None else 1.0 - loss.detach())

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The loss of one batch, its labels checked at once. On the CPU, where reading a value costs nothing, a
        non-finite loss raises a one-line error; on an accelerator it is returned without waiting for the device."""
        loss = self.loss_from_statistics(self.statistics(logits, labels, sample_weight))
        if loss.device.type == "cpu" and not math.isfinite(loss.item()):  # diagnose the cause only when it fails
            if not bool(torch.isfinite(logits).all()):
                raise ValueError(f"Expected finite logits, got NaN or inf in logits of shape {tuple(logits.shape)}")
            raise FloatingPointError(f"{type(self).__name__} is not finite ({loss.item()}) for finite logits")
        return loss

    @property
    def label_fault(self) -> torch.Tensor | None:
        """The largest label out of range that ``statistics(..., validate_args=False)`` met, as a () int64 tensor on
        the device (``surrogate.NO_LABEL_FAULT``, the smallest int64, where none); None before any such call."""
        return self._label_fault

    def raise_if_label_fault(self, fault: int | torch.Tensor | None = None) -> None:
        """Raise the one-line error of a label out of range recorded in ``label_fault`` (one host read), or of
        ``fault`` where given (a value the caller gathered, e.g. the maximum across processes)."""
        fault = self._label_fault if fault is None else fault
        if fault is not None and (label := int(fault)) != NO_LABEL_FAULT:
            raise label_error(label, self._label_classes, self.ignore_index)

    def _rows(self, logits, labels, sample_weight, validate_args: bool = True):
        """(logits, labels, sample_weight) of the rows that count: ``valid_rows``, or with ``validate_args=False``
        ``device_rows`` (every row, the ignored and faulty ones at weight 0; the fault recorded)."""
        if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
            got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise ValueError(f"Expected logits of shape (N, C), got {got}")
        if validate_args:
            return valid_rows(logits, labels, sample_weight, ignore_index=self.ignore_index)
        logits, labels, weight, fault = device_rows(logits, labels, sample_weight, ignore_index=self.ignore_index)
        seen = self._label_fault
        if seen is None or seen.device != fault.device:
            self._label_fault = fault
        else:
            self._label_fault = torch.maximum(seen, fault)
        self._label_classes = logits.shape[1]
        return logits, labels, weight


class CrossEntropySetLoss(SetLoss):
    """Cross-entropy as a set loss: statistics (sum of per-sample cross-entropies, sum of weights), loss their ratio.

    Equal to ``F.cross_entropy(logits, labels, weight=class_weight, ignore_index=-100)`` on a batch (each sample also
    weighted by ``sample_weight`` if given), and to the mean over the whole set when the statistics of several batches
    are summed first. Computed in float32.

    Args:
        class_weight: optional (C,) weight of each true class (``wce``: ``class_weights_from_counts``).
        logit_adjustment: optional (C,) offsets added to the logits inside the loss only (``la``: tau * log(prior),
            Menon et al., ICLR 2021); the model's own logits, and so its argmax predictions, are left as they are.

    >>> loss = CrossEntropySetLoss()
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    >>> torch.isclose(loss(logits, labels), F.cross_entropy(logits, labels)).item()
    True
    """

    name = "ce"

    def __init__(
        self,
        ignore_index: int | None = -100,
        class_weight: Sequence[float] | torch.Tensor | None = None,
        logit_adjustment: Sequence[float] | torch.Tensor | None = None,
    ):
        super().__init__(ignore_index)
        for what, value in (("class_weight", class_weight), ("logit_adjustment", logit_adjustment)):
            if value is not None:
                value = torch.as_tensor(value, dtype=torch.float32)
                if value.ndim != 1 or not bool(torch.isfinite(value).all()):
                    raise ValueError(f"Expected {what} as a finite (C,) vector, got {value.tolist()}")
            self.register_buffer(what, value, persistent=False)

    def statistics(self, logits, labels, sample_weight=None, *, validate_args=True):
        logits, labels, sample_weight = self._rows(logits, labels, sample_weight, validate_args)
        with torch.autocast(logits.device.type, enabled=False):
            logits = logits.float()
            for what, value in (("class_weight", self.class_weight), ("logit_adjustment", self.logit_adjustment)):
                if value is not None and value.shape[0] != logits.shape[1]:
                    raise ValueError(f"Expected {what} of {logits.shape[1]} classes, got {value.shape[0]}")
            if self.logit_adjustment is not None:
                logits = logits + self.logit_adjustment
            per_sample = F.cross_entropy(logits, labels, reduction="none")  # (n,)
            weight = None if self.class_weight is None else self.class_weight[labels]
            if sample_weight is not None:
                weight = sample_weight.float() if weight is None else weight * sample_weight.float()
            if weight is None:
                return torch.stack([per_sample.sum(), per_sample.new_tensor(float(len(per_sample)))])
            return torch.stack([(per_sample * weight).sum(), weight.sum()])

    def loss_from_statistics(self, stats):
        # No labelled row: the sum is 0 as well, and 0 / 1 is a loss of 0 with a zero gradient instead of 0 / 0.
        count = stats[1]
        return stats[0] / torch.where(count == 0, torch.ones_like(count), count)

    def is_empty(self, stats):
        return stats[1] == 0


def class_weights_from_counts(counts: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """Inverse-frequency class weights, normalised so the mean weight of a training sample is 1.

    w_k = N / (C n_k) for the n_k training samples of class k out of N (scikit-learn's ``"balanced"``); a class
    without training samples gets 0. Counts of any scale give the same weights, so priors (fractions) do too.

    >>> [round(w, 4) for w in class_weights_from_counts([90, 10]).tolist()]
    [0.5556, 5.0]
    """
    counts = torch.as_tensor(counts, dtype=torch.float32)
    if counts.ndim != 1 or counts.numel() < 2 or bool((counts < 0).any()) or not counts.sum() > 0:
        raise ValueError(f"Expected class counts as >= 2 non-negative numbers, not all 0, got {counts.tolist()}")
    return torch.where(counts > 0, counts.sum() / (len(counts) * counts.where(counts > 0, 1.0)), 0.0)


def logit_adjustment_from_counts(counts: Sequence[int] | torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """tau * log(pi_k), the logit adjustment of Menon et al. (ICLR 2021) from the training split's class priors.

    ``counts`` may be priors of any scale (pi_k = n_k / N), so priors given as fractions give the same offsets. A
    class with a zero count is floored at half a sample (0.5), or at half the smallest positive value where that is
    below 1 (fractions), so the offset stays finite.

    >>> [round(v, 4) for v in logit_adjustment_from_counts([75, 25]).tolist()]
    [-0.2877, -1.3863]
    """
    counts = torch.as_tensor(counts, dtype=torch.float32)
    if counts.ndim != 1 or counts.numel() < 2 or bool((counts < 0).any()) or not counts.sum() > 0:
        raise ValueError(f"Expected class counts as >= 2 non-negative numbers, not all 0, got {counts.tolist()}")
    floor = 0.5 * min(1.0, counts[counts > 0].min().item())  # half a sample; half the smallest prior below 1
    return tau * (counts.clamp(min=floor) / counts.sum()).log()


class SoftDiceLoss(SetLoss):
    """Multiclass soft Dice (Milletari et al., 2016), the paper's Dice baseline, as a set loss.

    Statistics per class k (3, C): sum_n p_nk y_nk, sum_n p_nk^2 and sum_n y_nk (= sum y^2 for one-hot y), with
    p = softmax(logits); the loss is 1 - mean_k 2 a_k / (b_k + c_k + eps). The two steps are those of
    ``east_hf.core.baselines`` (``soft_dice_statistics``, ``soft_dice_from_statistics``), so on one batch it equals
    ``east_hf.core.soft_dice_loss``. Computed in float32.
    """

    name = "dice"

    def __init__(self, ignore_index: int | None = -100, eps: float = 1e-6):
        super().__init__(ignore_index)
        self.eps = eps

    def statistics(self, logits, labels, sample_weight=None, *, validate_args=True):
        return soft_dice_statistics(*self._rows(logits, labels, sample_weight, validate_args))

    def loss_from_statistics(self, stats):
        return self._nothing_if_empty(stats, soft_dice_from_statistics(stats, self.eps))

    def is_empty(self, stats):
        return stats[2].sum() == 0  # sum_n y_nk over the classes: the labelled rows' total weight


def floored_beta(beta: float | Sequence[float] | torch.Tensor, floor: float) -> float | list[float] | torch.Tensor:
    """Each beta raised to ``floor`` (``beta`` itself where the floor is 0): the beta a precision-leaning class is
    trained at (``EASTLoss(beta_floor=...)``) and tuned at (``EASTTrainer.tune_decision_rule``).

    >>> floored_beta([0.25, 2.0], 1.0)
    [1.0, 2.0]
    """
    if floor == 0:
        return beta
    if isinstance(beta, (int, float)):
        return max(float(beta), floor)
    if isinstance(beta, torch.Tensor):
        return beta.clamp(min=floor)
    return [max(float(b), floor) for b in beta]


class EASTLoss(SetLoss):
    """The EAST surrogate loss ``1 - M(C_T(softmax(logits), labels))`` (paper Sec. 4).

    Args:
        metric: ``"fbeta"`` (alias ``"f1"``), ``"accuracy"``, ``"mcc"``, ``"precision"``, ``"recall"``, or any
            callable mapping a (C, C) confusion matrix to a scalar to maximise (the paper: any confusion-matrix metric).
        beta: F-beta's beta, a float or one value per class (e.g. 0.25 on one class to prefer its precision).
        average: ``"macro"`` (default), ``"weighted"``, ``"micro"`` or ``"binary"`` (with ``pos_label``).
        temperature: T in (0, 0.4); a plain attribute an annealing schedule sets between steps.
        num_classes: if given, logits of another width are refused with a clear error.
        threshold_grad: let gradients flow through the dynamic threshold tau_avg(p) (default, as the paper).
        ignore_index: label value whose rows contribute nothing (as ``nn.CrossEntropyLoss``).
        beta_floor: the surrogate trains each class at ``max(beta_k, beta_floor)``; ``beta`` itself (the metric the
            model is judged by) is kept as given. 0 (default here) trains the given beta, as the paper; ``EASTConfig``
            defaults to 1.0, see ``EASTConfig.east_beta_floor`` for when a precision-leaning beta collapses.
        confusion_memory: d in [0, 1): ``with_memory`` adds a detached memory of the earlier training batches' soft
            confusion matrices at the same temperature to a batch's, m <- d * (m + C_batch), so rare-class rates are
            not estimated from one batch's few positives. 0 (default): the batch alone, as the paper.

    The surrogate is computed in float32 even under bf16/fp16 autocast. The loss of a batch is a function of the
    whole batch (not a mean over samples); ``statistics`` and ``loss_from_statistics`` sum over processes or
    evaluation batches before applying the metric.

    Statistics: the built-in metrics read the soft confusion matrix only through its (3, C) counts (TP, support,
    predicted: ``metrics.confusion_counts``), so ``statistics`` returns those (``fused.soft_counts_from_logits``),
    O(C) memory and O(N C) work whatever C, never the (C, C) matrix, which takes O(C^2) of both (at C = 100,000,
    40 GB). A metric callable receives the (C, C) matrix, which ``statistics`` then returns; ``confusion_matrix`` and
    ``loss_from_confusion`` keep the matrix for every metric.

    >>> loss_fn = EASTLoss(metric="fbeta", beta=1.0, temperature=0.2)
    >>> logits = torch.tensor([[4.0, 0.0], [0.0, 4.0], [3.0, 0.0]], requires_grad=True)
    >>> loss = loss_fn(logits, torch.tensor([0, 1, 1]))
    >>> loss.backward()
    >>> 0.0 < loss.item() < 1.0, logits.grad.shape
    (True, torch.Size([3, 2]))
    """

    name = "east"

    def __init__(
        self,
        metric: str | Callable[[torch.Tensor], torch.Tensor] = "fbeta",
        beta: float | Sequence[float] | Mapping[str, float] = 1.0,
        average: str = "macro",
        pos_label: int = 1,
        temperature: float = 0.2,
        num_classes: int | None = None,
        threshold_grad: bool = True,
        ignore_index: int | None = -100,
        zero_division: float = 0.0,
        class_names: Sequence[str] | Mapping[int, str] | None = None,
        beta_floor: float = 0.0,
        confusion_memory: float = 0.0,
    ):
        super().__init__(ignore_index)
        check_range("confusion_memory", confusion_memory, 0, 1, "[)")
        check_range("beta_floor", beta_floor, 0, math.inf, "[)")
        check_metric(metric, METRICS)
        check_average(average)
        if num_classes is not None:
            check_num_classes(num_classes)
        if isinstance(beta, (str, Mapping)):
            if num_classes is None:
                raise ValueError(
                    f"Expected num_classes (and class_names) to resolve beta given by class, got {beta!r}"
                )
            beta = resolve_beta(beta, class_names, num_classes)
        if num_classes is not None:
            beta_vector(beta, num_classes, torch.empty(0))  # fail now, not at the first step
            if average == "binary" and num_classes != 2:
                raise ValueError(
                    f"Expected 2 classes for average='binary', got {num_classes} (use 'macro', 'weighted' or "
                    "'micro', or relabel to binary with positive_classes)"
                )
            check_average(average, num_classes, pos_label)
        else:
            beta_vector(beta, 1 if isinstance(beta, (int, float)) else len(beta), torch.empty(0))
        self.metric = metric
        self.beta = beta
        self.average = average
        self.pos_label = pos_label
        self.temperature = check_temperature(temperature)
        self.num_classes = num_classes
        self.threshold_grad = threshold_grad
        self.zero_division = zero_division
        self.beta_floor = float(beta_floor)
        self.confusion_memory = float(confusion_memory)
        self.memory: torch.Tensor | None = None  # the detached, decayed sum of earlier batches' statistics
        self._memory_temperature: float | None = None  # the temperature the memory was accumulated at

    def set_stage(self, temperature: float, ce_weight: float = 0.0) -> None:
        self.temperature = check_temperature(temperature)

    def bind_num_classes(self, num_classes: int) -> None:
        """Fix the number of classes where it was not given (learnt from the first batch's logits): logits of another
        width are refused from now on."""
        if self.num_classes is None:
            self.num_classes = int(num_classes)
        elif self.num_classes != num_classes:
            raise ValueError(f"Expected logits with {self.num_classes} classes, got {num_classes}")

    def with_memory(self, stats: torch.Tensor) -> torch.Tensor:
        """A training batch's statistics (the soft confusion matrix's counts or the matrix) plus the memory, then
        m <- d * (m + stats.detach()); both are linear in the matrix, so the counts' memory is that of the matrices.
        The memory empties when the temperature (or the statistics' shape) changes: a new stage's matrices are
        another function of the weights. It holds about 1 / (1 - d) batches; no gradient flows into earlier ones."""
        if self.confusion_memory == 0:
            return stats
        memory = self.memory
        if memory is None or self._memory_temperature != self.temperature or memory.shape != stats.shape:
            memory = torch.zeros_like(stats)
        self.memory = self.confusion_memory * (memory + stats.detach())
        self._memory_temperature = self.temperature
        return stats + memory

    @property
    def metric_name(self) -> str:
        return self.metric if isinstance(self.metric, str) else getattr(self.metric, "__name__", "custom")

    @property
    def soft_metric_key(self) -> str:
        """The training log key of the batch's soft metric, 1 - loss (e.g. ``east_soft_fbeta``)."""
        return f"east_soft_{self.metric_name}"

    def extra_repr(self) -> str:
        floor = f", beta_floor={self.beta_floor:g}" if self.beta_floor > 0 else ""
        return (
            f"metric={self.metric_name!r}, beta={self.beta}{floor}, average={self.average!r}, "
            f"temperature={self.temperature:.4g}"
        )

    def confusion_matrix(
        self, logits: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The soft confusion matrix C_T of a batch: logits (N, C), labels (N,) -> (C, C) float32."""
        logits, labels, sample_weight = self._east_rows(logits, labels, sample_weight, True)
        temperature = check_temperature(self.temperature)
        return soft_confusion_from_logits(logits, labels, sample_weight, temperature, self.threshold_grad)

    def statistics(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
        *,
        validate_args: bool = True,
    ) -> torch.Tensor:
        """The batch's additive statistics: (3, C) counts of C_T for a built-in metric, C_T (C, C) for a callable
        (see the class docstring); ``validate_args`` as ``SetLoss.statistics``."""
        logits, labels, sample_weight = self._east_rows(logits, labels, sample_weight, validate_args)
        temperature = check_temperature(self.temperature)
        of_logits = soft_counts_from_logits if self._uses_counts else soft_confusion_from_logits
        return of_logits(logits, labels, sample_weight, temperature, self.threshold_grad)

    @property
    def _uses_counts(self) -> bool:
        """Whether the statistics are the (3, C) counts or the (C, C) matrix (C is the last dimension of either): the
        counts for every built-in metric, which reads the matrix only through its diagonal and its row and column
        sums (O(C) memory, never slower than the matrix); the matrix for a metric callable."""
        return isinstance(self.metric, str)

    def _east_rows(self, logits, labels, sample_weight, validate_args):
        if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
            got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise ValueError(f"Expected logits of shape (N, C), got {got}")
        C = logits.shape[1]
        if self.num_classes is not None and C != self.num_classes:
            raise ValueError(
                f"Expected logits with {self.num_classes} classes (N, {self.num_classes}), got shape {tuple(logits.shape)}"
            )
        if C < 2:
            raise ValueError(f"Expected at least 2 classes, got logits of shape {tuple(logits.shape)}")
        if self.average == "binary" and C != 2:
            raise ValueError(f"Expected 2 classes for average='binary', got logits of shape {tuple(logits.shape)}")
        return self._rows(logits, labels, sample_weight, validate_args)

    def _beta_tensor(self, like: torch.Tensor, num_classes: int) -> torch.Tensor:
        """The validated (C,) beta the surrogate trains, max(beta_k, beta_floor), built once per (beta, floor, C,
        dtype, device) and reused on every step."""
        key = (repr(self.beta), self.beta_floor, num_classes, like.dtype, like.device)
        if getattr(self, "_beta_key", None) != key:
            self._beta_cache = beta_vector(self._trained_beta(), num_classes, like)
            self._beta_key = key
        return self._beta_cache

    def _metric_arguments(self, like: torch.Tensor, num_classes: int) -> dict:
        kwargs = {}
        if self.metric in ("fbeta", "f1"):
            kwargs["beta"] = self._beta_tensor(like, num_classes)
        if self.metric in ("fbeta", "f1", "precision", "recall"):
            kwargs.update(average=self.average, pos_label=self.pos_label, zero_division=self.zero_division)
        return kwargs

    def metric_value(self, confmat: torch.Tensor) -> torch.Tensor:
        """M(confmat): the configured metric of a (C, C) confusion matrix (soft or hard)."""
        if callable(self.metric):
            return self.metric(confmat)
        return METRICS[self.metric](confmat, **self._metric_arguments(confmat, confmat.shape[0]))

    def _metric_constants(self, stats: torch.Tensor) -> MetricConstants:
        """The fused loss's validated constants, built once per setting, C, dtype and device and reused (C is the
        last dimension of both the (C, C) matrix and the (3, C) counts)."""
        beta = self.beta if isinstance(self.beta, (int, float)) else repr(self.beta)
        C = stats.shape[-1]
        key = (self.metric, beta, self.beta_floor, self.average, self.pos_label, self.zero_division, C, stats.dtype,
               stats.device)  # fmt: skip
        if getattr(self, "_constants_key", None) != key:
            self._constants = MetricConstants(
                self.metric, C, stats, self._trained_beta(), self.average, self.pos_label, self.zero_division
            )
            self._constants_key = key
        return self._constants

    def loss_from_confusion(self, confmat: torch.Tensor) -> torch.Tensor:
        """1 - M(confmat); for F-beta, MCC and accuracy one fused Function (``functional.fused_metric``)."""
        if isinstance(self.metric, str) and self.metric in FUSED_METRICS:
            if (
                isinstance(confmat, torch.Tensor)
                and confmat.is_floating_point()
                and confmat.ndim == 2
                and confmat.shape[0] == confmat.shape[1] >= 2
            ):
                return metric_loss(confmat, constants=self._metric_constants(confmat))
            return metric_loss(confmat, **self._metric_kwargs())  # validates (and casts) confmat first
        return 1.0 - self.metric_value(confmat)

    def _trained_beta(self) -> float | list[float] | torch.Tensor:
        """The beta the surrogate trains: ``beta`` itself, or each value raised to ``beta_floor``."""
        return floored_beta(self.beta, self.beta_floor)

    def _metric_kwargs(self) -> dict:
        return {"metric": self.metric, "beta": self._trained_beta(), "average": self.average,
                "pos_label": self.pos_label, "zero_division": self.zero_division}  # fmt: skip

    def loss_from_counts(self, counts: torch.Tensor) -> torch.Tensor:
        """1 - M of the matrix whose (3, C) counts (TP, support, predicted) these are, for a built-in metric; for
        F-beta, MCC and accuracy one fused Function (``fused_metric.metric_loss_from_counts``)."""
        return self._loss_from_counts(counts, zero_if_empty=False)

    def _loss_from_counts(self, counts: torch.Tensor, zero_if_empty: bool) -> torch.Tensor:
        if (
            self.metric in FUSED_METRICS
            and isinstance(counts, torch.Tensor)
            and counts.is_floating_point()
            and counts.ndim == 2
            and counts.shape[0] == 3
            and counts.shape[1] >= 2
        ):
            constants = self._metric_constants(counts)
            return metric_loss_from_counts(counts, constants=constants, zero_if_empty=zero_if_empty)
        if self.metric in FUSED_METRICS:  # validates (and casts) counts first
            loss = metric_loss_from_counts(counts, **self._metric_kwargs())
        else:
            loss = 1.0 - metric_from_counts(counts, self.metric, **self._metric_arguments(counts, counts.shape[-1]))
        return self._nothing_if_empty(counts, loss) if zero_if_empty else loss

    def loss_from_statistics(self, stats: torch.Tensor) -> torch.Tensor:
        """``loss_from_counts`` (or ``loss_from_confusion`` for a metric callable), and 0 for statistics without
        labelled rows (not 1 - M of an empty matrix; the fused metric loss applies that rule itself)."""
        if self._uses_counts:
            return self._loss_from_counts(stats, zero_if_empty=True)
        return self._nothing_if_empty(stats, self.loss_from_confusion(stats))

    def is_empty(self, stats):
        # the labelled rows' total weight: the counts' support, or the matrix's sum (each row of memberships sums
        # to its weight)
        return (stats[1] if self._uses_counts else stats).sum() == 0


@dataclass(frozen=True)
class LossSpec:
    """One entry of the loss registry ``LOSSES``: how ``build_loss`` makes the loss, and the one line that
    ``EASTConfig``'s help, east-compare and the model card describe it with (``{metric}``: the metric EAST trains)."""

    name: str
    builder: Callable[..., SetLoss]  # (ignore_index, class_counts, **east_settings) -> the loss
    description: str
    needs_class_counts: bool = False  # built from the training split's class counts (its priors)

    def describe(self, metric: str = "M") -> str:
        """The description, with ``metric`` for the metric trained (``describe("fbeta")``: 1 - soft fbeta)."""
        return self.description.format(metric=metric)


def _east(ignore_index: int | None, class_counts: Any = None, **east_settings: Any) -> SetLoss:
    return EASTLoss(ignore_index=ignore_index, **east_settings)


def _cross_entropy(name: str) -> Callable[..., SetLoss]:
    """The builder of ``ce``, ``wce`` (class weights from the counts) or ``la`` (logit adjustment from the counts)."""

    def build(ignore_index: int | None, class_counts: Any = None, **_: Any) -> SetLoss:
        loss = CrossEntropySetLoss(
            ignore_index=ignore_index,
            class_weight=class_weights_from_counts(class_counts) if name == "wce" else None,
            logit_adjustment=logit_adjustment_from_counts(class_counts) if name == "la" else None,
        )
        loss.name = name
        return loss

    return build


def _dice(ignore_index: int | None, class_counts: Any = None, **_: Any) -> SetLoss:
    return SoftDiceLoss(ignore_index=ignore_index)


LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        LossSpec("east", _east, "EAST surrogate, 1 - soft {metric}"),
        LossSpec("ce", _cross_entropy("ce"), "cross-entropy (baseline)"),
        LossSpec(
            "wce",
            _cross_entropy("wce"),
            "class-weighted cross-entropy, inverse training-class frequency (baseline)",
            needs_class_counts=True,
        ),
        LossSpec(
            "la",
            _cross_entropy("la"),
            "logit-adjusted cross-entropy, tau = 1 (Menon et al., 2021; baseline)",
            needs_class_counts=True,
        ),
        LossSpec("dice", _dice, "soft Dice (baseline)"),
    )
}
"""The loss registry, by ``EASTConfig.east_loss`` name: EAST and the paper's baselines."""
PRIOR_LOSSES = tuple(name for name, spec in LOSSES.items() if spec.needs_class_counts)


def describe_losses(metric: str = "M") -> str:
    """Every loss name with its description, on one line (the help of ``east_loss``).

    >>> describe_losses().split("; ")[:2]
    ['east: EAST surrogate, 1 - soft M', 'ce: cross-entropy (baseline)']
    """
    return "; ".join(f"{name}: {spec.describe(metric)}" for name, spec in LOSSES.items())


def build_loss(
    name: str,
    ignore_index: int | None = -100,
    class_counts: Sequence[int] | torch.Tensor | None = None,
    **east_settings: Any,
) -> SetLoss:
    """The loss named ``name`` (``LOSSES``). ``east_settings`` (``metric``, ``beta``, ...) go to ``EASTLoss``;
    ``wce`` and ``la`` need the training split's ``class_counts`` (or class priors: any scale gives the same loss).

    - ``wce``: cross-entropy weighted by ``class_weights_from_counts(class_counts)``.
    - ``la``: cross-entropy of ``logits + log(prior)`` (``logit_adjustment_from_counts``, tau = 1); predictions
      stay the argmax of the model's logits, which is the logit-adjusted loss's Bayes-optimal balanced rule.

    >>> build_loss("ce")
    CrossEntropySetLoss()
    >>> [round(w, 4) for w in build_loss("wce", class_counts=[90, 10]).class_weight.tolist()]
    [0.5556, 5.0]
    """
    spec = LOSSES[check_choice("a loss", name, tuple(LOSSES))]
    if spec.needs_class_counts and class_counts is None:
        raise ValueError(f"Expected the training split's class_counts for loss {name!r}, got None")
    return spec.builder(ignore_index, class_counts, **east_settings)


class MixedSetLoss(SetLoss):
    """``EASTLoss`` plus ``weight`` times mean cross-entropy: the loss of an annealed cross-entropy weight.
    ``cross_entropy``: plain by default, or a class-weighted or logit-adjusted one (``build_loss("la", ...)``).

    Statistics: EAST's (its (3, C) counts or (C, C) matrix) with one more row, the cross-entropy's (sum, count) padded
    with zeros to C; both additive, so the set's loss is exact across batches and processes as for the two losses alone. ``set_stage`` takes
    each stage's weight from the annealing schedule (``AnnealingSchedule.ce_weight``: w_k = w0 * d^k), so early
    stages keep cross-entropy's per-sample gradients and late ones train the metric alone. ``weight = 0`` is EAST.

    >>> east = EASTLoss("fbeta", temperature=0.2)
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]]), torch.tensor([0, 1, 1])
    >>> mixed = MixedSetLoss(east, weight=0.5)
    >>> torch.isclose(mixed(logits, labels), east(logits, labels) + 0.5 * F.cross_entropy(logits, labels)).item()
    True
    """

    name = "east"

    def __init__(self, east: EASTLoss, weight: float = 1.0, cross_entropy: CrossEntropySetLoss | None = None):
        super().__init__(east.ignore_index)
        if cross_entropy is not None and not isinstance(cross_entropy, CrossEntropySetLoss):
            raise TypeError(f"Expected cross_entropy as a CrossEntropySetLoss, got {type(cross_entropy).__name__}")
        self.east = east
        self.cross_entropy = cross_entropy or CrossEntropySetLoss(ignore_index=east.ignore_index)
        self.weight = weight

    @property
    def weight(self) -> float:
        return self._weight

    @weight.setter
    def weight(self, value: float) -> None:
        self._weight = check_range("ce_weight", value, 0, math.inf)

    def extra_repr(self) -> str:
        return f"weight={self._weight:.4g}"

    @property
    def soft_metric_key(self) -> str:
        return self.east.soft_metric_key

    def set_stage(self, temperature: float, ce_weight: float = 0.0) -> None:
        self.east.set_stage(temperature)
        self.weight = ce_weight

    def statistics(self, logits, labels, sample_weight=None, *, validate_args=True):
        east = self.east.statistics(logits, labels, sample_weight, validate_args=validate_args)
        ce = self.cross_entropy.statistics(logits, labels, sample_weight, validate_args=validate_args)
        ce = F.pad(ce.to(east.dtype), (0, east.shape[-1] - 2)).unsqueeze(0)  # (1, C): (sum, count, 0, ...)
        return torch.cat([east, ce])  # (4, C) or (C + 1, C)

    @property
    def label_fault(self) -> torch.Tensor | None:
        """EAST's recorded label fault (the cross-entropy sees the same labels)."""
        return self.east.label_fault

    def raise_if_label_fault(self, fault: int | torch.Tensor | None = None) -> None:
        self.east.raise_if_label_fault(fault)

    def _split(self, stats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(EAST's statistics, the cross-entropy's (sum, count)) of the statistics."""
        return stats[:-1], stats[-1, :2]

    def with_memory(self, stats: torch.Tensor) -> torch.Tensor:
        """EAST's memory added to EAST's statistics; the cross-entropy's sum and count stay the batch's."""
        east, ce = self._split(stats)
        return torch.cat([self.east.with_memory(east), stats[-1:]])

    def loss_and_soft_metric(self, stats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss and the soft metric of the EAST part alone (1 - its loss, without the cross-entropy)."""
        confmat, ce = self._split(stats)
        east = self.east.loss_from_statistics(confmat)
        loss = east if self._weight == 0 else east + self._weight * self.cross_entropy.loss_from_statistics(ce)
        return loss, 1.0 - east.detach()

    def loss_from_statistics(self, stats):
        return self.loss_and_soft_metric(stats)[0]

    def is_empty(self, stats):
        confmat, ce = self._split(stats)
        return self.east.is_empty(confmat) & self.cross_entropy.is_empty(ce)
