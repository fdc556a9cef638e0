"""Class names to indices, and per-class settings given by name: the one resolver every layer uses. Pure Python.

A class is named by its label (as in a model's ``config.id2label`` or a data set's ``ClassLabel`` names), by the
metric-key-safe form of that label (``safe_name``), or by its index (an int or a string of digits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from east_hf.core.validation import check_class_priors, parse_beta, parse_class_priors

__all__ = ["class_index", "class_names", "resolve_beta", "resolve_class_priors", "safe_name"]


def safe_name(name: Any) -> str:
    """A metric-key-safe class name: lowercase, every run of non-alphanumerics replaced by ``_``.

    >>> safe_name("Traffic Light"), safe_name("T-shirt/top"), safe_name(3)
    ('traffic_light', 't_shirt_top', '3')
    """
    return re.sub(r"[^0-9a-z]+", "_", str(name).lower()).strip("_")


def class_names(names: Sequence[str] | Mapping[Any, str] | None, num_classes: int) -> list[str]:
    """The label of each of ``num_classes`` classes, from a list of names or an ``id2label`` mapping
    (else the index)."""
    if isinstance(names, Mapping):
        labels = {int(k): str(v) for k, v in names.items()}
        return [labels.get(k, str(k)) for k in range(num_classes)]
    names = list(names or [])
    return [str(names[k]) if k < len(names) else str(k) for k in range(num_classes)]


def class_index(
    name: Any, names: Sequence[str] | Mapping[Any, str] | None, num_classes: int, what: str = "a class"
) -> int:
    """The index of the class ``name``: its label, its ``safe_name``, or an index in ``[0, num_classes)``.

    ``what`` names the setting in the error, e.g. ``"east_beta keys"``.

    >>> class_index("cat", ["dog", "cat"], 2), class_index("Traffic_light", {0: "car", 1: "Traffic Light"}, 2)
    (1, 1)
    >>> class_index("1", None, 2)
    1
    """
    labels = class_names(names, num_classes)
    if isinstance(name, str) and name in labels:
        return labels.index(name)
    safe = [safe_name(label) for label in labels]
    if isinstance(name, str) and safe_name(name) in safe and safe.count(safe_name(name)) == 1:
        return safe.index(safe_name(name))
    if not isinstance(name, bool) and re.fullmatch(r"\d+", str(name)) and int(name) < num_classes:
        return int(name)
    raise ValueError(f"Expected {what} among the class names {labels} or indices 0..{num_classes - 1}, got {name!r}")


def resolve_beta(beta: Any, names: Sequence[str] | Mapping[Any, str] | None, num_classes: int) -> float | list[float]:
    """A float, a per-class list or a ``{class: beta}`` mapping (or its JSON) as a float or ``num_classes`` values.

    A mapping gives beta for the named classes (see ``class_index``); the others get 1.0.

    >>> resolve_beta({"cat": 0.25}, ["dog", "cat", "frog"], 3)
    [1.0, 0.25, 1.0]
    """
    beta = parse_beta(beta)
    if isinstance(beta, Mapping):
        values = [1.0] * num_classes
        for name, value in beta.items():
            values[class_index(name, names, num_classes, what="east_beta keys")] = float(value)
        return values
    if isinstance(beta, (list, tuple)):
        if len(beta) != num_classes:
            raise ValueError(f"Expected beta as a float or {num_classes} per-class values, got {len(beta)} values")
        return [float(b) for b in beta]
    return float(beta)


def resolve_class_priors(
    priors: Any, names: Sequence[str] | Mapping[Any, str] | None, num_classes: int | None, name: str = "class_priors"
) -> list[float]:
    """Per-class counts or priors (a list by index, a ``{class: value}`` mapping, JSON text or a ``.json`` / ``.csv``
    file, see ``validation.parse_class_priors``) as one value per class, in class order. A mapping names every class
    (see ``class_index``); a list without known ``num_classes`` sets it. ``name`` names the setting in the errors.

    >>> resolve_class_priors({"dog": 10, "cat": 90}, ["cat", "dog"], 2)
    [90.0, 10.0]
    """
    priors = parse_class_priors(priors, name)
    if not isinstance(priors, Mapping):
        return check_class_priors(priors, num_classes, name)
    if num_classes is None:
        num_classes = len(priors)
    values: list[Any] = [None] * num_classes
    for key, value in priors.items():
        k = class_index(key, names, num_classes, what=f"{name} keys")
        if values[k] is not None:
            raise ValueError(f"Expected each class once in {name}, got class {k} twice (key {key!r})")
        values[k] = value
    missing = [label for label, value in zip(class_names(names, num_classes), values) if value is None]
    if missing:
        raise ValueError(f"Expected {name} for every class, got none for {missing}")
    return check_class_priors(values, num_classes, name)
