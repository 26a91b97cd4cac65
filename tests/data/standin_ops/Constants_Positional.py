import torch
import torch.nn as nn


class Model(nn.Module):
    """Constructs the NumPy stand-in for torch runs and the naive kernel generator writes: a
    grouped transposed convolution with its arguments after padding given by position
    (output_padding, groups), `torch.tensor` constants in an elementwise min and max, and
    `torch.multiply`."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, low, high):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups)
        self.low, self.high = low, high

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.min(x, torch.tensor(self.high, device=x.device))
        x = torch.max(x, torch.tensor(self.low))
        return torch.multiply(x, x + 1.0)


batch_size = 2
in_channels = 4
out_channels = 6
height = 9
width = 7
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
groups = 2
low = -0.25
high = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, low, high]
