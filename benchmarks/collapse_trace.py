"""Trace what a text run predicts at every validation evaluation: an ``east-train`` run with one more callback.

Writes ``{output_dir}/trace.jsonl``, one line per evaluation during training: the step, epoch, stage and learning
rate; the validation rows' predicted-class histogram of the raw logits (what the evaluation scores) and of the logits
plus log class priors (what a logit-adjusted loss is trained on); the mean raw logit per class and its spread across
rows (the input-dependent part); the mean margin of the top logit over the second; the gradient norms of the
classification head and of the rest, averaged over the steps since the last evaluation.

Usage: python benchmarks/collapse_trace.py RECIPE [east-train flags ...]   (the same arguments as east-train)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from transformers import TrainerCallback


class TraceCallback(TrainerCallback):
    def __init__(self, trainer):
        self.trainer = trainer
        self.head_norms: list[float] = []
        self.body_norms: list[float] = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        head, body = 0.0, 0.0
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            sq = float(p.grad.detach().float().pow(2).sum())
            if "classifier" in name or "score" in name or "head" in name:
                head += sq
            else:
                body += sq
        self.head_norms.append(head**0.5)
        self.body_norms.append(body**0.5)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """``TRACE_HEAD_BIAS=logprior`` / ``-logprior``: the classification head's bias starts at +-log(training
        priors) (a controlled start: logit-adjusted cross-entropy from -log(prior) follows plain cross-entropy's
        trajectory step for step, and plain cross-entropy from +log(prior) starts at its constant optimum)."""
        how = os.environ.get("TRACE_HEAD_BIAS")
        if not how or state.global_step > 0:
            return
        from east_hf.hf.models import classifier_head
        from east_hf.hf.training.dataset_stats import training_class_counts

        counts = torch.as_tensor(training_class_counts(self.trainer.train_dataset, None), dtype=torch.float32)
        log_prior = (counts / counts.sum()).log()
        head = classifier_head(model, len(counts))
        with torch.no_grad():
            head.bias.copy_(log_prior if how == "logprior" else -log_prior)

    def on_epoch_end(self, args, state, control, **kwargs):
        stop = os.environ.get("TRACE_STOP_EPOCH")
        if stop and (state.epoch or 0) >= float(stop) - 1e-6:
            control.should_training_stop = True

    @torch.no_grad()
    def on_evaluate(self, args, state, control, model=None, eval_dataloader=None, metrics=None, **kwargs):
        trainer = self.trainer
        if not trainer.is_in_train or eval_dataloader is None:
            return
        was_training = model.training
        model.eval()
        logits, labels, inner = [], [], {"cls": [], "pre": []}
        hooks = []
        bert = getattr(model, "bert", None)
        if bert is not None:  # the CLS hidden state and the pooler's pre-tanh activations
            hooks.append(
                bert.encoder.register_forward_hook(lambda m, i, o: inner["cls"].append(o[0][:, 0].float().cpu()))
            )
            hooks.append(bert.pooler.dense.register_forward_hook(lambda m, i, o: inner["pre"].append(o.float().cpu())))
        for batch in eval_dataloader:
            batch = trainer._prepare_inputs(batch)
            y = batch.pop("labels")
            out = model(**batch)
            logits.append((out.logits if hasattr(out, "logits") else out).float().cpu())
            labels.append(y.cpu())
        for hook in hooks:
            hook.remove()
        model.train(was_training)
        z, y = torch.cat(logits), torch.cat(labels)
        C = z.shape[1]
        counts = trainer.warm_start_loss.__dict__.get("_buffers", {}).get("logit_adjustment")
        adjusted = z + counts.cpu() if counts is not None else None
        top2 = z.topk(2, dim=1).values
        schedule = trainer.annealing.schedule if trainer.annealing is not None else None
        row = {
            "step": state.global_step,
            "epoch": round(state.epoch or 0, 3),
            "stage": None if schedule is None else schedule.stage,
            "fell_back": None if schedule is None else schedule.fell_back,
            "lr": trainer.optimizer.param_groups[0]["lr"] if trainer.optimizer is not None else None,
            "fbeta": None if metrics is None else metrics.get("eval_fbeta"),
            "eval_loss": None if metrics is None else metrics.get("eval_loss"),
            "pred_raw": torch.bincount(z.argmax(1), minlength=C).tolist(),
            "pred_adjusted": None if adjusted is None else torch.bincount(adjusted.argmax(1), minlength=C).tolist(),
            "true": torch.bincount(y, minlength=C).tolist(),
            "mean_logit": [round(v, 4) for v in z.mean(0).tolist()],
            "std_logit": [round(v, 4) for v in z.std(0).tolist()],
            "std_centered": [round(v, 4) for v in (z - z.mean(1, keepdim=True)).std(0).tolist()],
            "margin": round(float((top2[:, 0] - top2[:, 1]).mean()), 5),
            **(
                {
                    "cls_std": round(float(torch.cat(inner["cls"]).std(0).mean()), 5),
                    "pre_abs": round(float(torch.cat(inner["pre"]).abs().mean()), 4),
                    "pooled_saturated": round(float((torch.cat(inner["pre"]).tanh().abs() > 0.99).float().mean()), 4),
                    "pooled_std": round(float(torch.cat(inner["pre"]).tanh().std(0).mean()), 5),
                }
                if inner["cls"]
                else {}
            ),
            "head_weight_norm": round(float(head_weight(model).norm()), 4),
            "head_bias": [round(v, 3) for v in head_bias(model)],
            "head_grad": round(sum(self.head_norms) / max(1, len(self.head_norms)), 5),
            "body_grad": round(sum(self.body_norms) / max(1, len(self.body_norms)), 5),
        }
        self.head_norms, self.body_norms = [], []
        with open(Path(args.output_dir) / "trace.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")


def _head(model):
    from east_hf.hf.models import classifier_head

    return classifier_head(model, None)


def head_weight(model):
    return _head(model).weight.detach()


def head_bias(model):
    return _head(model).bias.detach().tolist()


def main(argv: list[str]) -> int:
    import east_hf.hf.training.trainer as trainer_module
    from east_hf.scripts import east_train

    base = trainer_module.EASTTrainer

    class TracedTrainer(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(TraceCallback(self))

    trainer_module.EASTTrainer = TracedTrainer
    return east_train.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
