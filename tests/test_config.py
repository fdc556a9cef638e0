"""EASTConfig (east_hf.hf.config): its TrainingArguments defaults (the same as east-train's), the east_* fields' checks
and defaults, and the loss and callback they build."""

from __future__ import annotations

import pytest
from helpers import TinyImages, east_args, tiny_vit

from east_hf import EASTConfig, EASTTrainer
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
    )
    assert args.annealing_callback().state()["args"] == dict(
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
            ce_weight=0.0,  # the default weight with an unknown number of classes (EAST alone)
            ce_weight_decay=0.5,
        ),
        stage_monitor="eval_loss",
        anneal_monitor="eval_mcc",
        restore_best_per_stage=False,
    )
    default = EASTConfig(output_dir=str(tmp_path), report_to=[]).annealing_callback().schedule
    assert (default.warm_start, default.warm_start_epochs, default.warm_start_steps) == ("ce", 2.0, None)
    own_stop = EASTConfig(output_dir=str(tmp_path), report_to=[], east_warm_start_epochs=-1)
    assert own_stop.annealing_schedule().warm_start_epochs is None  # its own early stopping
    baseline = EASTConfig(
        output_dir=str(tmp_path), report_to=[], east_loss="ce", east_warm_start="ce", east_anneal_monitor="loss"
    )
    callback = baseline.annealing_callback()
    assert (callback.schedule.warm_start, callback.schedule.max_stages) == ("none", 1)  # cross-entropy throughout
    assert (callback.anneal_monitor, callback.schedule.anneal_mode) == ("eval_loss", "min")  # the paper's letter


def test_config_floors_precision_leaning_beta_by_default(tmp_path):
    loss = EASTConfig(output_dir=str(tmp_path), east_beta=BETA, report_to="none").build_loss(2)
    assert loss.beta_floor == 1.0 and loss.beta == BETA
    paper = EASTConfig(output_dir=str(tmp_path), east_beta=BETA, east_beta_floor=0, report_to="none").build_loss(2)
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
    # the multiclass default weight (1.0) is only known with the model's classes: the trainer checks it
    paper = dict(east_annealing=True, east_anneal_monitor="eval_loss", east_warm_start="none", eval_strategy="steps")
    with pytest.raises(ValueError, match="Expected east_ce_weight 0 with east_anneal_monitor='eval_loss'.*got 1"):
        EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, **paper))
    data = TinyImages(8)
    EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, **paper, east_ce_weight=0), eval_dataset=data)
    EASTTrainer(model=tiny_vit(2), args=east_args(tmp_path, **paper), eval_dataset=data)  # two classes: no weight


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
