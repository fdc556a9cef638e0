"""Launchers: advice accelerate accepts, each line once per run (the main process), DDP settings east_hf knows."""

import logging
import warnings

import pytest

from east_hf import EASTConfig
from east_hf.hf import devices


@pytest.fixture
def one_process_of_two(monkeypatch):
    """The environment `accelerate launch --num_processes 2 [--cpu]` gives the one process it starts."""
    for name in ("WORLD_SIZE", "PMI_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    devices._warn_once.cache_clear()
    yield monkeypatch
    devices._warn_once.cache_clear()


def test_the_advice_after_a_launch_with_cpu_drops_cpu_as_accelerate_requires(one_process_of_two, tmp_path, caplog):
    """accelerate refuses --cpu beside --multi_gpu ("You can only use one of `--cpu`, `--multi_gpu`, ..."): after a
    launch with --cpu the advice replaces it."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    one_process_of_two.setenv("ACCELERATE_USE_CPU", "True")
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    [line] = [r.getMessage() for r in caplog.records if "accelerate launch asked" in r.getMessage()]
    assert line.endswith("or replace --cpu by --multi_gpu (accelerate refuses the two together; on a CPU machine too)")
    parser = launch_command_parser()
    with pytest.raises(ValueError, match="only use one of `--cpu`, `--multi_gpu`"):  # the advice as it was
        _validate_launch_command(parser.parse_args(["--cpu", "--multi_gpu", "--num_processes", "2", "train.py"]))


def test_the_launch_advice_is_printed_once_per_run_by_the_main_process(one_process_of_two, tmp_path, caplog):
    one_process_of_two.setenv("ACCELERATE_USE_CPU", "False")
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True)
        EASTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True)  # east-train builds more than one
    assert sum("accelerate launch asked" in r.getMessage() for r in caplog.records) == 1
    devices._warn_once.cache_clear()
    one_process_of_two.setenv("RANK", "1")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    assert not caplog.records


def test_the_whole_budget_line_is_the_main_process_s(caplog):
    from test_callback import STAGES, Driver

    from east_hf.hf.training.callbacks import TemperatureAnnealingCallback

    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, stage_patience=2)
    driver = Driver(callback).begin()
    driver.state.max_steps = 4
    driver.run(STAGES + STAGES[:1])
    driver.state.is_world_process_zero = False  # another process of the launch
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        callback.on_train_end(driver.args, driver.state, driver.control)
    assert "whole budget" not in caplog.text


def test_replicas_leave_east_hf_warnings_and_the_ddp_advice_to_the_main_process():
    from east_hf.scripts.run_output import quiet_replicas

    east_hf = logging.getLogger("east_hf")
    level, filters = east_hf.level, list(warnings.filters)
    try:
        quiet_replicas(0)
        assert east_hf.level == level and warnings.filters == filters  # the main process prints
        quiet_replicas(1)
        assert not east_hf.isEnabledFor(logging.WARNING) and east_hf.isEnabledFor(logging.ERROR)
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("find_unused_parameters=True was specified in DDP constructor, but found none", stacklevel=1)
        assert not caught
    finally:
        east_hf.setLevel(level)
        warnings.filters[:] = filters


@pytest.mark.parametrize("given, built_here, expected", [(None, True, False), (None, False, None), (True, True, True)])
def test_models_east_hf_builds_use_every_parameter_so_ddp_does_not_look_for_unused_ones(
    tmp_path, given, built_here, expected
):
    args = EASTConfig(output_dir=str(tmp_path), report_to=[], ddp_find_unused_parameters=given)
    devices.resolve_unused_parameters(args, built_here)
    assert args.ddp_find_unused_parameters is expected
