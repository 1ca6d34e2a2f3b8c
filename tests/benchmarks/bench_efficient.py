"""Benchmark for lesson 07: causal linear attention in chunks against flash SDPA and the prefix
sums; exact vs linear vs FAVOR+ attention on CPU; the MSE of random features.

    python tests/benchmarks/bench_efficient.py            # full
    python tests/benchmarks/bench_efficient.py --quick    # smaller L, fewer draws
    python tests/benchmarks/bench_efficient.py --parts causal   # only part 0

On CPU (2026-11-25, a 2-core machine shared with other jobs, load average 9-13) the full run
took 895 s of wall time and 2.3 min of CPU time, --quick 348 s and 1.4 min (one thread: most of
the wall time was waiting for a core).

Part 0, causal: (B, H, L, d) = (1, H, L, 64) float32, causal self-attention, forward only, for
    sdpa_causal   torch.nn.functional.scaled_dot_product_attention(is_causal=True), restricted to
                  the fused kernels (flash where it runs: on CPU and for half precision on CUDA;
                  else the memory-efficient kernel; the CSV's `kernel` column says which). Exact,
                  O(L^2) time, O(L) memory; the baseline the ratios are taken against.
    chunked       course_lib.efficient.linear_attention_torch(causal=True): elu + 1 features, exact
                  C x C masked blocks inside chunks of C tokens, the (r, d_v) state and the
                  normaliser carried between chunks (the library's default causal path)
    prefix        course_lib.efficient.prefix_sum_causal_attention_torch on the same features: the
                  causal form before chunking, one cumsum that holds (L, r, d_v) (skipped where that
                  would exceed --prefix-max-gib)
On CUDA (when torch sees one; --device cpu forces the CPU) H = 8 and L = 1024 ... 65536, in
--dtype (float32 by default; SDPA's flash kernel runs only in float16/bfloat16 on CUDA, so
`--dtype bfloat16` is the comparison with flash there); on CPU
H = 1 and L = 1024 ... 16384 (--quick: up to 8192). Peak memory on CUDA: torch.cuda's peak
allocated bytes during the call minus those allocated before it (inputs excluded). On CPU: as in
part 1, a fresh subprocess per (method, L). The summary fits the slope of log(peak) against
log(L): 1 is linear growth.

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

Outputs: CSV on stdout and in --out (default tests/benchmarks/out/): efficient_causal.csv,
efficient_scaling.csv, efficient_mse.csv and a PNG of each. Ratios are from this run only.
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


def _resident_peak(call, shape) -> tuple[int, str]:
    """(extra resident KiB at the call's peak, how it was measured); `call` returns a tensor of `shape`."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        method_used = "VmHWM after clear_refs"
        before = _status_kib("VmRSS")
        out = call()
        peak = _status_kib("VmHWM") - before
    except OSError:
        method_used = "ru_maxrss growth (lower bound)"
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = call()
        peak = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    assert tuple(out.shape) == tuple(shape), (out.shape, shape)
    return peak, method_used


def worker(method: str, L: int, threads: int) -> dict:
    """Run in a fresh process: the extra resident memory one call needs at its peak."""
    torch.set_num_threads(threads)
    fn = _attention_fn(method)
    with torch.inference_mode():
        fn(*_inputs(64))  # warm-up: lazy initialisation is not the call's memory
        q, k, v = _inputs(L)
        peak, method_used = _resident_peak(lambda: fn(q, k, v), (1, 1, L, D_HEAD))
    return {"peak_mib": peak / 1024, "memory_method": method_used}


def measure_memory(method: str, L: int, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, __file__, "--worker", method, str(L), "--threads", str(threads)],
                            capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"memory worker {method} L={L} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure_causal_memory(method: str, L: int, heads: int, threads: int, chunk_size: int, kernel: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, __file__, "--causal-worker", method, str(L), str(heads), str(chunk_size),
                             kernel, "--threads", str(threads)], capture_output=True, text=True, env=env, timeout=600)
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


CAUSAL_METHODS = ("sdpa_causal", "chunked", "prefix")


def _sdpa_causal(kernel: str):
    """F.scaled_dot_product_attention(is_causal=True) held to one fused kernel (never the O(L^2) math one)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "memory-efficient": SDPBackend.EFFICIENT_ATTENTION}[kernel]

    def fn(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return fn


def sdpa_kernel_for(device: str, dtype=torch.float32) -> str:
    """The fused kernel SDPA runs for these inputs: flash where it can, else memory-efficient."""
    q = torch.randn(1, 1, 64, D_HEAD, device=device, dtype=dtype)
    for kernel in ("flash", "memory-efficient"):
        try:
            _sdpa_causal(kernel)(q, q, q)
            return kernel
        except RuntimeError:
            continue
    raise RuntimeError(f"no fused scaled_dot_product_attention kernel runs on {device} for {dtype}")


def _causal_fn(method: str, chunk_size: int, kernel: str):
    from course_lib import efficient

    if method == "sdpa_causal":
        return _sdpa_causal(kernel)
    if method == "chunked":
        return lambda q, k, v: efficient.linear_attention_torch(q, k, v, causal=True, chunk_size=chunk_size)
    if method == "prefix":
        return lambda q, k, v: efficient.prefix_sum_causal_attention_torch(
            efficient.elu_feature_map_torch(q), efficient.elu_feature_map_torch(k), v)
    raise ValueError(f"unknown causal method {method!r}; expected one of {CAUSAL_METHODS}")


def _causal_inputs(L: int, heads: int, device: str, seed: int = 0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, L, D_HEAD, generator=g).to(device=device, dtype=dtype)
                 for _ in range(3))  # (B, H, L, d)


# no float16: its range (65,504) is below the linear forms' running sums of phi(k) at long L, which overflow
CAUSAL_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def prefix_bytes(L: int, heads: int, itemsize: int = 4) -> int:
    """What the prefix form holds at once: the (L, r, d_v) outer products and their cumsum."""
    return 2 * heads * L * D_HEAD * D_HEAD * itemsize


def causal_worker(method: str, L: int, heads: int, threads: int, chunk_size: int, kernel: str) -> dict:
    """Run in a fresh process (CPU): the extra resident memory one causal call needs at its peak."""
    torch.set_num_threads(threads)
    fn = _causal_fn(method, chunk_size, kernel)
    with torch.inference_mode():
        fn(*_causal_inputs(256, heads, "cpu"))  # warm-up: lazy initialisation is not the call's memory
        q, k, v = _causal_inputs(L, heads, "cpu")
        peak, method_used = _resident_peak(lambda: fn(q, k, v), (1, heads, L, D_HEAD))
    return {"peak_mib": peak / 1024, "memory_method": method_used}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def causal_time(fn, q, k, v, device: str, budget_s: float, max_repeats: int) -> tuple[float, int, torch.Tensor]:
    """(best seconds, repeats, the warm-up call's output)."""
    with torch.inference_mode():
        out = fn(q, k, v)  # warm-up
        _sync(device)
        times = []
        start = time.perf_counter()
        while len(times) < max_repeats and (len(times) < 2 or time.perf_counter() - start < budget_s):
            t0 = time.perf_counter()
            fn(q, k, v)
            _sync(device)
            times.append(time.perf_counter() - t0)
    return min(times), len(times), out


def cuda_peak_mib(fn, q, k, v) -> float:
    """Peak bytes torch's CUDA allocator held during one call, minus those held before it."""
    with torch.inference_mode():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn(q, k, v)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del out
    return peak / 2**20


def causal(lengths, heads: int, device: str, threads: int, chunk_size: int, budget_s: float, max_repeats: int,
           prefix_max_gib: float, dtype=torch.float32) -> list[dict]:
    if dtype != torch.float32 and not device.startswith("cuda"):
        raise SystemExit(f"--dtype {dtype} is for CUDA runs; on {device} part 0 measures float32 "
                         "(its peak memory comes from a fresh subprocess that builds float32 inputs)")
    torch.set_num_threads(threads)
    kernel = sdpa_kernel_for(device, dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    rows = []
    for L in lengths:
        q, k, v = _causal_inputs(L, heads, device, dtype=dtype)
        ref_out = None
        for method in CAUSAL_METHODS:
            if method == "prefix" and prefix_bytes(L, heads, itemsize) > prefix_max_gib * 2**30:
                print(f"  {method:11s} L={L:6d}  skipped: its (L, r, d_v) sums need "
                      f"{prefix_bytes(L, heads, itemsize) / 2**30:.1f} GiB > --prefix-max-gib {prefix_max_gib}",
                      file=sys.stderr, flush=True)
                continue
            fn = _causal_fn(method, chunk_size, kernel)
            seconds, repeats, out = causal_time(fn, q, k, v, device, budget_s, max_repeats)
            err = None
            if method != "sdpa_causal":  # the two linear forms compute the same similarity
                if dtype == torch.float32:  # in float32 they must agree
                    if ref_out is None:
                        ref_out = out
                    elif (diff := (out - ref_out).abs().max().item()) > 1e-4:
                        raise SystemExit(f"{method} differs from chunked by {diff:.2e} at L={L}")
                else:  # in half precision each is reported against the chunked form in float32
                    if ref_out is None:
                        ref_out = _causal_fn("chunked", chunk_size, kernel)(q.float(), k.float(), v.float())
                    err = (out.float() - ref_out).abs().max().item()
            del out
            if device.startswith("cuda"):
                mem = {"peak_mib": cuda_peak_mib(fn, q, k, v), "memory_method": "torch.cuda.max_memory_allocated"}
            else:
                mem = measure_causal_memory(method, L, heads, threads, chunk_size, kernel)
            rows.append({"method": method, "L": L, "heads": heads, "device": device,
                         "dtype": str(dtype).removeprefix("torch."),
                         "kernel": kernel if method == "sdpa_causal" else (f"C={chunk_size}" if method == "chunked"
                                                                          else "cumsum"),
                         "time_ms": seconds * 1e3, "repeats": repeats, **mem,
                         **({} if dtype == torch.float32 else {"max_abs_err_vs_float32": err})})
            print(f"  {method:11s} L={L:6d}  {seconds * 1e3:10.2f} ms  peak {mem['peak_mib']:9.1f} MiB"
                  + (f"  max |error| vs float32 chunked {err:.3g}" if err is not None else ""),
                  file=sys.stderr, flush=True)
        del q, k, v, ref_out
    return rows


def _slope(points) -> float | None:
    """Least-squares slope of log(y) against log(x); None with fewer than two positive points."""
    pts = [(math.log(x), math.log(y)) for x, y in points if y > 0]
    if len(pts) < 2:
        return None
    xs, ys = np.array(pts).T
    return float(np.polyfit(xs, ys, 1)[0])


def causal_summary(rows: list[dict], device: str) -> list[str]:
    by = {(r["method"], r["L"]): r for r in rows}
    lengths = sorted({r["L"] for r in rows})
    lines = []
    for method in CAUSAL_METHODS:
        pts = [(L, by[(method, L)]) for L in lengths if (method, L) in by]
        if len(pts) < 2:
            continue
        t = _slope([(L, r["time_ms"]) for L, r in pts])
        m = _slope([(L, r["peak_mib"]) for L, r in pts])
        per_token = ", ".join(f"{r['peak_mib'] * 2**20 / L / r['heads'] / 1024:.2f}" for L, r in pts)
        lines.append(f"{method}: time ~ L^{t:.2f}, peak memory ~ L^{m:.2f} (fitted over L = {pts[0][0]}-{pts[-1][0]}); "
                     f"peak KiB per token per head: {per_token}")
    for L in lengths:
        base, chunked = by.get(("sdpa_causal", L)), by.get(("chunked", L))
        if base is None or chunked is None:
            continue
        line = (f"L = {L}: chunked {chunked['time_ms']:.1f} ms, {chunked['peak_mib']:.1f} MiB; "
                f"sdpa_causal/chunked time {base['time_ms'] / chunked['time_ms']:.2f}x, "
                f"memory chunked/sdpa_causal {chunked['peak_mib'] / base['peak_mib']:.2f}")
        prefix = by.get(("prefix", L))
        if prefix is not None:
            line += (f"; prefix/chunked time {prefix['time_ms'] / chunked['time_ms']:.1f}x, "
                     f"memory {prefix['peak_mib'] / chunked['peak_mib']:.1f}x")
        lines.append(line)
    L_max = lengths[-1]
    if device.startswith("cuda") and ("chunked", L_max) in by and ("sdpa_causal", L_max) in by:
        chunked, base = by[("chunked", L_max)], by[("sdpa_causal", L_max)]
        lines.append(f"issue 38 target at L = {L_max}: chunked peak {chunked['peak_mib'] / 1024:.2f} GiB (at most 2 GB: "
                     f"{'met' if chunked['peak_mib'] * 2**20 <= 2e9 else 'NOT met'}), "
                     f"{'faster' if chunked['time_ms'] < base['time_ms'] else 'NOT faster'} than sdpa_causal")
    return lines


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
    parser.add_argument("--quick", action="store_true", help="smaller L and fewer draws")
    parser.add_argument("--parts", default="causal,scaling,mse",
                        help="comma-separated parts to run: causal (part 0), scaling (part 1), mse (part 2)")
    parser.add_argument("--device", default=None, help="device of part 0 (default: cuda when torch sees one, else cpu)")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="chunk size C of part 0 (default: course_lib.efficient.DEFAULT_CHUNK_SIZE)")
    parser.add_argument("--dtype", choices=sorted(CAUSAL_DTYPES), default="float32",
                        help="dtype of part 0 on CUDA (PyTorch's flash kernel runs only in float16/bfloat16 "
                             "there; in float32 SDPA uses its memory-efficient kernel)")
    parser.add_argument("--prefix-max-gib", type=float, default=24.0,
                        help="skip the prefix form where its (L, r, d_v) sums would exceed this many GiB")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "L"), help=argparse.SUPPRESS)
    parser.add_argument("--causal-worker", nargs=5, metavar=("METHOD", "L", "H", "C", "KERNEL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.threads)))
        return 0
    if args.causal_worker:
        method, L, heads, chunk, kernel = args.causal_worker
        print(json.dumps(causal_worker(method, int(L), int(heads), args.threads, int(chunk), kernel)))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - {"causal", "scaling", "mse"})
    if unknown or not parts:
        parser.error(f"--parts takes causal, scaling and/or mse, comma-separated; got {args.parts!r}")

    from course_lib import efficient

    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.plotting import attention_scaling_plot, feature_mse_plot

    print(machine_info(args.threads))
    if "causal" in parts:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        chunk = args.chunk_size or efficient.DEFAULT_CHUNK_SIZE
        if device.startswith("cuda"):
            heads = 8
            causal_lengths = [1024 * 2 ** i for i in range(5 if args.quick else 7)]  # 1k ... 16k / 64k
            print(f"# device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}, "
                  f"CUDA {torch.version.cuda}")
        else:
            heads = 1
            causal_lengths = [1024 * 2 ** i for i in range(4 if args.quick else 5)]  # 1k ... 8k / 16k
        print(f"# part 0: causal attention on {device}, (B, H, L, d) = (1, {heads}, L, {D_HEAD}), {args.dtype}, forward; "
              f"chunked C = {chunk}; time: min over repeats; peak: "
              f"{'CUDA allocator' if device.startswith('cuda') else 'extra resident memory, fresh subprocess per config'}")
        causal_rows = causal(causal_lengths, heads, device, args.threads, chunk,
                             budget_s=0.5 if args.quick else 1.0, max_repeats=10, prefix_max_gib=args.prefix_max_gib,
                             dtype=CAUSAL_DTYPES[args.dtype])
        print(_csv(causal_rows), end="")
        for line in causal_summary(causal_rows, device):
            print("# " + line)
        stem = "efficient_causal" if args.dtype == "float32" else f"efficient_causal_{args.dtype}"
        (args.out / f"{stem}.csv").write_text(_csv(causal_rows))
        fig, _ = attention_scaling_plot(causal_rows, title=f"Causal attention on {device}: d = {D_HEAD}, {heads} "
                                                           f"head{'s' if heads > 1 else ''}, {args.dtype}, chunk C = {chunk}")
        fig.savefig(args.out / f"{stem}.png", dpi=120, bbox_inches="tight")

    if "scaling" in parts:
        lengths = [256, 512, 1024, 2048, 4096] if args.quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
        print(f"# part 1: time (min over repeats) and peak extra resident memory (fresh subprocess per config); "
              f"d = {D_HEAD}, one head, float32, FAVOR+ m = {M_FEATURES}, CPU")
        rows = scaling(lengths, args.threads, budget_s=0.5 if args.quick else 1.0, max_repeats=10)
        print(_csv(rows), end="")
        for line in summary(rows):
            print("# " + line)
        (args.out / "efficient_scaling.csv").write_text(_csv(rows))
        fig, _ = attention_scaling_plot(rows, title=f"Attention on CPU: d = {D_HEAD}, one head, float32 "
                                                    f"({args.threads} thread{'s' if args.threads > 1 else ''})")
        fig.savefig(args.out / "efficient_scaling.png", dpi=120, bbox_inches="tight")

    if "mse" in parts:
        ms = [16, 32, 64, 128, 256]
        n_draws = 400 if args.quick else 2000
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
        (args.out / "efficient_mse.csv").write_text(_csv(mse_rows))
        fig, _ = feature_mse_plot(mse_rows, title=f"MSE of random-feature estimates of exp(x.y), d = {MSE_DIM}, "
                                                  f"|x| = |y| = {MSE_NORM}")
        fig.savefig(args.out / "efficient_mse.png", dpi=120, bbox_inches="tight")
    print(f"# wrote CSVs and PNGs of parts {', '.join(parts)} to {args.out}; total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
