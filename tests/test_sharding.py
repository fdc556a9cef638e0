"""Sharded models: under FSDP2 the per-stage copy is each process's own shard and restores it (two gloo processes);
the copies that would be whole on every process or empty (FSDP1, DeepSpeed ZeRO-3), the moving average and the
decision rule folded into the head are refused on a sharded model in one line before training; FSDP asked for on CPU
processes, where accelerate does not shard (the Trainer's flag, or an accelerate config file's environment), is one
warning line when the config is made and trains exactly as DDP (two gloo processes, the same seed); accelerate's
cpu_ram_efficient_loading is turned off there, so that a fine-tune's new head loads on every process."""

import json
import logging
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import east_args, run_two_processes

from east_hf.hf import devices
from east_hf.hf.training.inputs import check_sharding, check_unsharded, sharding

HERE = Path(__file__).parent


def _accelerator(kind: str, zero_stage: int | None = None, fsdp_version: int = 1):
    plugin = SimpleNamespace(zero_stage=zero_stage) if zero_stage else None
    state = SimpleNamespace(
        distributed_type=f"DistributedType.{kind}",
        deepspeed_plugin=plugin,
        fsdp_plugin=SimpleNamespace(fsdp_version=fsdp_version) if kind == "FSDP" else None,
    )
    return SimpleNamespace(state=state)


def _annealing(restore: bool = True, ema: float = 0.0):
    return SimpleNamespace(restore_best_per_stage=restore, ema_decay=ema)


def test_fsdp2_keeps_each_stage_copy_as_the_shards_and_refuses_only_the_average():
    accelerator = _accelerator("FSDP", fsdp_version=2)
    assert sharding(accelerator) == "FSDP2"
    check_sharding(SimpleNamespace(fsdp=True), accelerator, _annealing())  # the stage copy: each process's shard
    with pytest.raises(ValueError, match="east_ema_decay"):
        check_sharding(SimpleNamespace(fsdp=True), accelerator, _annealing(ema=0.9))


@pytest.mark.parametrize(("kind", "stage"), [("FSDP", None), ("DEEPSPEED", 3)])
def test_a_sharded_model_with_the_annealings_weight_copies_is_refused_in_one_line(kind, stage):
    accelerator = _accelerator(kind, stage)
    with pytest.raises(ValueError, match="east_restore_best_per_stage") as error:
        check_sharding(SimpleNamespace(fsdp=kind == "FSDP"), accelerator, _annealing())
    assert "\n" not in str(error.value) and sharding(accelerator) in str(error.value)
    with pytest.raises(ValueError, match="east_ema_decay"):
        check_sharding(SimpleNamespace(fsdp=False), accelerator, _annealing(restore=False, ema=0.9))
    check_sharding(SimpleNamespace(fsdp=False), accelerator, _annealing(restore=False))  # no copies: allowed
    with pytest.raises(ValueError, match="unsharded model for a decision rule"):
        check_unsharded(accelerator, "a decision rule")


def test_unsharded_runs_pass():
    for kind, stage in (("MULTI_GPU", None), ("MULTI_CPU", None), ("NO", None), ("DEEPSPEED", 2)):
        accelerator = _accelerator(kind, stage)
        assert sharding(accelerator) is None
        check_sharding(SimpleNamespace(fsdp=False), accelerator, _annealing(ema=0.9))
        check_unsharded(accelerator, "a decision rule")


@pytest.fixture
def fsdp_env(monkeypatch):
    """No accelerate FSDP variable from the environment the tests run in, and the once-per-process notices unsaid;
    the variables a test sets (or the config turns off) are restored after it."""
    for name in ("ACCELERATE_USE_FSDP", "FSDP_CPU_RAM_EFFICIENT_LOADING"):
        monkeypatch.delenv(name, raising=False)
    devices._warn_once.cache_clear()
    yield monkeypatch
    devices._warn_once.cache_clear()


@pytest.mark.parametrize("asked", ["flag", "accelerate"])
def test_fsdp_asked_for_on_cpu_processes_is_one_warning_when_the_config_is_made(fsdp_env, tmp_path, caplog, asked):
    """The Trainer's fsdp flag, or accelerate's environment (``accelerate launch --config_file`` with
    ``distributed_type: FSDP`` sets ACCELERATE_USE_FSDP): the config says the run is DDP in one line, before any model
    loads; the trainer's check adds none."""
    if asked == "accelerate":
        fsdp_env.setenv("ACCELERATE_USE_FSDP", "true")
    with caplog.at_level(logging.WARNING):
        args = east_args(tmp_path, **({"fsdp": "full_shard"} if asked == "flag" else {}))
        check_sharding(args, _accelerator("MULTI_CPU"), _annealing())
    (record,) = [r for r in caplog.records if "not sharded" in r.message]
    assert record.name == "east_hf.hf.devices" and "as DDP" in record.message and "\n" not in record.message
    assert ("ACCELERATE_USE_FSDP" if asked == "accelerate" else "fsdp='full_shard'") in record.message


def test_accelerates_cpu_ram_efficient_loading_is_turned_off_on_cpu_processes(fsdp_env, tmp_path, caplog):
    """accelerate's default FSDP config also sets FSDP_CPU_RAM_EFFICIENT_LOADING: transformers would then load the
    weights on the first process only and leave the others' new head as meta tensors, which nothing fills without
    FSDP. The config turns it off before any model loads and says so in the same line."""
    fsdp_env.setenv("ACCELERATE_USE_FSDP", "true")
    fsdp_env.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true")
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.devices"):
        east_args(tmp_path)
    (record,) = caplog.records
    assert "cpu_ram_efficient_loading is turned off" in record.message and "\n" not in record.message
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"].lower() == "false"


def test_fsdp_asked_for_on_accelerators_accelerate_does_not_shard_is_one_warning(fsdp_env, caplog):
    fsdp_env.setattr(torch.accelerator, "is_available", lambda: True)
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.training.inputs"):
        check_sharding(SimpleNamespace(fsdp="full_shard", use_cpu=False), _accelerator("NO"), _annealing())
    (record,) = caplog.records
    assert "not sharded" in record.message and "\n" not in record.message


ACCELERATE_FSDP_CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_cpu_ram_efficient_loading: true
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
machine_rank: 0
mixed_precision: 'no'
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
use_cpu: false
"""
"""What ``accelerate config`` writes when FSDP is chosen with its default answers."""


@pytest.mark.skipif(torch.accelerator.is_available(), reason="CPU processes only: accelerate shards on accelerators")
def test_an_accelerate_fsdp_config_file_on_cpu_processes_fine_tunes_as_ddp(tmp_path):
    """``accelerate launch --config_file`` with accelerate's default FSDP config on two CPU processes, a fine-tune
    whose classification head is new (a headless checkpoint): every process loads the weights, no meta tensor is
    left on the second, and the run trains and evaluates as DDP after one line."""
    from transformers import BertConfig, BertModel

    base = tmp_path / "base"
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    BertModel(config).save_pretrained(base)
    (tmp_path / "fsdp.yaml").write_text(ACCELERATE_FSDP_CONFIG)
    accelerate = shutil.which("accelerate", path=os.path.dirname(sys.executable)) or shutil.which("accelerate")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    out = tmp_path / "result.json"
    script = HERE / "dist_fsdp_env_loading.py"
    command = [accelerate, "launch", "--config_file", str(tmp_path / "fsdp.yaml"), str(script), str(base), str(out)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["meta"] == [[], []] and math.isfinite(result["eval_loss"])
    notices = [line for line in proc.stderr.splitlines() if "not sharded" in line]
    assert len(notices) == 1 and "cpu_ram_efficient_loading is turned off" in notices[0]


def test_the_stage_copy_of_an_fsdp2_model_is_each_processs_shard_and_restores(tmp_path):
    out = tmp_path / "copies.json"
    proc = run_two_processes(HERE / "dist_fsdp2_copies.py", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["types"] == ["DTensor"] and result["kept_per_rank"] == [result["total"] // 2] * 2  # its share
    assert result["moved"] > 1e-3 and result["restored"] < 1e-6  # the step moved it; the restore undid it


def _run(mode: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{mode}.json"
    proc = run_two_processes(HERE / "dist_fsdp_check.py", mode, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {**json.loads(out.read_text()), "stderr": proc.stderr}


def test_fsdp_settings_on_cpu_processes_train_as_ddp_with_the_same_metrics(tmp_path):
    ddp, fsdp = _run("ddp", tmp_path), _run("fsdp", tmp_path)
    assert ddp["world_size"] == fsdp["world_size"] == 2 and fsdp["wrapper"] == ddp["wrapper"]  # not sharded on CPUs
    assert fsdp["stage"] == ddp["stage"] >= 1  # annealed, stage bests restored
    assert fsdp["metrics"] == pytest.approx(ddp["metrics"], abs=1e-6)
    assert "not sharded" in fsdp["stderr"] and "not sharded" not in ddp["stderr"]
