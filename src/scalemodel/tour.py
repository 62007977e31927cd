"""`make demo`: a short tour of the main job on the bundled defaults.

Runs a few commands through the same entry point a user types, so what it shows is exactly
what the CLI prints.
"""

from __future__ import annotations

import sys

from .cli import main

STOPS = [
    ("How many bytes per token does a 70B model cache, and how many 8k-token sequences fit on "
     "8 x H100?", ["kv", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8",
                   "--context", "8k", "--batch", "32"]),
    ("What does training it need per GPU, and what is the smallest H100 layout that fits?",
     ["memory", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--seq-len", "4096", "--fit"]),
    ("Why is batch-1 decode memory-bound, and from which batch is it not?",
     ["roofline", "--gpu", "h100-sxm", "--model", "llama-3-70b", "--decode", "--batch", "1",
      "--context", "1"]),
    ("How long does a 1 GiB gradient all-reduce take on one 8 x H100 node, and which algorithm "
     "would NCCL pick?", ["comm", "cost", "--collective", "all-reduce", "--ranks", "8", "--bytes",
                          "1GiB", "--link", "nvlink4"]),
    ("Which questions does scalemodel answer?", ["questions"]),
]


def run() -> int:
    for i, (why, argv) in enumerate(STOPS, 1):
        print(f"\n### Stop {i}: {why}\n$ scalemodel {' '.join(argv)}\n", flush=True)
        rc = main(argv)
        if rc:
            return rc
    print("\nNext: scalemodel answer ID (scalemodel questions lists them), scalemodel plan train "
          "--model llama-3-70b --gpu h100-sxm --gpus 64 --global-batch-tokens 4M, scalemodel serve, "
          "and scalemodel <command> --help.")
    return 0


if __name__ == "__main__":
    sys.exit(run())
