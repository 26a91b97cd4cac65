import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pooling the NumPy stand-in for torch runs and the naive kernel generator writes: padded,
    dilated 3-D and 2-D max pools, a padded average pool that counts the padding (torch's
    default) and one that does not, all with windows that give one output shape."""

    def __init__(self, kernel_size, stride, padding, dilation):
        super(Model, self).__init__()
        self.max3d = nn.MaxPool3d(kernel_size, stride, 2 * padding, dilation)
        self.avg = nn.AvgPool2d(kernel_size, stride=stride, padding=padding)
        self.window = (kernel_size, stride, padding, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, s, p, d = self.window
        flat = x.view(x.size(0), x.size(1) * x.size(2), x.size(3), x.size(4))
        deep = self.max3d(x)
        deep = deep.view(deep.size(0), deep.size(1) * deep.size(2), deep.size(3), deep.size(4))
        wide = F.max_pool2d(flat, k, s, 2 * p, dilation=d)
        counted = self.avg(flat)
        uncounted = F.avg_pool2d(flat, k, s, p, count_include_pad=False)
        return deep.amax(dim=1) + wide.mean(dim=1) + counted.mean(dim=1) * uncounted.amax(dim=1)


batch_size = 2
channels = 3
depth = 12
height = 20
width = 17
kernel_size = 3
stride = 2
padding = 1
dilation = 2


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
