"""Demo submissions for 07_efficient and their expected autograded scores.

Points per graded test: elu_feature_map 1 + 2, linear_attention 1 + 2, causal_linear_attention
1 + 2, linear_attention_step 1 + 2, positive_random_features 1 + 2 (15 autograded points); the
written answer why_positive_features (1 point) is graded by hand and counts 0 here.
"""

# s03_misconception makes two classic mistakes. linear_attention returns phi(Q)(phi(K)^T V)
# without dividing by the normaliser: the checks name "forgot the normaliser", both of its tests
# fail (-3). positive_random_features leaves out the exp(-|x|^2/2) factor: the checks name
# "forgot exp(-|x|^2/2)", both of its tests fail (-3). No other graded test calls either
# function (the checks pass the feature map explicitly), so 15 - 6 = 9.
MISCONCEPTION = {
    "linear_attention_impl": '''
def linear_attention(q, k, v, feature_map=elu_feature_map):
    """phi(Q) (phi(K)^T V), but without the normaliser (wrong: a weighted sum, not an average)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    return feature_map(q) @ (np.swapaxes(feature_map(k), -1, -2) @ v)
''',
    "positive_random_features_impl": '''
def positive_random_features(x, w):
    """exp(w x) / sqrt(m), without the exp(-|x|^2/2) factor (wrong: estimates a larger kernel)."""
    x, w = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    return np.exp(x @ np.swapaxes(w, -1, -2)) / math.sqrt(w.shape[-2])
''',
}

# s04_crash's causal_linear_attention cell raises when it runs: the function is never defined,
# so both of its tests fail (NameError); no other graded test uses it. 15 - 3 = 12 points.
CRASH = {
    "causal_linear_attention_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 15.0, "s02_blank": 0.0, "s03_misconception": 9.0, "s04_crash": 12.0}
