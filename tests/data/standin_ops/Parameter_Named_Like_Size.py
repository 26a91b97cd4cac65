import torch
import torch.nn as nn


class Model(nn.Module):
    """A model parameter named like one of the problem's sizes (KernelBench's level-2 problem 48
    has `scaling_factor` as both): the task file cannot declare both, so the import fails, and
    a failed import into a new folder leaves no folder behind."""

    def __init__(self, features, scale):
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.tanh(x * self.scale)


batch_size = 4
features = 6
scale = 2


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scale]
