import torch
import torch.nn as nn


class Model(nn.Module):
    """A padded 3-D convolution without bias, scaled and clamped: the generated blocked
    convolution's outer positions (depth, height) come from the launch's second dimension,
    its last (width) from the first."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=1, bias=False)

    def forward(self, x):
        return torch.clamp(self.conv(x) * 2.0, min=-1.0, max=1.0)


batch_size = 2
in_channels = 3
out_channels = 5
kernel_size = 3
depth = 6
height = 7
width = 9


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
