"""LoRA (peft): east-train fine-tunes adapters of a small pretrained BERT and its head, ends on the annealing
criterion, keeps only the trainable tensors as a stage's best state, folds the tuned decision rule into the head it
saves, and the saved adapter loads with peft's Auto classes where east_hf cannot be imported, predicting what
east-predict predicts."""

import json
import random
import re
import sys

import pandas as pd
import pytest
import torch
from helpers import annealer, east_args, run_without_east_hf
from test_finetune import WORDS, _texts, pretrained_bert  # noqa: F401  (a module fixture)

from east_hf import EASTTrainer
from east_hf.hf.models.lora import CLASSIFIER_CONFIG_NAME, lora_model
from east_hf.scripts.east_train import main

pytest.importorskip("peft")
pytestmark = pytest.mark.usefixtures("one_thread")


def _noisy_texts(counts: dict[str, int], seed: int, flip: float = 0.15) -> list[dict]:
    """``_texts`` with a share ``flip`` of the labels drawn anew: a task the model cannot fit exactly, so the
    surrogate stops improving and the stages end on the validation set."""
    rng = random.Random(seed + 100)
    rows = _texts(counts, seed)
    for row in rows:
        if rng.random() < flip:
            row["label"] = rng.choice(list(WORDS))
    return rows


@pytest.fixture(scope="module")
def lora_run(pretrained_bert, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("lora")
    csv = folder / "texts.csv"
    pd.DataFrame(_noisy_texts({"sport": 300, "money": 120, "food": 60}, seed=0)).to_csv(csv, index=False)
    argv = [
        "finetune_text", "--model_name_or_path", pretrained_bert, "--dataset_name", csv, "--text_column", "review",
        "--max_length", 16, "--per_device_train_batch_size", 16, "--output_dir", folder / "run", "--report_to", "none",
        "--disable_tqdm", "true", "--use_peft", "true", "--lora_r", 8, "--learning_rate", 1e-3,
        "--tune_decision_rule", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    return folder / "run", csv


def test_a_lora_run_ends_on_the_annealing_criterion_and_saves_an_adapter(lora_run, pretrained_bert):  # noqa: F811
    run, _ = lora_run
    state = json.loads((run / "trainer_state.json").read_text())
    schedule = state["stateful_callbacks"]["TemperatureAnnealingCallback"]["attributes"]["schedule_state"]
    assert schedule["finished"] and schedule["stop_reason"] in ("stage_patience", "min_temperature", "max_stages")
    assert schedule["stage"] >= 0  # EAST ran after the warm start
    assert json.loads((run / "test_results.json").read_text())["test_fbeta"] > 0.6  # learned (majority-only: 0.26)
    adapter = json.loads((run / "adapter_config.json").read_text())
    assert adapter["peft_type"] == "LORA" and adapter["r"] == 8 and adapter["task_type"] == "SEQ_CLS"
    assert adapter["base_model_name_or_path"] == str(pretrained_bert)
    assert (run / "adapter_model.safetensors").is_file() and not (run / "config.json").exists()
    classifier = json.loads((run / CLASSIFIER_CONFIG_NAME).read_text())
    assert classifier["num_labels"] == 3 and classifier["id2label"] == {"0": "food", "1": "money", "2": "sport"}
    decision = json.loads((run / "decision_rule.json").read_text())
    assert classifier["east_decision_offsets"] == decision["offsets"]  # the folded rule, recorded for the bias
    card = (run / "README.md").read_text()
    assert "library_name: peft" in card and "AutoPeftModelForSequenceClassification" in card
    assert str(pretrained_bert) in card  # names the base checkpoint


def test_the_adapter_loads_with_peft_without_east_hf_and_predicts_as_east_predict(lora_run, tmp_path):
    from east_hf.hf.predict.predictor import Predictor

    run, csv = lora_run
    texts = pd.read_csv(csv)["review"].tolist()[:40]
    ours = Predictor(run).predict(texts)["predicted_label"].tolist()
    script = """
import json, re
from pathlib import Path
run, texts = Path(sys.argv[1]), json.loads(sys.argv[2])
card = (run / "README.md").read_text()  # the card's snippet, run as written
namespace = {}
exec(re.search(r"```python\\n(from peft import .*?)```", card, flags=re.S).group(1), namespace)
print(json.dumps([p["label"] for p in namespace["classifier"](texts)]))
"""
    proc = run_without_east_hf(script, tmp_path, run, json.dumps(texts))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MISSING" not in proc.stderr and "newly initialized" not in proc.stderr  # the base's head: not an alarm
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs == ours and len(set(ours)) > 1


def _peft_trainer(pretrained_bert, tmp_path, **overrides):  # noqa: F811
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(pretrained_bert)
    rows = _noisy_texts({"sport": 60, "money": 40, "food": 30}, seed=3)
    labels = {name: i for i, name in enumerate(WORDS)}

    def encoded(part):
        batch = tokenizer([r["review"] for r in part], truncation=True, max_length=16)
        return [{**{k: v[i] for k, v in batch.items()}, "labels": labels[r["label"]]} for i, r in enumerate(part)]

    torch.manual_seed(0)
    base = AutoModelForSequenceClassification.from_pretrained(pretrained_bert, num_labels=3)
    model = lora_model(base, r=4, alpha=8, dropout=0.0, text=True)
    settings = dict(
        east_annealing=True, eval_strategy="steps", eval_steps=3, save_strategy="no", max_steps=12,
        learning_rate=1e-3, east_warm_start="none",
    )  # fmt: skip
    args = east_args(tmp_path, **{**settings, **overrides})
    from transformers import DataCollatorWithPadding

    return EASTTrainer(
        model=model, args=args, train_dataset=encoded(rows[:90]), eval_dataset=encoded(rows[90:]),
        data_collator=DataCollatorWithPadding(tokenizer),
    )  # fmt: skip


def test_the_stage_best_state_is_the_trainable_tensors_only(pretrained_bert, tmp_path):  # noqa: F811
    trainer = _peft_trainer(pretrained_bert, tmp_path)
    kept = {}
    callback = annealer(trainer)
    original = callback.on_evaluate

    def spy(*args, **kwargs):  # the copy the callback holds after each evaluation
        result = original(*args, **kwargs)
        if callback._stage_weights is not None:
            kept.update(callback._stage_weights)
        return result

    callback.on_evaluate = spy
    trainer.train()
    model = trainer.model
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert kept and set(kept) - set(dict(model.named_buffers())) == trainable
    assert all("lora_" in n or "modules_to_save" in n for n in trainable)
    kept_numel = sum(kept[n].numel() for n in trainable)
    assert kept_numel < 0.2 * sum(p.numel() for p in model.parameters())  # measured: the base is not copied


def test_the_tuned_decision_rule_goes_into_the_trained_head(pretrained_bert, tmp_path):  # noqa: F811
    trainer = _peft_trainer(pretrained_bert, tmp_path, max_steps=3)
    trainer.train()
    wrapper = trainer.model.base_model.model.classifier
    trained, original = wrapper.modules_to_save["default"].bias, wrapper.original_module.bias
    before, frozen = trained.detach().clone(), original.detach().clone()
    rule = trainer.tune_decision_rule()
    assert torch.allclose(trained.detach(), before + torch.as_tensor(rule.offsets, dtype=before.dtype))
    assert torch.equal(original.detach(), frozen)  # the frozen copy is not the one saved


def test_use_peft_refuses_a_model_trained_from_scratch_in_one_line(capsys, tmp_path):
    from helpers import one_line_error

    csv = tmp_path / "texts.csv"
    pd.DataFrame(_texts({"sport": 20, "money": 20, "food": 20}, seed=0)).to_csv(csv, index=False)
    argv = ["--dataset_name", str(csv), "--text_column", "review", "--model", "text_tiny", "--use_peft", "true"]
    message = one_line_error(capsys, main, argv)
    assert "pretrained checkpoint" in message and "text_tiny" in message


def test_use_peft_without_peft_names_the_extra(capsys, monkeypatch, tmp_path, pretrained_bert):  # noqa: F811
    from helpers import one_line_error

    monkeypatch.setitem(sys.modules, "peft", None)  # import peft raises ImportError
    argv = ["--dataset_name", "x.csv", "--model", str(pretrained_bert), "--use_peft", "true"]
    message = one_line_error(capsys, main, argv)
    assert "pip install peft" in message and "'.[peft]'" in message  # east_hf is not on the registry


def test_an_image_lora_run_on_a_timm_checkpoint_loads_with_peft_auto_model(tmp_path):
    import numpy as np
    import timm
    from PIL import Image
    from test_finetune import _image_folder
    from timm.models import save_for_hf

    from east_hf.hf.predict.predictor import Predictor

    images = _image_folder(tmp_path / "images", {"red": 90, "green": 60, "blue": 40, "dark": 20})
    torch.manual_seed(0)  # "pretrained": a few dozen steps on other images, then a 10-way head as a Hub checkpoint has
    model = timm.create_model("test_efficientnet", num_classes=4)
    files = sorted(
        _image_folder(tmp_path / "pre", dict.fromkeys(["red", "green", "blue", "dark"], 40), seed=1).rglob("*.png")
    )
    x = torch.stack([torch.from_numpy(np.array(Image.open(p))).permute(2, 0, 1) for p in files]) / 127.5 - 1
    y = torch.tensor([["blue", "dark", "green", "red"].index(p.parent.name) for p in files])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(40):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x.float()), y).backward()
        optimizer.step()
    model.reset_classifier(10)
    save_for_hf(model.eval(), str(tmp_path / "ckpt"), safe_serialization=True)
    run = tmp_path / "run"
    argv = [
        "finetune_image", "--model_name_or_path", f"local-dir:{tmp_path / 'ckpt'}", "--dataset_name", images,
        "--image_size", 24, "--per_device_train_batch_size", 16, "--learning_rate", 3e-3, "--output_dir", run,
        "--report_to", "none", "--disable_tqdm", "true", "--use_peft", "true", "--lora_r", 4,
    ]  # fmt: skip  (the default target modules: a convolutional network's ungrouped convolutions)
    assert main([str(a) for a in argv]) == 0
    assert json.loads((run / "test_results.json").read_text())["test_fbeta"] > 0.6  # majority alone: 0.18
    adapter = json.loads((run / "adapter_config.json").read_text())
    assert {"conv_pw", "conv_pwl", "conv_head"} <= set(adapter["target_modules"])
    predictor = Predictor(run)
    test_files = sorted(images.rglob("*.png"))[::7]
    predicted = predictor.predict([str(p) for p in test_files])["predicted_label"].tolist()
    assert np.mean([p == f.parent.name for p, f in zip(predicted, test_files)]) > 0.6
    card = (run / "README.md").read_text()  # its snippet, run as written
    snippet = re.search(r"```python\n(from peft import AutoPeftModel\n.*?)```", card, flags=re.S).group(1)
    namespace: dict = {}
    exec(snippet, namespace)
    theirs = namespace["model"].eval()
    assert "Preprocessing (`preprocessor_config.json`" in card and "24x24 input, bicubic interpolation" in card
    images = [Image.open(p).convert("RGB") for p in test_files]  # the snippet's processor: the run's transform
    batch = torch.stack([predictor.transform(image) for image in images])
    assert torch.equal(namespace["processor"](images, return_tensors="pt")["pixel_values"], batch)
    with torch.no_grad():
        ours_logits, their_logits = predictor.model(pixel_values=batch).logits, theirs(pixel_values=batch).logits
    assert torch.allclose(ours_logits, their_logits, atol=1e-5)
    assert [theirs.config.id2label[int(i)] for i in their_logits.argmax(1)] == predicted


def test_a_lora_run_resumes_from_its_checkpoint(pretrained_bert, tmp_path):  # noqa: F811
    csv = tmp_path / "texts.csv"
    pd.DataFrame(_noisy_texts({"sport": 120, "money": 60, "food": 40}, seed=1)).to_csv(csv, index=False)
    argv = [
        "finetune_text", "--model_name_or_path", pretrained_bert, "--dataset_name", csv, "--text_column", "review",
        "--max_length", 16, "--per_device_train_batch_size", 16, "--output_dir", tmp_path / "run",
        "--report_to", "none", "--disable_tqdm", "true", "--use_peft", "true", "--lora_r", 4, "--model_card", "false",
        "--eval_steps", 4,
    ]  # fmt: skip
    assert main([str(a) for a in [*argv, "--max_steps", 8]]) == 0
    assert (tmp_path / "run" / "checkpoint-8" / "adapter_model.safetensors").is_file()
    assert main([str(a) for a in [*argv, "--max_steps", 16, "--resume_from_checkpoint", "true"]]) == 0
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    assert state["global_step"] == 16 and [h["step"] for h in state["log_history"] if "eval_loss" in h][:2] == [4, 8]


def test_loading_kwargs_keep_what_the_base_config_takes_and_the_labels_without_it():
    from types import SimpleNamespace

    from east_hf.hf.models.lora import loading_kwargs

    saved = {"num_labels": 2, "id2label": {"0": "a", "1": "b"}, "model_args": {"in_chans": 3}, "east_text_columns": []}
    timm_like = SimpleNamespace(model_args=None, id2label=None)  # a base config with model_args
    assert loading_kwargs(saved, timm_like) == {
        "num_labels": 2, "id2label": {0: "a", 1: "b"}, "model_args": {"in_chans": 3}, "ignore_mismatched_sizes": True,
    }  # fmt: skip
    assert loading_kwargs(saved, None) == {
        "num_labels": 2,
        "id2label": {0: "a", 1: "b"},
        "ignore_mismatched_sizes": True,
    }


def test_a_multi_label_lora_model_trains_tunes_saves_and_predicts(pretrained_bert, tmp_path):  # noqa: F811
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding

    from east_hf.hf.predict.predictor import Predictor

    tokenizer = AutoTokenizer.from_pretrained(pretrained_bert)
    rows = _texts({"sport": 60, "money": 40, "food": 30}, seed=4)
    names = list(WORDS)

    def encoded(part):  # each text's own topic, and "food" also wherever "the" appears
        batch = tokenizer([r["review"] for r in part], truncation=True, max_length=16)
        hot = [[float(n == r["label"] or (n == "food" and "the" in r["review"].split())) for n in names] for r in part]
        return [{**{k: v[i] for k, v in batch.items()}, "labels": hot[i]} for i in range(len(part))]

    torch.manual_seed(0)
    base = AutoModelForSequenceClassification.from_pretrained(
        pretrained_bert, num_labels=3, problem_type="multi_label_classification",
        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
    )  # fmt: skip
    args = east_args(
        tmp_path / "out", east_annealing=True, eval_strategy="steps", eval_steps=4, save_strategy="no", max_steps=24,
        learning_rate=3e-3, east_warm_start_epochs=1,
    )  # fmt: skip
    trainer = EASTTrainer(
        model=lora_model(base, r=4, alpha=8, dropout=0.0, text=True), args=args, train_dataset=encoded(rows[:100]),
        eval_dataset=encoded(rows[100:]), data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer,
    )  # fmt: skip
    assert trainer.multi_label
    trainer.train()
    rule = trainer.tune_decision_rule()
    assert len(rule.offsets) == 3
    run = tmp_path / "run"
    trainer.save_model(str(run))
    saved = json.loads((run / CLASSIFIER_CONFIG_NAME).read_text())
    assert saved["problem_type"] == "multi_label_classification" and saved["num_labels"] == 3
    predictor = Predictor(run)
    assert predictor.multi_label and predictor.label_names == names
    frame = predictor.predict([r["review"] for r in rows[100:]], probabilities=True)
    assert {"predicted_label", "probability_food"} <= set(frame.columns) and len(frame) == 30
