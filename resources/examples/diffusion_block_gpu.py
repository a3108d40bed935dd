"""A diffusion U-Net block sized for a datacenter GPU: 256 channels at 64×64, batch 4.

The same kinds of ops as ``diffusion_block.py`` (a ResNet block of group norm, SiLU and 3×3 convs;
a self-attention block over the 4096 spatial positions with an explicit softmax), at the size of a
latent diffusion model's first U-Net level, where the attention's score matrix alone is 256 MB.
fp32, as the other examples.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
Both take sizes as keyword arguments (the defaults are the GPU size); ``get_inputs`` builds its
tensors on the CPU unless given ``device``, and the loader moves them to the model's device.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS, GROUPS = 256, 32
BATCH, SIZE = 4, 64


class ResBlock(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return x + h


class SpatialAttention(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        self.qkv = nn.Conv2d(channels, 3 * channels, 1)
        self.proj = nn.Conv2d(channels, channels, 1)
        self.scale = channels ** -0.5

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=1)
        q = q.reshape(b, c, h * w).transpose(1, 2)  # (b, positions, c)
        k = k.reshape(b, c, h * w)  # (b, c, positions)
        v = v.reshape(b, c, h * w).transpose(1, 2)
        scores = torch.bmm(q, k) * self.scale
        probs = torch.softmax(scores, dim=-1)
        out = torch.bmm(probs, v).transpose(1, 2).reshape(b, c, h, w)
        return x + self.proj(out)


class DiffusionBlock(nn.Module):
    def __init__(self, channels: int = CHANNELS, groups: int = GROUPS):
        super().__init__()
        self.res = ResBlock(channels, groups)
        self.attn = SpatialAttention(channels, groups)

    def forward(self, x):
        return self.attn(self.res(x))


def get_model(channels: int = CHANNELS, groups: int = GROUPS):
    torch.manual_seed(0)
    model = DiffusionBlock(channels, groups)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.GroupNorm):
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
    return model


def get_inputs(batch: int = BATCH, channels: int = CHANNELS, size: int = SIZE, device="cpu"):
    return [torch.randn(batch, channels, size, size, device=device)]
