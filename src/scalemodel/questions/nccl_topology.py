"""nccl-topology: rings and trees over NVLink/PCIe/NIC, GPUDirect RDMA, rails/PXN, and GPU-Util."""

from __future__ import annotations

from typing import Any

from ..analytic.collectives import _consts, collective_cost, make_fabric, make_group
from ..derive import Derivation, Headline, Report, Section, Table
from ..errors import BadInput
from ..specs import get_gpu, get_link
from ..specs.sources import cite
from ..units import fmt_bytes, fmt_rate, fmt_time
from .params import Param, gpu

PROMPT = (
    "How does NCCL use the machine's topology: how are rings and trees laid over NVLink, PCIe "
    "and NICs, what does GPUDirect RDMA save over staging through host memory, what are rails "
    "and PXN? And why is nvidia-smi's GPU utilisation the most misleading metric on a training "
    "cluster?"
)

DEFAULTS = {"gpu": "h100-sxm", "intra": "nvlink4", "inter": "ndr-400", "bytes": 2.0**28,
            "nodes": 4, "gpus_per_node": 8}

PARAMS: tuple[Param, ...] = (
    gpu(DEFAULTS["gpu"]),
    Param("intra", "str", DEFAULTS["intra"], "link inside a node (a links.toml id)"),
    Param("inter", "str", DEFAULTS["inter"], "NIC between nodes (a links.toml id)"),
    Param("bytes", "bytes", DEFAULTS["bytes"], "collective size (1GiB, 256MB)", "B", lo=1),
    Param("nodes", "int", DEFAULTS["nodes"], "nodes", "nodes", lo=1, hi=16384),
    Param("gpus_per_node", "int", DEFAULTS["gpus_per_node"], "GPUs per node (NVLink domain)", "GPUs", lo=1, hi=1024),
)


def build(opts: dict[str, Any]) -> Report:
    o = DEFAULTS | {k: v for k, v in opts.items() if v is not None and k in DEFAULTS}
    gpu = get_gpu(o["gpu"])
    # the GPU's own links, read from its spec; --intra / --inter given explicitly win
    ic = gpu.interconnect
    own_up = ic.get("scale_up_link") or ic.get("pcie_link")
    if not ic.get("pcie_link"):
        raise BadInput(f"--gpu: {gpu.id} has no interconnect.pcie_link in its spec (the GPUDirect "
                       "section prices the host link); add it to the GPU's TOML")
    own_pcie = str(ic["pcie_link"])
    if opts.get("intra") is None and own_up:
        o["intra"] = str(own_up)
    if opts.get("inter") is None and ic.get("scale_out_link"):
        o["inter"] = str(ic["scale_out_link"])
    S = float(o["bytes"])
    G = int(o["gpus_per_node"])
    nodes = int(o["nodes"])

    # 1. the same all-reduce over NVLink vs PCIe inside a node
    rows = []
    links = [str(o["intra"]), str(own_pcie)]
    links += [x for x in ("nvlink5", "nvlink4", "nvlink3", "pcie5", "pcie4") if x not in links]
    for link in links:
        fab = make_fabric(link, None, gpus_per_node=G)
        r = collective_cost("all-reduce", S, make_group(G, fab), fab)
        mark = " (this node)" if link == o["intra"] else (" (this GPU's PCIe)" if link == own_pcie
                                                           else "")
        rows.append((link + mark, r.algorithm, r.protocol, r.time_s, r.busbw_bytes_per_s))
    s1 = Section(
        "1. Rings and trees follow the fastest paths",
        text=("NCCL reads the PCIe tree, NVLink/NVSwitch and NICs (sysfs, NVML), classifies every "
              "GPU-GPU and GPU-NIC path (NVL, PIX, PXB, PHB, SYS, ...) and searches ring and tree "
              "graphs that maximise bandwidth, keeping traffic under one PCIe switch where it "
              "can. NCCL_TOPO_DUMP_FILE writes what it found. The table prices one all-reduce "
              f"of {fmt_bytes(S)} on {G} GPUs over each intra-node link: the "
              f"~{rows[0][4] / rows[1][4]:.0f}x gap between this {gpu.id} node's {o['intra']} and "
              f"its {own_pcie} is why a PCIe-only box (8x RTX 5090: 28 GB/s busbw, "
              "nccl#1639) trains so differently."),
        tables=(Table("same all-reduce, different intra-node link",
                      ("link", "algorithm", "protocol", "time (ms)", "busbw"),
                      tuple((ln, al, pr, 1e3 * t, fmt_rate(bw)) for ln, al, pr, t, bw in rows)),))

    # 2. GPUDirect RDMA vs staging through host memory
    nic, pcie = get_link(o["inter"]), get_link(str(own_pcie))
    from ..analytic.collectives import efficiency

    fab = make_fabric(o["intra"], o["inter"], gpus_per_node=G)
    n_nics = fab.nics_per_gpu * G
    d = Derivation(f"one {nic.id} NIC sending a buffer from GPU memory")
    d.given("buffer", "S", S, "B")
    d.given("NIC line rate", "Bn", nic.bytes_per_s_per_direction, "B/s",
            source=nic.source_of("bytes_per_s_per_direction"))
    d.given("NIC efficiency", "e_n", efficiency("scale-out")[0], "1", source=efficiency("scale-out")[1])
    d.given(f"{pcie.id} x16 rate, one direction ({gpu.id}'s host link)", "Bp", pcie.bytes_per_s_per_direction, "B/s",
            source=pcie.source_of("bytes_per_s_per_direction"))
    d.given("PCIe copy efficiency", "e_p", efficiency("host")[0], "1", source=efficiency("host")[1])
    d.calc("GPUDirect RDMA: the NIC reads GPU memory directly", "t_gdr", "S / (Bn * e_n)", "s")
    d.calc("staged, unpipelined: copy to host, then send", "t_st",
           "S / (Bp * e_p) + S / (Bn * e_n)", "s", bound="upper")
    d.calc("staged, pipelined in chunks (NCCL's proxy): the slower leg", "t_pipe",
           "max(S / (Bp * e_p), S / (Bn * e_n))", "s", bound="lower")
    d.calc("host memory traffic per byte sent (write, then read)", "h", "2", "1")
    d.given("NICs per node (one per GPU rail)", "n_nic", n_nics, "1")
    d.calc(f"host memory bandwidth {n_nics:g} NICs need when staging", "H",
           "n_nic * h * Bn * e_n", "B/s")
    s2 = Section(
        "2. GPUDirect RDMA vs bounce buffers",
        text=("With GDR the NIC DMA-reads GPU memory through the PCIe switch they share; without "
              "it every byte is copied to a host buffer and read back by the NIC: an extra PCIe "
              "crossing, CPU memory bandwidth, and microseconds of latency. NCCL_NET_GDR_LEVEL "
              "sets how far apart GPU and NIC may be for GDR; it needs nvidia-peermem or DMA-BUF "
              "and PCIe ACS off (nccl-tests#252). Logs say GDRDMA on the channels when it works."),
        derivation=d)

    # 3. rails and PXN: all-to-all across nodes, direct vs aggregated per rail
    g = make_group(nodes * G, fab, G)
    rows3 = []
    msgs_direct, msgs_aggr = g.ranks - G, nodes - 1
    for size in (2.0**16, 2.0**20, 2.0**24, 2.0**28):
        a = collective_cost("all-to-all", size - size % (g.ranks * 2), g, fab, algorithm="direct",
                            proto="simple")
        b = collective_cost("all-to-all", size - size % (g.ranks * 2), g, fab,
                            algorithm="hierarchical", proto="simple")
        # per network message, the overhead the model does not charge (NIC message rate, proxy
        # and connection handling) at which aggregating per rail breaks even
        fewer = msgs_direct - msgs_aggr
        even = (b.time_s - a.time_s) / fewer if fewer > 0 else float("nan")
        rows3.append((fmt_bytes(size), a.time_s, b.time_s, b.time_s / a.time_s, msgs_direct,
                      msgs_aggr, even))
    slower = all(r[3] > 1 for r in rows3)
    s3 = Section(
        "3. Rails and PXN",
        text=("Rail-optimised fabrics wire NIC i of every node to leaf i: same-index GPUs are one "
              "hop apart. PXN (NCCL 2.12) moves data over NVLink to the GPU whose NIC sits on the "
              "destination's rail, so cross-rail traffic never crosses the CPU or the spine, and "
              "the all-to-all messages bound for one node leave as one aggregated message per "
              f"rail ({msgs_aggr} network messages per rank instead of {msgs_direct}). NVIDIA "
              "reports about 2x all2all from it on rail-optimised clusters. The table prices "
              "both with this model, which charges bandwidth and per-step latency only, a "
              "non-blocking spine and no cost per network message: there aggregation "
              + ("is slower at every size (the extra NVLink hop, nothing saved)" if slower else
                 "is slower at some sizes") + ". So the 2x NVIDIA measured comes from what the "
              "model leaves out: per-message NIC and proxy overheads when every GPU posts many "
              "small messages, and cross-rail bytes that would otherwise cross the spine or the "
              "CPU link. The last column is the overhead per network message above which "
              "aggregation wins here; a fabric whose message cost exceeds it sees PXN's gain."),
        tables=(Table(f"all-to-all on {nodes} nodes x {G} GPUs ({o['intra']}, {o['inter']})",
                      ("size per rank", "direct (µs)", "aggregated per rail (µs)",
                       "aggregated / direct", "network messages direct", "aggregated",
                       "break-even cost per message (µs)"),
                      tuple((sz, 1e6 * a, 1e6 * b, ab, md, ma, 1e6 * ev)
                            for sz, a, b, ab, md, ma, ev in rows3)),))

    # 4. GPU-Util on a spinning collective
    nc = _consts()["nccl"]
    channels = int(nc["spin_channels"])
    d4 = Derivation("a rank spinning in a collective while a peer is late")
    d4.given("SMs on the GPU", "n_sm", gpu.sm_count, "1", source=gpu.source_of("sm_count"))
    d4.given("NCCL channels (one CTA each), assumed", "c", channels, "1",
             source=cite(nc["source"]), note=nc["note"])
    d4.given("fraction of the sample period with a kernel resident", "u", 1.0, "1",
             source=cite("nvml-utilization"))
    d4.calc("nvidia-smi GPU-Util", "U", "100 * u", "%")
    d4.calc("SMs with a warp resident (DCGM SM_ACTIVE, upper bound)", "sm_act",
            "100 * c / n_sm", "%", bound="upper")
    d4.calc("tensor pipe active (no math while polling flags)", "tensor", "0", "%")
    s4 = Section(
        "4. Why GPU-Util reads 100% on a hung collective",
        text=("NVML's utilisation is the share of time any kernel was running, not how much of "
              "the GPU worked. An NCCL kernel occupies a CTA per channel and polls memory flags "
              "until its peer arrives, so a rank waiting for a straggler, or a dead job, reads "
              "100% at near-idle power (nccl#968: 100% at ~70 W). Better signals: DCGM "
              "SM_ACTIVE and SM_OCCUPANCY, PIPE_TENSOR_ACTIVE, DRAM_ACTIVE, NVLink/PCIe bytes, "
              "power, NIC counters and the job's own MFU."),
        headlines=(Headline("GPU-Util", d4["U"], "%"),
                   Headline("SM_ACTIVE at most", d4["sm_act"], "%")),
        derivation=d4)
    followups = (
        ("How do you confirm GDR is in use?",
         "NCCL_DEBUG=INFO shows 'GDRDMA' on the NET channels; without it, look for PCIe ACS, "
         "the peermem module, and IOMMU settings."),
        ("Why does 2-node busbw beat the NIC line rate?",
         "NCCL's default tree on exactly 2 nodes sends about half the ring's bytes over the "
         "NICs; benchmark networks with NCCL_ALGO=RING (nccl-tests#196)."),
        ("What would you alert on instead of GPU-Util?",
         f"SM_ACTIVE and tensor activity falling while GPU-Util stays at 100% (at most "
         f"{d4['sm_act']:.0f}% SMs busy when only NCCL runs), power near idle, and NIC "
         "counters flat."),
        (f"How much does staging cost a {nic.id} NIC?",
         f"unpipelined {fmt_time(d['t_st'])} vs {fmt_time(d['t_gdr'])} with GDR for "
         f"{fmt_bytes(S)}, and {fmt_rate(d['H'])} of host memory traffic for {n_nics:g} NICs."),
    )
    return Report("nccl-topology", (s1, s2, s3, s4),
                  {"question": "nccl-topology", "options": o,
                   "intra_links": [dict(zip(("link", "algorithm", "protocol", "time_s",
                                             "busbw_bytes_per_s"), r, strict=True)) for r in rows],
                   "gdr": {"t_gdr_s": d["t_gdr"], "t_staged_s": d["t_st"],
                           "t_staged_pipelined_s": d["t_pipe"]},
                   "gpu_util_percent": d4["U"], "sm_active_percent_max": d4["sm_act"],
                   "all_to_all": {"nodes": nodes, "rows": [dict(zip(
                       ("size", "direct_s", "aggregated_s", "aggregated_over_direct",
                        "messages_direct", "messages_aggregated", "break_even_s_per_message"),
                       r, strict=True)) for r in rows3]}},
                  question=PROMPT,
                  assumptions=(f"{gpu.id}, {G} GPUs per node, {o['intra']} and {o['inter']}.",
                               f"NCCL uses {channels} channels for the spinning kernel "
                               f"(assumption: {nc['note']})."),
                  followups=followups)
