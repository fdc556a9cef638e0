"""east_hf.core.validation: what each check accepts, its exact one-line error, and every layer refusing alike."""

import math
import re

import numpy as np
import pytest
import torch

from east_hf.core.validation import (
    AVERAGES,
    check_average,
    check_choice,
    check_int,
    check_metric,
    check_num_classes,
    check_pos_label,
    check_range,
    check_temperature,
    check_zero_division,
    parse_beta,
)


def _raises(error, message, check, *args, **kwargs):
    """``check(*args, **kwargs)`` raises ``error`` with exactly ``message``, on one line."""
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        check(*args, **kwargs)


def test_check_choice():
    assert check_choice("threshold_mode", "abs", ("abs", "rel")) == "abs"
    _raises(
        ValueError,
        "Expected threshold_mode in ('abs', 'rel'), got 'ABS'",
        check_choice,
        "threshold_mode",
        "ABS",
        ["abs", "rel"],
    )
    _raises(
        ValueError, "Expected flag in (0, 1), got True", check_choice, "flag", True, (0, 1)
    )  # True == 1, still refused


def test_check_range_bounds():
    assert check_range("dropout", 0, 0, 1, "[)") == 0.0 and isinstance(check_range("dropout", 0, 0, 1, "[)"), float)
    assert check_range("imbalance_ratio", 1, 0, 1, "(]") == 1.0
    assert check_range("beta_floor", 1e9, 0, math.inf, "[)") == 1e9
    _raises(ValueError, "Expected dropout in [0, 1), got 1", check_range, "dropout", 1, 0, 1, "[)")
    _raises(ValueError, "Expected imbalance_ratio in (0, 1], got 0.0", check_range, "imbalance_ratio", 0.0, 0, 1, "(]")
    _raises(
        ValueError, "Expected beta_floor in [0, inf), got inf", check_range, "beta_floor", math.inf, 0, math.inf, "[)"
    )
    _raises(ValueError, "Expected decay in (0, 1), got nan", check_range, "decay", math.nan, 0, 1, "()")
    _raises(ValueError, "Expected decay in (0, 1), got '0.5'", check_range, "decay", "0.5", 0, 1, "()")
    _raises(ValueError, "Expected decay in (0, 1), got True", check_range, "decay", True, 0, 1, "()")


def test_check_int_and_num_classes():
    assert check_int("max_rounds", 1) == 1 and check_int("max_rounds", np.int64(3)) == 3
    _raises(ValueError, "Expected max_rounds as an int >= 1, got 0", check_int, "max_rounds", 0)
    _raises(ValueError, "Expected max_rounds as an int >= 1, got 2.0", check_int, "max_rounds", 2.0)
    _raises(ValueError, "Expected max_rounds as an int >= 1, got True", check_int, "max_rounds", True)
    assert check_num_classes(2) == 2
    _raises(ValueError, "Expected num_classes as an int >= 2, got 1", check_num_classes, 1)


def test_check_temperature():
    assert check_temperature(0.2) == 0.2 and check_temperature(1e-9) == 1e-9
    _raises(ValueError, "Expected temperature in (0, 0.4), got 0.4", check_temperature, 0.4)
    _raises(ValueError, "Expected temperature in (0, 0.4), got 0.0", check_temperature, 0)
    _raises(TypeError, "Expected temperature as a float in (0, 0.4), got str", check_temperature, "0.2")


def test_check_metric():
    from east_hf.core.metrics import METRICS

    assert check_metric("f1", METRICS) == "f1" and check_metric(len, METRICS) is len
    names = "['accuracy', 'f1', 'fbeta', 'mcc', 'precision', 'recall']"
    _raises(ValueError, f"Expected metric in {names} or a callable, got 'f2'", check_metric, "f2", METRICS)
    _raises(TypeError, "Expected metric as a name or a callable (C, C) -> scalar, got int", check_metric, 3, METRICS)


def test_check_average_and_pos_label():
    assert AVERAGES == ("macro", "weighted", "micro", "binary")
    assert [check_average(a) for a in AVERAGES] == list(AVERAGES)
    assert check_average(None, allow_none=True) is None and check_average("binary", 3, 2) == "binary"
    _raises(ValueError, f"Expected average in {AVERAGES}, got 'samples'", check_average, "samples")
    _raises(ValueError, f"Expected average in {AVERAGES}, got None", check_average, None)
    _raises(
        ValueError, f"Expected average in {AVERAGES} or None, got 'samples'", check_average, "samples", allow_none=True
    )
    _raises(ValueError, "Expected pos_label in [0, 1] for average='binary', got 2", check_average, "binary", 2, 2)
    assert check_average("macro", 2, 5) == "macro"  # pos_label matters for the binary average only
    assert check_pos_label(0, 2) == 0 and check_pos_label(np.int64(1), 2) == 1
    _raises(ValueError, "Expected pos_label in [0, 2], got 3", check_pos_label, 3, 3)
    _raises(ValueError, "Expected pos_label in [0, 2], got -1", check_pos_label, -1, 3)
    _raises(ValueError, "Expected pos_label in [0, 2], got 1.0", check_pos_label, 1.0, 3)


def test_check_zero_division():
    assert check_zero_division(0) == 0.0 and check_zero_division(1.0) == 1.0
    _raises(ValueError, "Expected zero_division as a float in [0, 1], got 2", check_zero_division, 2)
    _raises(ValueError, "Expected zero_division as a float in [0, 1], got 'warn'", check_zero_division, "warn")
    _raises(ValueError, "Expected zero_division as a float in [0, 1], got False", check_zero_division, False)


def test_parse_beta():
    assert parse_beta("0.5") == 0.5 and parse_beta("[1, 2]") == [1, 2] and parse_beta('{"cat": 0.25}') == {"cat": 0.25}
    assert parse_beta(2.0) == 2.0 and parse_beta({"dog": 3}) == {"dog": 3}  # not text: as given
    _raises(ValueError, "Expected beta as a number, a list or a JSON mapping, got '{cat: 2'", parse_beta, "{cat: 2")
    _raises(
        ValueError, "Expected east_beta as a number, a list or a JSON mapping, got 'x'", parse_beta, "x", "east_beta"
    )


def test_every_layer_refuses_a_bad_average_alike():
    """One source: the loss, the Trainer's compute_metrics, the evaluate-style report and the decision tuner."""
    from reference_metrics import fbeta_report

    from east_hf import EASTLoss, tune_logit_offsets
    from east_hf.hf.metrics import build_compute_metrics

    message = "^" + re.escape("Expected average in ('macro', 'weighted', 'micro', 'binary'), got 'samples'") + "$"
    logits, labels = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    for refuse in (
        lambda: EASTLoss(average="samples"),
        lambda: build_compute_metrics(3, average="samples"),
        lambda: fbeta_report([0, 1], [0, 1], average="samples"),
        lambda: tune_logit_offsets(logits, labels, average="samples"),
    ):
        with pytest.raises(ValueError, match=message):
            refuse()
