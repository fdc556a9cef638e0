"""east-train's recipe parser: every recipe parses and validates, flags override the recipe, the packaged recipes
(by name, listed, in the wheel), a run from flags alone, and one-line input errors with exit status 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import east_train_error, two_step_flags, write_text

from east_hf.scripts.arguments import EASTArgumentParser, demo_recipe_path, load_recipe
from east_hf.scripts.east_train import main

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
DEMO = ROOT / "recipes" / "digits_longtail_demo.yaml"  # an image task; the tests give it tiny budgets


@pytest.fixture(scope="module")
def parser():
    return EASTArgumentParser()


# ---- the parser ----
def test_help_runs_as_a_console_script():
    script = Path(sys.executable).with_name("east-train")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "east_hf.scripts.east_train"]
    out = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    for flag in ("--east_loss", "--dataset_name", "--model_name_or_path", "--imbalance_ratio", "--loss = --east_loss"):
        assert flag in out.stdout


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_recipe_parses_and_validates(parser, recipe, tmp_path):
    text = recipe.read_text()
    own_data = ["--dataset_name", "texts.csv"] if "--dataset_name PATH" in text else []  # a recipe for your own data
    parsed = parser.parse([str(recipe), "--output_dir", str(tmp_path), *own_data])
    training = parsed.training
    assert parsed.data.dataset_name
    for line in text.splitlines():  # every override says why
        assert not line.strip() or line.startswith("#") or " # " in line, f"{recipe.name}: uncommented {line!r}"
    assert training.load_best_model_at_end and training.remove_unused_columns is False
    assert training.metric_for_best_model == f"eval_{training.east_target_key}" and training.greater_is_better
    assert training.optim == "adamw_torch" and training.east_temperature == 0.2
    assert training.per_device_train_batch_size in (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    if recipe.stem in ("finetune_text", "finetune_image"):  # a fine-tune's schedule (the fine-tuning guide)
        assert training.east_decay == 0.5 and training.eval_strategy == "steps" and 0 < training.eval_steps < 1
        assert training.east_warm_start_epochs == 1 and training.east_patience == 2
        assert training.east_ce_loss == "ldam" and training.east_ce_weight == 0.25 and training.east_max_stages == 1
    else:  # the paper's grids
        assert training.east_decay in (0.8, 0.9)
        assert training.learning_rate in (1e-2, 1e-3, 1e-4)
    if "fbeta_dog" in recipe.stem or "fbeta_frog" in recipe.stem:
        cls = "dog" if "dog" in recipe.stem else "frog"
        assert training.east_beta == {cls: 0.25 if "precision" in recipe.stem else 5}
    if recipe.stem.endswith(("_ce", "_dice")):
        assert training.east_loss == recipe.stem.rsplit("_", 1)[1]


def test_packaged_demo_is_the_demo_recipe(parser):
    assert demo_recipe_path().read_text() == (ROOT / "recipes" / "demo.yaml").read_text()
    assert parser.parse(["--demo"]).data.dataset_name == "sklearn:rare_positive"


def test_flags_override_the_recipe_and_aliases_resolve(parser, tmp_path):
    parsed = parser.parse(
        [str(DEMO), "--loss", "ce", "--lr=0.05", "--beta", "{'3': 2}", "--metric", "accuracy", "--no_east_annealing"]
    )
    t = parsed.training
    assert (t.east_loss, t.learning_rate, t.east_beta, t.east_metric) == ("ce", 0.05, {"3": 2}, "accuracy")
    assert t.east_annealing is False and t.metric_for_best_model == "eval_accuracy"
    assert t.per_device_train_batch_size == 64 and parsed.data.imbalance_ratio == 0.1  # kept from the recipe
    assert parsed.overrides["east_loss"] == "ce" and "learning_rate" in parsed.overrides
    # a second parse with the same parser starts from the pristine defaults, not from the last recipe
    other = parser.parse([str(write_text(tmp_path / "r.yaml", "dataset_name: sklearn:iris\n"))])
    assert other.training.learning_rate == 5e-5 and other.data.imbalance_ratio is None
    assert other.training.output_dir == "runs/r"


def test_a_baseline_chosen_by_flag_leaves_the_recipes_east_mix_at_its_defaults(parser, tmp_path, capsys):
    """The fine-tune recipes set LDAM as EAST's companion term; ``--loss la`` on them trains plain logit-adjusted
    cross-entropy, ``--loss dice`` keeps the warm start's LDAM but not its weight, and a flag that sets the mix for
    a baseline is still refused."""
    recipe, data = str(ROOT / "recipes" / "finetune_text.yaml"), ["--dataset_name", "texts.csv"]
    run = ["--output_dir", str(tmp_path)]
    east = parser.parse([recipe, *data, *run]).training
    assert (east.east_loss, east.east_ce_loss, east.east_ce_weight) == ("east", "ldam", 0.25)
    la = parser.parse([recipe, *data, *run, "--loss", "la"]).training
    assert (la.east_ce_loss, la.east_ce_weight, la.east_patience) == (None, None, 2)  # the rest of the recipe stays
    dice = parser.parse([recipe, *data, *run, "--loss", "dice"]).training
    assert (dice.east_ce_loss, dice.east_ce_weight) == ("ldam", None)  # dice warm-starts as EAST does, mixes nothing
    err = east_train_error(capsys, [recipe, *data, *run, "--loss", "la", "--east_ce_weight", "0.25"], only_line=True)
    assert err == "east-train: error: Expected east_ce_weight 0 for east_loss='la' (it mixes into EAST only)"


def test_dry_run_prints_resolved_settings(capsys):
    assert main([str(DEMO), "--dry_run", "--loss", "dice"]) == 0
    out = capsys.readouterr().out
    assert "dataset_name: sklearn:digits" in out and "east_loss: dice" in out


# ---- one-line errors, exit status 2 ----
def test_unknown_recipe_key_suggests_the_closest(capsys, tmp_path):
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: sklearn:iris\nlearnig_rate: 0.1\n")
    assert "unknown recipe key learnig_rate; did you mean learning_rate?" in east_train_error(
        capsys, [recipe], only_line=True
    )


def test_unknown_flag_suggests_the_closest(capsys):
    assert "unknown argument --east_metirc; did you mean --east_metric?" in east_train_error(
        capsys, [DEMO, "--east_metirc", "mcc"], only_line=True
    )


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--east_temperature", "0.9"], "Expected east_temperature in (0, 0.4), got 0.9"),
        (["--learning_rate", "fast"], "invalid float value: 'fast'"),
        (["--imbalance_ratio", "2"], "Expected imbalance_ratio in (0, 1], got 2.0"),
    ],
)
def test_invalid_values(capsys, argv, expected):
    assert expected in east_train_error(capsys, [DEMO, *argv], only_line=True)


def test_missing_recipe_and_missing_dataset_path(capsys, tmp_path):
    assert "recipe" in east_train_error(capsys, [tmp_path / "none.yaml"], only_line=True)
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: ./no/such/data.csv\n")
    assert "dataset path './no/such/data.csv' does not exist" in east_train_error(capsys, [recipe], only_line=True)


def test_unreachable_hub_ids_offline(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: someone/not-a-cached-dataset\n")
    err = east_train_error(capsys, [recipe], only_line=True)
    assert "'someone/not-a-cached-dataset'" in err and "could not be reached" in err and "HF_HUB_OFFLINE" in err
    err = east_train_error(capsys, [DEMO, "--model", "someone/not-a-cached-model"], only_line=True)
    assert "'someone/not-a-cached-model'" in err and "could not be reached" in err and "HF_HUB_OFFLINE" in err
    assert "push_to_hub" in east_train_error(
        capsys, [DEMO, "--push_to_hub", "true", "--hub_model_id", "me/demo"], only_line=True
    )


def test_missing_label_column_names_the_columns(capsys, tmp_path):
    csv = write_text(tmp_path / "d.csv", "a,b,target\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20)))
    recipe = write_text(tmp_path / "r.yaml", f"dataset_name: {csv}\nlabel_column: y\n")
    err = east_train_error(capsys, [recipe], only_line=True)
    assert "label column 'y' not found" in err and "columns are: a, b, target" in err


# ---- the packaged recipes ----
def test_every_recipe_is_packaged_and_reachable_by_name(parser, capsys):
    from east_hf.scripts.arguments import packaged_recipes

    assert sorted(packaged_recipes()) == sorted(p.stem for p in RECIPES)
    assert parser.parse(["cifar10_f1", "--dry_run"]).recipe_path == str(packaged_recipes()["cifar10_f1"])
    assert parser.parse(["breast_cancer_imbalanced_f1.yaml"]).data.dataset_name == "sklearn:breast_cancer"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse(["--list_recipes"])
    assert exit_info.value.code == 0 and "cifar10_f1" in capsys.readouterr().out
    assert "did you mean the packaged recipe 'cifar10_f1'" in east_train_error(capsys, ["cifar10_f2"], only_line=True)


def test_wheel_ships_every_recipe_the_license_and_builds_without_warnings(tmp_path):
    """The setuptools backend on a copy of the tree (so no build/ is left in the checkout), its output searched for
    setuptools' warnings (an unlisted package, a deprecated setting)."""
    import shutil
    import zipfile

    ignore = shutil.ignore_patterns(".venv", "runs", ".git", "build", "*.egg-info", "__pycache__", ".*cache")
    src = shutil.copytree(ROOT, tmp_path / "src", ignore=ignore)
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(tmp_path)!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=src)
    assert out.returncode == 0, out.stderr[-2000:]
    log = out.stdout + out.stderr
    for warning in ("SetuptoolsDeprecationWarning", "SetuptoolsWarning", "is absent from the `packages`", "!!"):
        assert warning not in log, log[-3000:]
    (wheel,) = tmp_path.glob("east_hf-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"east_hf/recipes/{p.name}" for p in RECIPES} <= set(names)
    assert any(n.endswith("licenses/LICENSE") for n in names) and "east_hf/hf/data/pipeline.py" in names
    assert "east_hf/hf/metrics/mcc/mcc.py" in names and "east_hf/hub_cards/east_model_card.md" in names


# ---- a reporting integration that is not installed, a recipe key written twice ----
def test_report_to_a_missing_integration_is_one_line(capsys):
    from transformers.integrations import get_available_reporting_integrations

    missing = next(n for n in ("tensorboard", "wandb", "mlflow") if n not in get_available_reporting_integrations())
    err = east_train_error(capsys, [DEMO, "--report_to", missing, "--dry_run"], only_line=True)
    assert f"report_to {missing!r} needs its package" in err and "--report_to none" in err


def test_a_key_written_twice_in_a_recipe_is_refused_naming_it(capsys, tmp_path):
    recipe = write_text(
        tmp_path / "r.yaml", "dataset_name: sklearn:iris\nlearning_rate: 0.1\nseed: 1\nlearning_rate: 0.2\n"
    )
    err = east_train_error(capsys, [recipe, "--dry_run"], only_line=True)
    assert err == (
        f"east-train: error: Expected each key once in recipe '{recipe}', got 'learning_rate' twice (lines 2 and 4): "
        "keep the one you mean"
    )
    nested = write_text(tmp_path / "n.yaml", "dataset_name: sklearn:iris\neast_beta: {setosa: 2, setosa: 0.5}\n")
    assert "got 'setosa' twice (line 2)" in east_train_error(capsys, [nested, "--dry_run"], only_line=True)
    merged = write_text(tmp_path / "m.yaml", "x: &x {a: 1, b: 2}\ny:\n  <<: *x\n  a: 3\n")  # a merge may override
    assert load_recipe(merged) == {"x": {"a": 1, "b": 2}, "y": {"a": 3, "b": 2}}


# ---- listing recipes, a run without a recipe, the card's license ----
def test_listing_recipes_imports_neither_transformers_nor_the_config():
    """`east-train --list_recipes` answers before the parser over TrainingArguments is built."""
    code = (
        "import sys\n"
        "from east_hf.scripts.east_train import main\n"
        "code = main(['--list_recipes'])\n"
        "print('exit', code, sorted(m for m in sys.modules if m.split('.')[0] == 'transformers'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cifar10_f1" in out.stdout and out.stdout.rstrip().endswith("exit 0 []"), out.stdout[-500:]


def test_every_field_as_a_flag_needs_no_recipe(parser, capsys, tmp_path):
    parsed = parser.parse(["--dataset", "sklearn:breast_cancer", "--loss", "ce", "--dry_run"])
    assert parsed.recipe == {} and parsed.recipe_path is None and parsed.training.east_loss == "ce"
    assert parsed.training.output_dir == str(Path("runs") / "sklearn_breast_cancer")
    local = parser.parse(["--dataset_name", str(ROOT / "recipes" / "demo.yaml"), "--dry_run"])  # any local file
    assert local.training.output_dir == str(Path("runs") / "demo")
    assert "expected a recipe" in east_train_error(
        capsys, ["--loss", "ce"], only_line=True
    )  # neither a recipe nor a data set
    out = tmp_path / "run"
    argv = ["--dataset_name", "sklearn:breast_cancer", "--license", "mit"]
    assert main([*argv, *two_step_flags(out, hidden_sizes=16, model_card="true")]) == 0
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "README.md")
    assert card.data.license == "mit" and (out / "model.safetensors").is_file()


def test_license_is_a_recipe_key_and_a_flag_checked_before_training(parser, capsys, tmp_path):
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: sklearn:iris\nlicense: cc-by-4.0  # the data's licence\n")
    assert parser.parse([str(recipe)]).script.license == "cc-by-4.0"
    assert parser.parse([str(recipe), "--license", "apache-2.0"]).script.license == "apache-2.0"
    err = east_train_error(capsys, [recipe, "--license", "Apache-2.0"], only_line=True)
    assert "Expected a Hub license id" in err and "got 'Apache-2.0'; did you mean 'apache-2.0'?" in err
    err = east_train_error(capsys, [recipe, "--license", "bogus-lic"], only_line=True)  # an id's form, not the Hub's
    assert "Expected a Hub license id" in err and "got 'bogus-lic'" in err and "/docs/hub/repositories-licenses" in err
