"""EASTConfig: ``TrainingArguments`` plus the surrogate's and the annealing's settings.

The ``east_*`` fields are the settings of two core objects, and those objects validate them: ``build_loss`` makes
the loss (``east_hf.core.loss``: ``EASTLoss`` or a baseline) and ``annealing_schedule`` the ``AnnealingSchedule``
(``east_hf.core.annealing``). ``__post_init__`` builds both once, so a bad value fails when the config is made, with the
error of the object that owns the setting (its parameter shown under its ``east_`` field name).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import TrainingArguments
from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available

from east_hf.core import AVERAGES, METRICS, target_metric_key
from east_hf.core.annealing import WARM_STARTS, AnnealingSchedule, anneal_key, monitor_mode
from east_hf.core.classes import resolve_class_priors
from east_hf.core.loss import LOSSES, PRIOR_LOSSES, SetLoss, build_loss, describe_losses
from east_hf.core.validation import check_choice, parse_beta, parse_class_priors
from east_hf.hf.callbacks import TemperatureAnnealingCallback, check_evaluates

__all__ = ["EASTConfig"]

logger = logging.getLogger(__name__)


def _field_error(error: Exception, fields: set[str]) -> ValueError:
    """A core object's one-line error with its parameter named as the ``east_`` field that set it."""
    message = re.sub(
        r"\b(Expected )(\w+)",
        lambda m: f"{m.group(1)}east_{m.group(2)}" if m.group(2) in fields else m.group(0),
        str(error),
        count=1,
    )
    return ValueError(message)


def _one_process_of_several() -> bool:
    """True in the lone process ``accelerate launch --num_processes N`` (N > 1) starts without ``--multi_gpu``: its
    plain launcher runs one process on this machine and sets ``MASTER_ADDR`` for the others, which never start. A
    distributed launcher (``--multi_gpu``, torchrun, mpirun) gives the process a world size instead."""
    env = os.environ
    if "ACCELERATE_USE_CPU" not in env or "MASTER_ADDR" not in env:  # not accelerate's plain launcher asked for > 1
        return False
    sizes = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
    return all(int(env.get(name) or 1) <= 1 for name in sizes)


@dataclass
class EASTConfig(TrainingArguments):
    r"""``TrainingArguments`` for EAST training with ``EASTTrainer``.

    The defaults are what EAST needs, so ``EASTConfig(output_dir=...)`` in Python and ``east-train`` with the same
    recipe resolve to the same arguments. They differ from ``TrainingArguments``' own in:

    - ``eval_strategy="epoch"``, ``save_strategy="epoch"``, ``logging_strategy="epoch"``: the annealing's early
      stopping reads a validation result every epoch, and every evaluation has a checkpoint to return to. With
      ``eval_strategy="steps"`` the checkpoints follow the evaluations (``save_strategy="steps"``, ``save_steps`` =
      ``eval_steps``) unless ``save_strategy`` is set to ``"steps"`` explicitly.
    - ``load_best_model_at_end=True`` with ``metric_for_best_model`` = the anneal monitor (``east_anneal_key``, e.g.
      ``eval_fbeta``): the model kept is the one the annealing judged best, by the metric it is trained for.
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
            loss registry, ``east_hf.core.loss.LOSSES``): ``"ce"``, ``"wce"`` (class-weighted), ``"la"``
            (logit-adjusted, Menon et al. 2021, tau = 1) or ``"dice"`` (soft Dice).
        east_metric (`str`, defaults to `"fbeta"`): the confusion-matrix metric M to train for; the loss is 1 - M.
        east_beta (`float`, `list[float]` or `dict[str, float]`, defaults to `1.0`): F-beta's beta, one for all
            classes, one per class, or a mapping from class name (``id2label``) to beta, the rest 1.0.
        east_beta_floor (`float`, defaults to `1.0`): the surrogate trains each class at ``max(beta_k, floor)``;
            ``east_beta`` still defines the metric the model is judged by (validation, annealing, best model, test);
            the decision-rule tuner uses the floor too (``EASTTrainer.tune_decision_rule``). Why: on a class that is hard to separate, the training-set optimum of F-beta < 1
            is reached by memorising a pure subset of the training positives and pushing the others to p ~ 0, where
            softmax gives them almost no gradient; recall-leaning betas (> 1) are left as given. ``0`` trains the
            configured beta, as the paper (evidence: the documentation's "Per-class beta" results page).
        east_average (`str`, defaults to `"macro"`): macro, weighted, micro or binary.
        east_pos_label (`int`, defaults to `1`): the positive class for ``east_average="binary"``.
        east_threshold_grad (`bool`, defaults to `True`): gradients flow through the dynamic threshold.
        east_sync_across_processes (`bool`, defaults to `True`): all-reduce the soft confusion matrix across
            processes so every process optimises the surrogate of the global batch.

    Parameters that control the annealing (paper Sec. 4.3; the schedule is ``annealing_schedule()``):
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
            a loss watched across stages (the paper's letter); see ``resolved_anneal_threshold``.
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
            stage k (``AnnealingSchedule.ce_weight``, ``east_hf.core.loss.MixedSetLoss``); 0 is EAST alone, as the
            paper. None: 1.0 for EAST, 0 for the baselines (``resolved_ce_weight``). The warm start is its w = inf
            version.
        east_ce_loss (`str`, defaults to `None`): the cross-entropy EAST uses, in the warm start and as the annealed
            weight's term: ``"ce"``, ``"wce"`` (class-weighted) or ``"la"`` (logit-adjusted), with the training
            split's class priors as the baselines of those names. None: ``"la"`` for EAST, ``"ce"`` for the warm
            start of the ``dice`` baseline (``resolved_ce_loss``). EAST's defaults, weight 1 and ``"la"``, are the
            logit-adjusted annealed mix: the plain cross-entropy pulls a rare class's predictions towards the majority
            class, the logit-adjusted one does not. The paper's loss is ``east_ce_weight=0`` (with
            ``east_warm_start="none"`` for its cold start). Without class priors (a training set that cannot be
            counted and no ``east_class_priors``), ``"la"`` and ``"wce"`` fall back to ``"ce"`` with a warning.
        east_class_priors (`list[float]`, `dict[str, float]` or `str`, defaults to `None`): the class counts or
            priors of ``wce``, ``la`` and ``east_ce_loss`` ``wce`` / ``la``, instead of counting the training split:
            a list by class index, a mapping from class name (``id2label``) to value naming every class, or a
            ``.json`` (list or mapping) or ``.csv`` (``class,count`` rows) file. Counts or probabilities: only the
            ratios matter. Why: an ``IterableDataset`` (a stream) cannot be counted, and counting a data set without
            a label column runs every sample through its transforms. None: count the training split's ``labels`` /
            ``label`` column (``training_class_counts``).
        east_confusion_memory (`float`, defaults to `0.0`): d in [0, 1): train on the batch's soft confusion matrix
            plus a detached memory of the stage's earlier batches, m <- d * (m + C_batch), so rare-class rates are
            not estimated from one batch's few positives. The memory holds about 1 / (1 - d) batches, is emptied
            when the temperature changes, is not kept in checkpoints (a resumed run starts it empty), and is summed
            over processes like the batch's matrix. 0: the batch alone, as the paper.
        east_annealing (`bool`, defaults to `True`): install the temperature annealing callback.

    Every setting is validated once, by the core object that owns it (``build_loss`` and ``AnnealingSchedule``,
    through ``east_hf.core.validation``), when the config is made. The evidence behind each default is in the
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
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "Load the checkpoint the anneal monitor judged best when training ends."}
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
        metadata={"help": f"Loss: {describe_losses()}."},
    )
    east_metric: str = field(default="fbeta", metadata={"help": f"Metric to train for, one of {sorted(METRICS)}."})
    east_beta: Any = field(
        default=1.0,
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
    east_threshold: float = field(
        default=1e-2, metadata={"help": "Minimum change of the stage monitor that counts as an improvement."}
    )
    east_threshold_mode: str = field(
        default="rel",
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
        default=None,
        metadata={"help": "Length of the warm start in optimiser steps; overrides east_warm_start_epochs."},
    )
    east_ce_weight: float | None = field(
        default=None,
        metadata={
            "help": "Cross-entropy weight added to EAST in stage 0 (0: EAST alone, the paper's loss); default 1."
        },
    )
    east_ce_weight_decay: float = field(
        default=0.5,
        metadata={"help": "Factor the cross-entropy weight is multiplied by at each temperature decrease."},
    )
    east_ce_loss: str | None = field(
        default=None,
        metadata={
            "help": "Cross-entropy of the warm start and the annealed weight: 'ce', 'wce' or 'la' (logit-adjusted); "
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
        default=0.0,
        metadata={"help": "Decay in [0, 1) of a memory of earlier batches' soft confusion matrices (0: none)."},
    )
    east_annealing: bool = field(default=True, metadata={"help": "Install the temperature annealing callback."})
    # The annealing state (stage, temperature, counters) lives in a stateful callback: resume it by default.
    restore_callback_states_from_checkpoint: bool = field(
        default=True, metadata={"help": "Restore the annealing callback's state when resuming from a checkpoint."}
    )

    def __post_init__(self):
        self._validate_east()
        if self.load_best_model_at_end and self.metric_for_best_model is None:
            self.metric_for_best_model = self.east_anneal_key  # keep the model the annealing judged best
        if self.load_best_model_at_end and self.eval_strategy == "steps" and self.save_strategy == "epoch":
            # A checkpoint at every evaluation (load_best_model_at_end needs one); "epoch" is this class's default.
            self.save_strategy = "steps"
            if self.eval_steps is not None:
                self.save_steps = self.eval_steps
        if self.label_names is None:
            self.label_names = ["labels"]  # plain nn.Modules have no `labels` argument for the Trainer to find
        if self.dataloader_pin_memory and not torch.accelerator.is_available():
            self.dataloader_pin_memory = False  # nothing to pin for; torch warns on every data loader otherwise
        if not self.use_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.accelerator.is_available():
            # Under torchrun / accelerate launch without an accelerator, transformers would otherwise run every process
            # as its own single-process run (no DDP, unsynchronised copies writing into one folder): use gloo on CPU.
            logger.info(f"WORLD_SIZE={os.environ['WORLD_SIZE']} without an accelerator: use_cpu=True (gloo backend)")
            self.use_cpu = True
        if _one_process_of_several():
            logger.warning(
                "accelerate launch asked for several processes and started this one alone (without --multi_gpu it "
                "runs one process): training runs in 1 process; launch with torchrun --nproc_per_node N, or add "
                "--multi_gpu (on a CPU machine too)"
            )
        bf16 = self.bf16 or self.bf16_full_eval
        if bf16 and not self.use_cpu and not (is_torch_bf16_gpu_available() or is_torch_xla_available()):
            # transformers' own test fails: it would stop with a message about GPUs; resolve or explain it in one line
            if torch.accelerator.is_available():
                device = torch.accelerator.current_accelerator()
                raise ValueError(
                    f"Expected an accelerator with bf16 support for bf16=True, got {device} without it; use fp16=True, "
                    "or use_cpu=True for bf16 autocast on the CPU"
                )
            logger.warning("bf16=True without an accelerator: bf16 autocast on the CPU (use_cpu=True)")
            self.use_cpu = True
        super().__post_init__()

    def _validate_east(self) -> None:
        check_choice("east_loss", self.east_loss, tuple(LOSSES))
        self.east_beta = parse_beta(self.east_beta, "east_beta")
        if self.east_class_priors is not None:  # a file is read now: the arguments saved with a run hold its values
            self.east_class_priors = parse_class_priors(self.east_class_priors, "east_class_priors")
        if self.east_ce_weight is not None and self.east_ce_weight > 0 and self.east_loss != "east":
            raise ValueError(f"Expected east_ce_weight 0 for east_loss={self.east_loss!r} (it mixes into EAST only)")
        if self.east_ce_loss is not None:
            check_choice("east_ce_loss", self.east_ce_loss, ("ce", *PRIOR_LOSSES))
        if self.east_ce_loss not in (None, "ce") and self.east_loss not in ("east", "dice"):
            raise ValueError(f"Expected east_ce_loss 'ce' for east_loss={self.east_loss!r} (it is EAST's and Dice's)")
        memory = self.east_confusion_memory
        if isinstance(memory, (int, float)) and memory > 0 and self.east_loss != "east":
            raise ValueError(f"Expected east_confusion_memory 0 for east_loss={self.east_loss!r} (it is EAST's)")
        if not (self.east_warm_start_epochs == -1 or isinstance(self.east_warm_start_epochs, (int, float))):
            raise ValueError(f"Expected east_warm_start_epochs > 0 or -1, got {self.east_warm_start_epochs!r}")
        if self.east_annealing:
            check_evaluates(self.eval_strategy)
        self.check_loss_anneal_monitor()
        # Validation is the core objects' own: build them once (class names are not known yet, so a beta mapping is
        # checked for its values; the trainer resolves its names against the model's id2label).
        beta = list(self.east_beta.values()) if isinstance(self.east_beta, Mapping) else self.east_beta
        try:
            build_loss("east", **{**self._loss_settings(), "beta": beta})
        except (ValueError, TypeError) as e:
            raise _field_error(
                e, {"metric", "beta", "beta_floor", "average", "pos_label", "temperature", "confusion_memory"}
            ) from None
        try:
            self.annealing_schedule()
        except (ValueError, TypeError) as e:
            raise _field_error(e, set(AnnealingSchedule().settings())) from None

    def _loss_settings(self) -> dict[str, Any]:
        return dict(
            metric=self.east_metric,
            beta=self.east_beta,
            beta_floor=self.east_beta_floor,
            average=self.east_average,
            pos_label=self.east_pos_label,
            temperature=self.east_temperature,
            threshold_grad=self.east_threshold_grad,
            confusion_memory=self.east_confusion_memory,
        )

    def check_loss_anneal_monitor(self) -> None:
        """An anneal monitor that is the validation loss compares the loss of different stages, so every stage must
        train the same kind of loss: not after a cross-entropy warm start (its loss is cross-entropy, far below any
        surrogate, so it would be the best "stage" and the model kept), nor with a cross-entropy weight that changes
        from stage to stage. The paper's letter (``east_warm_start none``, ``east_ce_weight 0``) passes, and so do the
        baselines (one loss throughout; ``dice`` alone has a warm start) and runs without annealing."""
        if (
            not self.east_annealing
            or self.east_loss not in ("east", "dice")
            or monitor_mode(self.east_anneal_key) != "min"
        ):
            return
        if self.east_warm_start != "none":
            raise ValueError(
                f"Expected east_warm_start 'none' with east_anneal_monitor={self.east_anneal_key!r} (the warm start's "
                "cross-entropy would be compared with EAST's surrogate and kept as the best stage), got "
                f"east_warm_start={self.east_warm_start!r}; or watch a hard metric across stages (the default)"
            )
        ce_weight = self.resolved_ce_weight()
        if ce_weight > 0:
            raise ValueError(
                f"Expected east_ce_weight 0 with east_anneal_monitor={self.east_anneal_key!r} (the loss changes with "
                f"the weight from stage to stage), got {ce_weight:g}; or watch a hard metric across stages (the default)"
            )

    def resolved_ce_weight(self) -> float:
        """The cross-entropy weight of EAST's stage 0: ``east_ce_weight``, by default 1.0; 0 for the baselines."""
        if self.east_loss != "east":
            return 0.0
        return 1.0 if self.east_ce_weight is None else float(self.east_ce_weight)

    @property
    def resolved_ce_loss(self) -> str:
        """The cross-entropy of the warm start and the annealed weight: ``east_ce_loss``, by default ``"la"`` for EAST
        and ``"ce"`` for the others (``dice``'s warm start; the cross-entropy baselines have none)."""
        if self.east_ce_loss is not None:
            return self.east_ce_loss
        return "la" if self.east_loss == "east" else "ce"

    @property
    def trains_cross_entropy(self) -> bool:
        """Whether EAST's (or dice's) cross-entropy trains: in a warm start, or as the annealed weight."""
        warm_start = self.east_annealing and self.east_warm_start != "none" and self.east_loss in ("east", "dice")
        return warm_start or self.resolved_ce_weight() > 0

    @property
    def needs_class_counts(self) -> bool:
        """Whether building the losses needs class counts or priors (``wce`` or ``la``, as the loss or as the
        cross-entropy that trains beside EAST): ``class_priors``, else the training split's counts."""
        ce_counts = self.trains_cross_entropy and self.resolved_ce_loss in PRIOR_LOSSES
        return self.east_loss in PRIOR_LOSSES or ce_counts

    @property
    def needs_only_ce_counts(self) -> bool:
        """Whether only EAST's (or dice's) cross-entropy needs the class priors, which it can do without."""
        return self.east_loss not in PRIOR_LOSSES and self.needs_class_counts

    def class_priors(self, num_classes: int | None = None, class_names: Any = None) -> list[float] | None:
        """``east_class_priors`` as one value per class (``class_names``, a list or an ``id2label`` mapping, resolves
        a mapping by class name), or None when they are to be counted from the training split."""
        if self.east_class_priors is None:
            return None
        return resolve_class_priors(self.east_class_priors, class_names, num_classes, "east_class_priors")

    def build_ce_loss(self, class_counts: Any = None, warn: bool = True) -> SetLoss:
        """The cross-entropy of the warm start and of the annealed weight (``east_ce_loss``). Without
        ``class_counts`` a ``wce`` / ``la`` falls back to the plain cross-entropy, with a warning (``warn``): the
        default trains on any data set, a stream without ``east_class_priors`` included."""
        name = self.resolved_ce_loss
        if class_counts is None and name in PRIOR_LOSSES and not (warn and self.trains_cross_entropy):
            return build_loss("ce")  # it never trains: no priors needed, nothing to say
        if class_counts is None and name in PRIOR_LOSSES:
            logger.warning(
                f"east_ce_loss={name!r} without class priors (a training set that cannot be counted and "
                "no east_class_priors): EAST's cross-entropy is the plain one ('ce'); pass east_class_priors to "
                "adjust it"
            )
            return build_loss("ce")
        return build_loss(name, class_counts=class_counts)

    def build_loss(self, num_classes: int | None = None, class_names: Any = None, class_counts: Any = None) -> SetLoss:
        """The loss ``east_loss`` names, with the surrogate's settings (``EASTLoss``) or none (the baselines).

        ``class_names`` (a list or an ``id2label`` mapping) resolves an ``east_beta`` given by class name;
        ``class_counts`` (training samples per class) are the priors of ``wce`` and ``la``.
        """
        if self.east_loss != "east":
            return build_loss(self.east_loss, class_counts=class_counts)
        return build_loss("east", num_classes=num_classes, class_names=class_names, **self._loss_settings())

    @property
    def east_anneal_key(self) -> str:
        """The metric key watched across stages: ``east_anneal_monitor``, or ``eval_<target metric>``."""
        return anneal_key(self.east_metric, self.east_anneal_monitor)

    def resolved_anneal_threshold(self, eval_size: int | None = None) -> float:
        """The minimum across-stage improvement: ``east_anneal_threshold``, or by default 2 / ``eval_size`` (two
        validation samples' worth) when the anneal monitor is maximised (a hard metric), and 0 when it is minimised
        (a loss, the paper's letter) or the validation set's size is unknown (None, or an iterable dataset)."""
        if self.east_anneal_threshold is not None:
            return float(self.east_anneal_threshold)
        if monitor_mode(self.east_anneal_key) == "min" or not eval_size:
            return 0.0
        return 2.0 / eval_size

    def annealing_schedule(self, eval_size: int | None = None, streamed: bool = False) -> AnnealingSchedule:
        """The ``AnnealingSchedule`` of the ``east_*`` fields, for a validation set of ``eval_size`` samples (it sets
        the default across-stage threshold, ``resolved_anneal_threshold``). Baselines get one stage (their early
        stopping, with the same patience) and the cross-entropy baselines (``ce``, ``wce``, ``la``) no warm start.
        ``streamed``: the training set has no length (an ``IterableDataset``), so a warm start measured in epochs
        runs until its own early stopping instead, with a warning (``east_warm_start_steps`` sets its length)."""
        warm_start = self.east_warm_start if self.east_loss in ("east", "dice") else "none"
        epochs = self.east_warm_start_epochs
        if streamed and warm_start != "none" and self.east_warm_start_steps is None and epochs != -1:
            logger.warning(
                f"east_warm_start_epochs={epochs:g} on a training set without a length: the warm start runs until its "
                "own early stopping (east_warm_start_epochs=-1); set east_warm_start_steps to give it a length"
            )
            epochs = -1
        return AnnealingSchedule(
            temperature=self.east_temperature,
            decay=self.east_decay,
            patience=self.east_patience,
            stage_patience=self.east_stage_patience,
            min_temperature=self.east_min_temperature,
            max_stages=self.east_max_stages if self.east_loss == "east" else 1,
            threshold=self.east_threshold,
            threshold_mode=self.east_threshold_mode,
            anneal_threshold=self.resolved_anneal_threshold(eval_size),
            stage_mode=monitor_mode(self.east_stage_monitor),
            anneal_mode=monitor_mode(self.east_anneal_key),
            warm_start=warm_start,
            warm_start_steps=self.east_warm_start_steps,
            warm_start_epochs=None if epochs == -1 else epochs,  # -1: the warm start's own early stopping
            ce_weight=self.resolved_ce_weight(),
            ce_weight_decay=self.east_ce_weight_decay,
        )

    def annealing_callback(self, eval_size: int | None = None, streamed: bool = False):
        """The ``TemperatureAnnealingCallback`` that ``EASTTrainer`` installs from this config, for a validation set
        of ``eval_size`` samples and a training set with (or, ``streamed``, without) a length."""
        return TemperatureAnnealingCallback(
            self.annealing_schedule(eval_size, streamed),
            stage_monitor=self.east_stage_monitor,
            anneal_monitor=self.east_anneal_key,
            restore_best_per_stage=self.east_restore_best_per_stage,
        )

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
