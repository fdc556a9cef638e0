"""What a model card shows a user: a text run's card carries validation texts as the Hub widget's examples and a
pipeline call that takes a text of any length (text pairs included), east-predict passes a text run's id column
through, a multi-label card gives its tuned thresholds as probabilities with each label's validation support, and a
darknet card shows timm's ``local-dir:`` loading."""

import math
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from huggingface_hub import ModelCard

from east_hf.scripts import east_predict
from east_hf.scripts.east_train import main

pytestmark = pytest.mark.usefixtures("one_thread")

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "text_tiny_demo.yaml"
WORDS = {
    "sport": "goal match team score coach league".split(),
    "money": "bank price stock market loan profit".split(),
    "food": "bread soup apple cheese salad pasta".split(),
}
MAX_LENGTH = 16
LONG = " ".join(["goal team bank soup"] * 200)  # 800 words: far past MAX_LENGTH tokens


def _text(rng: random.Random, label: str) -> str:
    return " ".join(rng.sample(WORDS[label], 3) + rng.sample(["the", "a", "of", "new"], 2))


def _train(csv: Path, out: Path, *flags) -> Path:
    argv = [
        RECIPE, "--dataset_name", csv, "--output_dir", out, "--max_length", MAX_LENGTH, "--num_train_epochs", 2,
        "--report_to", "none", "--save_total_limit", 1, *flags,
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    return out


@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> tuple[Path, Path]:
    rng = random.Random(0)
    rows = [(f"id-{i}", _text(rng, label), label) for i, label in enumerate(list(WORDS) * 30)]
    folder = tmp_path_factory.mktemp("texts")
    csv = folder / "texts.csv"
    pd.DataFrame(rows, columns=["id", "text", "label"]).to_csv(csv, index=False)
    return _train(csv, folder / "run", "--text_column", "text"), csv


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory) -> tuple[Path, Path]:
    rng = random.Random(1)
    rows = [(_text(rng, a), _text(rng, b), a) for a, b in zip(list(WORDS) * 30, list(WORDS)[1:] * 45)]
    folder = tmp_path_factory.mktemp("pairs")
    csv = folder / "pairs.csv"
    pd.DataFrame(rows, columns=["premise", "hypothesis", "label"]).to_csv(csv, index=False)
    return _train(csv, folder / "run", "--text_column", "premise", "--text_pair_column", "hypothesis"), csv


def _usage(card: str) -> str:
    """The card's pipeline snippet."""
    return next(block for block in re.findall(r"```python\n(.*?)```", card, flags=re.S) if "pipeline(" in block)


def test_a_text_run_card_has_a_widget_of_validation_texts_titled_by_class(text_run):
    run, csv = text_run
    widget = ModelCard.load(run / "README.md").data.widget
    texts = set(pd.read_csv(csv)["text"])
    assert len(widget) == 3 and all(example["text"] in texts for example in widget)
    assert sorted(example["example_title"] for example in widget) == sorted(WORDS)  # the first text of each class


def test_the_card_pipeline_takes_a_text_of_any_length(text_run):
    run, _ = text_run
    code = _usage((run / "README.md").read_text()).replace('"a text to classify"', repr(LONG))
    namespace: dict = {}
    exec(code, namespace)  # the card's own call, on a text of 800 words
    (result,) = namespace["classifier"]([LONG])
    assert result["label"] in WORDS
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(run).model_max_length == MAX_LENGTH  # the length the pipeline truncates at


def test_east_predict_passes_a_text_run_id_column_through(text_run, tmp_path):
    run, csv = text_run
    out = tmp_path / "pred.csv"
    assert east_predict.main([str(run), str(csv), "--id_column", "id", "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["id", "label", "predicted_label"]
    assert frame["id"].tolist() == pd.read_csv(csv)["id"].tolist()


def test_a_text_pair_card_shows_pairs_in_its_widget_and_usage(pair_run):
    run, csv = pair_run
    card = (run / "README.md").read_text()
    widget = ModelCard.load(run / "README.md").data.widget
    pairs = set(zip(pd.read_csv(csv)["premise"], pd.read_csv(csv)["hypothesis"]))
    assert widget and all(tuple(example["text"].split(" [SEP] ")) in pairs for example in widget)
    code = _usage(card)
    assert '{"text": "a first text", "text_pair": "a second text"}' in code
    namespace: dict = {}
    exec(code.replace('"a first text"', repr(LONG)).replace('"a second text"', repr(LONG)), namespace)
    (result,) = namespace["classifier"]([{"text": LONG, "text_pair": LONG}])
    assert result["label"] in WORDS


def test_a_multi_label_card_gives_thresholds_as_probabilities_with_validation_support(tmp_path):
    import datasets
    from helpers import east_args

    from east_hf import EASTTrainer
    from east_hf.hf.cards.model_card import write_model_card
    from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

    config = TabularMLPConfig(
        num_features=2, num_labels=3, hidden_sizes=[4], problem_type="multi_label_classification",
        id2label={0: "rare", 1: "mid", 2: "common"},
    )  # fmt: skip
    labels = np.array([[1, 0, 1], [0, 1, 1], [0, 0, 1], [0, 1, -100], [0, 1, 0]], dtype=np.float32)

    def rows(y):
        return datasets.Dataset.from_dict({"input_features": np.zeros((len(y), 2)).tolist(), "labels": y.tolist()})

    trainer = EASTTrainer(
        TabularMLPForClassification(config), east_args(tmp_path), train_dataset=rows(labels), eval_dataset=rows(labels)
    )
    offsets = {"rare": -2.375, "mid": 0.0, "common": 1.5}
    rule = {"target_key": "fbeta", "offsets": offsets, "validation_argmax": 0.5, "validation_tuned": 0.6}
    card = write_model_card(trainer, tmp_path, decision_rule=rule).read_text()
    assert "| label | threshold (probability) | validation support |" in card
    for name, support in (("rare", 1), ("mid", 3), ("common", 3)):  # -100 is no positive
        threshold = round(1 / (1 + math.exp(offsets[name])), 4)  # sigmoid(-offset): z + b > 0 <=> sigmoid(z) > it
        assert f"| {name} | {threshold} | {support} |" in card
    assert "| rare | 0.9149 | 1 |" in card and "-2.375" not in card  # a high bar: its logit must pass 2.375


def test_a_darknet_card_shows_timm_local_dir_loading(tmp_path):
    from helpers import TinyImages, east_args

    from east_hf import EASTTrainer
    from east_hf.hf.cards.model_card import write_model_card
    from east_hf.hf.models import create_image_model

    torch.manual_seed(0)
    model = create_image_model("darknet19_tiny", num_labels=3)
    trainer = EASTTrainer(model, east_args(tmp_path), train_dataset=TinyImages(8), eval_dataset=TinyImages(8))
    card = write_model_card(trainer, tmp_path / "run").read_text()
    assert "import east_hf.hf.models  # registers darknet19 with timm" in card
    assert f'timm.create_model("local-dir:{tmp_path / "run"}", pretrained=True)' in card
