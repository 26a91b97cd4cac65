import torch
import torch.nn as nn


class Model(nn.Module):
    """Operations the NumPy stand-in for torch runs and the naive kernel generator writes:
    torch.norm along a dimension, pow, sqrt, rsqrt, a reversed cumsum and a cumprod."""

    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        unit = x / torch.norm(x, p="fro", dim=self.dim, keepdim=True)
        rising = torch.cumsum(unit.pow(2).flip(self.dim), dim=self.dim).flip(self.dim)
        damped = torch.cumprod(torch.rsqrt(1.0 + x * x), dim=self.dim)
        return rising + torch.sqrt(torch.abs(x)) * damped


batch_size = 16
length = 48
dim = 1


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [dim]
