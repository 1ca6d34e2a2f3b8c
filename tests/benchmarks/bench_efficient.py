"""Benchmark for lesson 07: exact vs linear vs FAVOR+ attention on CPU, and the MSE of random features.

    python tests/benchmarks/bench_efficient.py            # full: L = 256 ... 16384 (about 2-3 minutes)
    python tests/benchmarks/bench_efficient.py --quick    # L = 256 ... 4096, fewer draws (under a minute)

Part 1, scaling: one head, d = 64, float32, q, k, v of shape (1, 1, L, 64), for
    exact_ours    course_lib.attention.scaled_dot_product_attention_torch (builds the L x L weights)
    exact_torch   torch.nn.functional.scaled_dot_product_attention (PyTorch picks its fused
                  flash-attention CPU kernel for this 4-d float32 input: exact, O(L^2) time, O(L) memory)
    linear        course_lib.efficient.linear_attention_torch (elu + 1)
    favor         course_lib.efficient.favor_attention_torch, m = 256 orthogonal features
Time: the minimum wall time over repeated calls in this process (torch.inference_mode, one
warm-up call first). The minimum is used because this machine may be shared with other jobs:
interference only ever adds time. Threads: --threads (default 1, because on a shared 2-core
machine two OpenMP threads are often descheduled and the numbers jump by 10x; pass 2 to use both).

Peak memory: tracemalloc does not see torch's CPU allocator, and torch has no CPU allocator
statistics, so each (method, L) runs once in a fresh subprocess: after a small warm-up call
the worker resets the kernel's resident-set high-water mark (writing 5 to
/proc/self/clear_refs, Linux >= 4.0), runs the call, and reports VmHWM minus the resident
size just before the call: the extra resident memory the call needed at its peak. Where
clear_refs is not writable it falls back to the growth of ru_maxrss in the fresh process
(a lower bound) and says so in the CSV's `memory_method` column.

Part 2, MSE of the estimators of SM(x, y) = exp(x . y) against m: iid positive, orthogonal
positive and iid trigonometric features, each the mean squared error over many independent
draws, with the closed forms of Performer Lemma 2 for iid positive and trigonometric.

Outputs: CSV on stdout and in --out (default tests/benchmarks/out/): efficient_scaling.csv,
efficient_mse.csv, efficient_scaling.png, efficient_mse.png. Ratios are from this run only.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

METHODS = ("exact_ours", "exact_torch", "linear", "favor")
D_HEAD = 64
M_FEATURES = 256


def _attention_fn(method: str, d: int = D_HEAD, m: int = M_FEATURES):
    import torch.nn.functional as F

    from course_lib import efficient
    from course_lib.attention import scaled_dot_product_attention_torch

    if method == "exact_ours":
        return lambda q, k, v: scaled_dot_product_attention_torch(q, k, v)[0]
    if method == "exact_torch":
        return F.scaled_dot_product_attention
    if method == "linear":
        return efficient.linear_attention_torch
    if method == "favor":
        w = efficient.draw_projection(m, d, seed=0, dtype=torch.float32)
        return lambda q, k, v: efficient.favor_attention_torch(q, k, v, w)
    raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")


def _inputs(L: int, d: int = D_HEAD, seed: int = 0):
    # (B, H, L, d) = (1, 1, L, d): one sequence, one head. The 4-d layout matters for PyTorch: with it
    # F.scaled_dot_product_attention picks its fused (flash) CPU kernel, which never stores L x L.
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 1, L, d, generator=g) for _ in range(3))


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def worker(method: str, L: int, threads: int) -> dict:
    """Run in a fresh process: the extra resident memory one call needs at its peak."""
    torch.set_num_threads(threads)
    fn = _attention_fn(method)
    with torch.inference_mode():
        fn(*_inputs(64))  # warm-up: lazy initialisation is not the call's memory
        q, k, v = _inputs(L)
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            method_used = "VmHWM after clear_refs"
            before = _status_kib("VmRSS")
            out = fn(q, k, v)
            peak = _status_kib("VmHWM") - before
        except OSError:
            method_used = "ru_maxrss growth (lower bound)"
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            out = fn(q, k, v)
            peak = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        assert out.shape == (1, 1, L, D_HEAD)
    return {"peak_mib": peak / 1024, "memory_method": method_used}


def measure_memory(method: str, L: int, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, __file__, "--worker", method, str(L), "--threads", str(threads)],
                            capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"memory worker {method} L={L} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure_time(method: str, L: int, budget_s: float, max_repeats: int) -> tuple[float, int]:
    fn = _attention_fn(method)
    q, k, v = _inputs(L)
    with torch.inference_mode():
        fn(q, k, v)  # warm-up
        times = []
        start = time.perf_counter()
        while len(times) < max_repeats and (len(times) < 2 or time.perf_counter() - start < budget_s):
            t0 = time.perf_counter()
            fn(q, k, v)
            times.append(time.perf_counter() - t0)
    return min(times), len(times)


def scaling(lengths, threads: int, budget_s: float, max_repeats: int) -> list[dict]:
    torch.set_num_threads(threads)
    rows = []
    for L in lengths:
        for method in METHODS:
            seconds, repeats = measure_time(method, L, budget_s, max_repeats)
            mem = measure_memory(method, L, threads)
            rows.append({"method": method, "L": L, "time_ms": seconds * 1e3, "repeats": repeats, **mem})
            print(f"  {method:11s} L={L:6d}  {seconds * 1e3:10.2f} ms  peak {mem['peak_mib']:9.1f} MiB",
                  file=sys.stderr, flush=True)
    return rows


PAIRS = {  # cosine of the angle between x and y, |x| = |y| = MSE_NORM
    "similar (cos = +0.5)": 0.5,
    "dissimilar (cos = -0.7)": -0.7,
}
MSE_NORM, MSE_DIM = 0.7, 16


def _pair(cos: float, d: int = MSE_DIM, norm: float = MSE_NORM, seed: int = 0):
    """x and y of length `norm` whose angle has cosine `cos`."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=d), rng.normal(size=d)
    a /= np.linalg.norm(a)
    b -= (b @ a) * a
    b /= np.linalg.norm(b)
    return norm * a, norm * (cos * a + math.sqrt(1 - cos * cos) * b)


def mse_vs_m(ms, n_draws: int) -> list[dict]:
    """Empirical MSE of phi(x).phi(y) as an estimate of exp(x.y), for each pair, m and kind."""
    from course_lib import efficient as E

    rows = []
    for pair, cos in PAIRS.items():
        x, y = _pair(cos)
        sm = math.exp(float(x @ y))
        for m in ms:
            for kind, orthogonal, closed in (("positive iid", False, E.positive_features_mse(x, y, m)),
                                             ("positive orthogonal", True, None),
                                             ("trigonometric iid", False, E.trig_features_mse(x, y, m))):
                w = E.draw_projection(m, MSE_DIM, orthogonal=orthogonal, seed=1000 + m,
                                      batch_shape=(n_draws,)).numpy()
                est = E.softmax_kernel_estimate(x, y, w, kind="trig" if kind.startswith("trig") else "positive")
                sq = (est - sm) ** 2
                rows.append({"pair": pair, "kind": kind, "m": m, "mse": float(sq.mean()),
                             "mse_se": float(sq.std(ddof=1) / math.sqrt(n_draws)),
                             "closed_form": closed, "n_draws": n_draws})
    return rows


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def _crossover(rows, fast: str, slow: str):
    """Smallest L from which `fast` is faster than `slow` at every measured L at or above it."""
    times = {(r["method"], r["L"]): r["time_ms"] for r in rows}
    lengths = sorted({r["L"] for r in rows})
    answer = None
    for L in reversed(lengths):
        if times[(fast, L)] < times[(slow, L)]:
            answer = L
        else:
            break
    return answer


def summary(rows: list[dict]) -> list[str]:
    lines = []
    times = {(r["method"], r["L"]): r for r in rows}
    L_max = max(r["L"] for r in rows)
    for fast in ("linear", "favor"):
        for slow in ("exact_ours", "exact_torch"):
            c = _crossover(rows, fast, slow)
            lines.append(f"crossover {fast} faster than {slow}: from L = {c if c else 'never (in range)'}")
    for fast in ("linear", "favor"):
        for slow in ("exact_ours", "exact_torch"):
            t = times[(slow, L_max)]["time_ms"] / times[(fast, L_max)]["time_ms"]
            mem_fast = times[(fast, L_max)]["peak_mib"]
            mem_slow = times[(slow, L_max)]["peak_mib"]
            mem = f"{mem_fast / mem_slow:.4f}" if mem_slow > 0 else "n/a"
            lines.append(f"L = {L_max}: {fast} is {t:.1f}x faster than {slow}; peak memory {fast}/{slow} = {mem} "
                         f"({mem_fast:.1f} MiB vs {mem_slow:.1f} MiB)")
    lines.append(f"one L x L float32 matrix at L = {L_max}: {L_max * L_max * 4 / 2**20:.0f} MiB")
    return lines


def machine_info(threads: int) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"# machine: {cpu}, {os.cpu_count()} cores, torch {torch.__version__}, numpy {np.__version__}, "
            f"python {platform.python_version()}, torch threads used: {threads}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="L up to 4096 and fewer draws")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "L"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.threads)))
        return 0

    start = time.perf_counter()
    lengths = [256, 512, 1024, 2048, 4096] if args.quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
    ms = [16, 32, 64, 128, 256]
    n_draws = 400 if args.quick else 2000
    print(machine_info(args.threads))
    print(f"# part 1: time (min over repeats) and peak extra resident memory (fresh subprocess per config); "
          f"d = {D_HEAD}, one head, float32, FAVOR+ m = {M_FEATURES}")
    rows = scaling(lengths, args.threads, budget_s=0.5 if args.quick else 1.0, max_repeats=10)
    print(_csv(rows), end="")
    for line in summary(rows):
        print("# " + line)
    print(f"# part 2: MSE of phi(x).phi(y) for exp(x.y), d = {MSE_DIM}, |x| = |y| = {MSE_NORM}, "
          f"{n_draws} draws per point")
    mse_rows = mse_vs_m(ms, n_draws)
    print(_csv(mse_rows), end="")
    for pair in PAIRS:
        for m in ms:
            r = {row["kind"]: row for row in mse_rows if row["m"] == m and row["pair"] == pair}
            print(f"# {pair}, m = {m}: orthogonal/iid MSE = "
                  f"{r['positive orthogonal']['mse'] / r['positive iid']['mse']:.3f}; empirical/closed form: "
                  f"positive {r['positive iid']['mse'] / r['positive iid']['closed_form']:.3f}, "
                  f"trig {r['trigonometric iid']['mse'] / r['trigonometric iid']['closed_form']:.3f}; "
                  f"closed-form trig/positive MSE = "
                  f"{r['trigonometric iid']['closed_form'] / r['positive iid']['closed_form']:.2f}")

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "efficient_scaling.csv").write_text(_csv(rows))
    (args.out / "efficient_mse.csv").write_text(_csv(mse_rows))
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.plotting import attention_scaling_plot, feature_mse_plot

    fig, _ = attention_scaling_plot(rows, title=f"Attention on CPU: d = {D_HEAD}, one head, float32 "
                                                f"({args.threads} thread{'s' if args.threads > 1 else ''})")
    fig.savefig(args.out / "efficient_scaling.png", dpi=120, bbox_inches="tight")
    fig, _ = feature_mse_plot(mse_rows, title=f"MSE of random-feature estimates of exp(x.y), d = {MSE_DIM}, "
                                              f"|x| = |y| = {MSE_NORM}")
    fig.savefig(args.out / "efficient_mse.png", dpi=120, bbox_inches="tight")
    print(f"# wrote {args.out}/efficient_scaling.csv, efficient_mse.csv and two PNGs; "
          f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
