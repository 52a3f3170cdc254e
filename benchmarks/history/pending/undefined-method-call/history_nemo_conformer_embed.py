# History case nemo-conformer-embed: both branches of __init__ store the input layer as
# self.pre_encode; the branch of forward for the plain linear layer calls self.embed, which nothing
# assigns (AttributeError whenever subsampling is off).
from torch import nn


class Subsampler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, 3, stride=2)

    def forward(self, x, lengths):
        return self.conv(x), lengths // 2


class Encoder(nn.Module):
    def __init__(self, feat_in, dim, subsampling=True):
        super().__init__()
        if subsampling:
            self.pre_encode = Subsampler(dim)
        else:
            self.pre_encode = nn.Linear(feat_in, dim)

    def forward(self, x, lengths):
        if isinstance(self.pre_encode, Subsampler):
            x, lengths = self.pre_encode(x, lengths)
        else:
            x = self.embed(x)
        return x, lengths


Encoder(4, 4)
