"""Sharded models: under FSDP2 the per-stage copy is each process's own shard and restores it (two gloo processes);
the copies that would be whole on every process or empty (FSDP1, DeepSpeed ZeRO-3), the moving average and the
decision rule folded into the head are refused on a sharded model in one line before training; the Trainer's FSDP
settings on CPU processes, where accelerate does not shard, are one warning line and train exactly as DDP (two gloo
processes, the same seed)."""

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import run_two_processes

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


def test_fsdp_asked_for_where_accelerate_does_not_shard_is_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.training.inputs"):
        check_sharding(SimpleNamespace(fsdp="full_shard"), _accelerator("MULTI_CPU"), _annealing())
    (record,) = caplog.records
    assert "not sharded" in record.message and "\n" not in record.message


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
