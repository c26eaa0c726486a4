#!/usr/bin/env python3
"""ds2 beside PyTorch (cuDNN RNN + CTC) on the same DS2-sized model, in one run: for each batch,
`ds2 bench step` and scripts/bench-pytorch-ds2.py (each in its own process, the same synthetic
utterances and step: forward, CTC, backward, optimizer), alternated for --rounds rounds, then a
table of audio-seconds/s and the ratio of the two medians against the targets of the recipes
issue (batch 4: ds2 >= 8x PyTorch; batch 32: ds2 >= PyTorch), with the lowest and highest
ratio of a single round beside it (PyTorch's step time at batch 4 varies by up to 1.3x between
runs of the same command, so one round decides nothing).

    python3 scripts/compare-pytorch.py --ds2 build/ds2                  # batches 4 and 32, 10 s
    python3 scripts/compare-pytorch.py --batches 4 16 32 --seconds 5
    python3 scripts/compare-pytorch.py --precision bf16     # ds2 train.precision=bf16 beside
                                                            # PyTorch autocast bf16
    python3 scripts/compare-pytorch.py --rounds 5            # five runs of each side per batch

Needs a GPU, a CUDA build of ds2, and PyTorch with CUDA (the GPU machines have it).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STEP = re.compile(r"^step ([0-9.]+) ms\s+\|\s+([0-9.]+) utt/s\s+\|\s+([0-9.]+) audio-s/s", re.M)
TARGETS = {4: 8.0, 32: 1.0}  # ds2 / PyTorch throughput the issue asks for


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare-pytorch: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    m = STEP.search(out.stdout)
    if not m:
        sys.exit(f"compare-pytorch: no 'step ... audio-s/s' line from {' '.join(cmd)}:\n{out.stdout}")
    first = out.stdout.splitlines()[0]
    return float(m.group(1)), float(m.group(3)), first


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ds2", default=os.path.join(ROOT, "build", "ds2"))
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "ds2-large.yaml"))
    p.add_argument("--batches", type=int, nargs="+", default=[4, 32])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3,
                   help="runs of each side per batch, alternated; the table gives the medians")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="both sides: ds2's train.precision, PyTorch's autocast")
    a = p.parse_args()
    if a.rounds < 1:
        sys.exit("compare-pytorch: --rounds must be at least 1")
    rows = []
    header = None
    for b in a.batches:
        common = ["--batch", str(b), "--seconds", str(a.seconds), "--steps", str(a.steps)]
        ours, ref = [], []
        for r in range(a.rounds):
            ours.append(run([a.ds2, "bench", "step", a.config] + common +
                            [f"train.precision={a.precision}"]))
            ref.append(run([sys.executable, os.path.join(HERE, "bench-pytorch-ds2.py")] + common +
                           ["--precision", a.precision]))
            print(f"# batch {b} round {r + 1}: ds2 {ours[-1][0]:.2f} ms, PyTorch {ref[-1][0]:.2f} ms",
                  flush=True)
        if header is None:
            header = f"# {ours[0][2]}\n# {ref[0][2]}"
        rows.append((b, ours, ref))
    print(header)
    print(f"# {os.path.basename(a.config)}, {a.precision}, {a.seconds:g} s utterances, "
          f"{a.steps} timed steps, medians of {a.rounds} rounds")
    print(f"{'batch':>5} {'ds2 ms':>9} {'ds2 audio-s/s':>14} {'PyTorch ms':>11} "
          f"{'PyTorch audio-s/s':>18} {'ratio':>6} {'rounds':>13}  target")
    for b, ours, ref in rows:
        ms, ours_rate = statistics.median(o[0] for o in ours), statistics.median(o[1] for o in ours)
        ref_ms, ref_rate = statistics.median(r[0] for r in ref), statistics.median(r[1] for r in ref)
        ratio = ours_rate / ref_rate
        per_round = [o[1] / r[1] for o, r in zip(ours, ref)]
        spread = f"{min(per_round):.2f}-{max(per_round):.2f}x"
        target = TARGETS.get(b)
        verdict = "" if target is None else (f">= {target:g}x: " + ("met" if ratio >= target else "missed"))
        print(f"{b:>5} {ms:>9.2f} {ours_rate:>14.1f} {ref_ms:>11.2f} {ref_rate:>18.1f} "
              f"{ratio:>5.2f}x {spread:>13}  {verdict}")


if __name__ == "__main__":
    main()
