"""Demo submissions for 09_prompt_tuning and their expected autograded scores.

Points per graded test: freeze_model 1 + 2, prepend_soft_prompt 1 + 2, answer_only_labels 1 + 2,
option_log_likelihood 1 + 2 (12 autograded points); the written answers what_prompt_tuning_changes
(1 point) and rate_long_form_answers (2 points) are graded by hand and count 0 here.
"""

# s03_misconception shifts the labels inside answer_only_labels (label t = the token at t + 1),
# although the loss shifts them again: the checks name "labels shifted here"; both
# answer_only_labels tests fail (-3 points). No other graded test calls this function.
MISCONCEPTION = {
    "answer_only_labels_impl": '''
def answer_only_labels(input_ids, attention_mask, prompt_len, answer_start):
    """Labels shifted by one here (wrong: the loss shifts them)."""
    B, T = input_ids.shape
    pos = torch.arange(T).unsqueeze(0)
    keep = (pos >= answer_start.view(B, 1)) & attention_mask.bool()
    labels = torch.where(keep, input_ids.long(), torch.full((B, T), -100, dtype=torch.long))
    labels = torch.cat([torch.full((B, prompt_len), -100, dtype=torch.long), labels], dim=1)
    return torch.cat([labels[:, 1:], torch.full((B, 1), -100, dtype=torch.long)], dim=1)
''',
}

# s04_crash's prepend_soft_prompt cell raises when it runs: prepend_soft_prompt is never defined,
# both of its tests fail (NameError); nothing else graded uses it. 12 - 3 = 9 points.
CRASH = {
    "prepend_soft_prompt_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 12.0, "s02_blank": 0.0, "s03_misconception": 9.0, "s04_crash": 9.0}
