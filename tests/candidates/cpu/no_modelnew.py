# expect: compile_error -- defines no ModelNew
import torch


class Model2(torch.nn.Module):
    pass
