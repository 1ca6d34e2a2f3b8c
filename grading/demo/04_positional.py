"""Demo submissions for 04_positional and their expected autograded scores.

Points per graded test: sinusoidal_encoding 1 + 2, shift_matrix 1 + 2, exponential_basis
1 + 2 (9 autograded points); the written answer learned_vs_fixed (1 point) is graded by
hand and counts 0 here.
"""

# s03_misconception puts the cosines in the even columns and the sines in the odd ones:
# the checks name "sin and cos swapped", both sinusoidal_encoding tests fail (-3 points).
# The other exercises and the pictures do not call the student's encoding.
MISCONCEPTION = {
    "sinusoidal_encoding_impl": '''
def sinusoidal_encoding(num_positions, d_model, base=10000.0):
    """Sines and cosines swapped (wrong): cos in the even columns, sin in the odd ones."""
    pos = np.arange(num_positions, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)
    angles = pos / base ** (two_i / d_model)
    pe = np.zeros((num_positions, d_model))
    pe[:, 0::2] = np.cos(angles)
    pe[:, 1::2] = np.sin(angles)
    return pe
''',
}

# s04_crash's shift_matrix cell raises when it runs: shift_matrix is never defined, both
# of its tests fail (NameError); nothing else uses it. 9 - 3 = 6 points.
CRASH = {
    "shift_matrix_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 9.0, "s02_blank": 0.0, "s03_misconception": 6.0, "s04_crash": 6.0}
