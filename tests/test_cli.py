"""east-train: the recipe parser, tiny end-to-end runs, and one-line input errors."""

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import write_text

from east_hf.hf.data import load_data, load_tabular_features
from east_hf.scripts.arguments import EASTArgumentParser, demo_recipe_path, load_recipe
from east_hf.scripts.east_train import main

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
DEMO = ROOT / "recipes" / "digits_longtail_demo.yaml"  # an image task; the tests give it tiny budgets


@pytest.fixture(scope="module")
def parser():
    return EASTArgumentParser()


def _error(capsys, argv) -> str:
    """Run main(argv), expect exit status 2 and exactly one stderr line; return that line."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("east-train: error: ") and "\n" not in err, err
    return err


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


def test_dry_run_prints_resolved_settings(capsys):
    assert main([str(DEMO), "--dry_run", "--loss", "dice"]) == 0
    out = capsys.readouterr().out
    assert "dataset_name: sklearn:digits" in out and "east_loss: dice" in out


# ---- one-line errors, exit status 2 ----
def test_unknown_recipe_key_suggests_the_closest(capsys, tmp_path):
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: sklearn:iris\nlearnig_rate: 0.1\n")
    assert "unknown recipe key learnig_rate; did you mean learning_rate?" in _error(capsys, [recipe])


def test_unknown_flag_suggests_the_closest(capsys):
    assert "unknown argument --east_metirc; did you mean --east_metric?" in _error(
        capsys, [DEMO, "--east_metirc", "mcc"]
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
    assert expected in _error(capsys, [DEMO, *argv])


def test_missing_recipe_and_missing_dataset_path(capsys, tmp_path):
    assert "recipe" in _error(capsys, [tmp_path / "none.yaml"])
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: ./no/such/data.csv\n")
    assert "dataset path './no/such/data.csv' does not exist" in _error(capsys, [recipe])


def test_unreachable_hub_ids_offline(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: someone/not-a-cached-dataset\n")
    err = _error(capsys, [recipe])
    assert "'someone/not-a-cached-dataset'" in err and "could not be reached" in err and "HF_HUB_OFFLINE" in err
    err = _error(capsys, [DEMO, "--model", "someone/not-a-cached-model"])
    assert "'someone/not-a-cached-model'" in err and "could not be reached" in err and "HF_HUB_OFFLINE" in err
    assert "push_to_hub" in _error(capsys, [DEMO, "--push_to_hub", "true", "--hub_model_id", "me/demo"])


def test_missing_label_column_names_the_columns(capsys, tmp_path):
    csv = write_text(tmp_path / "d.csv", "a,b,target\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20)))
    recipe = write_text(tmp_path / "r.yaml", f"dataset_name: {csv}\nlabel_column: y\n")
    err = _error(capsys, [recipe])
    assert "label column 'y' not found" in err and "columns are: a, b, target" in err


# ---- end to end ----
def test_tiny_run_writes_a_reloadable_model(capsys, tmp_path):
    out = tmp_path / "run"
    overrides = {
        "output_dir": out,
        "max_steps": 6,
        "eval_strategy": "steps",
        "eval_steps": 3,
        "logging_steps": 3,
        "per_device_train_batch_size": 32,
        "max_train_samples": 96,
        "max_eval_samples": 48,
        "max_test_samples": 48,
        "disable_tqdm": "true",
        "use_cpu": "true",
        "report_classes": "all",
    }
    argv = [str(DEMO), *[str(x) for k, v in overrides.items() for x in (f"--{k}", v)]]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "Test metrics (best model)" in stdout and str(out / "model.safetensors") in stdout
    for name in ("model.safetensors", "config.json", "test_results.json", "all_results.json", "trainer_state.json"):
        assert (out / name).is_file(), name
    saved = json.loads((out / "test_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["best_metric"] is not None and any(
        "eval_loss" in e and "east_temperature" in e for e in state["log_history"]
    )
    assert "test_fbeta" in json.loads((out / "all_results.json").read_text())

    # Reload: the model from its folder, the transforms from its config.json, the test split from the same recipe.
    from transformers import AutoImageProcessor

    from east_hf.hf.data import set_image_transforms
    from east_hf.hf.metrics import build_compute_metrics
    from east_hf.hf.models import load_pretrained

    model = load_pretrained(str(out)).eval()
    processor = AutoImageProcessor.from_pretrained(str(out))
    data = load_data(EASTArgumentParser().parse(argv).data)
    set_image_transforms(data, processor.val_transforms, processor.val_transforms)
    batch = [data.test[i] for i in range(len(data.test))]
    with torch.no_grad():
        logits = model(pixel_values=torch.stack([b["pixel_values"] for b in batch])).logits
    labels = torch.tensor([b["labels"] for b in batch])
    metrics = build_compute_metrics(10, id2label=model.config.id2label)((logits.numpy(), labels.numpy()))
    assert saved["test_samples"] == len(labels) == 48
    for key in ("accuracy", "fbeta", "mcc", "precision", "recall"):
        assert metrics[key] == pytest.approx(saved[f"test_{key}"], abs=1e-6), key
    assert "test_precision_9" in saved  # report_classes: all

    # The same folder through timm alone (east_hf.hf.models imported: darknet19 is east_hf's timm architecture): the
    # local-dir loader builds the 10-way model with the trained weights and the data config it was trained with.
    import timm
    from timm.data import create_transform, resolve_data_config

    timm_model = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    transform = create_transform(**resolve_data_config({}, model=timm_model))
    set_image_transforms(data, transform, transform)
    with torch.no_grad():
        timm_logits = timm_model(torch.stack([data.test[i]["pixel_values"] for i in range(len(data.test))]))
    torch.testing.assert_close(timm_logits, logits)
    overlay = timm.create_model(
        "darknet19_tiny",
        pretrained=True,
        num_classes=10,
        pretrained_cfg_overlay=dict(file=str(out / "model.safetensors"), num_classes=10),
    )
    assert all(torch.equal(v, timm_model.state_dict()[k]) for k, v in overlay.state_dict().items())


def _tiny_args(out, **more):
    overrides = {
        "output_dir": out,
        "max_steps": 2,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "max_train_samples": 64,
        "max_eval_samples": 32,
        "max_test_samples": 32,
        "disable_tqdm": "true",
        "use_cpu": "true",
        "model_card": "false",
        **more,
    }
    return [str(x) for k, v in overrides.items() if v is not None for x in (f"--{k}", v)]


def test_local_transformers_checkpoint_is_fine_tuned_with_its_image_processor(capsys, tmp_path):
    from helpers import tiny_vit
    from transformers import ViTImageProcessor

    checkpoint = tmp_path / "vit"
    tiny_vit(num_labels=3, size=16).save_pretrained(checkpoint)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(checkpoint)
    out = tmp_path / "run"
    assert main([str(DEMO), *_tiny_args(out, model_name_or_path=checkpoint)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "vit" and len(config["id2label"]) == 10  # a new 10-way head
    assert (out / "preprocessor_config.json").is_file() and (out / "test_results.json").is_file()


def test_tabular_run_saves_its_input_statistics(capsys, tmp_path):
    recipe = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
    out = tmp_path / "run"
    assert main([str(recipe), *_tiny_args(out, hidden_sizes=16, max_train_samples=None)]) == 0
    assert str(out / "preprocessor_config.json") in capsys.readouterr().out
    preprocessor = load_tabular_features(out)
    assert len(preprocessor.feature_names) == json.loads((out / "config.json").read_text())["num_features"] == 30
    assert "test_recall" in json.loads((out / "test_results.json").read_text())  # the positive class's recall


TABULAR_ROWS_SCRIPT = """
import sys, pandas as pd, torch
if sys.argv[2] == "blocked":
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name == "east_hf" or name.startswith("east_hf."):
                raise ImportError("east_hf is blocked")
    sys.meta_path.insert(0, Blocker())
from transformers import AutoFeatureExtractor, AutoModelForSequenceClassification
run = sys.argv[1]
extractor = AutoFeatureExtractor.from_pretrained(run, trust_remote_code=True)
model = AutoModelForSequenceClassification.from_pretrained(run, trust_remote_code=True).eval()
assert "east_hf" not in sys.modules, "east_hf was imported"
inputs = extractor(pd.read_csv(run + "/../data/test.csv").drop(columns="y"), return_tensors="pt")
with torch.no_grad():
    logits = model(**inputs).logits
torch.save({"input_features": inputs["input_features"], "logits": logits}, run + "/../rows.pt")
"""


def test_tabular_run_inputs_reload_with_auto_feature_extractor_from_raw_rows(capsys, tmp_path):
    """A run folder's preprocessor_config.json loads with AutoFeatureExtractor and turns raw rows (a DataFrame, a
    list of dicts, a dict of columns) into exactly the training-time inputs; where east_hf is not importable too."""
    import pandas as pd
    from transformers import AutoFeatureExtractor

    from east_hf.hf.models import TabularFeatureExtractor, load_pretrained

    rng = np.random.default_rng(0)
    folder = tmp_path / "data"
    folder.mkdir()
    for split, n in (("train", 96), ("validation", 32), ("test", 40)):
        x = rng.normal(5, 2, n)
        colour = rng.choice(["red", "blue", "green", ""], n)  # "": an empty cell, a missing value
        rows = [f"{x[i]:.4f},{'' if i % 9 == 0 else int(x[i] > 5)},{colour[i]},{int(x[i] > 5.5)}" for i in range(n)]
        write_text(folder / f"{split}.csv", "x,flag,colour,y\n" + "\n".join(rows) + "\n")
    recipe = write_text(
        tmp_path / "r.yaml", f"dataset_name: {folder}\nlabel_column: y\nmodel_name_or_path: tabular_mlp\n"
    )
    out = tmp_path / "run"
    caps = {"max_train_samples": None, "max_eval_samples": None, "max_test_samples": None}
    assert main([str(recipe), *_tiny_args(out, hidden_sizes=8, **caps)]) == 0
    assert not (out / "tabular_preprocessor.json").exists()
    assert json.loads((out / "preprocessor_config.json").read_text())["auto_map"] == {
        "AutoFeatureExtractor": "tabular_features.TabularFeatureExtractor"
    }
    extractor = AutoFeatureExtractor.from_pretrained(out)
    assert isinstance(extractor, TabularFeatureExtractor)
    assert extractor.feature_names == ["x", "flag", "colour=blue", "colour=green", "colour=red"]

    data = load_data(EASTArgumentParser().parse([str(recipe), "--output_dir", str(out)]).data)
    trained_on = data.test.with_format("torch")[:]["input_features"]  # (40, 5): what the test metrics were computed on
    raw = pd.read_csv(folder / "test.csv").drop(columns="y")
    assert raw["colour"].isna().any() and raw["flag"].isna().any()
    for rows in (raw, raw.to_dict("records"), raw.to_dict("list")):
        torch.testing.assert_close(extractor(rows, return_tensors="pt")["input_features"], trained_on, rtol=0, atol=0)
    model = load_pretrained(str(out)).eval()
    with torch.no_grad():
        predictions = model(**extractor(raw, return_tensors="pt")).logits.argmax(-1)
    accuracy = (predictions == torch.tensor(pd.read_csv(folder / "test.csv")["y"].to_numpy())).double().mean()
    assert accuracy.item() == pytest.approx(json.loads((out / "test_results.json").read_text())["test_accuracy"])

    # the older runs' tabular_preprocessor.json still reads
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    fields = ("numeric", "categories", "fill", "mean", "std")
    write_text(legacy / "tabular_preprocessor.json", json.dumps({k: getattr(extractor, k) for k in fields}))
    np.testing.assert_array_equal(load_tabular_features(legacy).transform(raw), trained_on.numpy())

    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")}
    result = subprocess.run(
        [sys.executable, "-c", TABULAR_ROWS_SCRIPT, str(out), "blocked"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reloaded = torch.load(tmp_path / "rows.pt")
    torch.testing.assert_close(reloaded["input_features"], trained_on, rtol=0, atol=0)
    assert torch.equal(reloaded["logits"].argmax(-1), predictions)


def test_tuned_decision_rule_is_folded_into_the_saved_model(capsys, tmp_path):
    from east_hf.hf.metrics import build_compute_metrics
    from east_hf.hf.models import load_pretrained

    recipe = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
    out = tmp_path / "run"
    argv = [str(recipe), *_tiny_args(out, hidden_sizes=16, max_steps=6, tune_decision_rule="true", model_card="true")]
    assert main(argv) == 0
    assert "as trained and with the tuned decision rule" in capsys.readouterr().out
    rule = json.loads((out / "decision_rule.json").read_text())
    saved = json.loads((out / "test_results.json").read_text())
    assert "test_fbeta" in saved and "test_tuned_fbeta" in saved and rule["test_tuned"] == saved["test_tuned_fbeta"]
    assert rule["validation_tuned"] >= rule["validation_argmax"]
    state = json.loads((out / "trainer_state.json").read_text())
    tuned, trained = load_pretrained(str(out)).eval(), load_pretrained(state["best_model_checkpoint"]).eval()
    data = load_data(EASTArgumentParser().parse(argv).data)
    x, y = data.test[:]["input_features"], data.test[:]["labels"]
    offsets = torch.tensor(list(rule["offsets"].values()))
    with torch.no_grad():
        logits, before = tuned(input_features=x).logits, trained(input_features=x).logits
    assert torch.equal(logits.argmax(1), (before + offsets).argmax(1))  # the rule lives in the saved bias
    metrics = build_compute_metrics(2, average="binary")((logits.numpy(), y.numpy()))
    assert metrics["fbeta"] == pytest.approx(saved["test_tuned_fbeta"], abs=1e-6)
    card = (out / "README.md").read_text()
    assert "### Decision rule" in card and "tuned on the validation split" in card


def test_every_recipe_is_packaged_and_reachable_by_name(parser, capsys):
    from east_hf.scripts.arguments import packaged_recipes

    assert sorted(packaged_recipes()) == sorted(p.stem for p in RECIPES)
    assert parser.parse(["cifar10_f1", "--dry_run"]).recipe_path == str(packaged_recipes()["cifar10_f1"])
    assert parser.parse(["breast_cancer_imbalanced_f1.yaml"]).data.dataset_name == "sklearn:breast_cancer"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse(["--list_recipes"])
    assert exit_info.value.code == 0 and "cifar10_f1" in capsys.readouterr().out
    assert "did you mean the packaged recipe 'cifar10_f1'" in _error(capsys, ["cifar10_f2"])


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


@pytest.mark.parametrize("writer", ["timm.save_for_hf", "TimmWrapper.save_pretrained"])
def test_timm_checkpoint_is_fine_tuned_with_its_own_preprocessing(capsys, tmp_path, writer):
    """A local timm checkpoint whose pretrained_cfg has another mean, std and input size than timm's defaults for the
    architecture trains and is saved with its own (a 32 px resnet18 with mean (0.1, 0.2, 0.3))."""
    import timm
    from timm.models import save_for_hf
    from transformers import TimmWrapperConfig, TimmWrapperForImageClassification

    overlay = dict(mean=(0.1, 0.2, 0.3), std=(0.5, 0.5, 0.5), input_size=(3, 32, 32), crop_pct=1.0)
    checkpoint = tmp_path / "ckpt"
    if writer == "timm.save_for_hf":
        save_for_hf(timm.create_model("resnet18", num_classes=5, pretrained_cfg_overlay=overlay), str(checkpoint))
    else:
        cfg = dict(timm.create_model("resnet18", pretrained_cfg_overlay=overlay).pretrained_cfg)
        config = TimmWrapperConfig(architecture="resnet18", num_labels=5, pretrained_cfg=cfg)
        TimmWrapperForImageClassification(config).save_pretrained(checkpoint)
    out = tmp_path / "run"
    assert main([str(DEMO), *_tiny_args(out, model_name_or_path=checkpoint)]) == 0
    saved = json.loads((out / "config.json").read_text())["pretrained_cfg"]
    assert saved["mean"] == [0.1, 0.2, 0.3] and saved["std"] == [0.5, 0.5, 0.5]
    assert saved["input_size"] == [3, 32, 32] and saved["crop_pct"] == 1.0


def test_report_to_a_missing_integration_is_one_line(capsys):
    from transformers.integrations import get_available_reporting_integrations

    missing = next(n for n in ("tensorboard", "wandb", "mlflow") if n not in get_available_reporting_integrations())
    err = _error(capsys, [DEMO, "--report_to", missing, "--dry_run"])
    assert f"report_to {missing!r} needs its package" in err and "--report_to none" in err


# ---- a recipe key written twice; a full disk during a checkpoint save ----
def test_a_key_written_twice_in_a_recipe_is_refused_naming_it(capsys, tmp_path):
    recipe = write_text(
        tmp_path / "r.yaml", "dataset_name: sklearn:iris\nlearning_rate: 0.1\nseed: 1\nlearning_rate: 0.2\n"
    )
    err = _error(capsys, [recipe, "--dry_run"])
    assert err == (
        f"east-train: error: Expected each key once in recipe '{recipe}', got 'learning_rate' twice (lines 2 and 4): "
        "keep the one you mean"
    )
    nested = write_text(tmp_path / "n.yaml", "dataset_name: sklearn:iris\neast_beta: {setosa: 2, setosa: 0.5}\n")
    assert "got 'setosa' twice (line 2)" in _error(capsys, [nested, "--dry_run"])
    merged = write_text(tmp_path / "m.yaml", "x: &x {a: 1, b: 2}\ny:\n  <<: *x\n  a: 3\n")  # a merge may override
    assert load_recipe(merged) == {"x": {"a": 1, "b": 2}, "y": {"a": 3, "b": 2}}


TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
CHECKPOINT_EVERY_2 = [
    "--max_steps",
    "6",
    "--eval_strategy",
    "steps",
    "--eval_steps",
    "2",
    "--save_steps",
    "2",
    "--hidden_sizes",
    "16",
    "--disable_tqdm",
    "true",
    "--use_cpu",
    "true",
    "--model_card",
    "false",
    "--report_to",
    "none",
]


def test_a_full_disk_during_a_checkpoint_save_ends_in_one_line_and_resume_works(capsys, tmp_path, monkeypatch):
    out = tmp_path / "run"
    argv = [TABULAR, *CHECKPOINT_EVERY_2, "--output_dir", out]
    save = torch.save

    def full_at_step_4(obj, f, *args, **kwargs):  # the optimizer state of checkpoint-4 meets a full disk
        if "checkpoint-4" in str(f):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(f))
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_at_step_4)
    assert _error(capsys, argv) == (
        f"east-train: error: Expected free disk space in {out}, got No space left on device (ENOSPC): free space, then "
        f"resume from {out / 'checkpoint-2'} with --resume_from_checkpoint true (a checkpoint cut short is skipped)"
    )
    monkeypatch.setattr(torch, "save", save)  # space freed
    assert main([str(a) for a in [*argv, "--resume_from_checkpoint", "true"]]) == 0
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6


FULL_DISK_SCRIPT = r"""
set -u
mnt=$1; logs=$2; shift 2
mount -t tmpfs -o size=64m tmpfs "$mnt" || exit 90
"$PYTHON" -m east_hf.scripts.east_train "$@" --output_dir "$mnt/probe" --max_steps 2 >/dev/null 2>&1 || exit 91
size=$(( $(du -sk "$mnt/probe/checkpoint-2" | cut -f1) * 3 / 2 ))  # room for checkpoint-2, not for checkpoint-4
umount "$mnt" && mount -t tmpfs -o size=${size}k tmpfs "$mnt" || exit 92
"$PYTHON" -m east_hf.scripts.east_train "$@" --output_dir "$mnt/run" >"$logs/full.out" 2>"$logs/full.err"
echo $? >"$logs/full.rc"
mount -o remount,size=64m "$mnt" || exit 93
"$PYTHON" -m east_hf.scripts.east_train "$@" --output_dir "$mnt/run" --resume_from_checkpoint true \
    >"$logs/resumed.out" 2>"$logs/resumed.err"
echo $? >"$logs/resumed.rc"
cp "$mnt/run/trainer_state.json" "$logs/"
"""


def test_a_real_full_disk_during_a_checkpoint_save_then_resume_after_freeing_space(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", str(mnt)], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no user namespace to mount a small tmpfs in")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHON=sys.executable)
    args = [str(TABULAR), *CHECKPOINT_EVERY_2]
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", FULL_DISK_SCRIPT, "sh", str(mnt), str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    err = (tmp_path / "full.err").read_text().strip().splitlines()
    assert (tmp_path / "full.rc").read_text().strip() == "2" and "Traceback" not in "\n".join(err)
    assert err[-1] == (
        f"east-train: error: Expected free disk space in {mnt / 'run'}, got No space left on device (ENOSPC): free "
        f"space, then resume from {mnt / 'run' / 'checkpoint-2'} with --resume_from_checkpoint true (a checkpoint "
        "cut short is skipped)"
    )
    assert (tmp_path / "resumed.rc").read_text().strip() == "0", (tmp_path / "resumed.err").read_text()[-2000:]
    assert json.loads((tmp_path / "trainer_state.json").read_text())["global_step"] == 6


def test_a_card_east_train_cannot_write_is_one_warning_line_and_leaves_no_partial_file(tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"

    def full_disk(self, path, *args, **kwargs):  # the plot's file is created, then the disk is full
        Path(path).write_bytes(b"\x89PNG")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", full_disk)
    with caplog.at_level(logging.WARNING):
        assert main([str(DEMO), *_tiny_args(out, model_card="true", report_to="none")]) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "east_hf.scripts.east_train"] == [
        f"model card not written: OSError: [Errno {errno.ENOSPC}] No space left on device: '{out / 'annealing.png'}'"
    ]
    assert (out / "model.safetensors").is_file() and (out / "test_results.json").is_file()
    assert not (out / "annealing.png").exists() and not (out / "README.md").exists()
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_overwrite_keeps_a_readme_the_user_edited_and_writes_the_card_beside_it(capsys, caplog, tmp_path):
    """--overwrite_output_dir replaces the run, never the README.md the user edited beside it: the new card goes to
    README.east_hf.md with one warning line, and the folder stays a run east-train resumes or replaces."""
    from east_hf.hf.training.checkpoints import foreign_files

    out = tmp_path / "run"
    recipe = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
    argv = [str(recipe), *_tiny_args(out, hidden_sizes=16, max_train_samples=None, model_card="true")]
    assert main(argv) == 0
    readme, beside = out / "README.md", out / "README.east_hf.md"
    edited = readme.read_text().replace("\n## ", "\nOur notes: the model behind the March report.\n\n## ", 1)
    readme.write_text(edited)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert main([*argv, "--overwrite_output_dir", "true"]) == 0
    assert readme.read_text() == edited and beside.is_file()
    assert f"card:     {beside}" in capsys.readouterr().out
    assert [r.getMessage() for r in caplog.records if r.name == "east_hf.hf.cards.model_card"] == [
        f"{readme} was written or edited by hand (it is not the card east_hf wrote): it stays as it is, and the "
        f"model card is written to {beside}"
    ]
    assert foreign_files(out) == []  # the card beside the README is a run's file: the folder is still a run
    assert main([*argv, "--overwrite_output_dir", "true"]) == 0
    assert readme.read_text() == edited


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
    assert "expected a recipe" in _error(capsys, ["--loss", "ce"])  # neither a recipe nor a data set
    out = tmp_path / "run"
    argv = ["--dataset_name", "sklearn:breast_cancer", "--license", "mit"]
    assert main([*argv, *_tiny_args(out, hidden_sizes=16, model_card="true")]) == 0
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "README.md")
    assert card.data.license == "mit" and (out / "model.safetensors").is_file()


def test_license_is_a_recipe_key_and_a_flag_checked_before_training(parser, capsys, tmp_path):
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: sklearn:iris\nlicense: cc-by-4.0  # the data's licence\n")
    assert parser.parse([str(recipe)]).script.license == "cc-by-4.0"
    assert parser.parse([str(recipe), "--license", "apache-2.0"]).script.license == "apache-2.0"
    err = _error(capsys, [recipe, "--license", "Apache-2.0"])
    assert "Expected a Hub license id" in err and "got 'Apache-2.0'; did you mean 'apache-2.0'?" in err
