"""Demo submissions for 02_masking and their expected autograded scores.

Points per graded test: causal_mask 1 + 2, padding_mask 1 + 2, combine_masks 1 + 2,
to_additive 1 + 2, masked_softmax 1 + 2 (15 autograded points); the written answer
why_nan_spreads (1 point) is graded by hand and counts 0 here.
"""

# s03_misconception zeroes the masked weights AFTER the softmax: the checks name
# "mask after softmax", both masked_softmax tests fail (-3 points).
MISCONCEPTION = {
    "masked_softmax_impl": '''
def masked_softmax(scores, mask=None):
    """Softmax over the keys, then the masked weights set to 0 (rows no longer sum to 1)."""
    scores = np.asarray(scores, dtype=np.float64)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return weights
''',
}

# s04_crash's padding_mask cell raises when it runs: padding_mask is never defined, so
# both padding_mask tests fail (NameError); the other exercises do not use it.
# 15 - 3 = 12 points.
CRASH = {
    "padding_mask_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 15.0, "s02_blank": 0.0, "s03_misconception": 12.0, "s04_crash": 12.0}
