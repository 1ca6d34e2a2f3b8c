"""Demo class answers for lesson 11 (read consensus)."""

# s03: the soft-min written as a soft MAX (named: "max instead of min"); the other exercises are right.
MISCONCEPTION = {
    "soft_alignment_loss_impl": '''def soft_alignment_loss(logits, target, gamma, del_cost=1.0):
    if not gamma > 0:
        raise ValueError("gamma must be > 0")
    logp = torch.log_softmax(logits, dim=-1)
    out = []
    for b in range(logits.shape[0]):
        y = [int(t) for t in target[b] if int(t) != 0]
        N = logits.shape[1]
        prev = [torch.zeros((), dtype=logits.dtype)]
        for j in range(N):
            prev.append(prev[-1] - logp[b, j, 0])
        for i in range(1, len(y) + 1):
            cur = [prev[0] + del_cost]
            for j in range(1, N + 1):
                u = torch.stack([prev[j - 1] - logp[b, j - 1, y[i - 1]], cur[j - 1] - logp[b, j - 1, 0],
                                 prev[j] + del_cost])
                cur.append(gamma * torch.logsumexp(u / gamma, 0))
            prev = cur
        out.append(prev[N])
    return torch.stack(out)
''',
}

# s04: the pileup cell crashes (index past the end of the read); the rest is right.
CRASH = {
    "pileup_impl": '''def pileup(reads, alignments, length):
    counts = np.zeros((length, 5), dtype=np.int64)
    for read, ops in zip(reads, alignments):
        for j in range(length):
            counts[j, "-ACGT".index(read[j + 100])] += 1
    return counts
''',
}

# points: edit_distance 1 + 2, pileup 1 + 2, positionwise_cross_entropy 1 + 2, soft_alignment_loss 2 + 3
EXPECTED = {
    "s01_correct": 14.0,
    "s02_blank": 0.0,
    "s03_misconception": 9.0,
    "s04_crash": 11.0,
}
