"""Faults a user meets: each reproduced, now a one-line error or preserved data, never silence."""

# 1 non-finite training data, 2 a non-finite validation row, 3 re-running into a run folder, 4 east-compare after the
# recipe changed, 5 a high-cardinality text column, 6 a kill during a checkpoint save, 7 the smaller input errors.
# The data loader's own refusals (2's CSV row, all of 5) are in test_data.py.

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import PlainClassifier, TinyTabular, east_args, write_csv
from transformers import TrainerCallback

from east_hf import EASTLoss, EASTTrainer
from east_hf.core import hard_confusion_matrix, soft_confusion_matrix
from east_hf.core.loss_registry import CrossEntropySetLoss
from east_hf.hf.data import DataArguments, DataError, load_data
from east_hf.hf.training.checkpoints import (
    LOCK_NAME,
    STAGE_BEST_WEIGHTS_NAME,
    WEIGHT_FILES,
    checkpoint_problem,
    complete_checkpoints,
    is_complete_checkpoint,
    last_complete_checkpoint,
)
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
        east_ce_weight=0,
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


def test_3_a_run_resumes_only_with_the_data_and_model_settings_it_was_started_with(capsys, tmp_path):
    """east-train keeps its run's record (run_settings.json); resuming with another split or model shape is refused in
    one line naming the change, before any training; a longer budget resumes."""
    out = tmp_path / "run"
    assert east_train([str(TABULAR), *_tiny(out)]) == 0
    record = json.loads((out / "run_settings.json").read_text())
    assert record["data"]["split_seed"] == 42 and record["model"]["hidden_sizes"] == [16]
    before = (out / "model.safetensors").read_bytes()
    err = _error(capsys, [TABULAR, *_tiny(out, split_seed=7, resume_from_checkpoint="true")])
    assert "Expected the data and model settings" in err and "split_seed: 42 -> 7" in err
    err = _error(capsys, [TABULAR, *_tiny(out, hidden_sizes=32, resume_from_checkpoint="true")])
    assert "hidden_sizes: [16] -> [32]" in err
    assert (out / "model.safetensors").read_bytes() == before  # nothing trained
    assert east_train([str(TABULAR), *_tiny(out, max_steps=6, resume_from_checkpoint="true")]) == 0
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
    assert east_train([str(TABULAR), *_tiny(out, split_seed=7, overwrite_output_dir="true")]) == 0
    assert json.loads((out / "run_settings.json").read_text())["data"]["split_seed"] == 7  # the new run's record


def test_3_a_finished_text_run_resumes_and_is_replaced(capsys, tmp_path):
    """A text run's tokenizer files are the run's own: the run resumes and --overwrite_output_dir replaces it."""
    words = {"sport": "goal match team coach".split(), "money": "bank price loan cash".split()}
    rows = [(f"{a} {b} the day", label) for label, w in words.items() for a in w for b in w for _ in range(3)]
    csv = tmp_path / "texts.csv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(csv, index=False)
    out = tmp_path / "run"
    argv = [str(ROOT / "recipes" / "text_tiny_demo.yaml"), "--dataset_name", str(csv), *_tiny(out)]
    argv = [a for a in argv if a not in ("--hidden_sizes", "16")]
    assert east_train(argv) == 0
    assert (out / "tokenizer.json").is_file()
    assert east_train([*argv, "--resume_from_checkpoint", "true"]) == 0
    assert east_train([*argv, "--overwrite_output_dir", "true"]) == 0
    err = _error(capsys, [*argv, "--max_length", "16", "--resume_from_checkpoint", "true"])
    assert "max_length: 128 -> 16" in err


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
        ValueError,
        match=r"Expected metric_for_best_model among the evaluation metrics "
        r"\(accuracy, fbeta, loss, mcc, precision, recall\), got 'f2'",  # the trainer's own hard metrics
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


# ---- one writer per output folder, a user's files never replaced, Ctrl-C ends in one line ----
RUN_SCRIPT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C at a terminal: a background child ignores SIGINT
from east_hf.scripts.east_train import main
sys.exit(main(sys.argv[1:]))
"""


def _long(out) -> list[str]:
    """The bundled tabular recipe for far more steps than a test waits for: a checkpoint every 2 steps."""
    return [str(TABULAR), *_tiny(out, max_steps=100_000, east_annealing="false")]


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    """east-train in its own process; its stderr goes to ``log``."""
    with open(log, "w") as err:
        return subprocess.Popen(
            [sys.executable, "-c", RUN_SCRIPT, *argv], stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ)
        )


def _first_checkpoint(out: Path, run: subprocess.Popen, log: Path) -> Path:
    """Wait for ``run`` to save a complete checkpoint into ``out``; return it."""
    deadline = time.monotonic() + 300
    while not complete_checkpoints(out):
        assert run.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.2)
    return complete_checkpoints(out)[-1]


def test_lock_refuses_a_second_writer_naming_its_pid_and_takes_over_a_dead_writers_lock(capsys, caplog, tmp_path):
    out = tmp_path / "run"
    first = _start(_long(out), tmp_path / "first.log")
    try:
        _first_checkpoint(out, first, tmp_path / "first.log")
        for argv in (
            [TABULAR, *_tiny(out)],  # a new run
            [*_long(out), "--resume_from_checkpoint", "true"],  # a resume of the running one
            [*_long(out), "--overwrite_output_dir", "true"],  # a replacement of it
        ):
            err = _error(capsys, argv)
            assert f"got {out}, in use by process {first.pid} ({out / LOCK_NAME})" in err, err
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == first.pid  # the refusals leave its lock alone
        assert first.poll() is None
    finally:
        first.kill()  # kill -9, an out-of-memory kill: no chance to remove its lock
        first.wait()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == first.pid
    step = int(complete_checkpoints(out)[-1].name.split("-")[1])
    assert east_train([*_long(out), "--resume_from_checkpoint", "true", "--max_steps", str(step + 2)]) == 0
    warnings = [r.getMessage() for r in caplog.records if "stale lock" in r.getMessage()]
    assert warnings == [f"taking over the stale lock on {out} of process {first.pid}, no longer running"]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == step + 2
    assert not (out / LOCK_NAME).exists()  # released at a normal exit


def test_lock_is_released_after_an_error_and_an_unused_folder_is_not_left_behind(capsys, tmp_path):
    out = tmp_path / "new" / "run"
    err = _error(capsys, [TABULAR, *_tiny(out), "--label_column", "nope"])  # found after the lock is taken
    assert "nope" in err
    assert not out.exists()
    out.mkdir(parents=True)
    assert east_train([str(TABULAR), *_tiny(out)]) == 0
    assert not (out / LOCK_NAME).exists() and (out / "test_results.json").is_file()


@pytest.mark.parametrize("overwrite", [None, "true"])
def test_users_files_in_output_dir_are_never_replaced(capsys, tmp_path, monkeypatch, overwrite):
    mine = {"README.md": "# my notes\n", "config.json": '{"mine": true}\n'}
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in mine.items():
        (folder / name).write_text(text)
    err = _error(capsys, [TABULAR, *_tiny(folder, overwrite_output_dir=overwrite)])
    assert f"Expected output_dir {folder} to be empty or to hold an east_hf run" in err
    assert "got files east_hf did not write (README.md, config.json); choose another output_dir" in err
    assert "--overwrite_output_dir never replaces or deletes them" in err
    assert {p.name: p.read_text() for p in folder.iterdir()} == mine  # no lock, no model, the files as they were

    project = tmp_path / "project"  # east-train --output_dir . in a project
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (project / "README.md").write_text("# mine\n")
    monkeypatch.chdir(project)
    err = _error(capsys, [TABULAR, *_tiny(".", overwrite_output_dir=overwrite)])
    assert "got files east_hf did not write (README.md, pyproject.toml)" in err
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "pyproject.toml"]

    model = tmp_path / "my-model"  # a downloaded model: weights and config, no run of east_hf's
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "config.json").write_text("{}")
    err = _error(capsys, [TABULAR, *_tiny(model, overwrite_output_dir=overwrite)])
    assert "got files east_hf did not write (config.json, model.safetensors)" in err
    assert (model / "model.safetensors").read_bytes() == b"weights"


def test_a_finished_run_with_its_card_is_still_a_run_and_can_be_replaced(capsys, tmp_path):
    out = tmp_path / "run"
    assert east_train([str(TABULAR), *_tiny(out, model_card="true")]) == 0
    assert (out / "README.md").is_file() and (out / "config.json").is_file()
    err = _error(capsys, [TABULAR, *_tiny(out, model_card="true")])
    assert "already holds a run" in err
    assert east_train([str(TABULAR), *_tiny(out, model_card="true", overwrite_output_dir="true")]) == 0


def test_an_east_compare_folder_is_refused_as_an_output_dir(capsys, tmp_path):
    from east_hf.scripts.east_compare import main as compare

    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--hidden_sizes", "16", "--disable_tqdm", "True", "--model_card", "False"]
    assert compare([str(TABULAR), "--losses", "ce", "--seeds", "1", "--output_dir", str(out), "--", *tiny]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for overwrite in (None, "true"):
        err = _error(capsys, [TABULAR, *_tiny(out, overwrite_output_dir=overwrite)])
        assert f"got {out}, which holds an east-compare comparison (results.json, results.md)" in err
        assert "--overwrite_output_dir never replaces a comparison" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_ctrl_c_ends_in_one_line_with_the_resume_command_and_exit_130(tmp_path):
    out, log = tmp_path / "run", tmp_path / "run.log"
    run = _start(_long(out), log)
    try:
        _first_checkpoint(out, run, log)
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=300) == 130, log.read_text()[-2000:]
    finally:
        run.kill()
        run.wait()
    err = log.read_text()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert [x for x in err.splitlines() if "interrupted" in x] == [line]
    checkpoint, command = line.removeprefix("east-train: interrupted; resume from ").split(" with: ")
    assert is_complete_checkpoint(checkpoint) and Path(checkpoint).parent == out
    argv = shlex.split(command)
    assert argv[0] == "east-train" and argv[-2:] == ["--resume_from_checkpoint", "true"], line
    assert not (out / LOCK_NAME).exists()
    step = int(Path(checkpoint).name.split("-")[1])
    assert east_train([*argv[1:], "--max_steps", str(step + 2)]) == 0  # the printed command resumes
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == step + 2


def test_ctrl_c_before_any_checkpoint_says_to_start_again(capsys, tmp_path, monkeypatch):
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(EASTTrainer, "train", interrupted)
    out = tmp_path / "run"
    try:
        with pytest.raises(SystemExit) as exc:
            east_train([str(TABULAR), *_tiny(out)])
    except KeyboardInterrupt:  # escaping, it would end the test session
        pytest.fail("KeyboardInterrupt escaped east-train")
    assert exc.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "east-train: interrupted before a checkpoint was saved; start again with the same command"
    )
    assert not out.exists()  # the lock released, the folder it made removed


def test_a_lock_from_another_host_or_unreadable_is_refused_with_the_file_to_delete(capsys, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 4242, "host": "another-machine", "token": "x"}))
    err = _error(capsys, [TABULAR, *_tiny(out)])
    assert err.endswith(
        f"got {out}, locked by process 4242 on host another-machine; if that process has ended, delete {out / LOCK_NAME}"
    )
    (out / LOCK_NAME).write_text("")  # a holder cut off between creating and writing it
    err = _error(capsys, [TABULAR, *_tiny(out)])
    assert f"Expected {out / LOCK_NAME} to name the process that locks {out}, got an unreadable file" in err
    assert (out / LOCK_NAME).read_text() == ""  # left for the user to judge


HOLD_LOCK = """
import sys, time
from east_hf.scripts.lock import OutputDirLock
OutputDirLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_under_torchrun_only_the_main_process_locks_and_every_process_stops_on_a_refusal(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    out = tmp_path / "run"
    launch = [torchrun, "--standalone", "--nproc_per_node", "2", "-m", "east_hf.scripts.east_train"]
    launch += [str(TABULAR), *_tiny(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        refused = subprocess.run(launch, capture_output=True, text=True, timeout=300, env=env)
        assert refused.returncode != 0
        ours = [line for line in refused.stderr.splitlines() if line.startswith("east-train")]
        assert ours == [
            f"east-train: error: Expected an output_dir no other east-train writes to, got {out}, in use by "
            f"process {holder.pid} ({out / LOCK_NAME}): wait for it to end or choose another output_dir"
        ]
        assert "[rank1]" not in refused.stderr  # the other process stopped too, without a traceback
    finally:
        holder.kill()
        holder.wait()
    done = subprocess.run(launch, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]  # the second process never asks for the main one's lock
    assert done.stderr.count(f"taking over the stale lock on {out} of process {holder.pid}") == 1
    assert not (out / LOCK_NAME).exists() and (out / "test_results.json").is_file()


# ---- a corrupt file in the last checkpoint: resume from the last one that loads ----
def _truncate(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def _garble_header(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[:8] + b"#" * 32 + data[40:])  # safetensors: 8 bytes of header length, then JSON


CORRUPTIONS = {  # what happens to a file of checkpoint-4, and what the warning and the error say about it
    "truncated weights": ("model.safetensors", _truncate, "does not load", "file not fully covered"),
    "garbled weights header": ("model.safetensors", _garble_header, "does not load", "invalid JSON in header"),
    "truncated trainer state": ("trainer_state.json", _truncate, "is not JSON", "line "),
    "truncated optimizer": ("optimizer.pt", _truncate, "is not a whole torch.save archive", "truncated or corrupt"),
}


class _StepCounter(TrainerCallback):
    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def _checkpointed(out: Path, callbacks=None) -> EASTTrainer:
    """4 steps of a tiny model, a checkpoint every 2: checkpoint-2 and checkpoint-4."""
    args = east_args(out, max_steps=4, save_strategy="steps", save_steps=2, logging_steps=1, save_total_limit=None)
    torch.manual_seed(0)
    return EASTTrainer(model=PlainClassifier(), args=args, train_dataset=TinyTabular(), callbacks=callbacks)


@pytest.fixture(scope="module")
def checkpointed_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("checkpointed") / "run"
    _checkpointed(out).train()
    assert is_complete_checkpoint(out / "checkpoint-2") and is_complete_checkpoint(out / "checkpoint-4")
    return out


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_last_checkpoint_is_skipped_by_resume_true_and_refused_by_path(
    checkpointed_run, tmp_path, caplog, corruption
):
    name, corrupt, why, detail = CORRUPTIONS[corruption]
    out = tmp_path / "run"
    shutil.copytree(checkpointed_run, out)
    bad = out / "checkpoint-4" / name
    corrupt(bad)
    assert not is_complete_checkpoint(bad.parent) and last_complete_checkpoint(out) == out / "checkpoint-2"
    assert complete_checkpoints(out) == [out / "checkpoint-2"]
    # A path to it: one line naming the file and what is wrong, before any step.
    with pytest.raises(ValueError) as error:
        _checkpointed(out).train(resume_from_checkpoint=str(bad.parent))
    message = str(error.value)
    assert "\n" not in message and message.startswith("Expected resume_from_checkpoint to be a complete checkpoint")
    assert f"{bad} {why}" in message and detail in message and "pass 'true'" in message
    # true: one warning line naming it, then the run resumes from checkpoint-2 and finishes.
    counter = _StepCounter()
    trainer = _checkpointed(out, callbacks=[counter])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train(resume_from_checkpoint=True)
    (warning,) = [r.getMessage() for r in caplog.records if "skipping incomplete checkpoint" in r.getMessage()]
    assert warning.startswith(f"skipping incomplete checkpoint {bad.parent}: {bad} {why}") and "\n" not in warning
    assert counter.steps == [3, 4] and trainer.state.global_step == 4
    assert is_complete_checkpoint(out / "checkpoint-4")  # saved again, whole


def test_checkpoint_problem_reads_shards_bins_and_state_without_loading_tensors(tmp_path):
    from safetensors.torch import save_file

    from east_hf.hf.training.checkpoints import checkpoint_problem

    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    assert checkpoint_problem(folder) == f"{folder} holds no model weights ({', '.join(WEIGHT_FILES)})"
    save_file({"w": torch.ones(2)}, str(folder / "model-00001-of-00002.safetensors"))
    index = {"weight_map": {"w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert checkpoint_problem(folder) == (
        f"{folder / 'model.safetensors.index.json'} names the shard model-00002-of-00002.safetensors, which is missing"
    )
    save_file({"v": torch.ones(2)}, str(folder / "model-00002-of-00002.safetensors"))
    assert checkpoint_problem(folder) is None and is_complete_checkpoint(folder)
    save_file({}, str(folder / "model-00002-of-00002.safetensors"))
    assert checkpoint_problem(folder) == f"{folder / 'model-00002-of-00002.safetensors'} lists no tensors"
    for name in (
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ):
        (folder / name).unlink()
    torch.save({"w": torch.ones(2)}, folder / "pytorch_model.bin")
    assert is_complete_checkpoint(folder)
    (folder / "pytorch_model.bin").write_bytes(b"")
    assert checkpoint_problem(folder) == f"{folder / 'pytorch_model.bin'} is empty"
    torch.save({"w": torch.ones(2)}, folder / "pytorch_model.bin")
    (folder / "trainer_state.json").write_text("[1, 2]")
    assert checkpoint_problem(folder) == f"{folder / 'trainer_state.json'} holds a JSON list, not the Trainer's state"
    assert checkpoint_problem(tmp_path / "checkpoint-9") == f"{tmp_path / 'checkpoint-9'} is not a folder"


# ---- the annealing callback's per-stage best weights are part of a complete checkpoint ----
@pytest.fixture(scope="module")
def stage_best_run(tmp_path_factory) -> tuple[Path, int]:
    """An annealing run cut after the first checkpoint that carries east_stage_best.pt (its stage best is an earlier
    step): the checkpoints after it are removed, as if the run had been killed there. Returns the folder and step."""
    from helpers import annealing_trainer

    out = tmp_path_factory.mktemp("stage_best") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        annealing_trainer(out).train()
    finally:
        torch.set_num_threads(threads)
    steps = sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))
    step = next(s for s in steps if (out / f"checkpoint-{s}" / STAGE_BEST_WEIGHTS_NAME).is_file())
    for later in (s for s in steps if s > step):
        shutil.rmtree(out / f"checkpoint-{later}")
    return out, step


def test_a_checkpoint_lists_its_stage_best_weights_and_is_incomplete_without_them(stage_best_run, tmp_path):
    run, step = stage_best_run
    out = tmp_path / "run"
    shutil.copytree(run, out)
    last = out / f"checkpoint-{step}"
    saved = json.loads((last / "trainer_state.json").read_text())["stateful_callbacks"]
    assert saved["TemperatureAnnealingCallback"]["attributes"]["checkpoint_files"] == [STAGE_BEST_WEIGHTS_NAME]
    assert last_complete_checkpoint(out) == last
    # a save cut off after trainer_state.json, before the callback's on_save wrote its file
    (last / STAGE_BEST_WEIGHTS_NAME).unlink()
    assert checkpoint_problem(last) == (
        f"{last / STAGE_BEST_WEIGHTS_NAME} is missing (its save was cut off): {last / 'trainer_state.json'} lists it"
    )
    assert last_complete_checkpoint(out) == complete_checkpoints(out)[-1] != last


@pytest.mark.usefixtures("one_thread")
def test_a_truncated_stage_best_file_is_skipped_by_resume_true_and_refused_by_path(stage_best_run, tmp_path, caplog):
    from helpers import annealing_trainer

    run, step = stage_best_run
    out = tmp_path / "run"
    shutil.copytree(run, out)
    last = out / f"checkpoint-{step}"
    bad = last / STAGE_BEST_WEIGHTS_NAME
    _truncate(bad)
    previous = complete_checkpoints(out)[-1]
    assert previous != last and last_complete_checkpoint(out) == previous
    # A path to it: one line naming the file, before any step (no PytorchStreamReader traceback).
    with pytest.raises(ValueError) as error:
        annealing_trainer(out).train(resume_from_checkpoint=str(last))
    message = str(error.value)
    assert "\n" not in message and message.startswith("Expected resume_from_checkpoint to be a complete checkpoint")
    assert f"{bad} is not a whole torch.save archive: truncated or corrupt" in message
    # true: one warning line naming it, then the run resumes from the checkpoint before and finishes.
    counter = _StepCounter()
    trainer = annealing_trainer(out, callbacks=[counter])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train(resume_from_checkpoint=True)
    (warning,) = [r.getMessage() for r in caplog.records if "skipping incomplete checkpoint" in r.getMessage()]
    assert (
        warning
        == f"skipping incomplete checkpoint {last}: {bad} is not a whole torch.save archive: truncated or corrupt"
    )
    first_step = int(previous.name.split("-")[1]) + 1
    assert counter.steps[0] == first_step and trainer.state.global_step > step
    assert is_complete_checkpoint(last)  # saved again, whole


def test_a_stage_best_file_damaged_after_the_check_is_one_line_not_a_traceback(tmp_path):
    """The callback reads east_stage_best.pt from output_dir; a file there that does not load (a checkpoint resumed
    from a path elsewhere, a file damaged since the check) ends in one line naming it."""
    from transformers import TrainerControl, TrainerState

    from east_hf.core.annealing import AnnealingSchedule
    from east_hf.hf.training.callbacks import TemperatureAnnealingCallback

    callback = TemperatureAnnealingCallback(AnnealingSchedule(patience=3))
    callback.schedule.update(1.0, 0.5, step=2)  # the stage best is step 2; the checkpoint is step 4
    (tmp_path / "checkpoint-4").mkdir()
    bad = tmp_path / "checkpoint-4" / STAGE_BEST_WEIGHTS_NAME
    torch.save({"w": torch.ones(3)}, bad)
    _truncate(bad)
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=2)
    with pytest.raises(ValueError) as error:
        callback.on_train_begin(args, TrainerState(global_step=4), TrainerControl(), model=PlainClassifier())
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"Expected the stage's best weights in {bad}, got a file")
