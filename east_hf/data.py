"""Data for ``east-train``: load through ``datasets``, relabel and resample, split, and turn rows into model inputs.

Sources (``DataArguments.dataset_name``):

- a Hub id (``uoft-cs/cifar10``), loaded with ``datasets.load_dataset``;
- a local folder: an ``imagefolder`` (one sub-folder per class) or CSV / Parquet / JSON files, split by file name
  (``train.csv``, ``test.csv``, ...), as ``datasets`` infers them; or one local CSV / TSV / Parquet / JSON file;
- ``sklearn:<name>``: a set bundled with scikit-learn, offline: ``digits`` (1,797 8x8 grey images, 10 classes, as
  an image data set), ``digits_tabular`` (the same as 64 features), ``breast_cancer`` (2 classes), ``wine`` (3) and
  ``iris`` (3), tabular; and ``make_classification``, a fixed synthetic imbalanced binary task made by scikit-learn
  (``SYNTHETIC_BINARY``: 20,000 rows, 20 features, 10 % positives, 2 % flipped labels), large enough for a test
  split of 400 positives.

The pipeline (``load_data``): the label column becomes a ``ClassLabel`` named ``label``; ``positive_classes``
relabels to binary (those classes 1, the rest 0); ``imbalance_ratio`` keeps a fraction ratio**(k/(C-1)) of class
k; missing splits are carved from the training split by the paper's protocol (stratified, 64 % train / 16 %
validation / 20 % test of the whole, fixed seed), and ``resplit`` pools every split first. Tabular rows become a
float vector ``input_features`` (text columns one-hot, then standardised with training-set statistics only: see
``TabularPreprocessor``); image rows keep their images and get a model's transform on the fly (``set_image_transforms``).

>>> from east_hf.cli import DataArguments
>>> data = load_data(DataArguments(dataset_name="sklearn:wine"))
>>> data.modality, data.label_names, [len(data.train), len(data.validation), len(data.test)]
('tabular', ['class_0', 'class_1', 'class_2'], [113, 29, 36])
>>> data.train[0]["input_features"].shape
torch.Size([13])
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from east_hf.functional import class_index

__all__ = [
    "PREPROCESSOR_NAME",
    "SKLEARN_SETS",
    "DataError",
    "EASTData",
    "TabularPreprocessor",
    "image_transforms",
    "load_data",
    "load_raw",
    "set_image_transforms",
]

# digits_tabular: the same 1,797 digits as 64 pixel-intensity features (a tabular task of a useful size).
SKLEARN_SETS = ("digits", "digits_tabular", "breast_cancer", "wine", "iris", "make_classification")
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
VALIDATION_NAMES = ("validation", "valid", "val", "dev")
FILE_BUILDERS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".json": "json", ".jsonl": "json"}
PREPROCESSOR_NAME = "tabular_preprocessor.json"


class DataError(ValueError):
    """A data input the user must fix (a path, an id, a column); the message is one self-contained line."""


@dataclass
class EASTData:
    """The three splits and what the model needs to know about them.

    ``train`` / ``validation`` / ``test``: ``datasets.Dataset``; tabular ones yield ``input_features`` (F,) float32 and
    ``labels``, image ones yield raw rows until ``set_image_transforms``. ``label_names[k]`` names class k.
    """

    train: Any
    validation: Any
    test: Any | None
    label_names: list[str]
    modality: str  # "image" or "tabular"
    image_column: str | None = None
    preprocessor: TabularPreprocessor | None = None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.label_names))

    def class_counts(self, split: str = "train") -> list[int]:
        """Samples per class in a split (read from the label column, no transform runs)."""
        ds = getattr(self, split)
        column = "labels" if "labels" in ds.column_names else "label"
        return np.bincount(np.asarray(ds.with_format(None)[column]), minlength=self.num_labels).tolist()


# ---------------------------------------------------------------------------------------------------------- loading
def _sklearn(name: str):
    import datasets
    from PIL import Image
    from sklearn import datasets as skd

    if name not in SKLEARN_SETS:
        raise DataError(
            f"unknown bundled data set 'sklearn:{name}'; expected one of "
            + ", ".join(f"sklearn:{n}" for n in SKLEARN_SETS)
        )
    if name == "make_classification":
        x, y = skd.make_classification(**SYNTHETIC_BINARY)
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
def _quiet(quiet: bool = True):
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
        with _quiet(_looks_like_path(dataset_name)):  # local files load in a blink; Hub downloads keep their bars
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


# ----------------------------------------------------------------------------------------------- labels and resampling
def _columns_message(ds) -> str:
    return ", ".join(ds.column_names)


def _encode_labels(dsd, label_column: str | None, dataset_name: str):
    """Every split with a ``ClassLabel`` column named ``label``, the same names in every split."""
    import datasets

    first = next(iter(dsd.values()))
    if label_column is None:
        label_column = next((c for c in ("label", "labels") if c in first.column_names), None)
        if label_column is None:
            raise DataError(
                f"no label column in {dataset_name!r}: set label_column to one of the columns: {_columns_message(first)}"
            )
    for split, ds in dsd.items():
        if label_column not in ds.column_names:
            raise DataError(
                f"label column {label_column!r} not found in {dataset_name!r} (split {split!r}); "
                f"columns are: {_columns_message(ds)}"
            )
    if label_column != "label":
        if "label" in first.column_names:
            dsd = dsd.rename_column("label", "label_original")
        dsd = dsd.rename_column(label_column, "label")
    feature = first.features["label"] if "label" in first.features else dsd[next(iter(dsd))].features["label"]
    if isinstance(feature, datasets.ClassLabel):
        return dsd, list(feature.names)
    values = set()
    for ds in dsd.values():
        values.update(v.strip() if isinstance(v, str) else v for v in ds["label"] if v is not None)
    if any(isinstance(v, float) and not float(v).is_integer() for v in values):
        raise DataError(
            f"label column {label_column!r} holds non-integer numbers: expected classes, not a regression target"
        )
    ordered = sorted(values, key=lambda v: (isinstance(v, str), v))  # numbers numerically, then strings
    names = [
        str(int(v)) if isinstance(v, (int, float, np.integer)) and not isinstance(v, bool) else str(v) for v in ordered
    ]
    index = {v: i for i, v in enumerate(ordered)}

    def encode(batch):
        return {"label": [index[v.strip() if isinstance(v, str) else v] for v in batch["label"]]}

    dsd = dsd.filter(lambda batch: [v is not None for v in batch["label"]], batched=True)
    dsd = dsd.map(encode, batched=True)
    return dsd.cast_column("label", datasets.ClassLabel(names=names)), names


def _binarize(dsd, positive_classes: Sequence[Any], names: list[str]):
    """Label 1 for ``positive_classes``, 0 for the rest; names ``[rest, pos1+pos2...]``."""
    import datasets

    try:
        positive = sorted(
            {class_index(c, names, len(names), what="positive_classes entries") for c in positive_classes}
        )
    except ValueError as e:
        raise DataError(str(e)) from None
    if not positive or len(positive) == len(names):
        raise DataError(f"positive_classes must leave both classes non-empty, got {list(positive_classes)} of {names}")
    negative = [names[k] for k in range(len(names)) if k not in positive]
    new_names = [negative[0] if len(negative) == 1 else "rest", "+".join(names[k] for k in positive)]
    lookup = np.isin(np.arange(len(names)), positive).astype(np.int64)
    dsd = dsd.map(lambda b: {"label": lookup[np.asarray(b["label"])].tolist()}, batched=True)
    return dsd.cast_column("label", datasets.ClassLabel(names=new_names)), new_names


def _imbalance(ds, ratio: float, num_classes: int, seed: int):
    """Keep a fraction ratio**(k/(C-1)) of class k (at least one sample): a long-tailed subsample."""
    labels = np.asarray(ds["label"])
    rng = np.random.default_rng(seed)
    keep = []
    for k in range(num_classes):
        members = np.flatnonzero(labels == k)
        n = max(1, int(round(len(members) * ratio ** (k / (num_classes - 1))))) if len(members) else 0
        keep.append(rng.permutation(members)[:n])
    return ds.select(np.sort(np.concatenate(keep)))


def _stratified_split(ds, fraction: float, seed: int, what: str):
    """(rest, carved): ``fraction`` of ``ds`` carved off, stratified by label."""
    from sklearn.model_selection import train_test_split

    labels = np.asarray(ds["label"])
    try:
        rest, carved = train_test_split(np.arange(len(ds)), test_size=fraction, stratify=labels, random_state=seed)
    except ValueError as e:
        counts = np.bincount(labels)
        raise DataError(
            f"cannot carve a stratified {what} split ({fraction:.3g} of {len(ds)} samples, smallest class "
            f"{counts[counts > 0].min()} samples): {e}"
        ) from None
    return ds.select(np.sort(rest)), ds.select(np.sort(carved))


def _cap(ds, n: int | None, seed: int):
    return ds if n is None or n >= len(ds) else ds.shuffle(seed=seed).select(range(n))


# ----------------------------------------------------------------------------------------------------------- tabular
@dataclass
class TabularPreprocessor:
    """Rows -> (N, F) float32: numeric columns as they are, text columns one-hot, missing values the training mean,
    then (x - mean) / std with training-set statistics. Saved beside the model as ``tabular_preprocessor.json``.
    """

    numeric: list[str]
    categories: dict[str, list[str]] = field(default_factory=dict)
    fill: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)

    @property
    def feature_names(self) -> list[str]:
        return self.numeric + [f"{c}={v}" for c, values in self.categories.items() for v in values]

    @classmethod
    def fit(cls, frame, columns: Sequence[str], standardize: bool = True) -> TabularPreprocessor:
        """Statistics of the training rows ``frame`` (a pandas DataFrame) only."""
        import pandas as pd

        numeric = [
            c for c in columns if pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
        ]
        categorical = [c for c in columns if c not in numeric]
        categories = {c: sorted({str(v).strip() for v in frame[c].dropna()}) for c in categorical}
        self = cls(numeric=numeric, categories=categories)
        raw = self._raw(frame)  # (N, F), NaN where missing
        with np.errstate(all="ignore"):
            fill = np.nan_to_num(np.nanmean(raw, axis=0)) if len(raw) else np.zeros(raw.shape[1])
        filled = np.where(np.isnan(raw), fill, raw)
        mean, std = (filled.mean(0), filled.std(0)) if standardize else (np.zeros(raw.shape[1]), np.ones(raw.shape[1]))
        std = np.where(std > 0, std, 1.0)  # a constant column stays constant (0) instead of dividing by zero
        self.fill, self.mean, self.std = fill.tolist(), mean.tolist(), std.tolist()
        return self

    def _raw(self, frame) -> np.ndarray:
        parts = [frame[self.numeric].to_numpy(dtype=np.float64, na_value=np.nan)] if self.numeric else []
        for column, values in self.categories.items():
            text = frame[column].map(lambda v: None if v is None or v != v else str(v).strip()).to_numpy()
            parts.append((text[:, None] == np.asarray(values, dtype=object)[None, :]).astype(np.float64))  # (N, V)
        return np.concatenate(parts, axis=1) if parts else np.zeros((len(frame), 0))

    def __call__(self, frame) -> np.ndarray:
        """(N, F) float32 features of the rows of a pandas DataFrame with the fitted columns."""
        raw = self._raw(frame)
        raw = np.where(np.isnan(raw), np.asarray(self.fill), raw)
        return ((raw - np.asarray(self.mean)) / np.asarray(self.std)).astype(np.float32)

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / PREPROCESSOR_NAME
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike) -> TabularPreprocessor:
        return cls(**json.loads((Path(directory) / PREPROCESSOR_NAME).read_text()))


def _tabular(splits: dict[str, Any], feature_columns: Sequence[str] | None, standardize: bool, names: list[str]):
    import datasets

    columns = (
        [c for c in splits["train"].column_names if c != "label"] if feature_columns is None else list(feature_columns)
    )
    missing = [c for c in columns if c not in splits["train"].column_names]
    if missing:
        raise DataError(f"feature column(s) {missing} not found; columns are: {_columns_message(splits['train'])}")
    if not columns:
        raise DataError("no feature columns: the data set has only a label column")
    frames = {k: ds.select_columns([*columns, "label"]).to_pandas() for k, ds in splits.items() if ds is not None}
    preprocessor = TabularPreprocessor.fit(frames["train"], columns, standardize)
    width = len(preprocessor.feature_names)
    features = datasets.Features(
        {
            "input_features": datasets.List(datasets.Value("float32"), length=width),
            "labels": datasets.ClassLabel(names=names),
        }
    )
    out = {
        k: datasets.Dataset.from_dict(
            {"input_features": preprocessor(frame), "labels": frame["label"].to_numpy()}, features=features
        ).with_format("torch")
        for k, frame in frames.items()
    }
    return out, preprocessor


# -------------------------------------------------------------------------------------------------------- the pipeline
def _image_column(ds, requested: str | None, dataset_name: str) -> str | None:
    import datasets

    if requested is not None:
        if requested not in ds.column_names:
            raise DataError(
                f"image column {requested!r} not found in {dataset_name!r}; columns are: {_columns_message(ds)}"
            )
        return requested
    return next((c for c, f in ds.features.items() if isinstance(f, datasets.Image)), None)


def _find_split(dsd, requested: str | None, candidates: Sequence[str], what: str):
    if requested is not None:
        if requested not in dsd:
            raise DataError(f"{what} split {requested!r} not found; splits are: {', '.join(dsd)}")
        return requested
    return next((c for c in candidates if c in dsd), None)


def load_data(args) -> EASTData:
    """Load, relabel, resample and split the data set of a ``DataArguments``; tabular rows are made model-ready."""
    dsd = load_raw(args.dataset_name, args.dataset_config)
    with _quiet():
        return _prepare(dsd, args)


def _prepare(dsd, args) -> EASTData:
    import datasets

    dsd, names = _encode_labels(dsd, args.label_column, args.dataset_name)
    if args.positive_classes:
        dsd, names = _binarize(dsd, args.positive_classes, names)
    if len(names) < 2:
        raise DataError(f"expected at least 2 classes in {args.dataset_name!r}, got {names}")
    if args.resplit and len(dsd) > 1:
        dsd = datasets.DatasetDict({"train": datasets.concatenate_datasets(list(dsd.values()))})
    train_name = _find_split(dsd, args.train_split, (), "train")
    val_name = _find_split(dsd, args.validation_split, VALIDATION_NAMES, "validation")
    test_name = _find_split(dsd, args.test_split, ("test",), "test")
    splits = {
        "train": dsd[train_name],
        "validation": dsd[val_name] if val_name else None,
        "test": dsd[test_name] if test_name else None,
    }
    long_tail = args.imbalance_ratio is not None and args.imbalance_ratio < 1
    if long_tail and args.imbalance_splits != "train":  # "all": before carving, so every split has the long tail
        for key in ("train", "validation", "test"):
            if splits[key] is not None:
                splits[key] = _imbalance(splits[key], args.imbalance_ratio, len(names), args.split_seed)
    seed, val, test = args.split_seed, args.val_size, args.test_size
    if splits["test"] is None:
        # Without a validation split both are carved: test_size of the whole, then val_size of the whole from the rest.
        fraction = test if splits["validation"] is None else test / (1 - val)
        splits["train"], splits["test"] = _stratified_split(splits["train"], fraction, seed, "test")
    if splits["validation"] is None:
        splits["train"], splits["validation"] = _stratified_split(
            splits["train"], val / (1 - test), seed, "validation"
        )
    if long_tail and args.imbalance_splits == "train":  # after carving: validation and test keep the original mix
        splits["train"] = _imbalance(splits["train"], args.imbalance_ratio, len(names), args.split_seed)
    for key, cap in (
        ("train", args.max_train_samples),
        ("validation", args.max_eval_samples),
        ("test", args.max_test_samples),
    ):
        splits[key] = _cap(splits[key], cap, seed)
    image_column = _image_column(splits["train"], args.image_column, args.dataset_name)
    if image_column is not None:
        keep = [image_column, "label"]
        splits = {k: ds.select_columns(keep) for k, ds in splits.items()}
        return EASTData(splits["train"], splits["validation"], splits["test"], names, "image", image_column)
    splits, preprocessor = _tabular(splits, args.feature_columns, args.standardize, names)
    return EASTData(splits["train"], splits["validation"], splits["test"], names, "tabular", preprocessor=preprocessor)


# ------------------------------------------------------------------------------------------------------------- images
def image_transforms(
    model, image_processor=None, image_size: int | None = None, augment: bool = False
) -> tuple[Callable, Callable, dict[str, Any] | None]:
    """(train, eval, timm data config) transforms from a PIL image to a (3, H, W) tensor.

    A timm model (``TimmWrapperForImageClassification``) without an ``image_processor``, or with a
    ``TimmWrapperImageProcessor``: timm's ``resolve_data_config`` / ``create_transform`` of the model, the input
    size replaced by ``image_size``. A transformers checkpoint: its ``image_processor`` for evaluation, and with
    ``augment`` timm's training transform at the processor's size, mean and std. Without ``augment`` training uses
    the evaluation transform (the paper only standardises).
    """
    import timm.data

    timm_model = getattr(model, "timm_model", None)
    if timm_model is not None and (image_processor is None or hasattr(image_processor, "data_config")):
        data_config = dict(timm.data.resolve_data_config(model=timm_model))
        if image_size is not None:
            data_config["input_size"] = (3, image_size, image_size)
        eval_tf = timm.data.create_transform(**data_config, is_training=False)
        train_tf = timm.data.create_transform(**data_config, is_training=True) if augment else eval_tf
        return train_tf, eval_tf, data_config
    if image_processor is None:
        raise ValueError(f"Expected a timm model or an image processor for {type(model).__name__}, got neither")
    if image_size is not None:
        image_processor.size = {"height": image_size, "width": image_size}
        if getattr(image_processor, "crop_size", None) is not None:
            image_processor.crop_size = {"height": image_size, "width": image_size}

    def eval_tf(image):
        return image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    if not augment:
        return eval_tf, eval_tf, None
    size = image_processor.crop_size if getattr(image_processor, "crop_size", None) else image_processor.size
    side = size.get("height") or size.get("shortest_edge")
    train_tf = timm.data.create_transform(
        input_size=(3, side, side), mean=image_processor.image_mean, std=image_processor.image_std, is_training=True
    )
    return train_tf, eval_tf, None


def set_image_transforms(data: EASTData, train_tf: Callable, eval_tf: Callable) -> None:
    """Apply the transforms on the fly (``set_transform``): rows become ``pixel_values`` (3, H, W) and ``labels``."""
    column = data.image_column

    def wrap(tf):
        def apply(batch):
            return {
                "pixel_values": [tf(image.convert("RGB")) for image in batch[column]],
                "labels": batch["label"],
            }

        return apply

    data.train.set_transform(wrap(train_tf))
    for ds in (data.validation, data.test):
        if ds is not None:
            ds.set_transform(wrap(eval_tf))
