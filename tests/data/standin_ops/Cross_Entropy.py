import torch
import torch.nn as nn


class Model(nn.Module):
    """Cross entropy of scores against class indices drawn below num_classes: the task's
    labels are i32 and their bound is the size, so the input set that halves num_classes
    keeps every label in range."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)


batch_size = 40
num_classes = 36


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
