import torch
import torch.nn as nn


class Model(nn.Module):
    """get_inputs() sizes its input with literals (as level 1's problem 50 does with 224), so
    the size rule, which scales only the named sizes, cannot bring it under 32 MiB: the import
    with --fit fails after its folder was made, and must leave no folder behind."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 2


def get_inputs():
    return [torch.rand(batch_size, 3, 2048, 2048)]


def get_init_inputs():
    return []
