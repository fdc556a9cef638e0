"""EASTConfig: ``TrainingArguments`` plus the surrogate's and the annealing's settings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainingArguments

from east_hf.functional import AVERAGES, METRICS
from east_hf.functional.surrogate import MAX_TEMPERATURE

__all__ = ["EASTConfig", "resolve_beta", "target_metric_key"]

WARM_STARTS = ("none", "ce")
MONITOR_MODES = ("min", "max")


def target_metric_key(metric: str) -> str:
    """The ``compute_metrics`` key of the hard metric a surrogate targets (``"f1"`` is reported as ``"fbeta"``)."""
    return "fbeta" if metric in ("fbeta", "f1") else metric


def resolve_beta(beta: Any, id2label: Mapping[int, str] | None, num_classes: int) -> float | list[float]:
    """Turn a float, a per-class list or a ``{class name: beta}`` mapping into a float or a list of ``num_classes``.

    A mapping gives beta for the named classes (names from ``id2label``, or integer indices); the others get 1.0.
    """
    if isinstance(beta, str):
        beta = json.loads(beta)
    if isinstance(beta, Mapping):
        names = {str(v): int(k) for k, v in (id2label or {}).items()}
        values = [1.0] * num_classes
        for name, value in beta.items():
            if str(name) in names:
                index = names[str(name)]
            elif str(name).lstrip("-").isdigit() and 0 <= int(name) < num_classes:
                index = int(name)
            else:
                raise ValueError(
                    f"Expected east_beta keys among the class names {sorted(names)} or 0..{num_classes - 1}, got {name!r}"
                )
            values[index] = float(value)
        return values
    if isinstance(beta, (list, tuple)):
        if len(beta) != num_classes:
            raise ValueError(
                f"Expected east_beta as a float or {num_classes} per-class values, got {len(beta)} values"
            )
        return [float(b) for b in beta]
    return float(beta)


@dataclass
class EASTConfig(TrainingArguments):
    r"""``TrainingArguments`` for EAST training with ``EASTTrainer``.

    Parameters that control the surrogate:
        east_metric (`str`, defaults to `"fbeta"`): the confusion-matrix metric M to train for; the loss is 1 - M.
        east_beta (`float`, `list[float]` or `dict[str, float]`, defaults to `1.0`): F-beta's beta, one for all
            classes, one per class, or a mapping from class name (``id2label``) to beta, the rest 1.0.
        east_average (`str`, defaults to `"macro"`): macro, weighted, micro or binary.
        east_pos_label (`int`, defaults to `1`): the positive class for ``east_average="binary"``.
        east_threshold_grad (`bool`, defaults to `True`): gradients flow through the dynamic threshold.
        east_sync_across_processes (`bool`, defaults to `True`): all-reduce the soft confusion matrix across
            processes so every process optimises the surrogate of the global batch.
        east_loss (`str`, defaults to `"east"`): ``"east"``, or the baselines ``"ce"`` and ``"dice"`` with
            otherwise identical settings.

    Parameters that control the annealing (paper Sec. 4.3):
        east_temperature (`float`, defaults to `0.2`): T0.
        east_decay (`float`, defaults to `0.9`): r in T_k = T0 * r^k.
        east_patience (`int`, defaults to `5`): evaluations without improvement of the stage monitor before the
            stage ends (fast early stopping within a stage).
        east_stage_patience (`int`, defaults to `3`): temperature decreases without improvement of the anneal
            monitor before training stops.
        east_min_temperature (`float`, defaults to `0.005`): training stops after the stage at this temperature.
        east_max_stages (`int`, defaults to `None`): an upper bound on the number of stages.
        east_restore_best_per_stage (`bool`, defaults to `True`): load the stage's best weights before cooling.
        east_stage_monitor / east_anneal_monitor: the metric keys watched within and across stages; see
            ``TemperatureAnnealingCallback``. Measured: the validation surrogate keeps improving by small amounts
            within a stage (the model grows more confident), so a first stage can take a short budget's whole run;
            ``east_stage_monitor="eval_fbeta"`` (or a positive ``east_threshold``) gives fast stages.
        east_warm_start (`str`, defaults to `"ce"`): ``"ce"`` trains a short cross-entropy stage before EAST;
            ``"none"`` starts EAST from the initial weights (cold start, as the paper). Why a warm start by default:
            a surrogate built on softmax probabilities gives a sample the model has confidently wrong almost no
            gradient (d p / d logit = p (1 - p)), so positives pushed to p ~ 0 early in a cold start stay there.
            Measured (README, "Measured results", 10 seeds): on the binary digits task cold-start EAST left 4.3 of
            115 training positives at p < 0.001 (cross-entropy: none), two epochs of cross-entropy first left 2.3, and
            test F1 went from 0.926 to 0.942 (cross-entropy 0.945); on long-tailed digits, which has no such failure,
            macro F1 stayed level (0.952 cold, 0.950 warm; cross-entropy 0.947). The annealing callback runs the
            warm start: with ``east_annealing=False`` there is none. ``east_loss="ce"`` skips it; ``"dice"`` gets it.
        east_warm_start_epochs (`float`, defaults to `2.0`): length of the warm start in epochs (5 measured the
            same); ``-1``: until the cross-entropy stage's own early stopping, which was worse on the binary task
            (0.926) and on long-tailed digits never stopped within 40 epochs (the whole run was cross-entropy).
        east_warm_start_steps (`int`, defaults to `None`): length of the warm start in optimiser steps; overrides
            ``east_warm_start_epochs``.
    """

    # --- the surrogate ---
    east_loss: str = field(
        default="east", metadata={"help": "Loss: 'east' (the surrogate), or the baselines 'ce' and 'dice'."}
    )
    east_metric: str = field(default="fbeta", metadata={"help": f"Metric to train for, one of {sorted(METRICS)}."})
    east_beta: Any = field(
        default=1.0,
        metadata={
            "help": "F-beta's beta: a float, a per-class list, or a JSON mapping {class name: beta} (others 1.0)."
        },
    )
    east_average: str = field(default="macro", metadata={"help": f"Averaging over classes, one of {AVERAGES}."})
    east_pos_label: int = field(default=1, metadata={"help": "Positive class index for east_average='binary'."})
    east_threshold_grad: bool = field(
        default=True, metadata={"help": "Let gradients flow through the dynamic threshold."}
    )
    east_sync_across_processes: bool = field(
        default=True,
        metadata={"help": "All-reduce the soft confusion matrix across processes (surrogate of the global batch)."},
    )
    # --- the annealing ---
    east_temperature: float = field(default=0.2, metadata={"help": "Initial temperature T0 in (0, 0.4)."})
    east_decay: float = field(
        default=0.9, metadata={"help": "Decay rate r of T_k = T0 * r^k, in (0, 1); the paper uses 0.8 or 0.9."}
    )
    east_patience: int = field(default=5, metadata={"help": "Evaluations without improvement before a stage ends."})
    east_stage_patience: int = field(
        default=3, metadata={"help": "Temperature decreases without improvement before stopping."}
    )
    east_min_temperature: float = field(default=0.005, metadata={"help": "Stop after the stage at this temperature."})
    east_max_stages: int | None = field(default=None, metadata={"help": "Maximum number of temperature stages."})
    east_threshold: float = field(default=0.0, metadata={"help": "Minimum change that counts as an improvement."})
    east_restore_best_per_stage: bool = field(
        default=True, metadata={"help": "Restore the stage's best weights before lowering the temperature."}
    )
    east_stage_monitor: str = field(
        default="eval_loss",
        metadata={"help": "Key watched within a stage (the surrogate at the stage's temperature)."},
    )
    east_anneal_monitor: str | None = field(
        default=None,
        metadata={"help": "Key watched across stages; default: the hard target metric, e.g. 'eval_fbeta'."},
    )
    east_warm_start: str = field(
        default="ce", metadata={"help": f"Warm start stage before EAST, one of {WARM_STARTS} ('none': cold start)."}
    )
    east_warm_start_epochs: float = field(
        default=2.0,
        metadata={"help": "Length of the warm start in epochs; -1: until its own early stopping."},
    )
    east_warm_start_steps: int | None = field(
        default=None,
        metadata={"help": "Length of the warm start in optimiser steps; overrides east_warm_start_epochs."},
    )
    east_annealing: bool = field(default=True, metadata={"help": "Install the temperature annealing callback."})
    # The annealing state (stage, temperature, counters) lives in a stateful callback: resume it by default.
    restore_callback_states_from_checkpoint: bool = field(
        default=True, metadata={"help": "Restore the annealing callback's state when resuming from a checkpoint."}
    )

    def __post_init__(self):
        self._validate_east()
        super().__post_init__()

    def _validate_east(self) -> None:
        if self.east_loss not in ("east", "ce", "dice"):
            raise ValueError(f"Expected east_loss in ('east', 'ce', 'dice'), got {self.east_loss!r}")
        if self.east_metric not in METRICS:
            raise ValueError(f"Expected east_metric in {sorted(METRICS)}, got {self.east_metric!r}")
        if self.east_average not in AVERAGES:
            raise ValueError(f"Expected east_average in {AVERAGES}, got {self.east_average!r}")
        if isinstance(self.east_beta, str):
            try:
                self.east_beta = json.loads(self.east_beta)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"Expected east_beta as a number, a list or a JSON mapping, got {self.east_beta!r}"
                ) from e
        betas = (
            self.east_beta.values()
            if isinstance(self.east_beta, Mapping)
            else (self.east_beta if isinstance(self.east_beta, (list, tuple)) else [self.east_beta])
        )
        for b in betas:
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not b > 0:
                raise ValueError(f"Expected every east_beta > 0, got {self.east_beta!r}")
        if not 0 < self.east_temperature < MAX_TEMPERATURE:
            raise ValueError(f"Expected east_temperature in (0, 0.4), got {self.east_temperature}")
        if not 0 < self.east_decay < 1:
            raise ValueError(f"Expected east_decay in (0, 1), got {self.east_decay}")
        if not 0 < self.east_min_temperature <= self.east_temperature:
            raise ValueError(
                f"Expected east_min_temperature in (0, east_temperature={self.east_temperature}], got {self.east_min_temperature}"
            )
        for name in ("east_patience", "east_stage_patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"Expected {name} >= 1, got {getattr(self, name)}")
        if self.east_max_stages is not None and self.east_max_stages < 1:
            raise ValueError(f"Expected east_max_stages >= 1 or None, got {self.east_max_stages}")
        if self.east_warm_start not in WARM_STARTS:
            raise ValueError(f"Expected east_warm_start in {WARM_STARTS}, got {self.east_warm_start!r}")
        epochs = self.east_warm_start_epochs
        if isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or not (epochs > 0 or epochs == -1):
            raise ValueError(f"Expected east_warm_start_epochs > 0 or -1 (its own early stopping), got {epochs!r}")
        if self.east_warm_start_steps is not None and self.east_warm_start_steps < 1:
            raise ValueError(f"Expected east_warm_start_steps >= 1 or None, got {self.east_warm_start_steps}")

    def __getstate__(self):
        # transformers pickles the arguments into training_args.bin beside every checkpoint and pushes that file to the
        # Hub; never let the token travel with it (the live object keeps it for the push itself).
        state = self.__dict__.copy()
        state["hub_token"] = None
        return state

    @property
    def east_target_key(self) -> str:
        """The hard metric key (without the ``eval_`` prefix) of the metric the surrogate targets."""
        return target_metric_key(self.east_metric)
