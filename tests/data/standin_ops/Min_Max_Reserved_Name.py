import torch
import torch.nn as nn


class Model(nn.Module):
    """Element-wise minimum and maximum of two tensors (level 2's problem 68 takes
    `torch.min(x, self.constant)` of a 0-d parameter), with a scalar named `constant`, an
    OpenCL C address space that no kernel parameter can be named."""

    def __init__(self, constant):
        super(Model, self).__init__()
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x, y):
        return torch.min(torch.tanh(x), self.constant) - torch.maximum(x, y) * constant


batch_size = 5
features = 7
constant = 0.5


def get_inputs():
    return [torch.randn(batch_size, features), torch.randn(batch_size, features)]


def get_init_inputs():
    return [constant]
