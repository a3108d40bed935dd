"""The self-attention of a diffusion U-Net block (diffusion_block_gpu's): 4096 positions of 256 channels,
q, k and v cut from one 1×1-conv output, one head, no mask; batch 4, fp32. Written as ``kforge profile``
writes an attention target: views, bmm, scale, softmax, bmm."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        q, k, v = x.chunk(3, dim=1)
        b, c, h, w = q.shape
        q = q.reshape(b, c, h * w).transpose(1, 2)
        k = k.reshape(b, c, h * w)
        v = v.reshape(b, c, h * w).transpose(1, 2)
        scores = torch.bmm(q, k)
        scaled = scores * 0.0625
        probs = torch.softmax(scaled, dim=-1)
        return torch.bmm(probs, v)


def get_inputs():
    return [torch.randn(4, 3 * 256, 64, 64)]


def get_init_inputs():
    return []
