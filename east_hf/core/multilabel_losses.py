"""The multi-label baselines as set losses.

- ``BinaryCrossEntropySetLoss``: binary cross-entropy of every labelled entry, statistics (sum, weight), the loss their
  ratio (``F.binary_cross_entropy_with_logits``'s mean over the labelled entries). With ``pos_weight`` (L,) it is
  ``wce`` (neg_k / pos_k of the training split), with ``logit_adjustment`` (L,) ``la`` (log(pi_k / (1 - pi_k))
  added to the logits inside the loss only; Menon et al., 2021, per label).
- ``AsymmetricLoss``: Ridnik et al., 2021 ("Asymmetric Loss For Multi-Label Classification"), the mean over the
  labelled entries of L+ = (1 - p)^gamma_pos log(p) for a positive and L- = p_m^gamma_neg log(1 - p_m) for a
  negative, p_m = max(p - clip, 0), as the authors' ``AsymmetricLoss`` (its eps clamp of the logarithms included).

The multi-label registry (``east_hf.core.loss.MULTILABEL_LOSSES``, ``build_loss(..., multi_label=True)``) makes them
by the multiclass registry's names (``ce``, ``wce``, ``la``) and ``asl``, from the training split's ``label_priors``.

Pure torch; every loss computed in float32 under autocast (float64 for float64 logits).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from east_hf.core.multilabel import check_label_matrix, multilabel_entries, multilabel_label_error
from east_hf.core.set_loss import SetLoss
from east_hf.core.surrogate import NO_LABEL_FAULT
from east_hf.core.validation import check_range

__all__ = [
    "AsymmetricLoss",
    "BinaryCrossEntropySetLoss",
    "label_logit_adjustment",
    "label_pos_weight",
]

_PRIOR_FLOOR = 1e-6  # a label's positive rate is clipped to [floor, 1 - floor] so its weights stay finite


def _label_vector(what: str, value, like: torch.Tensor | None = None) -> torch.Tensor | None:
    if value is None:
        return None
    value = torch.as_tensor(value, dtype=torch.float32)
    if value.ndim != 1 or not bool(torch.isfinite(value).all()):
        raise ValueError(f"Expected {what} as a finite (L,) vector, got {value.tolist()}")
    return value


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
        self.register_buffer("pos_weight", _label_vector("pos_weight", pos_weight), persistent=False)
        self.register_buffer("logit_adjustment", _label_vector("logit_adjustment", logit_adjustment), persistent=False)

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

    p = sigmoid(z), each logarithm's argument clamped at ``eps`` as the authors' code does. The defaults are the
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
        q = (1 - p + self.clip).clamp(max=1) if self.clip > 0 else 1 - p  # 1 - p_m, the shifted negative probability
        positive = torch.pow(1 - p, self.gamma_pos) * torch.log(p.clamp(min=self.eps))
        negative = torch.pow(1 - q, self.gamma_neg) * torch.log(q.clamp(min=self.eps))
        return -torch.where(y > 0, positive, negative)
