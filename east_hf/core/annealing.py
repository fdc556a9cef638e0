r"""The EAST annealing schedule (paper Sec. 4.3) as a pure state machine: no Trainer, no transformers.

The paper cools geometrically, T_k = T0 * r^k (``temperature_at``), trains each stage k at T_k until fast early
stopping, lowers the temperature, resets the early-stopping counter, and stops when the validation value stops
improving across a number of temperature decreases. ``AnnealingSchedule`` owns that state; it is fed one
validation result per evaluation and answers with a ``Decision``. ``TemperatureAnnealingCallback``
(``east_hf.hf.training.callbacks``) is the thin Trainer layer that applies it; ``east_hf.core.monitor_keys`` names the
metric keys it watches.

Two monitors, because two questions are asked:

- Within a stage (``stage_mode="min"``): the validation surrogate at the stage's own temperature, as in the paper.
  It is the quantity being optimised, and within a stage it is one fixed function of the weights.
- Across stages (``anneal_mode="max"``): the hard target metric by default (e.g. macro F1). Surrogate values at two
  temperatures are values of two different functions, so "the loss went down after cooling" says little; the hard
  metric is comparable everywhere. Pass the surrogate as ``anneal_value`` (and ``anneal_mode="min"``) to follow
  the paper to the letter.

A stage's anneal value is the best one observed during the stage (what ``load_best_model_at_end`` would keep).
Within a stage an improvement must beat the stage's best value by more than ``threshold``, by default a fraction
(1 %) of it (``threshold_mode="rel"``, as ``torch.optim.lr_scheduler.ReduceLROnPlateau``), or an absolute amount
(``"abs"``); a tie is not an improvement. The relative default ends a stage whose validation surrogate only creeps
(the model growing more confident by ever smaller amounts), which the paper's absolute 0 rarely does within an
ordinary budget. A relative threshold needs a validation loss that levels off above 0: where the validation set
becomes perfectly separated its loss falls geometrically towards 0, every relative step stays large, and only an
absolute threshold ends the stage (the example below). Across stages, a stage's best anneal value must beat the best so
far by more than ``anneal_threshold`` (absolute, default 0).

Train a linear classifier with the F1 surrogate, plain PyTorch (stop on ``Decision.STOP``, cool on the rest):

>>> import torch
>>> from east_hf import EASTLoss, fbeta, hard_confusion_matrix
>>> from east_hf.core.annealing import AnnealingSchedule, Decision
>>> _ = torch.manual_seed(0)
>>> x, x_val = torch.randn(256, 4), torch.randn(128, 4)
>>> y, y_val = (x[:, 0] + x[:, 1] > 0).long(), (x_val[:, 0] + x_val[:, 1] > 0).long()
>>> model = torch.nn.Linear(4, 2)
>>> opt = torch.optim.Adam(model.parameters(), lr=0.1)
>>> schedule = AnnealingSchedule(  # absolute: this validation set is separable, its loss converges to 0
...     temperature=0.2, decay=0.5, patience=2, stage_patience=2, threshold=1e-3, threshold_mode="abs"
... )
>>> loss_fn = EASTLoss("fbeta", temperature=schedule.temperature)
>>> for epoch in range(200):
...     opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
...     with torch.no_grad():
...         val_loss = loss_fn(model(x_val), y_val).item()  # the surrogate at this stage's temperature
...         val_f1 = fbeta(hard_confusion_matrix(model(x_val), y_val)).item()  # the hard metric, across stages
...     if schedule.update(val_loss, val_f1, step=epoch) is Decision.STOP:
...         break
...     loss_fn.temperature = schedule.temperature  # lowered on Decision.NEXT_STAGE
>>> schedule.finished, schedule.stop_reason, schedule.stage > 0, schedule.best_anneal > 0.95
(True, 'stage_patience', True, True)
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

from east_hf.core.validation import check_choice, check_int, check_range, check_temperature

__all__ = [
    "DEFAULT_DECAY",
    "DEFAULT_TEMPERATURE",
    "MODES",
    "WARM_STARTS",
    "AnnealingSchedule",
    "Decision",
    "temperature_at",
]

# The defaults shared by several signatures (``temperature_at``, ``AnnealingSchedule``, ``EASTLoss``); every other
# default is written once, in the signature of the object that uses it.
DEFAULT_TEMPERATURE = 0.2  # T0 as the paper (matches the approximation of Tsoi et al. 2022)
DEFAULT_DECAY = 0.9  # r, the gentler of the paper's {0.8, 0.9}

MODES = ("min", "max")
THRESHOLD_MODES = ("abs", "rel")
WARM_STARTS = ("none", "ce")  # "ce": a cross-entropy stage before EAST's first
WARM_START_STAGE = -1
_STATE_KEYS = (
    "stage",
    "stage_best",
    "stage_best_step",
    "bad_evaluations",
    "stage_best_anneal",
    "best_anneal",
    "best_anneal_stage",
    "stages_without_improvement",
    "finished",
    "stop_reason",
    "recent_anneal",
    "fell_back",
)


def temperature_at(stage: int, temperature: float = DEFAULT_TEMPERATURE, decay: float = DEFAULT_DECAY) -> float:
    """T_k = T0 * r^k, the geometric cooling of paper Sec. 4.3. Stage -1 (a warm start) is at T0.

    >>> [round(temperature_at(k, 0.2, 0.5), 4) for k in (-1, 0, 1, 2)]
    [0.2, 0.2, 0.1, 0.05]
    """
    return temperature * decay ** max(stage, 0)


class Decision(str, Enum):
    """What an evaluation means for training: keep going, new stage best, cool down, or stop."""

    CONTINUE = "continue"  # no improvement of the stage monitor, patience left
    IMPROVED = "improved"  # a new best of the stage monitor: keep these weights
    NEXT_STAGE = "next_stage"  # the stage ended; the temperature is lowered (or the warm start ended)
    STOP = "stop"  # annealing is over


def _improves(value: float, best: float | None, mode: str, threshold: float, relative: bool = False) -> bool:
    """True if ``value`` beats ``best`` by more than ``threshold`` (times ``|best|`` if ``relative``) in ``mode``.
    NaN never improves; ties never do."""
    if value is None or math.isnan(value):
        return False
    if best is None:
        return True
    margin = threshold * abs(best) if relative else threshold
    return value < best - margin if mode == "min" else value > best + margin


def _better(value: float | None, best: float | None, mode: str) -> float | None:
    return value if _improves(value, best, mode, 0.0) else best


def _as_float(value: Any, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Expected {name} as a real number, got {type(value).__name__}: {value!r}") from e


def _check_warm_start(warm_start: str | bool, steps: int | None, epochs: float | None) -> str:
    """The warm start's name (``True`` / ``False`` stand for ``"ce"`` / ``"none"``), its length checked."""
    if steps is not None:
        check_int("warm_start_steps", steps)
    if isinstance(warm_start, bool):
        warm_start = "ce" if warm_start else "none"
    check_choice("warm_start", warm_start, WARM_STARTS)
    if epochs is not None:
        check_range("warm_start_epochs", epochs, 0, math.inf, "(]")
    return warm_start


class AnnealingSchedule:
    """EAST's annealing state machine: stages of fast early stopping at T_k = T0 * r^k.

    Args:
        temperature: T0 in (0, 0.4); ``DEFAULT_TEMPERATURE`` = 0.2 as the paper (matches the approximation of
            Tsoi et al. 2022).
        decay: r in (0, 1); the paper searched {0.8, 0.9}, ``DEFAULT_DECAY`` = 0.9 is the gentler.
        patience: evaluations without improvement of the stage monitor before a stage ends (fast early stopping).
        stage_patience: finished stages in a row whose best anneal value did not improve on the best so far
            before annealing stops (the paper's "stops improving across a number of temperature decreases").
        min_temperature: annealing stops after the stage whose temperature is at or below it; a guard rail
            (``stage_patience`` usually stops first): the default 0.005 ends at stage 36 at most at r = 0.9.
        max_stages: at most this many EAST stages (the warm start not counted); None for no bound.
        threshold: an improvement of the stage monitor must exceed it (within a stage and in the warm start).
        threshold_mode: ``"rel"`` (default): the threshold is a fraction of the best value so far, as
            ``ReduceLROnPlateau``; ``"abs"``: an absolute change, as ``EarlyStoppingCallback``. The default 1e-2
            relative ends a stage once its surrogate improves by less than 1 % over ``patience`` evaluations; the
            paper's letter is ``threshold=0.0, threshold_mode="abs"``.
        anneal_threshold: an absolute amount a stage's best anneal value must beat the best so far by (default 0:
            any strict improvement of the hard metric counts).
        stage_mode: ``"min"`` (default, the surrogate loss) or ``"max"``.
        anneal_mode: ``"max"`` (default, a hard metric such as F1) or ``"min"`` (the surrogate).
        warm_start: ``"none"`` (default) or ``"ce"``: begin with stage -1, trained with cross-entropy by the Trainer
            layer; it does not count as a stage. ``True`` / ``False`` stand for ``"ce"`` / ``"none"``.
        warm_start_steps: the warm start ends at the first evaluation at or after this step; None (default): it
            ends after ``warm_start_epochs`` if given (the Trainer layer turns them into steps,
            ``set_steps_per_epoch``) else on its own early stopping (``patience``).
        warm_start_epochs: length of the warm start in epochs (> 0), used when ``warm_start_steps`` is None.
        ce_weight: w0 of an annealed cross-entropy weight, w_k = w0 * ce_weight_decay^k in EAST stage k, that the
            Trainer layer adds to EAST's loss (``MixedSetLoss``); 0 (default): EAST alone, as the paper.
        ce_weight_decay: the factor in [0, 1] the cross-entropy weight is multiplied by at each temperature decrease.
        lr_decay: the factor in (0, 1] on the learning rate at each temperature decrease, lr_k = lr * lr_decay^k in
            EAST stage k (``lr_scale``, applied by the Trainer layer); 1 (default): one rate, as the paper. Why: as T
            falls the gradient comes from the few samples near the threshold, and steps of one size move the
            decision point further from batch to batch.
        select_window: how many evaluations the across-stage value is the mean of: the anneal value of an evaluation
            is replaced by the mean of the last ``select_window`` anneal values (``selection_value``), which is what
            the stages' bests are judged on and what the best model is chosen by. 1 (default): each evaluation's own
            value. Why: a hard metric over a few dozen validation positives jumps from epoch to epoch, and the best
            single evaluation is partly the best jump; a mean over neighbouring evaluations favours a model whose
            neighbourhood scores well. The window spans stage boundaries (a stage starts from the weights the last
            one ended on or its best).

    The warm start's best anneal value is the reference the first EAST stage must beat.

    State (read it, do not set it): ``stage``, ``temperature`` and ``ce_weight`` (the stage's values), ``stage_best`` /
    ``stage_best_step`` / ``bad_evaluations`` (within the stage), ``stage_best_anneal``, ``best_anneal`` /
    ``best_anneal_stage`` / ``stages_without_improvement`` (across stages), ``finished`` and ``stop_reason``
    (``"stage_patience"``, ``"min_temperature"`` or ``"max_stages"``), ``fell_back`` (``fall_back`` ran).
    ``last_improved`` tells whether the last update was a new stage best, also when it ended the stage.
    """

    def __init__(
        self,
        temperature: float = DEFAULT_TEMPERATURE,
        decay: float = DEFAULT_DECAY,
        patience: int = 5,
        stage_patience: int = 3,
        min_temperature: float = 0.005,
        max_stages: int | None = None,
        threshold: float = 1e-2,
        threshold_mode: str = "rel",
        anneal_threshold: float = 0.0,
        stage_mode: str = "min",
        anneal_mode: str = "max",
        warm_start: str | bool = "none",
        warm_start_steps: int | None = None,
        warm_start_epochs: float | None = None,
        ce_weight: float = 0.0,
        ce_weight_decay: float = 0.5,
        lr_decay: float = 1.0,
        select_window: int = 1,
    ):
        self.temperature0 = check_temperature(temperature)
        check_range("decay", decay, 0, 1, "()")
        check_range("min_temperature", min_temperature, 0, self.temperature0, "(]")
        check_int("patience", patience)
        check_int("stage_patience", stage_patience)
        if max_stages is not None:
            check_int("max_stages", max_stages)
        check_range("threshold", threshold, 0, math.inf)
        check_range("anneal_threshold", anneal_threshold, 0, math.inf)
        check_choice("threshold_mode", threshold_mode, THRESHOLD_MODES)
        check_choice("stage_mode", stage_mode, MODES)
        check_choice("anneal_mode", anneal_mode, MODES)
        warm_start = _check_warm_start(warm_start, warm_start_steps, warm_start_epochs)
        check_range("ce_weight", ce_weight, 0, math.inf)
        check_range("ce_weight_decay", ce_weight_decay, 0, 1)
        check_range("lr_decay", lr_decay, 0, 1, "(]")
        check_int("select_window", select_window)
        self.select_window = select_window
        self.decay = float(decay)
        self.ce_weight0 = float(ce_weight)
        self.ce_weight_decay = float(ce_weight_decay)
        self.lr_decay = float(lr_decay)
        self.patience = patience
        self.stage_patience = stage_patience
        self.min_temperature = float(min_temperature)
        self.max_stages = max_stages
        self.threshold = float(threshold)
        self.threshold_mode = threshold_mode
        self.anneal_threshold = float(anneal_threshold)
        self.stage_mode = stage_mode
        self.anneal_mode = anneal_mode
        self.warm_start = warm_start
        self.warm_start_steps = warm_start_steps
        self.warm_start_epochs = None if warm_start == "none" or warm_start_steps is not None else warm_start_epochs
        self.last_improved = False
        self.reset()

    def settings(self) -> dict[str, Any]:
        """The constructor's arguments as a JSON-serialisable dict: ``AnnealingSchedule(**settings())`` is a fresh
        schedule with the same settings (a length fixed by ``set_steps_per_epoch`` stays in epochs)."""
        return {
            "temperature": self.temperature0,
            "decay": self.decay,
            "patience": self.patience,
            "stage_patience": self.stage_patience,
            "min_temperature": self.min_temperature,
            "max_stages": self.max_stages,
            "threshold": self.threshold,
            "threshold_mode": self.threshold_mode,
            "anneal_threshold": self.anneal_threshold,
            "stage_mode": self.stage_mode,
            "anneal_mode": self.anneal_mode,
            "warm_start": self.warm_start,
            "warm_start_steps": None if self.warm_start_epochs is not None else self.warm_start_steps,
            "warm_start_epochs": self.warm_start_epochs,
            "ce_weight": self.ce_weight0,
            "ce_weight_decay": self.ce_weight_decay,
            "lr_decay": self.lr_decay,
            "select_window": self.select_window,
        }

    @property
    def has_warm_start(self) -> bool:
        return self.warm_start != "none"

    def set_steps_per_epoch(self, steps: int | None) -> None:
        """Turn ``warm_start_epochs`` into ``warm_start_steps`` (at least 1) once the length of an epoch is known."""
        if self.warm_start_epochs is None:
            return
        if steps is None or steps < 1:
            raise ValueError(
                f"Expected a training data loader with a length for warm_start_epochs={self.warm_start_epochs}, got "
                "none; set the warm start's length in steps instead"
            )
        self.warm_start_steps = max(1, math.ceil(self.warm_start_epochs * steps))

    def reset(self) -> None:
        """Back to the first stage (the warm start if any), all counters cleared."""
        self.stage = WARM_START_STAGE if self.has_warm_start else 0
        self.best_anneal: float | None = None
        self.best_anneal_stage: int | None = None
        self.stages_without_improvement = 0
        self.finished = False
        self.stop_reason: str | None = None
        self.recent_anneal: list[float] = []  # the last select_window anneal values, oldest first
        self.fell_back = False
        self._reset_stage()

    def _reset_stage(self) -> None:
        self.stage_best: float | None = None
        self.stage_best_step: int | None = None
        self.bad_evaluations = 0
        self.stage_best_anneal: float | None = None

    @property
    def temperature(self) -> float:
        """The temperature of the current stage, T0 * r^stage (T0 during a warm start)."""
        return temperature_at(self.stage, self.temperature0, self.decay)

    @property
    def ce_weight(self) -> float:
        """The cross-entropy weight of the current EAST stage, w0 * ce_weight_decay^stage (w0 during a warm start,
        which trains cross-entropy alone)."""
        return self.ce_weight0 * self.ce_weight_decay ** max(self.stage, 0) if self.ce_weight0 else 0.0

    @property
    def lr_scale(self) -> float:
        """The factor on the optimiser's learning rate in the current stage, lr_decay^stage (1 during a warm start)."""
        return self.lr_decay ** max(self.stage, 0)

    @property
    def selection_value(self) -> float | None:
        """The across-stage value of the last evaluation: the mean of the last ``select_window`` anneal values (the
        evaluation's own with ``select_window=1``); None before the first evaluation."""
        return math.fsum(self.recent_anneal) / len(self.recent_anneal) if self.recent_anneal else None

    @property
    def in_warm_start(self) -> bool:
        return self.stage == WARM_START_STAGE

    def update(self, stage_value: float, anneal_value: float | None = None, step: int | None = None) -> Decision:
        """Feed one evaluation; returns what to do next and, on ``NEXT_STAGE``, has already moved to the next stage.

        stage_value: the within-stage monitor (the validation surrogate at this stage's temperature).
        anneal_value: the across-stage monitor (the hard metric); None uses ``stage_value``, which needs
            ``anneal_mode == stage_mode``. Averaged over the last ``select_window`` evaluations
            (``selection_value``) before it is compared.
        step: the training step of the evaluation; recorded as ``stage_best_step``, and needed to end a warm start
            after ``warm_start_steps``.
        """
        stage_value = _as_float(stage_value, "stage_value")
        if anneal_value is None:
            if self.anneal_mode != self.stage_mode:
                raise ValueError(
                    f"Expected an anneal_value (compared in anneal_mode={self.anneal_mode!r}), got None; passing only "
                    f"the stage value needs anneal_mode equal to stage_mode={self.stage_mode!r}"
                )
            anneal_value = stage_value
        anneal_value = _as_float(anneal_value, "anneal_value")
        self.recent_anneal = [*self.recent_anneal, anneal_value][-self.select_window :]
        anneal_value = self.selection_value
        if self.warm_start_end_step is not None and step is None:
            raise ValueError(
                f"Expected the step of the evaluation to end the warm start after {self.warm_start_steps} steps, "
                "got None"
            )
        if self.finished:
            self.last_improved = False
            return Decision.STOP

        relative = self.threshold_mode == "rel"
        self.last_improved = _improves(stage_value, self.stage_best, self.stage_mode, self.threshold, relative)
        if self.last_improved:
            self.stage_best, self.stage_best_step, self.bad_evaluations = stage_value, step, 0
        else:
            self.bad_evaluations += 1
        self.stage_best_anneal = _better(anneal_value, self.stage_best_anneal, self.anneal_mode)

        if self.warm_start_end_step is not None:
            stage_over = step >= self.warm_start_end_step  # a fixed length: its own early stopping does not apply
        else:
            stage_over = self.bad_evaluations >= self.patience
        if not stage_over:
            return Decision.IMPROVED if self.last_improved else Decision.CONTINUE
        return self._end_stage()

    def _end_stage(self) -> Decision:
        if self.in_warm_start:
            # The warm start is the reference EAST has to beat; it does not count as a stage without improvement.
            self.best_anneal, self.best_anneal_stage = self.stage_best_anneal, WARM_START_STAGE
        elif _improves(self.stage_best_anneal, self.best_anneal, self.anneal_mode, self.anneal_threshold):
            self.best_anneal, self.best_anneal_stage = self.stage_best_anneal, self.stage
            self.stages_without_improvement = 0
        else:
            self.stages_without_improvement += 1

        if not self.in_warm_start:
            if self.stages_without_improvement >= self.stage_patience:
                self.stop_reason = "stage_patience"
            elif self.temperature <= self.min_temperature * (1 + 1e-9):  # T0 * r^k rounds; 1e-9 is far below r
                self.stop_reason = "min_temperature"
            elif self.max_stages is not None and self.stage + 1 >= self.max_stages:
                self.stop_reason = "max_stages"
        if self.stop_reason is not None:
            self.finished = True
            return Decision.STOP
        self.stage += 1
        self._reset_stage()
        return Decision.NEXT_STAGE

    @property
    def warm_start_end_step(self) -> int | None:
        """The step at which the current warm start ends (``warm_start_steps``); None outside a warm start and where it
        ends on its own early stopping (no ``warm_start_steps``, or the warm start of ``fall_back``)."""
        return self.warm_start_steps if self.in_warm_start and not self.fell_back else None

    @property
    def can_fall_back(self) -> bool:
        """Whether ``fall_back`` may run: the schedule has a warm start to go back to, has not fallen back before (once
        per run), and has stopped or has just ended its warm start (stage 0 before its first evaluation)."""
        just_ended = self.stage == 0 and self.stage_best is None
        return self.has_warm_start and not self.fell_back and (self.finished or just_ended)

    def fall_back(self) -> None:
        """Start the schedule over, once, from a warm start that ends on its own early stopping (whatever
        ``warm_start_steps`` says), then anneal from T0; the best anneal value so far stays the one to beat. The
        Trainer layer's fallback (``east_ce_fallback``): where the annealing stopped without telling classes apart, or
        where a warm start ended with a network that lost its input."""
        if not self.can_fall_back:
            raise ValueError(
                "Expected a stopped schedule, or one whose warm start has just ended, with a warm start that has not "
                f"fallen back yet, got finished={self.finished}, stage={self.stage}, warm_start={self.warm_start!r}, "
                f"fell_back={self.fell_back}"
            )
        self.stage, self.finished, self.stop_reason, self.fell_back = WARM_START_STAGE, False, None, True
        self.stages_without_improvement = 0
        self._reset_stage()

    def state_dict(self) -> dict[str, Any]:
        """The mutable state as a JSON-serialisable dict (the hyperparameters are the constructor's arguments)."""
        return {key: getattr(self, key) for key in _STATE_KEYS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
        state = {"recent_anneal": [], "fell_back": False, **state}  # keys a state may lack: their start values
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"Expected an AnnealingSchedule state with keys {list(_STATE_KEYS)}, missing {missing}")
        stage = state["stage"]
        if isinstance(stage, bool) or not isinstance(stage, int) or stage < WARM_START_STAGE:
            raise ValueError(f"Expected stage as an int >= {WARM_START_STAGE}, got {stage!r}")
        if stage == WARM_START_STAGE and not self.has_warm_start:
            raise ValueError("Expected a state after the warm start for a schedule without warm start, got stage -1")
        for key in _STATE_KEYS:
            setattr(self, key, state[key])
        self.last_improved = False

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(stage={self.stage}, temperature={self.temperature:.4g}, "
            f"bad_evaluations={self.bad_evaluations}/{self.patience}, "
            f"stages_without_improvement={self.stages_without_improvement}/{self.stage_patience}, "
            f"finished={self.finished})"
        )
