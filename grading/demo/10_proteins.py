"""Demo submissions for 10_proteins and their expected autograded scores.

Points per graded test: encode_proteins 1 + 2, kmer_vectors 1 + 2, favor_padded_attention 1 + 2,
greedy_decode 1 + 2 (12 autograded points). No written answer.
"""

# s03_misconception decodes without the causal mask (tgt_mask=None): earlier prefix positions
# attend to later ones, so the generated names differ from greedy decoding with the model as it
# was trained; the checks name "no causal mask"; both greedy_decode tests fail (-3 points).
# No other graded test calls greedy_decode.
MISCONCEPTION = {
    "greedy_decode_impl": '''
def greedy_decode(model, src_ids, src_keep, max_len):
    """Greedy decoding without the causal mask (wrong)."""
    if max_len < 1:
        raise ValueError("max_len must be >= 1")
    with torch.no_grad():
        memory = model.encode(src_ids, src_keep)
        out = torch.full((src_ids.shape[0], 1), model.bos_id, dtype=torch.long, device=src_ids.device)
        done = torch.zeros(src_ids.shape[0], dtype=torch.bool, device=src_ids.device)
        for _ in range(max_len):
            h = model.decoder(model.embed_target(out), memory, None, src_keep[:, None, None, :])
            nxt = model.generator(h[:, -1]).argmax(dim=-1)
            nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done = done | (nxt == model.eos_id)
            if bool(done.all()):
                break
    return out[:, 1:]
''',
}

# s04_crash's kmer_vectors cell raises when it runs: kmer_vectors is never defined, both of its
# tests fail (NameError); no other graded test uses it. 12 - 3 = 9 points.
CRASH = {
    "kmer_vectors_impl": "raise RuntimeError('student code crashed at import')\n",
}

EXPECTED = {"s01_correct": 12.0, "s02_blank": 0.0, "s03_misconception": 9.0, "s04_crash": 9.0}
