#!/usr/bin/env python3
"""Writes the golden spectrogram fixtures read by tests/audio/spectrogram_test.cpp.

The expected features are computed here with numpy (float64, numpy.fft.rfft), independently
of the C++ code, from the definitions documented in src/audio/spectrogram.h and
src/audio/mel_filterbank.h. Only numpy is needed; CI uses the committed output.

    python3 tests/audio/make_golden.py     # rewrites tests/audio/fixtures/

Files: cases.txt lists one case per line:
    name sample_rate window_ms hop_ms window type n_mels n_ceps input_file expected_file
and each .f32 file is: int32 rows, int32 cols (little endian), then rows*cols float32 values.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
LOG_EPS = 1e-10


def make_signal(rate, seconds, seed):
    t = np.arange(int(round(rate * seconds))) / rate
    tones = [(440.0, 0.5), (1234.5, 0.25), (0.37 * rate, 0.1)]
    x = sum(a * np.sin(2 * np.pi * f * t + 0.3 * i) for i, (f, a) in enumerate(tones))
    x = x + 0.05 * np.random.default_rng(seed).standard_normal(t.size)
    return x.astype(np.float32)


def periodic_window(kind, n):
    a0 = {"hamming": 0.54, "hann": 0.5}[kind]
    return a0 - (1 - a0) * np.cos(2 * np.pi * np.arange(n) / n)


def hz_to_mel(hz):
    return 2595.0 * np.log10(1.0 + hz / 700.0)


def mel_to_hz(mel):
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_weights(n_mels, n_fft, rate):
    edges = mel_to_hz(np.linspace(0.0, hz_to_mel(rate / 2.0), n_mels + 2))
    freqs = np.arange(n_fft // 2 + 1) * rate / n_fft
    left, centre, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (freqs[None, :] - left) / (centre - left)
    falling = (right - freqs[None, :]) / (right - centre)
    return np.maximum(0.0, np.minimum(rising, falling))


def dct_ii_orthonormal(n_ceps, n_in):
    # c_k = s_k sum_m x_m cos(pi k (m + 1/2) / M), s_0 = sqrt(1/M), s_k = sqrt(2/M)
    k = np.arange(n_ceps)[:, None]
    m = np.arange(n_in)[None, :]
    basis = np.cos(np.pi * k * (m + 0.5) / n_in) * np.sqrt(2.0 / n_in)
    basis[0, :] = np.sqrt(1.0 / n_in)
    return basis


def features(x, rate, window_ms, hop_ms, window, kind, n_mels, n_ceps):
    n_win = int(round(window_ms * rate / 1000))
    hop = int(round(hop_ms * rate / 1000))
    n_frames = 1 + (len(x) - n_win) // hop
    idx = np.arange(n_win)[None, :] + hop * np.arange(n_frames)[:, None]
    frames = x.astype(np.float64)[idx] * periodic_window(window, n_win)[None, :]
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    if kind in ("mel", "mfcc"):
        power = power @ mel_weights(n_mels, n_win, rate).T
    logs = np.log(power + LOG_EPS)
    if kind == "mfcc":
        return logs @ dct_ii_orthonormal(n_ceps, n_mels).T
    return logs


def write_matrix(name, matrix):
    matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.array(matrix.shape, dtype="<i4").tobytes())
        f.write(matrix.astype("<f4").tobytes())


CASES = [
    # name, rate, window_ms, hop_ms, window, type, n_mels, n_ceps
    ("linear_8k_hamming", 8000, 20.0, 10.0, "hamming", "linear", 40, 13),
    ("linear_16k_hamming", 16000, 20.0, 10.0, "hamming", "linear", 40, 13),
    ("linear_16k_hann_25ms", 16000, 25.0, 10.0, "hann", "linear", 40, 13),
    ("mel_8k_hamming", 8000, 20.0, 10.0, "hamming", "mel", 40, 13),
    ("mel_16k_hann", 16000, 20.0, 10.0, "hann", "mel", 64, 13),
    ("mfcc_8k_hamming_23", 8000, 20.0, 10.0, "hamming", "mfcc", 23, 13),
    ("mfcc_16k_hann_40", 16000, 25.0, 10.0, "hann", "mfcc", 40, 20),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    signals = {}
    for rate in (8000, 16000):
        signals[rate] = make_signal(rate, 0.3, seed=rate)
        write_matrix(f"signal_{rate // 1000}k.f32", signals[rate])
    lines = []
    for name, rate, window_ms, hop_ms, window, kind, n_mels, n_ceps in CASES:
        expected = features(signals[rate], rate, window_ms, hop_ms, window, kind, n_mels, n_ceps)
        write_matrix(f"{name}.f32", expected)
        lines.append(f"{name} {rate} {window_ms} {hop_ms} {window} {kind} {n_mels} {n_ceps} "
                     f"signal_{rate // 1000}k.f32 {name}.f32")
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
