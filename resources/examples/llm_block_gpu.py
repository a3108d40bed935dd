"""An LLM decoder block sized for a datacenter GPU: hidden 2048, 16 heads, 1024 tokens, batch 4.

The same kinds of ops as ``llm_block.py`` (RMS norm written as primitive ops, attention with an
explicit causal softmax, a SwiGLU MLP), at a size where each op keeps the GPU busy for tens of
microseconds or more, so launch overhead does not decide who wins. fp32, as the other examples.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
Both take sizes as keyword arguments (the defaults are the GPU size); ``get_inputs`` builds its
tensors on the CPU unless given ``device``, and the loader moves them to the model's device.
Building the model allocates about 200 MB of weights; the forward at full size is meant for a GPU.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, HIDDEN = 2048, 16, 5632
BATCH, SEQ = 4, 1024


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (b, heads, t, head_dim)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        mask = x.new_ones(t, t, dtype=torch.bool).triu(1)  # True above the diagonal: the future
        scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, d)
        return self.wo(out)


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DecoderBlock(nn.Module):
    def __init__(self, dim: int = DIM, heads: int = HEADS, hidden: int = HIDDEN):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        h = x + self.attn(self.attn_norm(x))
        return h + self.mlp(self.mlp_norm(h))


def get_model(dim: int = DIM, heads: int = HEADS, hidden: int = HIDDEN):
    torch.manual_seed(0)
    model = DecoderBlock(dim, heads, hidden)
    with torch.no_grad():
        model.attn_norm.weight.uniform_(0.8, 1.2)
        model.mlp_norm.weight.uniform_(0.8, 1.2)
    return model


def get_inputs(batch: int = BATCH, seq: int = SEQ, dim: int = DIM, device="cpu"):
    return [torch.randn(batch, seq, dim, device=device)]
