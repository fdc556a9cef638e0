"""``DataArguments``: which data set, which columns, how it is split and resampled (read by ``load_data``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from east_hf.core.validation import check_choice, check_range
from east_hf.hf.data.missing import parse_markers

__all__ = ["DataArguments", "multilabel_refusal"]


def multilabel_refusal(name: str) -> str:
    """The one line refusing ``positive_classes`` or ``imbalance_ratio``, made for one class per row, on multi-label
    data."""
    what = {
        "positive_classes": "relabels one class per row to binary",
        "imbalance_ratio": "subsamples by each row's one class",
    }[name]
    return f"{name} {what}: it does not apply to multi-label data (label_columns, label_separator or a list column)"


@dataclass
class DataArguments:
    """Which data set, which columns, how it is split and resampled.

    ``dataset_name`` is a Hub id (``uoft-cs/cifar10``), a local folder (an ``imagefolder`` of one sub-folder per
    class, or CSV / Parquet / JSON files, split by file name), a local CSV / Parquet / JSON file, or a bundled
    ``sklearn:<name>`` set (``digits`` as 8x8 images; ``breast_cancer``, ``wine``, ``iris`` tabular). A table with
    ``text_column`` (or a text model) is text: tokenized in batches, truncated at ``max_length``.

    Multi-label data (every row a set of labels, ``east_hf.hf.data.multilabel``): ``label_columns`` names several 0/1
    columns (``"a,b,c"`` on the command line, a list in a recipe), ``label_separator`` splits a text label column
    (``"drama|comedy"``), and a list-valued label column is multi-label as it is. ``positive_classes`` and
    ``imbalance_ratio``, made for one class per row, are refused with them.

    Label cells: only an empty cell is a missing label (its row dropped and counted), so a class written ``None`` or
    ``NA`` in a CSV is a class; ``label_na_values`` names more markers, ``default`` the CSV reader's own.
    """

    _argument_group_name = "data"

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Hub id, local folder or file (CSV/Parquet/JSON, imagefolder), "
            "or sklearn:digits|breast_cancer|wine|iris."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "The Hub data set's configuration name."})
    train_split: str = field(default="train", metadata={"help": "Name of the training split."})
    validation_split: str | None = field(
        default=None,
        metadata={"help": "Name of the validation split; default: validation/valid/val/dev, else carved from train."},
    )
    test_split: str | None = field(
        default=None, metadata={"help": "Name of the test split; default: test, else carved from train."}
    )
    resplit: bool = field(
        default=False,
        metadata={"help": "Pool all splits and re-split them (the paper's protocol for every data set)."},
    )
    val_size: float = field(
        default=0.16, metadata={"help": "Validation fraction of the whole data set (paper: 0.16)."}
    )
    test_size: float = field(default=0.2, metadata={"help": "Test fraction of the whole data set (paper: 0.2)."})
    split_seed: int = field(default=42, metadata={"help": "Seed of the stratified splits and of the subsampling."})
    label_column: str | None = field(
        default=None,
        metadata={
            "help": "Column with the class; default: 'label' or 'labels'. A column of lists is multi-label (label "
            "names, or 0/1 vectors of one length)."
        },
    )
    label_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "Multi-label: several 0/1 columns, one per label ('a,b,c' or a list); an empty cell leaves the "
            "entry out (-100). Not with label_column."
        },
    )
    label_separator: str | None = field(
        default=None,
        metadata={"help": "Multi-label: the label column's cells list several labels split by this, e.g. '|'."},
    )
    label_na_values: list[str] | None = field(
        default=None,
        metadata={
            "help": "Label cells read as missing besides empty ones (their rows dropped and counted), e.g. 'NA,None'; "
            "'default' for the CSV reader's markers (NA, N/A, None, null, NaN, n/a, ...). Default: none, so a class "
            "written 'None' or 'NA' is kept."
        },
    )
    image_column: str | None = field(
        default=None, metadata={"help": "Column with the images; default: the first Image column (none: tabular)."}
    )
    text_column: str | None = field(
        default=None,
        metadata={"help": "Column with the texts; set for a text model: the table's one column of long strings."},
    )
    text_pair_column: str | None = field(
        default=None, metadata={"help": "Column with the second text of each pair (entailment, paraphrase)."}
    )
    max_length: int | None = field(
        default=None, metadata={"help": "Texts are truncated to this many tokens; default: the model's longest input."}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes that tokenize the texts (datasets.map's num_proc); default: one."}
    )
    feature_columns: list[str] | None = field(
        default=None,
        metadata={"help": "Tabular input columns; default: all but the label (text columns one-hot encoded)."},
    )
    standardize: bool = field(
        default=True, metadata={"help": "Standardise tabular features with training-set mean and std (paper)."}
    )
    positive_classes: list[str] | None = field(
        default=None,
        metadata={"help": "Binary relabelling: these classes (names or indices) become label 1, all others 0."},
    )
    imbalance_ratio: float | None = field(
        default=None,
        metadata={"help": "Long-tailed subsample: keep a fraction ratio**(k/(C-1)) of class k, in (0, 1]."},
    )
    imbalance_splits: str = field(
        default="all", metadata={"help": "Where imbalance_ratio applies: 'all' splits (before splitting) or 'train'."}
    )
    unseen_labels: str = field(
        default="error",
        metadata={
            "help": "A validation/test label with no training rows: 'error' (refuse the data set) or 'drop' "
            "(leave its rows and its class out, with a warning): the model cannot predict a class it never saw."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep at most this many training samples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep at most this many validation samples."})
    max_test_samples: int | None = field(default=None, metadata={"help": "Keep at most this many test samples."})
    image_size: int | None = field(
        default=None, metadata={"help": "Input height and width for images; default: the model's data config."}
    )
    augment: bool = field(
        default=False, metadata={"help": "timm's training augmentation (random resized crop, flip); paper: off."}
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "Stream the training rows (datasets' streaming=True) for data larger than memory or disk; needs a "
            "validation split (no stratified split of a stream). See east_hf.hf.data.streaming."
        },
    )

    @property
    def multi_label(self) -> bool:
        """Whether the arguments alone say the labels are multi-label (a list column is found at load)."""
        return bool(self.label_columns) or self.label_separator is not None

    def __post_init__(self):
        self._check_label_columns()
        self.label_na_values = parse_markers(self.label_na_values)
        for name in ("val_size", "test_size"):
            check_range(name, getattr(self, name), 0, 1, "()")
        if self.val_size + self.test_size >= 1:
            raise ValueError(f"Expected val_size + test_size < 1, got {self.val_size} + {self.test_size}")
        if self.imbalance_ratio is not None:
            check_range("imbalance_ratio", self.imbalance_ratio, 0, 1, "(]")
        check_choice("imbalance_splits", self.imbalance_splits, ("all", "train"))
        check_choice("unseen_labels", self.unseen_labels, ("error", "drop"))
        for name in (
            "max_train_samples",
            "max_eval_samples",
            "max_test_samples",
            "image_size",
            "max_length",
            "preprocessing_num_workers",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"Expected {name} >= 1 or None, got {value}")

    def _check_label_columns(self) -> None:
        """Normalise ``label_columns`` (``"a,b,c"`` or ``["a", "b,c"]`` -> ``["a", "b", "c"]``) and refuse the settings
        that contradict multi-label data, one line each."""
        if self.label_columns is not None:
            items = [self.label_columns] if isinstance(self.label_columns, str) else list(self.label_columns)
            names = [n.strip() for item in items for n in str(item).split(",")]
            if any(not n for n in names):
                raise ValueError(f"Expected label_columns as column names 'a,b,c', got an empty name in {items}")
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ValueError(f"Expected each of label_columns once, got {repeated} more than once")
            if len(names) < 2:
                raise ValueError(
                    "Expected at least 2 label_columns (one 0/1 column is a binary label: set label_column), "
                    f"got {names}"
                )
            self.label_columns = names
            if self.label_column is not None:
                raise ValueError(
                    f"Expected label_column or label_columns, got both ({self.label_column!r} and {names}): "
                    "label_columns names every label column"
                )
            if self.label_separator is not None:
                raise ValueError(
                    "Expected label_separator with one text label_column, got label_columns (0/1 columns need none)"
                )
            inputs = {
                "feature_columns": self.feature_columns or [],
                "image_column": [self.image_column],
                "text_column": [self.text_column],
                "text_pair_column": [self.text_pair_column],
            }
            for name, columns in inputs.items():
                both = [c for c in columns if c in names]
                if both:
                    raise ValueError(f"Expected {name} apart from label_columns, got {both} in both")
        if self.label_separator is not None and not self.label_separator:
            raise ValueError("Expected label_separator to be a non-empty string such as '|', got ''")
        if self.multi_label:
            for name in ("positive_classes", "imbalance_ratio"):
                if getattr(self, name):
                    raise ValueError(multilabel_refusal(name))
