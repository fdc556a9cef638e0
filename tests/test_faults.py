"""Faults a user meets: each case of issue 15 reproduced, now a one-line error or preserved data, never silence."""

# 1 non-finite training data, 2 a non-finite validation row, 3 re-running into a run folder, 4 east-compare after the
# recipe changed, 5 a high-cardinality text column, 6 a kill during a checkpoint save, 7 the smaller input errors.
# The data loader's own refusals (2's CSV row, all of 5) are in test_data.py.

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import PlainClassifier, TinyTabular, east_args, write_csv

from east_hf import EASTLoss, EASTTrainer
from east_hf.core import hard_confusion_matrix, soft_confusion_matrix
from east_hf.core.loss import CrossEntropySetLoss
from east_hf.hf.checkpoints import is_complete_checkpoint, last_complete_checkpoint
from east_hf.hf.data import DataArguments, DataError, load_data
from east_hf.scripts.east_train import _data_line
from east_hf.scripts.east_train import main as east_train

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"


def _tiny(out, **more) -> list[str]:
    """A few steps of the bundled tabular recipe; checkpoints every 2 steps."""
    overrides = {
        "output_dir": out,
        "max_steps": 4,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "save_steps": 2,
        "hidden_sizes": 16,
        "disable_tqdm": "true",
        "use_cpu": "true",
        "model_card": "false",
        "report_to": "none",
        **more,
    }
    return [str(x) for k, v in overrides.items() if v is not None for x in (f"--{k}", v)]


def _error(capsys, argv) -> str:
    """Run east-train, expect exit status 2 and exactly one stderr line; return it."""
    with pytest.raises(SystemExit) as exc:
        east_train([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("east-train: error: "), err
    return err


class _WithBadRow(torch.utils.data.Dataset):
    """A TinyTabular whose row ``row`` holds ``value`` in its first feature."""

    def __init__(self, value: float, row: int, **kwargs):
        self.base = TinyTabular(**kwargs)
        self.base.x[row, 0] = value

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return self.base[i]


# ---- 1. non-finite training data never trains ----
def test_1_inf_in_a_csv_feature_is_refused_with_its_column_and_row_count(capsys, tmp_path):
    rows = [f"{'inf' if i in (3, 7) else f'{i * 0.1:.4f}'},{i % 3},{i % 2}" for i in range(60)]
    csv = write_csv(tmp_path / "d.csv", "x,z,y", rows)
    with pytest.raises(DataError, match=r"got inf in the train split: 'x' \(2 rows\)"):
        load_data(DataArguments(dataset_name=str(csv), label_column="y", split_seed=0, test_size=0.1, val_size=0.1))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset_name: {csv}\nlabel_column: y\nmodel_name_or_path: tabular_mlp\n")
    err = _error(capsys, [recipe, *_tiny(tmp_path / "run")])
    assert "inf" in err and "'x'" in err
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_1_nan_features_in_the_python_api_stop_training_naming_the_step(tmp_path):
    model = PlainClassifier()
    trainer = EASTTrainer(model=model, args=east_args(tmp_path), train_dataset=_WithBadRow(float("nan"), row=50))
    with pytest.raises(FloatingPointError, match=r"Expected a finite training loss, got NaN or inf at step \d+"):
        trainer.train()
    assert not (tmp_path / "model.safetensors").exists()
    with pytest.raises(FloatingPointError, match="Expected a finite training loss"):
        trainer.save_model()  # never a model after NaN


def test_1_nan_after_the_last_log_is_caught_at_train_end(tmp_path):
    args = east_args(tmp_path, max_steps=3, logging_steps=50)  # no training log at all
    trainer = EASTTrainer(model=PlainClassifier(), args=args, train_dataset=_WithBadRow(float("inf"), row=40))
    with pytest.raises(FloatingPointError, match="at step"):
        trainer.train()


def test_1_non_finite_first_batch_fails_in_the_preflight(tmp_path):
    trainer = EASTTrainer(
        model=PlainClassifier(), args=east_args(tmp_path), train_dataset=_WithBadRow(float("inf"), row=0)
    )
    with pytest.raises(ValueError, match="Expected finite logits on the first training batch"):
        trainer.train()


def test_1_non_finite_grad_norm_and_parameters(tmp_path):
    trainer = EASTTrainer(model=PlainClassifier(), args=east_args(tmp_path), train_dataset=TinyTabular())
    with pytest.raises(FloatingPointError, match="Expected a finite gradient norm, got nan"):
        trainer.log({"loss": 0.5, "grad_norm": float("nan")})
    with torch.no_grad():
        trainer.model.net[0].weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"NaN or inf in 'net.0.weight'.*nothing was written"):
        trainer.save_model(str(tmp_path / "saved"))
    assert not (tmp_path / "saved" / "model.safetensors").exists()


# ---- 2. a non-finite validation row is an error, never a stage change ----
def test_2_inf_in_a_validation_row_is_an_error_not_a_temperature_drop(tmp_path):
    args = east_args(
        tmp_path,
        east_annealing=True,
        eval_strategy="steps",
        eval_steps=2,
        max_steps=20,
        east_anneal_monitor="eval_loss",
        east_warm_start="none",
    )
    trainer = EASTTrainer(
        model=PlainClassifier(),
        args=args,
        train_dataset=TinyTabular(),
        eval_dataset=_WithBadRow(float("inf"), row=5, n=32, seed=1),
    )
    with pytest.raises(ValueError, match=r"Expected finite logits in evaluation, got NaN or inf in 1 of 16 rows"):
        trainer.train()
    assert trainer.east_stage == 0 and trainer.east_temperature == args.east_temperature


# ---- 3. nothing a user trained is deleted ----
def test_3_rerunning_into_a_finished_run_is_refused_and_overwrite_is_explicit(capsys, tmp_path):
    out = tmp_path / "run"
    assert east_train([str(TABULAR), *_tiny(out)]) == 0
    state = json.loads((out / "trainer_state.json").read_text())
    best = Path(state["best_model_checkpoint"])
    before = {
        p: p.read_bytes() for p in [out / "model.safetensors", out / "all_results.json", best / "model.safetensors"]
    }
    err = _error(capsys, [TABULAR, *_tiny(out, learning_rate=0.05)])
    assert f"output_dir {out} already holds a run" in err and "--overwrite_output_dir true" in err
    assert "--resume_from_checkpoint true" in err
    assert {p: p.read_bytes() for p in before} == before  # untouched, best checkpoint included
    assert east_train([str(TABULAR), *_tiny(out, learning_rate=0.05, overwrite_output_dir="true")]) == 0
    assert json.loads((out / "all_results.json").read_text()) != json.loads(before[out / "all_results.json"])


# ---- 4. east-compare never reuses a run trained with other settings ----
def test_4_compare_reruns_a_run_whose_recipe_changed(tmp_path, capsys):
    from east_hf.scripts.east_compare import main as compare

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(TABULAR.read_text())
    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--hidden_sizes", "16", "--disable_tqdm", "True", "--model_card", "False"]
    argv = [str(recipe), "--losses", "ce", "--seeds", "1", "--output_dir", str(out), "--", *tiny]
    assert compare(argv) == 0
    run = out / "ce" / "seed-0"
    assert json.loads((run / "run_settings.json").read_text())["training"]["learning_rate"] == 1e-3
    capsys.readouterr()
    assert compare(argv) == 0
    assert "done, skipped" in capsys.readouterr().err
    recipe.write_text(TABULAR.read_text().replace("learning_rate: 1.0e-3", "learning_rate: 1.0e-2"))
    assert compare(argv) == 0
    err = capsys.readouterr().err
    assert "settings changed: learning_rate: 0.001 -> 0.01" in err and "done, skipped" not in err
    result = json.loads((out / "results.json").read_text())
    assert result["runs"][0]["settings"]["training"]["learning_rate"] == 1e-2
    assert "wall_seconds" in result["runs"][0]  # trained again, not read back
    assert json.loads((run / "run_settings.json").read_text())["training"]["learning_rate"] == 1e-2


# ---- 6. a kill during a checkpoint save loses nothing ----
KILL_SCRIPT = """
import os, signal, sys
from transformers import TrainerState
save = TrainerState.save_to_json
def save_or_die(self, path):
    if "checkpoint-4" in str(path):
        os.kill(os.getpid(), signal.SIGKILL)  # weights and optimizer written, trainer_state.json not yet
    return save(self, path)
TrainerState.save_to_json = save_or_die
from east_hf.scripts.east_train import main
sys.exit(main(sys.argv[1:]))
"""


def test_6_kill_during_a_checkpoint_save_then_resume_skips_the_incomplete_one(capsys, tmp_path, caplog):
    out = tmp_path / "run"
    argv = [str(TABULAR), *_tiny(out, max_steps=6)]
    killed = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, *argv], capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert is_complete_checkpoint(out / "checkpoint-2") and not is_complete_checkpoint(out / "checkpoint-4")
    assert (out / "checkpoint-4" / "model.safetensors").is_file()
    assert last_complete_checkpoint(out) == out / "checkpoint-2"
    err = _error(capsys, argv)  # a partial run is not silently replaced
    assert "already holds a run" in err and "checkpoint-4" in err
    err = _error(capsys, [*argv, "--resume_from_checkpoint", str(out / "checkpoint-4")])
    assert "Expected resume_from_checkpoint to be a complete checkpoint" in err
    assert east_train([*argv, "--resume_from_checkpoint", "true"]) == 0
    assert "skipping incomplete checkpoint" in caplog.text and "checkpoint-4" in caplog.text
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 6 and (out / "test_results.json").is_file()


# ---- 7. the smaller cases ----
def test_7_unknown_metric_for_best_model_is_one_line(tmp_path):
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=5, metric_for_best_model="f2")
    trainer = EASTTrainer(model=PlainClassifier(), args=args, train_dataset=TinyTabular(), eval_dataset=TinyTabular())
    with pytest.raises(
        ValueError, match=r"Expected metric_for_best_model among the evaluation metrics \(loss\), got 'f2'"
    ):
        trainer.train()


def test_7_narrow_integer_labels_are_cast():
    logits, labels = torch.randn(12, 3), torch.arange(12) % 3
    for loss in (EASTLoss(num_classes=3), CrossEntropySetLoss()):
        assert torch.allclose(loss(logits, labels.to(torch.uint8)), loss(logits, labels))
    assert torch.equal(hard_confusion_matrix(logits, labels.to(torch.int16)), hard_confusion_matrix(logits, labels))


def test_7_beta_mapping_resolves_with_class_names():
    loss = EASTLoss(beta={"dog": 2.0}, num_classes=3, class_names=["cat", "dog", "frog"])
    assert loss.beta == [1.0, 2.0, 1.0]
    assert EASTLoss(beta={"1": 2.0}, num_classes=3).beta == [1.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="Expected num_classes"):
        EASTLoss(beta={"dog": 2.0})


def test_7_negative_or_nan_sample_weight_is_refused():
    logits, labels = torch.randn(4, 2), torch.tensor([0, 1, 0, 1])
    for weight in (torch.tensor([1.0, -0.5, 1.0, 1.0]), torch.tensor([1.0, float("nan"), 1.0, 1.0])):
        with pytest.raises(ValueError, match="Expected every sample_weight finite and >= 0"):
            EASTLoss()(logits, labels, sample_weight=weight)


def test_7_binary_average_on_three_classes_is_refused(tmp_path):
    with pytest.raises(ValueError, match="Expected 2 classes for average='binary', got 3"):
        EASTLoss(average="binary", num_classes=3)
    with pytest.raises(ValueError, match="Expected 2 classes for average='binary'"):
        EASTLoss(average="binary")(torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))
    from helpers import tiny_vit

    with pytest.raises(ValueError, match="Expected 2 classes for average='binary', got 3"):
        EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, east_average="binary"))


def test_7_confusion_matrices_refuse_logits_and_nan_rows():
    logits, labels = torch.tensor([[2.0, -1.0], [0.5, 1.5]]), torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"Expected probabilities .* \(logits\? pass logits.softmax\(1\)\)"):
        soft_confusion_matrix(logits, labels, 0.2)
    assert (soft_confusion_matrix(logits.softmax(1), labels, 0.2) >= 0).all()
    with pytest.raises(ValueError, match="Expected finite probs_or_logits"):
        hard_confusion_matrix(torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]), labels)


def test_7_empty_and_minus_100_labels_are_dropped_and_reported(tmp_path):
    rows = [f"{i * 0.1:.2f},{'' if i in (4, 9) else -100 if i == 13 else i % 2}" for i in range(80)]
    csv = write_csv(tmp_path / "d.csv", "x,y", rows)
    data = load_data(DataArguments(dataset_name=str(csv), label_column="y"))
    assert data.label_names == ["0", "1"]  # -100 is no class
    assert data.dropped == {"empty label": 2, "label -100": 1}
    assert len(data.train) + len(data.validation) + len(data.test) == 77
    line = _data_line("d.csv", data)
    assert line.endswith("; dropped 2 rows with an empty label, 1 labelled -100"), line


def test_7_summary_line_without_dropped_rows_is_unchanged():
    data = load_data(DataArguments(dataset_name="sklearn:iris"))
    assert "dropped" not in _data_line("sklearn:iris", data)
