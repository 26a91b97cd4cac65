import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise convolution (groups = in_channels, out_channels equal to it): its output
    channels must stay a multiple of its groups, so the task's other input sets never halve
    out_channels alone (the task file names its alternative sizes)."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, groups=in_channels, bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 4
out_channels = 4
kernel_size = 3
height = 10
width = 12


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
