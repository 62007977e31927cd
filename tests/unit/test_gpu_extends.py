"""A GPU entry that ``extends`` another: the other's figures, this entry's over them, each
figure cited by the entry that set it (gpus.toml's Grand Teton H100 is the bundled case)."""

from __future__ import annotations

import pytest

from scalemodel.errors import BadInput
from scalemodel.specs.gpu import _extended, get_gpu


def test_bundled_variant_takes_its_own_figures_and_the_parents_others():
    base, part = get_gpu("h100-sxm"), get_gpu("h100-sxm-hbm2e-500w")
    # what the torchtitan page states for the part (96 GB HBM2e, 2.4 TB/s, 500 W)
    assert (part.hbm_bytes_per_s, part.tdp_w) == (2.4e12, 500.0)
    assert part.hbm_bytes != base.hbm_bytes
    # the die is h100-sxm's: SMs, clocks, tensor-core peaks, NVLink
    assert part.sm_count == base.sm_count == 132
    assert part.flop_per_s == base.flop_per_s
    assert part.scale_up_bytes_per_s == base.scale_up_bytes_per_s
    assert dict(part.sm) == dict(base.sm)


def test_citations_follow_the_entry_that_set_the_figure():
    base, part = get_gpu("h100-sxm"), get_gpu("h100-sxm-hbm2e-500w")
    for inherited in ("flop_per_s.bf16", "sm_count", "interconnect.scale_up_link", "l2_bytes"):
        assert part.source_of(inherited) == base.source_of(inherited)
    for own in ("hbm_bytes", "hbm_bytes_per_s", "tdp_w", "interconnect.scale_out_link"):
        assert "torchtitan" in part.source_of(own)
        assert part.source_of(own) != base.source_of(own)


def test_unknown_parent_and_cycles_are_refused():
    tables = {"a": {"extends": "b", "name": "A"}, "b": {"extends": "a", "name": "B"}}
    with pytest.raises(BadInput, match="extends itself"):
        _extended("a", tables["a"], tables, "test")
    with pytest.raises(BadInput, match="extends unknown GPU 'nope'"):
        _extended("c", {"extends": "nope"}, tables, "test")


def test_user_file_may_extend_a_bundled_gpu(tmp_path):
    f = tmp_path / "capped.toml"
    f.write_text('[capped]\nextends = "h100-sxm"\nname = "capped H100"\nsource = "mine"\n'
                 'hbm_bytes_per_s = 2.0e12\n')
    g = get_gpu(str(f))
    assert g.hbm_bytes_per_s == 2.0e12 and g.hbm_bytes == get_gpu("h100-sxm").hbm_bytes


@pytest.mark.parametrize("line, field", [('nics_per_gpu = "x"', "nics_per_gpu"),
                                         ("scale_out_link = 4", "scale_out_link"),
                                         ("scale_up_bytes_per_s_per_direction = -1",
                                          "scale_up_bytes_per_s_per_direction")])
def test_user_file_interconnect_fields_are_checked(tmp_path, line, field):
    # an extended GPU's interconnect values are the user's: a bad one is one line naming it
    f = tmp_path / "bad.toml"
    f.write_text(f'[bad]\nextends = "h100-sxm"\nname = "bad"\n\n[bad.interconnect]\n{line}\n')
    with pytest.raises(BadInput, match=f"interconnect.{field}"):
        get_gpu(str(f))
