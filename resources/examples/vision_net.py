"""A small vision network: conv, batch norm, ReLU, pooling, a linear head.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
Sized so that the CPU backend profiles it in about a second.
"""
import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SmallVisionNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = ConvBlock(3, 32)
        self.block1 = ConvBlock(32, 32)
        self.pool1 = nn.MaxPool2d(2)
        self.block2 = ConvBlock(32, 64)
        self.pool2 = nn.MaxPool2d(2)
        self.block3 = ConvBlock(64, 64)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        x = self.block1(self.stem(x))
        x = self.pool1(x)
        x = self.pool2(self.block2(x))
        x = self.block3(x)
        return self.head(torch.flatten(self.gap(x), 1))


def get_model():
    torch.manual_seed(0)
    model = SmallVisionNet()
    with torch.no_grad():  # non-trivial running statistics, as in a trained network
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
    return model


def get_inputs():
    return [torch.randn(8, 3, 32, 32)]
