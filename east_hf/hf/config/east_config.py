"""EASTConfig: ``TrainingArguments`` plus the surrogate's and the annealing's settings, as plain data.

The ``east_*`` fields are the settings of two core objects, which own their defaults and their checks: the loss
(``east_hf.core.loss_registry``: ``EASTLoss`` or a baseline) and the ``AnnealingSchedule``
(``east_hf.core.annealing``). A field meant to share its object's default reads it from the object's signature
(``LOSS_FIELDS`` and ``SCHEDULE_FIELDS`` name the pairs), and ``__post_init__`` makes each object once with the fields'
values, so a bad value fails when the config is made, with the error of the object that owns the setting (its parameter
shown under its ``east_`` field name). The checks live in ``east_hf.hf.config.checks``; the rules of each loss are its
``LossSpec``'s (``east_hf.core.loss_registry.loss_spec``). The config builds nothing for training:
``east_hf.hf.config.build`` turns it into the loss, the schedule and the callback that ``EASTTrainer`` uses.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainingArguments

from east_hf.core import AVERAGES, METRICS, target_metric_key
from east_hf.core.annealing import WARM_STARTS, AnnealingSchedule
from east_hf.core.east_loss import EASTLoss
from east_hf.core.loss_registry import describe_losses, loss_spec
from east_hf.core.monitor_keys import anneal_key, selection_key
from east_hf.hf.config.checks import DEFAULT_EMA_DECAY, validate_east_fields
from east_hf.hf.config.fields import core_default, strategy_name
from east_hf.hf.devices import resolve_devices

__all__ = ["EASTConfig"]

logger = logging.getLogger(__name__)

BINARY_LR_DECAY = 0.5  # east_lr_decay's default for EAST with one class scored; see the EASTConfig docstring


@dataclass
class EASTConfig(TrainingArguments):
    r"""``TrainingArguments`` for EAST training with ``EASTTrainer``.

    The defaults are what EAST needs, so ``EASTConfig(output_dir=...)`` in Python and ``east-train`` with the same
    recipe resolve to the same arguments. They differ from ``TrainingArguments``' own in:

    - ``eval_strategy="epoch"``, ``save_strategy="epoch"``, ``logging_strategy="epoch"``: the annealing's early
      stopping reads a validation result every epoch, and every evaluation has a checkpoint to return to. With
      ``eval_strategy="steps"`` the checkpoints follow the evaluations (``save_strategy="steps"``, ``save_steps`` =
      ``eval_steps``) unless ``save_strategy`` is set to ``"steps"`` explicitly.
    - ``load_best_model_at_end``: left unset, on wherever every evaluation has a checkpoint to return to (the save
      strategy follows the evaluation strategy, or is ``"best"``), with ``metric_for_best_model`` = the anneal monitor
      (``east_anneal_key``, e.g. ``eval_fbeta``): the model kept is the one the annealing judged best, by the metric it
      is trained for. Where the strategies keep no such checkpoint (``save_strategy="no"``, or strategies that
      differ) it is off, with one info line, and training ends with the last weights; set explicitly, it is yours.
    - ``save_total_limit=1``: the best checkpoint and the last one are kept.
    - ``optim="adamw_torch"``: AdamW, as the paper.
    - ``label_names=["labels"]``: plain ``nn.Module`` models have no ``labels`` argument for the Trainer to find.
    - ``dataloader_pin_memory=False`` without an accelerator: nothing to pin for.
    - ``use_cpu=True`` without an accelerator when ``bf16=True`` (bf16 autocast on the CPU, with a warning line) or
      under a multi-process launcher (``WORLD_SIZE`` > 1: one distributed run over gloo). A launch that asked for
      several processes and started one (``accelerate launch --num_processes 2`` without ``--multi_gpu``) is warned
      about in one line.

    Parameters that control the surrogate:
        east_loss (`str`, defaults to `"east"`): ``"east"``, or a baseline with otherwise identical settings (the
            loss registry, ``east_hf.core.loss_registry.LOSSES``): ``"ce"``, ``"wce"`` (class-weighted), ``"la"``
            (logit-adjusted, Menon et al. 2021, tau = 1), ``"dice"`` (soft Dice), ``"focal"`` (focal loss, gamma 2,
            Lin et al. 2017) or ``"ldam"`` (LDAM-DRW, Cao et al. 2019: LDAM until its early stopping, then
            re-weighted by effective numbers of samples, in one more stage). A multi-label model
            (``problem_type="multi_label_classification"``) gets each name's multi-label counterpart
            (``east_hf.core.loss_registry.MULTILABEL_LOSSES``: binary cross-entropy, ``pos_weight``, per-label logit
            adjustment) and ``"asl"`` (the asymmetric loss, Ridnik et al. 2021, multi-label only).
        east_metric (`str`, defaults to `"fbeta"`): the confusion-matrix metric M to train for; the loss is 1 - M
            (multi-label: also ``"jaccard"``).
        east_beta (`float`, `list[float]` or `dict[str, float]`, defaults to `1.0`): F-beta's beta, one for all
            classes, one per class, or a mapping from class name (``id2label``) to beta, the rest 1.0.
        east_beta_floor (`float`, defaults to `1.0`): the surrogate trains each class at ``max(beta_k, floor)``;
            ``east_beta`` still defines the metric the model is judged by (validation, annealing, best model, test);
            the decision-rule tuner uses the floor too (``EASTTrainer.tune_decision_rule``). Why: on a class that is
            hard to separate, the training-set optimum of F-beta < 1 is reached by memorising a pure subset of the
            training positives and pushing the others to p ~ 0, where softmax gives them almost no gradient;
            recall-leaning betas (> 1) are left as given. ``0`` trains the configured beta, as the paper (evidence: the
            documentation's "Per-class beta" results page).
        east_average (`str`, defaults to `"macro"`): macro, weighted, micro or binary; multi-label: macro, weighted,
            micro (over every entry) or samples (each row's score, averaged over rows).
        east_pos_label (`int`, defaults to `1`): the positive class for ``east_average="binary"``.
        east_threshold_grad (`bool`, defaults to `True`): gradients flow through the dynamic threshold.
        east_sync_across_processes (`bool`, defaults to `True`): all-reduce the soft confusion matrix across
            processes so every process optimises the surrogate of the global batch.

    Parameters that control the annealing (paper Sec. 4.3; the schedule is ``east_hf.hf.config.build.build_schedule``):
        east_temperature (`float`, defaults to `0.2`): T0.
        east_decay (`float`, defaults to `0.9`): r in T_k = T0 * r^k.
        east_patience (`int`, defaults to `5`): evaluations without improvement of the stage monitor before the
            stage ends (fast early stopping within a stage).
        east_stage_patience (`int`, defaults to `3`): temperature decreases without improvement of the anneal
            monitor before training stops.
        east_min_temperature (`float`, defaults to `0.005`): training stops after the stage at this temperature.
        east_max_stages (`int`, defaults to `None`): an upper bound on the number of stages.
        east_restore_best_per_stage (`bool`, defaults to `True`): load the stage's best weights before cooling.
        east_threshold (`float`, defaults to `1e-2`) and east_threshold_mode (`str`, defaults to `"rel"`): the
            minimum improvement of the stage monitor, a fraction of the best value so far (`"rel"`) or absolute
            (`"abs"`); the paper's letter is ``0.0`` and ``"abs"``. Relative, because within a stage the validation
            surrogate keeps improving by ever smaller amounts (the model grows more confident), so with an absolute
            0 a stage rarely ends inside an ordinary budget. Baselines' early stopping uses the same criterion.
        east_anneal_threshold (`float`, defaults to `None`): how much (absolute) a stage's best anneal value must beat
            the best so far to count as an improvement across temperature decreases. None: two validation samples'
            worth, 2 / len(eval_dataset), for a hard metric (one sample moves accuracy by 1 / n, so on a small
            validation set chance bests of one sample would reset ``east_stage_patience`` again and again), and 0 for
            a loss watched across stages (the paper's letter); see ``east_hf.hf.config.build.anneal_threshold``.
        east_stage_monitor / east_anneal_monitor: the metric keys watched within and across stages; see
            ``TemperatureAnnealingCallback``. ``east_stage_monitor="eval_fbeta"`` gives shorter stages.
        east_warm_start (`str`, defaults to `"ce"`): ``"ce"`` trains a short cross-entropy stage before EAST;
            ``"none"`` starts EAST from the initial weights (cold start, as the paper). Why: a surrogate built on
            softmax probabilities gives a sample the model has confidently wrong almost no gradient
            (d p / d logit = p (1 - p)), so positives pushed to p ~ 0 early in a cold start stay there. The annealing
            callback runs the warm start: with ``east_annealing=False`` there is none. ``east_loss="ce"`` skips it;
            ``"dice"`` gets it.
        east_warm_start_epochs (`float`, defaults to `2.0`): length of the warm start in epochs; ``-1``: until the
            cross-entropy stage's own early stopping, which is also what a training set without a length (an
            ``IterableDataset``) gets, with a warning, unless ``east_warm_start_steps`` is given.
        east_warm_start_steps (`int`, defaults to `None`): length of the warm start in optimiser steps; overrides
            ``east_warm_start_epochs``.
        east_ce_weight (`float`, defaults to `None`) and east_ce_weight_decay (`float`, defaults to `0.5`): an
            annealed cross-entropy weight, loss = w_k * CE + (1 - M_T) with w_k = east_ce_weight * decay^k in EAST
            stage k (``AnnealingSchedule.ce_weight``, ``east_hf.core.loss_registry.MixedSetLoss``); 0 is EAST alone, as
            the paper. None: 1.0 for EAST, 0 for the baselines (``resolved_ce_weight``). The warm start is its w = inf
            version.
        east_ce_loss (`str`, defaults to `None`): the cross-entropy EAST uses, in the warm start and as the annealed
            weight's term: ``"ce"``, ``"wce"`` (class-weighted), ``"la"`` (logit-adjusted) or ``"ldam"`` (LDAM's
            margins, n_y^(-1/4), with its effective-number re-weighting from the start: the ``ldam`` baseline defers
            the re-weighting to its second stage, EAST's term has none), with the training split's class counts as the
            baselines of those names. None: ``"la"`` for EAST, ``"ce"`` for the warm start of the ``dice`` baseline
            (``resolved_ce_loss``). EAST's defaults, weight 1 and ``"la"``, are the logit-adjusted annealed mix: the
            plain cross-entropy pulls a rare class's predictions towards the majority class, the logit-adjusted one
            does not. The paper's loss is ``east_ce_weight=0`` (with ``east_warm_start="none"`` for its cold start).
            Without class priors (a training set that cannot be counted and no ``east_class_priors``), ``"la"``,
            ``"wce"`` and ``"ldam"`` fall back to ``"ce"`` with a warning.
        east_ce_fallback (`bool`, defaults to `True`): fall back to plain cross-entropy (whatever ``east_ce_loss``
            says) once per run: a second warm start until its own early stopping, then the annealing again from T0,
            with plain cross-entropy as the annealed weight's term (``TemperatureAnnealingCallback.ce_fallback``). In
            two places: where the warm start ends predicting one class for every validation row after the network
            lost its input (the spread across rows of what its classification head reads fell below a quarter of the
            untrained network's at a one-class evaluation: ``east_hf.hf.training.collapse``), starting over from the
            initial weights with an empty optimiser state; and where the annealing would stop and every validation
            evaluation of the run predicted one class (the validation set holding others), from the weights it has.
            Why: a network from scratch can lose its input in its first epoch (long-tailed text, batches of
            identical short texts); plain cross-entropy recovers from that, logit-adjusted cross-entropy does not (an
            input-independent network sits at its constant optimum), and the annealing then stops on a flat
            validation metric with budget left. Costs, through the warm start, one CPU copy of what training changes
            (a LoRA model's adapters and head; a full fine-tune's whole model), written into each of the warm
            start's checkpoints (``east_initial.pt``), and a forward pass over at most 1,024 validation rows before
            the first step. Single-label EAST with a warm start; ``False``: neither.
        east_class_priors (`list[float]`, `dict[str, float]` or `str`, defaults to `None`): the class counts or
            priors of ``wce``, ``la`` and ``east_ce_loss`` ``wce`` / ``la``, instead of counting the training split:
            a list by class index, a mapping from class name (``id2label``) to value naming every class, or a
            ``.json`` (list or mapping) or ``.csv`` (``class,count`` rows) file. Counts or probabilities: only the
            ratios matter. Why: an ``IterableDataset`` (a stream) cannot be counted, and counting a data set without
            a label column runs every sample through its transforms. None: count the training split's ``labels`` /
            ``label`` column (``east_hf.hf.training.dataset_stats.training_class_counts``).
        east_confusion_memory (`float`, defaults to `0.0`): d in [0, 1): train on the batch's soft confusion matrix
            plus a detached memory of the stage's earlier batches, m <- d * (m + C_batch), so rare-class rates are
            not estimated from one batch's few positives. The memory holds about 1 / (1 - d) batches, is emptied
            when the temperature changes, is not kept in checkpoints (a resumed run starts it empty), and is summed
            over processes like the batch's matrix. 0: the batch alone, as the paper.
        east_lr_decay (`float`, defaults to `None`): the factor in (0, 1] the learning rate is multiplied by at each
            temperature decrease: EAST stage k trains at lr * east_lr_decay^k, over whatever ``lr_scheduler_type``
            does (the scheduler's base rates are scaled), the warm start and stage 0 at the optimiser's own rate
            (``AnnealingSchedule.lr_scale``). 1: one learning rate, as the paper. None: 0.5 for EAST with one class
            scored (``east_average="binary"``), 1 otherwise (``resolved_lr_decay``). Why: with one rare class scored
            the model is mostly fit by the warm start and stage 0; later stages at the same rate move the decision
            point from batch to batch (the surrogate's gradient comes from the few samples near the threshold) and
            the validation metric over a few dozen positives jumps from epoch to epoch, so the kept checkpoint is
            partly the best jump. With many classes scored the stages go on learning, and a falling rate stops them
            early (measured on the quality page).
        east_select_window (`int`, defaults to `1`): the stages' bests and the best model are judged by the mean of
            the anneal monitor over the last k evaluations, reported as ``eval_mean<k>_<name>`` (e.g.
            ``eval_mean3_fbeta``, the default ``metric_for_best_model`` then); 1: each evaluation's own value. Why: a
            hard metric over a few dozen validation positives jumps from epoch to epoch, and the best single epoch
            is partly the best jump (``AnnealingSchedule``'s ``select_window``).
        east_ema_decay (`float`, defaults to `0.0`): d in [0, 1): keep an exponential moving average of the weights
            (timm's ``ModelEmaV3``, updated after every optimiser step, about 1 / (1 - d) steps long; BatchNorm
            statistics stay the training model's) and evaluate, checkpoint, select and restore it instead of the
            training weights; the model kept at the end is an average. 0: none, as the paper. Why: EAST's
            validation metric over a few dozen rare-class samples jumps from epoch to epoch, and the checkpoint kept
            is partly the best jump; the average moves less (``TemperatureAnnealingCallback``'s ``ema_decay``).
            Costs one copy of the model on its device.
        east_annealing (`bool`, defaults to `True`): install the temperature annealing callback.

    Every setting is validated once, by the core object that owns it (``build_loss`` and ``AnnealingSchedule``,
    through ``east_hf.core.validation``), when the config is made; a field that shares its object's default reads it
    from that object (``LOSS_FIELDS``, ``SCHEDULE_FIELDS``). ``EASTTrainer`` builds its loss, schedule and callback
    from the config once, with ``east_hf.hf.config.build.build_components``. The evidence behind each default is in the
    documentation's results pages.
    """

    # --- TrainingArguments defaults that EAST needs (see the class docstring) ---
    eval_strategy: str = field(
        default="epoch",
        metadata={"help": "When to evaluate: the annealing reads every evaluation ('epoch', 'steps')."},
    )
    save_strategy: str = field(
        default="epoch", metadata={"help": "When to save a checkpoint; follows eval_strategy 'steps' unless set."}
    )
    logging_strategy: str = field(default="epoch", metadata={"help": "When to log training metrics."})
    load_best_model_at_end: bool | None = field(
        default=None,
        metadata={
            "help": "Load the checkpoint the anneal monitor judged best when training ends; default: on where every "
            "evaluation has a checkpoint (save_strategy follows eval_strategy), off otherwise."
        },
    )
    metric_for_best_model: str | None = field(
        default=None, metadata={"help": "Key that picks the best checkpoint; default: the anneal monitor."}
    )
    save_total_limit: int | None = field(
        default=1, metadata={"help": "Checkpoints kept besides the best one (the best is always kept)."}
    )
    optim: str = field(default="adamw_torch", metadata={"help": "Optimiser; AdamW as the paper."})
    # --- the surrogate ---
    east_loss: str = field(
        default="east",
        metadata={"help": f"Loss: {describe_losses()}; multi-label also asl: asymmetric loss (Ridnik et al., 2021)."},
    )
    east_metric: str = field(
        default=core_default(EASTLoss, "metric"),
        metadata={"help": f"Metric to train for, one of {sorted(METRICS)} (multi-label: also jaccard)."},
    )
    east_beta: Any = field(
        default=core_default(EASTLoss, "beta"),
        metadata={
            "help": "F-beta's beta: a float, a per-class list, or a JSON mapping {class name: beta} (others 1.0)."
        },
    )
    east_beta_floor: float = field(
        default=1.0,
        metadata={
            "help": "Train each class's F-beta at max(beta_k, floor); east_beta stays the metric judged (0: as given)."
        },
    )
    east_average: str = field(
        default=core_default(EASTLoss, "average"),
        metadata={
            "help": f"Averaging over classes, one of {AVERAGES} (multi-label: macro, weighted, micro, samples)."
        },
    )
    east_pos_label: int = field(
        default=core_default(EASTLoss, "pos_label"),
        metadata={"help": "Positive class index for east_average='binary'."},
    )
    east_threshold_grad: bool = field(
        default=core_default(EASTLoss, "threshold_grad"),
        metadata={"help": "Let gradients flow through the dynamic threshold."},
    )
    east_sync_across_processes: bool = field(
        default=True,
        metadata={"help": "All-reduce the soft confusion matrix across processes (surrogate of the global batch)."},
    )
    # --- the annealing ---
    east_temperature: float = field(
        default=core_default(AnnealingSchedule, "temperature"),
        metadata={"help": "Initial temperature T0 in (0, 0.4)."},
    )
    east_decay: float = field(
        default=core_default(AnnealingSchedule, "decay"),
        metadata={"help": "Decay rate r of T_k = T0 * r^k, in (0, 1); the paper uses 0.8 or 0.9."},
    )
    east_patience: int = field(
        default=core_default(AnnealingSchedule, "patience"),
        metadata={"help": "Evaluations without improvement before a stage ends."},
    )
    east_stage_patience: int = field(
        default=core_default(AnnealingSchedule, "stage_patience"),
        metadata={"help": "Temperature decreases without improvement before stopping."},
    )
    east_min_temperature: float = field(
        default=core_default(AnnealingSchedule, "min_temperature"),
        metadata={"help": "Stop after the stage at this temperature."},
    )
    east_max_stages: int | None = field(
        default=core_default(AnnealingSchedule, "max_stages"),
        metadata={"help": "Maximum number of temperature stages."},
    )
    east_threshold: float = field(
        default=core_default(AnnealingSchedule, "threshold"),
        metadata={"help": "Minimum change of the stage monitor that counts as an improvement."},
    )
    east_threshold_mode: str = field(
        default=core_default(AnnealingSchedule, "threshold_mode"),
        metadata={"help": "'rel': east_threshold is a fraction of the best value so far; 'abs': an absolute change."},
    )
    east_anneal_threshold: float | None = field(
        default=None,
        metadata={"help": "Minimum gain of the anneal monitor across stages; default: 2 / validation size."},
    )
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
        default=core_default(AnnealingSchedule, "warm_start_steps"),
        metadata={"help": "Length of the warm start in optimiser steps; overrides east_warm_start_epochs."},
    )
    east_ce_weight: float | None = field(
        default=None,
        metadata={
            "help": "Cross-entropy weight added to EAST in stage 0 (0: EAST alone, the paper's loss); default 1."
        },
    )
    east_ce_weight_decay: float = field(
        default=core_default(AnnealingSchedule, "ce_weight_decay"),
        metadata={"help": "Factor the cross-entropy weight is multiplied by at each temperature decrease."},
    )
    east_ce_fallback: bool = field(
        default=True,
        metadata={
            "help": "Fall back to plain cross-entropy until its early stopping, then anneal again: from the initial "
            "weights where the warm start ends one-class after the network lost its input, or where annealing "
            "would stop while every validation evaluation predicted one class (single-label EAST with a warm "
            "start; false: neither)."
        },
    )
    east_ce_loss: str | None = field(
        default=None,
        metadata={
            "help": "Cross-entropy of the warm start and the annealed weight: 'ce', 'wce', 'la' (logit-adjusted) or "
            "'ldam' (LDAM's margins, re-weighted); "
            "default: 'la' for EAST, 'ce' for dice."
        },
    )
    east_class_priors: Any = field(
        default=None,
        metadata={
            "help": "Class counts or priors of wce / la: a list, a JSON mapping {class name: value}, or a .json / "
            ".csv (class,count) file; default: count the training split's labels (needed for an IterableDataset)."
        },
    )
    east_confusion_memory: float = field(
        default=core_default(EASTLoss, "confusion_memory"),
        metadata={"help": "Decay in [0, 1) of a memory of earlier batches' soft confusion matrices (0: none)."},
    )
    east_lr_decay: float | None = field(
        default=None,
        metadata={
            "help": "Factor in (0, 1] the learning rate is multiplied by at each temperature decrease (1: one rate); "
            f"default: {BINARY_LR_DECAY:g} for EAST with one class scored (east_average binary), else 1."
        },
    )
    east_select_window: int = field(
        default=core_default(AnnealingSchedule, "select_window"),
        metadata={
            "help": "Judge stages and choose the best model by the mean of the anneal monitor over this many "
            "evaluations (1: each evaluation's own value)."
        },
    )
    east_ema_decay: float = field(
        default=DEFAULT_EMA_DECAY,
        metadata={
            "help": "Decay in [0, 1) of a moving average of the weights per optimiser step, which is evaluated, "
            "selected and kept instead of the training weights (0: none; 0.95 averages about 20 steps)."
        },
    )
    east_annealing: bool = field(default=True, metadata={"help": "Install the temperature annealing callback."})
    # The annealing state (stage, temperature, counters) lives in a stateful callback: resume it by default.
    restore_callback_states_from_checkpoint: bool = field(
        default=True, metadata={"help": "Restore the annealing callback's state when resuming from a checkpoint."}
    )

    def __post_init__(self):
        validate_east_fields(self)
        self._follow_strategies()
        if self.label_names is None:
            self.label_names = ["labels"]  # plain nn.Modules have no `labels` argument for the Trainer to find
        resolve_devices(self)
        super().__post_init__()

    def _follow_strategies(self) -> None:
        """Checkpoints follow the evaluations, and the best one is loaded at the end where they can: a
        ``load_best_model_at_end`` left unset (None) is on when every evaluation has a checkpoint to return to and
        off (with one info line) otherwise, e.g. with ``save_strategy="no"``; set explicitly, it is the user's."""
        evaluation, save = strategy_name(self.eval_strategy), strategy_name(self.save_strategy)
        if evaluation == "steps" and save == "epoch" and self.load_best_model_at_end is not False:
            # A checkpoint at every evaluation (the best model needs one); "epoch" is this class's default.
            self.save_strategy = save = "steps"
            if self.eval_steps is not None:
                self.save_steps = self.eval_steps
        if self.load_best_model_at_end is None:
            every = self.eval_steps or self.logging_steps
            # Steps as a count, or as a fraction (< 1) of the training steps, as TrainingArguments reads them.
            steps_match = evaluation != "steps" or (
                every is not None
                and (
                    self.save_steps == every or (every >= 1 and self.save_steps >= 1 and self.save_steps % every == 0)
                )
            )
            self.load_best_model_at_end = save == "best" or (save == evaluation != "no" and steps_match)
            if not self.load_best_model_at_end:
                logger.info(
                    f"load_best_model_at_end=False: save_strategy={save!r} does not keep a checkpoint of every "
                    f"evaluation (eval_strategy={evaluation!r}), so training ends with the last weights"
                )
        if self.load_best_model_at_end and self.metric_for_best_model is None:
            self.metric_for_best_model = self.east_selection_key  # keep the model the annealing judged best

    @property
    def resolved_ce_weight(self) -> float:
        """The cross-entropy weight of EAST's stage 0: ``east_ce_weight``, by default 1.0; 0 for the baselines."""
        if not loss_spec(self.east_loss).anneals_temperature:
            return 0.0
        return 1.0 if self.east_ce_weight is None else float(self.east_ce_weight)

    @property
    def resolved_lr_decay(self) -> float:
        """The learning rate's factor per temperature decrease: ``east_lr_decay``, by default ``BINARY_LR_DECAY`` for
        EAST with one class scored (``east_average="binary"``) and 1 otherwise."""
        if self.east_lr_decay is not None:
            return self.east_lr_decay
        binary_east = loss_spec(self.east_loss).anneals_temperature and self.east_average == "binary"
        return BINARY_LR_DECAY if binary_east else 1.0

    @property
    def resolved_ce_loss(self) -> str:
        """The cross-entropy of the warm start and the annealed weight: ``east_ce_loss``, by default ``"la"`` for EAST
        and ``"ce"`` for the others (``dice``'s warm start; the cross-entropy baselines have none)."""
        if self.east_ce_loss is not None:
            return self.east_ce_loss
        return "la" if loss_spec(self.east_loss).anneals_temperature else "ce"

    @property
    def east_anneal_key(self) -> str:
        """The metric key watched across stages: ``east_anneal_monitor``, or ``eval_<target metric>``."""
        return anneal_key(self.east_metric, self.east_anneal_monitor)

    @property
    def east_selection_key(self) -> str:
        """The metric key the best model is chosen by: the anneal key, or its mean over ``east_select_window``
        evaluations (``eval_mean<k>_<name>``, written by the annealing callback)."""
        return selection_key(self.east_anneal_key, self.east_select_window)

    @property
    def east_target_key(self) -> str:
        """The hard metric key (without the ``eval_`` prefix) of the metric the surrogate targets."""
        return target_metric_key(self.east_metric)

    def __getstate__(self):
        # transformers pickles the arguments into training_args.bin beside every checkpoint and pushes that file to the
        # Hub; never let the token travel with it (the live object keeps it for the push itself).
        state = self.__dict__.copy()
        state["hub_token"] = None
        return state
