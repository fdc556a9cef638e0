"""EASTConfig in Python and east-train's parser resolve the same recipe to the same TrainingArguments."""

import pytest

from east_hf import EASTConfig
from east_hf.scripts.arguments import EASTArgumentParser, load_recipe

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
        {"dataset_name": "sklearn:digits", "east_anneal_monitor": "eval_loss", "east_warm_start": "none",
         "east_ce_weight": 0},  # fmt: skip
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
        assert python.save_strategy == "steps" and python.save_steps == python.eval_steps  # a checkpoint per evaluation
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
