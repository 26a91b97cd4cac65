import torch
import torch.nn as nn


class Model(nn.Module):
    """A mean-squared-error loss written as KernelBench writes its losses: the mean of an
    element-wise expression of two inputs, one value. The importer generates, besides the naive
    kernel, a parallel two-stage reduction (seeds = ["reduce_scalar.toml"])."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


batch_size = 64
input_shape = (257,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
