#!/usr/bin/env python3
"""Synthesizes extra voices speaking the ten digit words, packed like data/fsdd, for training only.

    scripts/make-digit-voices.py --out data/voices            # 7 voices x 10 digits x 40 takes
    scripts/make-fsdd-corpus.py --out /tmp/c --extra-data data/voices --extra-train 3000
    scripts/make-digit-voices.py --out /tmp/accented --voices cz_machac,fi_mv   # not committed

Four training speakers are few for a model that must understand a fifth voice; these voices add
other vocal tracts to the training split (never to dev or test). Each is a recorded human voice
behind a synthesizer, or a real recording. The default seven, committed as data/voices:
  flite's kal (diphone), awb (Scottish male), rms (US male) and slt (US female) voices;
  festival's ked diphone voice and the slt HTS voice;
  allison: Allison Smith's recordings of the digits for Asterisk (one take each; CC BY-SA 3.0).
Nine more on request (--voices): festival's voices of other languages, given the English words
respelled in their language's spelling, so they come out as accented English: Italian (it_pc
male, it_lp female), Czech (cz_machac and cz_ph male, cz_krb a boy, cz_dita female), Finnish
(fi_mv male, fi_lj female) and Russian (ru_nsh male). Added to the seven they did not lower the
held-out speakers' WER (README "More voices"), so they are not committed.
Every take varies the speaking rate (0.8-1.3x duration), the pitch (+-300 cents with sox, which
moves the formants with it, as a different vocal tract would) and the level; each voice gets its
own noise floor, so pauses spliced between its words match it (make-fsdd-corpus.py). Clips are
resampled to 8 kHz, trimmed to the word (frames above 0.5% of the loudest one's RMS, 20 ms
margins) and stored as one FLAC per voice with an index.tsv (speaker, digit, take, flac, start_sample,
num_samples), the layout of data/fsdd.
Needs sox, flac and each voice's Debian package (VOICES below; scripts/install-deps.sh installs
those of the default seven). The same seed gives the same bytes.
"""

import argparse
import array
import collections
import concurrent.futures
import glob
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
Voice = collections.namedtuple("Voice", "engine voice language package")
# name -> engine, the engine's voice, the language of the respelled words (None: English) and the
# Debian package that has the voice. flite's f0 target is left to the voice (sox moves the pitch).
VOICES = {
    "kal": Voice("flite", "kal", None, "flite"),
    "awb": Voice("flite", "awb", None, "flite"),
    "rms": Voice("flite", "rms", None, "flite"),
    "slt": Voice("flite", "slt", None, "flite"),
    "ked": Voice("festival", "ked_diphone", None, "festvox-kdlpc16k"),
    "slt_hts": Voice("festival", "cmu_us_slt_arctic_hts", None, "festvox-us-slt-hts"),
    "allison": Voice("recording", None, None, "asterisk-core-sounds-en-wav"),
    "it_pc": Voice("festival", "pc_diphone", "it", "festvox-itapc16k"),
    "it_lp": Voice("festival", "lp_diphone", "it", "festvox-italp16k"),
    "cz_machac": Voice("festival", "czech_machac", "cz", "festvox-czech-machac"),
    "cz_ph": Voice("festival", "czech_ph", "cz", "festvox-czech-ph"),
    "cz_krb": Voice("festival", "czech_krb", "cz", "festvox-czech-krb"),
    "cz_dita": Voice("festival", "czech_dita", "cz", "festvox-czech-dita"),
    "fi_mv": Voice("festival", "hy_fi_mv_diphone", "fi", "festvox-suopuhe-mv"),
    "fi_lj": Voice("festival", "suo_fi_lj_diphone", "fi", "festvox-suopuhe-lj"),
    "ru_nsh": Voice("festival", "msu_ru_nsh_clunits", "ru", "festvox-ru"),
}
# The committed data/voices; the accented ones did not help on the held-out speakers (README).
DEFAULT_VOICES = ("kal", "awb", "rms", "slt", "ked", "slt_hts", "allison")
# The digit words as a speaker of each voice's language would write them down from English, and
# the encoding that language's festival front end reads. Checked without listening: models trained
# without these voices transcribe most takes as the intended digit (README "More voices").
RESPELLED = {
    "it": ("utf-8", ("ziro", "uan", "tu", "tri", "for", "fajv", "sics", "seven", "eit", "nain")),
    "cz": ("iso-8859-2", ("zírou", "uan", "tú", "trí", "fór", "fajv", "siks", "sevn", "ejt", "najn")),
    "fi": ("iso-8859-1", ("siirou", "uan", "tuu", "trii", "foor", "faiv", "siks", "seven", "eit",
                          "nain")),
    "ru": ("utf-8", ("зироу", "уан", "ту", "фри", "фор", "файв", "сикс", "севен", "эйт", "найн")),
}


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"make-digit-voices: {' '.join(command)} failed: {result.stderr.strip()}")


def synthesize(engine, voice, language, digit, stretch, wav_path):
    """Writes the digit spoken by the voice at `stretch` times its duration (any sample rate)."""
    encoding, words = RESPELLED[language] if language else ("utf-8", DIGIT_WORDS)
    word = words[digit]
    if engine == "flite":
        run(["flite", "-voice", voice, "-t", word, "-o", wav_path,
             "--setf", f"duration_stretch={stretch:.3f}"])
    elif engine == "festival":
        text_path = wav_path + ".txt"
        with open(text_path, "w", encoding=encoding) as text:
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
    engine, voice, language, _ = VOICES[name]
    rng = random.Random(f"digit-voices:{seed}:{name}:{digit}:{take}")
    stretch = rng.uniform(0.8, 1.3)
    cents = rng.uniform(-300, 300)
    peak = rng.uniform(0.25, 0.9) * 32767
    floor = random.Random(f"digit-voices:{seed}:{name}:floor").uniform(2.0, 10.0)
    raw = os.path.join(tmp_dir, f"{name}-{digit}-{take}.raw.wav")
    out = os.path.join(tmp_dir, f"{name}-{digit}-{take}.wav")
    synthesize(engine, voice, language, digit, stretch, raw)
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
    parser.add_argument("--voices", default=",".join(DEFAULT_VOICES),
                        help=f"comma-separated, of {', '.join(VOICES)}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    names = [v for v in args.voices.split(",") if v]
    for v in names:
        if v not in VOICES:
            sys.exit(f"make-digit-voices: unknown voice '{v}' (have: {', '.join(VOICES)})")
    missing = [tool for tool in ("sox", "flac") if shutil.which(tool) is None]
    for v in names:
        engine, voice, _, package = VOICES[v]
        if engine == "flite":
            ready = shutil.which("flite") is not None
        elif engine == "festival":
            ready = shutil.which("text2wave") is not None and bool(
                glob.glob(f"/usr/share/festival/voices/*/{voice}"))
        else:
            ready = os.path.isdir(ASTERISK_DIGITS)
        if not ready:
            missing.append(f"voice {v} (Debian package {package})")
    if missing:
        sys.exit("make-digit-voices: missing " + ", ".join(dict.fromkeys(missing)) +
                 " (scripts/install-deps.sh installs the default voices' packages)")

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
