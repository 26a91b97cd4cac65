import torch
import torch.nn as nn


class Model(nn.Module):
    """A padded 2-D average pool that divides by the window's positions inside the input
    (count_include_pad=False): the generated vector kernel counts them per lane. Its stride 2
    (halved to 1 by the evaluator's other input sets) takes the two vector paths; the edges
    and a width that is not a multiple of the vector take the lane-by-lane one."""

    def __init__(self, kernel_size, stride, padding):
        super(Model, self).__init__()
        self.pool = nn.AvgPool2d(kernel_size, stride=stride, padding=padding, count_include_pad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 2
channels = 3
height = 9
width = 75
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
