"""AnnealingSchedule and temperature_at (east_hf.core.annealing): exact decisions, stage changes and stop points."""

from __future__ import annotations

import inspect
import json
import math

import pytest

from east_hf.core.annealing import DEFAULT_DECAY, DEFAULT_TEMPERATURE, AnnealingSchedule, Decision, temperature_at
from east_hf.core.east_loss import EASTLoss
from east_hf.hf.config.east_config import EASTConfig

CONT, BEST, NEXT, STOP = Decision.CONTINUE, Decision.IMPROVED, Decision.NEXT_STAGE, Decision.STOP


def run(schedule: AnnealingSchedule, values) -> list[Decision]:
    """Feed (stage_value, anneal_value) pairs at steps 1, 2, ...; stop feeding after STOP."""
    decisions = []
    for step, (stage_value, anneal_value) in enumerate(values, start=1):
        decisions.append(schedule.update(stage_value, anneal_value, step=step))
        if decisions[-1] is STOP:
            break
    return decisions


def test_temperature_at_is_geometric():
    assert temperature_at(0) == 0.2
    assert [temperature_at(k, 0.2, 0.5) for k in range(4)] == [0.2, 0.1, 0.05, 0.025]
    assert math.isclose(temperature_at(3, 0.2, 0.9), 0.2 * 0.9**3, rel_tol=0, abs_tol=0)
    assert temperature_at(-1, 0.3, 0.5) == 0.3  # a warm start is logged at T0


def test_lr_scale_is_lr_decay_to_the_stage_and_one_in_the_warm_start():
    s = AnnealingSchedule(warm_start="ce", warm_start_steps=2, lr_decay=0.5, patience=1, stage_patience=10)
    seen = [(s.stage, s.lr_scale)]
    for step, value in enumerate((0.5, 0.5, 0.6, 0.6, 0.7, 0.7), start=2):  # every repeat ends its stage
        s.update(value, 0.5, step=step)
        seen.append((s.stage, s.lr_scale))
    assert seen[0] == (-1, 1.0) and seen[1] == (0, 1.0)  # the warm start and stage 0 train at the optimiser's rate
    assert [stage for stage, _ in seen][-1] >= 2
    assert all(scale == 0.5**stage for stage, scale in seen[1:])
    assert AnnealingSchedule(**s.settings()).lr_decay == 0.5


def test_stage_patience_stops_after_stages_without_improvement():
    s = AnnealingSchedule(temperature=0.2, decay=0.5, patience=2, stage_patience=2, min_temperature=0.001)
    # stage 0: best F1 0.6; stage 1: 0.7 (improves); stages 2 and 3: 0.7 again (ties) -> stop after stage 3
    values = [(1.0, 0.5), (0.9, 0.6), (0.95, 0.6), (0.95, 0.6)]  # stage 0 ends at step 4
    values += [(0.8, 0.7), (0.9, 0.6), (0.9, 0.6)]  # stage 1 ends at step 7
    values += [(0.7, 0.7), (0.8, 0.7), (0.8, 0.7)]  # stage 2 ends at step 10
    values += [(0.6, 0.65), (0.7, 0.7), (0.7, 0.7)]  # stage 3 ends at step 13: stop
    values += [(0.1, 0.9)]  # never fed
    temperatures = []
    decisions = []
    for step, (loss, f1) in enumerate(values, start=1):
        decisions.append(s.update(loss, f1, step=step))
        temperatures.append(s.temperature)
        if decisions[-1] is STOP:
            break
    assert decisions == [BEST, BEST, CONT, NEXT, BEST, CONT, NEXT, BEST, CONT, NEXT, BEST, CONT, STOP]
    assert temperatures == [0.2] * 3 + [0.1] * 3 + [0.05] * 3 + [0.025] * 4
    assert (s.finished, s.stop_reason, s.stage) == (True, "stage_patience", 3)
    assert (s.best_anneal, s.best_anneal_stage, s.stages_without_improvement) == (0.7, 1, 2)
    assert s.update(0.0, 1.0, step=14) is STOP  # finished is final


def test_ties_are_not_improvements_within_a_stage():
    s = AnnealingSchedule(patience=2, stage_patience=5)
    assert run(s, [(0.5, 0.1), (0.5, 0.1), (0.5, 0.1)]) == [BEST, CONT, NEXT]
    assert (s.stage, s.stage_best, s.bad_evaluations) == (1, None, 0)


def test_improvements_within_threshold_do_not_count():
    s = AnnealingSchedule(patience=2, stage_patience=1, threshold=0.01, threshold_mode="abs", anneal_threshold=0.01)
    # within the stage: 0.995 is 0.005 below 1.0 (not enough), 0.985 is 0.015 below (enough)
    assert run(s, [(1.0, 0.5), (0.995, 0.5), (0.985, 0.5), (0.98, 0.505), (0.976, 0.505)]) == [
        BEST,
        CONT,
        BEST,
        CONT,
        NEXT,
    ]
    assert s.stage_best is None and s.best_anneal == 0.505
    # across stages: 0.51 beats 0.505 by 0.005 < threshold -> a stage without improvement -> stop (stage_patience 1)
    assert run(s, [(0.5, 0.51), (0.5, 0.51), (0.5, 0.51)]) == [BEST, CONT, STOP]
    assert s.stop_reason == "stage_patience" and s.best_anneal == 0.505


def test_min_temperature_stops_after_the_stage_at_it():
    s = AnnealingSchedule(temperature=0.2, decay=0.5, patience=1, stage_patience=10, min_temperature=0.05)
    improving = [(1.0, 0.1 * k) for k in range(1, 20)]  # every stage's best anneal value improves
    decisions = []
    for pair in improving:
        decisions.append(s.update(*pair))
        if decisions[-1] is STOP:
            break
    # each stage: one improvement (first value) then one tie of the stage monitor; stages at 0.2, 0.1, 0.05
    assert decisions == [BEST, NEXT, BEST, NEXT, BEST, STOP]
    assert (s.stage, s.temperature, s.stop_reason) == (2, 0.05, "min_temperature")


def test_min_temperature_tolerates_rounding():
    assert temperature_at(2, 0.3, 0.8) > 0.192  # 0.19200000000000003: T_2 is "at" 0.192 all the same
    s = AnnealingSchedule(temperature=0.3, decay=0.8, patience=1, stage_patience=10, min_temperature=0.192)
    for k in range(1, 20):
        if s.update(1.0, 0.1 * k) is STOP:
            break
    assert s.stage == 2 and s.stop_reason == "min_temperature"


def test_max_stages():
    s = AnnealingSchedule(patience=1, stage_patience=10, max_stages=2)
    assert run(s, [(1.0, 0.1), (1.0, 0.2), (1.0, 0.3), (1.0, 0.4)]) == [BEST, NEXT, BEST, STOP]
    assert (s.stage, s.stop_reason) == (1, "max_stages")


def test_warm_start_ends_on_its_own_early_stopping_and_sets_the_reference():
    s = AnnealingSchedule(patience=2, stage_patience=1, warm_start=True)
    assert (s.stage, s.in_warm_start, s.temperature) == (-1, True, 0.2)
    assert run(s, [(2.0, 0.6), (2.1, 0.5), (2.1, 0.5)]) == [BEST, CONT, NEXT]
    assert (s.stage, s.best_anneal, s.best_anneal_stage, s.stages_without_improvement) == (0, 0.6, -1, 0)
    # EAST stage 0 does not beat the warm start's 0.6: one stage without improvement -> stop
    assert run(s, [(0.5, 0.55), (0.6, 0.6), (0.6, 0.6)]) == [BEST, CONT, STOP]
    assert s.stop_reason == "stage_patience"


def test_warm_start_of_fixed_length_ignores_its_patience():
    s = AnnealingSchedule(patience=1, warm_start=True, warm_start_steps=4)
    assert s.update(1.0, 0.5, step=2) is BEST
    assert s.update(1.1, 0.5, step=3) is CONT  # patience 1 would end a stage here
    assert s.update(0.9, 0.5, step=4) is NEXT and s.last_improved  # ends at its step, on an improvement
    assert s.stage == 0 and s.temperature == 0.2
    with pytest.raises(ValueError, match="step"):
        AnnealingSchedule(warm_start=True, warm_start_steps=4).update(1.0, 0.5)


def test_nan_is_never_an_improvement():
    s = AnnealingSchedule(patience=2, stage_patience=1)
    assert run(s, [(float("nan"), float("nan")), (1.0, 0.5), (float("nan"), float("nan"))]) == [CONT, BEST, CONT]
    assert (s.stage_best, s.stage_best_anneal, s.bad_evaluations) == (1.0, 0.5, 1)


def test_anneal_value_defaults_to_the_stage_value_only_with_equal_modes():
    s = AnnealingSchedule(patience=1, stage_patience=1, anneal_mode="min")
    assert run(s, [(1.0, None), (1.0, None), (0.9, None), (0.95, None), (0.9, None), (0.9, None)]) == [
        BEST,
        NEXT,
        BEST,
        NEXT,
        BEST,
        STOP,
    ]
    assert (s.best_anneal, s.best_anneal_stage, s.stop_reason) == (0.9, 1, "stage_patience")  # 0.9 ties 0.9
    with pytest.raises(ValueError, match="anneal_mode"):
        AnnealingSchedule().update(0.5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(temperature=0.4), "temperature"),
        (dict(decay=1.0), "decay"),
        (dict(min_temperature=0.3), "min_temperature"),
        (dict(patience=0), "patience"),
        (dict(stage_patience=1.5), "stage_patience"),
        (dict(max_stages=0), "max_stages"),
        (dict(threshold=-0.1), "threshold"),
        (dict(stage_mode="down"), "stage_mode"),
        (dict(warm_start=True, warm_start_steps=0), "warm_start_steps"),
        (dict(lr_decay=0.0), r"lr_decay in \(0, 1\]"),
        (dict(lr_decay=1.5), "lr_decay"),
    ],
)
def test_schedule_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AnnealingSchedule(**kwargs)


def test_schedule_rejects_non_numbers():
    with pytest.raises(TypeError, match="stage_value"):
        AnnealingSchedule().update("low", 0.5)


def test_state_dict_round_trip_continues_identically():
    values = [(1.0, 0.5), (0.9, 0.6), (0.95, 0.6), (0.95, 0.6), (0.8, 0.7), (0.9, 0.6), (0.9, 0.6)]
    values += [(0.7, 0.7), (0.8, 0.7), (0.8, 0.7), (0.6, 0.65), (0.7, 0.6), (0.7, 0.6)]
    kwargs = dict(decay=0.5, patience=2, stage_patience=2, warm_start=True)
    reference = AnnealingSchedule(**kwargs)
    expected = run(reference, values)
    first = AnnealingSchedule(**kwargs)
    head = run(first, values[:6])
    second = AnnealingSchedule(**kwargs)
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    tail = [second.update(v, a, step=6 + i) for i, (v, a) in enumerate(values[6 : len(expected)], start=1)]
    assert head + tail == expected
    assert second.state_dict() == reference.state_dict()
    with pytest.raises(ValueError, match="missing"):
        second.load_state_dict({"stage": 1})
    with pytest.raises(ValueError, match="warm start"):
        AnnealingSchedule().load_state_dict({**first.state_dict(), "stage": -1})


def test_relative_threshold_ends_stages_whose_surrogate_only_creeps():
    """A validation surrogate that improves by ever smaller amounts (the model growing more confident) never ends a
    stage with the paper's absolute threshold of 0; the default relative threshold ends stages and reaches three
    temperatures, and the state round-trips the setting."""
    creeping = [0.5 * (1 - 0.5 * (1 - 0.97**k)) for k in range(200)]  # -> 0.25, steps shrinking geometrically
    hard = [0.8] * 200
    plain = AnnealingSchedule(patience=3, stage_patience=2, threshold=0.0, threshold_mode="abs")
    assert {plain.update(v, a, step=k) for k, (v, a) in enumerate(zip(creeping, hard))} == {Decision.IMPROVED}
    assert plain.stage == 0  # 200 evaluations, one stage
    relative = AnnealingSchedule(patience=3, stage_patience=2)  # the defaults: 1e-2, "rel"
    decisions = []
    for k, (v, a) in enumerate(zip(creeping, hard)):
        decisions.append(relative.update(v, a, step=k))
        if decisions[-1] is Decision.STOP:
            break
    assert Decision.NEXT_STAGE in decisions and relative.finished and relative.stop_reason == "stage_patience"
    assert len(decisions) < 200 and relative.stage >= 2
    assert AnnealingSchedule(**relative.settings()).threshold_mode == "rel"
    with pytest.raises(ValueError, match="threshold_mode"):
        AnnealingSchedule(threshold_mode="relative")
    with pytest.raises(ValueError, match="east_threshold_mode"):
        EASTConfig(output_dir="out", report_to=[], east_threshold_mode="pct")


def test_shared_defaults_are_read_from_the_signatures():
    """T0 and r are written once in the core; every signature that takes them gives that default."""
    schedule = inspect.signature(AnnealingSchedule).parameters
    at = inspect.signature(temperature_at).parameters
    loss = inspect.signature(EASTLoss).parameters
    assert schedule["temperature"].default == at["temperature"].default == loss["temperature"].default
    assert schedule["temperature"].default == DEFAULT_TEMPERATURE == 0.2
    assert schedule["decay"].default == at["decay"].default == DEFAULT_DECAY == 0.9
    assert AnnealingSchedule().temperature == EASTLoss().temperature == temperature_at(0) == DEFAULT_TEMPERATURE


def test_select_window_judges_stages_by_the_mean_of_the_last_evaluations():
    """With a window of 2, a lone jump (0.9 between 0.5s) loses to two neighbouring 0.7s: the stage's best anneal value
    is the best mean of two, and the window spans the stage boundary and survives a state round trip."""
    s = AnnealingSchedule(decay=0.5, patience=3, stage_patience=1, select_window=2)
    values = [(1.0, 0.5), (0.9, 0.9), (0.8, 0.5), (0.85, 0.7), (0.85, 0.7), (0.85, 0.7)]  # stage 0 ends at step 6
    means = []
    for step, (loss, f1) in enumerate(values, start=1):
        s.update(loss, f1, step=step)
        means.append(s.selection_value)
    assert means == pytest.approx([0.5, 0.7, 0.7, 0.6, 0.7, 0.7])
    assert (s.stage, s.best_anneal, s.best_anneal_stage) == (1, pytest.approx(0.7), 0)
    restored = AnnealingSchedule(**s.settings())
    restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert restored.update(0.5, 0.8, step=7) is BEST and restored.selection_value == pytest.approx(0.75)
    assert restored.settings()["select_window"] == 2
    plain = AnnealingSchedule(patience=3, stage_patience=1)  # a window of 1: the evaluation's own value
    run(plain, values)
    assert plain.best_anneal == 0.9
    old = {k: v for k, v in s.state_dict().items() if k != "recent_anneal"}  # a state saved before the window
    fresh = AnnealingSchedule(**s.settings())
    fresh.load_state_dict(old)
    assert fresh.recent_anneal == [] and fresh.selection_value is None
    with pytest.raises(ValueError, match="select_window"):
        AnnealingSchedule(select_window=0)


def test_fall_back_starts_a_stopped_schedule_over_from_a_warm_start_of_its_own_early_stopping():
    """A warm start of 2 steps, then stages of patience 1 that never improve: stopped at step 4. Fallen back, the
    warm start ignores warm_start_steps (it ends on its own early stopping), the best anneal value so far stays the
    one to beat, the annealing starts again at T0, and the state survives a round trip; once per schedule."""
    s = AnnealingSchedule(decay=0.5, patience=1, stage_patience=1, warm_start="ce", warm_start_steps=2)
    assert run(s, [(1.0, 0.2), (0.9, 0.2), (1.0, 0.2), (1.0, 0.2)]) == [BEST, NEXT, BEST, STOP]
    assert (s.stop_reason, s.best_anneal) == ("stage_patience", 0.2)
    s.fall_back()
    assert (s.in_warm_start, s.finished, s.stop_reason, s.fell_back) == (True, False, None, True)
    assert s.stages_without_improvement == 0
    assert s.update(0.8, 0.3, step=5) is BEST  # past warm_start_steps: a fixed length would have ended it here
    assert s.update(0.7, 0.5, step=6) is BEST
    restored = AnnealingSchedule(**s.settings())
    restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert restored.fell_back and restored.in_warm_start
    assert restored.update(0.75, 0.4, step=7) is NEXT  # its own early stopping (patience 1)
    assert (restored.stage, restored.temperature, restored.best_anneal) == (0, 0.2, 0.5)
    assert restored.update(0.6, 0.4, step=8) is BEST and restored.update(0.6, 0.4, step=9) is STOP
    with pytest.raises(ValueError, match="not fallen back yet"):
        restored.fall_back()
    with pytest.raises(ValueError, match="Expected a stopped schedule"):
        AnnealingSchedule(warm_start="ce").fall_back()
    cold = AnnealingSchedule(patience=1, stage_patience=1)
    assert run(cold, [(1.0, 0.2), (1.0, 0.2), (1.0, 0.2), (1.0, 0.2)])[-1] is STOP
    with pytest.raises(ValueError, match="with a warm start"):
        cold.fall_back()
    old = {k: v for k, v in s.state_dict().items() if k != "fell_back"}  # a state saved before the fallback existed
    fresh = AnnealingSchedule(**s.settings())
    fresh.load_state_dict(old)
    assert fresh.fell_back is False


def test_fall_back_where_the_warm_start_has_just_ended_and_not_after_stage_0_began():
    s = AnnealingSchedule(decay=0.5, patience=1, warm_start="ce", warm_start_steps=2)
    assert not s.can_fall_back  # in the warm start
    assert run(s, [(1.0, 0.2), (0.9, 0.2)]) == [BEST, NEXT]
    assert s.can_fall_back  # stage 0 before its first evaluation
    s.fall_back()
    assert (s.in_warm_start, s.fell_back, s.best_anneal) == (True, True, 0.2)
    late = AnnealingSchedule(decay=0.5, patience=1, warm_start="ce", warm_start_steps=2)
    run(late, [(1.0, 0.2), (0.9, 0.2), (0.8, 0.3)])
    assert late.stage == 0 and not late.can_fall_back
