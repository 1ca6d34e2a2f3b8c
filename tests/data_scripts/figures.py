"""The case studies' figures, reproducibly (issue 35, item 5): `make figures`.

Runs the case-study notebooks (lessons 05, 08, 09, 10, 11, 12), instructor's versions, top to bottom in a
fresh kernel each (nbclient, as the notebook tests do), with the default settings a student gets
(``FULL_RUN = False``), once per seed: ``SEED = 0`` in the setup cell is replaced, in memory only, by
``SEED = <seed>`` (the notebooks on disk are not changed). After the last cell one more cell evaluates the
headline variables named below (each with its meaning) and prints them as JSON. A notebook whose cell
raises stops the run: no figure comes from a broken run.

Writes ``notebooks/figures.json``: per lesson, per figure, the value of each seed, their mean and the
standard error of the mean over seeds (sample standard deviation / sqrt(seeds)); a figure that is the same
for every seed (a shipped model evaluated, a fixed split) is stored once as ``value``, marked
``same_for_all_seeds``. p-values are stored per seed with their largest (weakest) value, not averaged.
Values are rounded to the precision README quotes them at. Metadata: date, machine, torch version, the
command, the git commit, and each run's wall time.

README's table "What the case studies measure" quotes this file; tests/test_figures.py checks that every
number in it is one of the file's values.

    .venv/bin/python tests/data_scripts/figures.py                 # everything (what `make figures` runs)
    .venv/bin/python tests/data_scripts/figures.py --lessons 12 --seeds 0 --out /tmp/f.json   # a quick look
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

import nbformat

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "notebooks" / "figures.json"
COMMAND = "make figures"  # = .venv/bin/python tests/data_scripts/figures.py
SEEDS = (0, 1, 2)
MARKER = "FIGURES-JSON:"

# kinds: how a figure is rounded (what README quotes)
#   "acc"  a fraction, 3 decimals       "pct1" / "pct2"  a percentage, 1 / 2 decimals
#   "qv"   a Phred QV, 1 decimal        "logit"  2 decimals      "count"  an integer (mean 1 decimal)
#   "p"    a p-value, 2 significant digits (per seed and the largest, never averaged)
DECIMALS = {"acc": 3, "pct1": 1, "pct2": 2, "qv": 1, "logit": 2, "count": 0}


def _f(expr: str, kind: str, meaning: str) -> tuple[str, str, str]:
    return expr, kind, meaning


# lesson -> notebook, seeds, {figure: (expression evaluated in the notebook's kernel after its last cell, kind, meaning)}
P9 = "100 * results[{k!r}][{j}] / results[{k!r}][2]"
YOURS9 = "f'your prompt ({STEPS} steps)'"
SC9 = "f'self-consistency ({K_PATHS} paths)'"
CONDITIONS9 = (("zero_shot", "zero-shot"), ("calibrated_zero_shot", "zero-shot, calibrated"),
               ("few_shot", "few-shot (3 examples)"), ("shipped_prompt", "prompt tuning (shipped)"),
               ("shipped_prompt_seed1", "prompt tuning (seed 1)"), ("shipped_prompt_seed2", "prompt tuning (seed 2)"),
               ("shipped_instruction", "instruction PT (shipped)"))
MAJ10 = "f'majority name ({majority_name!r})'"
ROUTE10 = "route"  # the notebook's variable holding the route's label
NEIGH10 = "NEIGHBOUR"  # the notebook's label of the hubness-corrected TF-IDF neighbour
KMER10 = "'k-mer nearest neighbour (k=3)'"
LESSONS: dict[str, dict] = {
    "05": {
        "notebook": "notebooks/05_blocks/blocks.ipynb",
        "seeds": SEEDS,
        "figures": {
            "n_test": _f("len(test_reviews)", "count", "test reviews (the split depends on SEED)"),
            "majority": _f("majority", "acc", "test accuracy of the majority class"),
            "bag_of_words": _f("bow_acc", "acc", "test accuracy of bag-of-words logistic regression"),
            "transformer": _f("tf_acc", "acc", "test accuracy of the transformer trained from scratch (student's layer)"),
        },
    },
    "08": {
        "notebook": "notebooks/08_clinical_text/clinical_text.ipynb",
        "seeds": SEEDS,
        "figures": {
            "hpo_minilm_top1": _f("search['MiniLM embeddings + cosine'][0]", "acc",
                                  "HPO term search from lay synonyms, MiniLM + cosine, top-1 (400 terms drawn with SEED)"),
            "hpo_minilm_top5": _f("search['MiniLM embeddings + cosine'][1]", "acc", "the same, top-5"),
            "hpo_tfidf_top1": _f("search['TF-IDF words (baseline)'][0]", "acc", "HPO term search, TF-IDF words, top-1"),
            "hpo_tfidf_top5": _f("search['TF-IDF words (baseline)'][1]", "acc", "HPO term search, TF-IDF words, top-5"),
            "n_test": _f("n_test", "count", "test reviews of the 4 commonest conditions (split by SEED)"),
            "majority": _f("results['majority class']", "acc", "condition: majority-class test accuracy"),
            "bag_of_words": _f("results['bag-of-words logistic regression']", "acc", "condition: bag-of-words test accuracy"),
            "scratch_transformer": _f("results['transformer from scratch (lesson 05)']", "acc",
                                      "condition: lesson 05's transformer trained from scratch, test accuracy"),
            "frozen_probe": _f("results['frozen MiniLM + linear probe']", "acc",
                               "condition: frozen MiniLM + linear probe, test accuracy"),
            "probe_only_right": _f("only_probe", "count", "test reviews the probe gets right and bag of words wrong"),
            "bow_only_right": _f("only_bow", "count", "test reviews bag of words gets right and the probe wrong"),
            "p_probe_vs_bow": _f("p_probe_vs_bow", "p", "McNemar exact two-sided p, probe vs bag of words, the review as the unit"),
            "worst_condition_accuracy": _f("by_condition[0]['accuracy']", "acc",
                                           "the probe's accuracy on its worst condition"),
            "best_condition_accuracy": _f("by_condition[-1]['accuracy']", "acc",
                                          "the probe's accuracy on its best condition"),
            "worst_best_intervals_overlap": _f("int(by_condition[0]['high'] >= by_condition[-1]['low'])", "count",
                                               "1 when the worst and best conditions' 95% Wilson intervals overlap"),
        },
    },
    "09": {
        "notebook": "notebooks/09_prompt_tuning/prompt_tuning.ipynb",
        "seeds": SEEDS,
        "figures": {
            **{f"{key}_{how}": _f(P9.format(k=name, j=j), "pct1", f"{name}: test accuracy (%), {how} scores")
               for key, name in CONDITIONS9 + (("cot_greedy", "chain-of-thought (greedy)"),)
               for j, how in enumerate(("summed", "normalised"))},
            **{f"{key}_picked": _f(f"100 * results[{name!r}][rule[{name!r}]] / results[{name!r}][2]", "pct1",
                                   f"{name}: test accuracy (%) with the scoring rule its validation questions picked")
               for key, name in CONDITIONS9},
            **{f"{key}_rule_normalised": _f(f"rule[{name!r}]", "count",
                                            f"{name}: 1 when validation picked length-normalised scoring, 0 summed")
               for key, name in CONDITIONS9},
            "plain_seeds_mean": _f("100 * seed_acc.mean()", "pct1",
                                   "plain prompt tuning, training seeds 0-2: mean test accuracy (%), picked rules"),
            "plain_seeds_sd": _f("100 * seed_acc.std(ddof=1)", "pct1",
                                 "plain prompt tuning, training seeds 0-2: standard deviation (points)"),
            "n_tests": _f("len(TESTS)", "count", "paired tests of section 6 (multiplicity)"),
            **{f"your_prompt_{how}": _f(f"100 * results[{YOURS9}][{j}] / results[{YOURS9}][2]", "pct1",
                                        f"the student's own short soft prompt (8 steps): test accuracy (%), {how}")
               for j, how in enumerate(("summed", "normalised"))},
            **{f"self_consistency_{how}": _f(f"100 * results[{SC9}][{j}] / results[{SC9}][2]", "pct1",
                                             f"self-consistency (3 sampled paths): test accuracy (%), {how}")
               for j, how in enumerate(("summed", "normalised"))},
            "n_test": _f("len(test)", "count", "test questions"),
            "n_cot": _f("n_cot", "count", "test questions of the chain-of-thought section"),
            **{f"p_{a}_vs_{b}": _f(f"verdicts[({an!r}, {bn!r})]['p']", "p",
                                   f"exact McNemar p, {an} vs {bn}, each with its validation-picked rule")
               for a, an, b, bn in [(a, an, b, bn) for a, an in CONDITIONS9[3:6] for b, bn in CONDITIONS9[:3]]
               + [("shipped_instruction", "instruction PT (shipped)", "few_shot", "few-shot (3 examples)")]},
            **{f"wins_{a}_vs_{b}": _f(f"verdicts[({an!r}, {bn!r})]['a_only']", "count",
                                      f"questions only {an} got right, against {bn} (picked rules)")
               for a, an in CONDITIONS9[3:4] for b, bn in CONDITIONS9[:3]},
            **{f"losses_{a}_vs_{b}": _f(f"verdicts[({an!r}, {bn!r})]['b_only']", "count",
                                        f"questions only {bn} got right, against {an} (picked rules)")
               for a, an in CONDITIONS9[3:4] for b, bn in CONDITIONS9[:3]},
            **{f"p_your_prompt_vs_{b}": _f(f"verdicts[({YOURS9}, {bn!r})]['p']", "p",
                                           f"exact McNemar p, the student's prompt vs {bn}")
               for b, bn in (("shipped_prompt", "prompt tuning (shipped)"), ("zero_shot", "zero-shot"))},
            **{f"p_{a}_vs_few_shot_{how}": _f(f"verdicts_cot[({an}, 'few-shot (3 examples)', {how!r})][2]", "p",
                                              f"exact McNemar p on the chain-of-thought questions, {a} vs 3-shot, {how}")
               for a, an in (("cot_greedy", "'chain-of-thought (greedy)'"), ("self_consistency", SC9))
               for how in ("summed", "normalised")},
        },
    },
    "10": {
        "notebook": "notebooks/10_proteins/proteins.ipynb",
        "seeds": SEEDS,
        "figures": {
            "n_test": _f("len(test_proteins)", "count", "test proteins (held-out clusters)"),
            "n_test_clusters": _f("len(set(test_clusters))", "count", "their 50 %-identity clusters: the unit of the naming tests"),
            "kmer_exact": _f(f"100 * per_protein_exact[{KMER10}].mean()", "pct1", "k-mer nearest neighbour: exact names (%)"),
            "kmer_f1": _f(f"per_protein[{KMER10}].mean()", "acc", "k-mer nearest neighbour: token F1"),
            "kmer_hub_share": _f("100 * hub_n / len(test_proteins)", "pct1",
                                 "share of test proteins whose k-mer neighbour is the most used training protein (%)"),
            "tfidf_exact": _f("100 * scores['TF-IDF 3-mers, nearest (no hubness correction)']['exact']", "pct1",
                              "TF-IDF 3-mer neighbour without hubness correction: exact names (%)"),
            "csls_cosine_exact": _f("100 * scores['CSLS on plain 3-mer cosine, nearest']['exact']", "pct1",
                                    "CSLS on plain 3-mer cosine, nearest: exact names (%)"),
            "neighbour_exact": _f(f"100 * per_protein_exact[{NEIGH10}].mean()", "pct1",
                                  "hubness-corrected TF-IDF neighbour (the strongest simple baseline): exact names (%)"),
            "neighbour_f1": _f(f"per_protein[{NEIGH10}].mean()", "acc", "hubness-corrected TF-IDF neighbour: token F1"),
            "neighbour_hub_share": _f("100 * neighbour_hub_n / len(test_proteins)", "pct1",
                                      "share of test proteins whose repaired neighbour is its most used training protein (%)"),
            "word_f1": _f("per_protein[word_label].mean()", "acc", "the commonest training word alone: token F1 (exact 0)"),
            "majority_f1": _f(f"per_protein[{MAJ10}].mean()", "acc", "majority name: token F1"),
            "consensus_exact": _f(f"100 * per_protein_exact[{ROUTE10}].mean()", "pct1",
                                  "retrieval + consensus on the repaired scores: exact names (%)"),
            "consensus_f1": _f(f"per_protein[{ROUTE10}].mean()", "acc", "retrieval + consensus: token F1"),
            **{f"{a}_minus_{b}_{score}_{part}": _f(f"{scale if part != 'p' else ''}naming_tests[{a!r}, {b!r}, {score!r}][{i}]",
                                                   kind if part != "p" else "p",
                                                   f"{a} minus {b}, {score}, over test clusters: {what}")
               for a, b, score in (("route", "neighbour", "exact"), ("route", "kmer", "exact"),
                                   ("neighbour", "kmer", "exact"), ("route", "neighbour", "f1"), ("route", "word", "f1"))
               for scale, kind in ((("100 * ", "pct1") if score == "exact" else ("", "acc")),)
               for i, part, what in ((0, "diff", "difference (exact: percentage points)"),
                                     (1, "low", "cluster bootstrap 2.5th percentile"),
                                     (2, "high", "97.5th percentile"), (3, "p", "sign-flip p over clusters"))},
            "namer_exact": _f("100 * model_s['exact']", "pct1", "the student's encoder-decoder (one epoch): exact names (%)"),
            "namer_f1": _f("model_s['token_f1']", "acc", "the student's encoder-decoder: token F1"),
            "student_mlm_acc": _f("mlm_acc", "acc", "the student's one-epoch masked LM: masked-residue accuracy"),
            "student_mlm_always_top": _f("top_acc", "acc", "always the commonest residue, on the same masks"),
            "shipped_mlm_acc": _f("float(right_shipped.float().mean())", "acc",
                                  "shipped pretrained masked LM: masked-residue accuracy on held-out clusters"),
            "shipped_mlm_low": _f("stats.wilson_interval(int(right_shipped.sum()), n_sh)[0]", "acc", "its 95% Wilson low"),
            "shipped_mlm_high": _f("stats.wilson_interval(int(right_shipped.sum()), n_sh)[1]", "acc", "its 95% Wilson high"),
            "composition_acc": _f("float(right_comp.float().mean())", "acc",
                                  "each protein's own commonest unmasked residue (composition floor), same masks"),
            "always_top_acc": _f("float(right_top.float().mean())", "acc", "always the commonest residue (L), same masks"),
            "frequency_guess_acc": _f("unigram_acc", "acc", "expected accuracy of a guess drawn from residue frequencies"),
            "n_masked": _f("n_sh", "count", "masked test residues (the masks depend on SEED)"),
            "n_mlm_clusters": _f("len(set(mlm_clusters))", "count", "test clusters with a masked residue: the unit of the test"),
            **{f"shipped_minus_{floor}_{part}": _f(f"mlm_tests[{floor!r}][{i}]", "p" if part == "p" else "acc",
                                                  f"shipped model minus {what_floor}, per-protein accuracy over clusters: {what}")
               for floor, what_floor in (("composition", "the composition floor"), ("top", "always L"))
               for i, part, what in ((0, "diff", "difference"), (1, "low", "cluster bootstrap 2.5th percentile"),
                                     (2, "high", "97.5th percentile"), (3, "p", "sign-flip p over clusters"))},
        },
    },
    "11": {
        "notebook": "notebooks/11_read_consensus/read_consensus.ipynb",
        "seeds": SEEDS,
        "figures": {
            **{f"{key}_error": _f(f"100 * mean[{name!r}]", "pct2", f"ZMW 32861, 20 subsets of 3 passes: {name}, error (%)")
               for key, name in (("one_subread", "one subread"), ("poa", "POA (pyspoa)"),
                                 ("vote_poa", "majority vote (POA backbone)"), ("ce_model", "model, cross-entropy"),
                                 ("alignment_model", "model, alignment loss"))},
            **{f"{key}_qv": _f(f"phred_qv(mean[{name!r}])", "qv", f"the same as QV: {name}")
               for key, name in (("one_subread", "one subread"), ("poa", "POA (pyspoa)"),
                                 ("vote_poa", "majority vote (POA backbone)"), ("ce_model", "model, cross-entropy"),
                                 ("alignment_model", "model, alignment loss"))},
            "steps": _f("steps", "count", "optimiser steps of each of the two models (the same budget)"),
            "shipped_error": _f("100 * m_mean", "pct2",
                                "models trained offline (shipped), the 3 VALIDATION molecules, each left out of its "
                                "model's training (looked at when choosing): error (%), mean over molecules"),
            "shipped_qv": _f("phred_qv(m_mean)", "qv", "the same as QV"),
            "held_out_vote_error": _f("100 * v_mean", "pct2", "majority vote on the POA backbone, same molecules (%)"),
            "held_out_vote_qv": _f("phred_qv(v_mean)", "qv", "the same as QV"),
            "rule_error": _f("100 * r_mean", "pct2", "homopolymer-median rule on the POA backbone, same molecules (%)"),
            "rule_qv": _f("phred_qv(r_mean)", "qv", "the same as QV"),
            "shipped_minus_vote": _f("100 * diff.mean()", "pct2", "model minus vote, mean over molecules (points)"),
            "shipped_minus_vote_se": _f("100 * se", "pct2", "its standard error over molecules (points)"),
            "shipped_minus_rule": _f("100 * diff_rule.mean()", "pct2", "model minus rule, mean over molecules (points)"),
            "shipped_minus_rule_se": _f("100 * se_rule", "pct2", "its standard error over molecules (points)"),
            "molecules_model_below_vote": _f("wins", "count", "molecules where the model's mean error is below the vote's"),
            "molecules_model_below_rule": _f("wins_r", "count", "molecules where the model's mean error is below the rule's"),
            "p_model_vs_vote_molecules": _f("p", "p", "exact two-sided sign test over the 3 molecules, model vs vote"),
            "p_model_vs_rule_molecules": _f("p_rule", "p", "exact two-sided sign test over the 3 molecules, model vs rule"),
            "untouched_vote_error": _f("100 * fresh_vote", "pct2",
                                       "TEST molecules ZMWs 14743 and 39571 (no choice looked at them), sets of 3 "
                                       "subreads: vote (%), mean over the 2 molecules"),
            "untouched_rule_error": _f("100 * fresh_rule", "pct2", "the same molecules: homopolymer-median rule (%)"),
            "untouched_model_error": _f("100 * fresh_model", "pct2",
                                        "the same molecules: the final model (shipped, trained on every molecule but "
                                        "these two) (%)"),
            **{f"untouched_{z}_{key}_error": _f(f"100 * test_mean[{z}][{name}]", "pct2",
                                                f"test molecule ZMW {z}, mean over its read sets: {what} (%)")
               for z in (14743, 39571)
               for key, name, what in (("vote", "VOTE", "vote"), ("rule", "RULE", "rule"), ("model", "FINAL", "final model"))},
            "test_molecules_model_below_vote": _f("test_wins", "count",
                                                  "of the 2 test molecules, those where the final model is below the vote"),
            "test_molecules_model_below_rule": _f("test_wins_r", "count",
                                                  "of the 2 test molecules, those where the final model is below the rule"),
            "p_test_model_vs_vote": _f("p_test_vote", "p", "exact two-sided sign test over the 2 test molecules, final "
                                                         "model vs vote (cannot be below 0.5)"),
            "p_test_model_vs_rule": _f("p_test_rule", "p", "the same, final model vs rule"),
            "molecules_rule_below_vote": _f("rule_wins", "count", "of the 5 molecules, those where the rule is below the vote"),
            "p_rule_vs_vote_molecules": _f("p_rule_vote", "p", "exact two-sided sign test over the 5 molecules, rule vs vote"),
        },
    },
    "12": {
        "notebook": "notebooks/12_long_range_dna/long_range_dna.ipynb",
        "seeds": SEEDS,
        "figures": {
            "n_test": _f("len(test_data.labels)", "count", "test sequences (fixed data seed)"),
            "promoter_only": _f("blind.mean()", "acc", "expected accuracy from the promoter alone"),
            **{f"{key}_{part}": _f(f"regulatory.accuracy_interval(correct[{name!r}])[{i}]", "acc",
                                   f"{name}: test accuracy" + ("" if i == 0 else f", 95% Wilson {part}"))
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))
               for i, part in ((0, "acc"), (1, "low"), (2, "high"))},
            **{f"{key}_parameters": _f(f"sum(q.numel() for q in models[{name!r}].parameters())", "count",
                                       f"{name}: parameters")
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
            **{f"p_{a}_vs_{b}": _f(f"regulatory.mcnemar_exact(correct[{an!r}], correct[{bn!r}])[2]", "p",
                                   f"exact McNemar p, {an} vs {bn}")
               for a, an, b, bn in (("dilated", "dilated CNN", "transformer", "CNN + transformer"),
                                    ("cnn", "CNN", "transformer", "CNN + transformer"),
                                    ("cnn", "CNN", "dilated", "dilated CNN"))},
            "n_both": _f("len(both)", "count", "test sequences with a forward promoter, the enhancer and the decoy"),
            **{f"{key}_expressed_calls": _f(f"knockout_result[{name!r}]['enhancer'][2]", "count",
                                            f"{name}: of those, called expressed")
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
            **{f"{key}_{what.replace(' ', '_')}_flips": _f(
                f"100 * knockout_result[{name!r}][{what!r}][1] / max(1, knockout_result[{name!r}][{what!r}][2])",
                "pct1", f"{name}: changing the {what} (to N unless named) flips this share of expressed calls (%)")
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))
               for what in ("promoter", "promoter randomised", "promoter reversed", "enhancer", "decoy", "background")},
            **{f"{key}_{what.replace(' ', '_')}_change": _f(
                f"knockout_result[{name!r}][{what!r}][0]", "logit",
                f"{name}: mean |change| of the logit when the {what} is changed (to N unless named)")
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))
               for what in ("promoter", "promoter randomised", "promoter reversed", "enhancer", "decoy", "background")},
            "kmer_k": _f("LESSON12_KMER['k']", "count", "bag of k-mers: k, chosen on validation windows"),
            "kmer_validation_acc": _f("kmer_val_acc", "acc", "bag of k-mers: validation accuracy of the chosen k and l2"),
            **{f"kmer_{part}": _f(f"regulatory.accuracy_interval(correct[KMER])[{i}]", "acc",
                                  "bag of k-mers (logistic regression, deterministic): test accuracy"
                                  + ("" if i == 0 else f", 95% Wilson {part}"))
               for i, part in ((0, "acc"), (1, "low"), (2, "high"))},
            **{f"p_{a}_vs_kmer": _f(f"regulatory.mcnemar_exact(correct[{an!r}], correct[KMER])[2]", "p",
                                    f"exact McNemar p, {an} vs the bag of k-mers")
               for a, an in (("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
            **{f"{a}_only_vs_kmer": _f(f"regulatory.mcnemar_exact(correct[{an!r}], correct[KMER])[0]", "count",
                                       f"test sequences right only for the {an}, not the bag of k-mers")
               for a, an in (("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
            **{f"kmer_only_vs_{a}": _f(f"regulatory.mcnemar_exact(correct[{an!r}], correct[KMER])[1]", "count",
                                       f"test sequences right only for the bag of k-mers, not the {an}")
               for a, an in (("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
            "kmer_expressed_calls": _f("knockout_result[KMER]['enhancer'][2]", "count",
                                       "bag of k-mers: of the knock-out sequences, called expressed"),
            **{f"kmer_{what.replace(' ', '_')}_flips": _f(
                f"100 * knockout_result[KMER][{what!r}][1] / max(1, knockout_result[KMER][{what!r}][2])",
                "pct1", f"bag of k-mers: changing the {what} (to N unless named) flips this share of expressed calls (%)")
               for what in ("promoter", "promoter randomised", "promoter reversed", "promoter moved", "enhancer", "decoy",
                            "background")},
            **{f"{key}_promoter_moved_flips": _f(
                f"100 * knockout_result[{name!r}]['promoter moved'][1] / max(1, knockout_result[{name!r}]['promoter moved'][2])",
                "pct1", f"{name}: the forward GC box moved to the decoy's place flips this share of expressed calls (%)")
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
            "kmer_no_promoter_called": _f("100 * called_no_promoter[KMER]", "pct1",
                                          "bag of k-mers: of the enhancer-without-promoter sequences, called expressed (%)"),
            "n_no_promoter": _f("int(no_promoter.sum())", "count",
                                "test sequences with the enhancer and no promoter (absent or mutated; all not expressed)"),
            **{f"{key}_no_promoter_called": _f(f"100 * called_no_promoter[{name!r}]", "pct1",
                                               f"{name}: of those, called expressed (%)")
               for key, name in (("cnn", "CNN"), ("dilated", "dilated CNN"), ("transformer", "CNN + transformer"))},
        },
    },
}

# ------------------------------------------------------------------------------------------ rounding


def round_p(p: float) -> float:
    """A p-value to 2 significant digits (1 stays 1)."""
    if p == 0 or not math.isfinite(p):
        return float(p)
    return float(f"{p:.2g}")


def rounded(value: float, kind: str) -> float | int:
    if kind == "p":
        return round_p(value)
    if kind == "count":
        return int(round(value))
    return round(float(value), DECIMALS[kind])


def summarise(per_seed: dict[int, float], kind: str, meaning: str) -> dict:
    """One figure over the seeds: the per-seed values, mean and standard error (or one value when all agree)."""
    vals = {str(s): rounded(v, kind) for s, v in per_seed.items()}
    entry = {"meaning": meaning, "kind": kind}
    if len(set(vals.values())) == 1:
        entry["value"] = next(iter(vals.values()))
        if len(vals) > 1:
            entry["same_for_all_seeds"] = True
        return entry
    entry["values"] = vals
    raw = [float(v) for v in per_seed.values()]
    if kind == "p":
        entry["max"] = round_p(max(raw))
        return entry
    n = len(raw)
    mean = sum(raw) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in raw) / (n - 1) / n) if n > 1 else 0.0
    d = DECIMALS[kind] + (1 if kind == "count" else 0)
    entry["mean"], entry["se"] = round(mean, d), round(se, d)
    return entry


# ------------------------------------------------------------------------------------------ running


def with_seed(nb: nbformat.NotebookNode, seed: int) -> nbformat.NotebookNode:
    """The notebook with its setup cell's ``SEED = 0`` replaced by ``SEED = <seed>`` (exactly one such line)."""
    hits = [c for c in nb.cells if c.cell_type == "code" and re.search(r"^SEED = 0$", c.source, re.M)]
    if len(hits) != 1:
        raise ValueError(f"expected exactly one code cell with the line 'SEED = 0', found {len(hits)}")
    hits[0].source = re.sub(r"^SEED = 0$", f"SEED = {seed}", hits[0].source, flags=re.M)
    if not re.search(r"^FULL_RUN = False\b", "\n".join(c.source for c in nb.cells if c.cell_type == "code"), re.M):
        raise ValueError("the notebook does not set FULL_RUN = False: the figures are the default run's")
    return nb


def figures_cell(figures: dict) -> str:
    exprs = {name: expr for name, (expr, _, _) in figures.items()}
    return ("import json as _json\n"
            f"_exprs = {exprs!r}\n"
            "_out, _failed = {}, {}\n"
            "for _name, _expr in _exprs.items():\n"
            "    try:\n"
            "        _out[_name] = float(eval(_expr))\n"
            "    except Exception as _e:\n"
            "        _failed[_name] = f'{_expr}: {type(_e).__name__}: {_e}'\n"
            "if _failed:\n"
            "    raise RuntimeError('figures that could not be read: ' + _json.dumps(_failed, indent=1))\n"
            f"print({MARKER!r} + _json.dumps(_out))\n")


def run_notebook(lesson: str, seed: int, timeout: int) -> tuple[dict, float]:
    """Execute one lesson with one seed; (figure -> value, wall seconds)."""
    from nbclient import NotebookClient

    from grading.kernel import polling

    spec = LESSONS[lesson]
    path = REPO / spec["notebook"]
    nb = with_seed(nbformat.read(str(path), as_version=4), seed)
    nb.cells.append(nbformat.v4.new_code_cell(figures_cell(spec["figures"])))
    env_old = dict(os.environ)
    os.environ["MPLBACKEND"] = "agg"
    t0 = time.perf_counter()
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False, config=polling.config(),
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_old)
    wall = time.perf_counter() - t0
    text = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []) if o.get("output_type") == "stream")
    line = next((ln for ln in text.splitlines() if ln.startswith(MARKER)), None)
    if line is None:
        raise RuntimeError(f"lesson {lesson}, seed {seed}: the figures cell printed no {MARKER} line: {text[-2000:]}")
    return json.loads(line[len(MARKER):]), wall


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return {"nproc": os.cpu_count(), "cpu": cpu, "torch": torch.__version__, "python": platform.python_version(),
            "cuda": torch.cuda.is_available(), "torch_threads": torch.get_num_threads()}


def git_commit() -> str:
    """HEAD, and whether what the figures depend on differs from it: course_lib/, or a case study's code cells
    (markdown does not change a figure, so prose edits made after a run leave its figures valid)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout

    commit = git("rev-parse", "HEAD").strip()
    changed = [ln for ln in git("status", "--porcelain", "--untracked-files=no", "--", "course_lib").splitlines()]
    for spec in LESSONS.values():
        code_now = [c.source for c in nbformat.read(str(REPO / spec["notebook"]), as_version=4).cells
                    if c.cell_type == "code"]
        committed = nbformat.reads(git("show", f"HEAD:{spec['notebook']}"), as_version=4)
        if code_now != [c.source for c in committed.cells if c.cell_type == "code"]:
            changed.append(spec["notebook"])
    return commit + (f" (uncommitted changes to {', '.join(changed)})" if changed else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lessons", default=",".join(LESSONS), help="comma-separated, e.g. 08,12 (default: all)")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: each lesson's, 0,1,2)")
    ap.add_argument("--out", default=str(OUT), help=f"the figures file (default {OUT.relative_to(REPO)})")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per cell at most")
    args = ap.parse_args(argv)
    lessons = [x.strip() for x in args.lessons.split(",") if x.strip()]
    unknown = [x for x in lessons if x not in LESSONS]
    if unknown:
        raise SystemExit(f"unknown lesson(s) {unknown}: expected some of {list(LESSONS)}")
    full = lessons == list(LESSONS) and args.seeds is None
    command = COMMAND if full else "python tests/data_scripts/figures.py " + " ".join(argv or sys.argv[1:])
    started = datetime.datetime.now(datetime.timezone.utc)
    out = {"meta": {"command": command, "script": "tests/data_scripts/figures.py",
                    "date": started.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(), "commit": git_commit(),
                    "settings": "each notebook's default run (FULL_RUN = False), SEED replaced per run",
                    "standard_error": "sample standard deviation over seeds / sqrt(number of seeds)",
                    "wall_seconds": {}},
           "lessons": {}}
    total = time.perf_counter()
    for lesson in lessons:
        spec = LESSONS[lesson]
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else spec["seeds"]
        per_seed: dict[str, dict[int, float]] = {name: {} for name in spec["figures"]}
        for seed in seeds:
            print(f"lesson {lesson}, seed {seed}: {spec['notebook']} ...", flush=True)
            values, wall = run_notebook(lesson, seed, args.timeout)
            out["meta"]["wall_seconds"][f"{lesson} seed {seed}"] = round(wall, 1)
            print(f"  {wall:.1f} s", flush=True)
            for name, v in values.items():
                per_seed[name][seed] = v
        out["lessons"][lesson] = {"notebook": spec["notebook"], "seeds": list(seeds),
                                  "figures": {name: summarise(per_seed[name], kind, meaning)
                                              for name, (_, kind, meaning) in spec["figures"].items()}}
    out["meta"]["wall_seconds"]["total"] = round(time.perf_counter() - total, 1)
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out} ({out['meta']['wall_seconds']['total']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
