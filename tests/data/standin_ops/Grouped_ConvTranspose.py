import torch
import torch.nn as nn


class Model(nn.Module):
    """A grouped transposed convolution: torch's constructor refuses output channels its
    groups do not divide, although forward() never divides them (level 1's problem 75), so
    the task's other input sets must keep out_channels a multiple of groups."""

    def __init__(self, in_channels, out_channels, kernel_size, groups):
        super(Model, self).__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, groups=groups)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 32
out_channels = 36
kernel_size = 3
groups = 4
height = 6
width = 7


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
