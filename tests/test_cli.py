"""east-train end to end: tiny runs that write a model reloadable with transformers and timm, tabular inputs that
reload from raw rows (also without east_hf), a tuned decision rule folded into the saved model, and local transformers
and timm checkpoints fine-tuned with their own preprocessing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import two_step_flags, write_text

from east_hf.hf.data import load_data, load_tabular_features
from east_hf.scripts.arguments import EASTArgumentParser
from east_hf.scripts.east_train import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipes" / "digits_longtail_demo.yaml"  # an image task; the tests give it tiny budgets


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


def test_local_transformers_checkpoint_is_fine_tuned_with_its_image_processor(capsys, tmp_path):
    from helpers import tiny_vit
    from transformers import ViTImageProcessor

    checkpoint = tmp_path / "vit"
    tiny_vit(num_labels=3, size=16).save_pretrained(checkpoint)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(checkpoint)
    out = tmp_path / "run"
    assert main([str(DEMO), *two_step_flags(out, model_name_or_path=checkpoint)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "vit" and len(config["id2label"]) == 10  # a new 10-way head
    assert (out / "preprocessor_config.json").is_file() and (out / "test_results.json").is_file()


def test_tabular_run_saves_its_input_statistics(capsys, tmp_path):
    recipe = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
    out = tmp_path / "run"
    assert main([str(recipe), *two_step_flags(out, hidden_sizes=16, max_train_samples=None)]) == 0
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
    assert main([str(recipe), *two_step_flags(out, hidden_sizes=8, **caps)]) == 0
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
    argv = [
        str(recipe),
        *two_step_flags(out, hidden_sizes=16, max_steps=6, tune_decision_rule="true", model_card="true"),
    ]
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
    assert main([str(DEMO), *two_step_flags(out, model_name_or_path=checkpoint)]) == 0
    saved = json.loads((out / "config.json").read_text())["pretrained_cfg"]
    assert saved["mean"] == [0.1, 0.2, 0.3] and saved["std"] == [0.5, 0.5, 0.5]
    assert saved["input_size"] == [3, 32, 32] and saved["crop_pct"] == 1.0


def test_the_demo_says_how_training_ended_on_the_console_and_in_its_card(capsys, tmp_path):
    """`east-train demo` on a part of its data, with a stage patience of 1: it ends on the annealing criterion well
    inside its 30 epochs, and its last lines and its card say so, where and why."""
    import re

    from helpers import cli_args

    out = tmp_path / "demo"
    flags = cli_args(
        output_dir=out,
        max_train_samples=2048,
        max_eval_samples=1024,
        max_test_samples=512,
        east_patience=1,
        east_stage_patience=1,
        report_to="none",
    )
    assert main(["demo", *flags]) == 0
    (ended,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Training ended")]
    assert re.fullmatch(
        r"Training ended on the annealing criterion at epoch \d+ of 30, stage [1-9]\d*, T = 0\.\d+: "
        r"1 stage without a better validation fbeta",
        ended,
    ), ended
    assert f"\n{ended}.\n" in (out / "README.md").read_text()
