#!/usr/bin/env python3
"""Builds a connected-digits speech corpus from the packed FSDD recordings in data/fsdd/.

    scripts/make-fsdd-corpus.py --out data/fsdd/corpus    # 3000 train / 200 dev / 300 test / 300 adapt
    scripts/make-fsdd-corpus.py --out /tmp/c --seed 2 --train 500 --test-speaker lucas

Each utterance is 1-7 random digits spoken by ONE speaker (a random take of each digit), joined
by 50-300 ms pauses with 0-100 ms of lead and trail, transcribed as words ("three one four").
Pauses hold noise at the speaker's own noise floor and DC offset rather than digital zeros,
because real recordings never fall to exact silence and a model should not learn to key on
steps in the background at word boundaries.

Splits keep every recording in one split only:
  test  = the held-out speaker (--test-speaker), takes below --test-takes (0-29);
  adapt = the held-out speaker's other takes (30-49): audio of the new voice for unsupervised
          adaptation (`ds2 adapt`), never the recordings the test is made of (--adapt 0: none);
  train = the other speakers, takes below --dev-first-take (0-44);
  dev   = the other speakers, takes from --dev-first-take on (45-49).

Writes DIR/audio/{split}/{split}_NNNNN.flac and NeMo-style JSON-lines manifests DIR/{split}.jsonl
({"audio_filepath": path relative to DIR, "duration": seconds, "text": words, "speaker": name}),
and copies the attribution (the corpus is CC BY-SA 4.0, like FSDD). The same seed and sizes give the same bytes.
Uses only the Python standard library and the `flac` command-line tool.
"""

import argparse
import array
import concurrent.futures
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import wave

SAMPLE_RATE = 8000
SAMPLE_WIDTH = 2
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SPLITS = ("train", "dev", "test", "adapt")
MAX_DIGITS = 7
PAUSE_MS = (50, 300)
EDGE_MS = (0, 100)
FILES_PER_FLAC_CALL = 250


def ms_to_samples(ms):
    return ms * SAMPLE_RATE // 1000


def load_index(data_dir):
    """Reads data/fsdd/index.tsv into a list of dicts with int fields where numeric."""
    path = os.path.join(data_dir, "index.tsv")
    rows = []
    with open(path, encoding="utf-8") as index:
        header = index.readline().rstrip("\n").split("\t")
        for line_no, line in enumerate(index, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != len(header):
                sys.exit(f"make-fsdd-corpus: {path}:{line_no}: expected {len(header)} columns")
            row = dict(zip(header, fields))
            for key in ("digit", "take", "start_sample", "num_samples"):
                row[key] = int(row[key])
            rows.append(row)
    return rows


def split_pools(rows, test_speaker, dev_first_take, test_takes):
    """Returns {split: {speaker: {digit: [takes]}}}; each recording lands in one split at most."""
    speakers = {row["speaker"] for row in rows}
    if test_speaker not in speakers:
        sys.exit(f"make-fsdd-corpus: unknown --test-speaker '{test_speaker}' "
                 f"(have: {', '.join(sorted(speakers))})")
    pools = {split: {} for split in SPLITS}
    for row in rows:
        if row["speaker"] == test_speaker:
            split = "test" if row["take"] < test_takes else "adapt"
        elif row["take"] < dev_first_take:
            split = "train"
        else:
            split = "dev"
        by_digit = pools[split].setdefault(row["speaker"], {})
        by_digit.setdefault(row["digit"], []).append(row["take"])
    for split, pool in pools.items():
        if split != "adapt" or pool:
            check_every_digit(pool, f"{split} split")
    return pools


def check_every_digit(pool, where):
    """Exits unless every speaker of {speaker: {digit: [takes]}} has every digit; sorts takes."""
    for speaker, by_digit in pool.items():
        if len(by_digit) != len(DIGIT_WORDS):
            sys.exit(f"make-fsdd-corpus: {where} lacks some digits of {speaker}")
        for takes in by_digit.values():
            takes.sort()


def plan_utterances(pool, count, rng):
    """Draws `count` utterance plans: speaker, (digit, take) list, and silence lengths in samples.

    A plan's silences are [lead, pause_1, ..., pause_{n-1}, trail].
    """
    speakers = sorted(pool)
    plans = []
    for _ in range(count):
        speaker = rng.choice(speakers)
        num_digits = rng.randint(1, MAX_DIGITS)
        words = []
        for _ in range(num_digits):
            digit = rng.randrange(len(DIGIT_WORDS))
            words.append((digit, rng.choice(pool[speaker][digit])))
        silences = [rng.randint(*map(ms_to_samples, EDGE_MS))]
        silences += [rng.randint(*map(ms_to_samples, PAUSE_MS)) for _ in range(num_digits - 1)]
        silences.append(rng.randint(*map(ms_to_samples, EDGE_MS)))
        plans.append({"speaker": speaker, "words": words, "silences": silences})
    return plans


def transcript(plan):
    return " ".join(DIGIT_WORDS[digit] for digit, _ in plan["words"])


def make_noise(seed, std, num_samples, dc=0.0):
    """A fixed buffer of Gaussian noise (16-bit little-endian) that pauses take slices of."""
    rng = random.Random(f"fsdd-corpus:{seed}:noise")
    samples = array.array("h", (max(-32768, min(32767, round(dc + rng.gauss(0.0, std))))
                                for _ in range(num_samples)))
    if sys.byteorder != "little":
        samples.byteswap()
    return samples.tobytes()


def speaker_backgrounds(clips, seed, fixed_std):
    """Pause noise per speaker, matching that speaker's own recordings: their DC offset and the
    level of their quietest frames (the 10th percentile of 20 ms frame RMS, median over clips).
    Splicing clips into pauses of another level would leave steps in the noise floor at every
    word boundary, a cue that differs from speaker to speaker and does not exist in real speech.
    With fixed_std (not None), every speaker gets zero-mean noise of that std instead."""
    by_speaker = {}
    for (speaker, _, _), pcm in clips.items():
        by_speaker.setdefault(speaker, []).append(pcm)
    backgrounds = {}
    for speaker in sorted(by_speaker):
        if fixed_std is not None:
            dc, std = 0.0, fixed_std
        else:
            floors, total, count = [], 0, 0
            for pcm in by_speaker[speaker]:
                samples = array.array("h", pcm)
                total += sum(samples)
                count += len(samples)
                frames = [samples[i:i + 160] for i in range(0, len(samples) - 159, 160)]
                if not frames:
                    continue
                mean = sum(samples) / len(samples)
                rms = sorted(math.sqrt(sum((x - mean) ** 2 for x in f) / len(f)) for f in frames)
                floors.append(rms[len(rms) // 10])
            floors.sort()
            dc, std = total / count, floors[len(floors) // 2]
        # A fixed std keeps one buffer shared by every speaker, as corpora made before the
        # matched floors were (so --noise-std 4 rebuilds them byte for byte).
        noise_seed = seed if fixed_std is not None else f"{seed}:{speaker}"
        backgrounds[speaker] = make_noise(noise_seed, std, 2 * SAMPLE_RATE, dc)
    return backgrounds


def render(plan, clips, backgrounds, rng):
    """Returns the utterance's 16-bit PCM bytes: silences interleaved with the digit clips."""
    parts = []
    noise = backgrounds[plan["speaker"]]
    for i, silence in enumerate(plan["silences"]):
        start = rng.randrange(len(noise) // SAMPLE_WIDTH - silence + 1) * SAMPLE_WIDTH
        parts.append(noise[start:start + silence * SAMPLE_WIDTH])
        if i < len(plan["words"]):
            digit, take = plan["words"][i]
            parts.append(clips[(plan["speaker"], digit, take)])
    return b"".join(parts)


def decode_clips(data_dir, rows, tmp_dir):
    """Decodes each speaker's FLAC once and cuts it into {(speaker, digit, take): pcm bytes}."""
    pcm_by_file = {}
    for flac_name in sorted({row["flac"] for row in rows}):
        wav_path = os.path.join(tmp_dir, flac_name + ".wav")
        subprocess.run(["flac", "--silent", "--force", "--decode", "-o", wav_path,
                        os.path.join(data_dir, flac_name)], check=True)
        with wave.open(wav_path, "rb") as wav:
            if (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) != (1, 2, SAMPLE_RATE):
                sys.exit(f"make-fsdd-corpus: {flac_name}: expected 8 kHz mono 16-bit")
            pcm_by_file[flac_name] = wav.readframes(wav.getnframes())
        os.remove(wav_path)
    clips = {}
    for row in rows:
        pcm = pcm_by_file[row["flac"]]
        begin = row["start_sample"] * SAMPLE_WIDTH
        end = begin + row["num_samples"] * SAMPLE_WIDTH
        if end > len(pcm):
            sys.exit(f"make-fsdd-corpus: index.tsv points past the end of {row['flac']}")
        clips[(row["speaker"], row["digit"], row["take"])] = pcm[begin:end]
    return clips


def encode_flacs(wav_paths, out_dir, workers):
    """Encodes WAVs to out_dir/NAME.flac, many files per flac call, a few calls in parallel."""
    batches = [wav_paths[i:i + FILES_PER_FLAC_CALL]
               for i in range(0, len(wav_paths), FILES_PER_FLAC_CALL)]
    command = ["flac", "--silent", "--force", f"--output-prefix={out_dir}{os.sep}"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(lambda batch: subprocess.run(command + batch), batches):
            if result.returncode != 0:
                sys.exit(f"make-fsdd-corpus: flac failed with exit code {result.returncode}")


def remove_stale_audio(split_dir, split):
    """Deletes audio a previous, larger run left behind, so the manifest and folder agree."""
    pattern = re.compile(rf"^{split}_\d+\.flac$")
    for name in os.listdir(split_dir):
        if pattern.match(name):
            os.remove(os.path.join(split_dir, name))


def build_split(split, pool, count, args, clips, noise, tmp_dir, extra_pool=None, extra_count=0):
    rng = random.Random(f"fsdd-corpus:{args.seed}:{split}")
    plans = plan_utterances(pool, count, rng)
    if extra_count:  # their own stream: the real speakers' utterances stay as without extras
        plans += plan_utterances(extra_pool, extra_count,
                                 random.Random(f"fsdd-corpus:{args.seed}:{split}:extra"))
    split_dir = os.path.join(args.out, "audio", split)
    os.makedirs(split_dir, exist_ok=True)
    remove_stale_audio(split_dir, split)
    wav_dir = os.path.join(tmp_dir, split)
    os.makedirs(wav_dir)

    entries, wav_paths, total_samples = [], [], 0
    for number, plan in enumerate(plans):
        name = f"{split}_{number:05d}"
        pcm = render(plan, clips, noise, rng)
        wav_path = os.path.join(wav_dir, name + ".wav")
        with wave.open(wav_path, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(SAMPLE_WIDTH)
            wav.setframerate(SAMPLE_RATE)
            wav.writeframes(pcm)
        wav_paths.append(wav_path)
        num_samples = len(pcm) // SAMPLE_WIDTH
        total_samples += num_samples
        entries.append({"audio_filepath": f"audio/{split}/{name}.flac",
                        "duration": round(num_samples / SAMPLE_RATE, 3),
                        "text": transcript(plan),
                        "speaker": plan["speaker"]})
    encode_flacs(wav_paths, split_dir, args.jobs)
    shutil.rmtree(wav_dir)

    manifest_path = os.path.join(args.out, f"{split}.jsonl")
    with open(manifest_path + ".tmp", "w", encoding="utf-8", newline="\n") as manifest:
        for entry in entries:
            manifest.write(json.dumps(entry) + "\n")
    os.replace(manifest_path + ".tmp", manifest_path)
    speakers = sorted(pool) + (sorted(extra_pool) if extra_count else [])
    print(f"{split}: {len(entries)} utterances, {total_samples / SAMPLE_RATE / 3600:.3f} hours, "
          f"speakers {', '.join(speakers)} -> {manifest_path}")


def main():
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="corpus folder to write")
    parser.add_argument("--data", default=os.path.join(repo_root, "data", "fsdd"),
                        help="packed FSDD folder (index.tsv + SPEAKER.flac)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train", type=int, default=3000, help="train utterances")
    parser.add_argument("--dev", type=int, default=200, help="dev utterances")
    parser.add_argument("--test", type=int, default=300, help="test utterances")
    parser.add_argument("--test-speaker", default="jackson", help="speaker held out as test")
    parser.add_argument("--adapt", type=int, default=300,
                        help="utterances of the held-out speaker's takes from --test-takes on")
    parser.add_argument("--test-takes", type=int, default=30,
                        help="the held-out speaker's takes below this are test, the rest adapt")
    parser.add_argument("--dev-first-take", type=int, default=45,
                        help="takes from here on are dev; below are train")
    parser.add_argument("--noise-std", type=float, default=None,
                        help="std of the Gaussian noise in pauses, in 16-bit units (0: silence); "
                             "default: each speaker's own noise floor and DC offset")
    parser.add_argument("--extra-data", default=None,
                        help="more voices packed the same way (scripts/make-digit-voices.py), "
                             "all their takes for training only")
    parser.add_argument("--extra-train", type=int, default=0,
                        help="train utterances from --extra-data's voices, besides --train")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="parallel flac encoders")
    args = parser.parse_args()
    if (args.extra_data is None) != (args.extra_train == 0):
        sys.exit("make-fsdd-corpus: --extra-data and --extra-train go together")
    if shutil.which("flac") is None:
        sys.exit("make-fsdd-corpus: the `flac` command is missing (apt-get install flac)")
    for split in SPLITS:
        if getattr(args, split) < 0:
            sys.exit(f"make-fsdd-corpus: --{split} must be >= 0")

    rows = load_index(args.data)
    pools = split_pools(rows, args.test_speaker, args.dev_first_take, args.test_takes)
    if args.adapt > 0 and not pools["adapt"]:
        sys.exit(f"make-fsdd-corpus: --test-takes {args.test_takes} leaves no take of "
                 f"{args.test_speaker} for --adapt")
    extra_rows, extra_pool = [], {}
    if args.extra_data:
        extra_rows = load_index(args.extra_data)
        clash = {r["speaker"] for r in extra_rows} & {r["speaker"] for r in rows}
        if clash:
            sys.exit(f"make-fsdd-corpus: {args.extra_data}: speakers also in --data: "
                     f"{', '.join(sorted(clash))}")
        for row in extra_rows:
            extra_pool.setdefault(row["speaker"], {}).setdefault(row["digit"], []).append(row["take"])
        check_every_digit(extra_pool, args.extra_data)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fsdd-corpus-") as tmp_dir:
        clips = decode_clips(args.data, rows, tmp_dir)
        if extra_rows:
            clips.update(decode_clips(args.extra_data, extra_rows, tmp_dir))
        noise = speaker_backgrounds(clips, args.seed, args.noise_std)
        for split in SPLITS:
            if split == "adapt" and args.adapt == 0:
                continue
            extra = (extra_pool, args.extra_train) if split == "train" else (None, 0)
            build_split(split, pools[split], getattr(args, split), args, clips, noise, tmp_dir,
                        *extra)
    attribution = os.path.join(args.data, "ATTRIBUTION.md")
    if os.path.exists(attribution):
        shutil.copyfile(attribution, os.path.join(args.out, "ATTRIBUTION.md"))


if __name__ == "__main__":
    main()
