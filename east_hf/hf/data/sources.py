"""Where the rows come from: a Hub id, a local folder or file, or a set bundled with scikit-learn (offline)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

__all__ = [
    "FILE_BUILDERS",
    "RARE_POSITIVE",
    "SKLEARN_SETS",
    "SYNTHETIC_BINARY",
    "DataError",
    "load_raw",
    "quiet_datasets",
]

# digits_tabular: the same 1,797 digits as 64 pixel-intensity features (a tabular task of a useful size).
SKLEARN_SETS = ("digits", "digits_tabular", "breast_cancer", "wine", "iris", "make_classification", "rare_positive")
# sklearn:make_classification, always the same rows: an imbalanced binary task with overlapping classes.
SYNTHETIC_BINARY = dict(
    n_samples=20_000,
    n_features=20,
    n_informative=8,
    n_redundant=4,
    n_clusters_per_class=2,
    weights=[0.9],
    flip_y=0.02,
    class_sep=1.0,
    random_state=0,
)
# sklearn:rare_positive, always the same rows: 7 % positives that are hard to separate (3 informative features, 5 %
# flipped labels). Argmax of a cross-entropy MLP finds few of them (F1 ~0.3), a tuned threshold ~0.4: a task where
# the choice of loss and decision rule matters (the demo).
RARE_POSITIVE = dict(
    SYNTHETIC_BINARY, n_informative=3, n_redundant=2, weights=[0.95], flip_y=0.05, class_sep=0.6, random_state=1
)
SYNTHETIC_SETS = {"make_classification": SYNTHETIC_BINARY, "rare_positive": RARE_POSITIVE}
FILE_BUILDERS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".json": "json", ".jsonl": "json"}


class DataError(ValueError):
    """A data input the user must fix (a path, an id, a column); the message is one self-contained line."""


def _sklearn(name: str):
    import datasets
    from PIL import Image
    from sklearn import datasets as skd

    if name not in SKLEARN_SETS:
        raise DataError(
            f"unknown bundled data set 'sklearn:{name}'; expected one of "
            + ", ".join(f"sklearn:{n}" for n in SKLEARN_SETS)
        )
    if name in SYNTHETIC_SETS:
        x, y = skd.make_classification(**SYNTHETIC_SETS[name])
        columns = {f"x{i}": x[:, i].astype(np.float32) for i in range(x.shape[1])}
        label = datasets.ClassLabel(names=["negative", "positive"])
        features = datasets.Features({**{c: datasets.Value("float32") for c in columns}, "label": label})
        return datasets.DatasetDict(
            {"train": datasets.Dataset.from_dict({**columns, "label": y.tolist()}, features=features)}
        )
    bunch = getattr(skd, f"load_{name.removesuffix('_tabular')}")()
    names = [str(n) for n in bunch.target_names]
    label = datasets.ClassLabel(names=names)
    if name == "digits":  # 8x8 grey levels 0..16 -> 8-bit greyscale PIL images, so they take the image path
        images = [Image.fromarray((img * (255 / 16)).round().astype(np.uint8)) for img in bunch.images]
        features = datasets.Features({"image": datasets.Image(), "label": label})
        ds = datasets.Dataset.from_dict({"image": images, "label": bunch.target.tolist()}, features=features)
    else:
        columns = {
            str(c).replace(" ", "_"): bunch.data[:, i].astype(np.float32) for i, c in enumerate(bunch.feature_names)
        }  # digits_tabular: pixel_0_0 .. pixel_7_7
        features = datasets.Features({**{c: datasets.Value("float32") for c in columns}, "label": label})
        ds = datasets.Dataset.from_dict({**columns, "label": bunch.target.tolist()}, features=features)
    return datasets.DatasetDict({"train": ds})


@contextlib.contextmanager
def quiet_datasets(quiet: bool = True):
    """Without ``datasets``' progress bars: they help for a Hub download, not for in-memory relabelling."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    if quiet:
        disable_progress_bars()
    try:
        yield
    finally:
        if quiet and not was_disabled:
            enable_progress_bars()


def _looks_like_path(name: str) -> bool:
    return (
        name.startswith(("/", "./", "../", "~")) or Path(name).suffix.lower() in FILE_BUILDERS or os.path.exists(name)
    )


def load_raw(dataset_name: str, dataset_config: str | None = None, revision: str | None = None):
    """A ``datasets.DatasetDict`` from a Hub id, a local folder or file, or ``sklearn:<name>``; ``DataError`` if not."""
    import datasets

    if dataset_name.startswith("sklearn:"):
        return _sklearn(dataset_name.split(":", 1)[1])
    if _looks_like_path(dataset_name):
        path = Path(dataset_name).expanduser()
        if not path.exists():
            raise DataError(f"dataset path {dataset_name!r} does not exist")
        if path.is_file():
            builder = FILE_BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise DataError(f"dataset file {dataset_name!r}: expected one of {sorted(FILE_BUILDERS)}")
            kwargs = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
            loader = lambda: datasets.load_dataset(builder, data_files=str(path), **kwargs)  # noqa: E731
        else:
            loader = lambda: datasets.load_dataset(str(path), dataset_config)  # noqa: E731
    else:
        loader = lambda: datasets.load_dataset(dataset_name, dataset_config, revision=revision)  # noqa: E731
    try:
        with quiet_datasets(
            _looks_like_path(dataset_name)
        ):  # local files load in a blink; Hub downloads keep their bars
            dsd = loader()
    except Exception as e:  # noqa: BLE001 - datasets raises many kinds; the user needs the one line either way
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false") or os.environ.get(
            "HF_DATASETS_OFFLINE", "0"
        ) not in ("0", "", "false")
        if not _looks_like_path(dataset_name) and (offline or isinstance(e, ConnectionError)):
            raise DataError(
                f"dataset {dataset_name!r} is not a local path and could not be reached on the Hub"
                + (" (HF_HUB_OFFLINE is set: only data sets already in the cache load)" if offline else f": {e}")
            ) from None
        raise DataError(
            f"could not load dataset {dataset_name!r}: {type(e).__name__}: {' '.join(str(e).split())}"
        ) from None
    if not isinstance(dsd, datasets.DatasetDict):
        dsd = datasets.DatasetDict({"train": dsd})
    return dsd
