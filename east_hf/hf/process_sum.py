"""The sum of a tensor over all processes, differentiable (``EASTTrainer`` sums the loss statistics of every
process's shard with it, ``east_sync_across_processes``)."""

from __future__ import annotations

import torch

__all__ = ["SumAcrossProcesses"]


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
