"""The interface of every loss here: a loss of a whole set, computed from additive statistics of its batches.

A confusion-matrix metric is a function of a whole set, not a mean over samples. Every loss is therefore written as
additive *statistics* of a batch (``statistics(logits, labels)``: a tensor that sums over batches and processes) and a
*loss of those statistics* (``loss_from_statistics``). ``forward`` is the two in a row. The Trainer layer sums
statistics across processes (a differentiable all-reduce) before taking the loss of a training batch, and across every
evaluation batch before taking the loss of the evaluation set, whatever the loss.

Statistics with no labelled row (a batch whose labels are all ``ignore_index``, or whose sample weights are all 0)
give every loss a loss of 0 whose gradient is 0 and still reaches the graph, as cross-entropy's ``ignore_index``
treats each ignored row: such a batch contributes nothing, never 0 / 0. ``is_empty`` tells them apart, so a caller
that needs a labelled set (the Trainer's evaluation) can refuse one without labels.

A training step reads nothing from the device: ``statistics(..., validate_args=False)`` checks the labels there
(``device_rows``: rows out of range weigh 0) and records the first label out of range in ``label_fault``, which
``raise_if_label_fault`` turns into the usual one-line error where the caller next synchronises (EASTTrainer: at
logging). With ``validate_args=True`` (the default) the labels are checked at once, with one host read.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from east_hf.core.surrogate import NO_LABEL_FAULT, device_rows, label_error, valid_rows

__all__ = ["BatchMemory", "SetLoss", "finite_vector"]


def finite_vector(what: str, value, size: str = "C") -> torch.Tensor | None:
    """``value`` as a finite float32 vector (a per-class or per-label setting of a loss), or None; ``size`` names its
    length in the one-line error."""
    if value is None:
        return None
    value = torch.as_tensor(value, dtype=torch.float32)
    if value.ndim != 1 or not bool(torch.isfinite(value).all()):
        raise ValueError(f"Expected {what} as a finite ({size},) vector, got {value.tolist()}")
    return value


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


class BatchMemory:
    """``with_memory`` of a surrogate with a ``confusion_memory`` d in [0, 1) and a ``temperature`` (``EASTLoss``,
    ``MultiLabelEASTLoss``; a mixin before ``SetLoss``): a training batch's statistics plus a detached memory of the
    earlier batches', then m <- d * (m + stats.detach()). The statistics are linear in the soft confusion matrix, so
    the memory of its counts is that of the matrices. The memory empties when the temperature (or the statistics'
    shape) changes: a new stage's statistics are another function of the weights. It holds about 1 / (1 - d) batches;
    no gradient flows into earlier ones. d = 0: the batch alone, as the paper."""

    confusion_memory: float = 0.0
    temperature: float
    memory: torch.Tensor | None = None  # the detached, decayed sum of earlier batches' statistics
    _memory_temperature: float | None = None  # the temperature the memory was accumulated at

    def with_memory(self, stats: torch.Tensor) -> torch.Tensor:
        if self.confusion_memory == 0:
            return stats
        memory = self.memory
        if memory is None or self._memory_temperature != self.temperature or memory.shape != stats.shape:
            memory = torch.zeros_like(stats)
        self.memory = self.confusion_memory * (memory + stats.detach())
        self._memory_temperature = self.temperature
        return stats + memory
