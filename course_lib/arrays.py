"""One conversion every part of the course needs: anything array-like to a numpy array.

    to_numpy(torch.tensor([1, 2]))      # array([1., 2.])  (float64: numbers compare in one precision)

Used by the checks (to compare a student's output with the reference's) and by the plots. The builtins it
calls are bound when the module is imported, so a notebook that rebinds ``isinstance`` or ``np.asarray``
later changes nothing here. Does NOT cover: comparing arrays (``course_lib.checks.core``).
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

_asarray = np.asarray
_float64 = np.float64
_isinstance = builtins.isinstance


def to_numpy(x: Any) -> np.ndarray:
    """Array view of a numpy array, torch tensor, list or scalar, as float64 where numeric."""
    try:
        import torch

        if _isinstance(x, torch.Tensor):
            x = x.detach().to("cpu")
            if x.is_floating_point():
                x = x.to(torch.float64)
            return x.numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    arr = _asarray(x)
    if arr.dtype.kind in "iuf":
        arr = arr.astype(_float64)
    return arr
