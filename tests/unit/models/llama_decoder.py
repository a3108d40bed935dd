"""A LLaMA-style decoder written the ordinary way, small enough for a CPU.

What a user's model file looks like, and what torch.fx alone cannot trace: the attention unpacks
the input's shape, views one q/k/v projection as (b, t, 3, heads, head_dim), checks the sequence
length, builds its causal mask in ``forward`` (``torch.triu(torch.ones(t, t))``), scales,
``masked_fill``s with -inf and takes an explicit softmax. RMSNorm is written out, the MLP is SwiGLU.
``get_model(attention="sdpa")`` builds the same decoder with ``F.scaled_dot_product_attention``.

A Kernel Forge model file: ``get_model()`` returns the module, ``get_inputs()`` example inputs.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS, HIDDEN, LAYERS, MAX_SEQ = 128, 64, 4, 176, 2, 64
BATCH, SEQ = 2, 16


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, dim, heads, max_seq):
        super().__init__()
        self.heads = heads
        self.max_seq = max_seq
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        if t > self.max_seq:
            raise ValueError(f"sequence of {t} tokens, at most {self.max_seq}")
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = torch.triu(torch.ones(t, t, device=x.device), diagonal=1).bool()
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class SdpaAttention(Attention):
    def forward(self, x):
        b, t, d = x.shape
        if t > self.max_seq:
            raise ValueError(f"sequence of {t} tokens, at most {self.max_seq}")
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, max_seq, attention):
        super().__init__()
        self.att_norm = RMSNorm(dim)
        self.att = (SdpaAttention if attention == "sdpa" else Attention)(dim, heads, max_seq)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        x = x + self.att(self.att_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    def __init__(self, vocab=VOCAB, dim=DIM, heads=HEADS, hidden=HIDDEN, layers=LAYERS, max_seq=MAX_SEQ,
                 attention="explicit"):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, max_seq, attention) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def get_model(attention="explicit"):
    torch.manual_seed(0)
    model = Decoder(attention=attention)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, RMSNorm):
                m.weight.uniform_(0.8, 1.2)
    return model


def get_inputs(batch=BATCH, seq=SEQ):
    return [torch.randint(0, VOCAB, (batch, seq))]
