"""east-train --streaming: training rows streamed from CSV files, counted in a first pass,
one line without validation."""

import json
import random

import pytest
import torch
from helpers import write_text

from east_hf.scripts.east_train import main

pytestmark = pytest.mark.usefixtures("one_thread")


def _rows(n: int, seed: int) -> str:
    """A 3-class table: two numbers and a colour, the class readable from the numbers; a few rows without a label."""
    rng = random.Random(seed)
    lines = ["x1,x2,colour,label"]
    for i in range(n):
        y = rng.choice(["bird", "cat", "dog", "dog"])
        x1 = {"bird": 0.0, "cat": 1.0, "dog": 2.0}[y] + rng.gauss(0, 0.3)
        lines.append(f"{x1:.3f},{rng.random():.3f},{rng.choice(['red', 'green'])},{'' if i % 50 == 7 else y}")
    return "\n".join(lines) + "\n"


def _args(out, **more):
    overrides = {
        "output_dir": out,
        "streaming": "true",
        "model_name_or_path": "tabular_mlp",
        "hidden_sizes": 16,
        "learning_rate": 0.01,
        "per_device_train_batch_size": 32,
        "num_train_epochs": 2,
        "east_warm_start_epochs": 1,
        "eval_strategy": "epoch",
        "disable_tqdm": "true",
        "use_cpu": "true",
        "model_card": "false",
        "report_to": "none",
        **more,
    }
    return [str(x) for k, v in overrides.items() if v is not None for x in (f"--{k}", v)]


def test_streaming_trains_on_a_csv_with_a_validation_csv(tmp_path, capsys):
    """A folder of train.csv and validation.csv streams its training rows: the first pass counts them (the epoch's
    length and the default loss's priors), the run trains the epochs asked for and saves a model that predicts."""
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", _rows(400, 0))
    write_text(data / "validation.csv", _rows(90, 1))
    out = tmp_path / "run"
    assert main(["--dataset_name", str(data), *_args(out)]) == 0
    stdout = capsys.readouterr().out
    # 400 rows, 8 without a label; 13 steps of 32 rows per epoch
    assert "392 train (streamed) / 88 validation / 0 test samples" in stdout, stdout
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["max_steps"] == 2 * 13 and state["global_step"] == 2 * 13
    assert json.loads((out / "train_results.json").read_text())["train_samples"] == 392
    record = json.loads((out / "run_settings.json").read_text())  # what east-compare plans with: the settings asked
    assert record["training"]["east_class_priors"] is None
    from east_hf.hf.models import load_pretrained

    model = load_pretrained(str(out)).eval()
    assert model.config.id2label == {0: "bird", 1: "cat", 2: "dog"}
    assert (out / "preprocessor_config.json").is_file()
    eval_results = json.loads((out / "eval_results.json").read_text())
    assert eval_results["eval_accuracy"] > 0.6  # the class is readable from x1: it learned


def test_streaming_counts_the_priors_of_the_default_loss_from_the_first_pass(tmp_path):
    """Without east_class_priors, the streamed run's logit adjustment comes from the first pass's counts, as the run in
    memory counts them from its training split."""
    from east_hf.hf.data import load_data
    from east_hf.hf.data.arguments import DataArguments

    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", _rows(300, 2))
    write_text(data / "validation.csv", _rows(60, 3))
    write_text(data / "test.csv", _rows(60, 7))  # in memory, no split is carved from train either
    streamed = load_data(DataArguments(dataset_name=str(data), streaming=True))
    whole = load_data(DataArguments(dataset_name=str(data)))
    assert streamed.label_names == whole.label_names == ["bird", "cat", "dog"]
    assert streamed.class_counts("train") == whole.class_counts("train")
    assert streamed.dropped == whole.dropped == {"empty label": 6 + 2 + 2}
    assert len(streamed.test) == len(whole.test) == 58
    streamed.start_stream()
    rows = list(streamed.train)
    assert len(rows) == len(streamed.train) == len(whole.train)
    assert sorted(int(r["labels"]) for r in rows) == sorted(
        int(whole.train[i]["labels"]) for i in range(len(whole.train))
    )
    features = torch.stack([r["input_features"] for r in rows])
    assert features.shape == (len(whole.train), len(whole.preprocessor.feature_names))


def test_streaming_without_a_validation_split_is_one_line_before_training(tmp_path, capsys):
    csv = write_text(tmp_path / "train.csv", _rows(100, 4))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["--dataset_name", str(csv), *_args(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(
        "east-train: error: Expected a validation split to stream beside 'train' (streamed rows are not split "
        "stratified), got splits ['train']"
    ), err
    assert not (out / "trainer_state.json").exists()


def test_streaming_refuses_what_needs_a_whole_split(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", _rows(60, 5))
    write_text(data / "validation.csv", _rows(30, 6))
    with pytest.raises(SystemExit):
        main(["--dataset_name", str(data), *_args(tmp_path / "run", resplit="true")])
    err = capsys.readouterr().err.strip()
    assert err == "east-train: error: Expected streaming without resplit (resplit pools every split), got resplit=True"


def test_streaming_trains_text_tiny_on_a_csv_of_texts(tmp_path, capsys):
    """Texts stream too: text_tiny's tokenizer is trained on the first pass's sample, every streamed row tokenized as
    it is read; a row with an empty text is left out and counted."""
    rng = random.Random(8)
    words = {"pos": ["good", "great", "fine"], "neg": ["bad", "awful", "poor"]}

    def texts(n):
        rows = ["text,label"]
        for i in range(n):
            y = rng.choice(["pos", "neg"])
            rows.append(f"{'' if i == 3 else ' '.join(rng.choices(words[y] + ['film', 'plot'], k=5))},{y}")
        return "\n".join(rows) + "\n"

    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", texts(120))
    write_text(data / "validation.csv", texts(40))
    out = tmp_path / "run"
    more = {"model_name_or_path": "text_tiny", "max_length": 16, "hidden_sizes": None}
    assert main(["--dataset_name", str(data), *_args(out, **more)]) == 0
    stdout = capsys.readouterr().out
    assert "119 train (streamed) / 39 validation / 0 test samples" in stdout, stdout
    assert "dropped 2 rows with an empty text" in stdout
    assert json.loads((out / "trainer_state.json").read_text())["max_steps"] == 2 * 4
    assert (out / "tokenizer.json").is_file()


def test_a_class_written_none_streams_as_it_loads_in_memory(tmp_path):
    """Label cells are read literally in a stream too: a class "None" is a class, not an empty cell."""
    from east_hf.hf.data import load_data
    from east_hf.hf.data.arguments import DataArguments

    data = tmp_path / "data"
    data.mkdir()
    for split, n in (("train", 60), ("validation", 20)):
        rows = "".join(f"{i / n:.3f},{['None', 'cat', 'NA'][i % 3]}\n" for i in range(n))
        write_text(data / f"{split}.csv", "x,label\n" + rows)
    streamed = load_data(DataArguments(dataset_name=str(data), streaming=True))
    assert streamed.label_names == ["NA", "None", "cat"]
    assert streamed.class_counts("train") == [20, 20, 20] and not streamed.dropped
