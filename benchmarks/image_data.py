"""A real long-tailed image task from the package registry, written as an image folder (nothing from the Hub).

elpv: 2,624 electroluminescence images of solar cells (300 x 300 grayscale, from 44 PV modules; Buerhop-Lutz et al.
2018, Deitsch et al. 2019), shipped inside the ``elpv-dataset`` wheel (data CC BY-NC-SA 4.0: benchmarks only, never
committed). Each cell's label is an expert's defect probability, four classes: functional 57.5 % (p = 0), defective
27.2 % (p = 1), maybe_defective 11.2 % (p = 1/3), likely_defective 4.0 % (p = 2/3). Written to ``OUT/elpv/<class>/``
as RGB PNGs downscaled to ``--size`` pixels (default 128: the fine-tune's 96 px inputs are cut from it on these CPUs),
which ``east-train --dataset_name OUT/elpv`` reads as an image folder.

    python benchmarks/image_data.py [OUT_DIR] [--size 128]     # installs elpv-dataset==1.0.0.post1 if missing
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

PACKAGE = "elpv-dataset==1.0.0.post1"
CLASSES = {0.0: "functional", 0.3333: "maybe_defective", 0.6667: "likely_defective", 1.0: "defective"}


def elpv(out: Path, size: int = 128) -> Path:
    if importlib.util.find_spec("elpv_dataset") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", PACKAGE], check=True)
        importlib.invalidate_caches()
    from PIL import Image

    root = Path(importlib.util.find_spec("elpv_dataset").submodule_search_locations[0]) / "data"
    folder = out / "elpv"
    counts = dict.fromkeys(CLASSES.values(), 0)
    for line in (root / "labels.csv").read_text().splitlines():
        parts = line.split()  # "images/cellNNNN.png  <defect probability>  <mono|poly>"
        if len(parts) != 3:
            continue
        name = CLASSES[round(float(parts[1]), 4)]
        target = folder / name / Path(parts[0]).name
        counts[name] += 1
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(root / parts[0]) as image:
            image.convert("RGB").resize((size, size), Image.Resampling.BICUBIC).save(target)
    total = sum(counts.values())
    print(f"{folder}: {total} images, " + ", ".join(f"{k} {v / total:.3f}" for k, v in counts.items()))
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="runs/data", help="folder the image folder is written under")
    parser.add_argument("--size", type=int, default=128, help="side of the written images in pixels")
    args = parser.parse_args(argv)
    elpv(Path(args.out), args.size)


if __name__ == "__main__":
    main()
