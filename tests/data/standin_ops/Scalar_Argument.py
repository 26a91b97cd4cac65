import torch
import torch.nn as nn


class Model(nn.Module):
    """A Python number among get_inputs()'s values (KernelBench's 5 gives `s = 3.14`): the
    task's scalar `s`, which the references pass to forward() as the number it is."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A, s):
        return A * s - s


M = 24
N = 40


def get_inputs():
    A = torch.rand(M, N)
    s = 3.14
    return [A, s]


def get_init_inputs():
    return []
