"""The lessons that have graded exercises, in order, and what each topic module releases on purpose.

    from course_lib.checks import lessons
    lessons.lesson("11_read_consensus").module     # 'course_lib.consensus'

A :class:`Lesson` lists the ``building_blocks`` its topic module releases on purpose: public functions and
classes that are not a graded answer (lessons may use them freely). Its own module, below
:mod:`course_lib.checks.exercise` (a declaration takes its topic from here) and
:mod:`course_lib.checks.registry` (which gathers the declarations), so neither imports the other.
Does NOT cover: the exercises themselves (each lesson's checks module declares them).
"""
from __future__ import annotations

from dataclasses import dataclass


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
            "majority_vote", "content_free_scores", "calibrate", "pick_rule"),
    _lesson(_PR, "proteins", "decode_proteins", "name_tokens", "NameTokenizer", "name_words", "token_f1",
            "naming_scores", "ProteinNamer", "seq2seq_loss", "mask_residues", "ProteinMLM", "mlm_loss",
            "peak_tensor_memory", "load_protein_mlm", "mean_embeddings", "consensus_names", "paired_bootstrap",
            "kmer_idf", "tfidf_weight", "csls_scores", "commonest_word", "cluster_paired_test",
            "composition_guess"),
    _lesson(_RC, "consensus", "encode", "decode", "alignment_counts", "majority_consensus",
            "poa_consensus", "error_rate", "trimmed_error_rate", "column_labels", "windows", "label_windows",
            "ConsensusTransformer", "VoteResidualTransformer", "read_rows", "row_windows", "context_windows",
            "molecule_windows", "pass_subsets", "stitch",
            "phred_qv", "sign_test", "load_pretrained", "homopolymer_median_consensus", "spanning_read_sets"),
    _lesson(_DNA, "dna", "measured_receptive_field", "softmax_pool", "SoftmaxPool1d", "RelativeSelfAttention",
            "DNAConvNet", "DNATransformer", "lesson12_models"),
)



def assignments() -> list[str]:
    """Every assignment with graded exercises, in lesson order."""
    return [les.assignment for les in LESSONS]


def known(assignment: str) -> str:
    """``assignment``, or a KeyError naming the assignments there are."""
    if assignment not in assignments():
        raise KeyError(f"no assignment {assignment!r} in the exercise registry; expected one of {assignments()}")
    return assignment


def lesson(assignment: str) -> Lesson:
    known(assignment)
    return next(les for les in LESSONS if les.assignment == assignment)
