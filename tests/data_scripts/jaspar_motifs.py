"""Build course_lib/data/jaspar_motifs.json: the three JASPAR 2024 motifs lesson 12 implants.

Run once by hand (NOT at test time), with pyjaspar installed:

    pip install --no-deps pyjaspar==4.0.0 biopython==1.88
    .venv/bin/python tests/data_scripts/jaspar_motifs.py

pyjaspar ships the JASPAR releases as SQLite files inside the package; this script reads
JASPAR2024 offline and writes, for each motif, its matrix id, name, species, data type and
the 4 x width count matrix (rows A, C, G, T). JASPAR is CC BY 4.0 (Rauluseviciute et al.
2024, "JASPAR 2024: 20th anniversary of the open-access database of transcription factor
binding profiles", Nucleic Acids Research 52:D174).
"""
from __future__ import annotations

import json
import pathlib
import warnings

# SP1 (GC box, promoter element), HNF4A (liver enhancer factor), CTCF (insulator; a decoy here)
MOTIFS = ("MA0079.5", "MA1494.2", "MA0139.2")
OUT = pathlib.Path(__file__).resolve().parents[2] / "course_lib" / "data" / "jaspar_motifs.json"


def main() -> None:
    warnings.simplefilter("ignore")
    from pyjaspar import jaspardb

    db = jaspardb(release="JASPAR2024")
    motifs = []
    for matrix_id in MOTIFS:
        m = db.fetch_motif_by_id(matrix_id)
        motifs.append({
            "matrix_id": m.matrix_id, "name": m.name, "species": list(m.species),
            "data_type": m.data_type, "collection": m.collection,
            "counts": {base: [float(x) for x in m.counts[base]] for base in "ACGT"},
        })
    payload = {"source": "JASPAR2024 via PyPI pyjaspar 4.0.0 (SQLite shipped in the package)",
               "licence": "CC BY 4.0 (https://jaspar.elixir.no, Rauluseviciute et al. 2024, NAR 52:D174)",
               "motifs": motifs}
    OUT.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {OUT} ({', '.join(m['matrix_id'] + ' ' + m['name'] for m in motifs)})")


if __name__ == "__main__":
    main()
