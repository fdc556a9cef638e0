"""Non-finite training stopped: a NaN or inf loss, a label out of range, a non-finite gradient norm or parameters.

A training step reads nothing from the device: ``NonFiniteMonitor.flag`` records the first step whose loss is NaN or
inf on the device, and the losses record a label out of range (``SetLoss.label_fault``). ``raise_if_flagged`` reads
both in one sync where the Trainer already synchronises (a training log, an evaluation, a save, the end of
``train``), and raises a one-line error on every process, or on none. ``check_finite_parameters`` refuses to save a
model with NaN or inf parameters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from east_hf.core.set_loss import SetLoss

__all__ = ["NonFiniteMonitor", "check_finite_parameters"]


class NonFiniteMonitor:
    """The non-finite faults of training, recorded on the device and raised in one line.

    Args:
        losses: the losses whose label faults are checked (``EASTTrainer``: ``east_loss`` and ``warm_start_loss``).
        num_processes: processes training together; with more than one, the flags are all-reduced so that every
            process raises, or none (a lone raise would leave the others waiting at a collective).
        device: where the flags are made before any step has flagged a loss (the training device).
    """

    def __init__(self, losses: Sequence[SetLoss], num_processes: int, device: torch.device | str):
        self.losses = tuple(losses)
        self.num_processes = num_processes
        self.device = device
        self._first_step: torch.Tensor | None = (
            None  # device scalar: the first step with a non-finite loss, -1 if none
        )

    def flag(self, loss: torch.Tensor, step: int) -> None:
        """Record ``step`` if it is the first whose ``loss`` is NaN or inf, on the device (no host synchronisation)."""
        if self._first_step is None or self._first_step.device != loss.device:
            self._first_step = torch.full((), -1, dtype=torch.long, device=loss.device)
        bad = ~torch.isfinite(loss.detach())
        first = (self._first_step < 0) & bad
        self._first_step = torch.where(first, step, self._first_step)

    def raise_if_flagged(self) -> None:
        """Stop with a one-line error if any training step so far met a label out of range (recorded by the losses
        on the device, ``SetLoss.label_fault``) or had a non-finite loss (one sync for both)."""
        faults = [loss.label_fault for loss in self.losses]
        if self.num_processes == 1 and self._first_step is None and all(f is None for f in faults):
            return  # no training step yet
        device = self._first_step.device if self._first_step is not None else self.device
        lowest = torch.iinfo(torch.long).min
        none = torch.full((), lowest, dtype=torch.long, device=device)
        step = self._first_step
        # (1 + len(losses),) the first non-finite step negated (so that the maximum is the earliest; int64 min: none)
        # and each loss's largest label out of range (int64 min: none)
        flags = torch.stack(
            [
                none if step is None else torch.where(step >= 0, -step, none),
                *(none if fault is None else fault.to(device) for fault in faults),
            ]
        )
        if self.num_processes > 1:  # every process raises, or none (a lone raise would hang the others)
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        first, *largest = flags.tolist()
        for loss, fault in zip(self.losses, largest):
            loss.raise_if_label_fault(fault)
        if first != lowest:
            raise FloatingPointError(
                f"Expected a finite training loss, got NaN or inf at step {-first}: check the training data for NaN "
                "or inf, or lower the learning rate"
            )

    def check_training_log(self, logs: dict[str, float], step: int) -> None:
        """A training log (the Trainer has just synchronised to read the loss): raise recorded faults, and a
        non-finite gradient norm."""
        self.raise_if_flagged()
        grad_norm = logs.get("grad_norm")
        if isinstance(grad_norm, float) and not math.isfinite(grad_norm):
            raise FloatingPointError(
                f"Expected a finite gradient norm, got {grad_norm} by step {step}: check the "
                "training data for NaN or inf, or lower the learning rate"
            )


def check_finite_parameters(model: nn.Module, step: int) -> None:
    """Refuse (one line) to save a model with NaN or inf parameters: a model that cannot predict is never saved over a
    good one. One sync for all parameters; the name of the first bad one is looked up only when there is one."""
    params = [p.detach() for p in model.parameters() if p.numel()]
    if params and not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
        bad = next(n for n, p in model.named_parameters() if p.numel() and not bool(torch.isfinite(p).all()))
        raise FloatingPointError(
            f"Expected finite model parameters to save, got NaN or inf in {bad!r} at step {step}: nothing was written"
        )
