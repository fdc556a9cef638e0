"""EASTLoss: 1 - M(C_T), the EAST surrogate of a confusion-matrix metric M as an ``nn.Module``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from east_hf.functional import METRICS, beta_vector, check_temperature
from east_hf.functional.fused import soft_confusion_from_logits
from east_hf.functional.metrics import AVERAGES
from east_hf.functional.surrogate import _check_labels, _check_weight, _select

__all__ = ["EASTLoss"]


class EASTLoss(nn.Module):
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

    The surrogate is computed in float32 even under bf16/fp16 autocast. The loss of a batch is a function of the
    whole batch (not a mean over samples); see ``confusion_matrix`` and ``loss_from_confusion`` to sum soft confusion
    matrices over processes or evaluation batches before applying the metric.

    >>> loss_fn = EASTLoss(metric="fbeta", beta=1.0, temperature=0.2)
    >>> logits = torch.tensor([[4.0, 0.0], [0.0, 4.0], [3.0, 0.0]], requires_grad=True)
    >>> loss = loss_fn(logits, torch.tensor([0, 1, 1]))
    >>> loss.backward()
    >>> 0.0 < loss.item() < 1.0, logits.grad.shape
    (True, torch.Size([3, 2]))
    """

    def __init__(
        self,
        metric: str | Callable[[torch.Tensor], torch.Tensor] = "fbeta",
        beta: float | Sequence[float] = 1.0,
        average: str = "macro",
        pos_label: int = 1,
        temperature: float = 0.2,
        num_classes: int | None = None,
        threshold_grad: bool = True,
        ignore_index: int | None = -100,
        zero_division: float = 0.0,
    ):
        super().__init__()
        if isinstance(metric, str):
            if metric not in METRICS:
                raise ValueError(f"Expected metric in {sorted(METRICS)} or a callable, got {metric!r}")
        elif not callable(metric):
            raise TypeError(f"Expected metric as a name or a callable (C, C) -> scalar, got {type(metric).__name__}")
        if average not in AVERAGES:
            raise ValueError(f"Expected average in {AVERAGES}, got {average!r}")
        if num_classes is not None and (
            isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2
        ):
            raise ValueError(f"Expected num_classes as an int >= 2, got {num_classes!r}")
        if num_classes is not None:
            beta_vector(beta, num_classes, torch.empty(0))  # fail now, not at the first step
            if average == "binary" and not 0 <= pos_label < num_classes:
                raise ValueError(f"Expected pos_label in [0, {num_classes - 1}], got {pos_label}")
        else:
            beta_vector(beta, 1 if isinstance(beta, (int, float)) else len(beta), torch.empty(0))
        self.metric = metric
        self.beta = beta
        self.average = average
        self.pos_label = pos_label
        self.temperature = check_temperature(temperature)
        self.num_classes = num_classes
        self.threshold_grad = threshold_grad
        self.ignore_index = ignore_index
        self.zero_division = zero_division

    @property
    def metric_name(self) -> str:
        return self.metric if isinstance(self.metric, str) else getattr(self.metric, "__name__", "custom")

    def extra_repr(self) -> str:
        return f"metric={self.metric_name!r}, beta={self.beta}, average={self.average!r}, temperature={self.temperature:.4g}"

    def confusion_matrix(
        self, logits: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The soft confusion matrix C_T of a batch: logits (N, C), labels (N,) -> (C, C) float32."""
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
        valid = _check_labels(labels, logits.shape[0], C, self.ignore_index)
        logits, labels, sample_weight = _select(valid, logits, labels, _check_weight(sample_weight, logits.shape[0]))
        temperature = check_temperature(self.temperature)
        return soft_confusion_from_logits(logits, labels, sample_weight, temperature, self.threshold_grad)

    def _beta_tensor(self, confmat: torch.Tensor) -> torch.Tensor:
        """The validated (C,) beta tensor, built once per (beta, C, dtype, device) and reused on every step."""
        key = (repr(self.beta), confmat.shape[0], confmat.dtype, confmat.device)
        if getattr(self, "_beta_key", None) != key:
            self._beta_cache = beta_vector(self.beta, confmat.shape[0], confmat)
            self._beta_key = key
        return self._beta_cache

    def metric_value(self, confmat: torch.Tensor) -> torch.Tensor:
        """M(confmat): the configured metric of a (C, C) confusion matrix (soft or hard)."""
        if callable(self.metric):
            return self.metric(confmat)
        kwargs = {}
        if self.metric in ("fbeta", "f1"):
            kwargs["beta"] = self._beta_tensor(confmat)
        if self.metric in ("fbeta", "f1", "precision", "recall"):
            kwargs.update(average=self.average, pos_label=self.pos_label, zero_division=self.zero_division)
        return METRICS[self.metric](confmat, **kwargs)

    def loss_from_confusion(self, confmat: torch.Tensor) -> torch.Tensor:
        """1 - M(confmat)."""
        return 1.0 - self.metric_value(confmat)

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        loss = self.loss_from_confusion(self.confusion_matrix(logits, labels, sample_weight))
        if not bool(torch.isfinite(loss)):  # one scalar check; diagnose the cause only when it fails
            if not bool(torch.isfinite(logits).all()):
                raise ValueError(f"Expected finite logits, got NaN or inf in logits of shape {tuple(logits.shape)}")
            raise FloatingPointError(f"EAST loss is not finite ({loss.item()}) for finite logits; please report this")
        return loss
