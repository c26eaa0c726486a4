#!/usr/bin/env python3
"""The reference for `ds2 bench step`: the same DS2-sized model in PyTorch + cuDNN, timed the
same way (synthetic utterances, forward + CTC + backward + optimizer step per step), so the two
can run side by side on one machine:

    python3 scripts/bench-pytorch-ds2.py --batch 4 --seconds 10 [--precision bf16]
    ds2 bench step configs/ds2-large.yaml --batch 4 --seconds 10 [train.precision=bf16]

Model (configs/ds2-large.yaml): 161-bin spectrogram frames, conv 32ch k(41f x 11t) s(2,2),
conv 32ch k(21f x 11t) s(2f,1t), each with batch norm and clipped ReLU; 7 bidirectional ReLU
RNN layers of 1920 (cuDNN, directions summed) with sequence-wise batch norm on their input;
linear to 29 classes; CTC loss. PyTorch's cuDNN RNN has no ReLU clip, which costs nothing.
"""
import argparse
import time

import torch
import torch.nn as nn


class SequenceWiseBN(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x):  # x: T, B, F
        t, b, f = x.shape
        return self.bn(x.reshape(t * b, f)).reshape(t, b, f)


class DS2(nn.Module):
    def __init__(self, features=161, hidden=1920, layers=7, classes=29):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, 11), (2, 2), (20, 5), bias=False), nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(32, 32, (21, 11), (2, 1), (10, 5), bias=False), nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True))
        f = (features + 40 - 41) // 2 + 1
        f = (f + 20 - 21) // 2 + 1
        size = 32 * f
        self.bns = nn.ModuleList()
        self.rnns = nn.ModuleList()
        for _ in range(layers):
            self.bns.append(SequenceWiseBN(size))
            self.rnns.append(nn.RNN(size, hidden, nonlinearity="relu", bidirectional=True,
                                    bias=False))
            size = hidden
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):  # x: B, 1, F, T
        x = self.conv(x)
        b, c, f, t = x.shape
        x = x.view(b, c * f, t).permute(2, 0, 1).contiguous()  # T, B, C*F
        for bn, rnn in zip(self.bns, self.rnns):
            y, _ = rnn(bn(x))
            x = y.view(y.shape[0], y.shape[1], 2, -1).sum(2)
        return self.fc(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: torch.autocast to bf16 (as ds2's train.precision=bf16)")
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as ds2
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    model = DS2().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=3e-4, momentum=0.99, nesterov=True)
    frames = int(a.seconds * 100) - 1
    x = torch.randn(a.batch, 1, 161, frames, device=dev)
    out_frames = (frames + 10 - 11) // 2 + 1
    label_len = min(int(15 * a.seconds), out_frames // 2)
    targets = torch.randint(1, 29, (a.batch, label_len), device=dev)
    in_lens = torch.full((a.batch,), out_frames, dtype=torch.long)
    tgt_lens = torch.full((a.batch,), label_len, dtype=torch.long)
    ctc = nn.CTCLoss(zero_infinity=True)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(x)
        loss = ctc(logits.float().log_softmax(-1), targets, in_lens, tgt_lens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 400)
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    print(f"engine: PyTorch {torch.__version__} + cuDNN {torch.backends.cudnn.version()} on "
          f"{torch.cuda.get_device_name()}")
    print(f"model: {params} parameters")
    print(f"precision: {a.precision}")
    print(f"batch {a.batch} x {a.seconds:.1f} s audio ({frames} frames in, {out_frames} out, "
          f"labels of {label_len})")
    print(f"step {1000 * wall / a.steps:.2f} ms  |  {a.batch * a.steps / wall:.1f} utt/s  |  "
          f"{a.batch * a.seconds * a.steps / wall:.1f} audio-s/s")
    print(f"peak device memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
