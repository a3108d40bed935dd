"""What each graph node is, for target finding: its op name, family and a FLOP estimate.

Families:
- fusible: elementwise, activation, reduction, softmax, norm — adjacent ones become one target
  (e.g. the pow/mean/add/rsqrt/mul/mul of a hand-written RMSNorm);
- heavy: linear (matmul family), conv, pooling, embedding, attention — a target of their own;
- free: views, shape arithmetic, identity — never a target alone, absorbed into a neighbour;
- other: anything else (in-place ops, unknown modules, cat, indexing): runs as is.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

ELEMENTWISE = {
    "add", "sub", "mul", "truediv", "div", "neg", "pow", "rsqrt", "sqrt", "exp", "exp2", "log", "log2", "log1p",
    "abs", "clamp", "clamp_min", "clamp_max", "clip", "where", "masked_fill", "reciprocal", "sin", "cos",
    "square", "addcmul", "addcdiv", "lerp", "maximum", "minimum", "erf", "floordiv", "floor_divide", "floor",
    "ceil", "round", "sign", "eq", "ne", "gt", "ge", "lt", "le", "logical_and", "logical_or", "logical_not",
    "float", "half", "bfloat16", "double", "to", "type_as", "mod", "fmod", "remainder", "rsub", "mul_scalar",
    "sigmoid_", "tril", "triu", "ones_like", "zeros_like", "full_like", "_to_copy",
}
ACTIVATION = {
    "relu", "silu", "gelu", "sigmoid", "tanh", "leaky_relu", "elu", "selu", "celu", "softplus", "mish",
    "hardswish", "hardsigmoid", "relu6", "hardtanh", "glu", "logsigmoid", "softsign", "swish",
}
REDUCTION = {"mean", "sum", "amax", "amin", "max", "min", "var", "std", "norm", "logsumexp", "prod", "var_mean"}
SOFTMAX = {"softmax", "log_softmax", "_softmax"}
NORM = {"layer_norm", "group_norm", "batch_norm", "rms_norm", "instance_norm", "normalize", "local_response_norm",
        "_native_batch_norm_legit_no_training"}
LINEAR = {"linear", "matmul", "bmm", "mm", "addmm", "baddbmm", "einsum", "bilinear"}
CONV = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
POOL = {
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "lp_pool2d",
}
EMBEDDING = {"embedding", "embedding_bag"}
ATTENTION = {"scaled_dot_product_attention"}
VIEW = {
    "view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "flatten", "unflatten", "contiguous",
    "chunk", "split", "getitem", "t", "expand", "expand_as", "narrow", "select", "unbind", "view_as",
    "size", "dim", "getattr", "movedim", "swapaxes", "dropout", "identity", "detach", "float_", "alias",
    "slice", "split_with_sizes", "_unsafe_view", "sym_size", "sym_numel", "sym_stride",
}

FUSIBLE_FAMILIES = ("elementwise", "activation", "reduction", "softmax", "norm")
HEAVY_FAMILIES = ("linear", "conv", "pool", "embedding", "attention")

_FAMILY_OF = {}
for _fam, _names in (("elementwise", ELEMENTWISE), ("activation", ACTIVATION), ("reduction", REDUCTION),
                     ("softmax", SOFTMAX), ("norm", NORM), ("linear", LINEAR), ("conv", CONV), ("pool", POOL),
                     ("embedding", EMBEDDING), ("attention", ATTENTION), ("view", VIEW)):
    for _n in _names:
        _FAMILY_OF[_n] = _fam

_OPERATOR_NAMES = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
    operator.floordiv: "floordiv", operator.neg: "neg", operator.pow: "pow", operator.matmul: "matmul",
    operator.getitem: "getitem", operator.mod: "mod", operator.eq: "eq", operator.ne: "ne",
    operator.gt: "gt", operator.ge: "ge", operator.lt: "lt", operator.le: "le", getattr: "getattr",
    operator.iadd: "iadd_", operator.imul: "imul_", operator.isub: "isub_", operator.itruediv: "itruediv_",
}


def op_name(node: fx.Node, gm: fx.GraphModule | None = None) -> str:
    """A short name for what ``node`` does: ``softmax``, ``pow``, ``layer_norm``, ``Linear`` …
    An aten op of a graph captured through torch.export is named by its packet (``aten.softmax.int``
    is ``softmax``), so it falls in the same family as the call the user wrote."""
    if node.op == "call_function":
        if node.target in _OPERATOR_NAMES:
            return _OPERATOR_NAMES[node.target]
        if isinstance(node.target, torch._ops.OpOverload):
            return node.target.overloadpacket.__name__
        name = getattr(node.target, "__name__", str(node.target))
        if name == "dropout" and node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True) is False:
            return "dropout"
        return name
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module" and gm is not None:
        return type(gm.get_submodule(node.target)).__name__
    return node.op


def family(node: fx.Node, value, gm: fx.GraphModule | None = None) -> str:
    """The node's family (see module doc); ``value`` is its runtime output (decides scalar math)."""
    if node.op in ("placeholder", "get_attr", "output"):
        return node.op
    if node.op == "call_module":
        return "other"
    name = op_name(node, gm)
    if not _produces_tensors(value):
        return "free"  # shape arithmetic on Python numbers
    if (name.endswith("_") and name not in ("float_",)) or node.kwargs.get("inplace") is True:
        return "other"  # in-place: mutates an input, never fused
    if node.op == "call_method" and name in ("max", "min") and not (node.args[1:] or node.kwargs):
        return "reduction"
    if name in ("max", "min") and node.op == "call_function" and len(node.args) > 1 and isinstance(node.args[1], fx.Node):
        return "elementwise"  # torch.max(a, b)
    fam = _FAMILY_OF.get(name, "other")
    if fam == "view":
        return "free"
    if name in ("max", "min") and isinstance(value, tuple):
        return "other"  # (values, indices)
    if not isinstance(value, torch.Tensor) and fam != "free":
        return "other"  # tuple-valued ops other than views (var_mean …)
    return fam


def _produces_tensors(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return True
    return False


def _numel(v) -> int:
    return v.numel() if isinstance(v, torch.Tensor) else 0


def flops(node: fx.Node, fam: str, args: list, value) -> float:
    """FLOPs of one call (a floor estimate: multiply-adds count 2, everything else 1 per element)."""
    out = _numel(value)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    name = op_name(node)
    if fam == "elementwise":
        return float(out)
    if fam == "activation":
        return 4.0 * out
    if fam == "reduction":
        return float(sum(t.numel() for t in tensors[:1]))
    if fam == "softmax":
        return 5.0 * out
    if fam == "norm":
        return 8.0 * out
    if fam == "pool":
        return float(max(out, _numel(tensors[0]) if tensors else 0))
    if fam == "embedding":
        return 0.0
    if fam == "linear" and len(tensors) >= 2:
        if name in ("linear",):
            k = tensors[0].shape[-1]
            return 2.0 * out * k
        if name in ("addmm", "baddbmm"):
            a = tensors[1]
            return 2.0 * out * a.shape[-1]
        a = tensors[0]
        return 2.0 * out * (a.shape[-1] if a.dim() >= 1 else 1)
    if fam == "conv" and len(tensors) >= 2:
        w = tensors[1]
        per_out = math.prod(w.shape[1:])  # (Cin/groups) * kernel
        return 2.0 * out * per_out
    if fam == "attention" and len(tensors) >= 3:
        q, k = tensors[0], tensors[1]
        return 4.0 * q.numel() * k.shape[-2]
    return float(out)
