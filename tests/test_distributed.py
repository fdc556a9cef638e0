"""Two CPU processes (torchrun, gloo):
DDP gradients of EASTTrainer equal single-process gradients on the global batch."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_two_processes

HERE = Path(__file__).parent


def test_two_process_gradient_equals_single_process_on_global_batch(tmp_path):
    out = tmp_path / "result.json"
    proc = run_two_processes(HERE / "dist_grad_check.py", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["backend"] == "gloo"
    # each process ran the exit handler its run registered before it ended
    assert (tmp_path / "result.json.exit-0").is_file() and (tmp_path / "result.json.exit-1").is_file()
    for task in ("multiclass", "multilabel"):
        for key in (f"{task} sync=True", f"{task} sync=False"):
            assert result[key]["world_size"] == 2  # really two processes
            assert result[key]["grad_norm"] > 1e-4
            assert result[key]["max_abs_diff"] < 1e-6, result
        # the two settings optimise different things: the global-batch surrogate and the mean of local ones
        assert abs(result[f"{task} sync=True"]["grad_norm"] - result[f"{task} sync=False"]["grad_norm"]) > 1e-4


def test_torchrun_without_use_cpu_on_a_machine_without_accelerator_is_one_distributed_run(tmp_path):
    """The README's `torchrun --nproc_per_node 2 -m east_hf.scripts.east_train ...` with no flag for the CPU:
    EASTConfig switches to the CPU backend (gloo) itself instead of letting each process train alone; EASTTrainer
    refuses uneven batch counts across the processes."""
    import torch

    if torch.accelerator.is_available():
        pytest.skip("an accelerator is present: its own backend applies")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, os, sys\n"
        "from east_hf.hf.config.east_config import EASTConfig\n"
        "args = EASTConfig(output_dir=sys.argv[1], report_to=[])\n"
        "import torch\n"
        "from east_hf import EASTTrainer\n"
        "uneven = EASTConfig(output_dir=sys.argv[1], report_to=[], accelerator_config={'even_batches': False},\n"
        "                    east_annealing=False, eval_strategy='no', load_best_model_at_end=False)\n"
        "try:\n"
        "    EASTTrainer(torch.nn.Linear(2, 2), uneven)\n"
        "    refused = ''\n"
        "except ValueError as error:\n"
        "    refused = str(error)\n"
        "path = os.path.join(sys.argv[1], f\"rank{os.environ['RANK']}.json\")\n"
        "json.dump({'world_size': args.world_size, 'mode': str(args.parallel_mode), 'cpu': args.use_cpu,\n"
        "           'refused': refused}, open(path, 'w'))\n"
        "import torch.distributed as dist\n"
        "dist.destroy_process_group()\n"  # exiting with gloo's group alive aborts now and then at shutdown
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent)}  # this checkout's east_hf
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", "2", str(script), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        refused = seen.pop("refused")
        assert seen == {"world_size": 2, "mode": "ParallelMode.DISTRIBUTED", "cpu": True}, seen
        # uneven batch counts would leave a process waiting at a collective forever: refused before training
        assert refused.startswith("Expected accelerator_config={'even_batches': True} with 2 processes"), refused
