"""Pictures shared by the lessons: attention heatmaps and the interactive explorer.

Covers a seaborn heatmap of an attention matrix with token labels, and an
ipywidgets explorer (a slider over query tokens showing where each one looks).
Colour maps are colour-blind safe (``viridis`` for weights). Every function
returns the matplotlib objects it made and never calls ``plt.show()``, so the
notebook decides when to draw.

Does NOT cover lesson-specific plots: those are added below by each lesson.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

__all__ = ["attention_heatmap", "attention_explorer", "CLINICAL_SENTENCE"]

#: A short clinical sentence used by the attention lesson's pictures.
CLINICAL_SENTENCE = "patient denies chest pain but reports shortness of breath".split()


def _as_matrix(weights) -> np.ndarray:
    from course_lib.arrays import to_numpy

    w = to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"attention weights for a heatmap must be 2-D (T, S), got shape {w.shape}")
    return w


def attention_heatmap(weights, queries: Sequence[str], keys: Sequence[str] | None = None, *,
                      ax=None, title: str = "Attention weights", annot: bool | None = None,
                      vmax: float | None = 1.0):
    """Heatmap of a (T, S) attention matrix: rows are queries, columns keys.

    Returns the matplotlib Axes. ``annot`` writes the weights into the cells
    (default: when the matrix is at most 12 x 12). The colour scale runs from 0 to
    ``vmax`` (default 1, the largest possible weight); ``vmax=None`` ends it at the
    largest weight shown, so a long row of small weights still shows its contrast.
    """
    w = _as_matrix(weights)
    keys = list(queries) if keys is None else list(keys)
    if w.shape != (len(queries), len(keys)):
        raise ValueError(
            f"weights shape {w.shape} does not match {len(queries)} query labels x {len(keys)} key labels"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * len(keys), 0.8 + 0.45 * len(queries)))
    if annot is None:
        annot = max(w.shape) <= 12
    top = float(w.max()) if vmax is None else float(vmax)
    sns.heatmap(w, ax=ax, cmap="viridis", vmin=0.0, vmax=top, square=True, annot=annot, fmt=".2f",
                annot_kws={"fontsize": 7}, xticklabels=keys, yticklabels=list(queries),
                cbar_kws={"label": "attention weight (rows sum to 1)"})
    ax.set_xlabel("key token (attended to)")
    ax.set_ylabel("query token (attending)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def _bar_for_query(ax, w: np.ndarray, tokens: Sequence[str], i: int) -> None:
    ax.clear()
    colors = sns.color_palette("colorblind", 2)
    bars = ax.bar(range(len(tokens)), w[i], color=[colors[1] if j == i else colors[0] for j in range(len(tokens))])
    ax.set_xticks(range(len(tokens)), tokens, rotation=45, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    ax.set_xlabel("key token")
    ax.set_title(f"where '{tokens[i]}' (query {i}) looks")
    for b, val in zip(bars, w[i]):
        ax.annotate(f"{val:.2f}", (b.get_x() + b.get_width() / 2, val), ha="center", va="bottom", fontsize=7)


def attention_explorer(weights, tokens: Sequence[str]):
    """An ipywidgets slider over query tokens; each position shows that query's weights as bars.

    Returns the widget (display it as the last expression of a cell). The
    drawing function is also reachable as ``widget.draw(i)`` so it can be tested
    without a browser.
    """
    import ipywidgets as widgets

    w = _as_matrix(weights)
    if w.shape[0] != len(tokens) or w.shape[1] != len(tokens):
        raise ValueError(f"explorer needs self-attention weights (T, T) for {len(tokens)} tokens, got {w.shape}")
    out = widgets.Output()
    slider = widgets.IntSlider(value=0, min=0, max=len(tokens) - 1, description="query", continuous_update=False)
    label = widgets.Label(value=tokens[0])
    fig, ax = plt.subplots(figsize=(7, 3))
    plt.close(fig)  # drawn into the Output widget, not twice

    def draw(i: int):
        _bar_for_query(ax, w, tokens, i)
        fig.tight_layout()
        label.value = f"query token: {tokens[i]}"
        with out:
            out.clear_output(wait=True)
            from IPython.display import display

            display(fig)
        return ax

    slider.observe(lambda change: draw(change["new"]), names="value")
    box = widgets.VBox([widgets.HBox([slider, label]), out])
    box.draw = draw
    draw(0)
    return box


# ---------------------------------------------------------------- lessons 02 (masking) and 03 (multi-head)
__all__ += ["mask_heatmap", "head_heatmaps"]


def mask_heatmap(mask, queries: Sequence[str], keys: Sequence[str] | None = None, *,
                 ax=None, title: str = "Attention mask"):
    """Picture of a boolean (T, S) mask in the course convention: True = may attend.

    Allowed cells are drawn in one colour-blind-safe colour, masked ones in another,
    with a legend. Returns the matplotlib Axes.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    m = _as_matrix(mask)
    if m.dtype != np.bool_:
        raise ValueError(f"mask_heatmap expects a boolean mask (True = may attend), got dtype {m.dtype}")
    keys = list(queries) if keys is None else list(keys)
    if m.shape != (len(queries), len(keys)):
        raise ValueError(f"mask shape {m.shape} does not match {len(queries)} query labels x {len(keys)} key labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 + 0.5 * len(keys), 0.8 + 0.42 * len(queries)))
    blocked, allowed = sns.color_palette("colorblind", 8)[7], sns.color_palette("colorblind", 1)[0]
    sns.heatmap(m.astype(float), ax=ax, cmap=ListedColormap([blocked, allowed]), vmin=0, vmax=1, cbar=False,
                square=True, linewidths=0.5, linecolor="white", xticklabels=keys, yticklabels=list(queries))
    ax.legend(handles=[Patch(color=allowed, label="True: may attend"), Patch(color=blocked, label="False: masked")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_xlabel("key token (attended to)")
    ax.set_ylabel("query token (attending)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def head_heatmaps(weights, queries: Sequence[str], keys: Sequence[str] | None = None, *,
                  ncols: int = 2, title: str = "Attention weights per head",
                  head_labels: Sequence[str] | None = None):
    """One :func:`attention_heatmap` per head for per-head weights (H, T, S).

    ``head_labels`` titles the panels (default "head 0", "head 1", ...): pass the heads'
    own names when ``weights`` holds a selection of a layer's heads, e.g. ["head 3", "head 1"].
    Returns (figure, array of Axes). Cells are not annotated, to keep small panels readable.
    """
    from course_lib.arrays import to_numpy

    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"per-head weights must have shape (H, T, S), got {w.shape}")
    H = w.shape[0]
    labels = [f"head {h}" for h in range(H)] if head_labels is None else [str(t) for t in head_labels]
    if len(labels) != H:
        raise ValueError(f"head_labels has {len(labels)} labels for {H} heads; give one label per head")
    ncols = max(1, min(ncols, H))
    nrows = -(-H // ncols)
    keys = list(queries) if keys is None else list(keys)
    fig, axes = plt.subplots(nrows, ncols, figsize=(ncols * (1.6 + 0.45 * len(keys)),
                                                    nrows * (1.0 + 0.4 * len(queries))), squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h < H:
            attention_heatmap(w[h], queries, keys, ax=ax, title=labels[h], annot=False)
        else:
            ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    return fig, axes


# ---------------------------------------------------------------- lesson 07 (efficient attention)
__all__ += ["attention_scaling_plot", "feature_mse_plot"]

_METHOD_LABELS = {
    "exact_ours": "exact (ours, builds L x L)",
    "exact_torch": "exact (F.scaled_dot_product_attention)",
    "exact": "exact softmax attention",
    "linear": "linear attention (elu+1)",
    "favor": "FAVOR+ (Performer)",
}


def _guide_line(ax, xs, y0, slope: int, label: str, color) -> None:
    xs = np.asarray(sorted(xs), dtype=float)
    ax.plot(xs, y0 * (xs / xs[0]) ** slope, ls=":", lw=1, color=color, label=label)


def attention_scaling_plot(rows, *, title: str = "Cost of attention against sequence length"):
    """Two log-log panels, time and peak memory against L, one line per method.

    ``rows``: dicts with keys ``method``, ``L``, ``time_ms`` and optionally ``peak_mib``
    (rows without memory are left out of the right panel). Dotted guides of slope 1 and 2
    (O(L) and O(L^2)) start at the first point of the first method. Returns (fig, axes).
    """
    rows = list(rows)
    if not rows:
        raise ValueError("attention_scaling_plot needs at least one row {'method', 'L', 'time_ms'}")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    colors = dict(zip(methods, sns.color_palette("colorblind", len(methods))))
    markers = dict(zip(methods, "osD^vx"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = (("time_ms", "time per call (ms)", "Time"), ("peak_mib", "peak extra memory (MiB)", "Peak memory"))
    for ax, (key, ylabel, name) in zip(axes, panels):
        plotted = []
        for method in methods:
            pts = sorted((r["L"], r[key]) for r in rows if r["method"] == method and r.get(key) is not None
                         and r[key] > 0)
            if pts:
                ax.plot(*zip(*pts), marker=markers[method], color=colors[method],
                        label=_METHOD_LABELS.get(method, method))
                plotted.append(pts)
        if plotted:
            gray = (0.45, 0.45, 0.45)
            first = plotted[0]
            xs = [p[0] for p in first]
            _guide_line(ax, xs, first[0][1], 1, "slope 1: O(L)", gray)
            _guide_line(ax, xs, first[0][1], 2, "slope 2: O(L^2)", (0.75, 0.75, 0.75))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L (tokens)")
        ax.set_ylabel(ylabel)
        ax.set_title(name)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig, axes


def feature_mse_plot(rows, *, title: str = "MSE of random-feature estimates of exp(x . y)"):
    """Log-log MSE against the number of random features m: measured points, closed forms as lines.

    ``rows``: dicts with ``kind``, ``m``, ``mse``, optionally ``mse_se`` (error bars),
    ``closed_form`` (None where there is none) and ``pair`` (one panel per pair of vectors).
    Returns (fig, axes) with one Axes per pair.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("feature_mse_plot needs at least one row {'kind', 'm', 'mse'}")
    pairs = list(dict.fromkeys(r.get("pair", "") for r in rows))
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    colors = dict(zip(kinds, sns.color_palette("colorblind", len(kinds))))
    fig, axes = plt.subplots(1, len(pairs), figsize=(6.0 * len(pairs), 4.2), squeeze=False, sharey=True)
    axes = axes[0]
    for ax, pair in zip(axes, pairs):
        for i, kind in enumerate(kinds):
            pts = sorted((r["m"], r["mse"], r.get("mse_se") or 0.0, r.get("closed_form")) for r in rows
                         if r["kind"] == kind and r.get("pair", "") == pair)
            if not pts:
                continue
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], fmt="osD^"[i % 4],
                        color=colors[kind], capsize=3, label=f"{kind}: measured")
            closed = [(p[0], p[3]) for p in pts if p[3] is not None]
            if closed:
                ax.plot(*zip(*closed), ls="--", color=colors[kind], label=f"{kind}: closed form")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("number of random projections m (trigonometric: 2m features)")
        ax.set_ylabel("mean squared error (squared kernel units)")
        ax.set_title(pair or "MSE against m")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig, axes


# ---------------------------------------------------------------- lessons 04 (positional) and 05 (blocks)
__all__ += ["encoding_heatmap", "basis_plot", "learning_curve"]


def encoding_heatmap(pe, *, ax=None, title: str = "Sinusoidal positional encoding"):
    """Image of a (positions, features) encoding matrix, values in [-1, 1] on a diverging map.

    Rows are positions (top = position 0), columns feature indices. Returns the Axes.
    """
    from course_lib.arrays import to_numpy

    m = to_numpy(pe)
    if m.ndim != 2:
        raise ValueError(f"an encoding matrix must be 2-D (positions, features), got shape {m.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    img = ax.imshow(m, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    plt.colorbar(img, ax=ax, label="encoding value")
    ax.set_xlabel("feature index (even: sin, odd: cos)")
    ax.set_ylabel("position (token index)")
    ax.set_title(title)
    return ax


def basis_plot(distances, features, labels: Sequence[str] | None = None, *, ax=None,
               title: str = "Relative-position basis functions"):
    """Lines f_i(r) against the distance r, one per basis function (features (..., n) along r).

    ``distances`` (N,), ``features`` (N, n). Returns the Axes.
    """
    from course_lib.arrays import to_numpy

    r, f = to_numpy(distances), to_numpy(features)
    if r.ndim != 1 or f.ndim != 2 or f.shape[0] != r.shape[0]:
        raise ValueError(f"need distances (N,) and features (N, n); got {r.shape} and {f.shape}")
    labels = [f"f_{i + 1}" for i in range(f.shape[1])] if labels is None else list(labels)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    colors = sns.color_palette("colorblind", f.shape[1])
    for i in range(f.shape[1]):
        ax.plot(r, f[:, i], color=colors[i], label=labels[i])
    ax.set_xlabel("relative position r = j - i (tokens or bins)")
    ax.set_ylabel("basis value f(r)")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2 if f.shape[1] > 4 else 1)
    ax.grid(alpha=0.3)
    return ax


def learning_curve(history, *, baselines: dict | None = None, title: str = "Learning curve",
                   eval_label: str = "test"):
    """Loss and accuracy per epoch from a ``course_lib.training.History``.

    ``baselines`` maps a name to an accuracy drawn as a dashed horizontal line (e.g.
    the majority class or a bag-of-words model). ``eval_label`` names the data the
    history's eval curves come from (e.g. "validation"). Returns (fig, axes).
    """
    if not history.train_loss:
        raise ValueError("the history is empty: train for at least one epoch")
    epochs = history.epochs
    colors = sns.color_palette("colorblind", 2 + len(baselines or {}))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    axes[0].plot(epochs, history.train_loss, marker="o", color=colors[0], label="train")
    if history.eval_loss:
        axes[0].plot(epochs, history.eval_loss, marker="s", color=colors[1], label=eval_label)
    axes[0].set_ylabel("cross-entropy loss (nats)")
    axes[1].plot(epochs, history.train_acc, marker="o", color=colors[0], label="train")
    if history.eval_acc:
        axes[1].plot(epochs, history.eval_acc, marker="s", color=colors[1], label=eval_label)
    for k, (name, acc) in enumerate((baselines or {}).items()):
        axes[1].axhline(acc, ls="--", color=colors[2 + k], label=f"{name} ({acc:.2f})")
    axes[1].set_ylabel("accuracy (fraction correct)")
    axes[1].set_ylim(0, 1.02)
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig, axes


# ---------------------------------------------------------------- lesson 08 (clinical text)
__all__ += ["similarity_heatmap"]


def similarity_heatmap(similarity, labels: Sequence[str], *, ax=None,
                       title: str = "Cosine similarity", annot: bool | None = None):
    """Heatmap of a square (N, N) cosine-similarity matrix between N texts.

    Not an attention map: rows do not sum to 1 and values may be negative. The colour scale
    is fixed to the range of a cosine, [-1, 1], with a diverging colour-blind-safe map
    (``RdBu_r``) centred on 0, so the sign of a similarity reads off its colour and two
    figures compare. ``annot`` writes the values into the cells (default: N <= 12).
    Returns the matplotlib Axes.

    >>> ax = similarity_heatmap(np.array([[1.0, -0.05], [-0.05, 1.0]]), ["a", "b"])
    >>> ax.get_xlabel()
    'text'
    """
    from course_lib.arrays import to_numpy

    s = to_numpy(similarity)
    labels = list(labels)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"a similarity matrix must be square (N, N), got shape {s.shape}")
    if s.shape[0] != len(labels):
        raise ValueError(f"similarity shape {s.shape} does not match {len(labels)} labels")
    if not np.all(np.isfinite(s)) or np.abs(s).max() > 1.0 + 1e-6:
        raise ValueError("cosine similarities must be finite and lie in [-1, 1]; "
                         f"got values from {np.nanmin(s):.3g} to {np.nanmax(s):.3g} (normalise the vectors first)")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.5 + 0.9 * len(labels), 1.0 + 0.7 * len(labels)))
    if annot is None:
        annot = len(labels) <= 12
    sns.heatmap(s, ax=ax, cmap="RdBu_r", vmin=-1.0, vmax=1.0, center=0.0, square=True, annot=annot, fmt=".2f",
                annot_kws={"fontsize": 8}, xticklabels=labels, yticklabels=labels,
                cbar_kws={"label": "cosine similarity (-1 to 1)"})
    ax.set_xlabel("text")
    ax.set_ylabel("text")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    ax.tick_params(axis="y", labelrotation=0)
    return ax
