"""Gradients measured, never reported: what an autograd call gives, as plain data the verifier compares.

A check that promises "gradients flow back to x" used to read ``out.requires_grad``, a fact the
student's output reports about itself: a tensor computed in numpy and marked ``requires_grad=True``
passed. :func:`observe_gradient` instead runs one autograd call on what the student returned (the
gradient of a fixed seeded weighting of the output with respect to the check's own inputs) and records
that gradient as a plain tensor; the check compares it with the same call on the reference's output
(in grading: the verifier, outside the kernel). A gradient hook on the output or on an input (tensor
``_backward_hooks``, post-accumulate hooks) is refused with a message, never run.

Does NOT cover: second derivatives, or gradients with respect to parameters of a module the student
built (freezing is measured by ``clinical._observe_probe``, on copies of the parameters).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

# torch's own descriptors, bound when the checks are imported (before any student cell): a subclass
# or a shadowed attribute of what the student returns cannot answer for them
_REQUIRES_GRAD = torch._C.TensorBase.requires_grad.__get__
_IS_TENSOR = torch.is_tensor
NO_GRADIENT = "<gradients must flow back to {name}, and autograd gives it none through your output; avoid "\
              ".numpy(), .detach(), torch.no_grad() or torch.tensor(...) on intermediate values>"
HOOKED = "<refused: a gradient hook on {where}; a graded function must not register hooks>"


def hooks_on(tensor) -> bool:
    """True when ``tensor`` carries a backward or post-accumulate gradient hook (e.g. ``register_hook``)."""
    for attr in ("_backward_hooks", "_post_accumulate_grad_hooks"):
        try:
            if torch._C.TensorBase.__getattribute__(tensor, attr):
                return True
        except AttributeError:
            continue
    return False


def _pick(result, first_of_pair: bool):
    return result[0] if first_of_pair and isinstance(result, (tuple, list)) and len(result) == 2 else result


def observe_gradient(inputs: Sequence[torch.Tensor], names: Sequence[str], seed: int,
                     first_of_pair: bool = False) -> Callable:
    """observe=: for the output (the first of an (output, weights) pair with ``first_of_pair``), the gradients of ``sum(w * output)`` (``w`` seeded) with
    respect to ``inputs``, each detached to a plain tensor of the output's dtype, or a string saying why there is none.

    E.g. for ``f(x) = 2 * x`` the gradient with respect to ``x`` is ``2 * w``; for a numpy computation
    wrapped in ``torch.tensor(..., requires_grad=True)`` it is the NO_GRADIENT text."""
    def observe(result):
        out = _pick(result, first_of_pair)
        if not _IS_TENSOR(out) or type(out) is not torch.Tensor:
            return f"<not a torch tensor: {type(out).__name__}>"
        hooked = [n for n, t in zip(names, inputs) if hooks_on(t)] + (["the output"] if hooks_on(out) else [])
        if hooked:
            return HOOKED.format(where=", ".join(hooked))
        if not _REQUIRES_GRAD(out) or not out.is_floating_point():
            return tuple(NO_GRADIENT.format(name=n) for n in names)
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(tuple(out.shape), generator=g, dtype=torch.float64).to(out.dtype)
        try:
            with torch.enable_grad():
                grads = torch.autograd.grad(out, list(inputs), grad_outputs=w, allow_unused=True)
        except RuntimeError as err:
            return f"<autograd could not differentiate the output: {str(err)[:200]}>"
        # in the output's precision: a float32 answer's gradient is float32-accurate even where the input is
        # float64, and the comparison's tolerance follows the recorded dtype (the prose allows float32)
        return tuple(NO_GRADIENT.format(name=n) if gr is None else gr.detach().to(out.dtype).clone()
                     for n, gr in zip(names, grads))
    return observe


def reference_gradient(fn: Callable, args: Sequence[torch.Tensor], wrt: Sequence[int], names: Sequence[str],
                       seed: int, first_of_pair: bool = False):
    """The same observation on the reference ``fn`` (called through ``core.reference``) on copies of
    ``args``, the gradients taken with respect to ``args[i]`` for each ``i`` in ``wrt``."""
    copies = [t.detach().clone().requires_grad_(_REQUIRES_GRAD(t)) for t in args]
    return observe_gradient([copies[i] for i in wrt], names, seed, first_of_pair)(fn(*copies))


def compare_gradients(got, expected, exercise: str, label: str, assert_close: Callable) -> None:
    """Fail with what was wrong: a refusal or a missing gradient in words, else the worst element."""
    if isinstance(got, str):
        raise AssertionError(f"{exercise} on '{label}': {got.strip('<>')}")
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        raise AssertionError(f"{exercise} on '{label}': the gradient check recorded {type(got).__name__}, "
                             f"expected {len(expected)} gradient(s)")
    for g, e in zip(got, expected):
        if isinstance(g, str):
            raise AssertionError(f"{exercise} on '{label}': {g.strip('<>')}")
        assert_close(g, e, f"{exercise} on '{label}': the gradient of a weighted sum of the output (autograd, "
                           "measured on your output)")
