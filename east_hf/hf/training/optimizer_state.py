"""What the annealing callback does to the optimiser and its scheduler: a stage's learning-rate factor, and a
fallback's fresh start. Functions of the objects the Trainer hands its callbacks, wrapped by accelerate or not."""

from __future__ import annotations

from typing import Any

__all__ = ["forget_optimizer_state", "scale_learning_rates"]


def scale_learning_rates(optimizer: Any, lr_scheduler: Any, ratio: float) -> None:
    """Multiply the optimiser's rates by ``ratio``: each parameter group's rate now, and the scheduler's base rates (a
    ``LambdaLR``, as transformers' schedules, sets rate = base * factor(step) at each step), so the factor multiplies
    whatever ``lr_scheduler_type`` does."""
    for group in optimizer.param_groups:
        group["lr"] *= ratio
    scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate's AcceleratedScheduler wraps it
    if getattr(scheduler, "base_lrs", None) is not None:
        scheduler.base_lrs = [rate * ratio for rate in scheduler.base_lrs]


def forget_optimizer_state(optimizer: Any) -> None:
    """Empty the optimiser's per-parameter state (Adam's moments and step counts), as a freshly made optimiser's: the
    next step starts it again. accelerate's ``AcceleratedOptimizer`` wraps the optimiser."""
    getattr(optimizer, "optimizer", optimizer).state.clear()
