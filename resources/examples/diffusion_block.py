"""A diffusion-style block: a ResNet block (group norm, SiLU, conv) and a spatial self-attention
block (group norm, attention with softmax), as in a U-Net of a latent diffusion model.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResBlock(nn.Module):
    def __init__(self, channels: int, groups: int = 8):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return x + h


class AttnBlock(nn.Module):
    def __init__(self, channels: int, groups: int = 8):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        self.qkv = nn.Conv2d(channels, 3 * channels, 1)
        self.proj = nn.Conv2d(channels, channels, 1)
        self.scale = channels ** -0.5

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=1)
        q = q.reshape(b, c, h * w).transpose(1, 2)
        k = k.reshape(b, c, h * w)
        v = v.reshape(b, c, h * w).transpose(1, 2)
        attn = torch.softmax(torch.bmm(q, k) * self.scale, dim=-1)
        out = torch.bmm(attn, v).transpose(1, 2).reshape(b, c, h, w)
        return x + self.proj(out)


class DiffusionBlock(nn.Module):
    def __init__(self, channels: int = 64):
        super().__init__()
        self.res = ResBlock(channels)
        self.attn = AttnBlock(channels)

    def forward(self, x):
        return self.attn(self.res(x))


def get_model():
    torch.manual_seed(0)
    model = DiffusionBlock()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.GroupNorm):
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
    return model


def get_inputs():
    return [torch.randn(2, 64, 16, 16)]
