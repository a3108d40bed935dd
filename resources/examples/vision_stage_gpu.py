"""The first stages of a convolutional network sized for a datacenter GPU: 224×224 images, batch 32.

Conv, batch norm and ReLU blocks with max pooling between the stages, then global average pooling
and a linear head (the kinds of ops of ``vision_net.py``), at ImageNet resolution, where each batch
norm + ReLU reads and writes about 100 MB. fp32, as the other examples.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
Both take sizes as keyword arguments (the defaults are the GPU size); ``get_inputs`` builds its
tensors on the CPU unless given ``device``, and the loader moves them to the model's device.
"""
import torch
import torch.nn as nn

WIDTH, CLASSES = 64, 1000
BATCH, SIZE = 32, 224


class ConvBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class VisionStage(nn.Module):
    def __init__(self, width: int = WIDTH, classes: int = CLASSES):
        super().__init__()
        self.stem = ConvBlock(3, width, stride=2)  # 224 -> 112
        self.block1 = ConvBlock(width, width)
        self.pool1 = nn.MaxPool2d(2)  # 112 -> 56
        self.block2 = ConvBlock(width, 2 * width)
        self.block3 = ConvBlock(2 * width, 2 * width)
        self.pool2 = nn.MaxPool2d(2)  # 56 -> 28
        self.block4 = ConvBlock(2 * width, 4 * width)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.pool1(self.block1(self.stem(x)))
        x = self.pool2(self.block3(self.block2(x)))
        x = self.block4(x)
        return self.head(torch.flatten(self.gap(x), 1))


def get_model(width: int = WIDTH, classes: int = CLASSES):
    torch.manual_seed(0)
    model = VisionStage(width, classes)
    with torch.no_grad():  # non-trivial running statistics, as in a trained network
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
    return model


def get_inputs(batch: int = BATCH, size: int = SIZE, device="cpu"):
    return [torch.randn(batch, 3, size, size, device=device)]
