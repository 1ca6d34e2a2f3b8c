"""Demo submissions for 01_attention and their expected autograded scores.

Points per graded test: softmax 1 + 2, attention_numpy 1 + 2, attention_torch 1 + 2
(9 autograded points); the written answer why_sqrt_dk (2 points) is graded by hand
and counts 0 here.
"""

# s03_misconception forgets the 1/sqrt(d_k) scaling in the numpy attention: the checks
# name "missing scaling", both attention_numpy tests fail (-3 points).
MISCONCEPTION = {
    "attention_numpy_impl": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T) v -- forgot the scaling."""
    scores = q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
''',
}

# s04_crash's softmax cell loops forever: the cell is interrupted after the per-cell
# timeout, softmax is never defined, and the numpy attention (which calls softmax)
# fails too. The torch attention is correct. 9 - 3 - 3 = 3 points.
CRASH = {
    "softmax_impl": '''
def softmax(x, axis=-1):
    """Never returns: the whole cell loops forever."""
    return x

while True:
    pass
''',
}

EXPECTED = {"s01_correct": 9.0, "s02_blank": 0.0, "s03_misconception": 6.0, "s04_crash": 3.0}
