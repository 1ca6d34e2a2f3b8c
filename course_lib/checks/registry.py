"""The exercise registry: every graded exercise of every lesson, and what each lesson releases on purpose.

    from course_lib.checks import registry
    registry.exercises()                      # every graded exercise, lesson order
    registry.exercises("06_bpe")              # one assignment's
    registry.exercise("06_bpe", "train_naive").equivalents
    registry.withheld(["01_attention"])       # qualified names the students' edition leaves out

An exercise is declared once, at the end of its lesson's checks module (``course_lib/checks/<topic>.py``,
``EXERCISES``; :mod:`course_lib.checks.exercise` says what a declaration holds: reference, checks,
equivalents, the docstring's promises with an answer that breaks each, right alternatives). This module
gathers them in lesson order.

A :class:`Lesson` lists the ``building_blocks`` its topic module releases on purpose: public
functions and classes that are not a graded answer (lessons may use them freely). Every public
function and class of a lesson's topic module is exactly one of: a reference, an equivalent,
or a building block (``tests/test_registry.py``), so a new function must be classified.
Modules with no graded exercise in them (``training``, ``plotting``, ``pretrained``, ``bio``)
are released whole.

``grading.bundle`` strips, for every assignment whose solutions are not released, exactly the
references and equivalents, in their own modules (never by bare name across modules).
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from course_lib.checks.exercise import Exercise


@dataclass(frozen=True)
class Lesson:
    assignment: str
    module: str  # the topic module: "course_lib.attention"
    building_blocks: tuple[str, ...] = ()  # qualified names released on purpose


_A, _M, _MH, _P, _B = "01_attention", "02_masking", "03_multihead", "04_positional", "05_blocks"
_BPE, _E, _C, _PT, _PR = "06_bpe", "07_efficient", "08_clinical_text", "09_prompt_tuning", "10_proteins"
_RC, _DNA = "11_read_consensus", "12_long_range_dna"


def _lesson(assignment: str, topic: str, *blocks: str) -> Lesson:
    return Lesson(assignment, f"course_lib.{topic}", tuple(f"course_lib.{topic}.{b}" for b in blocks))


LESSONS: tuple[Lesson, ...] = (
    _lesson(_A, "attention", "check_attention_shapes"),
    _lesson(_M, "masking", "padding_mask_from_ids", "from_additive", "to_mha_key_padding_mask",
            "to_mha_attn_mask", "from_mha_masks"),
    _lesson(_MH, "multihead", "head_weights", "MultiHeadAttention"),
    _lesson(_P, "positional", "sinusoidal_frequencies", "SinusoidalPositionalEncoding",
            "LearnedPositionalEmbedding", "relative_positions", "central_mask_basis", "gamma_basis",
            "enformer_relative_features", "relative_position_logits"),
    _lesson(_B, "blocks", "LayerNorm", "gelu", "FeedForward", "EncoderLayer", "decoder_layer_forward",
            "DecoderLayer", "Encoder", "Decoder", "masked_mean", "TransformerClassifier"),
    _lesson(_BPE, "bpe", "chunk_counts", "build_vocab", "load"),
    _lesson(_E, "efficient", "draw_projection", "trig_random_features", "softmax_kernel_estimate",
            "positive_features_mse", "trig_features_mse", "favor_attention_mse_limit", "favor_features_torch",
            "favor_attention_torch", "EfficientMultiHeadAttention", "swap_attention", "measure_torch_call",
            "measure_numpy_call"),
    _lesson(_C, "clinical", "EncoderClassifier", "tfidf_vectors", "subgroup_accuracy"),
    _lesson(_PT, "prompt_tuning", "SoftPrompt", "InstructionPrompt", "PromptedLM", "lm_loss", "encode_examples",
            "text_embeds", "option_scores", "trim_padding", "step_budget", "mcnemar_exact",
            "save_soft_prompt", "load_soft_prompt", "cot_prompt", "stop_token_ids", "rationale_option_scores",
            "majority_vote"),
    _lesson(_PR, "proteins", "decode_proteins", "name_tokens", "NameTokenizer", "name_words", "token_f1",
            "naming_scores", "ProteinNamer", "seq2seq_loss", "mask_residues", "ProteinMLM", "mlm_loss",
            "peak_tensor_memory", "load_protein_mlm", "mean_embeddings", "consensus_names", "paired_bootstrap"),
    _lesson(_RC, "consensus", "encode", "decode", "alignment_counts", "majority_consensus",
            "poa_consensus", "error_rate", "trimmed_error_rate", "column_labels", "windows", "label_windows",
            "ConsensusTransformer", "VoteResidualTransformer", "read_rows", "row_windows", "context_windows",
            "molecule_windows", "pass_subsets", "stitch",
            "phred_qv", "sign_test", "load_pretrained"),
    _lesson(_DNA, "dna", "measured_receptive_field", "softmax_pool", "SoftmaxPool1d", "RelativeSelfAttention",
            "DNAConvNet", "DNATransformer", "lesson12_models"),
)


_MODULES = frozenset(les.module for les in LESSONS)


# ---------------------------------------------------------------- lookups
def assignments() -> list[str]:
    """Every assignment with graded exercises, in lesson order."""
    return [lesson.assignment for lesson in LESSONS]


def _known(assignment: str) -> str:
    if assignment not in assignments():
        raise KeyError(f"no assignment {assignment!r} in the exercise registry; expected one of {assignments()}")
    return assignment


@functools.lru_cache(maxsize=1)
def _gathered() -> tuple[Exercise, ...]:
    """Every lesson checks module's ``EXERCISES``, in lesson order (imported on first use: the checks of a
    lesson are not imported until a lesson or the grader asks)."""
    out: list[Exercise] = []
    for les in LESSONS:
        topic = les.module.rsplit(".", 1)[1]
        declared = importlib.import_module(f"course_lib.checks.{topic}").EXERCISES
        stray = [e for e in declared if e.assignment != les.assignment or e.module != les.module]
        if stray:
            raise LookupError(f"course_lib.checks.{topic} declares exercises of another lesson: {stray}")
        out += declared
    return tuple(out)


def exercises(assignment: str | None = None) -> tuple[Exercise, ...]:
    """Every exercise (lesson order), or those of one assignment."""
    if assignment is None:
        return _gathered()
    _known(assignment)
    return tuple(e for e in _gathered() if e.assignment == assignment)


def exercise(assignment: str, name: str) -> Exercise:
    """The exercise ``name`` of ``assignment``."""
    for e in exercises(assignment):
        if e.name == name:
            return e
    raise KeyError(f"{assignment} has no exercise {name!r}; it has {[e.name for e in exercises(assignment)]}")


def lesson(assignment: str) -> Lesson:
    _known(assignment)
    return next(les for les in LESSONS if les.assignment == assignment)


def withheld(released: list[str] | tuple[str, ...] | set[str] = ()) -> dict[str, list[str]]:
    """{module: [names]} that the students' edition leaves out when the solutions of ``released`` are out:
    the references and equivalents of every other assignment, each in its own module."""
    for a in released:
        _known(a)
    out: dict[str, list[str]] = {}
    for e in exercises():
        if e.assignment in released:
            continue
        for qual in e.withheld:
            module, name = qual.rsplit(".", 1)
            out.setdefault(module, []).append(name)
    return out


def resolve(qualified: str):
    """The object a qualified name ("course_lib.attention.softmax", or a lesson's module) names, imported."""
    module, _, name = qualified.rpartition(".")
    if qualified in _MODULES:
        return importlib.import_module(qualified)
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise LookupError(f"{qualified!r} does not resolve: {err}") from err
