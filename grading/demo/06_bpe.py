"""Demo submissions for 06_bpe and their expected autograded scores.

Points per graded test: get_stats 1 + 2, merge 1 + 2, word_counts 1 + 2, train_naive 1 + 2,
encode_ids 1 + 2, decode_ids 1 + 2 (18 autograded points); the written answer
fertility_answer (1 point) is graded by hand and counts 0 here.
"""

# s03_misconception decodes every token on its own before joining the strings. The checks
# name "decoding token by token": the visible test fails on 'café' split into its two
# bytes, the hidden one on the emoji split over two tokens (-3 points). No other graded
# test calls decode_ids, so 18 - 3 = 15.
MISCONCEPTION = {
    "decode_ids_impl": '''
def decode_ids(ids, vocab):
    """Decode each token's bytes separately, then join the strings (wrong: splits characters)."""
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)
''',
}

# s04_crash's word_counts cell raises when it runs: word_counts is never defined, so both
# word_counts tests fail (NameError); no other graded test uses it. 18 - 3 = 15 points.
CRASH = {
    "word_counts_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 18.0, "s02_blank": 0.0, "s03_misconception": 15.0, "s04_crash": 15.0}
