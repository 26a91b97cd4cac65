import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer over a batch of sequences, then ReLU: a product whose first operand has
    two leading dimensions (batch, seq), which flatten into the GEMM's rows."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 4
seq = 24
in_features = 64
out_features = 48


def get_inputs():
    return [torch.randn(batch_size, seq, in_features)]


def get_init_inputs():
    return [in_features, out_features]
