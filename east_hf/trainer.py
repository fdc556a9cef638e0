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
    ``eval_loss`` is the surrogate of the whole evaluation set at the current temperature: the soft memberships of
    every batch (gathered across processes, duplicates of uneven sharding dropped) are summed into one confusion
    matrix and the metric is applied once. Hard metrics come from ``compute_metrics``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer, TrainingArguments

from east_hf.cards import hub_preflight, write_model_card
from east_hf.config import EASTConfig, resolve_beta
from east_hf.functional.baselines import soft_dice_loss
from east_hf.functional.surrogate import _check_labels, confusion_from_memberships, soft_predictions
from east_hf.loss import EASTLoss

__all__ = ["EASTTrainer", "logits_of"]

logger = logging.getLogger(__name__)


def logits_of(outputs: Any) -> torch.Tensor:
    """The (N, C) logits of a model's output: ``.logits``, a ``"logits"`` key, a tensor, or the first element."""
    if isinstance(outputs, torch.Tensor):
        return outputs
    if getattr(outputs, "logits", None) is not None:
        return outputs.logits
    if isinstance(outputs, dict) and "logits" in outputs:
        return outputs["logits"]
    if isinstance(outputs, (tuple, list)) and outputs and isinstance(outputs[0], torch.Tensor):
        return outputs[0]
    raise TypeError(f"Expected model outputs with .logits or a logits tensor, got {type(outputs).__name__}")


def _all_reduce_differentiable(tensor: torch.Tensor) -> torch.Tensor:
    from torch.distributed.nn.functional import all_reduce

    return all_reduce(tensor)


class EASTTrainer(Trainer):
    """``Trainer`` that optimises 1 - M(C_T), the EAST surrogate of a confusion-matrix metric M.

    Takes an ``EASTConfig`` as ``args``. Works with any model whose output has ``.logits`` (transformers image
    classifiers, ``TimmWrapperForImageClassification``) or that returns a logits tensor; the model's own
    cross-entropy is not computed (``labels`` are not passed to it). Installs ``TemperatureAnnealingCallback`` from
    the config unless one is passed in ``callbacks``.

    Attributes:
        east_loss: the ``EASTLoss`` in use; its ``temperature`` is what the annealing sets.
        use_cross_entropy: when True (a cross-entropy warm start, or ``east_loss="ce"``) the loss is cross-entropy.
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
        hub_preflight(args)  # push_to_hub without network or token fails now, not after training
        if args.label_names is None:
            args.label_names = ["labels"]  # plain nn.Modules have no `labels` argument for the Trainer to find
        config = getattr(model, "config", None)
        num_classes = getattr(config, "num_labels", None)
        id2label = getattr(config, "id2label", None)
        beta = args.east_beta
        if num_classes is not None:
            beta = resolve_beta(beta, id2label, num_classes)
        elif isinstance(beta, dict) and not all(str(k).isdigit() for k in beta):
            raise ValueError(
                "Expected a model with config.id2label to resolve east_beta class names, got a model without config"
            )
        self.east_loss = EASTLoss(
            metric=args.east_metric,
            beta=beta,
            average=args.east_average,
            pos_label=args.east_pos_label,
            temperature=args.east_temperature,
            num_classes=num_classes,
            threshold_grad=args.east_threshold_grad,
        )
        self.use_cross_entropy = args.east_loss == "ce"
        self.east_stage = 0
        # What the model card needs beyond the Trainer's own state (east-train fills it: test metrics, recipe, data).
        self.east_card_info: dict[str, Any] = {}
        self._soft_metric_sum = None
        self._soft_metric_count = 0
        self._eval_confmat = None
        callbacks = list(callbacks or [])
        if args.east_annealing:
            from east_hf.callbacks import TemperatureAnnealingCallback

            if not any(isinstance(c, TemperatureAnnealingCallback) for c in callbacks):
                # Baselines (ce, dice) get one stage: plain early stopping with the same patience.
                overrides = {} if args.east_loss == "east" else {"max_stages": 1}
                callbacks.append(TemperatureAnnealingCallback.from_config(args, **overrides))
        super().__init__(model, args, *pargs, callbacks=callbacks, **kwargs)
        self.model_accepts_loss_kwargs = False  # transformers < 5.19 reads this instead of loss_is_scaled_for_ga
        for callback in self.callback_handler.callbacks:
            if callable(getattr(callback, "attach", None)):  # TemperatureAnnealingCallback drives our temperature
                callback.attach(self)

    # ---- loss ----
    def _split_inputs(self, inputs: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor]:
        if "labels" not in inputs:
            raise ValueError(f"Expected a 'labels' entry in the batch, got keys {sorted(inputs)}")
        inputs = dict(inputs)
        return inputs, inputs.pop("labels")

    def _loss_from_logits(self, logits: torch.Tensor, labels: torch.Tensor, sync: bool) -> torch.Tensor:
        if self.use_cross_entropy:
            return F.cross_entropy(logits.float(), labels, ignore_index=-100)
        if self.args.east_loss == "dice":
            return soft_dice_loss(logits, labels)
        confmat = self.east_loss.confusion_matrix(logits, labels)  # (C, C), float32
        if sync and self.args.east_sync_across_processes and self.accelerator.num_processes > 1:
            confmat = _all_reduce_differentiable(confmat)
        metric = self.east_loss.metric_value(confmat)
        if self.model.training:
            value = metric.detach()
            self._soft_metric_sum = value if self._soft_metric_sum is None else self._soft_metric_sum + value
            self._soft_metric_count += 1
        return 1.0 - metric

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor | Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ):
        inputs, labels = self._split_inputs(inputs)
        outputs = model(**inputs)
        loss = self._loss_from_logits(logits_of(outputs), labels, sync=True)
        return (loss, outputs) if return_outputs else loss

    # ---- evaluation: the surrogate of the whole set ----
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        inputs, labels = self._split_inputs(inputs)
        with torch.no_grad():
            logits = logits_of(model(**inputs)).detach()
            if self.use_cross_entropy or self.args.east_loss != "east":
                loss = self._loss_from_logits(logits, labels, sync=False)
            else:
                valid = _check_labels(labels, logits.shape[0], logits.shape[1], self.east_loss.ignore_index)
                g = soft_predictions(logits[valid].float().softmax(1), self.east_loss.temperature)  # (n, C)
                kept = labels[valid]
                confmat = confusion_from_memberships(g, kept)  # (C, C), this batch alone
                loss = self.east_loss.loss_from_confusion(confmat)
                if self.accelerator.num_processes > 1:
                    g, kept = self.accelerator.gather_for_metrics((g, kept))  # drops the padding of uneven shards
                    confmat = confusion_from_memberships(g, kept)  # every process's batch
                self._eval_confmat = confmat if self._eval_confmat is None else self._eval_confmat + confmat
        if prediction_loss_only:
            return loss, None, None
        return loss, logits, labels

    def evaluation_loop(
        self, dataloader, description, prediction_loss_only=None, ignore_keys=None, metric_key_prefix="eval"
    ):
        self._eval_confmat = None
        output = super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix)
        if self._eval_confmat is not None:
            output.metrics[f"{metric_key_prefix}_loss"] = self.east_loss.loss_from_confusion(self._eval_confmat).item()
            output.metrics[f"{metric_key_prefix}_east_temperature"] = self.east_loss.temperature
            output.metrics[f"{metric_key_prefix}_east_stage"] = self.east_stage
        self._eval_confmat = None
        return output

    # ---- logging: temperature, stage and the soft metric ----
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training log
            if self._soft_metric_count:
                key = f"east_soft_{self.east_loss.metric_name}"
                logs[key] = round((self._soft_metric_sum / self._soft_metric_count).item(), 6)
            self._soft_metric_sum, self._soft_metric_count = None, 0
            logs["east_temperature"] = self.east_loss.temperature
            logs["east_stage"] = self.east_stage
        super().log(logs, start_time)

    # ---- fail early ----
    def train(self, *pargs, **kwargs):
        self._preflight()
        return super().train(*pargs, **kwargs)

    def _preflight(self) -> None:
        """Check one collated mini-batch before any step: labels present, logits as wide as the configured classes."""
        dataset = self.train_dataset
        if (
            dataset is None
            or not hasattr(dataset, "__getitem__")
            or not hasattr(dataset, "__len__")
            or len(dataset) == 0
        ):
            return
        batch = self.data_collator([dataset[i] for i in range(min(2, len(dataset)))])
        if "labels" not in batch:
            raise ValueError(f"Expected a 'labels' column in the training data, got columns {sorted(batch)}")
        inputs, labels = self._split_inputs(self._prepare_inputs(batch))
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                logits = logits_of(self.model(**inputs))
        finally:
            self.model.train(was_training)
        C = self.east_loss.num_classes
        if logits.ndim != 2 or (C is not None and logits.shape[1] != C):
            raise ValueError(
                f"Expected logits of shape (N, {C}) for the configured classes, got {tuple(logits.shape)}"
            )
        if self.east_loss.num_classes is None:
            self.east_loss.num_classes = logits.shape[1]
        self.east_loss.confusion_matrix(logits, labels)  # labels in range, beta length, finite logits

    # ---- model card ----
    def create_model_card(
        self,
        model_name: str | None = None,
        tags: str | list[str] | None = None,
        finetuned_from: str | None = None,
        dataset: str | list[str] | None = None,
        **kwargs,
    ):
        """Write east_hf's model card (README.md + annealing.png) into ``output_dir``; used by ``push_to_hub``."""
        info = dict(self.east_card_info)
        if model_name:
            info.setdefault("model_name", model_name)
        if tags:
            info["tags"] = [tags] if isinstance(tags, str) else list(tags)
        if finetuned_from:
            info.setdefault("base_model", finetuned_from)
        if dataset:
            info.setdefault("dataset_name", dataset if isinstance(dataset, str) else dataset[0])
        return write_model_card(self, **info)
