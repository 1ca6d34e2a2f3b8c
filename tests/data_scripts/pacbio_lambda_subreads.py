"""Build ``course_lib/data/pacbio_lambda_subreads.json.gz`` (lesson 11) from Debian's pbcore test data.

Run once, by hand, with the SYSTEM Python that has Debian's pbcore (never at test time):

    apt-get install python3-pbcore          # 2.1.2+dfsg-5 was used
    /usr/bin/python3 tests/data_scripts/pacbio_lambda_subreads.py

Source files (PacBio RS II, P6-C4 chemistry, lambda phage, movie m140905_042212_sidney_..._s1_X0),
in /usr/lib/python3/dist-packages/pbcore/data/:

    *.subreads.bam           117 subreads of 48 ZMWs (molecules), as sequenced
    *.aligned_subreads.bam   112 of them mapped to lambda_NEB3011 (strand, reference span)
    lambdaNEB.fa             the lambda_NEB3011 reference genome, 48,502 bp

What is written: every molecule with at least MIN_SUBREADS mapped subreads, each subread's
bases exactly as sequenced (5' to 3' of the read), its ZMW coordinates, its mapped strand and
reference span (from the aligned BAM, which pbcore ships; nothing is re-aligned here), and the
reference window [min start, max end) of the molecule's mapped subreads on the forward strand.
Subreads that are not in the aligned BAM (5 of 117) are left out. The file is gzip-compressed
JSON with mtime 0, so the same input gives the same bytes.

Licence of the source data: PacBio-BSD-3-Clause (Debian's copyright file for pbcore,
``Files: *``, Copyright 2011-2019 Pacific Biosciences of California, Inc.).
"""
from __future__ import annotations

import gzip
import io
import json
import pathlib
from collections import defaultdict

from pbcore.io import BamReader, FastaReader

DATA = pathlib.Path("/usr/lib/python3/dist-packages/pbcore/data")
MOVIE = "m140905_042212_sidney_c100564852550000001823085912221377_s1_X0"
OUT = pathlib.Path(__file__).resolve().parents[2] / "course_lib" / "data" / "pacbio_lambda_subreads.json.gz"
MIN_SUBREADS = 3


def main() -> None:
    reference = {rec.id: rec.sequence.upper() for rec in FastaReader(str(DATA / "lambdaNEB.fa"))}
    (ref_name, genome), = reference.items()
    mapping = {}
    for rec in BamReader(str(DATA / f"{MOVIE}.aligned_subreads.bam")):
        assert rec.referenceName == ref_name, rec.referenceName
        mapping[(rec.HoleNumber, rec.qStart, rec.qEnd)] = ("-" if rec.isReverseStrand else "+", rec.tStart, rec.tEnd)
    by_zmw = defaultdict(list)
    n_total = 0
    for rec in BamReader(str(DATA / f"{MOVIE}.subreads.bam")):
        n_total += 1
        key = (rec.HoleNumber, rec.qStart, rec.qEnd)
        if key not in mapping:
            continue
        strand, t0, t1 = mapping[key]
        by_zmw[rec.HoleNumber].append(dict(name=rec.readName, qstart=rec.qStart, qend=rec.qEnd, strand=strand,
                                           ref_start=t0, ref_end=t1, seq=rec.read(aligned=False)))
    molecules = []
    for zmw in sorted(by_zmw):
        subs = sorted(by_zmw[zmw], key=lambda s: s["qstart"])
        if len(subs) < MIN_SUBREADS:
            continue
        start, end = min(s["ref_start"] for s in subs), max(s["ref_end"] for s in subs)
        molecules.append(dict(zmw=zmw, ref_start=start, ref_end=end, reference=genome[start:end], subreads=subs))
    doc = dict(
        source=f"Debian python3-pbcore 2.1.2+dfsg-5, pbcore/data/{MOVIE}.subreads.bam, "
               f"{MOVIE}.aligned_subreads.bam and lambdaNEB.fa",
        licence="PacBio-BSD-3-Clause (Copyright 2011-2019 Pacific Biosciences of California, Inc.)",
        reference_name=ref_name, reference_length=len(genome), min_subreads=MIN_SUBREADS,
        coordinates="0-based, half-open; ref_start/ref_end on the forward strand of the reference",
        molecules=molecules)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(json.dumps(doc, indent=0, sort_keys=True).encode())
    OUT.write_bytes(buf.getvalue())
    n_sub = sum(len(m["subreads"]) for m in molecules)
    print(f"{len(molecules)} molecules, {n_sub} subreads (of {n_total} in the BAM) -> {OUT} "
          f"({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
