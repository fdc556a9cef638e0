"""Multi-label EAST end to end: EASTTrainer with multi-hot labels (the per-label surrogate, its binary cross-entropy
warm start and mix, evaluation from counts equal to scikit-learn, per-label thresholds folded into the bias), and
east-train / east-predict / east-compare / pipeline() on a table and on texts with several labels per row."""

import json
import random
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import torch
from helpers import run_without_east_hf
from sklearn.metrics import f1_score

from east_hf.core.multilabel_losses import AsymmetricLoss, BinaryCrossEntropySetLoss, MultiLabelEASTLoss
from east_hf.hf.config.east_config import EASTConfig
from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification
from east_hf.hf.training.trainer import EASTTrainer
from east_hf.scripts import east_predict
from east_hf.scripts.east_train import main

F, L = 6, 3


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """east_hf's data cache in a folder of the test's own."""
    monkeypatch.setenv("EAST_HF_CACHE", str(tmp_path_factory.mktemp("east_hf_cache")))


def _multi_hot(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, F), Y (n, L)): three labels of a fixed linear map plus noise, at about 15 %, 35 % and 50 %."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(np.float32)
    W = np.random.default_rng(7).normal(size=(F, L))
    Y = (X @ W + np.array([-2.0, -0.7, 0.0]) + rng.normal(scale=0.7, size=(n, L)) > 0).astype(np.float32)
    return X, Y


def _dataset(X, Y):
    return datasets.Dataset.from_dict({"input_features": X.tolist(), "labels": Y.tolist()}).with_format("torch")


def _model(problem_type: str | None = "multi_label_classification"):
    torch.manual_seed(0)
    config = TabularMLPConfig(num_features=F, num_labels=L, hidden_sizes=[32], problem_type=problem_type)
    return TabularMLPForClassification(config)


def _args(tmp_path, **overrides):
    settings = dict(
        output_dir=str(tmp_path / "out"), report_to="none", per_device_train_batch_size=64, learning_rate=1e-2,
        num_train_epochs=12, eval_strategy="epoch", save_strategy="epoch", save_total_limit=1,
        east_warm_start_epochs=2, east_patience=1, east_stage_monitor="eval_fbeta", lr_scheduler_type="constant",
        per_device_eval_batch_size=256, disable_tqdm=True, use_cpu=True, seed=0,
    )  # fmt: skip
    return EASTConfig(**{**settings, **overrides})


@pytest.fixture(scope="module")
def splits():
    return _multi_hot(600, 0), _multi_hot(300, 1)


def _logits(model, X) -> torch.Tensor:
    with torch.no_grad():
        return model(input_features=torch.as_tensor(X)).logits


def test_the_trainer_anneals_and_reports_macro_f1_equal_to_scikit_learn(splits, tmp_path):
    (X, Y), (Xv, Yv) = splits
    model = _model()
    trainer = EASTTrainer(model, _args(tmp_path), train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv))
    assert trainer.multi_label and isinstance(trainer.east_loss, MultiLabelEASTLoss)
    assert isinstance(trainer.warm_start_loss, BinaryCrossEntropySetLoss) and trainer.warm_start_loss.name == "la"
    trainer.train()
    assert trainer.east_stage >= 1  # the annealing lowered the temperature at least once
    metrics = trainer.evaluate()
    predictions = (_logits(model, Xv) > 0).numpy()
    assert metrics["eval_fbeta"] == pytest.approx(f1_score(Yv, predictions, average="macro"), abs=1e-12)
    assert metrics["eval_fbeta"] > 0.7  # learning happened: chance (all positive) is about 0.5
    rule = trainer.tune_decision_rule()
    assert rule.offsets.shape == (L,) and rule.score >= rule.baseline_score
    tuned = trainer.evaluate()
    predictions = (_logits(model, Xv) > 0).numpy()  # the offsets are in the bias: z > 0 applies them
    assert tuned["eval_fbeta"] == pytest.approx(f1_score(Yv, predictions, average="macro"), abs=1e-12)
    assert tuned["eval_fbeta"] == pytest.approx(rule.score, abs=1e-9)


class _NeverLabelZero(TabularMLPForClassification):
    """A multi-label MLP whose label 0 logit is far below 0 whatever it learns: it never predicts label 0."""

    def forward(self, input_features, labels=None, **kwargs):
        output = super().forward(input_features, labels=labels, **kwargs)
        output.logits = output.logits - torch.tensor([1e4, 0.0, 0.0])
        return output


@pytest.mark.parametrize("dead", [True, False], ids=["dead_label", "healthy"])
def test_a_kept_multi_label_model_that_never_predicts_a_label_is_warned_about(splits, tmp_path, caplog, dead):
    """The kept model's validation counts name each label with positives that it never predicts, in one warning."""
    import logging

    (X, Y), (Xv, Yv) = splits
    torch.manual_seed(0)
    config = TabularMLPConfig(
        num_features=F, num_labels=L, hidden_sizes=[32], problem_type="multi_label_classification",
        id2label={0: "rare", 1: "mid", 2: "common"}, label2id={"rare": 0, "mid": 1, "common": 2},
    )  # fmt: skip
    model = (_NeverLabelZero if dead else TabularMLPForClassification)(config)
    args = _args(tmp_path, num_train_epochs=4, load_best_model_at_end=True, metric_for_best_model="fbeta")
    trainer = EASTTrainer(model, args, train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv))
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train()
    warned = [r.getMessage() for r in caplog.records if "never predicts a label" in r.getMessage()]
    if not dead:
        assert warned == []
        return
    assert len(warned) == 1
    assert f"step {trainer.state.best_global_step}" in warned[0]
    assert f": rare ({int(Yv[:, 0].sum())} samples);" in warned[0] and "mid" not in warned[0]


@pytest.mark.parametrize(("loss", "kind"), [("ce", BinaryCrossEntropySetLoss), ("wce", BinaryCrossEntropySetLoss),
                                            ("la", BinaryCrossEntropySetLoss), ("asl", AsymmetricLoss)])  # fmt: skip
def test_the_baselines_train_from_float_labels_without_a_problem_type(splits, tmp_path, loss, kind):
    (X, Y), (Xv, Yv) = splits
    args = _args(tmp_path, east_loss=loss, num_train_epochs=2)
    trainer = EASTTrainer(_model(problem_type=None), args, train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv))
    assert trainer.multi_label and isinstance(trainer.east_loss, kind) and trainer.east_loss.name == loss
    if loss == "wce":
        rates = Y.mean(0)
        assert trainer.east_loss.pos_weight.tolist() == pytest.approx(((1 - rates) / rates).tolist(), rel=1e-5)
    trainer.train()
    assert np.isfinite(trainer.evaluate()["eval_loss"])


def test_a_multiclass_only_ldam_cross_entropy_becomes_the_logit_adjusted_binary_one_with_a_warning(
    splits, tmp_path, caplog
):
    """The fine-tune recipes' ``east_ce_loss: ldam`` has no multi-label form: multi-label EAST mixes the
    logit-adjusted binary cross-entropy of the training priors instead, and says so."""
    (X, Y), (Xv, Yv) = splits
    with caplog.at_level("WARNING"):
        trainer = EASTTrainer(
            _model(), _args(tmp_path, east_ce_loss="ldam"), train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv)
        )
    ce = trainer.warm_start_loss
    assert isinstance(ce, BinaryCrossEntropySetLoss) and ce.name == "la"
    rates = torch.as_tensor(Y.mean(0))
    assert ce.logit_adjustment.tolist() == pytest.approx(torch.log(rates / (1 - rates)).tolist(), rel=1e-5)
    assert "east_ce_loss='ldam' is multiclass only" in caplog.text


def test_bad_multi_label_settings_and_labels_are_one_line_errors(splits, tmp_path):
    (X, Y), (Xv, Yv) = splits
    with pytest.raises(ValueError, match="binary"):
        EASTTrainer(_model(), _args(tmp_path, east_average="binary"), train_dataset=_dataset(X, Y))
    bad = Y.copy()
    bad[0, 0] = 2.0
    with pytest.raises(ValueError, match="0 or 1"):
        EASTTrainer(_model(), _args(tmp_path), train_dataset=_dataset(X, bad), eval_dataset=_dataset(Xv, Yv))
    with pytest.raises(ValueError, match="multi_label_classification"):
        model = _model(problem_type="single_label_classification")
        EASTTrainer(model, _args(tmp_path), train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv))


# ---- the command line: a table with three 0/1 label columns ----
@pytest.fixture(scope="module")
def table_csv(tmp_path_factory) -> Path:
    X, Y = _multi_hot(700, 2)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(F)])
    for k, name in enumerate(["rare", "mid", "common"]):
        frame[name] = Y[:, k].astype(int)
    path = tmp_path_factory.mktemp("table") / "tags.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def table_run(table_csv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    argv = [
        "--dataset_name", table_csv, "--label_columns", "rare,mid,common", "--model_name_or_path", "tabular_mlp",
        "--output_dir", out, "--num_train_epochs", 15, "--per_device_train_batch_size", 64, "--learning_rate", 0.01,
        "--east_warm_start_epochs", 2, "--report_to", "none", "--save_total_limit", 1, "--tune_decision_rule", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    return out


def test_east_train_tunes_per_label_thresholds_and_saves_a_multi_label_model(table_run):
    config = json.loads((table_run / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification" and len(config["id2label"]) == L
    rule = json.loads((table_run / "decision_rule.json").read_text())
    assert set(rule["offsets"]) == {"rare", "mid", "common"}
    assert rule["validation_tuned"] >= rule["validation_argmax"]
    results = json.loads((table_run / "test_results.json").read_text())
    assert results["test_fbeta"] > 0.6 and "test_jaccard" in results and "test_tuned_fbeta" in results
    card = (table_run / "README.md").read_text()
    assert "multi-label" in card and "Per-label precision and recall" in card


def test_east_predict_writes_label_sets_that_apply_the_folded_thresholds(table_run, table_csv, tmp_path):
    from east_hf.hf.models import load_pretrained
    from east_hf.hf.predict.predictor import Predictor

    rows = pd.read_csv(table_csv).head(50)
    out = tmp_path / "pred.csv"
    assert east_predict.main([str(table_run), str(table_csv), "-o", str(out), "--probabilities"]) == 0
    frame = pd.read_csv(out, keep_default_na=False).head(50)
    predictor = Predictor(table_run)
    features = predictor.feature_extractor(rows.drop(columns=["rare", "mid", "common"]))["input_features"]
    logits = load_pretrained(str(table_run)).eval()(input_features=torch.as_tensor(features)).logits.detach()
    names = ["rare", "mid", "common"]
    expected = ["|".join(n for n, on in zip(names, row) if on) for row in (logits > 0).tolist()]
    assert frame["predicted_label"].tolist() == expected
    probability = frame[[f"probability_{n}" for n in names]].to_numpy()
    assert np.allclose(probability, logits.sigmoid().numpy(), atol=1e-6)


def test_east_compare_runs_the_multi_label_baselines(table_csv, tmp_path):
    from east_hf.scripts import east_compare

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"dataset_name: {table_csv}\nlabel_columns: [rare, mid, common]\nmodel_name_or_path: tabular_mlp\n"
        "num_train_epochs: 2\nper_device_train_batch_size: 64\nreport_to: none\neast_warm_start_epochs: 1\n"
    )
    out = tmp_path / "compare"
    assert east_compare.main([str(recipe), "--losses", "east,ce,asl", "--seeds", "1", "--output_dir", str(out)]) == 0
    table = (out / "results.md").read_text()
    for row in ("east", "ce+tuned", "asl", "asl+tuned"):
        assert f"| {row} " in table


@pytest.mark.parametrize("where", ["recipe", "flags"])
def test_east_compare_refuses_a_single_label_loss_for_multi_label_runs_before_training(
    table_csv, tmp_path, capsys, where
):
    """Multi-label by the recipe or by east-train's flags after --: dice is refused in one line, nothing is trained."""
    from helpers import one_line_error

    from east_hf.scripts import east_compare

    recipe = tmp_path / "recipe.yaml"
    labels = "label_columns: [rare, mid, common]\n" if where == "recipe" else ""
    recipe.write_text(f"dataset_name: {table_csv}\n{labels}model_name_or_path: tabular_mlp\nnum_train_epochs: 1\n")
    out = tmp_path / "compare"
    argv = [recipe, "--losses", "east,dice", "--seeds", "1", "--output_dir", out]
    argv += ["--", "--label_columns", "rare,mid,common"] if where == "flags" else []
    err = one_line_error(capsys, east_compare.main, argv)
    assert "Expected multi-label losses among" in err and "got 'dice' (single-label only)" in err
    assert not out.exists()


# ---- texts with several labels: pipeline() where east_hf is not installed ----
TOPICS = {"sport": "goal match team score".split(), "money": "bank price stock loan".split(),
          "food": "bread soup apple cheese".split()}  # fmt: skip
NOISE = "the a of and today very new".split()


@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> Path:
    rng = random.Random(0)
    rows = []
    for _ in range(360):
        chosen = [t for t in TOPICS if rng.random() < 0.35] or [rng.choice(list(TOPICS))]
        words = [w for t in chosen for w in rng.sample(TOPICS[t], 2)] + rng.sample(NOISE, 3)
        rng.shuffle(words)
        rows.append((" ".join(words), "|".join(chosen)))
    folder = tmp_path_factory.mktemp("texts")
    pd.DataFrame(rows, columns=["text", "topics"]).to_csv(folder / "texts.csv", index=False)
    out = folder / "run"
    argv = [
        "--dataset_name", folder / "texts.csv", "--label_column", "topics", "--label_separator", "|",
        "--model_name_or_path", "text_tiny", "--max_length", 32, "--output_dir", out, "--num_train_epochs", 12,
        "--per_device_train_batch_size", 32, "--learning_rate", 3e-3, "--east_warm_start_epochs", 2,
        "--report_to", "none", "--save_total_limit", 1, "--tune_decision_rule", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    return out


def test_a_text_run_predicts_label_sets_with_pipeline_without_east_hf(text_run, tmp_path):
    results = json.loads((text_run / "test_results.json").read_text())
    # macro F1 over three topics (every label predicted for every text: about 0.6); 0.79 to 0.99 in runs measured: the
    # WordPiece vocabulary trained on the texts orders tokens of equal counts differently from one run to the next
    assert results["test_fbeta"] > 0.7
    texts = ["goal team the a", "bank loan soup bread of", "cheese apple today"]
    script = (
        f"TEXTS = {texts!r}\n"
        + """
import json
from transformers import pipeline
assert sys.modules.get("east_hf") is None
classify = pipeline("text-classification", model=sys.argv[1], top_k=None)
print(json.dumps([sorted(r["label"] for r in row if r["score"] > 0.5) for row in classify(TEXTS)]))
"""
    )
    out = run_without_east_hf("sys.modules['east_hf'] = None\n" + script, tmp_path, text_run)
    assert out.returncode == 0, out.stderr
    labels = json.loads(out.stdout.strip().splitlines()[-1])
    # each text's own topics are predicted (a weaker run also predicts money beside food for the third)
    assert (
        labels[0] == ["sport"] and labels[1] == ["food", "money"] and "food" in labels[2] and "sport" not in labels[2]
    )
    from east_hf.hf.predict.predictor import Predictor

    predicted = Predictor(text_run).predict(texts)["predicted_label"].tolist()
    assert [sorted(p.split("|")) if p else [] for p in predicted] == labels
    assert "top_k=None" in (text_run / "README.md").read_text()  # the card's snippet returns every label's score


# ---- images with several labels: an image folder whose metadata.csv holds one 0/1 column per label ----
def test_an_image_folder_with_a_labels_file_trains_and_predicts_label_sets(tmp_path):
    from helpers import tiny_vit
    from PIL import Image
    from transformers import ViTImageProcessor

    folder, rows, rng = tmp_path / "images", ["file_name,red,green,blue"], random.Random(0)
    folder.mkdir()
    for i in range(80):
        on = [rng.random() < 0.4 for _ in range(3)]
        pixels = np.zeros((16, 16, 3), np.uint8)
        pixels[..., :] = [255 * v for v in on]  # each colour channel is one label
        Image.fromarray(pixels).save(folder / f"{i}.png")
        rows.append(f"{i}.png," + ",".join(str(int(v)) for v in on))
    (folder / "metadata.csv").write_text("\n".join(rows) + "\n")  # the datasets imagefolder's labels file
    checkpoint = tmp_path / "vit"
    tiny_vit(num_labels=3, size=16).save_pretrained(checkpoint)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(checkpoint)
    out = tmp_path / "run"
    argv = [
        "--dataset_name", folder, "--label_columns", "red,green,blue", "--model_name_or_path", checkpoint,
        "--output_dir", out, "--max_steps", 6, "--eval_strategy", "steps", "--eval_steps", 3, "--report_to", "none",
        "--model_card", "false", "--tune_decision_rule", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert config["id2label"] == {"0": "red", "1": "green", "2": "blue"}  # the label columns' order
    assert "test_jaccard" in json.loads((out / "test_results.json").read_text())
    frame = east_predict_frame(out, [folder / "0.png", folder / "1.png"])
    assert frame["predicted_label"].map(lambda s: set(s.split("|")) <= {"red", "green", "blue", ""}).all()
    assert {"probability_red", "probability_green", "probability_blue"} <= set(frame.columns)


def east_predict_frame(run: Path, images: list[Path]):
    from east_hf.hf.predict.predictor import Predictor

    return Predictor(run).predict([str(p) for p in images], probabilities=True)


def test_a_multi_label_model_trained_from_float_labels_saves_as_multi_label_and_evaluates_alone(splits, tmp_path):
    (X, Y), (Xv, Yv) = splits
    model = _model(problem_type=None)
    args = _args(tmp_path, num_train_epochs=1, east_loss="asl")
    trainer = EASTTrainer(model, args, train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv))
    assert model.config.problem_type == "multi_label_classification"  # saved with it: pipeline() uses sigmoid
    trainer.train()
    trainer.save_model()
    assert json.loads((tmp_path / "out" / "config.json").read_text())["problem_type"] == "multi_label_classification"
    trainer.create_model_card()  # asl's description comes from the multi-label registry
    assert "multi-label" in (tmp_path / "out" / "README.md").read_text()
    # an evaluation-only trainer finds the task from the evaluation labels
    alone = EASTTrainer(_model(problem_type=None), _args(tmp_path / "eval"), eval_dataset=_dataset(Xv, Yv))
    assert alone.multi_label and np.isfinite(alone.evaluate()["eval_fbeta"])


def test_one_sided_labels_warn_whatever_the_loss(splits, tmp_path, caplog):
    (X, Y), (Xv, Yv) = splits
    Y = Y.copy()
    Y[:, 0] = 0.0  # never positive in training
    with caplog.at_level("WARNING"):
        EASTTrainer(
            _model(), _args(tmp_path, east_loss="ce"), train_dataset=_dataset(X, Y), eval_dataset=_dataset(Xv, Yv)
        )
    assert "never positive or never negative in training (LABEL_0)" in caplog.text
    assert "predictions of them are untrained" in caplog.text and "can still be predicted present" in caplog.text


def test_binary_focal_keeps_the_gradient_of_a_confidently_wrong_entry():
    from east_hf.core.loss_registry import build_loss

    logits = torch.tensor([[-30.0, 30.0]], requires_grad=True)
    build_loss("focal", multi_label=True)(logits, torch.tensor([[1.0, 0.0]])).backward()
    assert (logits.grad.abs() > 0.1).all()  # a positive at p ~ 1e-13 and a negative at p ~ 1 still pull
