import torch
import torch.nn as nn


class Model(nn.Module):
    """A cumulative product along rows of 2,048: its values from uniform(-3, 3) overflow, so
    the importer leaves that distribution out of the task's input sets (the problem's own
    torch.rand and the normal distribution stay)."""

    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumprod(x, dim=self.dim)


batch_size = 2
input_shape = (2048,)
dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
