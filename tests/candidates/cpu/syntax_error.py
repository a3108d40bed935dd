# expect: compile_error -- Python syntax error
import torch
class ModelNew(torch.nn.Module)
    pass
