"""How a training run ended, in one sentence: on the annealing criterion, on a baseline's early stopping, after its
whole budget, or stopped by another callback, and whether it fell back to plain cross-entropy on the way.

The sentence is built here only, from the Trainer's ``TrainerState`` and ``TrainingArguments`` and the annealing
callback's schedule (``AnnealingSchedule.finished``, ``stop_reason``, ``fell_back``: all in the callback's saved
state); east-train prints it at the end of a run and the model card carries it.

>>> from types import SimpleNamespace
>>> from transformers import TrainerState
>>> from east_hf.hf.training.callbacks import TemperatureAnnealingCallback
>>> callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=1)
>>> for step, (loss, f1) in enumerate([(1.0, 0.5), (1.1, 0.4), (1.0, 0.4), (1.1, 0.4)], start=1):
...     _ = callback.schedule.update(loss, f1, step=step)
>>> state = TrainerState(global_step=4, max_steps=16, epoch=2.0)
>>> print(training_ended(state, SimpleNamespace(max_steps=-1, num_train_epochs=8), callback))
Training ended on the annealing criterion at epoch 2 of 8, stage 1, T = 0.1: 1 stage without a better validation fbeta
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from east_hf.hf.training.callbacks import TemperatureAnnealingCallback

__all__ = ["plural", "training_ended"]


def plural(count: float, noun: str) -> str:
    """``"1 epoch"``, ``"0.5 epochs"``, ``"8 epochs"``: a count and its noun, the count as ``:g`` writes it."""
    return f"{count:g} {noun}" + ("" if count == 1 else "s")


def _validation(key: str) -> str:
    """A metric key as prose: ``"eval_loss"`` -> ``"validation loss"``."""
    return "validation " + key.removeprefix("eval_")


def _budget(args: Any) -> str:
    """The budget as the user set it: ``"max_steps=300"`` or ``"8 epochs"``."""
    return f"max_steps={args.max_steps}" if args.max_steps > 0 else plural(args.num_train_epochs, "epoch")


def _when(state: Any, args: Any) -> str:
    """Where training stopped against its budget: ``"at epoch 6.4 of 8"``, or ``"at step 52 of 300 (epoch 3.2)"``."""
    epoch = f"{round(state.epoch or 0.0, 1):g}"
    if args.max_steps > 0:
        return f"at step {state.global_step} of {args.max_steps} (epoch {epoch})"
    return f"at epoch {epoch} of {args.num_train_epochs:g}"


def _criterion(annealing: TemperatureAnnealingCallback) -> str:
    """Why the schedule stopped (its ``stop_reason``), in words."""
    schedule = annealing.schedule
    if schedule.stop_reason == "stage_patience":
        stages = plural(schedule.stage_patience, "stage")
        return f"{stages} without a better {_validation(annealing.anneal_monitor)}"
    if schedule.stop_reason == "min_temperature":
        return f"the temperature reached its minimum ({schedule.min_temperature:g})"
    if schedule.stop_reason == "max_stages":
        return f"its last stage of max_stages={schedule.max_stages} ended"
    return str(schedule.stop_reason)


def _early_stopping(annealing: TemperatureAnnealingCallback) -> bool:
    """Whether the schedule is one stage of early stopping (a baseline's, or ``max_stages=1``), not annealing."""
    return not annealing.reports_temperature or annealing.schedule.max_stages == 1


def _where(annealing: TemperatureAnnealingCallback) -> str:
    """The stage training was in, for a run that the budget ended: ``" in stage 2 (T = 0.05)"``, ``""`` for a
    baseline's only stage."""
    schedule = annealing.schedule
    if schedule.in_warm_start:
        return " in the plain cross-entropy it fell back to" if schedule.fell_back else " in the warm start"
    return f" in stage {schedule.stage} (T = {schedule.temperature:.3g})" if annealing.reports_temperature else ""


def _fell_back(annealing: TemperatureAnnealingCallback) -> str:
    """How the run fell back to plain cross-entropy: where a collapsed warm start ended (``restarted_at``), or where
    the annealing would have stopped."""
    if annealing.restarted_at is not None:
        return (
            f"after starting over at step {annealing.restarted_at} from the initial weights with plain cross-entropy "
            "(east_ce_fallback: the warm start ended predicting one class, its network having lost its input)"
        )
    return (
        "after falling back to plain cross-entropy (east_ce_fallback: every validation evaluation before had "
        "predicted one class)"
    )


def training_ended(state: Any, args: Any, annealing: TemperatureAnnealingCallback | None = None) -> str:
    """The sentence that says how training ended, starting ``"Training ended"``.

    state: the Trainer's ``TrainerState`` after ``train`` (``global_step``, ``max_steps``, ``epoch``).
    args: its ``TrainingArguments`` (``max_steps``, ``num_train_epochs``: the budget as set).
    annealing: the ``TemperatureAnnealingCallback`` that trained (``EASTTrainer.annealing``), or None.

    "Training ended on the annealing criterion at epoch 6.4 of 8, stage 2, T = 0.05: 2 stages without a better
    validation fbeta", "Training ended early at epoch 3.7 of 30: 3 evaluations without a better validation loss" (a
    baseline's early stopping), "Training ended after its whole budget (8 epochs) in stage 2 (T = 0.05), before the
    annealing criterion"; a run that fell back to plain cross-entropy says so after the reason.
    """
    schedule = annealing.schedule if annealing is not None else None
    fell_back = f", {_fell_back(annealing)}" if schedule is not None and schedule.fell_back else ""
    if schedule is not None and schedule.finished:
        if not annealing.reports_temperature:
            evaluations = plural(schedule.patience, "evaluation")
            reason = f"{evaluations} without a better {_validation(annealing.stage_monitor)}"
            return f"Training ended early {_when(state, args)}: {reason}{fell_back}"
        where = f"{_when(state, args)}, stage {schedule.stage}, T = {schedule.temperature:.3g}"
        return f"Training ended on the annealing criterion {where}: {_criterion(annealing)}{fell_back}"
    spent = bool(state.max_steps) and state.global_step >= state.max_steps
    if schedule is None:
        if spent:
            return f"Training ended after its whole budget ({_budget(args)})"
        return f"Training ended {_when(state, args)}, before its budget: a callback stopped it"
    criterion = "its early stopping" if _early_stopping(annealing) else "the annealing criterion"
    before = f"{_where(annealing)}, before {criterion}"
    if spent:
        return f"Training ended after its whole budget ({_budget(args)}){before}{fell_back}"
    return f"Training ended {_when(state, args)}{before}: a callback stopped it{fell_back}"
