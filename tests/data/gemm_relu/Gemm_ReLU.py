import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer followed by a ReLU, in the form of KernelBench's level-2 problems (written for
    scripts/bench-matmul-family.sh --epilogue; not a KernelBench file).
    """

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 256
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
