"""The ``east-train`` parser: a YAML recipe gives defaults, command-line flags override it, unknown keys are errors.

``EASTArgumentParser`` is ``transformers.HfArgumentParser`` over four dataclasses, in the style of TRL's
``TrlParser``, each defined beside the code that reads it: ``ScriptArguments`` (here: what the run does
besides training), ``DataArguments`` (``east_hf.hf.data``: which data set and how it is split), ``ModelArguments``
(``east_hf.hf.models.build``: which model) and ``EASTConfig`` (``east_hf.hf.config.east_config``: ``TrainingArguments``
plus the surrogate and the annealing). A recipe is a flat YAML mapping of the same field names::

    east-train recipes/cifar10_f1.yaml --learning_rate 1e-4 --loss ce

Without a recipe, the flags give every field, ``--dataset_name`` at least, and the run writes into ``runs/<data set>``
unless ``--output_dir`` says otherwise::

    east-train --dataset_name sklearn:breast_cancer --east_average binary --positive_classes malignant

Every mistake in the input is one line on stderr, ``east-train: error: ...``, and exit status 2 (argparse's
convention), never a traceback. Aliases (``ALIASES``) give the most used fields short names: ``--loss`` is
``--east_loss``, ``--metric`` is ``--east_metric``, ``--beta`` is ``--east_beta``, ``--dataset`` is
``--dataset_name``, ``--model`` is ``--model_name_or_path``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
import types
import typing
from argparse import Namespace
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from transformers import HfArgumentParser

from east_hf.scripts.parsers import OneLineErrors
from east_hf.scripts.recipes import demo_recipe_path, packaged_recipes, recipe_list, resolve_recipe

__all__ = [
    "SCRIPT_DEFAULTS",
    "ScriptArguments",
    "ALIASES",
    "EASTArgumentParser",
    "ParsedArguments",
    "default_output_dir",
    "demo_recipe_path",
    "load_recipe",
    "packaged_recipes",
    "resolve_recipe",
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

# What east-train sets unless the recipe or the command line says otherwise, beyond EASTConfig's own defaults
# (which are what EAST needs, in Python as here): its image transforms run on the fly (set_transform) and need the
# raw columns. The output folder defaults to runs/<recipe name> (runs/<data set name> without a recipe).
SCRIPT_DEFAULTS = {"remove_unused_columns": False}


@dataclass
class ScriptArguments:
    """What ``east-train`` does around training: the test evaluation, the model card and its license, a dry run."""

    _argument_group_name = "east-train"

    evaluate_test: bool = field(
        default=True,
        metadata={"help": "Evaluate the best model on the test split and write test_results.json / all_results.json."},
    )
    report_classes: list[str] | None = field(
        default=None,
        metadata={
            "help": "Classes (names, indices or 'all') with per-class metrics; "
            "default: own-beta ones (multi-label: all)."
        },
    )
    model_card: bool = field(default=True, metadata={"help": "Write a model card (README.md) into output_dir."})
    tune_decision_rule: bool = field(
        default=False,
        metadata={
            "help": "Tune per-class logit offsets (multi-label: per-label thresholds) on validation for the target "
            "metric; fold them into the output bias."
        },
    )
    dry_run: bool = field(
        default=False,
        metadata={"help": "Parse and validate the recipe, print the resolved settings and exit: loads no data."},
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Replace the run already in output_dir (its checkpoints and results are deleted first)."},
    )
    print_metrics: bool = field(
        default=True,
        metadata={
            "help": "Print the Trainer's metric dictionary at each log and evaluation (trainer_state.json keeps them "
            "all); east-compare's runs print none."
        },
    )
    license: str | None = field(
        default=None,
        metadata={
            "help": "The model card's license, a Hub license id (apache-2.0, mit, cc-by-4.0, other, ...): written "
            "into the card's metadata, and into the card push_to_hub uploads."
        },
    )

    def __post_init__(self):
        from east_hf.hf.cards.model_card import check_license

        check_license(self.license)  # the Hub refuses a card with another license: say so before training


@dataclass
class ParsedArguments:
    """What ``EASTArgumentParser.parse`` returns: the four dataclasses and the recipe as read."""

    script: ScriptArguments
    data: Any  # east_hf.hf.data.DataArguments
    model: Any  # east_hf.hf.models.build.ModelArguments
    training: Any  # east_hf.hf.config.east_config.EASTConfig
    recipe: dict[str, Any]
    recipe_path: str | None
    overrides: dict[str, Any] = field(default_factory=dict)


def default_output_dir(dataset_name: str) -> str:
    """Where a run without a recipe writes: ``runs/<name>``, the name being the file or folder name of a local data
    set (``data/train.csv`` -> ``train``), else the data set's name with every character other than a letter, a
    digit, ``.``, ``-`` or ``_`` replaced by ``_`` (``sklearn:iris`` -> ``sklearn_iris``).

    >>> default_output_dir("sklearn:breast_cancer"), default_output_dir("uoft-cs/cifar10")
    ('runs/sklearn_breast_cancer', 'runs/uoft-cs_cifar10')
    """
    path = Path(str(dataset_name)).expanduser()
    name = (path.stem if path.is_file() else path.name) if path.exists() else str(dataset_name)
    return str(Path("runs") / (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"))


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, lines: tuple[int, int]):
        super().__init__(f"{key!r} on lines {lines[0]} and {lines[1]}")
        self.key, self.lines = key, lines


class _RecipeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping, where YAML would keep the last silently."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # ``<<: *defaults`` merges, and is meant to be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _DuplicateKey(key, (seen[key], line))
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_recipe(path: str | Path) -> dict[str, Any]:
    """Read a YAML recipe: a flat mapping of field names (or ``ALIASES``) to values. Empty file: ``{}``. A key written
    twice is an error (YAML would keep the last one silently)."""
    path = Path(path)
    if not path.is_file():
        close = difflib.get_close_matches(path.stem, list(packaged_recipes()), n=1)
        hint = f"; did you mean the packaged recipe {close[0]!r}?" if close else ""
        raise ValueError(
            f"recipe {str(path)!r} does not exist (expected a YAML path or a packaged recipe name, see "
            f"--list_recipes){hint}"
        )
    try:
        recipe = yaml.load(path.read_text(), Loader=_RecipeLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as e:
        first, second = e.lines
        where = f"line {first}" if first == second else f"lines {first} and {second}"
        raise ValueError(
            f"Expected each key once in recipe {str(path)!r}, got {e.key!r} twice ({where}): keep the one you mean"
        ) from None
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


def _kind(hint: Any) -> tuple[type | None, bool]:
    """(scalar type, is a list) of a field's type hint, where it is str, int or float (Optional unwrapped)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            return None, False
        hint = args[0]
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint) or (None,)
        return (item if item in (str, int, float) else None), True
    return (hint if hint in (str, int, float) else None), False


def _default_dataclasses() -> tuple[type, ...]:
    from east_hf.hf.config.east_config import EASTConfig
    from east_hf.hf.data.arguments import DataArguments
    from east_hf.hf.models.build import ModelArguments

    return ScriptArguments, DataArguments, ModelArguments, EASTConfig


class EASTArgumentParser(OneLineErrors, HfArgumentParser):
    """``HfArgumentParser`` over ``ScriptArguments``, ``DataArguments``, ``ModelArguments`` and ``EASTConfig``.

    ``parse(argv)`` reads ``RECIPE.yaml`` (the first argument, or ``--recipe PATH``, or ``--demo`` for the packaged
    demo recipe), makes its values the defaults of a fresh parser (TRL's ``TrlParser`` pattern) and parses the
    remaining flags over them. What it adds to ``HfArgumentParser``: aliases and suggestions for unknown keys and
    flags, recipe values checked against the field types, YAML values for ``Any`` fields (``east_beta``), defaults
    derived from other fields, and errors that exit with status 2 and one line on stderr.
    """

    def __init__(self, dataclass_types: Sequence[type] | None = None, prog: str = PROG, **kwargs):
        dataclass_types = tuple(dataclass_types or _default_dataclasses())
        kwargs.setdefault("allow_abbrev", False)  # `--lr 1` must not silently mean some `--lr_scheduler_...`
        kwargs.setdefault(
            "usage",
            f"{prog} RECIPE.yaml|NAME [--field value ...]  |  {prog} --dataset_name DATA [--field value ...]  |  "
            f"{prog} --demo  |  {prog} --list_recipes  |  {prog} --help",
        )
        kwargs.setdefault(
            "description",
            "Train a classifier with EAST (a surrogate of F-beta, accuracy or MCC) from a YAML recipe. Every field "
            "below can be set in the recipe (as `field: value`) and overridden here (as `--field value`). Aliases: "
            + ", ".join(f"--{a} = --{f}" for a, f in ALIASES.items())
            + ".",
        )
        super().__init__(dataclass_types, prog=prog, **kwargs)
        self._kwargs = dict(kwargs, prog=prog)
        self._fields = {f.name: f for dtype in dataclass_types for f in dataclasses.fields(dtype) if f.init}
        self._hints = {k: v for dtype in dataclass_types for k, v in typing.get_type_hints(dtype).items()}
        # Any fields are read as YAML (_normalise_flags): argparse must keep a text value (a path) as text
        for action in self._actions:
            if self._hints.get(action.dest) is Any:
                action.type = None

    def canonical(self, key: str, flag: bool = False) -> str:
        """The field name of a recipe key or flag name (aliases resolved, dashes as underscores), or an error."""
        for name in (ALIASES.get(key, key), ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))):
            if name in self._fields:
                return name
        name = key.replace("-", "_")
        close = difflib.get_close_matches(name, sorted(set(self._fields) | set(ALIASES)), n=1, cutoff=0.6)
        prefix = "--" if flag else ""
        hint = f"; did you mean {prefix}{close[0]}?" if close else ""
        self.error(f"unknown {'argument' if flag else 'recipe key'} {prefix}{key}{hint}")

    def _negated(self, name: str) -> str | None:
        """The boolean field that ``--no_<field>`` switches off, if ``name`` is such a flag."""
        for prefix in ("no_", "no-"):
            if name.startswith(prefix):
                field_name = name[len(prefix) :].replace("-", "_")
                spec = self._fields.get(field_name)
                if spec is not None and spec.default is True:
                    return field_name
        return None

    # ---- parsing ----
    def _split_argv(self, argv: list[str]) -> tuple[str | None, list[str]]:
        """(recipe path, remaining flags): the recipe is the first bare argument, ``--recipe PATH`` or ``--demo``."""
        recipe, rest, i = None, [], 0
        while i < len(argv):
            arg = argv[i]
            if arg == "--demo":
                recipe = str(demo_recipe_path())
            elif arg == "--list_recipes":
                print(recipe_list())
                self.exit(0)
            elif arg == "--recipe" or arg.startswith("--recipe="):
                if "=" in arg:
                    recipe = resolve_recipe(arg.split("=", 1)[1])
                elif i + 1 < len(argv):
                    recipe, i = resolve_recipe(argv[i + 1]), i + 1
                else:
                    self.error("argument --recipe: expected a path to a YAML recipe")
            elif recipe is None and not rest and not arg.startswith("-"):
                recipe = resolve_recipe(arg)
            else:
                rest.append(arg)
            i += 1
        return recipe, rest

    def _normalise_flags(self, args: list[str]) -> tuple[list[str], dict[str, Any], set[str]]:
        """(flags for argparse with aliases resolved, values of ``Any`` fields read as YAML, the fields given)."""
        out, any_values, given = [], {}, set()
        i = 0
        while i < len(args):
            arg = args[i]
            match = re.fullmatch(r"--([A-Za-z0-9_-]+)(=.*)?", arg, flags=re.DOTALL)
            i += 1
            if match is None:
                out.append(arg)
                continue
            name, value = match.group(1), match.group(2)
            negated = self._negated(name)
            if negated is not None:
                out.append(arg)
                given.add(negated)
                continue
            name = self.canonical(name, flag=True)
            given.add(name)
            if self._hints.get(name) is Any:  # argparse cannot type these: read the value as YAML here
                if value is None:
                    if i >= len(args):
                        self.error(f"argument --{name}: expected one argument")
                    value, i = "=" + args[i], i + 1
                any_values[name] = _value(value[1:])
                continue
            out.append(f"--{name}{value or ''}")
        return out, any_values, given

    def _recipe_defaults(self, recipe: Mapping[str, Any]) -> dict[str, Any]:
        """Recipe values keyed by field; numbers of int/float fields are checked here (argparse checks only text)."""
        defaults = {}
        for key, value in recipe.items():
            name = self.canonical(str(key))
            if name in defaults:
                self.error(f"recipe key {key!r} sets {name!r}, which the recipe already sets")
            kind, is_list = _kind(self._hints.get(name))
            if is_list and kind is not None and value is not None:
                items = value if isinstance(value, (list, tuple)) else [value]  # `positive_classes: 1` means [1]
                value = [self._typed(key, kind, item) for item in items]
            elif kind is not None and value is not None:
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

    def _with_defaults(self, defaults: Mapping[str, Any]) -> EASTArgumentParser:
        """A fresh parser over the same dataclasses whose defaults are ``defaults`` (this one stays pristine)."""
        parser = type(self)(self.dataclass_types, **self._kwargs)
        parser.set_defaults(**defaults)
        return parser

    def parse(self, argv: Sequence[str] | None = None) -> ParsedArguments:
        """Parse ``[RECIPE.yaml] [--field value ...]`` into a ``ParsedArguments``; exit 2 on any input error. Without a
        recipe the flags give every field, ``--dataset_name`` at least, and the run writes into ``runs/<data set>``."""
        argv = list(sys.argv[1:] if argv is None else argv)
        wants_help = any(a in ("-h", "--help") for a in argv)
        recipe_path, rest = self._split_argv([a for a in argv if a not in ("-h", "--help")])
        if wants_help:  # the defaults shown are east-train's, and the recipe's when one is given
            defaults = dict(SCRIPT_DEFAULTS)
            if recipe_path is not None and Path(recipe_path).is_file():
                defaults.update(self._recipe_defaults(load_recipe(recipe_path)))
            self._with_defaults(defaults).print_help()
            self.exit(0)
        flags, any_values, given = self._normalise_flags(rest)
        if recipe_path is None and "dataset_name" not in given:  # every field as a flag needs at least the data
            self.error(
                "expected a recipe, e.g. `east-train recipes/demo.yaml` (or `east-train --demo`, or the fields as "
                "flags starting with --dataset_name; see --help)"
            )
        try:
            recipe = {} if recipe_path is None else load_recipe(recipe_path)
        except ValueError as e:
            self.error(str(e))
        output_dir = None if recipe_path is None else str(Path("runs") / Path(recipe_path).stem)
        run_defaults = dict(SCRIPT_DEFAULTS, output_dir=output_dir)
        recipe_values = self._recipe_defaults(recipe)
        parser = self._with_defaults({**run_defaults, **recipe_values, **any_values})
        namespace, remaining = parser.parse_known_args(flags)
        if remaining:
            self.error(f"unexpected argument {remaining[0]!r} (expected --field value pairs after the recipe)")
        if "east_loss" in given:
            self._unset_east_only(namespace, set(recipe_values) - given)
        if namespace.output_dir is None and namespace.dataset_name is not None:
            namespace.output_dir = default_output_dir(namespace.dataset_name)
        overrides = {dest: getattr(namespace, dest) for dest in sorted(given)}
        outputs = self._to_dataclasses(namespace)
        self._validate(*outputs)
        return ParsedArguments(*outputs, recipe, recipe_path, overrides)

    def _unset_east_only(self, namespace: Namespace, from_recipe: set[str]) -> None:
        """A loss chosen by flag that does not take the recipe's settings of EAST's cross-entropy mix (``--loss la``
        on a fine-tune recipe) leaves them at their defaults, so that a recipe compares its losses as it is. Given as
        flags, they stay, and the loss's checks refuse them."""
        from east_hf.hf.config.checks import MIX_FIELDS, fields_left_unused

        try:
            unused = fields_left_unused(namespace.east_loss)
        except ValueError:  # an unknown loss: EASTConfig's check says so
            return
        for name in unused & MIX_FIELDS.keys() & from_recipe:
            setattr(namespace, name, self.get_default(name))

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
        from transformers.integrations import get_available_reporting_integrations

        requested = [r for r in (training.report_to or []) if r not in ("none", "all")]
        missing = [r for r in requested if r not in get_available_reporting_integrations()]
        if missing:  # transformers would fail later with a RuntimeError traceback, after the data is loaded
            self.error(
                f"report_to {missing[0]!r} needs its package ({missing[0]}), which is not installed: install it "
                "or set --report_to none"
            )
