"""A saved LoRA adapter and what it is loaded with: its base checkpoint named by an absolute path and checked by the
weights the adapters apply to (another base, or the same folder edited, is refused in one line); the target modules
(a comma list, a convolutional network's defaults, a name that matches nothing); batch norm statistics saved with
the adapter; the large-models guide's pipeline snippet, run as written."""

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import one_line_error
from test_finetune import _texts, pretrained_bert  # noqa: F401  (a module fixture)
from test_lora import _peft_trainer

from east_hf.hf.models.lora import BASE_WEIGHTS_KEY, CLASSIFIER_CONFIG_NAME, AdapterBaseError, lora_model

pytest.importorskip("peft")
pytestmark = pytest.mark.usefixtures("one_thread")

GUIDE = Path(__file__).parents[1] / "docs" / "guide" / "large-models.md"


def _noised_copy(source: Path, target: Path, scale: float = 0.05) -> Path:
    """``source`` (a BERT encoder and its tokenizer) saved to ``target`` with every weight moved by noise: another
    model of the same architecture, as a different fine-tune of the same base is."""
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(1)
    model = AutoModel.from_pretrained(source)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def relative_adapter(pretrained_bert, tmp_path_factory, one_thread):  # noqa: F811
    """A LoRA adapter trained on a base named by a relative path (``models/bert`` from its folder ``home``), saved
    into ``run`` with its tokenizer: (home, run)."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("relative")
    home = root / "home"
    shutil.copytree(pretrained_bert, home / "models" / "bert")
    config = json.loads((home / "models" / "bert" / "config.json").read_text())  # labels as an encoder's: none
    config = {k: v for k, v in config.items() if k not in ("id2label", "label2id")}
    (home / "models" / "bert" / "config.json").write_text(json.dumps(config))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(home)
        trainer = _peft_trainer("models/bert", root / "out", max_steps=6)
        trainer.train()
        trainer.save_model(str(root / "run"))
    AutoTokenizer.from_pretrained(home / "models" / "bert").save_pretrained(root / "run")
    return home, root / "run"


def _predict(run: Path) -> list[str]:
    from east_hf.hf.predict.predictor import Predictor

    texts = [r["review"] for r in _texts({"sport": 10, "money": 10, "food": 10}, seed=7)]
    return Predictor(run).predict(texts)["predicted_label"].tolist()


def test_a_local_base_is_named_by_its_absolute_path_with_a_record_of_its_weights(relative_adapter):
    home, run = relative_adapter
    adapter = json.loads((run / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(home / "models" / "bert")  # not "models/bert"
    record = json.loads((run / CLASSIFIER_CONFIG_NAME).read_text())[BASE_WEIGHTS_KEY]
    assert record["checkpoint"] == str(home / "models" / "bert")
    query = "bert.encoder.layer.0.attention.self.query.weight"  # BERT's LoRA targets: query and value
    assert record["weights"][query][0] == [32, 32] and len(record["weights"]) == 4  # weight and bias, 2 layers
    from east_hf.hf.models import load_pretrained

    loaded = load_pretrained(str(run))
    assert BASE_WEIGHTS_KEY not in loaded.config.to_dict()  # a record checked, not set on the config


def test_a_base_at_the_same_relative_path_that_is_another_model_is_refused(relative_adapter, tmp_path, monkeypatch):
    home, run = relative_adapter
    ours = _predict(run)
    old_style = tmp_path / "run"  # the adapter as peft writes it from a relative path
    shutil.copytree(run, old_style)
    adapter = json.loads((old_style / "adapter_config.json").read_text())
    (old_style / "adapter_config.json").write_text(json.dumps({**adapter, "base_model_name_or_path": "models/bert"}))

    same = tmp_path / "same"  # the right base, copied elsewhere: loads, and predicts as before
    shutil.copytree(home / "models", same / "models")
    monkeypatch.chdir(same)
    assert _predict(old_style) == ours

    other = tmp_path / "other"  # another model at the same relative path
    _noised_copy(home / "models" / "bert", other / "models" / "bert")
    monkeypatch.chdir(other)
    with pytest.raises(AdapterBaseError) as refused:
        _predict(old_style)
    message = str(refused.value)
    assert "\n" not in message and str(home / "models" / "bert") in message and "models/bert" in message
    assert "other values in 4 of the 4 adapted weights" in message


def test_east_predict_refuses_a_base_edited_in_place_in_one_line(relative_adapter, tmp_path, capsys):
    from east_hf.scripts.east_predict import main as east_predict

    home, run = relative_adapter
    base = tmp_path / "base"
    shutil.copytree(home / "models" / "bert", base)
    moved = tmp_path / "run"
    shutil.copytree(run, moved)
    for name in ("adapter_config.json", CLASSIFIER_CONFIG_NAME):  # the adapter on the copy, by its absolute path
        path = moved / name
        path.write_text(path.read_text().replace(str(home / "models" / "bert"), str(base)))
    csv = tmp_path / "texts.csv"
    pd.DataFrame({"text": ["sport money food", "food food"]}).to_csv(csv, index=False)
    assert east_predict([str(moved), str(csv), "-o", str(tmp_path / "before.csv")]) == 0
    _noised_copy(base, tmp_path / "noised", scale=0.01)
    shutil.copy(tmp_path / "noised" / "model.safetensors", base / "model.safetensors")  # the base edited in place
    message = one_line_error(capsys, east_predict, [moved, csv, "-o", tmp_path / "after.csv"])
    assert str(base) in message and "adapted weights" in message and "adapter_config.json" in message
    assert not (tmp_path / "after.csv").exists()


def test_lora_target_modules_take_a_comma_list(pretrained_bert):  # noqa: F811
    from transformers import AutoModelForSequenceClassification

    from east_hf.hf.models.build import ModelArguments
    from east_hf.scripts.arguments import EASTArgumentParser

    argv = ["finetune_text", "--model_name_or_path", str(pretrained_bert), "--dataset_name", "x.csv", "--use_peft",
            "true", "--lora_target_modules", "query,value"]  # fmt: skip
    args = EASTArgumentParser().parse(argv).model
    assert args.lora_target_modules == ["query", "value"]  # as `--lora_target_modules query value`
    assert ModelArguments(lora_target_modules="query, value").lora_target_modules == ["query", "value"]  # YAML
    base = AutoModelForSequenceClassification.from_pretrained(pretrained_bert, num_labels=3)
    model = lora_model(base, 4, 8, 0.0, args.lora_target_modules, text=True)
    assert model.peft_config["default"].target_modules == {"query", "value"}


def test_a_target_module_that_matches_nothing_is_refused_naming_the_layers():
    from east_hf.hf.models import create_image_model

    with pytest.raises(ValueError) as refused:
        lora_model(create_image_model("test_efficientnet", 4), 4, 8, 0.0, ["query", "value"])
    message = str(refused.value)
    assert "\n" not in message and "'query', 'value': no module has that name" in message
    assert "conv_pw" in message and "No modules were targeted" not in message  # ours, not peft's text


@pytest.mark.parametrize("architecture", ["test_efficientnet", "tf_efficientnet_lite0"])
def test_a_timm_convolutional_network_gets_default_target_modules(architecture):
    from east_hf.hf.models import create_image_model

    torch.manual_seed(0)
    model = lora_model(create_image_model(architecture, 4), 4, 8, 0.0)
    config = model.peft_config["default"]
    assert {"conv_pw", "conv_pwl", "conv_head"} <= set(config.target_modules)
    assert "conv_dw" not in config.target_modules  # depthwise: grouped
    assert {"bn1", "bn2"} <= set(config.modules_to_save)  # batch norm statistics saved with the adapter
    if architecture == "tf_efficientnet_lite0":
        assert "conv_stem" not in config.target_modules  # timm's Conv2dSame pads in its forward
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("lora_A" in n for n in trainable) and any("classifier" in n for n in trainable)
    logits = model(pixel_values=torch.randn(2, 3, 64, 64)).logits
    assert logits.shape == (2, 4)


def test_the_adapter_keeps_the_batch_norm_statistics_training_moved(tmp_path):
    from transformers import AutoModelForImageClassification

    from east_hf.hf.models import create_image_model
    from east_hf.hf.models.lora import adapter_files, load_peft_run

    torch.manual_seed(0)
    create_image_model("test_efficientnet", 4).save_pretrained(tmp_path / "base")
    model = lora_model(AutoModelForImageClassification.from_pretrained(tmp_path / "base"), 4, 8, 0.0)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    for _ in range(5):  # train mode: batch norm's running statistics move with each batch
        optimizer.zero_grad()
        model(pixel_values=torch.randn(8, 3, 32, 32) * 2 + 1).logits.logsumexp(-1).mean().backward()
        optimizer.step()
    with adapter_files(model, tmp_path / "run"):
        model.save_pretrained(tmp_path / "run")
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        trained = model.eval()(pixel_values=x).logits
        loaded = load_peft_run(tmp_path / "run").eval()(pixel_values=x).logits
    assert torch.allclose(trained, loaded, atol=1e-5)


def test_the_guide_s_pipeline_snippet_runs_and_its_warning_holds(relative_adapter):
    """docs/guide/large-models.md: the LoRA snippet (its run folder and labels replaced by this run's) predicts as
    east-predict; ``pipeline(model=ADAPTER_FOLDER)`` does not load the adapter's classifier, as the guide says."""
    from transformers import pipeline

    _, run = relative_adapter
    guide = GUIDE.read_text()
    snippet = re.search(r"```python\n(# needs the Hub.*?)```", guide, flags=re.S).group(1)
    labels = json.loads((run / CLASSIFIER_CONFIG_NAME).read_text())["id2label"]
    id2label = {int(k): v for k, v in labels.items()}
    snippet = snippet.replace('"runs/reviews"', repr(str(run)))
    snippet = re.sub(r"num_labels=3", f"num_labels={len(id2label)}", snippet)
    snippet = re.sub(r"id2label=\{.*?\}", f"id2label={id2label!r}", snippet)
    snippet = re.sub(r"label2id=\{.*?\}", f"label2id={ {v: k for k, v in id2label.items()}!r}", snippet)
    namespace: dict = {}
    exec(snippet, namespace)
    texts = [r["review"] for r in _texts({"sport": 10, "money": 10, "food": 10}, seed=7)]
    assert [p["label"] for p in namespace["classifier"](texts)] == _predict(run)
    assert "does not work" in guide and "KeyError" in guide
    with pytest.raises(KeyError):  # what the guide says a folder name gets
        pipeline("text-classification", model=str(run))(texts[:2])
