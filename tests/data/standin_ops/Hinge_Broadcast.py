import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's hinge loss: (batch, n) predictions times (batch,) targets broadcasts only
    while n equals batch, so the task's other input sets halve both together."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 24
input_shape = (24,)
dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]


def get_init_inputs():
    return []
