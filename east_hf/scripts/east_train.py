"""``east-train``: train a classifier with EAST from a YAML recipe; also ``python -m east_hf.scripts.east_train RECIPE.yaml``.

    east-train recipes/cifar10_f1.yaml                  # the recipe as written
    east-train recipes/cifar10_f1.yaml --loss ce        # the cross-entropy baseline, everything else equal
    accelerate launch --multi_gpu -m east_hf.scripts.east_train recipes/cifar10_f1.yaml
    torchrun --nproc_per_node 4 -m east_hf.scripts.east_train recipes/cifar10_f1.yaml
    east-train recipes/cifar10_f1.yaml --resume_from_checkpoint true   # resume the last complete checkpoint

An ``output_dir`` that already holds a run (results, model or checkpoints) is refused unless the run resumes it
(``--resume_from_checkpoint true`` or a checkpoint path) or ``--overwrite_output_dir true`` replaces it. One holding
files east_hf did not write (a project, a user's ``README.md`` or ``config.json``) or an east-compare table is refused
whatever the flags, and one that another east-train is writing into (``east_hf.scripts.lock``) until it ends. Ctrl-C
ends with one line naming the last complete checkpoint and the command that resumes it, exit status 130.

One run: parse (``east_hf.scripts.arguments``), load and split the data (``east_hf.hf.data``), build the model, train with
``EASTTrainer`` (temperature annealing, the best checkpoint by the target metric kept), evaluate the best model on
the test split, and save into ``output_dir``: ``model.safetensors`` + ``config.json`` (+ the image processor or the
tabular feature extractor, both ``preprocessor_config.json``), ``train_results.json``, ``eval_results.json``,
``test_results.json``, ``all_results.json``, ``trainer_state.json`` and, when ``east_hf.hf.cards`` is installed, the
model card ``README.md``. Under several
processes only the main one prints and writes.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from east_hf.hf.data.arguments import DataArguments
from east_hf.hf.metrics.compute import SUMMARY_KEYS

if TYPE_CHECKING:
    from east_hf.scripts.arguments import EASTArgumentParser, ParsedArguments

__all__ = [  # noqa: F822 - ScriptArguments comes from the module __getattr__ below
    "ScriptArguments",
    "data_fingerprint",
    "default_settings",
    "main",
    "resolved_settings",
    "run_record",
]

logger = logging.getLogger(__name__)

DECISION_RULE_NAME = "decision_rule.json"


def __getattr__(name: str) -> Any:
    """``ScriptArguments`` from ``east_hf.scripts.arguments``, imported on first use: that module imports
    transformers, which ``east-train --list_recipes`` never needs."""
    if name == "ScriptArguments":
        from east_hf.scripts.arguments import ScriptArguments

        return ScriptArguments
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_settings() -> dict[str, dict[str, Any]]:
    """The default value of every field of each dataclass, by group (what ``resolved_settings`` leaves out)."""
    from east_hf.hf.config import EASTConfig
    from east_hf.hf.models.build import ModelArguments
    from east_hf.scripts.arguments import ScriptArguments

    out = {
        title: {f.name: getattr(cls(), f.name) for f in fields(cls)}
        for title, cls in (("script", ScriptArguments), ("data", DataArguments), ("model", ModelArguments))
    }
    out["training"] = EASTConfig(output_dir="x").to_dict()
    return out


RECORD_LEAVES_OUT = frozenset(
    {"output_dir", "logging_dir", "run_name", "resume_from_checkpoint", "overwrite_output_dir", "dry_run"}
    | {"report_to", "disable_tqdm", "project", "log_level", "log_level_replica", "log_on_each_node", "local_rank"}
    | {"push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo", "hub_always_push"}
    | {"hub_revision", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id", "skip_memory_metrics"}
    | {"license", "model_card"}
)
"""Settings that do not change what a run trains or measures: where it writes and reports, how it resumes, where it
pushes, how it launches, what its card says. A run record leaves them out, so changing one never makes east-compare train again."""


def resolved_settings(parsed: ParsedArguments, full: bool = False) -> dict[str, dict[str, Any]]:
    """The fields of each dataclass that differ from its defaults (what a dry run prints), by group; with ``full``
    every field that affects training (all but ``RECORD_LEAVES_OUT``), so that a record stays exact when a default
    changes. Secrets are masked (``east_hf.hf.cards.mask_secrets``)."""
    from east_hf.hf.cards import mask_secrets

    defaults = default_settings()
    out = {
        title: {f.name: getattr(obj, f.name) for f in fields(obj)}
        for title, obj in (("script", parsed.script), ("data", parsed.data), ("model", parsed.model))
    }
    out["training"] = parsed.training.to_dict()
    for title, values in out.items():
        if full:
            out[title] = {k: v for k, v in values.items() if k not in RECORD_LEAVES_OUT}
        else:
            out[title] = {k: v for k, v in values.items() if v != defaults[title].get(k)}
    return mask_secrets(out)


def data_fingerprint(dataset_name: str | None, dataset_config: str | None = None) -> dict[str, Any]:
    """What identifies the data a run reads, so that an edit of it is noticed: for a local file its size, mtime and
    SHA-256 of its bytes; for a local folder the same over every file in it (a missing path: its name only); for
    ``sklearn:<name>`` the name and the generator's parameters; for a Hub id the id, configuration and revision."""
    from east_hf.hf.data.sources import FILE_BUILDERS, SYNTHETIC_SETS

    name = str(dataset_name)
    if name.startswith("sklearn:"):
        return {"kind": "sklearn", "name": name, "parameters": SYNTHETIC_SETS.get(name.split(":", 1)[1])}
    path = Path(name).expanduser()
    if path.is_file():
        stat = path.stat()
        digest = _sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        return {"kind": "file", "path": name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        combined, size = hashlib.sha256(), 0
        for file in files:
            stat = file.stat()
            size += stat.st_size
            digest = _sha256(str(file.resolve()), stat.st_size, stat.st_mtime_ns)
            combined.update(f"{file.relative_to(path).as_posix()}\0{stat.st_size}\0{digest}\n".encode())
        return {"kind": "folder", "path": name, "files": len(files), "size": size, "sha256": combined.hexdigest()}
    if name.startswith(("/", "./", "../", "~")) or path.suffix.lower() in FILE_BUILDERS:
        return {"kind": "missing", "path": name}  # a local path that is not there (yet): the run itself says so
    # a Hub id: its own fingerprint would mean a download or a network call for every run; the data loads from
    # the default branch, so no revision is pinned
    return {"kind": "hub", "id": name, "config": dataset_config, "revision": None}


@functools.lru_cache(maxsize=65536)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks; size and mtime key the cache, so an edited file is read again
    and an unchanged one once per process (east-compare fingerprints the same file for every run)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_record(parsed: ParsedArguments) -> dict[str, Any]:
    """What a finished run's results depend on: every setting that affects training (``resolved_settings(parsed,
    full=True)``, by group), the east_hf version that trained it and the fingerprint of its data."""
    from east_hf import __version__

    return {
        **resolved_settings(parsed, full=True),
        "east_hf_version": __version__,
        "data_fingerprint": data_fingerprint(parsed.data.dataset_name, parsed.data.dataset_config),
    }


def _claim_output_dir(output_dir: str, resume: str | None, overwrite: bool) -> None:
    """Refuse to train into a folder holding another run unless resuming it or told to overwrite it: a new run would
    replace its model and results and rotate away its checkpoints, best model included. With ``overwrite`` the
    earlier run's checkpoints and results are deleted. The main process calls it, holding the folder's lock.

    A folder holding files east_hf did not write (a project, a user's README.md or config.json, a downloaded model)
    or east-compare's table is refused whatever the flags: east-train never replaces or deletes what it did not
    write, so the only way out is another output_dir."""
    import shutil

    from east_hf.hf.checkpoints import comparison_files, foreign_files, run_files

    table = comparison_files(output_dir)
    if table:
        raise ValueError(
            f"Expected an output_dir for one run, got {output_dir}, which holds an east-compare comparison "
            f"({', '.join(table)}); choose another output_dir (--overwrite_output_dir never replaces a comparison)"
        )
    foreign = foreign_files(output_dir)
    if foreign:
        raise ValueError(
            f"Expected output_dir {output_dir} to be empty or to hold an east_hf run, got files east_hf did not write "
            f"({', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''}); choose another output_dir "
            "(--overwrite_output_dir never replaces or deletes them)"
        )
    found = run_files(output_dir)
    resuming = resume is not None and str(resume).strip().lower() not in ("false", "none", "")
    if not found or resuming:
        return
    if not overwrite:
        raise ValueError(
            f"output_dir {output_dir} already holds a run ({', '.join(found[:4])}{', ...' if len(found) > 4 else ''}); "
            "pass --resume_from_checkpoint true to resume it, --overwrite_output_dir true to replace it, or choose "
            "another output_dir"
        )
    folder = Path(output_dir)
    logger.warning(f"overwrite_output_dir: deleting the earlier run in {output_dir} ({', '.join(found)})")
    for name in found:
        path = folder / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    for name in ("eval_results.json", DECISION_RULE_NAME):  # results a new run might not write again
        if (folder / name).is_file():
            (folder / name).unlink()


def _data_line(name: str, data) -> str:
    """The data summary line: split sizes, training samples per class, rows left out at load."""
    counts = ", ".join(f"{n}: {c}" for n, c in zip(data.label_names, data.class_counts("train")))
    sizes = f"{len(data.train)} train / {len(data.validation)} validation / {len(data.test or [])} test samples"
    line = f"{name}: {sizes}; training samples per class: {counts}"
    dropped = getattr(data, "dropped", None) or {}
    if dropped:
        line += "; dropped " + ", ".join(
            f"{n} row{'s' if n != 1 else ''} with an empty label" if reason == "empty label" else f"{n} labelled -100"
            for reason, n in dropped.items()
        )
    return line


def _tune_decision_rule(trainer, data, eval_metrics: dict[str, float], test_metrics: dict[str, float]) -> dict:
    """Tune the decision rule on the validation split, fold it into the model, save the tuned model in place of the
    model as trained, and add ``eval_tuned_*`` / ``test_tuned_*`` metrics. The as-trained weights stay recoverable:
    the best checkpoint folder keeps them, and ``decision_rule.json`` holds the offsets that were added."""
    output_dir = Path(trainer.args.output_dir)
    rule = trainer.tune_decision_rule(data.validation)
    eval_metrics.update(trainer.evaluate(metric_key_prefix="eval_tuned"))
    trainer.save_metrics("eval", eval_metrics)
    if test_metrics:
        test_metrics.update(trainer.evaluate(data.test, metric_key_prefix="test_tuned"))
        trainer.save_metrics("test", test_metrics)
    trainer.save_model()  # the tuned model: argmax of its logits applies the rule
    key = trainer.args.east_target_key
    decision = {
        "metric": trainer.args.east_metric,
        "target_key": key,
        "offsets": {name: round(float(b), 6) for name, b in zip(data.label_names, rule.offsets.tolist())},
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
    """Write the model card (``east_hf.hf.cards.write_model_card``). The same information goes to
    ``trainer.east_card_info``, from which ``EASTTrainer.create_model_card`` writes the card again when
    ``push_to_hub`` uploads the folder."""
    from east_hf.hf.cards import write_model_card

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


def _summary(metrics: dict[str, float], output_dir: str, card: Path | None, extra: Sequence[str]) -> str:
    keys = [k for k in SUMMARY_KEYS if f"test_{k}" in metrics]
    keys += [k[len("test_") :] for k in metrics if k.startswith(("test_precision_", "test_recall_", "test_fbeta_"))]
    lines = [""]
    if keys:
        width = max(len(k) for k in keys)
        tuned = all(f"test_tuned_{k}" in metrics for k in keys)
        header = f"{'':<{width}}  {'argmax':>8}  {'tuned':>8}" if tuned else ""
        lines += ["Test metrics (best model" + (", as trained and with the tuned decision rule)" if tuned else ")")]
        lines += [header] if tuned else []
        lines += ["-" * (width + (20 if tuned else 10))]
        for k in keys:
            row = f"{k:<{width}}  {metrics[f'test_{k}']:>8.4f}"
            lines.append(row + (f"  {metrics[f'test_tuned_{k}']:>8.4f}" if tuned else ""))
        lines.append("")
    out = Path(output_dir)
    lines += [
        f"model:    {out / 'model.safetensors'}",
        f"metrics:  {out / 'test_results.json'} (all: {out / 'all_results.json'})"
        if keys
        else f"metrics:  {out / 'all_results.json'}",
    ]
    lines += list(extra)
    if card is not None:
        lines.append(f"card:     {card}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``east-train``; returns 0, exits 2 (one line on stderr) on bad input and 130 on Ctrl-C (one
    line saying how to resume). The main process holds the lock on ``output_dir`` (``east_hf.scripts.lock``) from
    before it looks at the folder until it exits, however it exits. ``--list_recipes`` is answered first, before
    transformers is imported."""
    if "--list_recipes" in (sys.argv[1:] if argv is None else argv):
        from east_hf.scripts.recipes import recipe_list

        print(recipe_list())
        return 0
    from east_hf.hf.config import EASTConfig
    from east_hf.hf.models.build import ModelArguments
    from east_hf.scripts.arguments import EASTArgumentParser, ScriptArguments

    parser = EASTArgumentParser((ScriptArguments, DataArguments, ModelArguments, EASTConfig))
    parsed = parser.parse(argv)
    script, training = parsed.script, parsed.training
    if script.dry_run:
        import yaml

        if training.process_index == 0:
            print(yaml.safe_dump(resolved_settings(parsed), sort_keys=False).rstrip())
        return 0

    from east_hf.scripts.lock import OutputDirLock

    lock = OutputDirLock(training.output_dir)
    try:
        refused = None
        if training.process_index == 0:  # the other processes of a torchrun / accelerate launch write beside it
            try:
                lock.acquire()
                _claim_output_dir(training.output_dir, training.resume_from_checkpoint, script.overwrite_output_dir)
            except ValueError as e:
                refused = str(e)
        refused = _from_main_process(refused, training.world_size)  # the others wait for the folder to be claimed
        if refused is not None and training.process_index == 0:
            parser.error(refused)
        if refused is not None:  # the other processes stop too, leaving the one line to the main one
            parser.exit(2)
        return _run(parser, parsed)
    except KeyboardInterrupt:
        if training.process_index == 0:
            args = list(sys.argv[1:] if argv is None else argv)
            print(_interrupted_line(parser.prog, args, training.output_dir), file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    finally:
        lock.release()
        _end_process_group()


def _end_process_group() -> None:
    """Ends the launch's process group, if there is one: a process that exits with gloo's group alive aborts now
    and then at interpreter shutdown (``terminate called without an active exception``), failing the launch."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _from_main_process(value: Any, world_size: int) -> Any:
    """The main process's ``value``, on every process of a launch (``torch.distributed``'s broadcast)."""
    if world_size <= 1:
        return value
    import torch.distributed as dist

    shared = [value]
    dist.broadcast_object_list(shared, src=0)
    return shared[0]


def _resume_command(prog: str, argv: Sequence[str], restart: bool) -> str:
    """The command line that continues an interrupted run: ``argv`` with ``--resume_from_checkpoint true``, or with
    ``--overwrite_output_dir true`` where it has to ``restart`` (no complete checkpoint, but files of the run)."""
    import shlex

    bools = {"true", "false", "yes", "no", "t", "f", "y", "n", "1", "0"}  # what a boolean flag may take as its value
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0].lstrip("-").replace("-", "_") if arg.startswith("--") else None
        if name not in ("resume_from_checkpoint", "overwrite_output_dir"):
            out.append(arg)
        elif "=" not in arg and i + 1 < len(argv):  # drop its value too: any path, or a boolean
            skip = name == "resume_from_checkpoint" or argv[i + 1].lower() in bools
    flag = "--overwrite_output_dir" if restart else "--resume_from_checkpoint"
    return shlex.join([prog, *out, flag, "true"])


def _interrupted_line(prog: str, argv: Sequence[str], output_dir: str) -> str:
    """What east-train prints on Ctrl-C: that training was interrupted, and the command that continues it."""
    from east_hf.hf.checkpoints import complete_checkpoints, run_files

    saved = complete_checkpoints(output_dir)
    if saved:
        return f"{prog}: interrupted; resume from {saved[-1]} with: {_resume_command(prog, argv, restart=False)}"
    if run_files(output_dir):
        return f"{prog}: interrupted before a checkpoint was saved; start again with: " + _resume_command(
            prog, argv, restart=True
        )
    return f"{prog}: interrupted before a checkpoint was saved; start again with the same command"


_DISK_FULL = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT"}


def _disk_full(error: BaseException, output_dir: str) -> int | None:
    """ENOSPC or EDQUOT where ``error`` or its cause says the disk is full or the quota spent, else ``None``. An
    ``OSError`` carries the errno, safetensors says "No space left on device (os error 28)", and ``torch.save`` names
    no cause ("PytorchStreamWriter failed", "inline_container"): then the free space left in ``output_dir`` tells."""
    import shutil

    chain = [error]
    while (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None and nxt not in chain:
        chain.append(nxt)
    for e in chain:
        if isinstance(e, OSError) and e.errno in _DISK_FULL:
            return e.errno
        text = str(e)
        for code in _DISK_FULL:
            if os.strerror(code) in text or f"os error {code})" in text:
                return code
        if isinstance(e, RuntimeError) and ("PytorchStreamWriter" in text or "inline_container" in text):
            try:
                return errno.ENOSPC if shutil.disk_usage(output_dir).free < 1 << 20 else None
            except OSError:
                return None
    return None


def _disk_full_line(error: BaseException, output_dir: str) -> str | None:
    """The one line east-train ends with when a save finds the disk full (ENOSPC) or the quota spent (EDQUOT): the
    folder, and how the run goes on once space is freed; ``None`` for any other error."""
    from east_hf.hf.checkpoints import last_complete_checkpoint

    code = _disk_full(error, output_dir)
    if code is None:
        return None
    last = last_complete_checkpoint(output_dir)
    then = (
        f"resume from {last} with --resume_from_checkpoint true (a checkpoint cut short is skipped)"
        if last is not None
        else "start again with --overwrite_output_dir true (no checkpoint was complete)"
    )
    got = f"{os.strerror(code)} ({_DISK_FULL[code]})"
    return f"Expected free disk space in {output_dir}, got {got}: free space, then {then}"


def _run(parser: EASTArgumentParser, parsed: ParsedArguments) -> int:
    """Load the data, build the model and the trainer, train, evaluate and save; bad input exits 2 (``parser.error``)."""
    from transformers import set_seed

    from east_hf.hf.data import image_transforms, load_data, set_image_transforms
    from east_hf.hf.metrics import build_compute_metrics
    from east_hf.hf.models.build import attach_data_config, build_model
    from east_hf.hf.trainer import EASTTrainer

    script, data_args, model_args, training = parsed.script, parsed.data, parsed.model, parsed.training
    set_seed(training.seed)
    try:
        with training.main_process_first(desc="loading the data set"):
            data = load_data(data_args)
        model, processor, base_model = build_model(model_args, data, model_args.model_revision)
        if data.modality == "image":
            train_tf, eval_tf, data_config = image_transforms(
                model, processor, data_args.image_size, data_args.augment
            )
            attach_data_config(model, data_config)
            set_image_transforms(data, train_tf, eval_tf)
        compute_metrics = build_compute_metrics(
            data.num_labels,
            beta=training.east_beta,
            average=training.east_average,
            pos_label=training.east_pos_label,
            id2label=data.id2label,
            report_classes=script.report_classes[0] if script.report_classes == ["all"] else script.report_classes,
        )
        trainer = EASTTrainer(
            model=model,
            args=training,
            train_dataset=data.train,
            eval_dataset=data.validation,
            compute_metrics=compute_metrics,
            processing_class=processor,
        )  # also checks push_to_hub can work (token, network) before any training
    except ValueError as e:
        parser.error(str(e))

    main_process = trainer.is_world_process_zero()
    if main_process:
        print(_data_line(data_args.dataset_name, data), flush=True)
    try:
        return _train_and_save(trainer, parsed, data, base_model)
    except (ValueError, FloatingPointError) as e:  # NaN / inf, an unknown metric key, a checkpoint to resume
        parser.error(str(e))
    except Exception as e:  # a full disk ends in one line saying how to go on; anything else as it is raised
        line = _disk_full_line(e, training.output_dir)
        if line is None:
            raise
        parser.error(line)


def _train_and_save(trainer, parsed: ParsedArguments, data, base_model: str | None) -> int:
    script, training = parsed.script, parsed.training
    main_process = trainer.is_world_process_zero()
    train_result = trainer.train(resume_from_checkpoint=training.resume_from_checkpoint)
    trainer.save_model()  # the best model (load_best_model_at_end) and its processor, into output_dir
    extra = []
    if data.preprocessor is not None:  # the Trainer's processing_class: saved by save_model, checkpoints included
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
        print(_summary(test_metrics, training.output_dir, card, extra), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
