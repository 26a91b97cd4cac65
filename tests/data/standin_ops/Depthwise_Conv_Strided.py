import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise convolution with a channel multiplier of 2, a bias, an asymmetric kernel,
    padding, stride 2 along the last dimension and dilation 2 along the one before."""

    def __init__(self, in_channels, out_channels):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, (3, 5), stride=(1, 2), padding=(1, 2), dilation=(2, 1),
            groups=in_channels, bias=True,
        )

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 3
out_channels = 6
height = 9
width = 37


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
