"""east-predict and east_hf.predict: a saved run plus raw files in, predictions out, reproducing the run's test
metrics (scikit-learn on the written CSV against test_results.json), with one-line errors for bad input."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import cli_args, east_predict_error, write_text
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

import east_hf
from east_hf.hf.data import load_data
from east_hf.scripts.arguments import EASTArgumentParser
from east_hf.scripts.east_predict import main
from east_hf.scripts.east_train import main as train

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipes" / "digits_longtail_demo.yaml"  # an image task; tiny budgets here


# a few CPU seconds per run: the tests below raise max_steps and the learning rate where a model must learn
TINY = dict(max_steps=6, eval_strategy="steps", eval_steps=3, save_steps=3, disable_tqdm="true", use_cpu="true")


def _tiny_args(out, **more) -> list[str]:
    return cli_args(output_dir=out, **{**TINY, "model_card": "false", **more})


@pytest.fixture(scope="module")
def tabular_run(tmp_path_factory):
    """A tiny binary tabular run (numbers, a boolean with gaps, a text column with gaps, label column ``y`` holding
    "no"/"yes") with a decision rule tuned on validation; its data folder holds the raw test.csv."""
    tmp = tmp_path_factory.mktemp("tabular")
    rng = np.random.default_rng(0)
    folder = tmp / "data"
    folder.mkdir()
    for split, n in (("train", 160), ("validation", 48), ("test", 60)):
        x = rng.normal(5, 2, n)
        colour = rng.choice(["red", "blue", "green", ""], n)  # "": a missing value
        y = np.where(x + rng.normal(0, 1, n) > 6, "yes", "no")
        rows = [f"{x[i]:.4f},{'' if i % 9 == 0 else int(x[i] > 5)},{colour[i]},{y[i]}" for i in range(n)]
        write_text(folder / f"{split}.csv", "x,flag,colour,y\n" + "\n".join(rows) + "\n")
    recipe = write_text(
        tmp / "r.yaml",
        f"dataset_name: {folder}\nlabel_column: y\nmodel_name_or_path: tabular_mlp\neast_metric: fbeta\n"
        "east_average: binary\neast_ce_weight: 0\neast_ce_loss: ce\n",  # EAST alone: a rule that moves labels
    )
    out = tmp / "run"
    budget = dict(max_steps=30, eval_steps=10, save_steps=10, learning_rate=1e-2)  # enough to learn the task
    assert train([str(recipe), *_tiny_args(out, hidden_sizes=16, tune_decision_rule="true", **budget)]) == 0
    return out, folder


def _binary_metrics(frame: pd.DataFrame, label: str) -> dict[str, float]:
    y, pred = frame[label].astype(str), frame["predicted_label"].astype(str)
    return {
        "fbeta": f1_score(y, pred, pos_label="yes", zero_division=0),
        "accuracy": accuracy_score(y, pred),
        "mcc": matthews_corrcoef(y, pred),
    }


def test_tabular_run_predicts_a_csv_reproducing_its_test_metrics_with_the_tuned_rule_once(tabular_run, capsys):
    """The run folder's model carries the tuned rule in its bias (test_tuned_*), its best checkpoint is the model as
    trained (test_*): predicting the raw test.csv with each reproduces the matching saved metrics."""
    run, data = tabular_run
    saved = json.loads((run / "test_results.json").read_text())
    rule = json.loads((run / "decision_rule.json").read_text())
    out = run.parent / "predictions.csv"
    assert main([str(run), str(data / "test.csv"), "-o", str(out), "--label_column", "y", "--probabilities"]) == 0
    err = capsys.readouterr().err
    assert "the decision rule tuned on validation is in the saved model" in err
    assert "Loading weights" not in err  # transformers' loading bar is off: the command ends in its summary line
    frame = pd.read_csv(out)
    assert frame.columns.tolist() == ["y", "predicted_label", "probability_no", "probability_yes"]
    assert len(frame) == len(pd.read_csv(data / "test.csv")) == saved["test_samples"]
    probs = frame[["probability_no", "probability_yes"]].to_numpy()
    np.testing.assert_allclose(probs.sum(1), 1, atol=1e-6)
    assert (np.array(["no", "yes"])[probs.argmax(1)] == frame["predicted_label"]).all()
    for key, value in _binary_metrics(frame, "y").items():
        assert value == pytest.approx(saved[f"test_tuned_{key}"], abs=1e-6), key
    assert rule["test_tuned"] == pytest.approx(saved["test_tuned_fbeta"])

    best = json.loads((run / "trainer_state.json").read_text())["best_model_checkpoint"]
    as_trained = run.parent / "as_trained.csv"
    assert main([best, str(data / "test.csv"), "-o", str(as_trained), "--label_column", "y"]) == 0
    for key, value in _binary_metrics(pd.read_csv(as_trained), "y").items():
        assert value == pytest.approx(saved[f"test_{key}"], abs=1e-6), key
    # the run folder's labels are the as-trained scores plus the rule's offsets, added once (log p = logits - const)
    trained = east_hf.predict(best, pd.read_csv(data / "test.csv"), probabilities=True, device="cpu")
    offsets = np.array([rule["offsets"]["no"], rule["offsets"]["yes"]])
    scores = np.log(trained[["probability_no", "probability_yes"]].to_numpy()) + offsets
    assert (np.array(["no", "yes"])[scores.argmax(1)] == frame["predicted_label"]).all()
    assert (trained["predicted_label"] != frame["predicted_label"]).any()  # the rule changes some labels

    # the Python helper on a DataFrame (and on row dicts) gives the same rows
    rows = pd.read_csv(data / "test.csv")
    helper = east_hf.predict(run, rows, probabilities=True, label_column="y", device="cpu")
    pd.testing.assert_frame_equal(helper, frame, check_dtype=False, atol=1e-6)
    predictor = east_hf.Predictor(run, device="cpu")
    assert predictor.modality == "tabular" and predictor.decision_rule["offsets"] == rule["offsets"]
    records = predictor.predict(rows.drop(columns="y").to_dict("records"))
    assert records["predicted_label"].tolist() == frame["predicted_label"].tolist()


def test_east_predict_runs_as_a_command(tabular_run, tmp_path):
    """The console script (or ``python -m``) writes the CSV to stdout, and ends a bad run folder in one line."""
    run, data = tabular_run
    assert 'east-predict = "east_hf.scripts.east_predict:main"' in (ROOT / "pyproject.toml").read_text()
    script = Path(sys.executable).with_name("east-predict")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "east_hf.scripts.east_predict"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(
        [*cmd, str(run), str(data / "test.csv"), "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "predicted_label" and len(lines) == 1 + len(pd.read_csv(data / "test.csv"))
    assert set(lines[1:]) <= {"no", "yes"}
    result = subprocess.run([*cmd, str(data), str(data / "test.csv")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("east-predict: error: Expected a run folder")


def test_a_csv_missing_feature_columns_is_one_line_naming_them(tabular_run, capsys, tmp_path):
    run, data = tabular_run
    rows = pd.read_csv(data / "test.csv").drop(columns=["flag", "colour"])
    rows.to_csv(tmp_path / "rows.csv", index=False)
    err = east_predict_error(capsys, [str(run), str(tmp_path / "rows.csv")])
    assert "Expected the run's feature columns x, flag, colour, got an input without flag, colour" in err
    assert "(its columns: x, y)" in err
    with pytest.raises(ValueError, match="without flag, colour"):
        east_hf.predict(run, rows, device="cpu")
    err = east_predict_error(capsys, [str(run), str(data / "test.csv"), "--label_column", "target"])
    assert "Expected label column 'target' in the input, got the columns x, flag, colour, y" in err


def test_a_folder_that_is_not_a_run_is_one_line(tabular_run, capsys, tmp_path):
    run, data = tabular_run
    csv = str(data / "test.csv")
    err = east_predict_error(capsys, [str(tmp_path / "nowhere"), csv])
    assert "Expected a run folder written by east-train (config.json and model.safetensors)" in err
    assert "which does not exist" in err
    assert "which is a file" in east_predict_error(capsys, [csv, csv])
    err = east_predict_error(capsys, [str(data), csv])
    assert "which lacks config.json and model.safetensors (it holds: test.csv, train.csv, validation.csv)" in err
    interrupted = tmp_path / "interrupted"  # checkpoints, no final model: the last complete one is named
    interrupted.mkdir()
    best = Path(json.loads((run / "trainer_state.json").read_text())["best_model_checkpoint"])
    shutil.copytree(best, interrupted / best.name)
    err = east_predict_error(capsys, [str(interrupted), csv])
    assert (
        "holds checkpoints but no final model (an interrupted run?); "
        f"pass its last complete checkpoint {interrupted / best.name}" in err
    )
    comparison = tmp_path / "compare"  # east-compare's table: one of its runs is named
    shutil.copytree(run, comparison / "east" / "seed-0")
    write_text(comparison / "results.json", "{}")
    write_text(comparison / "results.md", "")
    err = east_predict_error(capsys, [str(comparison), csv])
    assert f"holds an east-compare comparison; pass one of its runs, such as {comparison / 'east' / 'seed-0'}" in err
    assert "Expected --output other than the input file" in east_predict_error(capsys, [str(run), csv, "-o", csv])


def test_image_run_predicts_an_image_folder_reproducing_its_test_metrics(capsys, tmp_path):
    """The test split of a digits run, written as PNG files in one sub-folder per class: east-predict reads the
    folder with the run's own transform (timm's data config in config.json) and reproduces test_*."""
    out = tmp_path / "run"
    budget = dict(max_steps=40, eval_steps=20, save_steps=20, learning_rate=1e-2)  # enough to learn the digits
    argv = [str(DEMO), *_tiny_args(out, **budget, max_train_samples=256, max_eval_samples=32, max_test_samples=64)]
    assert train(argv) == 0
    saved = json.loads((out / "test_results.json").read_text())
    data = load_data(EASTArgumentParser().parse(argv).data)  # the split east-train used: the same function, seed
    images = tmp_path / "images"
    for i, row in enumerate(data.test):
        folder = images / data.label_names[row["label"]]
        folder.mkdir(parents=True, exist_ok=True)
        row["image"].save(folder / f"{i:03d}.png")  # PNG: lossless, the same pixels
    predictions = tmp_path / "predictions.csv"
    assert main([str(out), str(images), "-o", str(predictions), "--probabilities"]) == 0
    frame = pd.read_csv(predictions, dtype={"label": str, "predicted_label": str})
    names = data.label_names
    assert frame.columns.tolist() == ["path", "label", "predicted_label", *[f"probability_{n}" for n in names]]
    assert len(frame) == saved["test_samples"] == 64
    assert all(Path(p).parent.name == label for p, label in zip(frame["path"], frame["label"]))
    y, pred = frame["label"], frame["predicted_label"]
    assert f1_score(y, pred, labels=names, average="macro", zero_division=0) == pytest.approx(
        saved["test_fbeta"], abs=1e-6
    )
    assert accuracy_score(y, pred) == pytest.approx(saved["test_accuracy"], abs=1e-6)
    assert matthews_corrcoef(y, pred) == pytest.approx(saved["test_mcc"], abs=1e-6)
    assert saved["test_accuracy"] > 0.5  # a model that learned: its argmax depends on the pixels

    # the probabilities are the model's on the in-memory test images through timm's own transform of the folder
    import timm
    import torch
    from timm.data import create_transform, resolve_data_config

    timm_model = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    transform = create_transform(**resolve_data_config({}, model=timm_model))
    order = [int(Path(p).stem) for p in frame["path"]]
    with torch.no_grad():
        x = torch.stack([transform(data.test[i]["image"].convert("RGB")) for i in order])
        expected = timm_model(x).softmax(-1).numpy()
    np.testing.assert_allclose(frame[[f"probability_{n}" for n in names]].to_numpy(), expected, atol=1e-5)

    # the Python helper on a list of PIL images and on file paths
    pil = [row["image"] for row in data.test]
    paths = sorted(images.rglob("*.png"))
    by_path = dict(zip(frame["path"], frame["predicted_label"]))
    from_paths = east_hf.predict(out, paths, device="cpu", batch_size=16)
    assert from_paths["predicted_label"].tolist() == [by_path[str(p)] for p in paths]
    from_pil = east_hf.predict(out, pil, device="cpu")
    assert from_pil.columns.tolist() == ["predicted_label"]
    assert from_pil["predicted_label"].tolist() == [by_path[str(p)] for p in sorted(paths, key=lambda p: p.stem)]

    # an unreadable image and a table for an image run: one line each
    write_text(images / names[0] / "broken.png", "not an image")
    assert "Expected an image file, got" in east_predict_error(capsys, [str(out), str(images)])
    write_text(tmp_path / "rows.csv", "a,b\n1,2\n")
    err = east_predict_error(capsys, [str(out), str(tmp_path / "rows.csv")])
    assert "Expected an image column in the input of an image run, got the columns a, b" in err


def test_a_data_folder_with_several_splits_takes_split(tabular_run, capsys, tmp_path):
    """A data folder read as east-train reads it (train/validation/test.csv are three splits): --split picks one."""
    run, data = tabular_run
    err = east_predict_error(capsys, [str(run), str(data)])
    assert f"Expected a split naming one of the splits of {str(data)!r} (train, validation, test), got none" in err
    assert "got 'dev'" in east_predict_error(capsys, [str(run), str(data), "--split", "dev"])
    out = tmp_path / "predictions.csv"
    assert main([str(run), str(data), "--split", "test", "-o", str(out), "--label_column", "y"]) == 0
    from_file = east_hf.predict(run, pd.read_csv(data / "test.csv"), label_column="y", device="cpu")
    pd.testing.assert_frame_equal(pd.read_csv(out), from_file)


def test_a_fine_tuned_transformers_checkpoint_predicts_with_its_saved_image_processor(capsys, tmp_path):
    """A run fine-tuned from a transformers checkpoint saves its image processor (preprocessor_config.json):
    east-predict reads images through it and reproduces test_accuracy."""
    from helpers import tiny_vit
    from transformers import ViTImageProcessor

    checkpoint = tmp_path / "vit"
    tiny_vit(num_labels=3, size=16).save_pretrained(checkpoint)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(checkpoint)
    out = tmp_path / "run"
    sizes = dict(max_train_samples=64, max_eval_samples=32, max_test_samples=32)
    argv = [str(DEMO), *_tiny_args(out, model_name_or_path=checkpoint, max_steps=4, **sizes)]
    assert train(argv) == 0
    assert json.loads((out / "preprocessor_config.json").read_text())["image_processor_type"].startswith("ViT")
    saved = json.loads((out / "test_results.json").read_text())
    data = load_data(EASTArgumentParser().parse(argv).data)
    for i, row in enumerate(data.test):
        folder = tmp_path / "images" / data.label_names[row["label"]]
        folder.mkdir(parents=True, exist_ok=True)
        row["image"].save(folder / f"{i:03d}.png")
    predictions = tmp_path / "predictions.csv"
    assert main([str(out), str(tmp_path / "images"), "-o", str(predictions)]) == 0
    frame = pd.read_csv(predictions, dtype={"label": str, "predicted_label": str})
    assert len(frame) == saved["test_samples"]
    assert accuracy_score(frame["label"], frame["predicted_label"]) == pytest.approx(saved["test_accuracy"], abs=1e-6)


def test_a_device_or_batch_size_that_cannot_work_is_one_line(tabular_run, capsys):
    run, data = tabular_run
    csv = str(data / "test.csv")
    assert "Expected a device such as cpu or cuda:0, got 'gpu0'" in east_predict_error(
        capsys, [str(run), csv, "--device", "gpu0"]
    )
    assert "Expected a device this machine has, got 'cuda:7'" in east_predict_error(
        capsys, [str(run), csv, "--device", "cuda:7"]
    )
    assert "Expected batch_size an integer >= 1, got 0" in east_predict_error(
        capsys, [str(run), csv, "--batch_size", "0"]
    )


# ---- text in a number column, a broken or edited decision_rule.json, Ctrl-C while writing ----
def test_text_in_a_number_column_is_one_line_naming_the_column_the_value_and_the_row(tabular_run, capsys, tmp_path):
    """A cell that is not a number in a numeric feature column is named with its column and row; numbers written as
    text are read as numbers, a blank cell as missing (imputed), as in training."""
    run, data = tabular_run
    rows = pd.read_csv(data / "test.csv")
    bad = rows.astype({"x": object})
    bad.loc[3, "x"], bad.loc[7, "x"] = "abc", "1.2.3"
    bad.to_csv(tmp_path / "rows.csv", index=False)
    err = east_predict_error(capsys, [str(run), str(tmp_path / "rows.csv")])
    assert err == (
        "east-predict: error: Expected numbers in column 'x' (a numeric feature of the run), got text in 2 of 60 "
        "rows, the first 'abc' in row 4: fix or empty those cells (an empty cell is imputed)"
    )
    with pytest.raises(ValueError, match=r"column 'x' .* got text in 2 of 60 rows, the first 'abc' in row 4"):
        east_hf.predict(run, bad, device="cpu")

    as_text = rows.astype({"x": str, "flag": object})
    as_text.loc[2, "x"], as_text.loc[5, "flag"] = " ", True  # blank: missing; a bool in a numeric column: 1
    missing = rows.copy()
    missing.loc[2, "x"], missing.loc[5, "flag"] = np.nan, 1
    expected = east_hf.predict(run, missing, probabilities=True, device="cpu")
    pd.testing.assert_frame_equal(east_hf.predict(run, as_text, probabilities=True, device="cpu"), expected)
    assert as_text.loc[2, "x"] == " "  # the caller's frame is left as it was


def test_a_decision_rule_file_that_is_not_json_is_one_line_naming_it(tabular_run, capsys, tmp_path):
    run, data = tabular_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("checkpoint-*"))
    rule = copy / "decision_rule.json"
    rule.write_text('{"offsets": {"no": 0.1,\n')
    err = east_predict_error(capsys, [str(copy), str(data / "test.csv")])
    assert err.startswith(f"east-predict: error: Expected {rule} to hold JSON as east-train writes it, got ")
    assert "at line 2 column 1: restore it (the rule itself is in the model's bias) or remove it" in err
    rule.write_text("[0.1, 0.2]\n")
    err = east_predict_error(capsys, [str(copy), str(data / "test.csv")])
    assert f"Expected {rule} to hold a JSON object as east-train writes it, got a list" in err


def test_an_edited_decision_rule_file_is_not_applied_and_one_warning_says_so(tabular_run, capsys, caplog, tmp_path):
    """The saved model's bias holds the tuned rule; config.json records the offsets folded in. decision_rule.json is a
    record: an edit is not applied (the predictions stay the saved model's), and one warning line says how to apply
    other offsets. The same offsets written otherwise, or a run saved without the record, warn nothing."""
    import logging

    from east_hf.hf.predict.predictor import FOLDED_OFFSETS_KEY

    run, data = tabular_run
    rule = json.loads((run / "decision_rule.json").read_text())
    assert json.loads((run / "config.json").read_text())[FOLDED_OFFSETS_KEY] == rule["offsets"]
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("checkpoint-*"))
    csv = str(data / "test.csv")
    as_saved = east_hf.predict(run, pd.read_csv(csv), probabilities=True, device="cpu")

    (copy / "decision_rule.json").write_text(json.dumps(rule) + "\n")  # the same offsets on one line: not an edit
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.predict.predictor"):
        assert main([str(copy), csv, "-o", str(tmp_path / "same.csv")]) == 0
        assert "the decision rule tuned on validation is in the saved model" in capsys.readouterr().err
        assert not east_hf.Predictor(copy, device="cpu").decision_rule_edited
        assert [r for r in caplog.records if r.name == "east_hf.hf.predict.predictor"] == []

        edited = {**rule, "offsets": {**rule["offsets"], "yes": rule["offsets"]["yes"] + 2.0}}
        (copy / "decision_rule.json").write_text(json.dumps(edited, indent=2) + "\n")
        out = tmp_path / "edited.csv"
        assert main([str(copy), csv, "-o", str(out), "--probabilities"]) == 0
        summary = capsys.readouterr().err.strip().splitlines()[-1]
        assert "decision rule" not in summary and summary.startswith("east-predict: 60 predictions")
        warnings = [r.getMessage() for r in caplog.records if r.name == "east_hf.hf.predict.predictor"]
        offsets = ", ".join(f"{name} {value:g}" for name, value in rule["offsets"].items())
        assert warnings == [
            f"{copy / 'decision_rule.json'} was edited: its offsets are not applied; predictions use the rule "
            f"east-train folded into the model's output bias ({offsets}, recorded in config.json as "
            f"{FOLDED_OFFSETS_KEY}). To predict with other offsets, add their difference to the bias "
            "(east_hf.core.decision.rule.fold_offsets_into_bias) and save the model, or train again with "
            "--tune_decision_rule true"
        ]
    pd.testing.assert_frame_equal(pd.read_csv(out), as_saved, check_dtype=False, atol=1e-6)  # the edit not applied

    config = json.loads((copy / "config.json").read_text())
    del config[FOLDED_OFFSETS_KEY]  # a run saved before east-train recorded the folded offsets: nothing to compare
    (copy / "config.json").write_text(json.dumps(config))
    assert not east_hf.Predictor(copy, device="cpu").decision_rule_edited


def test_ctrl_c_while_the_predictions_are_written_leaves_no_file_and_one_line(
    tabular_run, capsys, monkeypatch, tmp_path
):
    import signal

    run, data = tabular_run
    out = tmp_path / "predictions.csv"
    handler = signal.getsignal(signal.SIGINT)

    def interrupted(self, path, *args, **kwargs):
        Path(path).write_text("predicted_label\nno\n")  # a part written, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", interrupted)
    try:
        with pytest.raises(SystemExit) as exc:
            main([str(run), str(data / "test.csv"), "-o", str(out)])
    except KeyboardInterrupt:  # escaping, it would end the test session
        pytest.fail("KeyboardInterrupt escaped east-predict")
    assert exc.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"east-predict: interrupted; {out} not written"
    assert list(tmp_path.iterdir()) == [] and signal.getsignal(signal.SIGINT) is handler


# ---- an --output that is a directory or a file of the run ----
def test_an_output_that_is_a_directory_or_a_file_of_the_run_is_refused_before_the_model_loads(
    tabular_run, capsys, monkeypatch, tmp_path
):
    """No file of the run (config, weights, a checkpoint's files; also through a link, or from one of its
    checkpoints) is replaced by the CSV, and a directory is refused, before the model loads; a new file in the run
    folder and an unrelated existing file are written."""
    import importlib

    run, data = tabular_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    csv = str(data / "test.csv")
    checkpoint = sorted(copy.glob("checkpoint-*"))[-1]
    link = tmp_path / "link.csv"
    link.symlink_to(copy / "config.json")
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}

    def no_model(*args, **kwargs):
        pytest.fail("the model loaded before --output was checked")

    monkeypatch.setattr(importlib.import_module("east_hf.hf.predict.predictor"), "Predictor", no_model)
    for output, run_dir, folder in [
        (copy / "config.json", copy, copy),
        (checkpoint / "model.safetensors", copy, copy),
        (link, copy, copy),
        (checkpoint / "config.json", checkpoint, checkpoint),
        (copy / "config.json", checkpoint, copy),  # a checkpoint of the run: the run's own files too
    ]:
        assert east_predict_error(capsys, [str(run_dir), csv, "-o", str(output)]) == (
            "east-predict: error: Expected --output to name a new file or one outside the run folder "
            f"{folder.resolve()}, got {output}, which is a file of the run"
        )
    for folder in (tmp_path, copy):
        assert east_predict_error(capsys, [str(copy), csv, "-o", str(folder)]) == (
            f"east-predict: error: Expected --output to name a file for the predictions CSV, got {folder}, which is "
            "a directory"
        )
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    monkeypatch.undo()

    assert main([str(copy), csv, "-o", str(copy / "predictions.csv")]) == 0
    earlier = write_text(tmp_path / "earlier.csv", "an earlier file\n")
    assert main([str(copy), csv, "-o", str(earlier)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(earlier), pd.read_csv(copy / "predictions.csv"))
