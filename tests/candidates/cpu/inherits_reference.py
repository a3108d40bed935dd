# expect: rejected -- inherits the reference Model
import torch


class Model(torch.nn.Module):
    pass


class ModelNew(Model):
    def forward(self, x):
        return x
