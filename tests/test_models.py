"""east_hf.hf.models: the timm Darknet-19, its TimmWrapper round trip, the tabular MLP and the fine-tuning helpers."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import timm
import torch
from helpers import run_without_east_hf
from transformers import (
    AutoConfig,
    AutoImageProcessor,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    TimmWrapperConfig,
    TimmWrapperForImageClassification,
    TimmWrapperModel,
    ViTConfig,
    ViTForImageClassification,
)

from east_hf.hf.models import (
    Darknet19,
    DarknetConfig,
    DarknetForImageClassification,
    TabularMLPConfig,
    TabularMLPForClassification,
    create_image_model,
    image_classifier_from_pretrained,
    label_maps,
    load_pretrained,
)
from east_hf.hf.models.build import attach_data_config

PUBLISHED_DARKNET19_PARAMS = 20.8e6  # YOLO9000 / darknet's reference Darknet-19 classifier, 1000 classes
DARKNET19_PARAMS = 20_842_376  # ours with 1000 classes; saved runs' weights depend on it staying the same


def _n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --- timm Darknet-19 ---------------------------------------------------------------------------------------------


def test_darknet19_is_registered_with_cfgs():
    assert {"darknet19", "darknet19_tiny"} <= set(timm.list_models("darknet19*"))
    assert timm.models.get_pretrained_cfg("darknet19").input_size == (3, 224, 224)
    cifar = timm.models.get_pretrained_cfg("darknet19.cifar")
    assert cifar.input_size == (3, 32, 32) and cifar.num_classes == 10
    assert cifar.mean == pytest.approx((0.4914, 0.4822, 0.4465))
    assert not cifar.has_weights and not cifar.url and not cifar.hf_hub_id
    assert timm.create_model("darknet19_tiny.cifar").num_classes == 10


def test_darknet19_parameter_count_matches_the_paper():
    model = timm.create_model("darknet19", num_classes=1000)
    n = _n_params(model)
    print(f"darknet19 parameters (1000 classes): {n:,} ({n / PUBLISHED_DARKNET19_PARAMS:.4f} x 20.8M)")
    assert abs(n - PUBLISHED_DARKNET19_PARAMS) / PUBLISHED_DARKNET19_PARAMS < 0.05
    assert n == DARKNET19_PARAMS and _n_params(timm.create_model("darknet19_tiny")) == 227_820
    assert isinstance(model, Darknet19) and model.num_features == 1024
    # 19 convs (18 in the backbone) + the 1x1 classifier conv, BatchNorm + LeakyReLU(0.1) after each backbone conv
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 19 and convs[-1] is model.get_classifier() and convs[-1].kernel_size == (1, 1)
    blocks = [m for m in model.modules() if isinstance(m, timm.layers.ConvNormAct)]  # timm's conv-bn-act
    assert len(blocks) == 18 and all(isinstance(b.bn, torch.nn.BatchNorm2d) for b in blocks)
    slopes = [m.negative_slope for m in model.modules() if isinstance(m, torch.nn.LeakyReLU)]
    assert slopes == [0.1] * 18
    # the state-dict keys saved runs carry: stages.<stage>.<layer>.conv / .bn, then the head
    keys = list(model.state_dict())
    assert keys[:6] == [
        "stages.0.0.conv.weight",
        "stages.0.0.bn.weight",
        "stages.0.0.bn.bias",
        "stages.0.0.bn.running_mean",
        "stages.0.0.bn.running_var",
        "stages.0.0.bn.num_batches_tracked",
    ]
    assert keys[-2:] == ["head.weight", "head.bias"] and len(keys) == 18 * 6 + 2


def test_darknet19_cifar_forward():
    model = timm.create_model("darknet19.cifar").eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()


@pytest.mark.parametrize("size", [32, 64])
def test_darknet19_tiny_shapes(size):
    model = timm.create_model("darknet19_tiny", num_classes=7)
    x = torch.randn(3, 3, size, size)
    features = model.forward_features(x)
    assert features.shape == (3, model.num_features, size // 32, size // 32)
    logits = model(x)
    assert logits.shape == (3, 7) and torch.isfinite(logits).all()
    assert model.forward_head(features, pre_logits=True).shape == (3, model.num_features)


def test_darknet19_classifier_is_conv1x1_then_gap():
    model = timm.create_model("darknet19_tiny", num_classes=4).eval()
    features = model.forward_features(torch.randn(2, 3, 64, 64))  # (2, 128, 2, 2)
    head = model.get_classifier()
    by_cell = torch.einsum("bchw,kc->bkhw", features, head.weight[:, :, 0, 0]) + head.bias[:, None, None]
    torch.testing.assert_close(model.forward_head(features), by_cell.mean(dim=(2, 3)))


def test_darknet19_headless_and_reset_classifier():
    model = timm.create_model("darknet19_tiny", num_classes=0)
    x = torch.randn(2, 3, 32, 32)
    assert model(x).shape == (2, model.num_features)
    assert isinstance(model.get_classifier(), torch.nn.Identity)
    model.reset_classifier(5)
    assert model.num_classes == 5 and model(x).shape == (2, 5)
    model.reset_classifier(3, global_pool="")
    assert model(torch.randn(2, 3, 64, 64)).shape == (2, 3, 2, 2)  # no pooling: a score map


def test_darknet19_features_only():
    model = timm.create_model("darknet19_tiny", features_only=True)
    outs = model(torch.randn(1, 3, 64, 64))
    assert [o.shape[1] for o in outs] == model.feature_info.channels() == [8, 16, 32, 64, 128]
    assert [64 // o.shape[-1] for o in outs] == model.feature_info.reduction() == [2, 4, 8, 16, 32]


def test_darknet19_rejects_bad_inputs():
    model = timm.create_model("darknet19_tiny")
    with pytest.raises(ValueError, match=r"Expected input with 3 channels \(B, 3, H, W\), got shape \(2, 1, 32, 32\)"):
        model(torch.randn(2, 1, 32, 32))
    with pytest.raises(ValueError, match="Expected input with 3 channels"):
        model(torch.randn(3, 32, 32))
    with pytest.raises(ValueError, match="at least 32"):
        model(torch.randn(2, 3, 16, 16))


# --- through transformers ----------------------------------------------------------------------------------------


def save_with_batch(model, path):
    """``model.save_pretrained(path)`` and ``path / "batch.pt"``: a batch ``x``, its logits and the state dict."""
    model.eval().save_pretrained(path)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        logits = model(pixel_values=x).logits
    torch.save({"x": x, "logits": logits, "state": model.state_dict()}, path / "batch.pt")
    return path, x, logits


@pytest.fixture(scope="module")
def saved_darknet19(tmp_path_factory):
    """darknet19 in a stock TimmWrapper, saved with save_pretrained, with a batch and its logits."""
    torch.manual_seed(0)
    model = TimmWrapperForImageClassification(TimmWrapperConfig(architecture="darknet19", num_labels=10))
    return save_with_batch(model, tmp_path_factory.mktemp("darknet19"))


def assert_same_model(reloaded, path):
    """Reloaded weights equal the saved ones bit for bit; logits agree up to kernel choice (the randomly initialised
    darknet19's logits are ~1e-8, and oneDNN may pick another algorithm for the same weights, e.g. with 1 thread)."""
    with torch.no_grad():
        logits = reloaded(pixel_values=torch.load(path / "batch.pt")["x"]).logits
    assert_same_outputs(reloaded.state_dict(), logits, path)


def assert_same_outputs(state, logits, path):
    """``state`` and ``logits`` (of ``batch.pt``'s ``x``) equal those saved in ``path / "batch.pt"``."""
    saved = torch.load(path / "batch.pt")
    assert state.keys() == saved["state"].keys()
    assert all(torch.equal(state[k], v) for k, v in saved["state"].items())
    scale = saved["logits"].abs().max().item()
    torch.testing.assert_close(logits, saved["logits"], rtol=1e-4, atol=1e-4 * scale)


def test_timm_wrapper_save_and_reload(saved_darknet19):
    path, x, logits = saved_darknet19
    assert (path / "model.safetensors").exists()
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()
    reloaded = AutoModelForImageClassification.from_pretrained(path).eval()
    assert isinstance(reloaded, TimmWrapperForImageClassification) and reloaded.config.architecture == "darknet19"
    assert_same_model(reloaded, path)
    assert isinstance(load_pretrained(path), TimmWrapperForImageClassification)


def test_image_classifier_from_pretrained_timm_checkpoint_keeps_new_labels(saved_darknet19, tmp_path):
    model = image_classifier_from_pretrained(str(saved_darknet19[0]), num_labels=3, id2label=["a", "b", "c"])
    assert model.timm_model.get_classifier().out_channels == 3
    # a stock TimmWrapper's darknet19 folder: the fine-tune is a DarknetForImageClassification, saved with its code
    assert isinstance(model, DarknetForImageClassification) and model.config.model_type == "east_darknet"
    model.save_pretrained(tmp_path)
    assert (tmp_path / "darknet_hf.py").is_file()
    reloaded = load_pretrained(tmp_path)
    assert reloaded.config.id2label == {0: "a", 1: "b", 2: "c"}
    assert json.loads((tmp_path / "config.json").read_text())["label_names"] == ["a", "b", "c"]
    torch.testing.assert_close(reloaded.timm_model.head.weight, model.timm_model.head.weight, rtol=0, atol=0)


def test_timm_wrapper_reload_in_fresh_process(saved_darknet19):
    path = saved_darknet19[0]
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import torch
        from transformers import AutoModelForImageClassification
        try:  # east_hf not imported: darknet19 is not in timm's registry
            AutoModelForImageClassification.from_pretrained({str(path)!r})
        except ImportError as err:
            assert "not supported in your version of timm" in str(err), err
        else:
            raise AssertionError("darknet19 loaded without east_hf")
        import east_hf.hf.models  # registers darknet19 with timm (a bare `import east_hf` does not)
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_models import assert_same_model
        assert_same_model(AutoModelForImageClassification.from_pretrained({str(path)!r}).eval(), Path({str(path)!r}))
        print("RELOADED")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "RELOADED" in result.stdout


@pytest.fixture(scope="module")
def saved_darknet19_run(tmp_path_factory):
    """darknet19 as east-train builds and saves it (create_image_model, the training data config attached), with a
    batch and its logits in this process."""
    torch.manual_seed(0)
    model = create_image_model("darknet19", num_labels=3, id2label=["cat", "dog", "frog"])
    attach_data_config(model, timm.data.resolve_data_config(model=timm.create_model("darknet19.cifar")))
    return save_with_batch(model, tmp_path_factory.mktemp("darknet19_run"))[0]


def test_saved_darknet19_run_carries_its_code(saved_darknet19_run):
    path = saved_darknet19_run
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "east_darknet" and config["architecture"] == "darknet19"
    assert config["auto_map"] == {
        "AutoConfig": "darknet_hf.DarknetConfig",
        "AutoModelForImageClassification": "darknet_hf.DarknetForImageClassification",
    }
    assert (path / "darknet_hf.py").is_file() and (path / "darknet.py").is_file()  # darknet.py: its relative import
    reloaded = AutoModelForImageClassification.from_pretrained(path).eval()  # east_hf imported: its own classes
    assert isinstance(reloaded, DarknetForImageClassification)  # a TimmWrapperForImageClassification subclass
    assert reloaded.config.id2label == {0: "cat", 1: "dog", 2: "frog"}
    assert_same_model(reloaded, path)
    assert isinstance(load_pretrained(path), DarknetForImageClassification)
    processor = AutoImageProcessor.from_pretrained(path)
    assert processor.data_config["input_size"] == (3, 32, 32) and processor.data_config["mean"] == pytest.approx(
        (0.4914, 0.4822, 0.4465)
    )
    local = timm.create_model(f"local-dir:{path}", pretrained=True)  # timm's own loader reads the same folder
    assert isinstance(local, Darknet19) and local.num_classes == 3


DARKNET_WITHOUT_EAST_HF = """
import timm
import torch
from transformers import AutoImageProcessor, AutoModelForImageClassification
run, out = sys.argv[1], sys.argv[2]
try:  # timm alone: it cannot discover an architecture it does not ship
    timm.create_model("local-dir:" + run, pretrained=True)
except RuntimeError as error:
    timm_refusal = str(error)
else:
    raise AssertionError("timm loaded darknet19 without east_hf")
try:  # no trust_remote_code: transformers refuses to run the folder's code, and says how to allow it
    AutoModelForImageClassification.from_pretrained(run)
except Exception as error:
    refusal = f"{type(error).__name__}: {error}"
else:
    raise AssertionError("darknet19 loaded without its code")
model = AutoModelForImageClassification.from_pretrained(run, trust_remote_code=True).eval()
processor = AutoImageProcessor.from_pretrained(run)
with torch.no_grad():
    logits = model(pixel_values=torch.load(run + "/batch.pt")["x"]).logits
assert not [name for name in sys.modules if name.split(".")[0] == "east_hf"], "east_hf was imported"
torch.save(
    {"refusal": refusal, "timm_refusal": timm_refusal, "model": type(model).__name__,
     "timm_model": type(model.timm_model).__name__,
     "id2label": model.config.id2label, "state": model.state_dict(), "logits": logits,
     "data_config": processor.data_config},
    out,
)
"""


def test_saved_darknet19_run_loads_without_east_hf(saved_darknet19_run, tmp_path):
    """Where east_hf is not installed, the run's own code loads it with trust_remote_code=True (the same weights,
    the same logits, the same preprocessing), and without it transformers asks for trust_remote_code, never for a
    newer timm. timm's own local-dir loader needs east_hf (``import east_hf.hf.models``)."""
    path, out = saved_darknet19_run, tmp_path / "reloaded.pt"
    result = run_without_east_hf(DARKNET_WITHOUT_EAST_HF, tmp_path, path, out)
    assert result.returncode == 0, result.stderr[-3000:]
    reloaded = torch.load(out)
    assert reloaded["model"] == "DarknetForImageClassification" and reloaded["timm_model"] == "Darknet19"
    assert reloaded["id2label"] == {0: "cat", 1: "dog", 2: "frog"}
    assert_same_outputs(reloaded["state"], reloaded["logits"], path)
    assert reloaded["data_config"] == AutoImageProcessor.from_pretrained(path).data_config
    assert "trust_remote_code=True" in reloaded["refusal"]
    assert "timm" not in reloaded["refusal"], reloaded["refusal"]
    assert reloaded["timm_refusal"] == "Unknown model (darknet19)"


def test_darknet_config_takes_only_darknet_architectures():
    assert isinstance(create_image_model("resnet18", num_labels=2).config, TimmWrapperConfig)  # a stock timm name
    assert not isinstance(create_image_model("resnet18", num_labels=2).config, DarknetConfig)
    assert DarknetConfig(architecture="darknet19_tiny.cifar").architecture == "darknet19_tiny.cifar"
    with pytest.raises(ValueError, match=r"Expected a Darknet-19 architecture .*, got 'resnet18'"):
        DarknetConfig(architecture="resnet18")


def test_timm_wrapper_headless_model_and_hidden_states():
    config = TimmWrapperConfig(architecture="darknet19_tiny")
    out = TimmWrapperModel(config)(pixel_values=torch.randn(2, 3, 64, 64), output_hidden_states=True)
    assert out.pooler_output.shape == (2, 128) and out.last_hidden_state.shape == (2, 128, 2, 2)
    assert [h.shape[1] for h in out.hidden_states] == [4, 8, 16, 32, 64, 128]


def test_create_image_model_for_timm_names():
    model = create_image_model("darknet19_tiny", num_labels=3, id2label=["a", "b", "c"])
    assert isinstance(model, TimmWrapperForImageClassification)
    assert model.config.id2label == {0: "a", 1: "b", 2: "c"} and model.config.label2id == {"a": 0, "b": 1, "c": 2}
    out = model(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([0, 2]))
    assert out.logits.shape == (2, 3) and torch.isfinite(out.loss)
    resnet = create_image_model("resnet18", num_labels=4)  # a stock timm name, random init, nothing downloaded
    assert resnet(pixel_values=torch.randn(2, 3, 32, 32)).logits.shape == (2, 4)


def test_image_classifier_from_pretrained_gets_a_new_head(tmp_path):
    vit_config = ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=5,
    )
    ViTForImageClassification(vit_config).save_pretrained(tmp_path)
    model = image_classifier_from_pretrained(str(tmp_path), num_labels=3, id2label={0: "cat", 1: "dog", 2: "fox"})
    assert isinstance(model, ViTForImageClassification)
    assert model.config.num_labels == 3 and model.config.label2id == {"cat": 0, "dog": 1, "fox": 2}
    assert model.classifier.out_features == 3
    logits = model(pixel_values=torch.randn(2, 3, 32, 32)).logits
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()


def test_label_maps_rejects_inconsistent_ids():
    assert label_maps(2) == ({0: "LABEL_0", 1: "LABEL_1"}, {"LABEL_0": 0, "LABEL_1": 1})
    with pytest.raises(ValueError, match=r"Expected id2label for the ids 0..2, got ids \[0, 1\]"):
        label_maps(3, ["a", "b"])


# --- tabular MLP -------------------------------------------------------------------------------------------------


def _tabular(**kwargs) -> TabularMLPForClassification:
    config = TabularMLPConfig(**{"num_features": 6, "hidden_sizes": (16, 8), "num_labels": 3, **kwargs})
    return TabularMLPForClassification(config)


def test_tabular_forward_and_loss():
    model = _tabular().eval()
    x, labels = torch.randn(5, 6), torch.tensor([0, 1, 2, 1, 0])
    out = model(input_features=x, labels=labels)
    assert out.logits.shape == (5, 3) and torch.isfinite(out.logits).all()
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
    assert model(input_features=x).loss is None
    assert model(input_features=x.double()).logits.dtype == torch.float32  # float64 columns are cast
    # ReLU + dropout on each hidden layer, a plain Linear last
    kinds = [type(m).__name__ for m in model.mlp] + [type(model.classifier).__name__]
    assert kinds == ["Linear", "ReLU", "Dropout", "Linear", "ReLU", "Dropout", "Linear"]


def test_tabular_defaults():
    config = TabularMLPConfig(num_features=4, num_labels=2)
    assert config.hidden_sizes == [512, 256, 128] and config.dropout == 0.25
    assert config.label2id == {"LABEL_0": 0, "LABEL_1": 1}


def test_tabular_save_reload_and_auto_classes(tmp_path):
    model = _tabular(id2label={0: "a", 1: "b", 2: "c"}).eval()
    x = torch.randn(4, 6)
    logits = model(input_features=x).logits
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    config = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(config, TabularMLPConfig) and config.model_type == "east_tabular_mlp"
    assert config.hidden_sizes == [16, 8] and config.id2label == {0: "a", 1: "b", 2: "c"}
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert isinstance(reloaded, TabularMLPForClassification)
    torch.testing.assert_close(reloaded(input_features=x).logits, logits, rtol=0, atol=0)
    assert isinstance(load_pretrained(tmp_path), TabularMLPForClassification)
    assert isinstance(AutoModelForSequenceClassification.from_config(config), TabularMLPForClassification)


def test_tabular_rejects_bad_inputs_and_configs():
    model = _tabular()
    with pytest.raises(ValueError, match=r"Expected input_features of shape \(B, 6\).*got 5 \(shape \(4, 5\)\)"):
        model(input_features=torch.randn(4, 5))
    with pytest.raises(ValueError, match="Expected input_features of shape"):
        model(input_features=torch.randn(6))
    with pytest.raises(ValueError, match="num_features"):
        TabularMLPForClassification(TabularMLPConfig(num_labels=2))
    with pytest.raises(ValueError, match=r"Expected dropout in \[0, 1\), got 1.5"):
        TabularMLPConfig(num_features=3, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_sizes"):
        TabularMLPConfig(num_features=3, hidden_sizes=(8, 0))


def test_saved_tabular_model_loads_without_east_hf(tmp_path):
    """save_pretrained writes the modeling file and an auto_map: trust_remote_code loads it with east_hf blocked."""
    torch.manual_seed(0)
    config = TabularMLPConfig(num_features=5, hidden_sizes=[8], num_labels=3)
    model = TabularMLPForClassification(config).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "tabular.py").is_file()
    assert json.loads((tmp_path / "config.json").read_text())["auto_map"]["AutoModelForSequenceClassification"]
    x = torch.randn(4, 5)
    with torch.no_grad():
        expected = model(input_features=x).logits
    torch.save(x, tmp_path / "x.pt")
    script = f"""
import torch
from transformers import AutoModelForSequenceClassification
model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
assert "east_hf" not in sys.modules
with torch.no_grad():
    logits = model(input_features=torch.load({str(tmp_path / "x.pt")!r})).logits
torch.save(logits, {str(tmp_path / "out.pt")!r})
"""
    result = run_without_east_hf(script, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert torch.equal(torch.load(tmp_path / "out.pt"), expected)
