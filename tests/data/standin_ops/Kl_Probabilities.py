import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's KL divergence of probability rows (get_inputs() draws them with
    `.softmax(dim=-1)`): the task's inputs keep that structure, so log(targets) is defined on
    every input set."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 16
input_shape = (40,)
dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape).softmax(dim=-1), torch.rand(batch_size, *input_shape).softmax(dim=-1)]


def get_init_inputs():
    return []
