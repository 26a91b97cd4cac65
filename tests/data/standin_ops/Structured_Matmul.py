import torch
import torch.nn as nn


class Model(nn.Module):
    """A product of a symmetric and a lower-triangular matrix, each drawn so by get_inputs()
    (KernelBench's 13 and 15 draw their inputs this way): the task's inputs keep the structure."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


N = 24


def get_inputs():
    A = torch.rand(N, N)
    A = (A + A.T) / 2
    B = torch.rand(N, N)
    B = torch.tril(B)
    return [A, B]


def get_init_inputs():
    return []
