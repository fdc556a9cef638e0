"""EASTTrainer: the EAST surrogate inside the Hugging Face ``Trainer``.

A confusion-matrix metric is a function of a whole set, not a mean over samples. Three places of the usual
per-batch-loss machinery are therefore handled here:

Multi-process training (``east_sync_across_processes=True``, the default)
    Each process computes the soft confusion matrix C_r of its shard, all-reduces it with the differentiable
    ``torch.distributed.nn.functional.all_reduce`` to the global C = sum_r C_r, and computes L = 1 - M(C). The
    all-reduce's backward sums the W identical upstream gradients dL/dC (a factor W on every process) and DDP then
    averages parameter gradients over the W processes (a factor 1/W): the two cancel, so the gradient every process
    applies equals the gradient of single-process training on the concatenated global batch, with no rescaling.
    With the switch off each process optimises the surrogate of its own local batch and DDP averages those W
    gradients: the gradient of the mean of W local surrogates, each with the larger 1/sqrt(n) error of a smaller
    batch (paper Theorem 5.8).

Gradient accumulation
    ``loss_is_scaled_for_ga = False``: the Trainer divides each micro-batch loss by the k accumulation steps, so one
    optimizer step follows the gradient of the mean of the k micro-batch surrogates, (1/k) sum_i grad(1 - M(C_i)).
    That is not the gradient of the surrogate of the union of the micro-batches (M is not additive); use a larger
    per-device batch or more processes, which are exact, when the batch the surrogate sees matters.

Evaluation
    ``eval_loss`` is the loss of the whole evaluation set and the hard metrics are scored from per-class counts
    (``east_hf.hf.training.evaluation``): ``evaluate`` keeps no logits. The trainer reports the hard metrics of its
    target (``eval_fbeta``, ``eval_mcc``, ``eval_accuracy``, ``eval_precision``, ``eval_recall``, and per-class keys as
    ``build_compute_metrics``) with or without a ``compute_metrics`` of the user's, whose keys are reported beside
    them as it returns them (a key of the user's with an own key's name keeps the user's value), so the annealing and
    the best checkpoint have their metric with no extra wiring. A monitor no evaluation reports is refused before
    training where the keys are known, else at the first evaluation.

Everything the trainer trains with is built once at ``__init__`` from the config (``east_hf.hf.config.build``), and
control flows one way: the annealing callback holds the schedule; the trainer finds the callback in its own callback
list and pulls the stage, the temperature and whether the warm start's cross-entropy is on. Temperature and stage are
added to every log of an EAST run, in ``log`` alone (a baseline has no temperature: its logs carry the stage only with
a warm start). The trainer is composed of helpers with public methods that its Trainer overrides delegate to: the
evaluation from counts (``east_hf.hf.training.evaluation.CountedEvaluation``) and the non-finite monitor
(``east_hf.hf.training.nonfinite.NonFiniteMonitor``); the settings refused when it is made are in
``east_hf.hf.training.inputs``, the checks before the first step in ``east_hf.hf.training.resume``, the warnings about
the kept model in ``east_hf.hf.training.kept_model_warnings``.
"""

from __future__ import annotations

import logging
import os
from functools import partial
from typing import Any

import torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

import east_hf.hf.models  # noqa: F401  (registers darknet19 with timm and the tabular MLP with the Auto classes)
from east_hf.core.loss_registry import SetLoss
from east_hf.hf.cards.model_card import check_hub_push, write_model_card
from east_hf.hf.config.build import build_components, build_target_metrics
from east_hf.hf.config.east_config import EASTConfig
from east_hf.hf.devices import SumAcrossProcesses
from east_hf.hf.metrics.inputs import CountedMetrics
from east_hf.hf.models.lora import adapter_files
from east_hf.hf.training.callbacks import TemperatureAnnealingCallback
from east_hf.hf.training.collapse import head_input_spread
from east_hf.hf.training.dataset_stats import training_class_counts
from east_hf.hf.training.evaluation import (
    CountedEvaluation,
    check_monitors,
    evaluation_mode,
    is_users_compute_metrics,
    logits_of,
    split_inputs,
)
from east_hf.hf.training.inputs import (
    check_distributed,
    check_early_stopping,
    check_unsharded,
    check_warm_start_length,
    model_collator,
    trainer_arguments,
)
from east_hf.hf.training.kept_model_warnings import warn_near_empty_kept_model, warn_unpredicted_kept_classes
from east_hf.hf.training.nonfinite import NonFiniteMonitor, check_finite_parameters
from east_hf.hf.training.resume import (
    check_saved_schedule,
    first_batch_logits,
    load_renamed_weights,
    resolve_checkpoint,
)

__all__ = ["EASTTrainer", "logits_of", "training_class_counts"]

logger = logging.getLogger(__name__)


class EASTTrainer(Trainer):
    """``Trainer`` that optimises 1 - M(C_T), the EAST surrogate of a confusion-matrix metric M (or a baseline loss).

    Takes an ``EASTConfig`` as ``args``. Works with any model whose output has ``.logits`` or that returns a logits
    tensor; the model's own cross-entropy is not computed (``labels`` are not passed to it). Installs the config's
    ``TemperatureAnnealingCallback`` unless one is passed in ``callbacks``. transformers' ``EarlyStoppingCallback`` is
    refused beside it (in ``callbacks`` or through ``add_callback``): it would end training inside a stage, before the
    annealing's own early stopping (``east_patience``, ``east_stage_patience``); with ``east_annealing=False`` it is
    allowed. It reports the hard metrics of its target (``east_hf.hf.config.build``), beside the keys of a
    ``compute_metrics`` of the user's. A ``labels`` / ``label`` column of lists of label ids
    (``Sequence(ClassLabel(...))``) becomes multi-hot rows of the model's labels
    (``east_hf.hf.data.multi_hot.multi_hot_labels``).

    Attributes:
        east_loss: the loss ``args.east_loss`` names (``EASTLoss``, or a baseline ``SetLoss``), built once here.
        warm_start_loss: the cross-entropy of the warm start and the annealed weight's term (``args.east_ce_loss``).
        east_ce_weight: w0 of the annealed cross-entropy weight (``EASTConfig.resolved_ce_weight``; 0: EAST alone),
            applied stage by stage by the annealing schedule (``AnnealingSchedule.ce_weight``).
        annealing: the annealing callback in this trainer's callback list, or None (read-only).
        east_stage, east_temperature, use_cross_entropy: the current stage, its temperature and whether the loss is
            cross-entropy (the warm start, or ``east_loss="ce"``), read from ``annealing.schedule`` (read-only).
    """

    # Our loss is a per-batch surrogate: let the Trainer divide it by the accumulation steps (see module docstring).
    loss_is_scaled_for_ga = False

    def __init__(
        self, model: nn.Module | None = None, args: EASTConfig | None = None, *pargs, callbacks=None, **kwargs
    ):
        if args is None:
            args = EASTConfig(output_dir="trainer_output")
        if not isinstance(args, EASTConfig):
            if isinstance(args, TrainingArguments):
                raise TypeError(
                    "Expected args as an east_hf.EASTConfig, got transformers.TrainingArguments; "
                    "build EASTConfig(**your_args.to_dict()) or EASTConfig(output_dir=...)"
                )
            raise TypeError(f"Expected args as an east_hf.EASTConfig, got {type(args).__name__}")
        check_hub_push(args)  # push_to_hub without network or token fails now, not after training
        kwargs = trainer_arguments(model, pargs, kwargs)  # by name; lists of label ids as multi-hot rows
        callbacks = list(callbacks or [])
        train, evaluation = kwargs.get("train_dataset"), kwargs.get("eval_dataset")
        components = build_components(args, model, train, evaluation, callbacks, kwargs.get("compute_metrics"))
        self.east_loss: SetLoss = components.loss
        self.warm_start_loss = components.ce_loss
        self.east_ce_weight = args.resolved_ce_weight  # w0 of the annealed cross-entropy weight
        self._mixed_loss = (
            components.mixed_loss
        )  # EAST plus the annealed cross-entropy, in the stages with a weight > 0
        self._fallback_loss = components.fallback_loss  # the warm start's loss after falling back (plain ce)
        self._fallback_mixed_loss = components.fallback_mixed_loss  # the annealed mix after falling back
        self._loss_device: torch.device | None = None  # where the losses' buffers are: the last logits' device
        self._num_classes = components.num_classes
        self.multi_label = components.multi_label
        config = getattr(model, "config", None)
        if self.multi_label and config is not None and getattr(config, "problem_type", None) is None:
            # saved with the model: the Auto classes, pipeline() and east-predict then use sigmoid, per label
            config.problem_type = "multi_label_classification"
        if components.compute_metrics is not None:
            kwargs["compute_metrics"] = components.compute_metrics
        self._target_metrics = components.target_metrics  # counted beside a compute_metrics of the user's
        # What the model card needs beyond the Trainer's own state (east-train fills it: test metrics, recipe, data).
        self.east_card_info: dict[str, Any] = {}
        self._soft_metric_sum = None
        self._soft_metric_count = 0
        self.decision_rule = self.decision_beta = None  # set by tune_decision_rule
        if components.annealing is not None:
            callbacks.append(components.annealing)
        check_warm_start_length(components.annealing, train)
        check_early_stopping(callbacks)
        super().__init__(model, args, callbacks=callbacks, **kwargs)
        check_distributed(self.args, self.accelerator, components.annealing)
        losses = tuple(dict.fromkeys((self.east_loss, self.warm_start_loss, self._fallback_loss)))
        self._nonfinite = NonFiniteMonitor(losses, self.accelerator.num_processes, self.args.device)
        self._evaluator = CountedEvaluation(self.accelerator, self._current_loss, self._counted_metrics)
        self.model_accepts_loss_kwargs = False  # transformers < 5.19 reads this instead of loss_is_scaled_for_ga

    def add_callback(self, callback) -> None:
        """``Trainer.add_callback``; an ``EarlyStoppingCallback`` beside the annealing callback is refused in one line,
        as in ``__init__``."""
        handler = getattr(self, "callback_handler", None)
        check_early_stopping([*(handler.callbacks if handler is not None else []), callback])
        super().add_callback(callback)

    def _counted_metrics(self, num_classes: int) -> CountedMetrics:
        """The metrics an evaluation counts: a ``compute_metrics`` of east_hf's, else the hard metrics of the target
        (made on first use for ``num_classes`` classes where the model's config does not give them), which are also
        ``compute_metrics`` when none was given."""
        if isinstance(self.compute_metrics, CountedMetrics):
            return self.compute_metrics
        if self._target_metrics is None:
            id2label = getattr(getattr(self.model, "config", None), "id2label", None)
            self._target_metrics = build_target_metrics(self.args, num_classes, id2label, self.multi_label)
        if self.compute_metrics is None:
            self.compute_metrics = self._target_metrics
        return self._target_metrics

    def _check_monitors(self, metrics: dict[str, float] | None = None, num_classes: int | None = None) -> None:
        """The keys ``metric_for_best_model`` and (in training) the annealing watch must be reported: at a validation
        evaluation among its ``metrics``, naming a user's ``compute_metrics`` keys and the trainer's own apart; before
        training (``num_classes``: the logits' width) among the keys known then,
        unless a user's function may add any."""
        users_function = is_users_compute_metrics(self.compute_metrics)  # its keys are not known before it runs
        if metrics is not None:
            keys = self._target_metrics.metric_keys() if users_function and self._target_metrics is not None else ()
            check_monitors(self.args, self.annealing, keys, metrics, self.is_in_train, users_function)
        elif num_classes is not None and not users_function and self.args.eval_strategy != "no":
            keys = self._counted_metrics(num_classes).metric_keys()
            check_monitors(self.args, self.annealing, keys, eval_dataset=self.eval_dataset)

    # ---- the annealing state, pulled from the callback ----
    @property
    def annealing(self) -> TemperatureAnnealingCallback | None:
        """The annealing callback of this trainer (after a resume, the instance restored from the checkpoint)."""
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, TemperatureAnnealingCallback):
                return callback
        return None

    @property
    def east_stage(self) -> int:
        annealing = self.annealing
        return 0 if annealing is None else annealing.schedule.stage

    @property
    def east_temperature(self) -> float:
        annealing = self.annealing
        return self.args.east_temperature if annealing is None else annealing.schedule.temperature

    @property
    def use_cross_entropy(self) -> bool:
        loss = self._stage_loss()  # the warm start's cross-entropy may be logit-adjusted (east_ce_loss)
        return loss is self.warm_start_loss or loss.name == "ce"

    def _stage_loss(self) -> SetLoss:
        """The loss of the current stage, as the annealing schedule gives it (read only): cross-entropy in a warm
        start, else ``east_loss``, or its mix with the annealed cross-entropy where the stage has a weight."""
        annealing = self.annealing
        if annealing is None:
            return self.east_loss
        schedule = annealing.schedule
        if schedule.fell_back:
            warm, mixed = self._fallback_loss, self._fallback_mixed_loss
        else:
            warm, mixed = self.warm_start_loss, self._mixed_loss
        if schedule.in_warm_start:
            return warm
        return mixed if mixed is not None and schedule.ce_weight > 0 else self.east_loss

    def _current_loss(self, logits: torch.Tensor | None = None) -> SetLoss:
        """``_stage_loss`` set to the stage's temperature and cross-entropy weight, to score a batch; given the
        ``logits`` it scores, the losses' buffers (class weights, logit adjustments, margins) are on their device."""
        if logits is not None and logits.device != self._loss_device:
            for loss in (
                self.east_loss,
                self.warm_start_loss,
                self._mixed_loss,
                self._fallback_loss,
                self._fallback_mixed_loss,
            ):
                if loss is not None:
                    loss.to(logits.device)
            self._loss_device = logits.device
        loss = self._stage_loss()
        annealing = self.annealing
        if annealing is not None and not annealing.schedule.in_warm_start:
            loss.set_stage(annealing.schedule.temperature, annealing.schedule.ce_weight)
        return loss

    # ---- loss ----
    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor | Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ):
        inputs, labels = split_inputs(inputs)
        outputs = model(**inputs)
        logits = logits_of(outputs)
        loss_fn = self._current_loss(logits)
        # additive (EAST: the soft confusion matrix's (3, C) counts); a training step reads nothing from the device:
        # a label out of range weighs 0 and is recorded, raised by NonFiniteMonitor.raise_if_flagged at the next log
        stats = loss_fn.statistics(logits, labels, validate_args=not model.training)
        if self.args.east_sync_across_processes and self.accelerator.num_processes > 1:
            stats = SumAcrossProcesses.apply(stats)
        if model.training:
            stats = loss_fn.with_memory(stats)  # EAST's memory of the stage's earlier batches, if configured
        loss, value = loss_fn.loss_and_soft_metric(stats)
        if model.training:
            self._nonfinite.flag(loss, self.state.global_step + 1)
        if model.training and value is not None:
            self._soft_metric_sum = value if self._soft_metric_sum is None else self._soft_metric_sum + value
            self._soft_metric_count += 1
        return (loss, outputs) if return_outputs else loss

    # ---- logging: temperature, stage and the soft metric, in one place ----
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training log: the Trainer has just synchronised to read the loss
            self._nonfinite.check_training_log(logs, self.state.global_step)
            if self._soft_metric_count:
                mean = self._soft_metric_sum / self._soft_metric_count
                logs[self.east_loss.soft_metric_key] = round(mean.item(), 6)
            self._soft_metric_sum, self._soft_metric_count = None, 0
        # A baseline has no temperature, and without a warm start one stage: those keys would be constants.
        annealing, east = self.annealing, self.east_loss.name == "east"
        if east:
            logs.setdefault("east_temperature", self.east_temperature)
        if east or (annealing is not None and annealing.schedule.has_warm_start):  # Dice's warm start is stage -1
            logs.setdefault("east_stage", self.east_stage)
        super().log(logs, start_time)

    # ---- evaluation from counts: the Trainer's hooks, handed to CountedEvaluation ----
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """One evaluation batch, added to the running sums (``CountedEvaluation.prediction_step``)."""
        inputs = self._prepare_inputs(inputs)
        return self._evaluator.prediction_step(model, inputs, prediction_loss_only, self.state.global_step)

    def evaluation_loop(
        self, dataloader, description, prediction_loss_only=None, ignore_keys=None, metric_key_prefix="eval"
    ):
        """The Trainer's loop, with ``eval_loss`` the loss of the whole set. ``evaluate`` with east_hf's counted
        metrics (``ComputeMetrics``, ``MultiLabelComputeMetrics``: the trainer's own when none is given) keeps no
        logits and scores the metrics from summed counts (``CountedEvaluation.run``); ``predict`` (and a
        ``compute_metrics`` of the user's, which needs the logits) gathers the logits as the Trainer does."""
        # A model trained on a non-finite loss has non-finite weights: name the training step that caused it before
        # an evaluation reports the non-finite logits as a fault of the evaluation data.
        self._nonfinite.raise_if_flagged()
        mode = evaluation_mode(description, self.compute_metrics)
        if mode.count and self.compute_metrics is None:
            prediction_loss_only = None  # evaluate() asks for the loss alone without compute_metrics: count anyway
        loop = partial(
            super().evaluation_loop, dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix
        )
        # preprocess_logits_for_metrics prepares what a user's metrics receive; the trainer's own count the logits
        given = isinstance(self.compute_metrics, CountedMetrics) and self.compute_metrics is not self._target_metrics
        preprocess = self.preprocess_logits_for_metrics if given else None
        output = self._evaluator.run(loop, mode, metric_key_prefix, self.state.global_step, preprocess)
        if metric_key_prefix == "eval":
            self._check_monitors(output.metrics)
            annealing = self.annealing
            if annealing is not None:  # pushed to the callback: one class predicted, the head input's spread
                one_class = self._evaluator.predicted_one_class(self.state.global_step)
                spread = self._head_input_spread() if annealing.watches_collapse and one_class else None
                annealing.note_evaluation(predicted_one_class=one_class, head_spread=spread)
        return output

    def with_logits_on_disk(self, dataset: Any, fn, metric_key_prefix="test"):
        """``fn(logits, labels)`` of the predictions on ``dataset``, never holding them all in memory: ``predict``
        runs on every process and the main process writes each gathered batch's labelled rows to a ``LogitsFile``
        in a temporary folder under ``output_dir``, removed afterwards (``CountedEvaluation.with_logits_on_disk``);
        ``fn`` runs on the main process, its result is returned and its error raised on every process."""
        predict = partial(self.predict, dataset, metric_key_prefix=metric_key_prefix)
        return self._evaluator.with_logits_on_disk(predict, self.args.output_dir, fn)

    # ---- decision rule ----
    def tune_decision_rule(self, eval_dataset: Any = None):
        """Tune per-class logit offsets on ``eval_dataset`` (default: the evaluation set) for the configured metric
        (``east_metric``, ``east_beta``, ``east_average``, ``east_pos_label``) and fold them into the model's output
        bias (``east_hf.hf.models.classifier_head``), so that ``argmax`` of the model's logits applies the tuned rule
        in every later evaluation, ``save_model`` and pipeline. A multi-label model gets one offset per label
        (``east_hf.core.decision.multilabel.tune_label_offsets``), so that ``sigmoid(logits) > 0.5`` of the saved model
        applies it. Returns the ``east_hf.core.decision.rule.DecisionRule``, also kept as ``trainer.decision_rule``. A
        head without a bias is a one-line error before any prediction runs.

        Each batch's validation logits are written to a temporary ``LogitsFile`` under ``output_dir`` (twice their
        size, removed afterwards), which the main process tunes from (``with_logits_on_disk``); every process folds
        the same offsets. A single-label rule reads the file a block of rows or a class's column at a time; a
        multi-label rule reads the whole (N, L) logits back into memory.

        A precision-leaning F-beta is tuned at ``max(beta_k, east_beta_floor)``, as the surrogate trains it: a rule
        tuned for F0.25 on a few dozen validation positives overfits them and scores lower at F0.25 on the test split
        than the rule tuned for F1 (the documentation's "Quality" results). ``east_beta_floor=0`` tunes the beta as
        given. ``trainer.decision_beta`` is the beta tuned for.
        """
        from east_hf.core.decision.rule import fold_offsets_into_bias
        from east_hf.hf.decision_rule import tune_rule
        from east_hf.hf.models import classifier_head

        dataset = self.eval_dataset if eval_dataset is None else eval_dataset
        if dataset is None:
            raise ValueError("Expected a validation set to tune the decision rule on, got none (pass eval_dataset)")
        check_unsharded(self.accelerator, "a decision rule folded into the head's bias")
        head = classifier_head(self.model, self._num_classes)
        id2label = getattr(getattr(self.model, "config", None), "id2label", None)
        tune = partial(tune_rule, args=self.args, loss=self.east_loss, id2label=id2label, multi_label=self.multi_label)
        self.decision_beta, rule = self.with_logits_on_disk(dataset, tune, metric_key_prefix="tune")
        fold_offsets_into_bias(head, rule.offsets)
        self.decision_rule = rule
        return rule

    def evaluate(self, *pargs, **kwargs) -> dict[str, float]:
        """``Trainer.evaluate``; during training with ``east_ema_decay`` > 0 it evaluates the moving average of the
        weights (swapped into the model until the next step,
        ``TemperatureAnnealingCallback.average_for_evaluation``)."""
        annealing = self.annealing
        if annealing is not None:
            annealing.average_for_evaluation(self.accelerator.unwrap_model(self.model))
        return super().evaluate(*pargs, **kwargs)

    # ---- fail early ----
    def train(self, resume_from_checkpoint: str | bool | None = None, *pargs, **kwargs):
        """``Trainer.train``; ``resume_from_checkpoint=True`` (or ``"true"`` / ``"last"``) resumes from the last
        *complete* checkpoint of ``output_dir`` (``east_hf.hf.training.resume``). One collated mini-batch is checked
        before any step (labels present, logits finite and as wide as the configured classes, labels in range). Stops
        with a one-line ``FloatingPointError`` naming the step if a training loss or gradient norm is NaN or inf. A
        checkpoint whose weight names differ from the model's (transformers' conversion mapping, e.g. ViT) is resumed
        from and loaded as the best model through ``from_pretrained``
        (``east_hf.hf.training.resume.load_renamed_weights``): the Trainer's own load would leave those weights at
        their current values."""
        resume_from_checkpoint = resolve_checkpoint(resume_from_checkpoint, self.args.output_dir)
        if resume_from_checkpoint is not None:
            restores = self.args.restore_callback_states_from_checkpoint
            check_saved_schedule(resume_from_checkpoint, self.annealing, restores)
        self._check_monitors(num_classes=self._check_first_batch() or self._num_classes)
        annealing = self.annealing
        if resume_from_checkpoint is None and annealing is not None and annealing.watches_collapse:
            annealing.note_initial_spread(self._head_input_spread())
        model = self.accelerator.unwrap_model(self.model)
        if resume_from_checkpoint is not None:  # the weights the Trainer's load_state_dict cannot name (resume.py)
            load_renamed_weights(model, resume_from_checkpoint)
        result = super().train(resume_from_checkpoint, *pargs, **kwargs)
        self._nonfinite.raise_if_flagged()  # steps after the last log
        best = self.state.best_model_checkpoint
        if self.args.load_best_model_at_end and best and os.path.isdir(best):
            load_renamed_weights(self.accelerator.unwrap_model(self.model), best)
            binary = self.args.east_average == "binary" and not self.multi_label
            warn_near_empty_kept_model(self.state.log_history, self.state.best_global_step, binary)
            if not binary:  # binary: the near-empty warning above speaks of the one class scored
                id2label = getattr(getattr(self.model, "config", None), "id2label", None)
                unpredicted, supported = self._evaluator.unpredicted_classes()
                best = self.state.best_global_step
                warn_unpredicted_kept_classes(unpredicted, best, id2label, self.multi_label, supported)
        return result

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        """``Trainer.save_model``, refused (one line, nothing written) after a non-finite loss or with NaN / inf
        parameters: a model that cannot predict is never saved over a good one. Saves draw no progress bar. A peft
        model saves its adapter and ``classifier_config.json`` (``east_hf.hf.models.lora.adapter_files``)."""
        self._nonfinite.raise_if_flagged()
        check_finite_parameters(self.model, self.state.global_step)
        # save_pretrained's "Writing model shards" bar at every save is noise beside the Trainer's own bars: off.
        bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            model = self.accelerator.unwrap_model(self.model)
            with adapter_files(model, output_dir or self.args.output_dir, self.args.should_save):
                return super().save_model(output_dir, _internal_call)
        finally:
            if bars_were_on:
                hf_logging.enable_progress_bar()

    def _check_first_batch(self) -> int | None:
        """Check one collated mini-batch before any step: labels present, logits as wide as the configured classes.
        Returns the logits' width (None: a training set that cannot be indexed)."""
        collate = model_collator(self.model, self.data_collator, self.args.remove_unused_columns, self.label_names)
        first = first_batch_logits(self.model, self.train_dataset, collate, self._prepare_inputs)
        if first is None:
            return None
        logits, labels = first
        C = self._num_classes
        if logits.ndim != 2 or (C is not None and logits.shape[1] != C):
            raise ValueError(
                f"Expected logits of shape (N, {C}) for the configured classes, got {tuple(logits.shape)}"
            )
        if self.east_loss.name == "east":
            self.east_loss.bind_num_classes(logits.shape[1])
        self._current_loss(logits).statistics(logits, labels)  # labels in range, beta length
        return logits.shape[1]

    def _head_input_spread(self) -> float | None:
        """The spread across the leading validation rows of the input of the model's head
        (``east_hf.hf.training.collapse.head_input_spread``), which the annealing callback compares with the untrained
        network's to tell a warm start that lost its input; None without an evaluation set."""
        if self.eval_dataset is None or isinstance(self.eval_dataset, dict):
            return None
        batches = self.get_eval_dataloader()
        return head_input_spread(self.model, batches, self._prepare_inputs, self.accelerator)

    # ---- model card ----
    def create_model_card(
        self,
        language: str | list[str] | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
    ):
        """Write east_hf's model card (README.md + annealing.png) into ``output_dir``; used by ``push_to_hub``.

        Takes ``Trainer.create_model_card``'s arguments. A trainer built in Python (no ``east-train`` test results in
        ``east_card_info``) gets its model-index from the last validation evaluation in its log.
        """
        info = dict(self.east_card_info)
        info.update({k: v for k, v in (("language", language), ("license", license)) if v is not None})
        if model_name:
            info.setdefault("model_name", model_name)
        if tags:
            info["tags"] = list(info.get("tags") or []) + ([tags] if isinstance(tags, str) else list(tags))
        if finetuned_from:
            info.setdefault("base_model", finetuned_from)
        if dataset:
            info.setdefault("dataset_name", dataset if isinstance(dataset, str) else dataset[0])
        if not info.get("test_metrics"):
            evaluations = [e for e in self.state.log_history if "eval_loss" in e]
            if evaluations:
                info.update(test_metrics=evaluations[-1], metric_prefix="eval", dataset_split="validation")
        return write_model_card(self, **info)
