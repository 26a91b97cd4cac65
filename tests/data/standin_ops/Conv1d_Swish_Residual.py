import torch
import torch.nn as nn


class Model(nn.Module):
    """A strided, padded, dilated 1-D convolution whose value feeds two steps (swish reads it
    twice) and a residual term of the same shape: the generated blocked convolution computes
    it once per element and applies the steps before its one store."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=2, padding=2, dilation=2)

    def forward(self, x, residual):
        y = self.conv(x)
        return y * torch.sigmoid(y) + 0.5 * residual


batch_size = 3
in_channels = 5
out_channels = 12
kernel_size = 3
length = 37


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    residual = torch.randn(batch_size, out_channels, (length + 2 * 2 - 2 * (kernel_size - 1) - 1) // 2 + 1)
    return [x, residual]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
