"""What a run prints: one line for a replaced head, no blank lines from the tokenizer, lines above the bars, and no
metric dictionaries where they are not asked for."""

import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"


def test_a_timm_checkpoint_with_its_head_replaced_says_so_in_one_line(tmp_path, capfd, caplog):
    """transformers' load report (a table of the mismatched head's weights, 9 lines) is one east_hf line,
    as for text."""
    from east_hf.hf.models import create_image_model
    from east_hf.hf.models.build import ModelArguments, build_model

    checkpoint = tmp_path / "base"
    create_image_model("darknet19_tiny", 3, ["a", "b", "c"]).save_pretrained(checkpoint)
    capfd.readouterr()
    data = SimpleNamespace(modality="image", num_labels=5, label_names=list("vwxyz"), multi_label=False)
    with caplog.at_level(logging.WARNING):
        model, _, base = build_model(ModelArguments(model_name_or_path=str(checkpoint)), data)
    assert model.config.num_labels == 5 and base == str(checkpoint)
    err = capfd.readouterr().err
    assert "LOAD REPORT" not in err and "MISMATCH" not in err, err
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("east_hf")]
    assert lines == [f"{checkpoint} has a head of 3 classes: a new head of 5 classes is trained from scratch"]


def test_training_the_text_tiny_tokenizer_prints_nothing(capfd):
    """tokenizers' trainer draws its progress as blank lines where stderr is not a terminal."""
    from east_hf.hf.models.text import train_wordpiece_tokenizer

    capfd.readouterr()
    train_wordpiece_tokenizer(["a few words here"] * 40 + ["and some others there"] * 20, cache=False)
    assert capfd.readouterr() == ("", "")


def test_a_warning_while_a_bar_is_drawn_starts_its_own_line(capsys, monkeypatch):
    """east-train's case: no logging handler anywhere, so Python's last resort would print where the bar ends."""
    from tqdm import tqdm

    from east_hf.scripts.run_output import lines_above_bars

    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # pytest's own capture handler

    with lines_above_bars():
        bar = tqdm(total=4, file=sys.stderr, ascii=True)
        bar.update(1)
        logging.getLogger("east_hf.hf.training.callbacks").warning("a line of east_hf's")
        bar.close()
    err = capsys.readouterr().err
    pieces = [p.strip() for line in err.split("\n") for p in line.split("\r")]
    assert "a line of east_hf's" in pieces, repr(err)


def test_print_metrics_false_prints_no_metric_dictionaries(tmp_path, capsys):
    from east_hf.scripts.east_train import main

    overrides = {
        "output_dir": tmp_path / "run", "max_steps": 4, "eval_strategy": "steps", "eval_steps": 2, "logging_steps": 1,
        "max_train_samples": 64, "max_eval_samples": 32, "max_test_samples": 32, "hidden_sizes": 8,
        "disable_tqdm": "true", "use_cpu": "true", "model_card": "false", "print_metrics": "false",
    }  # fmt: skip
    assert main([str(TABULAR), *[str(x) for k, v in overrides.items() for x in (f"--{k}", v)]]) == 0
    out = capsys.readouterr().out
    assert "Test metrics" in out
    assert not [line for line in out.splitlines() if line.startswith("{")], out


def test_east_compare_runs_print_no_metric_dictionaries(tmp_path, monkeypatch):
    from east_hf.scripts import compare_runs

    seen = []
    monkeypatch.setattr("east_hf.scripts.east_train.main", lambda argv, **kwargs: seen.append(argv) or 0)
    compare_runs.run_one(str(TABULAR), tmp_path / "run", 0, ["--east_loss", "ce"], [])
    [argv] = seen
    assert argv[argv.index("--print_metrics") + 1] == "false"
