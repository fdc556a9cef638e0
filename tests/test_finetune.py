"""Fine-tuning recipes: finetune_text on a BERT saved to disk (no head, its own tokenizer) and finetune_image on a timm
checkpoint saved with save_for_hf, loaded by ``local-dir:``; each run evaluates within epochs, keeps the best model
and ends on the annealing criterion inside the recipe's budget, having learned."""

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from east_hf import EASTConfig
from east_hf.hf.models.text import train_wordpiece_tokenizer
from east_hf.scripts.east_train import main

WORDS = {
    "sport": "goal match team score".split(),
    "money": "bank price stock loan".split(),
    "food": "bread soup salad".split(),
}
NOISE = "the a of and today very new some big small".split()


def _schedule_end(run: Path) -> dict:
    """The annealing callback's saved schedule state of a finished run (the kept checkpoint's trainer state)."""
    state = json.loads((run / "trainer_state.json").read_text())
    schedule = state["stateful_callbacks"]["TemperatureAnnealingCallback"]["attributes"]["schedule_state"]
    evaluated = [entry["epoch"] for entry in state["log_history"] if "eval_fbeta" in entry]
    return {**schedule, "epochs": evaluated, "budget": state["num_train_epochs"]}


def test_eval_steps_as_a_fraction_keeps_a_checkpoint_per_evaluation_and_the_best_model(tmp_path):
    args = EASTConfig(output_dir=str(tmp_path), eval_strategy="steps", eval_steps=0.05, report_to="none")
    assert args.save_strategy == "steps" and args.save_steps == 0.05
    assert args.load_best_model_at_end and args.metric_for_best_model == "eval_fbeta"


def _texts(counts: dict[str, int], seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for label, n in counts.items():
        for _ in range(n):
            words = rng.sample(WORDS[label], 2) + rng.sample(NOISE, 3)
            rng.shuffle(words)
            rows.append({"review": " ".join(words), "label": label})
    rng.shuffle(rows)
    return rows


@pytest.fixture(scope="module")
def pretrained_bert(tmp_path_factory) -> Path:
    """A small BERT pretrained on the words (sixty steps of a balanced 3-way task, plain torch), saved without
    its head with its WordPiece tokenizer, as a Hub checkpoint is: fine-tuning it starts from features, not noise."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    rows = _texts({"sport": 100, "money": 100, "food": 100}, seed=1)
    tokenizer = train_wordpiece_tokenizer([r["review"] for r in rows], vocab_size=120, cache=False)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id, num_labels=3,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    batch = tokenizer([r["review"] for r in rows], padding=True, return_tensors="pt")
    labels = torch.tensor([list(WORDS).index(r["label"]) for r in rows])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(60):
        optimizer.zero_grad()
        model(**batch, labels=labels).loss.backward()
        optimizer.step()
    folder = tmp_path_factory.mktemp("bert") / "bert"
    model.bert.save_pretrained(folder)  # the encoder alone: a checkpoint without a classification head
    tokenizer.save_pretrained(folder)
    return folder


def test_finetune_text_ends_on_the_annealing_criterion_within_its_budget(pretrained_bert, tmp_path, capsys):
    rows = _texts({"sport": 300, "money": 120, "food": 60}, seed=0)  # imbalanced: one rare class
    csv = tmp_path / "texts.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = tmp_path / "run"
    argv = [
        "finetune_text", "--model_name_or_path", pretrained_bert, "--dataset_name", csv, "--text_column", "review",
        "--max_length", 16, "--per_device_train_batch_size", 16, "--output_dir", out, "--report_to", "none",
        "--disable_tqdm", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    end = _schedule_end(out)
    assert end["finished"] and end["stop_reason"] in ("stage_patience", "max_stages")
    assert end["stage"] == 0 and max(end["epochs"]) < end["budget"]  # EAST's one stage, stopped before the budget
    # the run says so, where it stopped, and its card says the same
    (ended,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Training ended")]
    stage = end["stage"]
    assert ended.startswith(f"Training ended on the annealing criterion at epoch {round(max(end['epochs']), 1):g} of ")
    card = (out / "README.md").read_text()
    assert f", stage {stage}, T = " in ended and f"\n{ended}.\n" in card
    assert "LDAM re-weighted by effective numbers" in card  # the recipe's warm start and companion term
    assert any(epoch % 1 > 0.01 for epoch in end["epochs"])  # evaluations within epochs
    test_f1 = json.loads((out / "test_results.json").read_text())["test_fbeta"]
    assert test_f1 > 0.6  # learned: predicting the majority class alone scores 0.26 macro F1


def _image_folder(root: Path, counts: dict[str, int], size: int = 24, seed: int = 0) -> Path:
    """Class subfolders of PNGs: each class a brighter colour channel (the rare class: all three dim)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for k, (name, n) in enumerate(counts.items()):
        (root / name).mkdir(parents=True)
        for i in range(n):
            pixels = rng.integers(0, 90, (size, size, 3))
            if k < 3:  # a random lift: the faintest look like the rare class, so no model separates them all
                pixels[..., k] += rng.integers(0, 140)
            Image.fromarray(pixels.astype(np.uint8)).save(root / name / f"{i}.png")
    return root


def test_finetune_image_on_a_local_dir_timm_checkpoint_ends_on_the_annealing_criterion(tmp_path):
    import timm
    import torch
    from PIL import Image
    from timm.models import save_for_hf

    images = _image_folder(tmp_path / "images", {"red": 90, "green": 60, "blue": 40, "dark": 20})
    # "Pretrained": a few dozen steps on the images of another seed, then a 10-way head as a Hub checkpoint has.
    torch.manual_seed(0)
    model = timm.create_model("test_efficientnet", num_classes=4)
    folder = _image_folder(tmp_path / "pretraining", {"red": 40, "green": 40, "blue": 40, "dark": 40}, seed=1)
    files = sorted(folder.rglob("*.png"))
    x = torch.stack([torch.from_numpy(np.array(Image.open(p))).permute(2, 0, 1) for p in files])
    y = torch.tensor([["blue", "dark", "green", "red"].index(p.parent.name) for p in files])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(40):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model((x / 127.5 - 1).float()), y).backward()
        optimizer.step()
    model.reset_classifier(10)
    checkpoint = tmp_path / "ckpt"
    save_for_hf(model.eval(), str(checkpoint), safe_serialization=True)
    out = tmp_path / "run"
    argv = [
        "finetune_image", "--model_name_or_path", f"local-dir:{checkpoint}", "--dataset_name", images,
        "--image_size", 24, "--per_device_train_batch_size", 16, "--learning_rate", 3e-3, "--output_dir", out,
        "--report_to", "none", "--model_card", "false", "--disable_tqdm", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    end = _schedule_end(out)
    assert end["finished"] and end["stage"] == 0 and max(end["epochs"]) < end["budget"]
    assert json.loads((out / "test_results.json").read_text())["test_fbeta"] > 0.6  # majority alone: 0.18
    reloaded = timm.create_model(f"local-dir:{out}", pretrained=True)  # the run is a timm checkpoint too
    assert reloaded.num_classes == 4


def test_a_local_dir_model_that_is_not_a_folder_is_one_line_before_loading_data(capsys, tmp_path):
    from helpers import one_line_error

    missing = tmp_path / "no_such_checkpoint"
    err = one_line_error(
        capsys,
        main,
        [
            "finetune_image",
            "--model_name_or_path",
            f"local-dir:{missing}",
            "--dataset_name",
            tmp_path,
            "--output_dir",
            tmp_path / "run",
        ],
    )
    assert err == (
        "east-train: error: Expected local-dir:FOLDER to name a checkpoint folder, "
        f"got 'local-dir:{missing}': no such folder"
    )
