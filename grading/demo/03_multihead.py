"""Demo submissions for 03_multihead and their expected autograded scores.

Points per graded test: split_heads 1 + 2, merge_heads 1 + 2, multi_head_attention 1 + 2,
numpy_params_from_torch 1 + 2 (12 autograded points); the written answer
averaged_weights (1 point) is graded by hand and counts 0 here.
"""

# s03_misconception merges the heads with a bare reshape, without moving the head axis
# back: the checks name "heads merged without transposing back". Both merge_heads tests
# fail, and so do both multi_head_attention tests, because the student's
# multi_head_attention calls the student's merge_heads (-6 points).
MISCONCEPTION = {
    "merge_heads_impl": '''
def merge_heads(x):
    """(B, H, T, d_head) -> (B, T, D) by a bare reshape (wrong: mixes tokens across heads)."""
    B, H, T, d_head = x.shape
    return x.reshape(B, T, H * d_head)
''',
}

# s04_crash's numpy_params_from_torch cell raises when it runs: the function is never
# defined, both of its tests fail (NameError); nothing else depends on it. 12 - 3 = 9.
CRASH = {
    "numpy_params_from_torch_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 12.0, "s02_blank": 0.0, "s03_misconception": 6.0, "s04_crash": 9.0}
