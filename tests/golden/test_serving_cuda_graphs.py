"""CUDA-graph batch-size buckets (frameworks.toml cuda_graph_*; analytic/serving/engine.py
``capture_sizes``, iteration.py ``IterationModel.graph_rows``).

Each expected list is written here from the engine's source at the profile's version, not from
the code's output:

* vLLM 0.9.2 (wheel, vllm/config.py): SchedulerConfig.cuda_graph_sizes = [512] (line 2133);
  V1 builds [1, 2, 4] + list(range(8, 512 + 1, 8)) (4727-4731) and drops sizes above
  max_num_batched_tokens (4741-4745); bs_to_padded_graph_size maps a count to the smallest
  captured size >= it (4266-4278); v1/worker/gpu_model_runner.py 1296-1310 pads the scheduled
  token count when it is <= the largest size and runs eagerly otherwise.
* vLLM 0.6.5 (wheel, vllm/config.py 3094-3111): V0 possible sizes [1, 2, 4] + [8 i, i = 1..1024]
  cut at the first size >= max_num_seqs; worker/model_runner.py 752-760: decode-only batches,
  max_decode_seq_len <= max_seq_len_to_capture (8192, engine/arg_utils.py 134).
* SGLang 0.4.6 (wheel, model_executor/cuda_graph_runner.py 119-159): [1, 2, 4, 8] +
  range(16, 161, 8), plus range(160, 257, 8) on a device above 81,920 MiB; 484-492 pads by
  bisect_left; can_run (302-318) refuses a batch above the largest size.
* TensorRT-LLM, PyTorch backend: the v0.20 perf-overview's llm_options.yml lists 1, 2, 4, 8, 16,
  32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192 with padding on; model_engine.py's
  _filter_cuda_graph_batch_sizes keeps sizes <= min(max_batch_size, max_num_tokens) and, with
  padding, appends that limit where a larger size was asked for.
"""

import dataclasses

import numpy as np
import pytest

from conftest import run_cli, serving_iteration
from scalemodel.analytic.serving.engine import capture_sizes, get_serving_engine
from scalemodel.errors import BadInput

H100 = 81920 * 2**20  # gpus.toml h100-sxm hbm_bytes (nvidia-smi's 81,920 MiB)
H200 = 143771 * 2**20  # an H200's reported memory, above SGLang's 81,920 MiB line

V1_LIST = [1, 2, 4] + list(range(8, 513, 8))  # vLLM 0.9.2 config.py 2133, 4727-4731
V0_256 = [1, 2, 4] + [8 * i for i in range(1, 33)]  # 0.6.5 config.py 3094-3111 at 256 seqs


def test_vllm_v1_list_from_source():
    eng = get_serving_engine("vllm-v1")
    assert capture_sizes(eng, 1024, 8192, H100) == tuple(V1_LIST)
    assert len(V1_LIST) == 67
    # max_num_batched_tokens 256 drops the sizes above it (config.py 4741-4745)
    assert capture_sizes(eng, 1024, 256, H100) == tuple(x for x in V1_LIST if x <= 256)


def test_vllm_v0_list_from_source():
    eng = get_serving_engine("vllm-v0")
    assert capture_sizes(eng, 256, 2048, H100) == tuple(V0_256)
    # max_num_seqs 300: up to the first size >= 300, i.e. 304
    assert capture_sizes(eng, 300, 2048, H100)[-1] == 304
    assert get_serving_engine("vllm-0.6.0-multistep").cuda_graph["cuda_graph_sizes"]["stop"] == 8192


def test_sglang_list_from_source():
    eng = get_serving_engine("sglang")
    base = [1, 2, 4, 8] + list(range(16, 161, 8))
    assert capture_sizes(eng, 4096, 8192, H100) == tuple(base)
    assert capture_sizes(eng, 4096, 8192, H200) == tuple(sorted(set(base) | set(range(160, 257, 8))))
    # a request pool of 100: sizes above dropped, 99 and 100 added (cuda_graph_runner.py 141-151)
    assert capture_sizes(eng, 100, 8192, H100)[-3:] == (96, 99, 100)


def test_trtllm_pytorch_list_from_source():
    eng = get_serving_engine("trtllm-0.20")
    asked = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192]
    assert capture_sizes(eng, 8192, 8192, H100) == tuple(asked)
    # max_batch 600, max_num_tokens 3000: sizes <= 600, then 600 appended
    assert capture_sizes(eng, 600, 3000, H100) == (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 600)
    assert capture_sizes(get_serving_engine("trtllm-1.0-bench"), 8192, 8192, H100) == tuple(asked)


def test_no_graphs_where_the_profile_captures_none():
    # TensorRT engines at 0.17 (cuda_graphs false) and AMD's MLPerf harness (enforce_eager)
    assert capture_sizes(get_serving_engine("trtllm-0.17"), 2048, 8192, H100) == ()
    assert capture_sizes(get_serving_engine("vllm-rocm-mlperf-v51"), 1792, 40960, H100) == ()


@pytest.fixture(scope="module")
def small_model():
    return serving_iteration(max_tokens=1024)


def test_padding_by_hand(small_model):
    v1 = dataclasses.replace(small_model, graph_sizes=tuple(V1_LIST), graph_batch="tokens")
    assert v1.graph_rows(13, True) == 16  # 13 -> 16 (between 8 and 16)
    assert v1.graph_rows(257, True) == 264
    assert v1.graph_rows(512, False) == 512  # V1 pads mixed batches too
    assert v1.graph_rows(513, True) == 513  # above the largest size: eager, unpadded
    v0 = dataclasses.replace(small_model, graph_sizes=tuple(V0_256), graph_batch="decode_seqs",
                             graph_max_ctx=8192)
    assert v0.graph_rows(13, True, 2000) == 16
    assert v0.graph_rows(257, True, 2000) == 257  # above 256: eager
    assert v0.graph_rows(13, False, 2000) == 13  # a prefill step runs eagerly
    assert v0.graph_rows(13, True, 8193) == 13  # a sequence beyond max_seq_len_to_capture
    exact = dataclasses.replace(v0, graph_padding=False)
    assert exact.graph_rows(13, True, 100) == 13 and exact.graph_rows(16, True, 100) == 16


def test_padded_rows_cost_gemm_rows_not_kv(small_model):
    """A decode iteration of 13 sequences under a 16-size graph: the GEMMs, per-token kernels
    and collectives at 16 rows, the head's sampling at 13, the KV read of the 13 real ones."""
    it = dataclasses.replace(small_model, graph_sizes=tuple(V1_LIST), graph_batch="tokens")
    empty = np.zeros(0, np.int64)
    ctx = 13 * 1000.0
    t = it.time(13, 13, ctx, empty, empty)
    assert t == pytest.approx(it.dense_part(13, 13, rows=16) + it.dec_s_per_ctx_token * ctx)
    assert it.dense_part(13, 13, rows=16) > it.dense_part(13, 13)
    # an unpadded engine prices the 13 rows
    bare = dataclasses.replace(small_model, graph_sizes=())
    assert bare.time(13, 13, ctx, empty, empty) == pytest.approx(
        bare.dense_part(13, 13) + bare.dec_s_per_ctx_token * ctx)


@pytest.mark.parametrize("sizes, why", [
    ([1, 4, 2], "increasing"),
    ([0, 1, 2], ">= 1"),
    ({"small": [1, 2], "step": 0, "stop": 64}, "step"),
])
def test_bad_profile_sizes_one_line(sizes, why):
    eng = get_serving_engine("vllm-v1")
    bad = dataclasses.replace(eng, cuda_graph={**eng.cuda_graph, "cuda_graph_sizes": sizes})
    with pytest.raises(BadInput) as e:
        capture_sizes(bad, 256, 8192, H100)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_bad_profile_sizes_exit_2(capsys, monkeypatch):
    """An unsorted capture list in the profile: one line naming the field, exit 2."""
    import scalemodel.specs.frameworks as fw_mod

    real = fw_mod.get_framework

    def bad(fid=None):
        fw = real(fid)
        if fw.kind != "serving":
            return fw
        return dataclasses.replace(fw, values={**fw.values, "cuda_graph_sizes": [8, 4]})

    monkeypatch.setattr(fw_mod, "get_framework", bad)
    rc, out, err = run_cli(capsys, "plan", "serve", "--model", "llama-3-8b", "--gpu", "h100-sxm",
                           "--gpus", "1", "--layout", "tp=1", "--isl", "128", "--osl", "16",
                           "--requests", "20", "--precision", "fp8")
    assert rc == 2
    assert "cuda_graph_sizes" in err and len(err.strip().splitlines()) == 1


def test_vector_rows_match_scalar(small_model):
    """The screening estimate (search.py) pads as the simulation does."""
    it = dataclasses.replace(small_model, graph_sizes=tuple(V0_256), graph_max_ctx=8192)
    T = np.array([0, 1, 3, 13, 256, 257, 40])
    dec = np.array([True, True, True, True, True, True, False])
    want = [it.graph_rows(int(t), bool(d), 1000.0) for t, d in zip(T, dec, strict=True)]
    assert list(it.graph_rows_v(T, dec, 1000.0)) == want == [0, 1, 4, 16, 256, 257, 40]
    assert list(it.graph_rows_v(T, dec, 9000.0)) == list(T)  # beyond max_seq_len_to_capture
