#!/usr/bin/env python3
"""Packs the Free Spoken Digit Dataset's recordings into data/fsdd/ (a developer tool, run once).

    scripts/pack-fsdd.py --src /path/to/free-spoken-digit-dataset/recordings

Keeps takes 0..TAKES-1 (by default all 50) of every digit of every speaker found in --src, and
stores each speaker's selection as ONE lossless FLAC file (the recordings concatenated back to
back, 8 kHz mono 16-bit), plus an index of where each recording starts and an attribution file. Nothing at build or run time calls this script;
scripts/make-fsdd-corpus.py reads its output.

Uses only the Python standard library and the `flac` command-line tool.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import wave

SAMPLE_RATE = 8000
SAMPLE_WIDTH = 2  # bytes, i.e. 16-bit PCM
CHANNELS = 1
NAME_PATTERN = re.compile(r"^(\d)_([a-z]+)_(\d+)\.wav$")
INDEX_COLUMNS = ("speaker", "digit", "take", "flac", "start_sample", "num_samples")
UPSTREAM = "https://github.com/Jakobovski/free-spoken-digit-dataset"
UPSTREAM_COMMIT = "26eb9aa"


def find_recordings(src):
    """Returns {speaker: {(digit, take): path}} for every FSDD-named file in src."""
    by_speaker = {}
    for name in sorted(os.listdir(src)):
        match = NAME_PATTERN.match(name)
        if match:
            digit, speaker, take = int(match.group(1)), match.group(2), int(match.group(3))
            by_speaker.setdefault(speaker, {})[(digit, take)] = os.path.join(src, name)
    if not by_speaker:
        sys.exit(f"pack-fsdd: no files named DIGIT_SPEAKER_TAKE.wav in {src}")
    return by_speaker


def read_pcm(path):
    """Returns the raw little-endian 16-bit samples of a WAV file, after checking its format."""
    with wave.open(path, "rb") as wav:
        fmt = (wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getcomptype())
        if fmt != (CHANNELS, SAMPLE_WIDTH, SAMPLE_RATE, "NONE"):
            sys.exit(f"pack-fsdd: {path}: expected 8 kHz mono 16-bit PCM, got {fmt}")
        return wav.readframes(wav.getnframes())


def write_wav(path, pcm):
    with wave.open(path, "wb") as wav:
        wav.setnchannels(CHANNELS)
        wav.setsampwidth(SAMPLE_WIDTH)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm)


def decode_flac(flac_path, tmp_dir):
    wav_path = os.path.join(tmp_dir, "check.wav")
    subprocess.run(["flac", "--silent", "--force", "--decode", "-o", wav_path, flac_path],
                   check=True)
    with wave.open(wav_path, "rb") as wav:
        return wav.readframes(wav.getnframes())


def pack_speaker(speaker, recordings, takes, out_dir, tmp_dir):
    """Concatenates the speaker's selected takes into one FLAC; returns its index rows."""
    flac_name = f"{speaker}.flac"
    rows, chunks, start = [], [], 0
    for digit in range(10):
        for take in range(takes):
            path = recordings.get((digit, take))
            if path is None:
                sys.exit(f"pack-fsdd: missing {digit}_{speaker}_{take}.wav")
            pcm = read_pcm(path)
            num_samples = len(pcm) // SAMPLE_WIDTH
            rows.append((speaker, digit, take, flac_name, start, num_samples))
            chunks.append(pcm)
            start += num_samples
    pcm = b"".join(chunks)
    wav_path = os.path.join(tmp_dir, f"{speaker}.wav")
    flac_path = os.path.join(out_dir, flac_name)
    write_wav(wav_path, pcm)
    subprocess.run(["flac", "--silent", "--force", "-8", "-o", flac_path, wav_path], check=True)
    # FLAC is lossless, but the committed file is the only copy we keep: prove it round-trips.
    if decode_flac(flac_path, tmp_dir) != pcm:
        sys.exit(f"pack-fsdd: {flac_path} does not decode to the samples that went in")
    return rows


def write_index(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("\t".join(INDEX_COLUMNS) + "\n")
        for row in rows:
            out.write("\t".join(str(field) for field in row) + "\n")


def write_attribution(path, speakers, takes, rows):
    hours = sum(row[5] for row in rows) / SAMPLE_RATE / 3600
    text = f"""# Attribution: Free Spoken Digit Dataset (subset)

The audio in this folder is derived from the **Free Spoken Digit Dataset (FSDD)** by
Zohar Jackson and contributors: {UPSTREAM}
(DOI 10.5281/zenodo.1342401), at commit `{UPSTREAM_COMMIT}`.
FSDD is licensed under the Creative Commons Attribution-ShareAlike 4.0 International
license (CC BY-SA 4.0, https://creativecommons.org/licenses/by-sa/4.0/).

## What is here and how it was made

- Subset: takes 0-{takes - 1} of each digit 0-9 for the speakers {", ".join(speakers)}
  ({len(rows)} recordings, {hours:.2f} hours). Takes or speakers not listed are not included.
- `SPEAKER.flac`: that speaker's selected recordings, unchanged sample for sample, concatenated
  back to back (digit 0-9, then take ascending) as one 8 kHz mono 16-bit stream, encoded
  losslessly with `flac -8`.
- `index.tsv`: one row per recording (speaker, digit, take, flac file, start_sample,
  num_samples) giving where it lies in its speaker's file.
- Made by `scripts/pack-fsdd.py`.

## License of derived data

This packed subset, and any corpus built from it (for example by
`scripts/make-fsdd-corpus.py`, which splices these recordings into connected-digit
utterances), is an adaptation of FSDD and is likewise licensed under CC BY-SA 4.0.
Keep this attribution with it.
"""
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(text)


def main():
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", required=True, help="FSDD recordings/ folder")
    parser.add_argument("--out", default=os.path.join(repo_root, "data", "fsdd"))
    parser.add_argument("--takes", type=int, default=50, help="keep takes 0..TAKES-1")
    args = parser.parse_args()

    by_speaker = find_recordings(args.src)
    speakers = sorted(by_speaker)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pack-fsdd-") as tmp_dir:
        for speaker in speakers:
            rows += pack_speaker(speaker, by_speaker[speaker], args.takes, args.out, tmp_dir)
    write_index(os.path.join(args.out, "index.tsv"), rows)
    write_attribution(os.path.join(args.out, "ATTRIBUTION.md"), speakers, args.takes, rows)

    total_bytes = sum(os.path.getsize(os.path.join(args.out, name))
                      for name in os.listdir(args.out))
    print(f"pack-fsdd: {len(rows)} recordings of {len(speakers)} speakers -> {args.out} "
          f"({total_bytes / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
