"""Demo submissions for 08_clinical_text and their expected autograded scores.

Points per graded test: mean_pool 1 + 2, cosine_top_k 1 + 2, freeze_for_probe 1 + 2,
attention_rollout 1 + 2 (12 autograded points); the written answer pretrained_written
(1 point) is graded by hand and counts 0 here.
"""

# s03_misconception ranks by the plain dot product (no normalisation): the checks name
# "unnormalised dot product"; both cosine_top_k tests fail (-3 points). No other graded
# test calls cosine_top_k.
MISCONCEPTION = {
    "cosine_top_k_impl": '''
def cosine_top_k(queries, keys, k):
    """Ranks by q . k without dividing by the norms (wrong)."""
    import numpy as np
    if not 1 <= k <= keys.shape[0]:
        raise ValueError("k out of range")
    sims = queries @ keys.T
    idx = np.argsort(-sims, axis=-1, kind="stable")[:, :k]
    return np.take_along_axis(sims, idx, axis=-1), idx
''',
}

# s04_crash's freeze_for_probe cell raises when it runs: freeze_for_probe is never defined,
# both of its tests fail (NameError); only a demo-only cell uses it. 12 - 3 = 9 points.
CRASH = {
    "freeze_for_probe_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 12.0, "s02_blank": 0.0, "s03_misconception": 9.0, "s04_crash": 9.0}
