"""Every planner constant with the kind of evidence it rests on (issue 16, item 2): the table in
docs/planner.md is the data's, no constant is unclassified, and none rests on end-to-end runs
(which is what `scalemodel validate --cv` states)."""

from pathlib import Path

from scalemodel.specs.evidence import (
    EVIDENCE_KINDS,
    end_to_end_constants,
    planner_constants,
    with_table,
)
from scalemodel.specs.sources import all_sources, load_toml

DOC = Path(__file__).resolve().parents[2] / "docs" / "planner.md"


def test_docs_table_is_the_data():
    text = DOC.read_text()
    assert with_table(text) == text, (
        "docs/planner.md's constants table differs from the specs data; regenerate it: "
        "PYTHONPATH=src python -m scalemodel.specs.evidence --write docs/planner.md")


def test_every_constant_has_a_kind_of_evidence():
    cs = planner_constants()
    assert len(cs) > 100  # planner.toml, kernels.toml, collectives.toml, gpus, links, profiles
    bad = [(c.name, c.source) for c in cs if c.evidence == "unclassified"]
    assert not bad, f"add these sources to specs/data/evidence.toml: {bad}"
    assert {c.evidence for c in cs} <= set(EVIDENCE_KINDS) | {"no source recorded"}


def test_no_constant_rests_on_end_to_end_runs():
    # the house rule (DESIGN: end-to-end measurements validate, they do not fit); a constant that
    # broke it would need a re-derivation recipe for validate --cv before it could be added
    assert end_to_end_constants() == []


def test_evidence_file_names_known_sources_and_kinds():
    listed = load_toml("evidence.toml")["kinds"]
    known = all_sources()
    assert set(listed) <= set(known)
    assert set(listed.values()) <= set(EVIDENCE_KINDS)
