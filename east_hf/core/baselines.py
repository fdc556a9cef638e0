"""Baseline losses used by the paper's comparisons, in pure torch: cross-entropy is torch's own; soft Dice here.

Soft Dice is written once, as additive statistics of a batch and a loss of those statistics, so the functional
``soft_dice_loss`` and the set loss ``east_hf.core.loss.SoftDiceLoss`` (statistics summed over batches and
processes first) compute the same thing.
"""

from __future__ import annotations

import torch

from east_hf.core.surrogate import valid_rows

__all__ = ["soft_dice_from_statistics", "soft_dice_loss", "soft_dice_statistics"]


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
