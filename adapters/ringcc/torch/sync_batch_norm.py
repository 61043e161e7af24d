"""`hvd.SyncBatchNorm` for `ringcc.torch`: batch normalisation whose batch
statistics are those of the whole global batch (every rank's samples).

Training forward: each rank sums x and x*x per channel and counts its
samples; one allreduce (float64) gives the global mean and variance, which
normalise and update the running statistics (unbiased variance, as torch).
Backward: one allreduce of the per-channel sums of dy and dy*x_hat gives the
input gradient; the weight and bias gradients stay local (the optimizer
averages them), as in torch's and Horovod's SyncBatchNorm. Ranks may have
different batch sizes. Evaluation, and a job of one rank, use plain batch norm.

Differences from Horovod: runs on CPU tensors (Horovod's needs CUDA), in
plain torch operations; the allreduces are unnamed (generated names), so
every rank must run the same layers in the same order (as any model does).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from ringcc.torch import horovod as _hvd

__all__ = ["SyncBatchNorm"]


def _channel_view(t: torch.Tensor, dims: int) -> torch.Tensor:
    return t.view((1, -1) + (1,) * (dims - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum):
        x = x.contiguous()
        channels = x.shape[1]
        reduce_dims = [0] + list(range(2, x.dim()))
        x64 = x.to(torch.float64)
        count = x.numel() // channels if channels else 0
        stats = torch.cat(
            [x64.sum(reduce_dims), (x64 * x64).sum(reduce_dims), torch.tensor([float(count)], dtype=torch.float64)]
        )
        stats = _hvd.allreduce(stats, op=_hvd.Sum)
        total = stats[-1]
        if total.item() <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input "
                f"size {list(x.shape)} on all ranks together"
            )
        mean64 = stats[:channels] / total
        var64 = (stats[channels : 2 * channels] / total - mean64 * mean64).clamp_min(0)
        invstd64 = 1.0 / torch.sqrt(var64 + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var64 * (total / (total - 1)) if total.item() > 1 else var64
                running_mean.mul_(1 - momentum).add_(mean64.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        mean = _channel_view(mean64.to(compute), x.dim())
        invstd = _channel_view(invstd64.to(compute), x.dim())
        xhat = (x.to(compute) - mean) * invstd
        y = xhat
        if weight is not None:
            y = y * _channel_view(weight.to(compute), x.dim())
        if bias is not None:
            y = y + _channel_view(bias.to(compute), x.dim())
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.total = total.item()
        ctx.has_bias = bias is not None
        ctx.in_dtype = x.dtype
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, invstd, weight = ctx.saved_tensors
        g = grad_output.contiguous().to(xhat.dtype)
        channels = xhat.shape[1]
        reduce_dims = [0] + list(range(2, xhat.dim()))
        sum_dy = g.sum(reduce_dims)
        sum_dy_xhat = (g * xhat).sum(reduce_dims)
        grad_weight = sum_dy_xhat if weight is not None else None
        grad_bias = sum_dy if ctx.has_bias else None
        sums = _hvd.allreduce(torch.cat([sum_dy, sum_dy_xhat]).to(torch.float64), op=_hvd.Sum)
        n = ctx.total
        mean_dy = _channel_view((sums[:channels] / n).to(xhat.dtype), xhat.dim())
        mean_dy_xhat = _channel_view((sums[channels:] / n).to(xhat.dtype), xhat.dim())
        scale = invstd
        if weight is not None:
            scale = scale * _channel_view(weight.to(xhat.dtype), xhat.dim())
        grad_input = (g - mean_dy - xhat * mean_dy_xhat) * scale
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        if grad_bias is not None:
            grad_bias = grad_bias.to(weight.dtype if weight is not None else grad_bias.dtype)
        return grad_input.to(ctx.in_dtype), grad_weight, grad_bias, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Applies batch normalisation over the global batch of all ranks (the
    arguments of torch.nn.BatchNorm*d). Input: (N, C) or (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        if not self.training and self.track_running_stats:
            return F.batch_norm(
                input, self.running_mean, self.running_var, self.weight, self.bias, False, factor, self.eps
            )
        if _hvd.size() == 1:
            return F.batch_norm(
                input, self.running_mean, self.running_var, self.weight, self.bias, True, factor, self.eps
            )
        return _SyncBatchNormFunction.apply(
            input,
            self.weight,
            self.bias,
            self.running_mean if self.track_running_stats else None,
            self.running_var if self.track_running_stats else None,
            self.eps,
            factor,
        )
