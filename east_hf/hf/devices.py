"""What this process can run on, resolved into ``TrainingArguments`` before transformers checks them, and the sum of a
tensor over the processes of a launch.

Four cases transformers handles with an error or silently wrong: several processes without an accelerator (each would
train alone, so they are joined over gloo on the CPU), ``accelerate launch --num_processes N`` without
``--multi_gpu`` (one process starts: said in one line), ``bf16=True`` without bf16 hardware (autocast on the CPU,
or a one-line error on an accelerator without it), and FSDP asked for on CPU processes, by the Trainer's flag or an
accelerate config file (the run is DDP: said in one line, with accelerate's ``cpu_ram_efficient_loading`` turned off
before any model loads, since it leaves the other processes' new parameters as meta tensors). ``SumAcrossProcesses``
is the differentiable sum ``EASTTrainer`` takes of every process's loss statistics (``east_sync_across_processes``).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import torch
from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available

__all__ = [
    "end_process_group",
    "fsdp_request",
    "launch_advice",
    "resolve_devices",
    "resolve_unused_parameters",
    "runs_on_cpu",
    "SumAcrossProcesses",
]

logger = logging.getLogger(__name__)


def _one_process_of_several() -> bool:
    """True in the lone process ``accelerate launch --num_processes N`` (N > 1) starts without ``--multi_gpu``: its
    plain launcher runs one process on this machine and sets ``MASTER_ADDR`` for the others, which never start. A
    distributed launcher (``--multi_gpu``, torchrun, mpirun) gives the process a world size instead."""
    env = os.environ
    if "ACCELERATE_USE_CPU" not in env or "MASTER_ADDR" not in env:  # not accelerate's plain launcher asked for > 1
        return False
    sizes = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
    return all(int(env.get(name) or 1) <= 1 for name in sizes)


def launch_advice() -> str:
    """The line that says a launch of several processes started one, and the launch that starts them all: ``--cpu``
    goes (accelerate takes one of ``--cpu``, ``--multi_gpu``, ``--tpu``, ... at a time, and ``--multi_gpu`` joins the
    processes over gloo on a machine without a GPU)."""
    start = (
        "accelerate launch asked for several processes and started this one alone (without --multi_gpu it runs one "
        "process): training runs in 1 process; launch with torchrun --nproc_per_node N, or "
    )
    if os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true":  # the launch had --cpu
        return start + "replace --cpu by --multi_gpu (accelerate refuses the two together; on a CPU machine too)"
    return start + "add --multi_gpu (on a CPU machine too)"


@functools.cache
def _warn_once(message: str) -> None:
    """``message`` logged once per process, by the main process only: a launch's processes each build their config,
    some more than once."""
    if os.environ.get("RANK", "0") == "0":
        logger.warning(message)


def resolve_devices(args: Any) -> None:
    """Set ``dataloader_pin_memory``, ``use_cpu`` of ``args`` (a ``TrainingArguments`` before its
    ``__post_init__``) for this machine and launcher; see the module docstring."""
    if args.dataloader_pin_memory and not torch.accelerator.is_available():
        args.dataloader_pin_memory = False  # nothing to pin for; torch warns on every data loader otherwise
    if not args.use_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.accelerator.is_available():
        # Under torchrun / accelerate launch without an accelerator, transformers would otherwise run every process
        # as its own single-process run (no DDP, unsynchronised copies writing into one folder): use gloo on CPU.
        logger.info(f"WORLD_SIZE={os.environ['WORLD_SIZE']} without an accelerator: use_cpu=True (gloo backend)")
        args.use_cpu = True
    if _one_process_of_several():
        _warn_once(launch_advice())
    bf16 = args.bf16 or args.bf16_full_eval
    if bf16 and not args.use_cpu and not (is_torch_bf16_gpu_available() or is_torch_xla_available()):
        # transformers' own test fails: it would stop with a message about GPUs; resolve or explain it in one line
        if torch.accelerator.is_available():
            device = torch.accelerator.current_accelerator()
            raise ValueError(
                f"Expected an accelerator with bf16 support for bf16=True, got {device} without it; use fp16=True, "
                "or use_cpu=True for bf16 autocast on the CPU"
            )
        logger.warning("bf16=True without an accelerator: bf16 autocast on the CPU (use_cpu=True)")
        args.use_cpu = True
    request = fsdp_request(args)
    if request and runs_on_cpu(args):
        loading = ", and cpu_ram_efficient_loading is turned off so that every process loads the weights"
        turned_off = _turn_off_ram_efficient_loading()
        _warn_once(
            f"{request} is set, but the processes run on CPUs: the model is not sharded (accelerate's FSDP needs "
            f"GPUs); each process trains a whole copy, as DDP{loading if turned_off else ''}"
        )


def _env_flag(name: str) -> bool:
    """An environment flag as accelerate and transformers read it ("true", "1", "yes", "on")."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "t", "yes", "y", "on")


def fsdp_request(args: Any) -> str | None:
    """How FSDP is asked for, in words: the Trainer's ``fsdp`` flag, or accelerate's environment
    (``ACCELERATE_USE_FSDP``, which ``accelerate launch --config_file`` sets from ``distributed_type: FSDP``); None
    where it is not."""
    if getattr(args, "fsdp", None):
        return f"fsdp={args.fsdp!r}"
    if _env_flag("ACCELERATE_USE_FSDP"):
        return "accelerate's FSDP (ACCELERATE_USE_FSDP=true)"
    return None


def runs_on_cpu(args: Any) -> bool:
    """True where the processes run on CPUs (``use_cpu``, or no accelerator): accelerate shards nothing there (its
    FSDP needs an accelerator), and a launch of several processes trains as DDP over gloo."""
    return bool(getattr(args, "use_cpu", False)) or not torch.accelerator.is_available()


def _turn_off_ram_efficient_loading() -> bool:
    """Turn accelerate's ``cpu_ram_efficient_loading`` off (``FSDP_CPU_RAM_EFFICIENT_LOADING``, on in accelerate's
    default FSDP config) where it is on with accelerate's FSDP; whether it was. It makes transformers load the weights
    on the first process only and leave the others' new parameters (a fine-tune's head) as meta tensors, for FSDP to
    fill; on CPU processes nothing fills them, so it goes before any model loads, in every process."""
    if not (_env_flag("ACCELERATE_USE_FSDP") and _env_flag("FSDP_CPU_RAM_EFFICIENT_LOADING")):
        return False
    from accelerate.utils import disable_fsdp_ram_efficient_loading

    disable_fsdp_ram_efficient_loading()
    return True


def resolve_unused_parameters(args: Any, every_parameter_used: bool) -> None:
    """``ddp_find_unused_parameters=False`` for a model whose forward pass uses every parameter
    (``every_parameter_used``: the models east_hf builds from scratch), unless set: transformers' default looks for
    unused parameters in every step of a transformers model, and torch warns in every process when it finds none."""
    if every_parameter_used and args.ddp_find_unused_parameters is None:
        args.ddp_find_unused_parameters = False


def end_process_group(wait: bool = False) -> None:
    """End the launch's process group, if there is one. ``wait``: after a run that ended normally, every process
    first waits for the others (a barrier), so none tears its group down while another still talks to it; a run that
    failed or was interrupted ends its group without waiting, since another process may never arrive."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()


class SumAcrossProcesses(torch.autograd.Function):
    """The sum of a tensor over all processes, differentiable: the backward sums the incoming gradients the same way
    (each process's input enters every process's output with weight 1). Written on the public ``all_reduce`` because
    ``torch.distributed.nn.functional.all_reduce`` is deprecated (a FutureWarning on every process)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone()
        torch.distributed.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        torch.distributed.all_reduce(grad)
        return grad
