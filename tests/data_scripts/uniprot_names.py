"""Build course_lib/data/uniprot_sprot_names.tsv.gz, the protein extract of lesson 10.

NOT run at test time (it needs Debian packages). To rebuild:

    apt-get install -y mmseqs2-examples          # also installs mmseqs2 (the clustering tool)
    .venv/bin/python tests/data_scripts/uniprot_names.py

Source: /usr/share/doc/mmseqs2/example-data/DB.fasta.gz of the Debian package
mmseqs2-examples (20,000 UniProtKB entries, Swiss-Prot and TrEMBL, with their FASTA
headers). UniProt is distributed under CC BY 4.0.

What it keeps: the reviewed (Swiss-Prot, ``>sp|``) entries whose recommended name is
not a fragment ("(Fragment)" in the header) and not a placeholder ("Uncharacterized
protein ...", "Putative uncharacterized protein ..."), with at least 30 residues.

Split by sequence identity (not at random): ``mmseqs easy-cluster --min-seq-id 0.5 -c 0.8``
groups proteins sharing >= 50 % identity over >= 80 % of their length; whole clusters go
to train or test (about 20 % of the entries to test, clusters drawn with numpy seed 0).
Then ``mmseqs easy-search`` of every test protein against every training protein, with
the same thresholds, removes each test protein that still has such a hit (greedy
clustering does not guarantee it). So no test protein has a training protein with
>= 50 % identity over >= 80 % coverage, as far as mmseqs2's search finds.

Output columns (tab-separated, gzip with mtime 0, sorted by accession within each split):
accession, entry_name, name, organism, split (train/test), cluster (representative's
accession), sequence.
"""
from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

SOURCE = "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "course_lib", "data", "uniprot_sprot_names.tsv.gz")
HEADER = re.compile(r"^>sp\|(?P<acc>[^|]+)\|(?P<entry>\S+) (?P<name>.*?) OS=(?P<os>.*?)(?: OX=\d+)?(?: GN=| PE=)")
MIN_ID, COVERAGE, TEST_FRACTION, SEED = 0.5, 0.8, 0.2, 0


def read_fasta(path):
    header, seq = None, []
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(">"):
                if header is not None:
                    yield header, "".join(seq)
                header, seq = line, []
            else:
                seq.append(line.strip())
    if header is not None:
        yield header, "".join(seq)


def keep(header: str, seq: str):
    m = HEADER.match(header)
    if m is None:
        return None
    name = m["name"].strip()
    if "(Fragment)" in header or re.match(r"(Putative )?[Uu]ncharacterized", name) or len(seq) < 30:
        return None
    return {"accession": m["acc"], "entry_name": m["entry"], "name": name, "organism": m["os"].strip(),
            "sequence": seq.upper()}


def write_fasta(path, entries):
    with open(path, "w") as f:
        for e in entries:
            f.write(f">{e['accession']}\n{e['sequence']}\n")


def mmseqs(*args, cwd):
    subprocess.run(["mmseqs", *args, "-v", "1", "--threads", "2"], check=True, cwd=cwd)


def main() -> int:
    entries = [e for h, s in read_fasta(SOURCE) if (e := keep(h, s))]
    by_acc = {e["accession"]: e for e in entries}
    print(f"{len(entries)} reviewed, named, complete entries")
    with tempfile.TemporaryDirectory() as tmp:
        write_fasta(os.path.join(tmp, "all.fasta"), entries)
        mmseqs("easy-cluster", "all.fasta", "clu", "work", "--min-seq-id", str(MIN_ID), "-c", str(COVERAGE),
               "--cov-mode", "0", cwd=tmp)
        cluster_of = {}
        with open(os.path.join(tmp, "clu_cluster.tsv")) as f:
            for line in f:
                rep, member = line.split()
                cluster_of[member] = rep
        reps = sorted(set(cluster_of.values()))
        rng = np.random.default_rng(SEED)
        test_reps, n_test = set(), 0
        for i in rng.permutation(len(reps)):
            if n_test >= TEST_FRACTION * len(entries):
                break
            test_reps.add(reps[i])
            n_test += sum(1 for m, r in cluster_of.items() if r == reps[i])
        for e in entries:
            e["cluster"] = cluster_of[e["accession"]]
            e["split"] = "test" if e["cluster"] in test_reps else "train"
        train = [e for e in entries if e["split"] == "train"]
        test = [e for e in entries if e["split"] == "test"]
        write_fasta(os.path.join(tmp, "train.fasta"), train)
        write_fasta(os.path.join(tmp, "test.fasta"), test)
        mmseqs("easy-search", "test.fasta", "train.fasta", "hits.m8", "work2", "--min-seq-id", str(MIN_ID),
               "-c", str(COVERAGE), "--cov-mode", "0", cwd=tmp)
        with open(os.path.join(tmp, "hits.m8")) as f:
            leaking = {line.split()[0] for line in f}
    print(f"{len(reps)} clusters; {len(train)} train, {len(test)} test before the leak search; "
          f"{len(leaking)} test proteins removed (a training hit at >= {MIN_ID:.0%} identity)")
    test = [e for e in test if e["accession"] not in leaking]
    train_seqs = {e["sequence"] for e in train}
    assert not any(e["sequence"] in train_seqs for e in test)
    rows = sorted(train, key=lambda e: e["accession"]) + sorted(test, key=lambda e: e["accession"])
    cols = ["accession", "entry_name", "name", "organism", "split", "cluster", "sequence"]
    text = "\t".join(cols) + "\n" + "".join("\t".join(e[c] for c in cols) + "\n" for e in rows)
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(text.encode())
    print(f"wrote {OUT}: {len(train)} train + {len(test)} test = {len(rows)} entries, "
          f"{os.path.getsize(OUT) / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
