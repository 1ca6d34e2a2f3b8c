"""Lesson 09: each docstring promise of a graded exercise, the wrong answer that breaks it, and the
words of the message that names it. A promise without a row here has no check."""
import pytest
import torch

from course_lib.checks import prompt_tuning as C
from test_checks_prompt_tuning import freeze_ok, labels_ok, loglik_ce, prepend_ok
from named import assert_promise_broken, wrong


def _prepend_in_place(x, m, p):
    m.fill_(1) if m.dtype != torch.bool else m.fill_(True)
    return prepend_ok(x, m, p)


def _prepend_float_mask(x, m, p):
    e, mask = prepend_ok(x, m, p)
    return e, mask.float()


def _prepend_detached(x, m, p):
    return prepend_ok(x, m, p.detach())


def _prepend_first_row_only(x, m, p):
    e, mask = prepend_ok(x, m, p)
    e = e.clone()
    e[1:, : p.shape[0]] = 0.0
    return e, mask


def _labels_int32(i, m, P, s):
    return labels_ok(i, m, P, s).int()


def _labels_in_place(i, m, P, s):
    i[m == 0] = -100
    return labels_ok(i, m, P, s)


def _loglik_float64(lg, lb, normalise=False):
    return loglik_ce(lg.double(), lb, normalise)


def _loglik_keepdim(lg, lb, normalise=False):
    return loglik_ce(lg, lb, normalise).unsqueeze(-1)


def _freeze_no_count(model):
    freeze_ok(model)
    return None


PROMISES = [
    (C.check_prepend_soft_prompt, "P + T positions with the prompt in front", wrong(C.WRONG_PREPEND, "_prepend_after").fn,
     "prompt appended after the tokens"),
    (C.check_prepend_soft_prompt, "mask extended with ones", wrong(C.WRONG_PREPEND, "_prepend_mask_unchanged").fn, "attention mask not extended"),
    (C.check_prepend_soft_prompt, "mask keeps attention_mask's dtype", _prepend_float_mask, "dtype"),
    (C.check_prepend_soft_prompt, "inputs not modified", _prepend_in_place, "in place"),
    (C.check_prepend_soft_prompt, "gradients flow back to prompt", _prepend_detached, "gradient"),
    (C.check_prepend_soft_prompt, "prompt shared by the whole batch", _prepend_first_row_only, "embeds"),
    (C.check_answer_only_labels, "(B, P + T) aligned with the prompted sequence", wrong(C.WRONG_LABELS, "<lambda>", 'soft-prompt positions left out').fn,
     "soft-prompt positions left out"),
    (C.check_answer_only_labels, "not shifted", wrong(C.WRONG_LABELS, "<lambda>", 'labels shifted here').fn, "labels shifted here"),
    (C.check_answer_only_labels, "-100 on padding", wrong(C.WRONG_LABELS, "<lambda>", 'padding trained on').fn, "padding trained on"),
    (C.check_answer_only_labels, "int64", _labels_int32, "int64"),
    (C.check_answer_only_labels, "inputs not modified", _labels_in_place, "in place"),
    (C.check_option_log_likelihood, "(B,) in the logits' dtype", _loglik_float64, "float32"),
    (C.check_option_log_likelihood, "(B,) shape", _loglik_keepdim, "shape"),
    (C.check_option_log_likelihood, "normalise divides by the scored tokens", wrong(C.WRONG_LOGLIK, "<lambda>", 'mean over all positions').fn,
     "mean over all positions"),
    (C.check_option_log_likelihood, "shift by one", wrong(C.WRONG_LOGLIK, "<lambda>", 'no shift by one').fn, "no shift by one"),
    (C.check_freeze_model, "eval mode", wrong(C.WRONG_FREEZE, "_wrong_no_eval").fn, "left in training mode"),
    (C.check_freeze_model, "tied weight counted once", wrong(C.WRONG_FREEZE, "_wrong_count_duplicates").fn, "tied weights counted twice"),
    (C.check_freeze_model, "buffers are not parameters", wrong(C.WRONG_FREEZE, "_wrong_count_state_dict").fn, "buffers"),
    (C.check_freeze_model, "returns the number of parameters", _freeze_no_count, "expected"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
