"""Smoke tests of the plotting helpers added for lessons 03 and 08: titles, labels, scales, bad input."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_lib import plotting


def test_head_heatmaps_titles_name_the_heads_shown():
    w = np.full((3, 4, 4), 0.25)
    fig, axes = plotting.head_heatmaps(w, list("abcd"), ncols=2, head_labels=["head 3", "head 1", "head 12"])
    assert [ax.get_title() for ax in axes.flat][:3] == ["head 3", "head 1", "head 12"]
    assert not axes.flat[3].axison
    with pytest.raises(ValueError, match="one label per head"):
        plotting.head_heatmaps(w, list("abcd"), head_labels=["head 1"])
    plt.close("all")


def test_similarity_heatmap_has_its_own_labels_and_a_symmetric_scale():
    s = np.array([[1.0, -0.05, 0.4], [-0.05, 1.0, 0.2], [0.4, 0.2, 1.0]])
    ax = plotting.similarity_heatmap(s, ["x", "y", "z"], title="t")
    mesh = ax.collections[0]
    assert mesh.get_clim() == (-1.0, 1.0), "a cosine's scale is [-1, 1], centred on 0"
    cbar_label = mesh.colorbar.ax.get_ylabel()
    assert "cosine" in cbar_label and "attention" not in cbar_label
    assert "attending" not in ax.get_ylabel() and "attended" not in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    plt.close("all")


@pytest.mark.parametrize("bad,match", [(np.ones((2, 3)), "square"), (np.ones((3, 3)), "labels"),
                                       (np.full((2, 2), 2.0), r"\[-1, 1\]")])
def test_similarity_heatmap_rejects_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        plotting.similarity_heatmap(bad, ["a", "b"])
    plt.close("all")


def test_attention_heatmap_scale_ends_at_one_or_at_the_largest_weight():
    w = np.full((4, 4), 0.25)
    w[0] = [0.4, 0.2, 0.2, 0.2]
    assert plotting.attention_heatmap(w, list("abcd")).collections[0].get_clim() == (0.0, 1.0)
    assert plotting.attention_heatmap(w, list("abcd"), vmax=None).collections[0].get_clim() == (0.0, 0.4)
    plt.close("all")


def test_learning_curve_names_its_eval_data():
    from course_lib.training import History

    h = History(train_loss=[1.0, 0.5], train_acc=[0.5, 0.7], eval_loss=[1.1, 0.9], eval_acc=[0.4, 0.6])
    _, axes = plotting.learning_curve(h, eval_label="validation")
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["train", "validation"]
    _, axes = plotting.learning_curve(h)
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["train", "test"]
    plt.close("all")
