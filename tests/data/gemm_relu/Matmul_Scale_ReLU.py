import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A matrix product of two inputs, scaled, then a ReLU, in the form of KernelBench's problems
    (written for tests/kernelbench_families.rs: a row-major product with an epilogue; not a
    KernelBench file).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a, b):
        return torch.relu(torch.matmul(a, b) * 0.5)


M = 64
K = 128
N = 96


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
