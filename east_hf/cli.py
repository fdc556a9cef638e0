"""The ``east-train`` parser: a YAML recipe gives defaults, command-line flags override it, unknown keys are errors.

``EASTArgumentParser`` is ``transformers.HfArgumentParser`` over four dataclasses, in the style of TRL's
``TrlParser``: ``ScriptArguments`` (what the run does besides training), ``DataArguments`` (which data set and how
it is split), ``ModelArguments`` (which model) and ``EASTConfig`` (``TrainingArguments`` plus the surrogate and the
annealing). A recipe is a flat YAML mapping of the same field names::

    east-train recipes/cifar10_f1.yaml --learning_rate 1e-4 --loss ce

Every mistake in the input is one line on stderr, ``east-train: error: ...``, and exit status 2 (argparse's
convention), never a traceback. Aliases (``ALIASES``) give the most used fields short names: ``--loss`` is
``--east_loss``, ``--metric`` is ``--east_metric``, ``--beta`` is ``--east_beta``, ``--dataset`` is
``--dataset_name``, ``--model`` is ``--model_name_or_path``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
import re
import sys
from argparse import Namespace
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from transformers import HfArgumentParser

from east_hf.config import EASTConfig
from east_hf.functional import METRICS, target_metric_key

__all__ = [
    "ALIASES",
    "DataArguments",
    "EASTArgumentParser",
    "ModelArguments",
    "ParsedArguments",
    "ScriptArguments",
    "demo_recipe_path",
    "load_recipe",
]

PROG = "east-train"

ALIASES = {
    "loss": "east_loss",
    "metric": "east_metric",
    "beta": "east_beta",
    "temperature": "east_temperature",
    "decay": "east_decay",
    "dataset": "dataset_name",
    "model": "model_name_or_path",
    "lr": "learning_rate",
    "batch_size": "per_device_train_batch_size",
}
"""Short names accepted in recipes and on the command line, and the field each stands for."""

# What east-train sets unless the recipe or the command line says otherwise: EAST needs a validation set every
# epoch (the annealing's early stopping) and keeps the best checkpoint by the target metric.
RUN_DEFAULTS = {
    "eval_strategy": "epoch",
    "save_strategy": "epoch",
    "logging_strategy": "epoch",
    "load_best_model_at_end": True,
    "save_total_limit": 1,  # with load_best_model_at_end the Trainer keeps the best checkpoint besides the last
    "optim": "adamw_torch",  # the paper trains with AdamW
    "report_to": "none",
    "remove_unused_columns": False,  # image transforms run on the fly (set_transform) and need the raw columns
}


@dataclass
class ScriptArguments:
    """What ``east-train`` does around training: the test evaluation, the model card, a dry run."""

    _argument_group_name = "east-train"

    evaluate_test: bool = field(
        default=True,
        metadata={"help": "Evaluate the best model on the test split and write test_results.json / all_results.json."},
    )
    report_classes: list[str] | None = field(
        default=None,
        metadata={
            "help": "Classes (names or indices, or 'all') with per-class precision/recall/fbeta in the metrics; "
            "default: the classes with their own beta, or the positive class of a binary average."
        },
    )
    model_card: bool = field(
        default=True, metadata={"help": "Write a model card (README.md) when east_hf.cards is available."}
    )
    dry_run: bool = field(
        default=False,
        metadata={"help": "Parse and validate the recipe, print the resolved settings and exit: loads no data."},
    )


@dataclass
class DataArguments:
    """Which data set, which columns, how it is split and resampled.

    ``dataset_name`` is a Hub id (``uoft-cs/cifar10``), a local folder (an ``imagefolder`` of one sub-folder per
    class, or CSV / Parquet / JSON files, split by file name), a local CSV / Parquet / JSON file, or a bundled
    ``sklearn:<name>`` set (``digits`` as 8x8 images; ``breast_cancer``, ``wine``, ``iris`` tabular).
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
    feature_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "Tabular input columns; default: every column but the label. Text columns are one-hot encoded."
        },
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
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"Expected {name} in (0, 1), got {value}")
        if self.val_size + self.test_size >= 1:
            raise ValueError(f"Expected val_size + test_size < 1, got {self.val_size} + {self.test_size}")
        if self.imbalance_ratio is not None and not 0 < self.imbalance_ratio <= 1:
            raise ValueError(f"Expected imbalance_ratio in (0, 1], got {self.imbalance_ratio}")
        if self.imbalance_splits not in ("all", "train"):
            raise ValueError(f"Expected imbalance_splits 'all' or 'train', got {self.imbalance_splits!r}")
        for name in ("max_train_samples", "max_eval_samples", "max_test_samples", "image_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"Expected {name} >= 1 or None, got {value}")


@dataclass
class ModelArguments:
    """Which model: a timm architecture (random init), a Hub or local checkpoint (new head), or the tabular MLP."""

    _argument_group_name = "model"

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "timm architecture (darknet19, darknet19_tiny.cifar, resnet18: random init), Hub id or folder "
            "of a checkpoint (timm/resnet18.a1_in1k: fine-tuned with a new head), or tabular_mlp. "
            "Default: darknet19 for images, tabular_mlp for tables (the paper's architectures)."
        },
    )
    model_revision: str = field(default="main", metadata={"help": "Revision of a Hub checkpoint."})
    hidden_sizes: list[int] = field(
        default_factory=lambda: [512, 256, 128],
        metadata={"help": "Hidden layer widths of tabular_mlp (paper: 512 256 128)."},
    )
    dropout: float | None = field(
        default=None,
        metadata={
            "help": "Dropout: of tabular_mlp's hidden layers (default 0.25, paper grid {0.25, 0.5}), or timm's drop_rate."
        },
    )

    def __post_init__(self):
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"Expected dropout in [0, 1), got {self.dropout}")


@dataclass
class ParsedArguments:
    """What ``EASTArgumentParser.parse`` returns: the four dataclasses and the recipe as read."""

    script: ScriptArguments
    data: DataArguments
    model: ModelArguments
    training: EASTConfig
    recipe: dict[str, Any]
    recipe_path: str | None
    overrides: dict[str, Any] = field(default_factory=dict)


def demo_recipe_path() -> Path:
    """The demo recipe shipped inside the package (``east_hf/recipes/demo.yaml``)."""
    return Path(str(importlib.resources.files("east_hf") / "recipes" / "demo.yaml"))


def load_recipe(path: str | Path) -> dict[str, Any]:
    """Read a YAML recipe: a flat mapping of field names (or ``ALIASES``) to values. Empty file: ``{}``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"recipe {str(path)!r} does not exist")
    try:
        recipe = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"recipe {str(path)!r} is not valid YAML: {' '.join(str(e).split())}") from None
    if recipe is None:
        return {}
    if not isinstance(recipe, Mapping):
        raise ValueError(f"Expected recipe {str(path)!r} to be a mapping of field: value, got {type(recipe).__name__}")
    return dict(recipe)


def _value(text: str) -> Any:
    """A command-line value for a field typed ``Any`` (``east_beta``): YAML, so ``0.5``, ``[1, 2]``, ``{dog: 5}``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


class EASTArgumentParser(HfArgumentParser):
    """``HfArgumentParser`` over ``ScriptArguments``, ``DataArguments``, ``ModelArguments`` and ``EASTConfig``.

    ``parse(argv)`` reads ``RECIPE.yaml`` (the first argument, or ``--recipe PATH``, or ``--demo`` for the packaged
    demo recipe), makes its values the parser's defaults and parses the remaining flags over them. Errors exit with
    status 2 and one line on stderr.
    """

    def __init__(self, dataclass_types: Sequence[type] | None = None, prog: str = PROG, **kwargs):
        dataclass_types = dataclass_types or (ScriptArguments, DataArguments, ModelArguments, EASTConfig)
        kwargs.setdefault("allow_abbrev", False)  # `--lr 1` must not silently mean some `--lr_scheduler_...`
        kwargs.setdefault("usage", f"{prog} RECIPE.yaml [--field value ...]  |  {prog} --demo  |  {prog} --help")
        kwargs.setdefault(
            "description",
            "Train a classifier with EAST (a surrogate of F-beta, accuracy or MCC) from a YAML recipe. Every field "
            "below can be set in the recipe (as `field: value`) and overridden here (as `--field value`). Aliases: "
            + ", ".join(f"--{a} = --{f}" for a, f in ALIASES.items())
            + ".",
        )
        super().__init__(dataclass_types, prog=prog, **kwargs)
        for action in self._actions:
            if action.type is Any:  # HfArgumentParser passes typing.Any on as argparse's type, which cannot call it
                action.type = _value
        self._dests = {action.dest for action in self._actions if action.dest != "help"}
        # parse() sets a recipe's values as defaults: keep the pristine ones so every parse starts from them.
        self._pristine = [(action, action.default, action.required) for action in self._actions]

    # ---- errors: one line, exit 2 ----
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")

    def canonical(self, key: str, flag: bool = False) -> str:
        """The field name of a recipe key or flag name (aliases resolved, dashes as underscores), or an error."""
        name = ALIASES.get(key, key)
        if name not in self._dests:
            name = ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))
        if name not in self._dests:
            close = difflib.get_close_matches(name, sorted(self._dests | set(ALIASES)), n=1, cutoff=0.6)
            prefix = "--" if flag else ""
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            self.error(f"unknown {'argument' if flag else 'recipe key'} {prefix}{key}{hint}")
        return name

    # ---- parsing ----
    def _split_argv(self, argv: list[str]) -> tuple[str | None, list[str]]:
        """(recipe path, remaining flags): the recipe is the first bare argument, ``--recipe PATH`` or ``--demo``."""
        recipe, rest, i = None, [], 0
        while i < len(argv):
            arg = argv[i]
            if arg == "--demo":
                recipe = str(demo_recipe_path())
            elif arg == "--recipe" or arg.startswith("--recipe="):
                if "=" in arg:
                    recipe = arg.split("=", 1)[1]
                elif i + 1 < len(argv):
                    recipe, i = argv[i + 1], i + 1
                else:
                    self.error("argument --recipe: expected a path to a YAML recipe")
            elif recipe is None and not rest and not arg.startswith("-"):
                recipe = arg
            else:
                rest.append(arg)
            i += 1
        return recipe, rest

    def _normalise_flags(self, args: list[str]) -> list[str]:
        """Resolve aliases in ``--flag`` / ``--flag=value``; an unknown flag is an error with a suggestion."""
        out = []
        for arg in args:
            match = re.fullmatch(r"--([A-Za-z0-9_-]+)(=.*)?", arg, flags=re.DOTALL)
            if match is None:
                out.append(arg)
                continue
            name, value = match.group(1), match.group(2) or ""
            if name.startswith("no_") or name.startswith("no-"):  # --no_field of a boolean field
                if f"--{name}" in self._option_string_actions:
                    out.append(arg)
                    continue
            out.append(f"--{self.canonical(name, flag=True)}{value}")
        return out

    def _recipe_defaults(self, recipe: Mapping[str, Any]) -> dict[str, Any]:
        """Recipe values keyed by field; numbers of int/float fields are checked here (argparse checks only text)."""
        defaults = {}
        actions = {a.dest: a for a in self._actions if a.option_strings and not a.option_strings[0].startswith("--no")}
        for key, value in recipe.items():
            name = self.canonical(str(key))
            if name in defaults:
                self.error(f"recipe key {key!r} sets {name!r}, which the recipe already sets")
            action = actions.get(name)
            kind = getattr(action, "type", None)
            if getattr(action, "nargs", None) in ("+", "*") and kind in (str, int, float) and value is not None:
                items = value if isinstance(value, (list, tuple)) else [value]  # `positive_classes: 1` means [1]
                value = [self._typed(key, kind, item) for item in items]
            elif kind in (str, int, float) and value is not None:
                value = self._typed(key, kind, value)
            defaults[name] = value
        return defaults

    def _typed(self, key: str, kind: type, value: Any) -> Any:
        """A recipe scalar as the field's type: argparse converts only defaults given as text."""
        if kind is str:
            if isinstance(value, (Mapping, list, tuple)):
                return value  # fields such as lr_scheduler_kwargs take a dict where the parser says str
            return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            self.error(f"recipe key {key!r}: expected {kind.__name__}, got {value!r}")
        try:
            converted = kind(value)
        except ValueError:
            self.error(f"recipe key {key!r}: expected {kind.__name__}, got {value!r}")
        if kind is int and not isinstance(value, str) and converted != value:
            self.error(f"recipe key {key!r}: expected int, got {value!r}")
        return converted

    def parse(self, argv: Sequence[str] | None = None) -> ParsedArguments:
        """Parse ``[RECIPE.yaml] [--field value ...]`` into a ``ParsedArguments``; exit 2 on any input error."""
        argv = list(sys.argv[1:] if argv is None else argv)
        for action, default, required in self._pristine:
            action.default, action.required = default, required
        self._defaults.clear()
        wants_help = any(a in ("-h", "--help") for a in argv)
        recipe_path, rest = self._split_argv([a for a in argv if a not in ("-h", "--help")])
        if wants_help:  # the defaults shown are east-train's, and the recipe's when one is given
            defaults = dict(RUN_DEFAULTS)
            if recipe_path is not None and Path(recipe_path).is_file():
                defaults.update(self._recipe_defaults(load_recipe(recipe_path)))
            self.set_defaults(**defaults)
            self.print_help()
            self.exit(0)
        if recipe_path is None:
            self.error("expected a recipe, e.g. `east-train recipes/demo.yaml` (or `east-train --demo`; see --help)")
        try:
            recipe = load_recipe(recipe_path)
        except ValueError as e:
            self.error(str(e))
        run_defaults = dict(RUN_DEFAULTS, output_dir=str(Path("runs") / Path(recipe_path).stem))
        recipe_values = self._recipe_defaults(recipe)
        defaults = {**run_defaults, **recipe_values}
        for action in self._actions:
            if action.dest in defaults:
                action.required = False
        self.set_defaults(**defaults)
        flags = self._normalise_flags(rest)
        namespace, remaining = self.parse_known_args(flags)
        if remaining:
            self.error(f"unexpected argument {remaining[0]!r} (expected --field value pairs after the recipe)")
        given = {
            self._option_string_actions[f.split("=", 1)[0]].dest
            for f in flags
            if f.split("=", 1)[0] in self._option_string_actions
        }
        overrides = {dest: getattr(namespace, dest) for dest in sorted(given)}
        self._derive(namespace, explicit=set(recipe_values) | given)
        outputs = self._to_dataclasses(namespace)
        script, data, model, training = outputs
        self._validate(script, data, model, training)
        return ParsedArguments(script, data, model, training, recipe, recipe_path, overrides)

    def _derive(self, namespace: Namespace, explicit: set[str]) -> None:
        """Defaults that depend on other fields; a field the recipe or a flag sets is left as it is."""
        if namespace.east_metric not in METRICS:
            self.error(f"Expected east_metric in {sorted(METRICS)}, got {namespace.east_metric!r}")
        if namespace.load_best_model_at_end and "metric_for_best_model" not in explicit:
            # The annealing callback's anneal monitor (eval_<target>): the model kept is the one annealing judged best.
            key = namespace.east_anneal_monitor or f"eval_{target_metric_key(namespace.east_metric)}"
            namespace.metric_for_best_model = key
        if namespace.load_best_model_at_end and namespace.eval_strategy == "steps":
            # load_best_model_at_end needs a checkpoint at every evaluation
            if "save_strategy" not in explicit:
                namespace.save_strategy = "steps"
            if "save_steps" not in explicit and namespace.eval_steps is not None:
                namespace.save_steps = namespace.eval_steps

    def _to_dataclasses(self, namespace: Namespace) -> tuple:
        outputs = []
        values = vars(namespace)
        for dtype in self.dataclass_types:
            keys = {f.name for f in dataclasses.fields(dtype) if f.init}
            try:
                outputs.append(dtype(**{k: v for k, v in values.items() if k in keys}))
            except (ValueError, TypeError) as e:
                self.error(str(e))
        return tuple(outputs)

    def _validate(self, script, data, model, training) -> None:
        """Checks across dataclasses, before any data is loaded."""
        if data.dataset_name is None:
            self.error(
                "expected dataset_name (a Hub id, a local path or sklearn:<name>) in the recipe or as --dataset_name"
            )
        if training.east_annealing and training.eval_strategy == "no":
            self.error(
                "temperature annealing needs evaluations: set eval_strategy to 'epoch' or 'steps', or east_annealing false"
            )
