"""Two losses practitioners reach for on imbalanced and long-tailed data, as set losses (baselines for EAST).

- ``FocalLoss`` (Lin et al., ICCV 2017): cross-entropy scaled by (1 - p_t)^gamma, which lowers the weight of the
  samples the model already gets right; gamma = 2 as the paper. Optional per-class weights (alpha_t).
- ``LDAMLoss`` (Cao et al., NeurIPS 2019): cross-entropy of the logits with a class-dependent margin subtracted from
  the true class, Delta_k proportional to n_k^(-1/4) and the largest ``max_margin`` (0.5, the paper's), so rare
  classes are pushed further from the decision boundary; ``scale`` multiplies the logits. With ``class_weight`` it is
  the deferred re-weighting stage of LDAM-DRW, whose weights are the inverse effective numbers of samples
  (``effective_number_weights``, beta = 0.9999 as the paper).

Both are the mean over the set of a per-sample loss (``east_hf.core.baselines.PerSampleSetLoss``, as
``CrossEntropySetLoss``). Where the deferral happens is the Trainer layer's (``east_hf.hf.config.build``): the plain
LDAM trains until its early stopping, then the re-weighted one (the paper defers at a fixed epoch, 160 of 200).
Pure torch.

The paper's LDAM has ``scale`` s = 30 on a cosine classifier (normalised features and weights, logits in [-1, 1]);
the heads here are plain linear layers whose logits are not bounded, so ``scale`` defaults to 1 and the margins are
in logit units.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from east_hf.core.baselines import PerSampleSetLoss
from east_hf.core.validation import check_range

__all__ = ["FocalLoss", "LDAMLoss", "effective_number_weights", "ldam_margins"]


def ldam_margins(counts: Sequence[float] | torch.Tensor, max_margin: float = 0.5) -> torch.Tensor:
    """LDAM's per-class margins Delta_k = c / n_k^(1/4), c such that the largest is ``max_margin``; a class without
    training samples is floored at half a sample (the largest margin).

    >>> [round(m, 4) for m in ldam_margins([10000, 100]).tolist()]
    [0.1581, 0.5]
    """
    counts = _counts(counts)
    check_range("max_margin", max_margin, 0, float("inf"), "(]")
    margins = counts.clamp(min=0.5).pow(-0.25)
    return margins * (max_margin / margins.max())


def effective_number_weights(counts: Sequence[float] | torch.Tensor, beta: float = 0.9999) -> torch.Tensor:
    """Class weights (1 - beta) / (1 - beta^n_k), the inverse effective number of samples (Cui et al., CVPR 2019),
    normalised to sum to the number of classes: the re-weighting of LDAM-DRW. A class without samples gets 0.

    >>> [round(w, 4) for w in effective_number_weights([10000, 100]).tolist()]
    [0.031, 1.969]
    """
    counts = _counts(counts).double()  # 1 - beta^n loses 4 digits in float32 at beta = 0.9999
    check_range("beta", beta, 0, 1, "[)")
    weights = torch.where(counts > 0, (1.0 - beta) / (1.0 - torch.pow(beta, counts.clamp(min=1.0))), 0.0)
    return (weights * (len(counts) / weights.sum())).float()


def _counts(counts: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """Training samples per class, checked: LDAM's margins and the effective numbers depend on the numbers of samples
    themselves, not only on their ratios, so priors given as fractions are refused."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.ndim != 1 or counts.numel() < 2 or bool((counts < 0).any()) or not counts.sum() > 0:
        raise ValueError(f"Expected class counts as >= 2 non-negative numbers, not all 0, got {counts.tolist()}")
    if not bool((counts == counts.round()).all()):
        raise ValueError(
            f"Expected class counts (numbers of training samples) for LDAM, got fractions {counts.tolist()}: "
            "its margins and re-weighting depend on the counts themselves; pass east_class_priors as counts"
        )
    return counts.float()


class FocalLoss(PerSampleSetLoss):
    """Focal loss, -alpha_t (1 - p_t)^gamma log p_t (Lin et al., 2017), the mean over the set.

    ``gamma`` = 2 (the paper's); ``class_weight`` (C,) plays alpha_t where given (none by default: the paper's alpha
    is for its binary foreground / background split). ``gamma = 0`` is cross-entropy.

    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    >>> torch.isclose(FocalLoss(gamma=0.0)(logits, labels), F.cross_entropy(logits, labels)).item()
    True
    """

    name = "focal"

    def __init__(self, ignore_index: int | None = -100, gamma: float = 2.0, class_weight=None):
        super().__init__(ignore_index, class_weight)
        self.gamma = check_range("gamma", gamma, 0, float("inf"), "[)")

    def extra_repr(self) -> str:
        return f"gamma={self.gamma:g}"

    def _per_sample(self, logits, labels):
        log_p = F.log_softmax(logits, dim=1).gather(1, labels.unsqueeze(1)).squeeze(1)  # (n,) log p_t
        if self.gamma == 0:
            return -log_p
        return -((1.0 - log_p.exp()).clamp(min=0.0) ** self.gamma) * log_p


class LDAMLoss(PerSampleSetLoss):
    """LDAM, cross-entropy of ``scale * (logits - Delta_y e_y)`` (Cao et al., 2019), the mean over the set.

    ``margins`` (C,): ``ldam_margins(training class counts)``; ``class_weight``: the deferred re-weighting
    (``effective_number_weights``), none before the deferral. See the module docstring for ``scale``.

    >>> loss = LDAMLoss(margins=[0.0, 0.0])
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    >>> torch.isclose(loss(logits, labels), F.cross_entropy(logits, labels)).item()
    True
    """

    name = "ldam"

    def __init__(self, margins: Sequence[float] | torch.Tensor, ignore_index: int | None = -100, scale: float = 1.0,
                 class_weight=None):  # fmt: skip
        super().__init__(ignore_index, class_weight)
        margins = torch.as_tensor(margins, dtype=torch.float32)
        if margins.ndim != 1 or not bool(torch.isfinite(margins).all()) or bool((margins < 0).any()):
            raise ValueError(f"Expected margins as a finite, non-negative (C,) vector, got {margins.tolist()}")
        self.register_buffer("margins", margins, persistent=False)
        self.scale = check_range("scale", scale, 0, float("inf"), "(]")

    def extra_repr(self) -> str:
        weighted = ", re-weighted" if self.class_weight is not None else ""
        return f"max_margin={self.margins.max().item():.3g}, scale={self.scale:g}{weighted}"

    def _per_sample(self, logits, labels):
        self._check_width("margins", self.margins, logits.shape[1])
        shifted = logits - F.one_hot(labels, logits.shape[1]).to(logits.dtype) * self.margins.to(logits.device)
        return F.cross_entropy(self.scale * shifted, labels, reduction="none")
