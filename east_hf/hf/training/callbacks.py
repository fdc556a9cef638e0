"""TemperatureAnnealingCallback: the Trainer layer over ``AnnealingSchedule`` (paper Sec. 4.3).

The schedule (``east_hf.core.annealing``) decides; this callback feeds it the evaluation metrics and carries out what
concerns the training loop: the stage's best weights, the evaluation that ends a warm start, the stop. It never
touches the trainer: ``EASTTrainer`` finds the callback in its own callback list, reads the temperature, the stage
and whether the warm start is on from ``callback.schedule``, and pushes two things to it: after each validation
evaluation, whether it predicted one class and how varied the input of the model's head was (``note_evaluation``, for
``ce_fallback``), and before an evaluation, the request to swap in the weights' moving average
(``average_for_evaluation``). The callback's state travels in checkpoints (``ExportableState``), so
``trainer.train(resume_from_checkpoint=...)`` continues in the same stage with the same counters and temperature: the
trainer then reads the restored instance. A checkpoint that carries the stage's best weights (``east_stage_best.pt``,
written in ``on_save``, after the Trainer's ``trainer_state.json``) lists the file in its saved state
(``checkpoint_files``), so ``east_hf.hf.training.checkpoints`` finds a save cut off between the two and a truncated
file: a resume from ``"last"`` skips that checkpoint, one from its path is refused.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from east_hf.core.annealing import WARM_START_STAGE, AnnealingSchedule, Decision
from east_hf.core.monitor_keys import monitor_mode
from east_hf.hf.config.checks import DEFAULT_EMA_DECAY, check_ema_decay, check_evaluates
from east_hf.hf.training.checkpoints import (
    CHECKPOINT_FILES_KEY,
    EMA_WEIGHTS_NAME,
    INITIAL_WEIGHTS_NAME,
    STAGE_BEST_WEIGHTS_NAME,
)
from east_hf.hf.training.collapse import COLLAPSE_RATIO
from east_hf.hf.training.weight_copies import (
    checkpoint_folder,
    cpu_state_dict,
    load_trainable,
    load_weights,
    save_weights,
    swap_weights,
    trainable_state_dict,
)

__all__ = ["EMA_WEIGHTS_NAME", "STAGE_BEST_WEIGHTS_NAME", "TemperatureAnnealingCallback"]

logger = logging.getLogger(__name__)


def _eval_key(key: str) -> str:
    """The Trainer's convention for ``metric_for_best_model``: metric keys carry the ``eval_`` prefix."""
    return key if key.startswith("eval_") else f"eval_{key}"


class TemperatureAnnealingCallback(TrainerCallback, ExportableState):
    """Anneal EAST's temperature T_k = T0 * r^k over stages of fast early stopping; stop when cooling stops helping.

    ``EASTTrainer`` installs the one its builder makes from its ``EASTConfig``
    (``east_hf.hf.config.build.build_annealing_callback``) and reads ``callback.schedule`` before every step and
    evaluation. On every evaluation during training the callback feeds ``metrics[stage_monitor]`` and
    ``metrics[anneal_monitor]`` to its ``AnnealingSchedule`` and acts on the decision: a new stage best is copied to
    CPU; the end of a stage (with ``restore_best_per_stage``) loads the stage's best weights before the next step; the
    end of the annealing sets ``control.should_training_stop``.

    Args:
        schedule: the ``AnnealingSchedule`` (or its ``settings()`` dict), which validates and holds every annealing
            setting: T0, r, patience, stage patience, minimum temperature, maximum stages, threshold, the modes and
            the warm start. None builds one from ``schedule_kwargs``, with ``stage_mode`` / ``anneal_mode`` inferred
            from the monitor keys as the Trainer does for ``greater_is_better`` (``"min"`` for keys ending in
            ``loss``, else ``"max"``).
        stage_monitor: metric key watched within a stage; ``"eval_loss"``, which ``EASTTrainer`` reports as the
            surrogate of the whole evaluation set at the stage's temperature (the paper's choice).
        anneal_monitor: metric key watched across stages; the hard target metric (``"eval_fbeta"`` for an F-beta
            surrogate, from ``compute_metrics``), because surrogate values at different temperatures are not
            comparable. ``"eval_loss"`` follows the paper to the letter. Keys without ``eval_`` get it.
        selection_key: where the schedule's ``selection_value`` (the anneal monitor's mean over its
            ``select_window`` evaluations) is written into each evaluation's metrics during training, for
            ``metric_for_best_model``; None: the anneal monitor itself (a window of 1).
        restore_best_per_stage: before training at a lower temperature, load the ended stage's best weights (by
            ``stage_monitor``). Costs one CPU copy of what training changes (``trainable_state_dict``: the
            parameters that require a gradient, and the buffers; a full fine-tune's is the model's size in host
            memory, a LoRA model's its adapters and head), taken at each new stage best; a checkpoint saved while the
            stage best is not the checkpoint's own weights also gets that copy as ``east_stage_best.pt``, so a resumed
            run restores the same weights. The copy is of the model as this process holds it: the whole model on one
            device or under DDP, this process's shard under FSDP2 (FSDP1 and ZeRO-3 are refused:
            ``east_hf.hf.training.inputs.check_sharding``).
        ema_decay: d in [0, 1): keep an exponential moving average of the weights, w_ema <- d * w_ema + (1 - d) * w
            after every optimiser step (timm's ``ModelEmaV3``, parameters only), and evaluate, checkpoint,
            select and restore the average instead of the training weights (0: none, as the paper). The average
            holds about 1 / (1 - d) steps, so it is a setting in steps: 0.95 is ~20 steps, one to three epochs of the
            evidence tables. Why: a hard metric over a few dozen validation positives jumps from epoch to epoch, and
            the checkpoint kept is partly the best jump; the average moves less from one evaluation to the next.
            Buffers (BatchNorm's statistics) are the training model's: averaged again, they lag so far behind the
            weights that a BatchNorm network early in training can predict one class for longer than a stage.
            ``EASTTrainer.evaluate`` swaps the average into the model for each evaluation in training (the copy holds
            the training weights meanwhile) and the next step swaps it out, so a checkpoint holds the weights that
            were evaluated; a stage's best weights are an average, and restoring them starts both from them. Costs
            one copy of the model on its device, in checkpoints ``east_ema.pt``, so a resume continues the average;
            ``load_best_model_at_end=False`` ends with the average. Single device or DDP, as the stage copy.
        reports_temperature: whether the trained loss has a temperature (EAST; the builder asks the loss's
            ``LossSpec.anneals_temperature``); False for a baseline, whose messages then name no stage or temperature.
            Saved with a checkpoint, so a resumed callback reports as the one it replaces.
        ce_fallback: fall back to plain cross-entropy (``AnnealingSchedule.fall_back``: a warm start until its own
            early stopping, then annealing again from T0), once per run, where the schedule can (a schedule without a
            warm start has none to go back to), in one of two places (the trainer's ``note_evaluation``; without
            notes nothing falls back). Where the warm start ends predicting one class after a network that lost its
            input (at one of its evaluations that predicted one class, the spread of the head's input was below
            ``COLLAPSE_RATIO`` of the untrained network's, ``initial_spread``: ``east_hf.hf.training.collapse``;
            the spread jitters from one evaluation to the next while the network stays one-class, so the lowest
            counts, ``lowest_spread``), the next step starts over from the weights training began with and an empty
            optimiser state: a CPU copy of what training changes is held until the warm start ends (in its
            checkpoints ``east_initial.pt``). Where the annealing would stop
            and every validation evaluation so far predicted one class for every row, training goes on from the
            weights it has. Why: ``EASTConfig``'s ``east_ce_fallback``.

    A warm start (``schedule.warm_start == "ce"``) is stage -1: the trainer trains it with cross-entropy, for
    ``warm_start_steps`` optimiser steps, or ``warm_start_epochs`` epochs (turned into steps from the length of the
    training data loader when training begins), or with neither until its own early stopping on ``stage_monitor``
    (then the cross-entropy ``eval_loss``); its best weights start EAST's stage 0 and its best anneal value is the one
    stage 0 must beat.

    The schedule's ``lr_scale`` (``lr_decay``^stage) multiplies the optimiser's learning rates from the step after a
    stage ends: each parameter group's rate and the scheduler's base rates (transformers' ``LambdaLR``s), so it
    composes with any ``lr_scheduler_type``; a checkpoint saves the factor (``lr_scale``), so a resume goes on at it.

    The best model at the end is the Trainer's job: ``load_best_model_at_end=True``, ``metric_for_best_model`` the
    anneal monitor and ``save_steps`` a multiple of ``eval_steps`` (warned otherwise). Restoring a stage's best weights
    waits for the next step: the checkpoint of the evaluation that ended a stage holds the weights it evaluated.

    Resuming looks for ``east_stage_best.pt`` in ``{output_dir}/checkpoint-{global_step}`` (where
    ``resume_from_checkpoint=True`` resumes from); a checkpoint moved elsewhere resumes without it, with a warning,
    and a damaged one there is refused in one line naming it. The saved state lists the file under
    ``checkpoint_files`` wherever the checkpoint carries it, so that a checkpoint whose file is missing or truncated
    counts as incomplete (``east_hf.hf.training.checkpoints.checkpoint_problem``).

    >>> callback = TemperatureAnnealingCallback(decay=0.5, patience=2, anneal_monitor="mcc")
    >>> callback.stage_monitor, callback.anneal_monitor, callback.schedule.anneal_mode, callback.schedule.temperature
    ('eval_loss', 'eval_mcc', 'max', 0.2)
    """

    def __init__(
        self,
        schedule: AnnealingSchedule | dict[str, Any] | None = None,
        stage_monitor: str = "eval_loss",
        anneal_monitor: str = "eval_fbeta",
        selection_key: str | None = None,
        restore_best_per_stage: bool = True,
        ema_decay: float = DEFAULT_EMA_DECAY,
        reports_temperature: bool = True,
        ce_fallback: bool = False,
        **schedule_kwargs: Any,
    ):
        for name, key in (("stage_monitor", stage_monitor), ("anneal_monitor", anneal_monitor)):
            if not isinstance(key, str) or not key:
                raise ValueError(f"Expected {name} as a metric key such as 'eval_loss', got {key!r}")
        self.reports_temperature = bool(reports_temperature)
        self.stage_monitor = _eval_key(stage_monitor)
        self.anneal_monitor = _eval_key(anneal_monitor)
        self.selection_key = self.anneal_monitor if selection_key is None else _eval_key(selection_key)
        if schedule is None:
            schedule_kwargs.setdefault("stage_mode", monitor_mode(self.stage_monitor))
            schedule_kwargs.setdefault("anneal_mode", monitor_mode(self.anneal_monitor))
            schedule = AnnealingSchedule(**schedule_kwargs)
        elif schedule_kwargs:
            raise TypeError(f"Expected a schedule or its settings as keywords, got both ({sorted(schedule_kwargs)})")
        elif isinstance(schedule, dict):
            schedule = AnnealingSchedule(**schedule)
        elif not isinstance(schedule, AnnealingSchedule):
            raise TypeError(
                f"Expected schedule as an AnnealingSchedule or its settings, got {type(schedule).__name__}"
            )
        self.schedule = schedule
        self.ce_fallback = bool(ce_fallback)
        # The head input's spread of the untrained network (the trainer's note_initial_spread). Saved.
        self.initial_spread: float | None = None
        self._noted_spread: float | None = None  # the head input's spread at the evaluation whose on_evaluate is next
        self.lowest_spread: float | None = None  # the lowest noted in a one-class evaluation of the warm start. Saved.
        self._initial_weights: dict[str, torch.Tensor] | None = None  # held while a collapsed warm start may restart
        self.restart_pending = False  # True from a restart until the next step empties the optimiser's state. Saved.
        self.restarted_at: int | None = None  # the step where a collapsed warm start started over. Saved.
        # True while every evaluation in training was noted as one class, False from the first that was not. Saved.
        self.one_class_so_far: bool | None = None
        self._noted_one_class: bool | None = None  # the note for the evaluation whose on_evaluate comes next
        self.restore_best_per_stage = bool(restore_best_per_stage)
        self.ema_decay = check_ema_decay(ema_decay)
        self._ema = None  # timm's ModelEmaV3 of the training model, made when training begins (ema_decay > 0)
        # True while the model holds the average (from an evaluation to the next step) and the copy the training
        # weights; saved with a checkpoint, whose model file then holds the average.
        self.ema_in_model = False
        # True between the end of a stage and the next step: _stage_weights then holds the ended stage's best.
        self.restore_pending = False
        self._stage_weights: dict[str, torch.Tensor] | None = None
        self._in_train = False
        self._steps_per_epoch: int | None = None  # optimiser steps per epoch, from the training data loader
        self._step: int | None = None  # the global step of the last event: the step a checkpoint saved now has
        # The factor the optimiser's and its scheduler's rates carry: the schedule's lr_scale when it was last applied
        # (at the step after a stage ended). Saved with a checkpoint, whose scheduler holds rates scaled by it.
        self.lr_scale = 1.0

    # ---- checkpoint state (ExportableState) ----
    # a resumed Trainer builds type(self)(**state()["args"]), sets "attributes"
    @property
    def schedule_state(self) -> dict[str, Any]:
        return self.schedule.state_dict()

    @schedule_state.setter
    def schedule_state(self, state: dict[str, Any]) -> None:
        self.schedule.load_state_dict(state)

    @property
    def checkpoint_files(self) -> list[str]:
        """The files ``on_save`` writes into a checkpoint saved at the current step: ``[east_stage_best.pt]`` while the
        stage's best weights are not the model's own, else ``[]``. The Trainer saves this list in
        ``trainer_state.json`` before ``on_save`` runs, which makes the file part of what a complete checkpoint
        holds."""
        files = [STAGE_BEST_WEIGHTS_NAME] if self._saves_stage_best(self._step) else []
        files += [INITIAL_WEIGHTS_NAME] if self._initial_weights is not None else []
        return files + ([EMA_WEIGHTS_NAME] if self._ema is not None else [])  # on_save writes it then

    @checkpoint_files.setter
    def checkpoint_files(self, files: list[str]) -> None:
        """A resumed Trainer sets what the checkpoint listed; the list is the checkpoint's, derived again at the next
        save, so nothing is kept."""

    def _saves_stage_best(self, step: int | None) -> bool:
        if self._stage_weights is None or step is None:
            return False
        return self.restore_pending or self.schedule.stage_best_step != step  # else the checkpoint's own weights

    def state(self) -> dict:
        return {
            "args": {
                "schedule": self.schedule.settings(),
                "stage_monitor": self.stage_monitor,
                "anneal_monitor": self.anneal_monitor,
                "selection_key": self.selection_key,
                "restore_best_per_stage": self.restore_best_per_stage,
                "ema_decay": self.ema_decay,
                "ce_fallback": self.ce_fallback,
            },
            "attributes": {
                "schedule_state": self.schedule.state_dict(),
                "restore_pending": self.restore_pending,
                "ema_in_model": self.ema_in_model,
                "lr_scale": self.lr_scale,
                "reports_temperature": self.reports_temperature,  # set on the resumed instance, as a constructor would
                "one_class_so_far": self.one_class_so_far,
                "initial_spread": self.initial_spread,
                "lowest_spread": self.lowest_spread,
                "restart_pending": self.restart_pending,
                "restarted_at": self.restarted_at,
                CHECKPOINT_FILES_KEY: self.checkpoint_files,
            },
        }

    def note_evaluation(self, predicted_one_class: bool | None, head_spread: float | None = None) -> None:
        """The trainer's note on the validation evaluation whose ``on_evaluate`` comes next: whether it predicted one
        class for every row while the validation set holds others, and the spread of the head's input
        (``east_hf.hf.training.collapse.head_input_spread``; measured while ``watches_collapse``); None: not known.
        Read by ``ce_fallback``."""
        self._noted_one_class, self._noted_spread = predicted_one_class, head_spread

    def note_initial_spread(self, spread: float | None) -> None:
        """The trainer's note, before the first step, of the untrained network's head input spread."""
        self.initial_spread = spread

    @property
    def watches_collapse(self) -> bool:
        """Whether a collapsed warm start may still restart: ``ce_fallback``, in a warm start that has not fallen back
        (the trainer then measures the head input's spread at each validation evaluation)."""
        schedule = self.schedule
        return self.ce_fallback and schedule.has_warm_start and schedule.in_warm_start and not schedule.fell_back

    def _note_spread(self, one_class: bool | None, spread: float | None) -> None:
        """Keep the lowest head input spread of the warm start's evaluations that predicted one class."""
        if self.watches_collapse and one_class and spread is not None:
            self.lowest_spread = spread if self.lowest_spread is None else min(self.lowest_spread, spread)

    @property
    def lost_input(self) -> bool:
        """Whether a one-class evaluation of the warm start had a head input spread below ``COLLAPSE_RATIO`` of the
        untrained network's."""
        initial, lowest = self.initial_spread, self.lowest_spread
        return bool(initial) and lowest is not None and lowest < COLLAPSE_RATIO * initial

    # ---- events ----
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        check_evaluates(args.eval_strategy)
        self._in_train = True
        self._step = state.global_step
        self._warm_start_length(args, kwargs.get("train_dataloader"))
        if state.global_step > 0:
            self._resume(args, state, model)
        elif self.watches_collapse and model is not None:
            self._initial_weights = trainable_state_dict(model)
        self._start_average(args, state, model)
        if state.global_step == 0:  # else the checkpoint's factor, which its optimiser's rates carry
            self.lr_scale = 1.0
        if not args.load_best_model_at_end:
            logger.warning(
                "load_best_model_at_end=False: training ends with the last weights, not the best; set "
                f"load_best_model_at_end=True and metric_for_best_model={self.selection_key!r}"
            )
        elif args.metric_for_best_model is not None and _eval_key(args.metric_for_best_model) != self.selection_key:
            logger.warning(
                f"metric_for_best_model={args.metric_for_best_model!r} differs from the anneal monitor "
                f"{self.selection_key!r}: the model kept at the end is not the one annealing judged best"
            )

    def _warm_start_length(self, args, train_dataloader) -> None:
        """Turn the schedule's ``warm_start_epochs`` into ``warm_start_steps`` (optimiser steps of this process)."""
        try:
            batches = len(train_dataloader)
        except TypeError:  # an iterable data set without a length
            batches = 0
        self._steps_per_epoch = math.ceil(batches / max(1, args.gradient_accumulation_steps)) if batches > 0 else None
        if self.schedule.warm_start_epochs is not None:
            self.schedule.set_steps_per_epoch(self._steps_per_epoch)
            logger.info(
                f"Cross-entropy warm start: {self.schedule.warm_start_steps} steps "
                f"({self.schedule.warm_start_epochs} epochs)"
            )

    def _resume(self, args, state, model) -> None:
        schedule = self.schedule
        if not args.restore_callback_states_from_checkpoint:
            logger.warning("restore_callback_states_from_checkpoint=False: annealing restarts from its first stage")
            return
        if self.watches_collapse:
            path = os.path.join(checkpoint_folder(args, state.global_step), INITIAL_WEIGHTS_NAME)
            if os.path.isfile(path):
                self._initial_weights = load_weights(path, "the weights training began with")
            else:
                logger.warning(f"No {path}: a collapsed warm start restarts from the weights it has")
        if not self.restore_best_per_stage or self._stage_weights is not None:
            return
        if not self.restore_pending and schedule.stage_best_step == state.global_step:
            if model is not None:  # the checkpoint's weights are the stage's best
                self._stage_weights = trainable_state_dict(model)
            return
        if not self.restore_pending and schedule.stage_best_step is None:
            return
        path = os.path.join(checkpoint_folder(args, state.global_step), STAGE_BEST_WEIGHTS_NAME)
        if not os.path.isfile(path):
            logger.warning(f"No {path}: the current stage ends without restoring its best weights")
            self.restore_pending = False
            return
        self._stage_weights = load_weights(path, "the stage's best weights")

    def _start_average(self, args, state, model) -> None:
        """Make the moving average of the weights (``ema_decay`` > 0): a copy of the model, or, resuming, the copy
        the checkpoint carries (``east_ema.pt``: the average, or the training weights where the checkpoint's model
        file holds the average)."""
        if self.ema_decay == 0 or model is None:
            return
        from timm.utils import ModelEmaV3

        self._ema = ModelEmaV3(model, decay=self.ema_decay, exclude_buffers=True)  # buffers: the training model's
        if state.global_step == 0 or not args.restore_callback_states_from_checkpoint:
            self.ema_in_model = False
            return
        path = os.path.join(checkpoint_folder(args, state.global_step), EMA_WEIGHTS_NAME)
        if not os.path.isfile(path):
            logger.warning(f"No {path}: the moving average of the weights starts again from the checkpoint's weights")
            self.ema_in_model = False
            return
        load_weights(path, "the moving average of the weights", into=self._ema.module)

    def average_for_evaluation(self, model: torch.nn.Module | None) -> None:
        """Swap the moving average into ``model`` for an evaluation during training (``EASTTrainer.evaluate`` calls
        this); the next step swaps it out. Nothing without an average or outside training."""
        if self._ema is not None and self._in_train and not self.ema_in_model and model is not None:
            swap_weights(model, self._ema.module)
            self.ema_in_model = True

    def _scale_learning_rate(self, optimizer, lr_scheduler) -> None:
        """Bring the optimiser's rates to the stage's ``lr_scale``: each parameter group's rate now, and the
        scheduler's base rates (a ``LambdaLR``, as transformers' schedules, sets rate = base * factor(step) at each
        step), so the stage's factor multiplies whatever ``lr_scheduler_type`` does."""
        target = self.schedule.lr_scale
        if target == self.lr_scale or optimizer is None:
            return
        ratio = target / self.lr_scale
        for group in optimizer.param_groups:
            group["lr"] *= ratio
        scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate's AcceleratedScheduler wraps it
        if getattr(scheduler, "base_lrs", None) is not None:
            scheduler.base_lrs = [rate * ratio for rate in scheduler.base_lrs]
        self.lr_scale = target

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        optimizer = kwargs.get("optimizer")
        self._scale_learning_rate(optimizer, kwargs.get("lr_scheduler"))
        if self.restart_pending and optimizer is not None:  # a restart: no moments of the weights it replaced
            getattr(optimizer, "optimizer", optimizer).state.clear()  # accelerate's AcceleratedOptimizer wraps it
        self.restart_pending = False
        if self.restore_pending:
            if self._stage_weights is not None and model is not None:
                load_trainable(model, self._stage_weights)
                if self._ema is not None:  # the next stage averages from its start
                    self._ema.module.load_state_dict(self._stage_weights, strict=False)
                    self.ema_in_model = False
            self._stage_weights, self.restore_pending = None, False
        if self.ema_in_model and model is not None:  # train the training weights, not the average
            swap_weights(model, self._ema.module)
            self.ema_in_model = False

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self._step = state.global_step
        if self._ema is not None and model is not None:
            self._ema.update(model)
        schedule = self.schedule
        if schedule.warm_start_end_step is not None and state.global_step >= schedule.warm_start_end_step:
            # End the warm start on the step it is due, not at the next evaluation; an epoch's last step under
            # eval_strategy="epoch" is evaluated at the epoch's end anyway (asking here would evaluate it twice).
            epoch_end = self._steps_per_epoch and state.global_step % self._steps_per_epoch == 0
            if not (args.eval_strategy == "epoch" and epoch_end):
                control.should_evaluate = True
                # The Trainer records an evaluation's step as the best but keeps the best model only where a
                # checkpoint holds it: an evaluation off the save grid gets its checkpoint ("best" saves on its own).
                if args.load_best_model_at_end and args.save_strategy in ("steps", "epoch"):
                    control.should_save = True

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        if not self._in_train or self.schedule.finished:  # e.g. trainer.evaluate(test_set) after training
            return
        self._step = state.global_step
        metrics = metrics or {}
        missing = [key for key in (self.stage_monitor, self.anneal_monitor) if key not in metrics]
        if missing:
            raise ValueError(
                f"Expected the evaluation to report {missing} (watched by temperature annealing), got keys "
                f"{sorted(metrics)}; set east_stage_monitor / east_anneal_monitor to one of them (hard metrics need "
                "compute_metrics)"
            )
        noted, spread = self._noted_one_class, self._noted_spread
        self._noted_one_class = self._noted_spread = None
        self._note_spread(noted, spread)
        self.one_class_so_far = bool(noted) and self.one_class_so_far is not False
        schedule = self.schedule
        stage, temperature, initial = schedule.stage, schedule.temperature, self._initial_weights
        decision = schedule.update(metrics[self.stage_monitor], metrics[self.anneal_monitor], step=state.global_step)
        if self.selection_key != self.anneal_monitor:  # read by the Trainer's best-model choice after this event
            metrics[self.selection_key] = schedule.selection_value
        if not self.watches_collapse:
            self._initial_weights = None
        ended_warm_start = decision is Decision.NEXT_STAGE and stage == WARM_START_STAGE
        if ended_warm_start and self.ce_fallback and noted and self.lost_input and schedule.can_fall_back:
            self._restart(schedule, initial, state.global_step)
        elif decision is Decision.IMPROVED:
            if self.restore_best_per_stage and model is not None:
                self._stage_weights = trainable_state_dict(model)
        elif decision is Decision.NEXT_STAGE:
            # Deferred to the next step: this evaluation's checkpoint must hold the weights it evaluated.
            self.restore_pending = (
                self.restore_best_per_stage and not schedule.last_improved and self._stage_weights is not None
            )
            if not self.restore_pending:
                self._stage_weights = None
            logger.info(
                f"EAST stage {stage} (T={temperature:.4g}) ended at step {state.global_step}; "
                f"stage {schedule.stage} at T={schedule.temperature:.4g}"
            )
        elif decision is Decision.STOP and self.ce_fallback and self.one_class_so_far and schedule.can_fall_back:
            schedule.fall_back()
            self._stage_weights, self.restore_pending = None, False
            logger.warning(
                f"Annealing would stop at step {state.global_step}, but every validation evaluation so far predicted "
                "one class for every row: plain cross-entropy until its own early stopping, then annealing again from "
                "T0 (east_ce_fallback false: stop here instead)"
            )
        elif decision is Decision.STOP:
            control.should_training_stop = True
            self._stage_weights, self.restore_pending = None, False
            logger.info(
                f"EAST annealing stopped at step {state.global_step} in stage {stage} (T={temperature:.4g}): "
                f"{schedule.stop_reason}; "
                f"best {self.anneal_monitor}={schedule.best_anneal} in stage {schedule.best_anneal_stage}"
            )
        return control

    def _restart(self, schedule: AnnealingSchedule, initial: dict | None, step: int) -> None:
        """Fall back where a collapsed warm start ended: the next step loads ``initial`` (the weights training began
        with; deferred as a stage's restore, so this evaluation's checkpoint holds the weights it evaluated) and
        empties the optimiser's state."""
        schedule.fall_back()
        self._stage_weights, self.restore_pending, self.restart_pending = initial, initial is not None, True
        self.restarted_at = step
        weights = "the initial weights" if initial is not None else "the weights it has (no initial ones kept)"
        logger.warning(
            f"The warm start ended at step {step} predicting one class for every validation row, from a network that "
            f"lost its input (its head's input varied {self.lowest_spread / self.initial_spread:.2g}x as much across "
            f"rows as the untrained network's): starting over from {weights} with plain cross-entropy until its own "
            "early stopping, then annealing from T0 (east_ce_fallback false: go on instead)"
        )

    def on_save(self, args, state, control, **kwargs):
        should_save = getattr(args, "should_save", state.is_world_process_zero)  # where trainer_state.json lists it
        saves_stage_best = self._saves_stage_best(state.global_step)
        if not should_save or not (saves_stage_best or self._ema is not None or self._initial_weights is not None):
            return
        folder = checkpoint_folder(args, state.global_step)
        if not os.path.isdir(folder):
            logger.warning(f"No checkpoint folder {folder}: the annealing callback's weights are not saved with it")
            return
        if saves_stage_best:
            save_weights(self._stage_weights, os.path.join(folder, STAGE_BEST_WEIGHTS_NAME))
        if self._initial_weights is not None:
            save_weights(self._initial_weights, os.path.join(folder, INITIAL_WEIGHTS_NAME))
        if self._ema is not None:  # the copy: the training weights while the model holds the average
            save_weights(cpu_state_dict(self._ema.module), os.path.join(folder, EMA_WEIGHTS_NAME))

    def on_train_end(self, args, state, control, **kwargs):
        schedule = self.schedule
        spent = state.max_steps and state.global_step >= state.max_steps
        if self._in_train and not schedule.finished and spent and state.is_world_process_zero:  # once per run
            # A budget meant as a loose upper bound would otherwise choose, silently, where the annealing stopped.
            where = (
                "the warm start"
                if schedule.in_warm_start
                else f"stage {schedule.stage} (T={schedule.temperature:.4g})"
                if self.reports_temperature
                else "training"
            )
            ending = "its early stopping" if schedule.max_stages == 1 else "the annealing's stopping criterion"
            logger.warning(
                f"Training used its whole budget (max_steps={state.max_steps}) in {where}, before {ending}: "
                "raise num_train_epochs or max_steps to let it end on the validation set"
            )
        model = kwargs.get("model")
        if self._ema is not None and model is not None and not self.ema_in_model and not args.load_best_model_at_end:
            model.load_state_dict(self._ema.module.state_dict())  # end with the average, as it is evaluated
        self._in_train = False
        self._stage_weights, self.restore_pending, self._initial_weights = None, False, None
        self._ema, self.ema_in_model = None, False
