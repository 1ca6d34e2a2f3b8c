"""The exercise registry: one declaration per graded exercise, and what each lesson releases on purpose.

    from course_lib.checks import registry
    registry.exercises()                      # every graded exercise, lesson order
    registry.exercises("06_bpe")              # one assignment's
    registry.exercise("06_bpe", "train_naive").equivalents
    registry.withheld(["01_attention"])       # qualified names the students' edition leaves out

An :class:`Exercise` names, by qualified name (``module.function``):

* ``reference``: the instructor's solution in ``course_lib`` (the solution cell of the
  assignment defines a function or class of the same name, ``name``);
* ``equivalents``: other ``course_lib`` functions that compute the same thing under another
  name (or the private machinery that does the whole computation): a student could call them
  instead of writing the exercise, so they are withheld with the reference (issue 33);
* ``checks``: the check functions the graded test cells call on the student's answer.

A :class:`Lesson` lists the ``building_blocks`` its topic module releases on purpose: public
functions and classes that are not a graded answer (lessons may use them freely). Every public
function and class of a lesson's topic module is exactly one of: a reference, an equivalent,
or a building block (``tests/test_registry.py``), so a new function must be classified.
Modules with no graded exercise in them (``training``, ``plotting``, ``pretrained``, ``bio``)
are released whole.

``grading.bundle`` strips, for every assignment whose solutions are not released, exactly the
references and equivalents, in their own modules (never by bare name across modules).
* ``promises``: what the reference's docstring promises (stable for large scores, inputs unchanged, a
  ValueError for ...), each with an answer that breaks it in ``tests/test_promises_NN.py``.

The shape is declarative on purpose: issue 34 adds visible/hidden cases and misconceptions to the same
declarations.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    assignment: str  # "01_attention": the notebook folder
    name: str  # the name the solution cell defines (and the student writes)
    reference: str  # "course_lib.attention.softmax"
    checks: tuple[str, ...]  # "course_lib.checks.attention.check_softmax", ...
    equivalents: tuple[str, ...] = ()  # withheld with the reference
    # what the reference's docstring promises, in short: each has, in tests/test_promises_NN.py, an answer that
    # breaks it and the words its message must hold (tests/test_registry.py: the two lists are the same)
    promises: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The module that holds the reference: "course_lib.attention"."""
        return self.reference.rsplit(".", 1)[0]

    @property
    def withheld(self) -> tuple[str, ...]:
        return (self.reference,) + self.equivalents


@dataclass(frozen=True)
class Lesson:
    assignment: str
    module: str  # the topic module: "course_lib.attention"
    building_blocks: tuple[str, ...] = ()  # qualified names released on purpose


def _ex(assignment: str, topic: str, name: str, check: str | None = None, equivalents: tuple[str, ...] = (),
        checks_module: str | None = None, promises: tuple[str, ...] = ()) -> Exercise:
    return Exercise(assignment=assignment, name=name, reference=f"course_lib.{topic}.{name}",
                    checks=(f"course_lib.checks.{checks_module or topic}.{check or 'check_' + name}",),
                    equivalents=tuple(f"course_lib.{topic}.{e}" for e in equivalents), promises=tuple(promises))


_A, _M, _MH, _P, _B = "01_attention", "02_masking", "03_multihead", "04_positional", "05_blocks"
_BPE, _E, _C, _PT, _PR = "06_bpe", "07_efficient", "08_clinical_text", "09_prompt_tuning", "10_proteins"
_RC, _DNA = "11_read_consensus", "12_long_range_dna"

EXERCISES: tuple[Exercise, ...] = (
    _ex(_A, "attention", "softmax", equivalents=("softmax_torch",),
        promises=(
            "stable for large scores (exp does not overflow)",
            "a fully -inf slice gets zeros, not NaN",
            "normalised along `axis`",
            "inputs unchanged",
            "float answer in at least float32",
        )),
    _ex(_A, "attention", "scaled_dot_product_attention", check="check_attention_numpy",
        promises=(
            "any leading dims (..., T, d_k)",
            "numpy in, numpy out",
            "a fully masked row gets zero weights",
        )),
    _ex(_A, "attention", "scaled_dot_product_attention_torch", check="check_attention_torch",
        promises=(
            "differentiable",
            "any leading dims (k.transpose(-2, -1))",
        )),

    _ex(_M, "masking", "causal_mask",
        promises=(
            "boolean (T, S), True = may attend",
            "S > T: queries are the last T positions",
        )),
    _ex(_M, "masking", "padding_mask",
        promises=(
            "S = max_len when given",
        )),
    _ex(_M, "masking", "combine_masks",
        promises=(
            "with neither mask, None",
        )),
    _ex(_M, "masking", "to_additive",
        promises=(
            "tensors in, torch's default dtype out",
            "-inf, not a large negative",
        )),
    _ex(_M, "masking", "masked_softmax",
        promises=(
            "a fully masked row gives zeros, not NaN",
            "stable for large scores",
            "inputs unchanged",
            "Numpy; float64",
        )),

    _ex(_MH, "multihead", "split_heads",
        promises=(
            "any leading dims (..., T, D)",
            "torch in, torch out",
        )),
    _ex(_MH, "multihead", "merge_heads",
        promises=(
            "torch in, torch out",
        )),
    _ex(_MH, "multihead", "multi_head_attention",
        promises=(
            "inputs unchanged",
        )),
    _ex(_MH, "multihead", "numpy_params_from_torch",
        promises=(
            "numpy arrays",
            "a dict",
        )),

    _ex(_P, "positional", "sinusoidal_encoding",
        promises=(
            "sines in even columns, cosines in odd ones (interleaved)",
            "positions 0, 1, ...",
            "float answer in at least float32",
            "an odd d_model raises ValueError",
            "A numpy array (float64)",
            "a numpy array (-> np.ndarray)",
        )),
    _ex(_P, "positional", "shift_matrix",
        promises=(
            "PE(pos + k) = M_k @ PE(pos)",
            "angle k * omega_i",
        )),
    _ex(_P, "positional", "exponential_basis",
        promises=(
            "f_i halves every h_i positions: f_i(h_i) = 0.5",
            "a decay in |r|",
            "shape distances.shape + (num_basis,)",
            "h_i = 2^x_i, x_i = np.linspace(min_half_life, log2(seq_len), num_basis)",
            "min_half_life is in log2 units",
            "Raises ValueError unless 2^min_half_life <= seq_len",
        )),

    _ex(_B, "blocks", "layer_norm",
        promises=(
            "any leading dims (..., d)",
            "inputs unchanged",
            "differentiable",
            "biased variance",
        )),
    _ex(_B, "blocks", "feed_forward",
        promises=(
            "any leading dims (..., d_model)",
            "exact erf GELU",
        )),
    _ex(_B, "blocks", "encoder_layer_forward",
        promises=(
            "float answer in at least float32",
            "mask applied",
        )),

    _ex(_BPE, "bpe", "get_stats",
        promises=(
            "counts of every adjacent pair",
            "a dict {(left, right): count}",
            "pairs in order of first appearance",
        )),
    _ex(_BPE, "bpe", "merge",
        promises=(
            "the input list unchanged",
            "left to right, no overlap",
        )),
    _ex(_BPE, "bpe", "word_counts",
        promises=(
            "'</w>' on the last character",
            "split on any whitespace",
            "words in order of first appearance",
        )),
    # train_fast: the same merges as train_naive, incrementally (tests/test_bpe.py compares them); WordBPE and
    # ByteBPE train and encode with them (a whole tokenizer: lesson 06's exercises), so they go with them
    _ex(_BPE, "bpe", "train_naive", check="check_train", equivalents=("train_fast", "WordBPE", "ByteBPE"),
        promises=(
            "ties: smallest pair",
            "new ids start at first_id",
        )),
    # apply_merges: the same ids as encode_ids (tests/test_bpe.py compares them)
    _ex(_BPE, "bpe", "encode_ids", check="check_encode", equivalents=("apply_merges",),
        promises=(
            "merges in training order",
        )),
    _ex(_BPE, "bpe", "decode_ids", check="check_decode",
        promises=(
            "invalid UTF-8 raises ValueError",
            "UTF-8 decoded once, surrogatepass",
        )),

    _ex(_E, "efficient", "elu_feature_map", equivalents=("elu_feature_map_torch",),
        promises=(
            "always > 0",
        )),
    # the torch forms and the O(T S) form compute the same attention (tests/test_efficient.py)
    _ex(_E, "efficient", "linear_attention",
        equivalents=("linear_attention_torch", "attention_from_features_torch", "quadratic_linear_attention"),
        promises=(
            "any leading dims (..., T, d)",
            "never builds the (T, S) matrix",
        )),
    _ex(_E, "efficient", "causal_linear_attention",
        equivalents=("recurrent_linear_attention", "prefix_sum_causal_attention_torch",
                     "chunked_causal_attention_torch", "_causal_chunks"),
        promises=(
            "position i sees keys 0..i",
            "O(T r d_v) memory",
        )),
    _ex(_E, "efficient", "linear_attention_step",
        promises=(
            "the input state is not modified",
        )),
    _ex(_E, "efficient", "positive_random_features",
        promises=(
            "w (..., m, d) with leading dims",
            "exp(w x - |x|^2 / 2)",
        )),

    _ex(_C, "clinical", "mean_pool",
        promises=(
            "padding is left out of the mean",
            "divides by the number of real tokens",
            "a row without real tokens gives zeros, not NaN",
            "returns the plain mean, not normalised",
            "any leading axes (..., T, d)",
            "keeps hidden's dtype",
            "inputs are not changed",
            "int, bool or float mask",
        )),
    _ex(_C, "clinical", "cosine_top_k",
        promises=(
            "cosine, not the raw dot product",
            "best first",
            "A zero vector has cosine 0 with everything",
            "equal scores keep the smaller index first",
            "k outside 1..N raises ValueError",
            "indices are integers",
            "inputs are not changed",
        )),
    _ex(_C, "clinical", "freeze_for_probe",
        promises=(
            "freezes (requires_grad False), eval() is not enough",
            "the head's parameters become trainable even if frozen before",
            "the head is the submodule, not a name prefix",
            "returns the number of scalar parameters",
            "a missing head raises ValueError",
        )),
    _ex(_C, "clinical", "attention_rollout",
        promises=(
            "layers composed first to last",
            "residual stream as (A + I) / 2",
            "rows sum to 1",
            "residual=False uses attention alone",
            "heads averaged",
            "inputs are not changed",
        )),

    _ex(_PT, "prompt_tuning", "freeze_model",
        promises=(
            "eval mode",
            "tied weight counted once",
            "buffers are not parameters",
            "returns the number of parameters",
        )),
    _ex(_PT, "prompt_tuning", "prepend_soft_prompt",
        promises=(
            "P + T positions with the prompt in front",
            "mask extended with ones",
            "mask keeps attention_mask's dtype",
            "inputs not modified",
            "gradients flow back to prompt",
            "prompt shared by the whole batch",
        )),
    _ex(_PT, "prompt_tuning", "answer_only_labels",
        promises=(
            "(B, P + T) aligned with the prompted sequence",
            "not shifted",
            "-100 on padding",
            "int64",
            "inputs not modified",
        )),
    _ex(_PT, "prompt_tuning", "option_log_likelihood",
        promises=(
            "(B,) in the logits' dtype",
            "(B,) shape",
            "normalise divides by the scored tokens",
            "shift by one",
        )),

    _ex(_PR, "proteins", "encode_proteins",
        promises=(
            "ids are int64",
            "keep is bool",
            "torch tensors, not numpy",
            "ValueError when max_len < 2",
            "the input list is not changed",
            "<eos> always there after truncation",
            "padded to the longest sequence",
            "case-insensitive",
            "True at real tokens",
        )),
    _ex(_PR, "proteins", "kmer_vectors",
        promises=(
            "float32",
            "a sequence without k-mers is a row of zeros",
            "unit length rows",
            "overlapping windows, step 1",
            "non-standard residues skipped",
            "first residue most significant",
        )),
    _ex(_PR, "proteins", "favor_padded_attention",
        promises=(
            "padded keys contribute nothing",
            "padded query rows are 0",
            "output in the dtype of v",
            "never builds an (L, L) matrix",
        )),
    _ex(_PR, "proteins", "greedy_decode",
        promises=(
            "without the start token",
            "at most max_len tokens",
            "pad after <eos>",
            "causal mask",
            "source padding masked",
            "int64 ids",
            "ValueError when max_len < 1",
        )),

    # soft_edit_distance(a, b, 0) == edit_distance(a, b)[0] (tests/test_consensus.py)
    _ex(_RC, "consensus", "edit_distance", equivalents=("soft_edit_distance",),
        promises=(
            "D[i, 0] = i, D[0, j] = j",
            "a mismatch costs 1",
            "distance as a Python int",
            "operations: I uses a base of a only",
        )),
    _ex(_RC, "consensus", "pileup",
        promises=(
            "columns -ACGT, gap first",
            "inserted bases are not counted",
            "an int64 array",
            "ValueError when an alignment does not fit",
            "ValueError when reads and alignments differ in number",
        )),
    _ex(_RC, "consensus", "positionwise_cross_entropy",
        promises=(
            "summed over positions",
            "padding included",
            "ValueError when M > N",
            "inputs unchanged",
        )),
    # _loss_costs + _soft_dp are the whole loss; hard_alignment_loss is its gamma -> 0 limit on them
    _ex(_RC, "consensus", "soft_alignment_loss", equivalents=("_soft_dp", "_loss_costs", "hard_alignment_loss"),
        promises=(
            "a soft MIN",
            "gaps in target are padding, removed first",
            "of the logits' dtype",
            "differentiable in logits",
            "ValueError when gamma <= 0",
            "ValueError when the shapes do not fit",
        )),

    _ex(_DNA, "dna", "one_hot_dna",
        promises=(
            "a float32 numpy array",
            "N becomes a row of zeros",
            "upper and lower case are the same base",
            "columns A, C, G, T",
            "any other letter raises ValueError",
        )),
    _ex(_DNA, "dna", "reverse_complement",
        promises=(
            "complement and reverse",
            "returns a string",
            "any other letter raises ValueError",
        )),
    _ex(_DNA, "dna", "receptive_field",
        promises=(
            "pooling multiplies the jump",
            "returns an int",
            "ValueError when the lists differ in length",
        )),
    _ex(_DNA, "dna", "in_silico_mutagenesis",
        promises=(
            "effect at the own base is 0",
            "mutant minus reference",
            "one_hot is not modified",
            "one_hot numpy or torch",
            "(L, 4) float64 array",
        )),
)


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


def exercises(assignment: str | None = None) -> tuple[Exercise, ...]:
    """Every exercise (lesson order), or those of one assignment."""
    if assignment is None:
        return EXERCISES
    _known(assignment)
    return tuple(e for e in EXERCISES if e.assignment == assignment)


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
    for e in EXERCISES:
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
