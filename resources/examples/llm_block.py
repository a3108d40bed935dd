"""A small LLM decoder block: RMS norm written as primitive ops, attention with an explicit
softmax, and a SwiGLU MLP, as in Llama-style models.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / (self.head_dim ** 0.5)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1)
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
    def __init__(self, dim: int = 256, heads: int = 4, hidden: int = 688):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        h = x + self.attn(self.attn_norm(x))
        return h + self.mlp(self.mlp_norm(h))


def get_model():
    torch.manual_seed(0)
    model = DecoderBlock()
    with torch.no_grad():
        model.attn_norm.weight.uniform_(0.8, 1.2)
        model.mlp_norm.weight.uniform_(0.8, 1.2)
    return model


def get_inputs():
    return [torch.randn(2, 128, 256)]
