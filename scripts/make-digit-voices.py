#!/usr/bin/env python3
"""Synthesizes extra voices speaking the ten digit words, packed like data/fsdd, for training only.

    scripts/make-digit-voices.py --out data/voices            # 7 voices x 10 digits x 40 takes
    scripts/make-fsdd-corpus.py --out /tmp/c --extra-data data/voices --extra-train 3000

Four training speakers are few for a model that must understand a fifth voice; these voices add
other vocal tracts to the training split (never to dev or test). Each is a recorded human voice
behind a synthesizer, or a real recording:
  flite's kal (diphone), awb (Scottish male), rms (US male) and slt (US female) voices;
  festival's ked diphone voice and the slt HTS voice;
  allison: Allison Smith's recordings of the digits for Asterisk (one take each; CC BY-SA 3.0).
Every take varies the speaking rate (0.8-1.3x duration), the pitch (+-300 cents with sox, which
moves the formants with it, as a different vocal tract would) and the level; each voice gets its
own noise floor, so pauses spliced between its words match it (make-fsdd-corpus.py). Clips are
resampled to 8 kHz, trimmed to the word (frames above 0.5% of the loudest one's RMS, 20 ms
margins) and stored as one FLAC per voice with an index.tsv (speaker, digit, take, flac, start_sample,
num_samples), the layout of data/fsdd.
Needs flite, festival (festvox-kdlpc16k, festvox-us-slt-hts), asterisk-core-sounds-en-wav, sox
and flac (scripts/install-deps.sh). The same seed gives the same bytes.
"""

import argparse
import array
import concurrent.futures
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import wave

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SAMPLE_RATE = 8000
ASTERISK_DIGITS = "/usr/share/asterisk/sounds/en/digits"
# name -> (engine, voice); flite's f0 target is left to the voice (sox moves the pitch).
VOICES = {
    "kal": ("flite", "kal"),
    "awb": ("flite", "awb"),
    "rms": ("flite", "rms"),
    "slt": ("flite", "slt"),
    "ked": ("festival", "ked_diphone"),
    "slt_hts": ("festival", "cmu_us_slt_arctic_hts"),
    "allison": ("recording", None),
}


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"make-digit-voices: {' '.join(command)} failed: {result.stderr.strip()}")


def synthesize(engine, voice, word, digit, stretch, wav_path):
    """Writes the word spoken by the voice at `stretch` times its duration (any sample rate)."""
    if engine == "flite":
        run(["flite", "-voice", voice, "-t", word, "-o", wav_path,
             "--setf", f"duration_stretch={stretch:.3f}"])
    elif engine == "festival":
        text_path = wav_path + ".txt"
        with open(text_path, "w", encoding="utf-8") as text:
            text.write(word + "\n")
        run(["text2wave", "-eval", f"(voice_{voice})", "-eval",
             f"(Parameter.set 'Duration_Stretch {stretch:.3f})", text_path, "-o", wav_path])
    else:  # a recording: the rate changes with sox's tempo (pitch kept)
        run(["sox", "-R", "-D", os.path.join(ASTERISK_DIGITS, f"{digit}.wav"), wav_path,
             "tempo", "-s", f"{1.0 / stretch:.3f}"])


def read_pcm(path):
    with wave.open(path, "rb") as wav:
        if (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) != (1, 2, SAMPLE_RATE):
            sys.exit(f"make-digit-voices: {path}: expected 8 kHz mono 16-bit")
        return array.array("h", wav.readframes(wav.getnframes()))


def trim(samples, margin=160, frame=80, rel=0.005):
    """The span from the first to the last 10 ms frame above rel x the loudest frame's RMS."""
    rms = [math.sqrt(sum(x * x for x in samples[i:i + frame]) / frame)
           for i in range(0, len(samples) - frame + 1, frame)]
    if not rms or max(rms) == 0:
        return samples
    loud = [i for i, r in enumerate(rms) if r > rel * max(rms)]
    begin = max(0, loud[0] * frame - margin)
    end = min(len(samples), (loud[-1] + 1) * frame + margin)
    return samples[begin:end]


def make_take(job):
    """One take: synthesize, pitch-shift and resample to 8 kHz, trim, set the level, add noise."""
    name, digit, take, seed, tmp_dir = job
    engine, voice = VOICES[name]
    rng = random.Random(f"digit-voices:{seed}:{name}:{digit}:{take}")
    stretch = rng.uniform(0.8, 1.3)
    cents = rng.uniform(-300, 300)
    peak = rng.uniform(0.25, 0.9) * 32767
    floor = random.Random(f"digit-voices:{seed}:{name}:floor").uniform(2.0, 10.0)
    raw = os.path.join(tmp_dir, f"{name}-{digit}-{take}.raw.wav")
    out = os.path.join(tmp_dir, f"{name}-{digit}-{take}.wav")
    synthesize(engine, voice, DIGIT_WORDS[digit], digit, stretch, raw)
    run(["sox", "-R", "-D", raw, "-b", "16", "-c", "1", out, "pitch", f"{cents:.0f}", "rate", "-v",
         str(SAMPLE_RATE)])
    samples = trim(read_pcm(out))
    top = max(1, max(abs(x) for x in samples))
    noise = random.Random(f"digit-voices:{seed}:{name}:{digit}:{take}:noise")
    scaled = array.array("h", (max(-32768, min(32767, round(x * peak / top + noise.gauss(0, floor))))
                               for x in samples))
    os.remove(raw)
    os.remove(out)
    return name, digit, take, scaled.tobytes()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder to write (index.tsv, VOICE.flac)")
    parser.add_argument("--takes", type=int, default=40, help="takes of each digit per voice")
    parser.add_argument("--voices", default=",".join(VOICES), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    names = [v for v in args.voices.split(",") if v]
    for v in names:
        if v not in VOICES:
            sys.exit(f"make-digit-voices: unknown voice '{v}' (have: {', '.join(VOICES)})")
    needed = {"sox", "flac"} | {"flite" for v in names if VOICES[v][0] == "flite"} | {
        "text2wave" for v in names if VOICES[v][0] == "festival"}
    missing = [tool for tool in sorted(needed) if shutil.which(tool) is None]
    if "allison" in names and not os.path.isdir(ASTERISK_DIGITS):
        missing.append(ASTERISK_DIGITS + " (asterisk-core-sounds-en-wav)")
    if missing:
        sys.exit("make-digit-voices: missing " + ", ".join(missing) +
                 " (scripts/install-deps.sh installs them)")

    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="digit-voices-") as tmp_dir:
        jobs = [(v, d, t, args.seed, tmp_dir) for v in names for d in range(10)
                for t in range(args.takes)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            clips = {(v, d, t): pcm for v, d, t, pcm in pool.map(make_take, jobs)}
        rows = []
        for v in names:
            wav_path = os.path.join(tmp_dir, f"{v}.wav")
            offset = 0
            with wave.open(wav_path, "wb") as wav:
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(SAMPLE_RATE)
                for d in range(10):
                    for t in range(args.takes):
                        pcm = clips[(v, d, t)]
                        wav.writeframes(pcm)
                        rows.append((v, d, t, f"{v}.flac", offset, len(pcm) // 2))
                        offset += len(pcm) // 2
            run(["flac", "--silent", "--force", "--best", "-o",
                 os.path.join(args.out, f"{v}.flac"), wav_path])
    index_path = os.path.join(args.out, "index.tsv")
    with open(index_path + ".tmp", "w", encoding="utf-8", newline="\n") as index:
        index.write("speaker\tdigit\ttake\tflac\tstart_sample\tnum_samples\n")
        for row in rows:
            index.write("\t".join(map(str, row)) + "\n")
    os.replace(index_path + ".tmp", index_path)
    seconds = sum(r[5] for r in rows) / SAMPLE_RATE
    print(f"make-digit-voices: {len(names)} voices x 10 digits x {args.takes} takes, "
          f"{seconds / 60:.1f} min of audio -> {args.out}")


if __name__ == "__main__":
    main()
