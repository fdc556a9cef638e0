"""The checks of user settings, one per setting: every layer (the core objects, the Trainer's metrics, the config, the
CLI) calls these instead of repeating them, so a setting is accepted, and refused, the same way everywhere.

Each check raises a one-line ``ValueError`` (``TypeError`` for a wrong kind of value) that says what was expected
and what arrived, ``"Expected average in (...), got 'samples'"``, and returns the value as the caller uses it.
Pure Python: no tensors here (``surrogate.valid_rows`` formats the tensor inputs).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from numbers import Integral, Real
from pathlib import Path
from typing import Any

__all__ = [
    "AVERAGES",
    "MAX_TEMPERATURE",
    "MULTILABEL_AVERAGES",
    "check_average",
    "check_choice",
    "check_class_priors",
    "check_int",
    "check_metric",
    "check_multilabel_average",
    "check_num_classes",
    "check_pos_label",
    "check_range",
    "check_temperature",
    "check_zero_division",
    "parse_beta",
    "parse_class_priors",
]

AVERAGES = ("macro", "weighted", "micro", "binary")
MAX_TEMPERATURE = 0.4  # the slopes of Eq. (linear-param) divide by zero at T = 0.4 (m3 when tau = 0.5)


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``.

    >>> check_choice("threshold_mode", "rel", ("abs", "rel"))
    'rel'
    """
    if isinstance(value, bool) or value not in choices:
        raise ValueError(f"Expected {name} in {tuple(choices)}, got {value!r}")
    return value


def check_range(name: str, value: Any, low: float, high: float, bounds: str = "[]") -> float:
    """``value`` as a float if it lies in the interval from ``low`` to ``high``; ``bounds`` closes (``[``, ``]``) or
    opens (``(``, ``)``) each end, e.g. ``"[)"`` for [low, high). NaN and non-numbers are refused.

    >>> check_range("dropout", 0.25, 0, 1, "[)")
    0.25
    """
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok:
        above = low <= value if bounds[0] == "[" else low < value
        below = value <= high if bounds[1] == "]" else value < high
        ok = above and below
    if not ok:
        raise ValueError(f"Expected {name} in {bounds[0]}{low:g}, {high:g}{bounds[1]}, got {value!r}")
    return float(value)


def check_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` if it is an int (not a bool) >= ``minimum``.

    >>> check_int("max_rounds", 10)
    10
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"Expected {name} as an int >= {minimum}, got {value!r}")
    return int(value)


def check_num_classes(num_classes: Any) -> int:
    """The number of classes C: an int >= 2 (a confusion matrix needs two classes)."""
    return check_int("num_classes", num_classes, 2)


def check_temperature(temperature: Any) -> float:
    """``temperature`` as a float, or raise if it is outside the open interval (0, ``MAX_TEMPERATURE``)."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(
            f"Expected temperature as a float in (0, {MAX_TEMPERATURE:g}), got {type(temperature).__name__}"
        )
    temperature = float(temperature)
    if not 0.0 < temperature < MAX_TEMPERATURE:
        raise ValueError(f"Expected temperature in (0, {MAX_TEMPERATURE:g}), got {temperature}")
    return temperature


def check_metric(metric: Any, names: Collection[str]) -> str | Callable:
    """A name among ``names`` (the registry, ``east_hf.core.metrics.METRICS``, which validates its own arguments with
    this module), or a callable (C, C) -> scalar to maximise.

    >>> check_metric("f1", ("fbeta", "f1"))
    'f1'
    """
    if isinstance(metric, str):
        if metric not in names:
            raise ValueError(f"Expected metric in {sorted(names)} or a callable, got {metric!r}")
    elif not callable(metric):
        raise TypeError(f"Expected metric as a name or a callable (C, C) -> scalar, got {type(metric).__name__}")
    return metric


def check_pos_label(pos_label: Any, num_classes: int, why: str = "") -> int:
    """``pos_label`` if it is a class index in [0, C); ``why`` ends the expectation, e.g. ``" for average='binary'"``.

    >>> check_pos_label(1, 2)
    1
    """
    if isinstance(pos_label, bool) or not isinstance(pos_label, Integral) or not 0 <= pos_label < num_classes:
        raise ValueError(f"Expected pos_label in [0, {num_classes - 1}]{why}, got {pos_label!r}")
    return int(pos_label)


def check_average(
    average: Any, num_classes: int | None = None, pos_label: Any = 1, *, allow_none: bool = False
) -> str | None:
    """``average`` if it is one of ``AVERAGES`` (or None, the per-class values, where ``allow_none``); with
    ``num_classes`` given, ``average="binary"`` also needs ``pos_label`` in [0, C).

    >>> check_average("macro"), check_average(None, allow_none=True)
    ('macro', None)
    """
    if not (average is None and allow_none) and average not in AVERAGES:
        raise ValueError(f"Expected average in {AVERAGES}{' or None' if allow_none else ''}, got {average!r}")
    if average == "binary" and num_classes is not None:
        check_pos_label(pos_label, num_classes, " for average='binary'")
    return average


def check_zero_division(zero_division: Any) -> float:
    """The value of a ratio whose denominator is zero: a float in [0, 1]."""
    if isinstance(zero_division, bool) or not isinstance(zero_division, (int, float)) or not 0 <= zero_division <= 1:
        raise ValueError(f"Expected zero_division as a float in [0, 1], got {zero_division!r}")
    return float(zero_division)


def parse_beta(beta: Any, name: str = "beta") -> Any:
    """F-beta's beta as given, or read from its JSON text (``"0.5"``, ``"[1, 2]"``, ``'{"cat": 0.25}'``): a number, a
    per-class list or a ``{class: beta}`` mapping. ``name`` names the setting in the error (e.g. ``"east_beta"``).

    >>> parse_beta('{"cat": 0.25}'), parse_beta(2.0)
    ({'cat': 0.25}, 2.0)
    """
    if not isinstance(beta, str):
        return beta
    try:
        return json.loads(beta)
    except json.JSONDecodeError:
        raise ValueError(f"Expected {name} as a number, a list or a JSON mapping, got {beta!r}") from None


def check_class_priors(values: Any, num_classes: int | None = None, name: str = "class_priors") -> list[float]:
    """Class counts or priors, one per class, as floats: finite, >= 0, not all 0 (any scale: the losses use
    value / sum, so counts and probabilities give the same priors); with ``num_classes``, exactly that many.

    >>> check_class_priors([90, 10], 2), check_class_priors([0.75, 0.25])
    ([90.0, 10.0], [0.75, 0.25])
    """
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        raise TypeError(f"Expected {name} as a list of per-class counts or priors, got {type(values).__name__}")
    if not all(isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"Expected {name} as finite numbers >= 0, got {list(values)}")
    if len(values) < 2 or not sum(values) > 0:
        raise ValueError(f"Expected {name} for >= 2 classes, not all 0, got {list(values)}")
    if num_classes is not None and len(values) != num_classes:
        raise ValueError(f"Expected {name} for {num_classes} classes, got {len(values)} values")
    return [float(v) for v in values]


def parse_class_priors(priors: Any, name: str = "class_priors") -> list[Any] | dict[str, Any]:
    """Class counts or priors as given (a per-class list or a ``{class: value}`` mapping), or read from JSON text
    (``"[90, 10]"``), a ``.json`` file (a list or a mapping) or a ``.csv`` file of ``class,value`` rows (a header row
    is skipped). The values are checked (``check_class_priors``); the classes are resolved by
    ``east_hf.core.classes.resolve_class_priors``, where the class names are known.

    >>> parse_class_priors('{"cat": 90, "dog": 10}'), parse_class_priors([0.9, 0.1])
    ({'cat': 90, 'dog': 10}, [0.9, 0.1])
    """
    if isinstance(priors, (str, Path)):
        text = str(priors).strip()
        if text[:1] in ("[", "{"):
            try:
                priors = json.loads(text)
            except json.JSONDecodeError:
                raise ValueError(f"Expected {name} as JSON, got {text!r}") from None
        else:
            priors = _read_class_priors(Path(text), name)
    if isinstance(priors, Mapping):
        check_class_priors(list(priors.values()), name=name)
        return {str(k): v for k, v in priors.items()}
    if isinstance(priors, Sequence) and not isinstance(priors, (str, bytes)):
        check_class_priors(list(priors), name=name)
        return list(priors)
    raise TypeError(
        f"Expected {name} as a list, a {{class: value}} mapping or a .json / .csv file, got {type(priors).__name__}"
    )


def _read_class_priors(path: Path, name: str) -> Any:
    """The list or mapping of a ``.json`` file, or the ``{class: value}`` mapping of a ``class,value`` ``.csv``."""
    if path.suffix.lower() not in (".json", ".csv"):
        raise ValueError(f"Expected {name} as a list, a mapping or a .json / .csv file, got {str(path)!r}")
    if not path.is_file():
        raise ValueError(f"Expected {name} as an existing file, got {str(path)!r} (no such file)")
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"Expected {name} as a JSON list or mapping in {str(path)!r}, got: {e}") from None
    rows = [row for row in csv.reader(text.splitlines()) if any(cell.strip() for cell in row)]
    values: dict[str, float] = {}
    for line, row in enumerate(rows, 1):
        if len(row) != 2:
            raise ValueError(f"Expected {name} rows as class,value in {str(path)!r}, got {row} on row {line}")
        key, value = row[0].strip(), row[1].strip()
        try:
            number = float(value)
        except ValueError:
            if line == 1:
                continue  # a header such as "class,count"
            raise ValueError(f"Expected a number in {str(path)!r} row {line}, got {value!r}") from None
        if key in values:
            raise ValueError(f"Expected each class once in {str(path)!r}, got {key!r} twice")
        values[key] = number
    return values


MULTILABEL_AVERAGES = ("macro", "micro", "weighted", "samples")


def check_multilabel_average(average: Any, *, allow_none: bool = False) -> str | None:
    """``average`` for multi-label scores: one of ``MULTILABEL_AVERAGES`` (or None, the per-label values, where
    ``allow_none``); ``"binary"`` is refused with a pointer to the multi-label averages.

    >>> check_multilabel_average("samples"), check_multilabel_average(None, allow_none=True)
    ('samples', None)
    """
    if average is None and allow_none:
        return None
    if average == "binary":
        raise ValueError(
            f"Expected average in {MULTILABEL_AVERAGES} for multi-label labels, got 'binary' (each label is already "
            "binary: average=None gives the per-label scores)"
        )
    if average not in MULTILABEL_AVERAGES:
        raise ValueError(
            f"Expected average in {MULTILABEL_AVERAGES}{' or None' if allow_none else ''}, got {average!r}"
        )
    return average
