"""Benchmark lesson 06's BPE: naive vs fast trainer vs HuggingFace ``tokenizers``, and encoding.

    python tests/benchmarks/bench_bpe.py                 # 1 MB corpus, vocab 512, 1024, 4096
    python tests/benchmarks/bench_bpe.py --quick         # 200 KB, vocab 512 and 1024 (a minute)
    python tests/benchmarks/bench_bpe.py --naive-max-vocab 1024   # skip the slow naive run at 4096

Everything is measured in this one run, on this machine, with the same corpus
(``course_lib.bio.corpus.medical_corpus``) and the same settings for all three trainers:
byte-level BPE, our ``SPLIT_PATTERN`` pre-split (HF: ``Split`` with the same regex, then
``ByteLevel`` without its own regex), no special tokens, vocab = 256 bytes + merges.
Training times are end to end (pre-split and counting included; HF's ``train_from_iterator``
on the same single string). The naive trainer recounts every pair after every merge; its
time per merge is reported too. Encoding: the whole held-in corpus once, cold caches
(a fresh tokenizer), ours single-threaded; HF ``encode`` on the whole string and
``encode_batch`` on its lines (HF uses all cores for batches). A check column says whether
the fast trainer's merges equal the naive trainer's (they must) and HF's after relabelling
the base ids (they should: same rules, see ``course_lib.bpe``).

Targets from the issue: fast >= 20x naive at vocab 1024; fast within 5x of HF.
Writes a CSV to ``tests/benchmarks/out/bench_bpe.csv`` (or ``--out``).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import platform
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def machine_info() -> str:
    import tokenizers

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{cpu}; {os.cpu_count()} logical CPUs; Python {platform.python_version()}; "
            f"tokenizers {tokenizers.__version__}; {platform.system()} {platform.release()}")


def gpt2_byte_to_char() -> dict[int, str]:
    keep = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def hf_train(text: str, vocab_size: int):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from course_lib import bpe

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(bpe.SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text], trainer)
    return tok


def equal_to_hf(text: str, hf_tok, vocab_size: int) -> bool:
    """Our fast trainer with base ids numbered as HF numbers them learns HF's merge list."""
    from course_lib import bpe

    model = json.loads(hf_tok.to_str())["model"]
    vocab = model["vocab"]
    hf_merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    b2c = gpt2_byte_to_char()
    hf_id = {b: vocab[b2c[b]] for b in range(256)}
    counts = {tuple(hf_id[b] for b in w): c for w, c in bpe.chunk_counts(text).items()}
    ours = bpe.train_fast(counts, vocab_size - 256, 256)
    names = {i: s for s, i in vocab.items() if i < 256}
    for (a, b), idx in ours.items():
        names[idx] = names[a] + names[b]
    return [(names[a], names[b]) for a, b in ours] == hf_merges


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=1_000_000, help="corpus size in bytes (default 1 MB)")
    parser.add_argument("--vocab", type=int, nargs="+", default=[512, 1024, 4096])
    parser.add_argument("--naive-max-vocab", type=int, default=4096,
                        help="run the naive trainer only up to this vocab size (it is slow)")
    parser.add_argument("--quick", action="store_true", help="200 KB, vocab 512 and 1024")
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "out" / "bench_bpe.csv")
    args = parser.parse_args(argv)
    if args.quick:
        args.bytes, args.vocab = 200_000, [512, 1024]

    from course_lib import bpe
    from course_lib.bio.corpus import medical_corpus

    text = medical_corpus(args.bytes)
    n_bytes = len(text.encode("utf-8"))
    lines = text.split("\n")
    print(f"machine: {machine_info()}")
    print(f"corpus: course_lib.bio.corpus.medical_corpus({args.bytes}) = {n_bytes:,} bytes, "
          f"{len(lines):,} lines, {len(bpe.chunk_counts(text)):,} distinct pre-split chunks")
    print()

    rows = []
    for vocab_size in args.vocab:
        row: dict = {"vocab": vocab_size, "merges": vocab_size - 256}
        fast, row["fast_s"] = timed(bpe.ByteBPE.train, text, vocab_size)
        hf, row["hf_s"] = timed(hf_train, text, vocab_size)
        if vocab_size <= args.naive_max_vocab:
            print(f"  vocab {vocab_size}: naive trainer running ({vocab_size - 256} merges, each a full "
                  "recount)...", flush=True)
            naive, row["naive_s"] = timed(bpe.ByteBPE.train, text, vocab_size, trainer="naive")
            row["naive_ms_per_merge"] = 1000 * row["naive_s"] / max(1, len(naive.merges))
            row["naive_over_fast"] = row["naive_s"] / row["fast_s"]
            row["fast_equals_naive"] = naive.merges == fast.merges
        row["fast_over_hf"] = row["fast_s"] / row["hf_s"]
        row["fast_equals_hf_relabelled"] = equal_to_hf(text, hf, vocab_size)

        fresh = bpe.ByteBPE(fast.merges)                        # empty chunk cache
        ids, row["ours_encode_s"] = timed(fresh.encode, text)
        hf_ids, row["hf_encode_s"] = timed(hf.encode, text)
        batch, row["hf_batch_encode_s"] = timed(hf.encode_batch, lines)
        row["ours_MB_s"] = n_bytes / 1e6 / row["ours_encode_s"]
        row["hf_MB_s"] = n_bytes / 1e6 / row["hf_encode_s"]
        row["hf_batch_MB_s"] = n_bytes / 1e6 / row["hf_batch_encode_s"]
        row["ours_bytes_per_token"] = n_bytes / len(ids)
        row["hf_bytes_per_token"] = n_bytes / len(hf_ids.ids)
        assert fresh.decode(ids) == text
        rows.append(row)
        print(f"  vocab {vocab_size}: done", flush=True)

    def fmt(v, spec):
        width = int(spec.split(".")[0])
        return "-".rjust(width) if v is None else format(v, spec)

    print()
    print("training time (s), end to end, one run each")
    print(f"{'vocab':>6} {'merges':>6} {'naive':>9} {'ms/merge':>9} {'fast':>7} {'HF':>7} "
          f"{'naive/fast':>10} {'fast/HF':>8} {'fast==naive':>11} {'fast==HF*':>9}")
    for r in rows:
        print(f"{r['vocab']:>6} {r['merges']:>6} {fmt(r.get('naive_s'), '9.2f')} "
              f"{fmt(r.get('naive_ms_per_merge'), '9.1f')} {r['fast_s']:7.2f} {r['hf_s']:7.2f} "
              f"{fmt(r.get('naive_over_fast'), '9.1f') + ('x' if r.get('naive_over_fast') else ' '):>10} "
              f"{r['fast_over_hf']:7.2f}x {str(r.get('fast_equals_naive', '-')):>11} "
              f"{str(r['fast_equals_hf_relabelled']):>9}")
    print("  * HF's merges equal ours once our base ids are numbered the way HF numbers its byte alphabet")
    print()
    print("encoding the whole corpus once (cold cache)")
    print(f"{'vocab':>6} {'ours MB/s':>10} {'HF MB/s':>8} {'HF batch MB/s':>14} {'ours/HF time':>13} "
          f"{'bytes/token ours':>17} {'HF':>6}")
    for r in rows:
        print(f"{r['vocab']:>6} {r['ours_MB_s']:10.2f} {r['hf_MB_s']:8.2f} {r['hf_batch_MB_s']:14.2f} "
              f"{r['ours_encode_s'] / r['hf_encode_s']:12.2f}x {r['ours_bytes_per_token']:17.3f} "
              f"{r['hf_bytes_per_token']:6.3f}")

    ok = True
    for r in rows:
        if r["vocab"] == 1024 and "naive_over_fast" in r:
            hit = r["naive_over_fast"] >= 20
            ok &= hit
            print(f"target fast >= 20x naive at vocab 1024: {r['naive_over_fast']:.1f}x "
                  f"{'met' if hit else 'MISSED'}")
        hit = r["fast_over_hf"] <= 5
        ok &= hit
        print(f"target fast within 5x of HF at vocab {r['vocab']}: {r['fast_over_hf']:.2f}x "
              f"{'met' if hit else 'MISSED'}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1]))
    sys.exit(main())
