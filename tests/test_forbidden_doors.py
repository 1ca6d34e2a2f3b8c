"""Forbidden means every door (issue 33, item 3).

Each exercise's forbidden torch built-ins are listed here with all their doors (aliases, ``torch._C``
bindings, ``torch.ops.aten`` entry points and the lower-level ops they dispatch to), derived in one
place (``course_lib.checks.core.BUILTIN_DOORS`` through ``core.forbid``). For every exercise and every
door, a student function that calls the door is caught: in live mode (JupyterLab) the call raises
IntegrityError; when graded, the kernel records that IntegrityError and the verifier's replay raises
it. A correct answer built from allowed primitives (torch.exp, sum, matmul) still passes.
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import core, transcript
from course_lib.checks.core import Case, IntegrityError

LESSONS = ("attention", "masking", "blocks", "clinical", "consensus", "efficient", "multihead", "proteins",
           "bpe", "dna", "positional", "prompt_tuning")


def _exercise_tables() -> dict[str, tuple[str, ...]]:
    """'<lesson>.<FORBIDDEN_NAME>' -> the paths its exercise forbids, every door included."""
    out = {}
    for lesson in LESSONS:
        module = importlib.import_module(f"course_lib.checks.{lesson}")
        for name, value in sorted(vars(module).items()):
            if name.startswith("FORBIDDEN") and isinstance(value, tuple):
                out[f"{lesson}.{name}"] = core.forbid(*value)
    return out


TABLES = _exercise_tables()


def _x():
    return torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


# how each door is called (arguments a student would pass); the modes catch the call before it runs
def _mha_args(x):
    e = x.shape[-1]
    w = torch.eye(3 * e, e, dtype=x.dtype)
    return (x, x, x, e, 1, w, torch.zeros(3 * e, dtype=x.dtype), None, None, False, 0.0, torch.eye(e, dtype=x.dtype),
            torch.zeros(e, dtype=x.dtype))


CALLS = {
    "torch.softmax": lambda x: torch.softmax(x, -1),
    "torch.Tensor.softmax": lambda x: x.softmax(-1),
    "torch.nn.functional.softmax": lambda x: F.softmax(x, -1),
    "torch.special.softmax": lambda x: torch.special.softmax(x, -1),
    "torch._C._VariableFunctions.softmax": lambda x: torch._C._VariableFunctions.softmax(x, -1),
    "torch._C._special.special_softmax": lambda x: torch._C._special.special_softmax(x, -1),
    "torch.ops.aten.softmax": lambda x: torch.ops.aten.softmax(x, -1),
    "torch.ops.aten._softmax": lambda x: torch.ops.aten._softmax(x, -1, False),
    "torch.ops.aten._safe_softmax": lambda x: torch.ops.aten._safe_softmax(x, -1),
    "torch.nn.functional.scaled_dot_product_attention": lambda x: F.scaled_dot_product_attention(x, x, x),
    "torch._C._nn.scaled_dot_product_attention": lambda x: torch._C._nn.scaled_dot_product_attention(x, x, x),
    "torch.ops.aten.scaled_dot_product_attention": lambda x: torch.ops.aten.scaled_dot_product_attention(x, x, x),
    "torch.ops.aten._scaled_dot_product_attention_math":
        lambda x: torch.ops.aten._scaled_dot_product_attention_math(x, x, x),
    "torch.ops.aten._scaled_dot_product_attention_math_for_mps":
        lambda x: torch.ops.aten._scaled_dot_product_attention_math_for_mps(x, x, x),
    "torch.ops.aten._scaled_dot_product_flash_attention":
        lambda x: torch.ops.aten._scaled_dot_product_flash_attention(x[None], x[None], x[None]),
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu":
        lambda x: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(x[None], x[None], x[None]),
    "torch.ops.aten._scaled_dot_product_efficient_attention":
        lambda x: torch.ops.aten._scaled_dot_product_efficient_attention(x[None], x[None], x[None], None, False),
    "torch.ops.aten._scaled_dot_product_cudnn_attention":
        lambda x: torch.ops.aten._scaled_dot_product_cudnn_attention(x[None], x[None], x[None], None, False),
    "torch.ops.aten._scaled_dot_product_fused_attention_overrideable":
        lambda x: torch.ops.aten._scaled_dot_product_fused_attention_overrideable(x[None], x[None], x[None]),
    "torch.ops.aten._flash_attention_forward":
        lambda x: torch.ops.aten._flash_attention_forward(x, x, x, None, None, 3, 3, 0.0, False, False),
    "torch.ops.aten._efficient_attention_forward":
        lambda x: torch.ops.aten._efficient_attention_forward(x[None], x[None], x[None], None, None, None, None,
                                                              None, 0.0, 0, False),
    "torch.nn.functional.multi_head_attention_forward": lambda x: F.multi_head_attention_forward(*_mha_args(x)),
    "torch.nn.MultiheadAttention.forward":
        lambda x: torch.nn.MultiheadAttention(4, 1, batch_first=True).double()(x, x, x),
    "torch._native_multi_head_attention": lambda x: torch._native_multi_head_attention(*_mha_args(x)[:3], 4, 1,
                                                                                      *_mha_args(x)[5:7],
                                                                                      *_mha_args(x)[11:13]),
    "torch.ops.aten._native_multi_head_attention":
        lambda x: torch.ops.aten._native_multi_head_attention(*_mha_args(x)[:3], 4, 1, *_mha_args(x)[5:7],
                                                              *_mha_args(x)[11:13]),
    "torch.nn.functional.layer_norm": lambda x: F.layer_norm(x, (4,)),
    "torch.layer_norm": lambda x: torch.layer_norm(x, (4,)),
    "torch._C._VariableFunctions.layer_norm": lambda x: torch._C._VariableFunctions.layer_norm(x, (4,)),
    "torch.native_layer_norm": lambda x: torch.native_layer_norm(x, (4,), None, None, 1e-5),
    "torch.ops.aten.layer_norm": lambda x: torch.ops.aten.layer_norm(x, [4]),
    "torch.ops.aten.native_layer_norm": lambda x: torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5),
    "torch.nn.functional.rms_norm": lambda x: F.rms_norm(x, (4,)),
    "torch.rms_norm": lambda x: torch.rms_norm(x, (4,)),
    "torch.ops.aten.rms_norm": lambda x: torch.ops.aten.rms_norm(x, [4]),
    "torch.ops.aten._fused_rms_norm": lambda x: torch.ops.aten._fused_rms_norm(x, [4], None, 1e-5),
    "torch.nn.functional.gelu": lambda x: F.gelu(x),
    "torch._C._nn.gelu": lambda x: torch._C._nn.gelu(x),
    "torch.ops.aten.gelu": lambda x: torch.ops.aten.gelu(x),
    "torch.nn.functional.elu": lambda x: F.elu(x),
    "torch.nn.functional.elu_": lambda x: F.elu_(x.clone()),
    "torch._C._nn.elu": lambda x: torch._C._nn.elu(x),
    "torch._C._nn.elu_": lambda x: torch._C._nn.elu_(x.clone()),
    "torch.ops.aten.elu": lambda x: torch.ops.aten.elu(x),
    "torch.ops.aten.elu_": lambda x: torch.ops.aten.elu_(x.clone()),
    "torch.nn.functional.cosine_similarity": lambda x: F.cosine_similarity(x, x, -1),
    "torch.cosine_similarity": lambda x: torch.cosine_similarity(x, x, -1),
    "torch.ops.aten.cosine_similarity": lambda x: torch.ops.aten.cosine_similarity(x, x, -1),
    "torch.nn.functional.cross_entropy": lambda x: F.cross_entropy(x[0], torch.tensor([0, 1, 2])),
    "torch._C._nn.cross_entropy_loss": lambda x: torch._C._nn.cross_entropy_loss(x[0], torch.tensor([0, 1, 2])),
    "torch.ops.aten.cross_entropy_loss": lambda x: torch.ops.aten.cross_entropy_loss(x[0], torch.tensor([0, 1, 2])),
    "torch.nn.functional.nll_loss": lambda x: F.nll_loss(x[0], torch.tensor([0, 1, 2])),
    "torch._C._nn.nll_loss": lambda x: torch._C._nn.nll_loss(x[0], torch.tensor([0, 1, 2])),
    "torch._C._nn.nll_loss_nd": lambda x: torch._C._nn.nll_loss_nd(x[0], torch.tensor([0, 1, 2])),
    "torch._C._nn.nll_loss2d": lambda x: torch._C._nn.nll_loss2d(x[None, :, :, :2], torch.zeros(1, 3, 2).long()),
    "torch.ops.aten.nll_loss": lambda x: torch.ops.aten.nll_loss(x[0], torch.tensor([0, 1, 2])),
    "torch.ops.aten.nll_loss_nd": lambda x: torch.ops.aten.nll_loss_nd(x[0], torch.tensor([0, 1, 2])),
    "torch.ops.aten.nll_loss_forward":
        lambda x: torch.ops.aten.nll_loss_forward(x[0], torch.tensor([0, 1, 2]), None, 1, -100),
    "torch.ops.aten.nll_loss2d":
        lambda x: torch.ops.aten.nll_loss2d(x[None, :, :, :2], torch.zeros(1, 3, 2).long()),
    "torch.ops.aten.nll_loss2d_forward":
        lambda x: torch.ops.aten.nll_loss2d_forward(x[None, :, :, :2], torch.zeros(1, 3, 2).long(), None, 1, -100),
    "torch.nn.TransformerEncoderLayer.forward":
        lambda x: torch.nn.TransformerEncoderLayer(4, 1, 8, batch_first=True).double().eval()(x),
    "torch._transformer_encoder_layer_fwd": lambda x: torch._transformer_encoder_layer_fwd(x, 4, 1, *([None] * 14)),
    "torch.ops.aten._transformer_encoder_layer_fwd":
        lambda x: torch.ops.aten._transformer_encoder_layer_fwd(x, 4, 1, *([None] * 14)),
    "torch.nn.attention.bias.causal_lower_right": lambda x: torch.nn.attention.bias.causal_lower_right(3, 4),
    "torch.nn.attention.bias.causal_upper_left": lambda x: torch.nn.attention.bias.causal_upper_left(3, 4),
}

TORCH_DOORS = sorted((table, door) for table, paths in TABLES.items() for door in paths if door.startswith("torch."))


def test_every_torch_door_of_every_table_is_listed_here():
    """The table and the calls below agree: a new door in BUILTIN_DOORS needs a call here (and is then tested)."""
    doors = {door for _, door in TORCH_DOORS}
    assert doors, "no exercise forbids a torch built-in"
    assert doors <= set(CALLS), f"doors without a call in this test: {sorted(doors - set(CALLS))}"
    for family, members in core.BUILTIN_DOORS.items():  # every table that names one door gets them all
        for table, paths in TABLES.items():
            if set(members) & set(paths) & set(core._DOOR_FAMILY):  # a door of this built-in alone
                assert set(members) <= set(paths), (table, family)


def test_the_doors_the_issue_names_are_forbidden():
    assert "torch.ops.aten._scaled_dot_product_attention_math" in TABLES["attention.FORBIDDEN_ATTENTION"]
    assert "torch.ops.aten._safe_softmax" in TABLES["attention.FORBIDDEN_ATTENTION"]
    for door in ("torch.ops.aten.softmax", "torch.ops.aten._softmax", "torch.special.softmax",
                 "torch.Tensor.softmax", "torch.ops.aten._safe_softmax"):
        assert door in TABLES["masking.FORBIDDEN_SOFTMAX"], door
        assert door in TABLES["attention.FORBIDDEN_SOFTMAX"], door
    assert "torch._C._nn.scaled_dot_product_attention" in TABLES["efficient.FORBIDDEN"]


def _student(door: str):
    call = CALLS[door]

    def student(x):
        return call(x)
    return student


@pytest.mark.parametrize("table,door", TORCH_DOORS, ids=[f"{t}:{d}" for t, d in TORCH_DOORS])
def test_a_door_is_caught_live_and_when_graded(table, door):
    forbidden = TABLES[table]
    case = Case("x (2, 3, 4)", (_x(),))
    # live (JupyterLab)
    with transcript.using("live"):
        with pytest.raises(IntegrityError, match="this test scores 0"):
            core.call_student(_student(door), case, "exercise", forbidden)
    # graded: the kernel records the IntegrityError, the verifier's replay raises it
    with transcript.using("record") as state:
        with pytest.raises(IntegrityError):
            core.call_student(_student(door), case, "exercise", forbidden)
        calls = list(state.calls)
    assert calls and calls[0]["raised"]["class"] == "IntegrityError"
    with transcript.using("replay", calls):
        with pytest.raises(IntegrityError, match="this test scores 0"):
            core.call_student(lambda x: None, case, "exercise", forbidden)


def test_aliases_bound_before_the_check_and_disabled_function_modes_are_caught():
    forbidden = TABLES["masking.FORBIDDEN_SOFTMAX"]
    bound = torch.softmax  # bound in an earlier cell, before any check ran
    aten = torch.ops.aten._softmax.default
    case = Case("x", (_x(),))
    for student in (lambda x: bound(x, -1), lambda x: aten(x, -1, False)):
        with pytest.raises(IntegrityError):
            core.call_student(student, case, "masked_softmax", forbidden)

    def no_function_modes(x):
        with torch._C.DisableTorchFunction():
            return bound(x, -1)  # the dispatch mode still sees aten._softmax
    with pytest.raises(IntegrityError, match="aten._softmax"):
        core.call_student(no_function_modes, case, "masked_softmax", forbidden)

    def swallowed(x):
        try:
            return torch.softmax(x, -1)
        except Exception:  # the IntegrityError caught: the finding stands
            e = torch.exp(x - x.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)
    with pytest.raises(IntegrityError):
        core.call_student(swallowed, case, "masked_softmax", forbidden)


def test_allowed_primitives_pass_and_every_door_is_restored():
    forbidden = TABLES["attention.FORBIDDEN_ATTENTION"]

    def attention(q, k, v, mask=None):
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        e = torch.exp(s - s.amax(-1, keepdim=True))
        w = e / torch.sum(e, -1, keepdim=True)
        return w @ v, w
    x = _x()
    out, w = core.call_student(attention, Case("q, k, v", (x, x, x)), "attention", forbidden)
    assert torch.allclose(out, F.scaled_dot_product_attention(x, x, x))  # outside the check: not forbidden
    assert torch.softmax(x, -1).shape == x.shape


def _masked_softmax_ok(scores, mask=None):
    scores = np.asarray(scores, dtype=np.float64)
    if mask is not None:
        scores = np.where(np.asarray(mask), scores, -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _masked_softmax_through(door):
    def student(scores, mask=None):
        scores = np.asarray(scores, dtype=np.float64)
        if mask is not None:
            scores = np.where(np.asarray(mask), scores, -np.inf)
        out = CALLS[door](torch.from_numpy(scores)).numpy()
        return np.nan_to_num(out)
    return student


def _graded(check, student):
    """The verdict when graded: record in the 'kernel', replay in the 'verifier'."""
    with transcript.using("record") as state:
        try:
            check(student)
        except AssertionError:
            pass
        calls = list(state.calls)
    return transcript.replay(check, {}, calls)[0]


@pytest.mark.parametrize("door", ["torch.softmax", "torch.ops.aten._safe_softmax", "torch.special.softmax",
                                  "torch.Tensor.softmax"])
def test_masked_softmax_check_catches_doors_and_passes_primitives(door):
    from course_lib.checks import masking

    masking.check_masked_softmax(_masked_softmax_ok)  # live
    assert _graded(masking.check_masked_softmax, _masked_softmax_ok) is None
    with pytest.raises(IntegrityError):
        masking.check_masked_softmax(_masked_softmax_through(door))
    verdict = _graded(masking.check_masked_softmax, _masked_softmax_through(door))
    assert verdict is not None and "this test scores 0" in verdict


def test_attention_torch_check_catches_the_math_kernel_and_passes_primitives():
    from course_lib.checks import attention

    def ok(q, k, v, mask=None):
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        e = torch.exp(s - s.amax(-1, keepdim=True))
        w = e / torch.sum(e, -1, keepdim=True)
        return w @ v, w

    def door(q, k, v, mask=None):
        out = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)
        return out[0], out[1]

    attention.check_attention_torch(ok)
    assert _graded(attention.check_attention_torch, ok) is None
    with pytest.raises(IntegrityError):
        attention.check_attention_torch(door)
    verdict = _graded(attention.check_attention_torch, door)
    assert verdict is not None and "_scaled_dot_product_attention_math" in verdict
