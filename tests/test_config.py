"""EASTConfig (east_hf.hf.config.east_config): its TrainingArguments defaults (the same as east-train's), the east_*
fields' checks and defaults, and the loss and callback the builder (east_hf.hf.config.build) makes of them."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from helpers import PlainClassifier, TinyImages, TinyTabular, east_args, tiny_vit

from east_hf import EASTConfig, EASTTrainer
from east_hf.hf.config.build import build_annealing_callback, build_east_loss, build_schedule, class_priors
from east_hf.scripts.arguments import EASTArgumentParser, load_recipe

BETA = [1.0, 0.25]  # F0.25 of class 1: precision weighs 16 times recall


def test_from_config_maps_the_east_fields(tmp_path):
    args = EASTConfig(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        east_metric="mcc",
        east_temperature=0.1,
        east_decay=0.8,
        east_patience=2,
        east_stage_patience=4,
        east_min_temperature=0.01,
        east_max_stages=6,
        east_threshold=0.001,
        east_warm_start="ce",
        east_warm_start_steps=10,
        east_restore_best_per_stage=False,
        east_select_window=3,
        east_ema_decay=0.9,
        east_lr_decay=0.7,
    )
    assert args.metric_for_best_model == "eval_mean3_mcc"
    with pytest.raises(ValueError, match="east_annealing=True for east_select_window=3"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_select_window=3, east_annealing=False)
    with pytest.raises(ValueError, match="east_select_window as an int >= 1"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_select_window=0)
    assert build_annealing_callback(args).state()["args"] == dict(
        schedule=dict(
            temperature=0.1,
            decay=0.8,
            patience=2,
            stage_patience=4,
            min_temperature=0.01,
            max_stages=6,
            threshold=0.001,
            threshold_mode="rel",
            anneal_threshold=0.0,
            stage_mode="min",
            anneal_mode="max",
            warm_start="ce",
            warm_start_steps=10,
            warm_start_epochs=None,  # a fixed number of steps wins over the default epochs
            ce_weight=1.0,  # the default: the annealed (logit-adjusted) cross-entropy
            ce_weight_decay=0.5,
            lr_decay=0.7,
            select_window=3,
        ),
        stage_monitor="eval_loss",
        anneal_monitor="eval_mcc",
        selection_key="eval_mean3_mcc",
        restore_best_per_stage=False,
        ema_decay=0.9,
        ce_fallback=True,  # single-label EAST with a warm start: east_ce_fallback's default
    )
    assert build_annealing_callback(replace(args, east_ce_fallback=False)).ce_fallback is False
    default = build_schedule(EASTConfig(output_dir=str(tmp_path), report_to=[]))
    assert (default.warm_start, default.warm_start_epochs, default.warm_start_steps) == ("ce", 2.0, None)
    own_stop = EASTConfig(output_dir=str(tmp_path), report_to=[], east_warm_start_epochs=-1)
    assert build_schedule(own_stop).warm_start_epochs is None  # its own early stopping
    baseline = EASTConfig(
        output_dir=str(tmp_path), report_to=[], east_loss="ce", east_warm_start="ce", east_anneal_monitor="loss"
    )
    callback = build_annealing_callback(baseline)
    assert (callback.schedule.warm_start, callback.schedule.max_stages) == ("none", 1)  # cross-entropy throughout
    assert (callback.anneal_monitor, callback.schedule.anneal_mode) == ("eval_loss", "min")  # the paper's letter


def test_config_floors_precision_leaning_beta_by_default(tmp_path):
    loss = build_east_loss(EASTConfig(output_dir=str(tmp_path), east_beta=BETA, report_to="none"), 2)
    assert loss.beta_floor == 1.0 and loss.beta == BETA
    paper = build_east_loss(
        EASTConfig(output_dir=str(tmp_path), east_beta=BETA, east_beta_floor=0, report_to="none"), 2
    )
    assert paper.beta_floor == 0.0 and paper.beta == BETA
    with pytest.raises(ValueError, match="east_beta_floor"):
        EASTConfig(output_dir=str(tmp_path), east_beta_floor=-1, report_to="none")


def test_a_loss_anneal_monitor_needs_one_kind_of_loss_in_every_stage(tmp_path):
    # The warm start's cross-entropy is far below any surrogate value: judged on eval_loss it would be kept as the best
    # stage (measured: lending_club F1 0.017 instead of 0.165), so the combination is refused before training.
    base = dict(output_dir=str(tmp_path), report_to=[], east_anneal_monitor="eval_loss")
    with pytest.raises(ValueError, match="Expected east_warm_start 'none' with east_anneal_monitor='eval_loss'"):
        EASTConfig(**base)
    with pytest.raises(ValueError, match="Expected east_ce_weight 0 with east_anneal_monitor='eval_loss'.*got 0.5"):
        EASTConfig(**base, east_warm_start="none", east_ce_weight=0.5)
    EASTConfig(**base, east_warm_start="none", east_ce_weight=0)  # the paper's letter
    EASTConfig(**base, east_loss="ce")  # a baseline: one loss throughout (its warm start is off)
    EASTConfig(**base, east_annealing=False)  # nothing is compared across stages
    # the default weight (1.0) too, for any number of classes, before a model is seen
    paper = dict(east_annealing=True, east_anneal_monitor="eval_loss", east_warm_start="none", eval_strategy="steps")
    with pytest.raises(ValueError, match="Expected east_ce_weight 0 with east_anneal_monitor='eval_loss'.*got 1"):
        east_args(tmp_path, **paper)
    data = TinyImages(8)
    EASTTrainer(model=tiny_vit(2), args=east_args(tmp_path, **paper, east_ce_weight=0), eval_dataset=data)


KEYS = (
    "eval_strategy",
    "save_strategy",
    "logging_strategy",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "save_total_limit",
    "optim",
    "label_names",
)


def resolved(args: EASTConfig) -> dict:
    return {key: str(getattr(args, key)) for key in KEYS}


@pytest.mark.parametrize(
    "recipe",
    [
        "demo",  # the packaged demo: tabular data, F1
        {"dataset_name": "sklearn:digits", "model_name_or_path": "tabular_mlp", "east_metric": "mcc"},
        {"dataset_name": "sklearn:digits", "model_name_or_path": "tabular_mlp", "metric": "accuracy"},  # an alias
        {
            "dataset_name": "sklearn:digits",
            "east_anneal_monitor": "eval_loss",
            "east_warm_start": "none",
            "east_ce_weight": 0,
        },  # fmt: skip
        {"dataset_name": "sklearn:digits", "eval_strategy": "steps", "eval_steps": 7},
    ],
)
def test_python_and_east_train_resolve_a_recipe_to_the_same_training_arguments(recipe, tmp_path):
    import yaml

    if recipe == "demo":
        path = EASTArgumentParser().parse(["--demo", "--output_dir", str(tmp_path)]).recipe_path
        recipe = load_recipe(path)
    else:
        path = tmp_path / "recipe.yaml"
        path.write_text(yaml.safe_dump(recipe))
    cli = EASTArgumentParser().parse([str(path), "--output_dir", str(tmp_path / "run")]).training
    parser = EASTArgumentParser()
    fields = {parser.canonical(key): value for key, value in recipe.items()}  # aliases as east-train reads them
    training_fields = {k: v for k, v in fields.items() if k in EASTConfig.__dataclass_fields__}
    python = EASTConfig(output_dir=str(tmp_path / "run"), **training_fields)
    assert resolved(python) == resolved(cli)
    # what EAST needs, whichever way the config was made
    assert python.load_best_model_at_end and python.metric_for_best_model == python.east_anneal_key
    assert str(python.optim) in ("adamw_torch", "OptimizerNames.ADAMW_TORCH")
    if python.eval_strategy == "steps":
        assert (
            python.save_strategy == "steps" and python.save_steps == python.eval_steps
        )  # a checkpoint per evaluation
    else:
        assert python.eval_strategy == python.save_strategy == python.logging_strategy == "epoch"


def test_an_explicit_training_argument_wins_over_east_defaults(tmp_path):
    args = EASTConfig(
        output_dir=str(tmp_path), load_best_model_at_end=False, eval_strategy="steps", eval_steps=5,
        save_strategy="no", optim="sgd", save_total_limit=None,
    )  # fmt: skip
    assert (args.load_best_model_at_end, args.metric_for_best_model, args.save_strategy) == (False, None, "no")
    assert (args.optim, args.save_total_limit) == ("sgd", None)
    assert EASTConfig(output_dir=str(tmp_path), metric_for_best_model="eval_accuracy").metric_for_best_model == (
        "eval_accuracy"
    )


# ---- east_class_priors: counts or priors given instead of counted ----
def test_class_priors_from_a_list_a_mapping_by_class_name_or_a_file(tmp_path):
    names = {0: "cat", 1: "dog", 2: "frog"}  # a model's id2label
    json_file = tmp_path / "priors.json"
    json_file.write_text('{"frog": 10, "cat": 60, "dog": 30}')
    csv_file = tmp_path / "priors.csv"
    csv_file.write_text("class,count\ncat,60\ndog,30\nfrog,10\n")  # a header row is skipped
    for given in ([60, 30, 10], "[60, 30, 10]", {"dog": 30, "cat": 60, "2": 10}, str(json_file), str(csv_file)):
        args = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="la", east_class_priors=given)
        assert class_priors(args, 3, names) == [60.0, 30.0, 10.0], given
    # a file is read when the config is made: the arguments saved with a run hold its values, not its path
    args = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="la", east_class_priors=str(csv_file))
    assert args.east_class_priors == {"cat": 60.0, "dog": 30.0, "frog": 10.0}
    fractions = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="wce", east_class_priors=[0.75, 0.25])
    assert class_priors(fractions) == [0.75, 0.25]  # a list sets the number of classes of a model without config
    assert class_priors(EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="la"), 3, names) is None
    # east-train reads the flag as YAML, as the Python field takes it
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("dataset_name: sklearn:iris\neast_loss: la\n")
    for flag in ("{cat: 60, dog: 30, 2: 10}", "[60, 30, 10]", str(json_file)):
        cli = EASTArgumentParser().parse([str(recipe), "--output_dir", str(tmp_path), "--east_class_priors", flag])
        assert class_priors(cli.training, 3, names) == [60.0, 30.0, 10.0], flag
    recipe.write_text(f"dataset_name: sklearn:iris\neast_loss: la\neast_class_priors: {csv_file}\n")
    cli = EASTArgumentParser().parse([str(recipe), "--output_dir", str(tmp_path)])
    assert class_priors(cli.training, 3, names) == [60.0, 30.0, 10.0]


@pytest.mark.parametrize(
    "given, message",
    [
        ([60, -1, 10], r"Expected east_class_priors as finite numbers >= 0, got \[60, -1, 10\]"),
        ([0.5, float("nan")], r"Expected east_class_priors as finite numbers >= 0, got \[0.5, nan\]"),
        ([0, 0, 0], r"Expected east_class_priors for >= 2 classes, not all 0, got \[0, 0, 0\]"),
        ("[1, 2", r"Expected east_class_priors as JSON, got '\[1, 2'"),
        ("priors.txt", r"Expected east_class_priors as a list, a mapping or a .json / .csv file, got 'priors.txt'"),
        ("missing.csv", r"Expected east_class_priors as an existing file, got 'missing.csv' \(no such file\)"),
        (0.5, r"Expected east_class_priors as a list, a \{class: value\} mapping or a .json / .csv file, got float"),
    ],
)
def test_bad_class_priors_are_refused_when_the_config_is_made(tmp_path, given, message):
    with pytest.raises((ValueError, TypeError), match=f"^{message}$"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="la", east_class_priors=given)


def test_class_priors_that_do_not_fit_the_models_classes_are_refused(tmp_path):
    names = {0: "cat", 1: "dog", 2: "frog"}

    def priors(given):
        return EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="la", east_class_priors=given)

    with pytest.raises(ValueError, match=r"^Expected east_class_priors for 3 classes, got 2 values$"):
        class_priors(priors([60, 40]), 3, names)
    with pytest.raises(ValueError, match=r"^Expected east_class_priors for every class, got none for \['frog'\]$"):
        class_priors(priors({"cat": 60, "dog": 40}), 3, names)
    with pytest.raises(ValueError, match=r"Expected east_class_priors keys among the class names .* got 'fox'"):
        class_priors(priors({"cat": 60, "dog": 30, "fox": 10}), 3, names)
    with pytest.raises(ValueError, match=r"^Expected each class once in east_class_priors, got class 0 twice"):
        class_priors(priors({"cat": 60, "0": 30, "frog": 10}), 3, names)
    bad_row = tmp_path / "bad.csv"
    bad_row.write_text("cat,60\ndog,thirty\n")
    with pytest.raises(ValueError, match=r"^Expected a number in .*bad.csv' row 2, got 'thirty'$"):
        priors(str(bad_row))
    # the trainer resolves them against the model's classes before training
    with pytest.raises(ValueError, match=r"^Expected east_class_priors for 3 classes, got 2 values$"):
        EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, east_loss="la", east_class_priors=[60, 40]))


# ---- launchers and devices ----
_LAUNCH_WARNING = (
    "accelerate launch asked for several processes and started this one alone (without --multi_gpu it runs one "
    "process): training runs in 1 process; launch with torchrun --nproc_per_node N, or add --multi_gpu (on a CPU "
    "machine too)"
)


def test_accelerate_launch_of_two_processes_that_runs_one_is_warned_about_in_one_line(tmp_path):
    """`accelerate launch --num_processes 2` without --multi_gpu starts one process (accelerate's plain launcher):
    the config it builds says so in one line."""
    accelerate = shutil.which("accelerate", path=os.path.dirname(sys.executable)) or shutil.which("accelerate")
    if accelerate is None:
        pytest.skip("accelerate's launcher is not installed")
    script = tmp_path / "config.py"
    script.write_text(
        "import os, sys\n"
        "from east_hf import EASTConfig\n"
        f"EASTConfig(output_dir={str(tmp_path / 'out')!r}, report_to=[])\n"
        "print('processes', os.environ.get('WORLD_SIZE', '1'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "MASTER_", "WORLD_SIZE"))}
    env["HF_HOME"] = str(tmp_path / "hf")  # no accelerate config file of this machine's user
    result = subprocess.run(
        [accelerate, "launch", "--num_processes", "2", str(script)],
        capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("processes 1") == 1  # one process ran: accelerate's behaviour, not ours
    assert [line for line in result.stderr.splitlines() if "accelerate launch asked" in line] == [_LAUNCH_WARNING]


def test_launches_that_run_what_they_asked_for_are_not_warned_about(tmp_path, monkeypatch, caplog):
    from east_hf.hf.devices import _one_process_of_several

    for name in ("ACCELERATE_USE_CPU", "MASTER_ADDR", "WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACCELERATE_USE_CPU", "False")  # `accelerate launch` of one process: no MASTER_ADDR
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    assert "accelerate launch asked" not in caplog.text
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")  # the plain launcher asked for several processes ...
    assert _one_process_of_several()
    for size in ("WORLD_SIZE", "PMI_SIZE"):  # ... and torchrun (--multi_gpu) or mpirun started them all
        monkeypatch.setenv(size, "2")
        assert not _one_process_of_several()
        monkeypatch.delenv(size)


@pytest.mark.skipif(torch.accelerator.is_available(), reason="a machine without an accelerator")
def test_bf16_without_an_accelerator_trains_with_bf16_autocast_on_the_cpu(tmp_path, caplog):
    """transformers stops `bf16=True` without use_cpu on a CPU-only machine ("Your setup doesn't support bf16/gpu"):
    EASTConfig resolves it to use_cpu=True (CPU bf16 autocast) and says so in one line."""
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        args = east_args(tmp_path, use_cpu=False, bf16=True, max_steps=2)
    assert args.use_cpu and args.bf16
    assert [r.getMessage() for r in caplog.records if "bf16" in r.getMessage()] == [
        "bf16=True without an accelerator: bf16 autocast on the CPU (use_cpu=True)"
    ]
    trainer = EASTTrainer(model=PlainClassifier(), args=args, train_dataset=TinyTabular(32))
    trainer.train()
    assert all(torch.isfinite(torch.tensor(e["loss"])) for e in trainer.state.log_history if "loss" in e)


def test_bf16_on_an_accelerator_without_bf16_is_explained_in_one_line(tmp_path, monkeypatch):
    import east_hf.hf.devices as config

    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: torch.device("cuda"))
    monkeypatch.setattr(config, "is_torch_bf16_gpu_available", lambda: False)
    with pytest.raises(ValueError) as error:
        EASTConfig(output_dir=str(tmp_path), report_to=[], bf16=True)
    assert str(error.value) == (
        "Expected an accelerator with bf16 support for bf16=True, got cuda without it; use fp16=True, or "
        "use_cpu=True for bf16 autocast on the CPU"
    )


def test_the_settings_a_loss_leaves_unused_follow_its_loss_spec():
    """EAST trains with every mix and annealing setting; a baseline with none (one stage of early stopping, no mix);
    Dice warm-starts like EAST (its warm start's loss) but mixes nothing and has no temperature to anneal."""
    from east_hf.hf.config.checks import ANNEALING_FIELDS, MIX_FIELDS, fields_left_unused

    assert fields_left_unused("east") == set()
    assert fields_left_unused("la") == fields_left_unused("ldam") == {*MIX_FIELDS, *ANNEALING_FIELDS}
    assert fields_left_unused("dice") == {*MIX_FIELDS, *ANNEALING_FIELDS} - {"east_ce_loss"}
