"""``east-train``: train a classifier with EAST from a YAML recipe; also
``python -m east_hf.scripts.east_train RECIPE.yaml``.

    east-train recipes/cifar10_f1.yaml                  # the recipe as written
    east-train recipes/cifar10_f1.yaml --loss ce        # the cross-entropy baseline, everything else equal
    accelerate launch --multi_gpu -m east_hf.scripts.east_train recipes/cifar10_f1.yaml
    torchrun --nproc_per_node 4 -m east_hf.scripts.east_train recipes/cifar10_f1.yaml
    east-train recipes/cifar10_f1.yaml --resume_from_checkpoint true   # resume the last complete checkpoint

An ``output_dir`` that already holds a run (results, model or checkpoints) is refused unless the run resumes it
(``--resume_from_checkpoint true`` or a checkpoint path) or ``--overwrite_output_dir true`` replaces it. One holding
files east_hf did not write (a project, a user's ``README.md`` or ``config.json``) or an east-compare table is refused
whatever the flags, and one that another east-train is writing into (``east_hf.scripts.lock``) until it ends. Ctrl-C
ends in one line, exit status 130, at any moment: while torch and transformers load (this module imports neither at
the top), that nothing was written; once the run has started, the last complete checkpoint and the command that
resumes it.

One run: parse (``east_hf.scripts.arguments``), load and split the data (``east_hf.hf.data``), build the model, train
with ``EASTTrainer`` (temperature annealing, the best checkpoint by the target metric kept), evaluate the best model on
the test split, and save into ``output_dir``: ``model.safetensors`` + ``config.json`` (+ the image processor or the
tabular feature extractor, both ``preprocessor_config.json``), ``train_results.json``, ``eval_results.json``,
``test_results.json``, ``all_results.json``, ``trainer_state.json`` and, when ``east_hf.hf.cards.model_card`` is
installed, the model card ``README.md`` (``README.east_hf.md`` beside a ``README.md`` the user wrote or edited, which
stays as it is). The run ends in the line that says how training ended (``east_hf.hf.training.ending``; the card says
the same), the test metrics and where the files are. Under several processes only the main one prints and writes.

Beside this flow: ``east_hf.scripts.output_dir`` claims the folder, ``east_hf.scripts.interruptions`` writes the line a
run cut short ends with, ``east_hf.scripts.run_record`` says what a run depends on (what ``--dry_run`` prints).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from east_hf.scripts.interruptions import disk_full_line, exit_at_once_on_ctrl_c, interrupted_line, interrupted_says

# Only the standard library and light modules at the top: the console script imports this module before main runs,
# and a Ctrl-C while torch or transformers load (seconds) must reach main's guard, not end in a traceback.
from east_hf.scripts.launch_exit import end_launched_process
from east_hf.scripts.output_dir import DECISION_RULE_NAME, claim_output_dir, resuming

if TYPE_CHECKING:
    from east_hf.scripts.arguments import EASTArgumentParser, ParsedArguments
    from east_hf.scripts.lock import OutputDirLock

__all__ = ["main"]

logger = logging.getLogger(__name__)

PROG = "east-train"
# the modules a run imports (with them torch, transformers, datasets, timm and accelerate); main loads them before the
# run claims output_dir
_RUN_MODULES = (
    "transformers",
    "east_hf.hf.data",
    "east_hf.hf.metrics",
    "east_hf.hf.models.build",
    "east_hf.hf.training.trainer",
)


def _data_line(name: str, data) -> str:
    """The data summary line: split sizes, training samples per class (multi-label: positives per label), rows left
    out at load."""
    from east_hf.hf.data.messages import counts_text, dropped_text

    noun = "labels" if getattr(data, "multi_label", False) else "classes"
    counts = counts_text(data.label_names, data.class_counts("train"), noun)  # past 20: the fewest and the most
    streamed = " (streamed)" if hasattr(data, "start_stream") else ""
    sizes = (
        f"{len(data.train)} train{streamed} / {len(data.validation)} validation / {len(data.test or [])} test samples"
    )
    per = "training positives per label" if getattr(data, "multi_label", False) else "training samples per class"
    line = f"{name}: {sizes}; {per}: {counts}"
    dropped = getattr(data, "dropped", None) or {}
    if dropped:
        line += "; dropped " + dropped_text(dropped)
    return line


def _tune_decision_rule(trainer, data, eval_metrics: dict[str, float], test_metrics: dict[str, float]) -> dict:
    """Tune the decision rule on the validation split, fold it into the model, save the tuned model in place of the
    model as trained, and add ``eval_tuned_*`` / ``test_tuned_*`` metrics. The as-trained weights stay recoverable:
    the best checkpoint folder keeps them, and ``decision_rule.json`` holds the offsets that were added. The saved
    ``config.json`` records those offsets too (``FOLDED_OFFSETS_KEY``): the file beside the model is a record a user
    may edit, the config's copy says what the bias holds (``east_hf.hf.predict.predictor`` compares the two)."""
    from east_hf.hf.predict.predictor import FOLDED_OFFSETS_KEY

    output_dir = Path(trainer.args.output_dir)
    rule = trainer.tune_decision_rule(data.validation)
    eval_metrics.update(trainer.evaluate(metric_key_prefix="eval_tuned"))
    trainer.save_metrics("eval", eval_metrics)
    if test_metrics:
        test_metrics.update(trainer.evaluate(data.test, metric_key_prefix="test_tuned"))
        trainer.save_metrics("test", test_metrics)
    offsets = {name: round(float(b), 6) for name, b in zip(data.label_names, rule.offsets.tolist())}
    config = getattr(trainer.model, "config", None)
    if config is not None:
        setattr(config, FOLDED_OFFSETS_KEY, offsets)
    trainer.save_model()  # the tuned model: argmax of its logits applies the rule
    key = trainer.args.east_target_key
    decision = {
        "metric": trainer.args.east_metric,
        "target_key": key,
        "offsets": offsets,
        # the F-beta tuned for: a precision-leaning beta at east_beta_floor
        "tuned_beta": trainer.decision_beta if trainer.args.east_metric == "fbeta" else None,
        "validation_argmax": rule.baseline_score,
        "validation_tuned": rule.score,
        "test_as_trained": test_metrics.get(f"test_{key}"),
        "test_tuned": test_metrics.get(f"test_tuned_{key}"),
    }
    if trainer.is_world_process_zero():
        (output_dir / DECISION_RULE_NAME).write_text(json.dumps(decision, indent=2) + "\n")
    return decision


def _write_model_card(
    trainer,
    parsed: ParsedArguments,
    data,
    test_metrics: dict[str, float],
    base_model: str | None,
    decision_rule: dict | None = None,
):
    """Write the model card (``east_hf.hf.cards.model_card.write_model_card``). The same information goes to
    ``trainer.east_card_info``, from which ``EASTTrainer.create_model_card`` writes the card again when
    ``push_to_hub`` uploads the folder."""
    from east_hf.hf.cards.model_card import write_model_card

    offered = {
        "test_metrics": test_metrics,
        "metric_prefix": "test_tuned" if decision_rule is not None and test_metrics else "test",  # the saved model's
        "decision_rule": decision_rule,
        "dataset_name": parsed.data.dataset_name,
        "dataset_split": "test",
        "recipe": {**parsed.recipe, **parsed.overrides},  # what reproduces this run
        "base_model": base_model,
        "tags": ["east", data.modality],
        "license": parsed.script.license,
    }
    if isinstance(getattr(trainer, "east_card_info", None), dict):
        trainer.east_card_info.update(offered)
    try:
        return write_model_card(trainer, parsed.training.output_dir, **offered)
    except Exception as e:  # noqa: BLE001 - a card must never cost the trained model
        logger.warning(f"model card not written: {type(e).__name__}: {e}")
        return None


def _summary(
    metrics: dict[str, float], output_dir: str, card: Path | None, extra: Sequence[str], ended: str | None = None
) -> str:
    """The lines a run ends with: how training ended (``ended``), the test metrics, where the files are."""
    from east_hf.hf.metrics.compute import SUMMARY_KEYS

    keys = [k for k in SUMMARY_KEYS if f"test_{k}" in metrics]
    keys += [k[len("test_") :] for k in metrics if k.startswith(("test_precision_", "test_recall_", "test_fbeta_"))]
    lines = ["", ended, ""] if ended else [""]
    if keys:
        width = max(len(k) for k in keys)
        tuned = all(f"test_tuned_{k}" in metrics for k in keys)
        header = f"{'':<{width}}  {'trained':>8}  {'tuned':>8}" if tuned else ""
        lines += ["Test metrics (best model" + (", as trained and with the tuned decision rule)" if tuned else ")")]
        lines += [header] if tuned else []
        lines += ["-" * (width + (20 if tuned else 10))]
        for k in keys:
            row = f"{k:<{width}}  {metrics[f'test_{k}']:>8.4f}"
            lines.append(row + (f"  {metrics[f'test_tuned_{k}']:>8.4f}" if tuned else ""))
        lines.append("")
    out = Path(output_dir)
    weights = "adapter_model.safetensors" if (out / "adapter_config.json").is_file() else "model.safetensors"  # LoRA
    lines += [
        f"model:    {out / weights}",
        f"metrics:  {out / 'test_results.json'} (all: {out / 'all_results.json'})"
        if keys
        else f"metrics:  {out / 'all_results.json'}",
    ]
    lines += list(extra)
    if card is not None:
        lines.append(f"card:     {card}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``east-train``; returns 0, exits 2 (one line on stderr) on bad input and 130 on Ctrl-C, at any
    moment, in one line: before the run claims ``output_dir`` (torch and transformers loading, the recipe being parsed)
    that nothing was written, at once; afterwards how to resume. The main process holds the lock on ``output_dir``
    (``east_hf.scripts.lock``) from before it looks at the folder until it exits, however it exits.
    ``--list_recipes`` is answered first, before transformers is imported. Inside east-compare's run (its
    ``interrupts_say``) a Ctrl-C ends in the comparison's line instead."""
    args = list(sys.argv[1:] if argv is None else argv)
    # under torchrun / accelerate every process gets the Ctrl-C; the main one alone says so
    main_process = os.environ.get("RANK", "0") == "0"
    interrupted = interrupted_says()  # east-compare's line, inside one of its runs
    line = interrupted or f"{PROG}: interrupted before training started; nothing was written"
    line = line if main_process else None
    try:
        with exit_at_once_on_ctrl_c(line, command=argv is None):  # argv None: the console script, its own process
            if "--list_recipes" in args:
                from east_hf.scripts.recipes import recipe_list

                print(recipe_list())
                return 0
            from east_hf.hf.config.east_config import EASTConfig
            from east_hf.hf.data.arguments import DataArguments
            from east_hf.hf.models.build import ModelArguments
            from east_hf.scripts.arguments import EASTArgumentParser, ScriptArguments
            from east_hf.scripts.lock import OutputDirLock

            parser = EASTArgumentParser((ScriptArguments, DataArguments, ModelArguments, EASTConfig))
            parsed = parser.parse(args)
            if parsed.script.dry_run:
                import yaml

                from east_hf.scripts.run_record import resolved_settings

                if parsed.training.process_index == 0:
                    print(yaml.safe_dump(resolved_settings(parsed), sort_keys=False).rstrip())
                return 0
            for module in _RUN_MODULES:  # what _run imports, loaded here where a Ctrl-C has nothing to undo
                importlib.import_module(module)
            lock = OutputDirLock(parsed.training.output_dir)
    except KeyboardInterrupt:  # where SIGINT is not Python's own handler, or off the main thread
        if line is not None:
            print(line, file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    return _claim_and_run(parser, parsed, lock, args, interrupted)


def _claim_and_run(
    parser: EASTArgumentParser, parsed: ParsedArguments, lock: OutputDirLock, args: list[str], interrupted: str | None
) -> int:
    """Claim ``output_dir`` under ``lock`` and run; a Ctrl-C from here on ends in the line naming the last complete
    checkpoint and the command that resumes it (``east_hf.scripts.interruptions``), exit status 130. A process of a
    launch that ran to its end leaves through ``east_hf.scripts.launch_exit.end_launched_process``."""
    from east_hf.hf.devices import end_process_group
    from east_hf.hf.training.checkpoints import run_files
    from east_hf.scripts.run_record import check_resumed_record

    script, training = parsed.script, parsed.training
    done = False
    try:
        refused = None
        if training.process_index == 0:  # the other processes of a torchrun / accelerate launch write beside it
            try:
                lock.acquire()
                claim_output_dir(training.output_dir, training.resume_from_checkpoint, script.overwrite_output_dir)
                if resuming(training.resume_from_checkpoint) and any(
                    name.startswith("checkpoint-") for name in run_files(training.output_dir)
                ):
                    check_resumed_record(parsed)
            except ValueError as e:
                refused = str(e)
        refused = _from_main_process(refused, training.world_size)  # the others wait for the folder to be claimed
        if refused is not None and training.process_index == 0:
            parser.error(refused)
        if refused is not None:  # the other processes stop too, leaving the one line to the main one
            parser.exit(2)
        status, done = _run(parser, parsed), True
    except KeyboardInterrupt:
        if training.process_index == 0:
            line = interrupted or interrupted_line(parser.prog, args, training.output_dir)
            print(line, file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    finally:
        lock.release()
        if not done:  # failed or interrupted: another process may never arrive at a barrier
            end_process_group()
    if training.world_size > 1:
        end_launched_process(status)  # waits for the others; the process exits past the interpreter's teardown
    return status


def _from_main_process(value: Any, world_size: int) -> Any:
    """The main process's ``value``, on every process of a launch (``torch.distributed``'s broadcast)."""
    if world_size <= 1:
        return value
    import torch.distributed as dist

    shared = [value]
    dist.broadcast_object_list(shared, src=0)
    return shared[0]


def _prepare_data_and_model(parsed: ParsedArguments):
    """Load the data set and build the model for it: texts tokenized (with a padding collator), images given the
    model's transforms. Returns the data, the model, its processor, the base model's name and the collator."""
    from east_hf.hf.data import image_transforms, load_data, set_image_transforms
    from east_hf.hf.data.text import tokenize_splits
    from east_hf.hf.devices import resolve_unused_parameters
    from east_hf.hf.models.build import attach_data_config, build_model
    from east_hf.hf.models.text import is_text_model
    from east_hf.hf.predict.predictor import TEXT_COLUMNS_KEY

    data_args, model_args, training = parsed.data, parsed.model, parsed.training
    with training.main_process_first(desc="loading the data set"):
        data = load_data(data_args, text=is_text_model(model_args.model_name_or_path))
    model, processor, base_model = build_model(model_args, data, model_args.model_revision, data_args.max_length)
    resolve_unused_parameters(training, every_parameter_used=base_model is None)  # built here: all used
    collator = None
    if data.modality == "text":
        from transformers import DataCollatorWithPadding

        with training.main_process_first(desc="tokenizing the texts"):
            tokenize_splits(data, processor, model, data_args.max_length, data_args.preprocessing_num_workers)
        # config.json names the text columns, so east-predict reads the same ones from a file of texts
        setattr(model.config, TEXT_COLUMNS_KEY, [data.text_column, data.text_pair_column])
        collator = DataCollatorWithPadding(processor)  # pads each batch to its longest text
    if hasattr(data, "start_stream"):  # streamed rows (east_hf.hf.data.streaming), encoded as validation is
        data.start_stream()
    if data.modality == "image":
        train_tf, eval_tf, data_config = image_transforms(model, processor, data_args.image_size, data_args.augment)
        attach_data_config(model, data_config)
        set_image_transforms(data, train_tf, eval_tf)
    return data, model, processor, base_model, collator


def _reported_metrics(parsed: ParsedArguments, data):
    """The hard metrics the run reports: the configured target, per class for ``--report_classes`` (every label of a
    multi-label run)."""
    from east_hf.hf.metrics import build_compute_metrics

    script, training = parsed.script, parsed.training
    report_classes = script.report_classes[0] if script.report_classes == ["all"] else script.report_classes
    if report_classes is None and data.multi_label:
        report_classes = "all"  # a multi-label run reports every label: the card's per-label table
    target = dict(beta=training.east_beta, average=training.east_average)
    if not data.multi_label:
        target["pos_label"] = training.east_pos_label
    return build_compute_metrics(
        data.num_labels,
        multi_label=data.multi_label,
        **target,
        id2label=data.id2label,
        report_classes=report_classes,
    )


def _run(parser: EASTArgumentParser, parsed: ParsedArguments) -> int:
    """Load the data, build the model and the trainer, train, evaluate and save; bad input exits 2
    (``parser.error``)."""
    from transformers import set_seed

    from east_hf.hf.training.trainer import EASTTrainer
    from east_hf.scripts.run_output import lines_above_bars, quiet_replicas, without_metric_logs
    from east_hf.scripts.run_record import RecordAtFirstSave

    data_args, training = parsed.data, parsed.training
    quiet_replicas(training.process_index)  # each line once per run: the main process's
    set_seed(training.seed)
    try:
        data, model, processor, base_model, collator = _prepare_data_and_model(parsed)
        compute_metrics = _reported_metrics(parsed, data)
        record = RecordAtFirstSave(parsed)  # before the Trainer: it builds a default EASTConfig
        if hasattr(data, "start_stream") and training.east_class_priors is None:  # after the record: as asked
            training.east_class_priors = data.class_counts("train")  # the stream's first pass counted them
        trainer = EASTTrainer(
            model=model,
            args=training,
            train_dataset=data.train,
            eval_dataset=data.validation,
            compute_metrics=compute_metrics,
            processing_class=processor,
            data_collator=collator,
        )  # also checks push_to_hub can work (token, network) before any training
        trainer.add_callback(record)  # the record a resume is checked against
        if not parsed.script.print_metrics:
            without_metric_logs(trainer)
    except ValueError as e:
        parser.error(str(e))

    main_process = trainer.is_world_process_zero()
    if main_process:
        print(_data_line(data_args.dataset_name, data), flush=True)
    try:
        with lines_above_bars():
            return _train_and_save(trainer, parsed, data, base_model)
    except (ValueError, FloatingPointError) as e:  # NaN / inf, an unknown metric key, a checkpoint to resume
        parser.error(str(e))
    except Exception as e:  # a full disk ends in one line saying how to go on; anything else as it is raised
        line = disk_full_line(e, training.output_dir)
        if line is None:
            raise
        parser.error(line)


def _train_and_save(trainer, parsed: ParsedArguments, data, base_model: str | None) -> int:
    from east_hf.hf.training.ending import training_ended

    script, training = parsed.script, parsed.training
    main_process = trainer.is_world_process_zero()
    train_result = trainer.train(resume_from_checkpoint=training.resume_from_checkpoint)
    ended = training_ended(trainer.state, trainer.args, trainer.annealing)  # the card says the same
    trainer.save_model()  # the best model (load_best_model_at_end) and its processor, into output_dir
    extra = []
    if data.modality == "text":  # the tokenizer, saved by save_model beside the model
        extra.append(f"inputs:   {Path(training.output_dir) / 'tokenizer.json'} (the tokenizer; AutoTokenizer)")
    elif data.preprocessor is not None:  # the Trainer's processing_class: saved by save_model, checkpoints included
        path = Path(training.output_dir) / "preprocessor_config.json"
        extra.append(f"inputs:   {path} (feature encoding and training-set standardisation; AutoFeatureExtractor)")
    metrics = dict(train_result.metrics, train_samples=len(data.train))
    trainer.save_metrics("train", metrics)
    eval_metrics = trainer.evaluate(metric_key_prefix="eval")
    trainer.save_metrics("eval", eval_metrics)
    test_metrics: dict[str, float] = {}
    if script.evaluate_test and data.test is not None:
        test_metrics = trainer.evaluate(data.test, metric_key_prefix="test")
        test_metrics["test_samples"] = len(data.test)
        trainer.save_metrics("test", test_metrics)
    decision = None
    if script.tune_decision_rule:
        decision = _tune_decision_rule(trainer, data, eval_metrics, test_metrics)
        extra.append(f"rule:     {Path(training.output_dir) / DECISION_RULE_NAME} (tuned on validation, in the bias)")
    trainer.save_state()
    card = _write_model_card(trainer, parsed, data, test_metrics, base_model, decision) if script.model_card else None
    if training.push_to_hub:
        trainer.push_to_hub()  # on every process: it saves collectively and uploads from the main one
    if main_process:
        state = trainer.state
        if state.best_metric is not None:
            best = (
                f"validation {training.metric_for_best_model}={state.best_metric:.4f} ({state.best_model_checkpoint})"
            )
            extra.insert(0, f"best:     {best}")
        print(_summary(test_metrics, training.output_dir, card, extra, ended), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
