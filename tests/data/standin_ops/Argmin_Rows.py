import torch
import torch.nn as nn


class Model(nn.Module):
    """The index of each row's smallest element (torch.argmin along a dimension): an integer
    output, which the task declares i32 and the evaluator compares exactly."""

    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmin(x * 2.0 - 1.0, dim=self.dim)


batch_size = 5
rows = 24
columns = 33
dim = 1


def get_inputs():
    return [torch.rand(batch_size, rows, columns)]


def get_init_inputs():
    return [dim]
