"""``EASTLoss``, the EAST surrogate 1 - M(C_T) as a set loss (``east_hf.core.set_loss.SetLoss``), and
``floored_beta``, the beta a precision-leaning class is trained and tuned at.

Its statistics are the (3, C) counts of the soft confusion matrix C_T (TP, support, predicted) for the built-in
metrics, and C_T itself (C, C) for a metric callable; the loss is 1 - M of them, one fused Function for F-beta, MCC
and accuracy. Pure torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch

from east_hf.core.annealing import DEFAULT_TEMPERATURE
from east_hf.core.classes import resolve_beta
from east_hf.core.fused import soft_confusion_from_logits, soft_counts_from_logits
from east_hf.core.metric_loss import FUSED_METRICS, MetricConstants, metric_loss, metric_loss_from_counts
from east_hf.core.metrics import METRICS, beta_vector, metric_from_counts
from east_hf.core.set_loss import BatchMemory, SetLoss
from east_hf.core.validation import check_average, check_metric, check_num_classes, check_range, check_temperature

__all__ = ["EASTLoss", "floored_beta"]


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


class EASTLoss(BatchMemory, SetLoss):
    """The EAST surrogate loss ``1 - M(C_T(softmax(logits), labels))`` (paper Sec. 4).

    Args:
        metric: ``"fbeta"`` (alias ``"f1"``), ``"accuracy"``, ``"mcc"``, ``"precision"``, ``"recall"``, or any
            callable mapping a (C, C) confusion matrix to a scalar to maximise (the paper:
            any confusion-matrix metric).
        beta: F-beta's beta, a float or one value per class (e.g. 0.25 on one class to prefer its precision).
        average: ``"macro"`` (default), ``"weighted"``, ``"micro"`` or ``"binary"`` (with ``pos_label``).
        temperature: T in (0, 0.4), by default ``annealing.DEFAULT_TEMPERATURE`` (0.2, the schedule's T0); a plain
            attribute an annealing schedule sets between steps.
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
        temperature: float = DEFAULT_TEMPERATURE,
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

    def set_stage(self, temperature: float, ce_weight: float = 0.0) -> None:
        self.temperature = check_temperature(temperature)

    def bind_num_classes(self, num_classes: int) -> None:
        """Fix the number of classes where it was not given (learnt from the first batch's logits): logits of another
        width are refused from now on."""
        if self.num_classes is None:
            self.num_classes = int(num_classes)
        elif self.num_classes != num_classes:
            raise ValueError(f"Expected logits with {self.num_classes} classes, got {num_classes}")

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
                f"Expected logits with {self.num_classes} classes (N, {self.num_classes}), "
                f"got shape {tuple(logits.shape)}"
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
        """1 - M(confmat); for F-beta, MCC and accuracy one fused Function (``metric_loss.metric_loss``)."""
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
        F-beta, MCC and accuracy one fused Function (``metric_loss.metric_loss_from_counts``)."""
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
