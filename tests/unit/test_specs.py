"""Spec data: every figure has a source with a date; loaders validate; user files work."""

import json

import pytest

from scalemodel import specs
from scalemodel.errors import BadInput

REQUIRED_GPUS = ["a100-sxm-80gb", "h100-sxm", "h100-pcie", "h800", "h200", "b200", "mi300x"]
REQUIRED_LINKS = ["nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "hdr-200", "ndr-400",
                  "xdr-800", "roce-200", "roce-400", "roce-800"]
REQUIRED_MODELS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b",
                   "llama-3-405b", "mixtral-8x7b", "qwen2.5-72b", "deepseek-v3", "gpt3-175b"]


def test_required_ids_present():
    assert set(REQUIRED_GPUS) <= set(specs.gpu_ids())
    assert set(REQUIRED_LINKS) <= set(specs.link_ids())
    assert set(REQUIRED_MODELS) <= set(specs.model_ids())


def _cited(x, path, out):
    """(path, key) of every source reference in a TOML tree: values of ``source`` and
    ``*_source`` keys, and of the entries of ``sources`` tables."""
    if isinstance(x, dict):
        for k, v in x.items():
            p = f"{path}.{k}"
            if isinstance(v, str) and (k == "source" or k.endswith("_source")):
                out.append((p, v))
            elif k == "sources" and isinstance(v, dict):
                out += [(f"{p}.{kk}", vv) for kk, vv in v.items() if isinstance(vv, str)]
                _cited({kk: vv for kk, vv in v.items() if not isinstance(vv, str)}, p, out)
            else:
                _cited(v, p, out)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _cited(v, f"{path}[{i}]", out)
    return out


def test_every_cited_source_exists_with_a_date():
    from scalemodel.specs.sources import data_path, load_toml

    known = specs.all_sources()
    files = sorted(p.relative_to(data_path("")).as_posix() for p in data_path("").rglob("*.toml")
                   if not p.name.startswith("sources"))
    cited = {f: _cited(load_toml(f), f, []) for f in files}
    # every data file carries figures with sources (a new file without any is a finding)
    assert all(cited.values()), [f for f, c in cited.items() if not c]
    assert {"gpus.toml", "links.toml", "models.toml", "numerics.toml"} <= set(cited)
    missing = sorted(f"{p} = {k!r}" for c in cited.values() for p, k in c if k not in known)
    assert not missing, missing
    undated = sorted(k for k, s in known.items() if not s.date)
    assert not undated, undated


def test_source_walker_finds_nested_references():
    tree = {"a": {"source": "x", "b_source": "y", "sources": {"*": "z", "f": "w"}},
            "l": [{"source": "v"}], "note": "source"}
    assert sorted(k for _, k in _cited(tree, "t", [])) == ["v", "w", "x", "y", "z"]


def test_gpu_figures_in_base_units():
    g = specs.get_gpu("h100-sxm")
    assert g.peak_flop_per_s("bf16") == 989.4e12
    assert g.hbm_bytes_per_s == 3.35e12
    assert 80e9 < g.hbm_bytes < 90e9
    assert g.scale_up_bytes_per_s == 450e9  # NVLink4: 900 GB/s both directions
    assert "H100" in g.source_of("flop_per_s.bf16")


def test_unknown_ids_suggest_close_matches():
    with pytest.raises(BadInput, match="h100-sxm"):
        specs.get_gpu("h100-sx")
    with pytest.raises(BadInput, match="llama-3-70b"):
        specs.get_model("llama3-70b")


def test_user_gpu_toml(tmp_path):
    p = tmp_path / "mygpu.toml"
    p.write_text('[my-gpu]\nname = "Lab GPU"\nhbm_bytes = 48e9\nhbm_bytes_per_s = 1e12\n'
                 '[my-gpu.flop_per_s]\nbf16 = 200e12\n')
    g = specs.get_gpu(str(p))
    assert g.id == "my-gpu" and g.peak_flop_per_s("bf16") == 200e12
    p.write_text('[my-gpu]\nname = "Lab GPU"\nhbm_bytes = -1\nhbm_bytes_per_s = 1e12\n'
                 '[my-gpu.flop_per_s]\nbf16 = 200e12\n')
    with pytest.raises(BadInput, match="hbm_bytes"):
        specs.get_gpu(str(p))
    # the planner's sustained share and fp8 factor: (0, 1], else one clear error
    base = ('[my-gpu]\nname = "Lab GPU"\nhbm_bytes = 48e9\nhbm_bytes_per_s = 1e12\n'
            'sm_count = 100\n{extra}\n[my-gpu.flop_per_s]\nbf16 = 200e12\nfp8 = 400e12\n')
    p.write_text(base.format(extra="sustained_gemm_ratio = 0.9\nfp8_gemm_ratio = 0.8\n"
                                   "fp4_gemm_ratio = 0.7"))
    g = specs.get_gpu(str(p))
    assert (g.sustained_fraction, g.gemm_dtype_factor("fp8"), g.gemm_dtype_factor("fp4")) == (
        0.9, 0.8, 0.7)
    for bad in ("sustained_gemm_ratio = 1.5", "fp8_gemm_ratio = 0", "fp4_gemm_ratio = 2",
                "gemm_burst_efficiency = 1.2"):
        p.write_text(base.format(extra=bad))
        with pytest.raises(BadInput, match=bad.split(" ")[0]):
            specs.get_gpu(str(p))


def test_hf_config_path_equals_bundled(tmp_path):
    from scalemodel.specs.sources import data_path

    cfg = json.loads(data_path("models/llama-3-70b.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    a, b = specs.get_model(str(p)), specs.get_model("llama-3-70b")
    assert (a.n_layers, a.n_kv_heads, a.head_dim, a.ffn) == (b.n_layers, b.n_kv_heads, b.head_dim, b.ffn)


@pytest.mark.parametrize("patch, field", [
    ({"num_hidden_layers": None}, "num_hidden_layers"),
    ({"hidden_size": -8192}, "hidden"),
    ({"num_attention_heads": 63}, "does not divide hidden_size"),
    ({"num_key_value_heads": 7}, "does not divide num_attention_heads"),
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, "no causal language model"),
    ({"model_type": "t5", "is_encoder_decoder": True}, "encoder-decoder"),
    ({"model_type": "my_moe", "num_local_experts": 8}, "MoE or MLA"),
    ({"model_type": "my_decoder", "intermediate_size": None}, "generic reader needs"),
])
def test_bad_configs(tmp_path, patch, field):
    from scalemodel.specs.sources import data_path

    cfg = json.loads(data_path("models/llama-3-70b.json").read_text())
    for k, v in patch.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(BadInput, match=field):
        specs.get_model(str(p))


def test_no_source_key_is_defined_twice():
    import tomllib

    from scalemodel.specs.sources import data_path

    seen: dict[str, str] = {}
    files = sorted(data_path("").glob("sources*.toml"))
    tables = [(p.name, tomllib.loads(p.read_text())) for p in files]
    tables.append(("numerics.toml", tomllib.loads(data_path("numerics.toml").read_text())["sources"]))
    for name, t in tables:
        for key in t:
            assert key not in seen, f"{key} in both {seen[key]} and {name}"
            seen[key] = name


def test_bundled_ids_win_over_stray_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llama-3-70b").write_text("{}")  # e.g. an output file named after a model
    (tmp_path / "h100-sxm").write_text("not toml")
    assert specs.get_model("llama-3-70b").n_layers == 80
    assert specs.get_gpu("h100-sxm").peak_flop_per_s("bf16") == 989.4e12
