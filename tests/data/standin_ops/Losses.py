import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Losses the NumPy stand-in for torch runs and the naive kernel generator writes, each a
    0-dimensional output: smooth L1 (below and above beta), Huber, KL divergence with
    `batchmean`, a triplet margin loss, and a mean divided by a size (`x.size(1)`), which the
    kernel must read as the size it is."""

    def __init__(self, margin):
        super(Model, self).__init__()
        self.triplet = nn.TripletMarginLoss(margin=margin)
        self.huber = nn.HuberLoss(delta=0.5)

    def forward(self, anchor, positive, negative):
        smooth = F.smooth_l1_loss(anchor, positive, beta=0.5)
        huber = self.huber(anchor, negative)
        kl = F.kl_div(F.log_softmax(anchor, dim=1), F.softmax(negative, dim=1), reduction="batchmean")
        per_size = torch.sum(positive * negative) / positive.size(1)
        return smooth + huber + kl + self.triplet(anchor, positive, negative) + per_size


batch_size = 6
features = 40
margin = 1.0


def get_inputs():
    return [torch.randn(batch_size, features), torch.randn(batch_size, features), torch.randn(batch_size, features)]


def get_init_inputs():
    return [margin]
