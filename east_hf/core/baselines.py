"""Baseline losses used by the paper's comparisons, in pure torch: cross-entropy is torch's own; soft Dice here."""

from __future__ import annotations

import torch

__all__ = ["soft_dice_loss"]


def soft_dice_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int | None = -100, eps: float = 1e-6):
    """Multiclass soft Dice loss (Milletari et al., 2016), the paper's Dice baseline.

    For each class k, Dice_k = 2 sum_n p_nk y_nk / (sum_n p_nk^2 + sum_n y_nk^2), with p = softmax(logits) and y the
    one-hot labels; the loss is 1 - mean_k Dice_k. logits: (N, C), labels: (N,). Computed in float32.

    >>> loss = soft_dice_loss(torch.tensor([[9.0, -9.0], [-9.0, 9.0]]), torch.tensor([0, 1]))
    >>> round(loss.item(), 4)
    0.0
    """
    if logits.ndim != 2:
        raise ValueError(f"Expected logits of shape (N, C), got shape {tuple(logits.shape)}")
    if ignore_index is not None:
        keep = labels != ignore_index
        logits, labels = logits[keep], labels[keep]
    with torch.autocast(logits.device.type, enabled=False):
        p = logits.float().softmax(dim=1)  # (N, C)
        y = torch.nn.functional.one_hot(labels, p.shape[1]).to(p.dtype)  # (N, C)
        dice = 2 * (p * y).sum(0) / ((p * p).sum(0) + y.sum(0) + eps)  # (C,)
        return 1.0 - dice.mean()
