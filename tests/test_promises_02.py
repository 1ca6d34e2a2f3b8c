"""Lesson 02: docstring promises, the wrong answer that breaks each, and the words of its message."""
import numpy as np
import pytest
import torch

from course_lib.checks import masking as C
from test_checks_masking import causal_mask, combine_masks, masked_softmax, masked_softmax_float32, to_additive
from named import assert_promise_broken, wrong

PROMISES = [
    (C.check_causal_mask, "boolean (T, S), True = may attend", lambda T, S=None: causal_mask(T, S).astype(int), "BOOLEAN"),
    (C.check_causal_mask, "S > T: queries are the last T positions", wrong(C.WRONG_CAUSAL, "<lambda>", 'aligned to the start').fn, "aligned to the start"),
    (C.check_padding_mask, "S = max_len when given", wrong(C.WRONG_PADDING, "<lambda>", 'max_len ignored').fn, "max_len ignored"),
    (C.check_combine_masks, "with neither mask, None",
     lambda attn_mask=None, key_padding=None: combine_masks(attn_mask, key_padding) if (attn_mask is not None or key_padding is not None) else np.ones((1, 1, 1), bool),
     "combine_masks"),
    (C.check_to_additive, "tensors in, torch's default dtype out",
     lambda mask, dtype=None: to_additive(np.asarray(mask), dtype if not isinstance(dtype, torch.dtype) else None),
     "torch"),
    (C.check_to_additive, "-inf, not a large negative", wrong(C.WRONG_ADDITIVE, "<lambda>", 'large negative instead of -inf').fn, "large negative instead of -inf"),
    (C.check_masked_softmax, "a fully masked row gives zeros, not NaN", wrong(C.WRONG_MASKED_SOFTMAX, "<lambda>", 'NaN on a fully masked row').fn,
     "NaN on a fully masked row"),
    (C.check_masked_softmax, "stable for large scores", wrong(C.WRONG_MASKED_SOFTMAX, "<lambda>",
                                                              "no max shift (overflow)").fn, "no max shift"),
    (C.check_masked_softmax, "inputs unchanged",
     lambda scores, mask=None: (scores.__setitem__(..., np.where(True if mask is None else mask, scores, -np.inf)),
                                masked_softmax(scores, mask))[1], "input modified in place"),
    (C.check_masked_softmax, "Numpy; float64", masked_softmax_float32, "promises a numpy array of dtype float64"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
