"""A problem's memory footprint: the bytes of its inputs, outputs and parameters.

Why: evaluating a problem whose tensors are gigabytes needs a known amount of device memory, and
several GPU workers at once must not ask for more than the card has. The footprint is found on the
``meta`` device (shapes and dtypes, no data, no real work), so it costs milliseconds even for a
6 GB problem and runs nothing on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .problem import Problem, ProblemError

# what one evaluation holds at once beyond the model's own parameters: the inputs and a clone the
# candidate gets, the reference output and the candidate's (see kernels/worker.py); the comparison
# works in chunks and adds little
WORKING_SETS = 4


@dataclass(frozen=True)
class Footprint:
    input_bytes: int
    output_bytes: int
    param_bytes: int
    exact: bool = True  # False: the outputs could not be traced on meta and were taken as the inputs' size

    @property
    def data_bytes(self) -> int:
        """G: the bytes of one set of inputs and outputs."""
        return self.input_bytes + self.output_bytes

    @property
    def needed_bytes(self) -> int:
        """Device memory one evaluation needs: a few working sets of data, the parameters twice
        (reference and candidate)."""
        return WORKING_SETS * self.data_bytes + 2 * self.param_bytes


def _tensor_bytes(values) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(_tensor_bytes(v) for v in values)
    if isinstance(values, dict):
        return sum(_tensor_bytes(v) for v in values.values())
    return 0


def footprint(problem: Problem) -> Footprint:
    """Input, output and parameter bytes of ``problem``, found on the meta device."""
    mod = problem.load_module()
    try:
        with torch.device("meta"):
            inputs = list(mod.get_inputs())
            model = mod.Model(*mod.get_init_inputs())
    except Exception as err:
        raise ProblemError(f"{problem.name}: get_inputs() or Model(*get_init_inputs()) raised "
                           f"{type(err).__name__}: {err}.") from None
    in_bytes = _tensor_bytes(inputs)
    params = sum(_tensor_bytes(t) for t in list(model.parameters()) + list(model.buffers()))
    try:
        with torch.no_grad():
            out = model(*inputs)
        return Footprint(in_bytes, _tensor_bytes(out), params)
    except Exception:  # an op without a meta kernel, or data-dependent code: estimate
        return Footprint(in_bytes, in_bytes, params, exact=False)


def fits(fp: Footprint, free_bytes: int) -> bool:
    return fp.needed_bytes <= free_bytes


def too_big_sentence(fp: Footprint, total_bytes: int, device: str) -> str:
    gib = 2**30
    return (f"the problem's tensors take {fp.data_bytes / gib:.1f} GiB (inputs and outputs), so an evaluation "
            f"needs about {fp.needed_bytes / gib:.1f} GiB of {device}'s {total_bytes / gib:.1f} GiB; "
            "make get_inputs() smaller or use a device with more memory")
