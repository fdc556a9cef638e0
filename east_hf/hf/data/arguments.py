"""``DataArguments``: which data set, which columns, how it is split and resampled (read by ``load_data``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from east_hf.core.validation import check_choice, check_range

__all__ = ["DataArguments"]


@dataclass
class DataArguments:
    """Which data set, which columns, how it is split and resampled.

    ``dataset_name`` is a Hub id (``uoft-cs/cifar10``), a local folder (an ``imagefolder`` of one sub-folder per
    class, or CSV / Parquet / JSON files, split by file name), a local CSV / Parquet / JSON file, or a bundled
    ``sklearn:<name>`` set (``digits`` as 8x8 images; ``breast_cancer``, ``wine``, ``iris`` tabular). A table with
    ``text_column`` (or a text model) is text: tokenized in batches, truncated at ``max_length``.
    """

    _argument_group_name = "data"

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Hub id, local folder or file (CSV/Parquet/JSON, imagefolder), or sklearn:digits|breast_cancer|wine|iris."
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
        default=None, metadata={"help": "Column with the class; default: 'label' or 'labels'."}
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
            "help": "A validation/test label with no training rows: 'error' (refuse the data set) or 'drop' (leave its "
            "rows and its class out, with a warning): the model cannot predict a class it never saw."
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

    def __post_init__(self):
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
