"""Demo submissions for 05_blocks and their expected autograded scores.

Points per graded test: layer_norm 1 + 2, feed_forward 1 + 2, encoder_layer_forward 1 + 2
(9 autograded points); the written answer honest_comparison (1 point) is graded by hand
and counts 0 here.
"""

# s03_misconception builds the pre-norm branch with the residual taken from the
# normalised x (x = norm1(x) + SA(norm1(x))): the checks name "residual added after the
# norm in a pre-norm block"; both encoder_layer_forward tests fail (-3 points). Its
# post-norm branch is right, and no other graded test calls this function.
MISCONCEPTION = {
    "encoder_layer_forward_impl": '''
def encoder_layer_forward(layer, x, mask=None):
    """Pre-norm with the residual added after the norm (wrong)."""
    if layer.norm_first:
        h = layer.norm1(x)
        a, weights = layer.self_attn(h, h, h, mask=mask)
        x = h + layer.dropout1(a)
        h = layer.norm2(x)
        x = h + layer.dropout2(layer.ff(h))
    else:
        a, weights = layer.self_attn(x, x, x, mask=mask)
        x = layer.norm1(x + layer.dropout1(a))
        x = layer.norm2(x + layer.dropout2(layer.ff(x)))
    return x, weights
''',
}

# s04_crash's feed_forward cell raises when it runs: feed_forward is never defined, both
# of its tests fail (NameError); nothing else uses it. 9 - 3 = 6 points.
CRASH = {
    "feed_forward_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 9.0, "s02_blank": 0.0, "s03_misconception": 6.0, "s04_crash": 6.0}
