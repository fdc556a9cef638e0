"""The paper's baselines as set losses (``east_hf.core.set_loss.SetLoss``), in pure torch: cross-entropy
(``CrossEntropySetLoss``; class-weighted ``wce`` and logit-adjusted ``la`` from the training split's class counts)
and soft Dice (``SoftDiceLoss``).

Soft Dice is written once, as additive statistics of a batch and a loss of those statistics, so the functional
``soft_dice_loss`` and the set loss ``SoftDiceLoss`` (statistics summed over batches and processes first) compute the
same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from east_hf.core.set_loss import SetLoss, finite_vector
from east_hf.core.surrogate import valid_rows

__all__ = [
    "CrossEntropySetLoss",
    "PerSampleSetLoss",
    "SoftDiceLoss",
    "class_weights_from_counts",
    "logit_adjustment_from_counts",
    "soft_dice_from_statistics",
    "soft_dice_loss",
    "soft_dice_statistics",
]


def soft_dice_statistics(
    logits: torch.Tensor, labels: torch.Tensor, sample_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Soft Dice's additive statistics of validated rows (see ``valid_rows``): (3, C) float32, per class k
    sum_n p_nk y_nk, sum_n p_nk^2 and sum_n y_nk (= sum y^2 for one-hot y), p = softmax(logits), each sample weighted
    by ``sample_weight`` if given. logits: (N, C), labels: (N,) in [0, C)."""
    with torch.autocast(logits.device.type, enabled=False):
        p = logits.float().softmax(dim=1)  # (N, C)
        y = torch.nn.functional.one_hot(labels, p.shape[1]).to(p.dtype)  # (N, C)
        if sample_weight is not None:
            w = sample_weight.float().unsqueeze(1)  # (N, 1)
            return torch.stack([(w * p * y).sum(0), (w * p * p).sum(0), (w * y).sum(0)])
        return torch.stack([(p * y).sum(0), (p * p).sum(0), y.sum(0)])  # (3, C)


def soft_dice_from_statistics(stats: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """1 - mean_k Dice_k from ``soft_dice_statistics`` (3, C) (summed over any number of batches)."""
    dice = 2 * stats[0] / (stats[1] + stats[2] + eps)  # (C,)
    return 1.0 - dice.mean()


def soft_dice_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int | None = -100, eps: float = 1e-6):
    """Multiclass soft Dice loss (Milletari et al., 2016), the paper's Dice baseline.

    For each class k, Dice_k = 2 sum_n p_nk y_nk / (sum_n p_nk^2 + sum_n y_nk^2), with p = softmax(logits) and y the
    one-hot labels; the loss is 1 - mean_k Dice_k. logits: (N, C), labels: (N,), rows labelled ``ignore_index``
    dropped. Computed in float32.

    >>> loss = soft_dice_loss(torch.tensor([[9.0, -9.0], [-9.0, 9.0]]), torch.tensor([0, 1]))
    >>> round(loss.item(), 4)
    0.0
    """
    logits, labels, _ = valid_rows(logits, labels, ignore_index=ignore_index, name="logits")
    return soft_dice_from_statistics(soft_dice_statistics(logits, labels), eps)


class PerSampleSetLoss(SetLoss):
    """A mean of per-sample losses as a set loss: statistics (sum of weighted per-sample losses, sum of weights), the
    loss their ratio, so the mean over a whole set is exact when the statistics of its batches are summed first.
    Subclasses define ``_per_sample(logits, labels)`` on float32 logits (autocast off); ``class_weight`` (C,) weighs
    each sample by its true class, ``sample_weight`` by itself."""

    def __init__(self, ignore_index: int | None = -100, class_weight: Sequence[float] | torch.Tensor | None = None):
        super().__init__(ignore_index)
        self.register_buffer("class_weight", finite_vector("class_weight", class_weight), persistent=False)

    def _per_sample(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def _check_width(what: str, value: torch.Tensor | None, num_classes: int) -> None:
        if value is not None and value.shape[0] != num_classes:
            raise ValueError(f"Expected {what} of {num_classes} classes, got {value.shape[0]}")

    def statistics(self, logits, labels, sample_weight=None, *, validate_args=True):
        logits, labels, sample_weight = self._rows(logits, labels, sample_weight, validate_args)
        with torch.autocast(logits.device.type, enabled=False):
            logits = logits.float()
            self._check_width("class_weight", self.class_weight, logits.shape[1])
            per_sample = self._per_sample(logits, labels)  # (n,)
            weight = None if self.class_weight is None else self.class_weight[labels]
            if sample_weight is not None:
                weight = sample_weight.float() if weight is None else weight * sample_weight.float()
            if weight is None:
                return torch.stack(
                    [per_sample.sum(), torch.full((), float(len(per_sample)), device=per_sample.device)]
                )
            return torch.stack([(per_sample * weight).sum(), weight.sum()])

    def loss_from_statistics(self, stats):
        # No labelled row: the sum is 0 as well, and 0 / 1 is a loss of 0 with a zero gradient instead of 0 / 0.
        count = stats[1]
        return stats[0] / torch.where(count == 0, torch.ones_like(count), count)

    def is_empty(self, stats):
        return stats[1] == 0


class CrossEntropySetLoss(PerSampleSetLoss):
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
        super().__init__(ignore_index, class_weight)
        adjustment = finite_vector("logit_adjustment", logit_adjustment)
        self.register_buffer("logit_adjustment", adjustment, persistent=False)

    def _per_sample(self, logits, labels):
        self._check_width("logit_adjustment", self.logit_adjustment, logits.shape[1])
        if self.logit_adjustment is not None:
            logits = logits + self.logit_adjustment
        return F.cross_entropy(logits, labels, reduction="none")


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
    ``soft_dice_statistics`` and ``soft_dice_from_statistics``, so on one batch it equals
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
