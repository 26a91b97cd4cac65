import torch
import torch.nn as nn


class Model(nn.Module):
    """A strided transposed 2-D convolution read by a max pooling: the naive kernel computes
    the convolution into scratch first (the pooling reads each value several times), and the
    generated seed is that sequence with the convolution's kernel blocked."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1, output_padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return torch.tanh(self.pool(self.conv(x)))


batch_size = 2
in_channels = 6
out_channels = 5
kernel_size = 3
height = 7
width = 10


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
