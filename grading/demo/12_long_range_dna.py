"""Demo class answers for lesson 12 (long-range DNA)."""

# s03: the complement without the reversal (named: "complemented but not reversed"); the other exercises are right.
MISCONCEPTION = {
    "reverse_complement_impl": '''def reverse_complement(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("not a DNA letter")
    return seq.translate(str.maketrans("ACGTNacgtn", "TGCANtgcan"))
''',
}

# s04: the receptive_field cell crashes (indexes past the end of the pools list); the rest is right.
CRASH = {
    "receptive_field_impl": '''def receptive_field(kernel_sizes, dilations=None, pools=None):
    pools = pools or []
    field, jump = 1, 1
    for i, k in enumerate(kernel_sizes):
        field += (k - 1) * jump + (pools[i + 1] - 1) * jump
        jump *= pools[i + 1]
    return field
''',
}

# points: one_hot_dna 1 + 2, reverse_complement 1 + 2, receptive_field 1 + 2, in_silico_mutagenesis 1 + 2
EXPECTED = {
    "s01_correct": 12.0,
    "s02_blank": 0.0,
    "s03_misconception": 9.0,
    "s04_crash": 9.0,
}
