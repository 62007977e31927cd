"""The cuDNN library each NeMo training container ships, as profile data (issue 16, session 18).

Source ``megatron-bridge-software-versions-v0-6-0``: NVIDIA-NeMo/Megatron-Bridge tag v0.6.0
(commit 51885cf132b2814188b6855c25a8588254274c2a), docs/releases/software-versions.md, one
"Software Component | Version" table per "NeMo Framework YY.MM" heading; its cuDNN rows:

* line 18, NeMo Framework 26.06: ``| cuDNN | 9.21.1.3-1 |``
* line 40, NeMo Framework 26.04: ``| cuDNN | 9.20.0.48-1 |``
* line 64, NeMo Framework 26.02: ``| cuDNN | 9.18.0.50 |``
* line 88, NeMo Framework 25.11: ``| cuDNN | 9.13.1.26 |``
* line 113, NeMo Framework 25.09: ``| cuDNN | 9.11.0.98 |``

The "-1" after two of them is the package revision, not part of the library's version, and is
left out. The file has tables for those five releases only: no 26.04.01 (the patch container the
nemo-26.04 profile names; it takes the 26.04 table's value, said in the profile's note), no 26.08,
nothing before 25.09 (nemo-24.03), and no Bridge main commit (mbridge-2026-05-18-*). Those, and
every non-NeMo training profile, state no cuDNN: the loader's "unknown". The field is a release
field: a profile extending another does not take it (nemo-26.08 extends nemo-26.06).

No step, memory or layout term reads the field: it is recorded so the attention kernel's timing
by release can key on it later.
"""

from __future__ import annotations

import json

import pytest

from scalemodel.cli import main
from scalemodel.errors import BadInput
from scalemodel.specs.frameworks import framework_ids, get_framework, load_frameworks_file

SRC = "megatron-bridge-software-versions-v0-6-0"
# profile -> (cuDNN row of software-versions.md at v0.6.0, its line), read from the file
STATED = {"nemo-26.06": ("9.21.1.3", 18), "nemo-26.04": ("9.20.0.48", 40),
          "nemo-26.02": ("9.18.0.50", 64), "nemo-25.11": ("9.13.1.26", 88),
          "nemo-25.09": ("9.11.0.98", 113)}


@pytest.mark.parametrize("pid", sorted(STATED))
def test_nemo_release_cudnn_from_the_component_table(pid):
    version, line = STATED[pid]
    fw = get_framework(pid)
    assert fw.cudnn_version == version
    assert fw.sources["cudnn_version"] == SRC
    assert f"line {line}" in fw.notes["cudnn_version"]


def test_the_source_entry_names_the_file_tag_and_commit():
    from scalemodel.specs.sources import all_sources

    s = all_sources()[SRC]
    assert "v0.6.0" in s.url and s.url.endswith("docs/releases/software-versions.md")
    assert "51885cf132b2814188b6855c25a8588254274c2a" in s.title


@pytest.mark.parametrize("pid", ["nemo-26.08", "nemo-24.03", "mbridge-2026-05-18-eager",
                                 "mbridge-2026-05-18-graphed", "megatron-core", "torchtitan",
                                 "llm-foundry", "deepspeed", "deepseek-hai-llm"])
def test_profiles_the_file_does_not_list_are_unknown(pid):
    # nemo-26.08 extends nemo-26.06, nemo-24.03 nemo-25.09, mbridge-* nemo-26.04: none takes the
    # parent's release field
    fw = get_framework(pid)
    assert fw.cudnn_version == "unknown"
    assert "cudnn_version" not in fw.values and "cudnn_version" not in fw.sources


def test_every_training_profile_has_a_cudnn_value_and_serving_engines_none():
    for pid in framework_ids():
        fw = get_framework(pid)
        if fw.kind == "training":
            assert fw.cudnn_version == "unknown" or fw.sources["cudnn_version"] == SRC, pid
        else:
            assert fw.cudnn_version is None, pid


def test_specs_frameworks_json_lists_the_field(capsys):
    assert main(["specs", "frameworks", "--json"]) == 0
    items = {x["id"]: x for x in json.loads(capsys.readouterr().out)["items"]}
    assert items["nemo-25.11"]["cudnn_version"] == "9.13.1.26"
    assert items["nemo-26.08"]["cudnn_version"] == "unknown"
    assert "cudnn_version" not in items["vllm-v1"]
    assert main(["specs", "frameworks", "nemo-26.02"]) == 0
    out = capsys.readouterr().out
    assert "cuDNN" in out and "9.18.0.50" in out


def _profile(tmp_path, body: str) -> str:
    f = tmp_path / "fw.toml"
    f.write_text('[profiles.x]\nkind = "training"\nname = "x"\nversion = "1"\n'
                 f'source = "deepspeed-config"\n{body}')
    return str(f)


@pytest.mark.parametrize("value", ["12", '"nine"', '"9.21.1.3-1"', '"9"', '""', "9.2"])
def test_bad_cudnn_version_is_one_line_naming_profile_and_field(tmp_path, value):
    path = _profile(tmp_path, f'cudnn_version = {value}\ncudnn_version_source = "{SRC}"\n')
    with pytest.raises(BadInput) as e:
        load_frameworks_file(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert "profile x: cudnn_version must be" in msg and '"unknown"' in msg


def test_cudnn_version_needs_a_source(tmp_path):
    with pytest.raises(BadInput, match="field cudnn_version has no cudnn_version_source"):
        load_frameworks_file(_profile(tmp_path, 'cudnn_version = "9.13.1.26"\n'))


def test_a_user_profile_extending_one_with_a_version_does_not_take_it(tmp_path):
    path = _profile(tmp_path, f'cudnn_version = "9.13.1.26"\ncudnn_version_source = "{SRC}"\n'
                    'cudnn_version_note = "n"\n'
                    '[profiles.y]\nextends = "x"\nkind = "training"\nname = "y"\n'
                    'version = "2"\nsource = "deepspeed-config"\n'
                    '[profiles.z]\nextends = "x"\nkind = "training"\nname = "z"\n'
                    f'version = "3"\nsource = "deepspeed-config"\ncudnn_version = "unknown"\n'
                    f'cudnn_version_source = "{SRC}"\n')
    fws = load_frameworks_file(path)
    assert fws["x"].cudnn_version == "9.13.1.26"
    assert fws["y"].cudnn_version == "unknown" and "cudnn_version" not in fws["y"].notes
    assert fws["z"].cudnn_version == "unknown"
