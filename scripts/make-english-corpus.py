#!/usr/bin/env python3
"""Synthesizes a multi-speaker English speech corpus with espeak-ng from the fortune collections.

    scripts/make-english-corpus.py --size small --out data/english/small      # ~1 h of train audio
    scripts/make-english-corpus.py --size tiny --out /tmp/e --seed 2          # a few dozen, seconds

Text: the fortune files of Debian's `fortunes` and `fortunes-min` packages (BSD licence, see the
ATTRIBUTION.md written into the corpus), split into sentences and kept only where the words that
espeak-ng speaks are certain to be the transcript's words: integers and ordinals are spelled out
(the spelled words are what espeak-ng reads, so audio and text agree by construction), and
sentences with abbreviations, acronyms, mixed-case words, stray letters, symbols, decimals or
non-ASCII letters are dropped. Transcripts are in ds2's default alphabet (a-z, apostrophe,
space) and already normalized as ds2 normalizes; 3-20 words; deduplicated.

Voices: every English accent that `espeak-ng --voices=en` lists (except MBROLA voices, which need
the separate mbrola program) x the voice variants of VARIANTS (+m1..m8, +f1..f5, +croak, +klatt,
...), at a random speaking rate (-s), pitch (-p) and word gap (-g), then resampled to 16 kHz by
sox (band-limited, no dither), mixed with white, pink or brown noise at a random SNR and scaled to
a random peak level. Speed perturbation is left to training (ds2's augment.speed_* keys).

Splits: dev and test each take a disjoint set of sentences never spoken in train, and a disjoint
set of accent+variant combinations never heard in train (every accent and every variant alone
still occurs in train: combination (a, v) goes to test when (a + rank(v)) % 8 == 0, to dev when
it is 1, with rank a seeded permutation of the variants).

Writes DIR/audio/{split}/{split}_NNNNN.flac (16 kHz mono 16-bit), JSON-lines manifests
DIR/{split}.jsonl ({"audio_filepath": path relative to DIR, "duration": seconds, "text": words}),
DIR/synthesis.tsv (how each utterance was made), DIR/train-text.txt (every training-side
sentence, spoken or not: the LM corpus) and DIR/lm-3gram.arpa built from it by
scripts/build-arpa.py, and DIR/ATTRIBUTION.md. The same seed and size give the same bytes (with
the same espeak-ng, sox, flac and fortunes versions), for any --jobs.
Uses the Python standard library and the espeak-ng, sox and flac command-line tools.
"""

import argparse
import array
import concurrent.futures
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import wave

SAMPLE_RATE = 16000
SAMPLE_WIDTH = 2
SPLITS = ("train", "dev", "test")
# Utterances per split. `small` is about an hour of train audio, `large` about thirty.
SIZES = {
    "tiny": {"train": 24, "dev": 8, "test": 8},
    "small": {"train": 1000, "dev": 150, "test": 150},
    "large": {"train": 36000, "dev": 600, "test": 600},
}
FORTUNE_DIR = "/usr/share/games/fortunes"
# Collections of the `fortunes` and `fortunes-min` packages (the last three are fortunes-min's).
# Left out: ascii-art, program code and jargon (computers, debian, linux, linuxcookie, perl,
# knghtbrd), non-English (translate-me), one-entry files (pratchett), and the ethnic and
# men-women files.
COLLECTIONS = (
    "art", "cookie", "definitions", "disclaimer", "drugs", "education", "food", "goedel",
    "humorists", "kids", "law", "love", "magic", "medicine", "miscellaneous", "news",
    "paradoxum", "people", "pets", "platitudes", "politics", "science", "songs-poems", "sports",
    "startrek", "tao", "wisdom", "work", "zippy",
    "fortunes", "literature", "riddles",
)
# espeak-ng voice variants (files in espeak-ng-data/voices/!v): human-sounding ones only.
VARIANTS = (
    "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "croak", "grandpa", "klatt", "klatt2",
    "klatt3", "klatt4", "Andy", "Gene",
    "f1", "f2", "f3", "f4", "f5", "grandma", "Annie", "Alicia", "Andrea", "linda", "steph",
    "belinda",
)
HOLDOUT_MODULUS = 8   # 1/8 of the accent+variant combinations for test, 1/8 for dev
MIN_WORDS, MAX_WORDS = 3, 20
RATE_WPM = (130, 210)   # espeak-ng -s (its default is 175)
PITCH = (25, 75)        # espeak-ng -p, 0-99 (default 50)
WORD_GAPS = (0, 0, 0, 1, 2)   # espeak-ng -g, pause between words in 10 ms units
NOISE_TYPES = ("white", "pink", "brown")
SNR_DB = (10.0, 30.0)
PEAK_DBFS = (-16.0, -2.0)
NOISE_SECONDS = 30   # length of each noise buffer that utterances take random slices of
FILES_PER_FLAC_CALL = 250

# ---- text ----------------------------------------------------------------------------------

ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
SCALES = ((10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand"))
ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                 "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
# Words that espeak-ng expands or spells out even without a full stop ("etc" -> "et cetera",
# "eg" -> "for example", "ok" -> "O K"), checked one by one with `espeak-ng -x`. It spells
# almost every word without a vowel too ("mr", "st", "tv", "mph"), so those go as well, but for
# the few of NO_VOWEL_WORDS that it reads as written.
ABBREVIATIONS = {"etc", "eg", "ie", "inc", "dept", "ok", "uk", "messrs", "govt"}
NO_VOWEL_WORDS = {"hmm", "hmmm", "psst", "tsk"}
SINGLE_LETTER_WORDS = {"a", "i", "o"}
# Characters that may appear in a kept sentence (after the replacements below); anything else
# (symbols, code, non-ASCII letters) drops it.
ALLOWED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 '\".,;:!?-()")
REPLACEMENTS = {"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ",
                "\u2013": " - ", "`": "'", "\t": " ", " & ": " and "}
NUMBER = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th)?$")
EDGE_PUNCTUATION = "\"'.,;:!?()-"
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')]*\s+")


def cardinal(n):
    """English words for 0 <= n < 10**12, without "and": 2305 -> "two thousand three hundred five"."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + cardinal(rest))
    for scale, name in SCALES:
        if n >= scale:
            rest = n % scale
            return cardinal(n // scale) + " " + name + ("" if rest == 0 else " " + cardinal(rest))
    raise ValueError(n)


def ordinal(n):
    words = cardinal(n).split()
    last = words[-1]
    if last in ORDINAL_WORDS:
        words[-1] = ORDINAL_WORDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def number_words(token):
    """Words for an integer token ("42", "1,000", "3rd", "1984"), or None when it is not one.
    Four-digit numbers 1100-1999 other than whole hundreds are read as years are."""
    match = NUMBER.match(token)
    if not match:
        return None
    n = int(match.group(1).replace(",", ""))
    if n >= 10 ** 12:
        return None
    if match.group(2):
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10 if n % 100 not in (11, 12, 13) else 0,
                                                  "th")
        return ordinal(n) if match.group(2) == suffix else None
    if 1100 <= n <= 1999 and n % 100 != 0 and "," not in match.group(1):
        low = n % 100
        return cardinal(n // 100) + " " + (cardinal(low) if low >= 10 else "oh " + ONES[low])
    return cardinal(n)


def clean_word(raw):
    """Returns (speakable, transcript words) for one whitespace-separated token, or None when
    the sentence holding it must be dropped. Punctuation stays in the speakable form (espeak-ng
    uses it for prosody) but quotes do not; the transcript has only a-z and inner apostrophes.
    A token of punctuation alone (a dash) is only spoken: espeak-ng pauses there."""
    core = raw.strip(EDGE_PUNCTUATION)
    if not core:
        return raw.replace('"', "").replace("'", ""), ""
    start = raw.index(core)
    lead = raw[:start].replace('"', "").replace("'", "")
    tail = raw[start + len(core):].replace('"', "").replace("'", "")
    if any(c.isdigit() for c in core):
        words = number_words(core)
        return None if words is None else (lead + words + tail, words)
    transcript = []
    parts = [part for part in core.split("-") if part]   # hyphenated words, "word--word"
    for part in parts:
        if len(parts) > 1 and len(part) == 1:
            return None   # "X-ray", "insa-a-a-ane"
        if not re.fullmatch(r"[A-Za-z]+(?:'[A-Za-z]+)*", part):
            return None
        if any(c.isupper() for c in part[1:]):
            return None   # acronyms, shouting, mixed case: espeak-ng may spell them out
        lower = part.lower()
        if len(lower) == 1 and (lower not in SINGLE_LETTER_WORDS or ":" in tail):
            return None   # letters are spoken as letters, as is "A:" of a question and answer
        if lower.replace("'", "") in ABBREVIATIONS:
            return None
        if not re.search("[aeiouy]", lower) and lower not in NO_VOWEL_WORDS:
            return None
        transcript.append(lower)
    if not transcript:
        return None
    return lead + core + tail, " ".join(transcript)


def clean_sentence(text):
    """Returns (speakable, transcript) for one sentence, or None when it must be dropped."""
    for old, new in REPLACEMENTS.items():
        text = text.replace(old, new)
    if any(c not in ALLOWED for c in text):
        return None
    tokens = text.split()
    if not tokens or tokens[0].startswith("-"):
        return None   # an attribution ("-Arthur Baer") that did not start a line with "--"
    speakable, transcript = [], []
    for i, token in enumerate(tokens):
        # A full stop inside a token or a sentence belongs to an abbreviation or a decimal.
        bare = token.rstrip("\"')")
        if "." in bare.rstrip(".!?,;:") or (bare.endswith(".") and i < len(tokens) - 1):
            return None
        cleaned = clean_word(token)
        if cleaned is None:
            return None
        if cleaned[0]:
            speakable.append(cleaned[0])
        if cleaned[1]:
            transcript.append(cleaned[1])
    words = " ".join(transcript).split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return None
    return " ".join(speakable), " ".join(words)


def read_fortunes(path):
    """The fortunes of one file as text blocks, attribution lines ("-- Author") removed and
    overstriking (x BACKSPACE y) resolved to the second character."""
    with open(path, encoding="utf-8", errors="replace") as f:
        data = f.read()
    data = re.sub(r".\x08", "", data)
    fortunes, lines = [], []
    for line in data.split("\n") + ["%"]:
        if line.strip() == "%":
            if lines:
                fortunes.append(lines)
            lines = []
        elif not line.strip().startswith("--"):
            lines.append(line)
    return fortunes


def sentences_of(fortune_lines):
    """Splits a fortune into sentences: at . ! ? followed by space, and at blank lines."""
    paragraphs, current = [], []
    for line in fortune_lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    for paragraph in paragraphs:
        for sentence in SENTENCE_END.split(paragraph):
            if sentence.strip():
                yield sentence.strip()


def load_sentences(fortune_dir, collections):
    """Returns the sorted, deduplicated (transcript, speakable, collection) triples, and
    per-collection counts of sentences seen and kept."""
    by_transcript, stats = {}, {}
    for name in collections:
        path = os.path.join(fortune_dir, name)
        if not os.path.exists(path):
            sys.exit(f"make-english-corpus: {path} is missing (install the Debian packages "
                     "fortunes and fortunes-min: scripts/install-deps.sh)")
        seen = kept = 0
        for fortune in read_fortunes(path):
            for sentence in sentences_of(fortune):
                seen += 1
                cleaned = clean_sentence(sentence)
                if cleaned is None:
                    continue
                kept += 1
                speakable, transcript = cleaned
                # The first spelling met (collections in a fixed order) wins.
                by_transcript.setdefault(transcript, (speakable, name))
        stats[name] = (seen, kept)
    triples = sorted((t, s, c) for t, (s, c) in by_transcript.items())
    return triples, stats


def split_sentences(triples, counts, rng):
    """Disjoint sentence pools: dev and test get one sentence per utterance, train the rest."""
    needed = counts["dev"] + counts["test"]
    if needed >= len(triples):   # train needs at least one sentence of its own
        sys.exit(f"make-english-corpus: {len(triples)} sentences are too few for "
                 f"{needed} dev + test utterances")
    order = list(triples)
    rng.shuffle(order)
    return {"test": order[:counts["test"]],
            "dev": order[counts["test"]:needed],
            "train": order[needed:]}

# ---- voices --------------------------------------------------------------------------------


def espeak_data_dir():
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True,
                         check=True).stdout
    match = re.search(r"Data at:\s*(\S+)", out)
    if not match:
        sys.exit(f"make-english-corpus: cannot read espeak-ng's data folder from '{out.strip()}'")
    return match.group(1)


def espeak_version():
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True,
                         check=True).stdout
    match = re.search(r"text-to-speech:\s*(\S+)", out)
    return match.group(1) if match else out.strip()


def english_accents():
    """The language codes of espeak-ng's own English voices (not MBROLA's), sorted."""
    out = subprocess.run(["espeak-ng", "--voices=en"], capture_output=True, text=True,
                         check=True).stdout
    accents = set()
    for line in out.splitlines()[1:]:
        fields = line.split()
        # Pty Language Age/Gender VoiceName File [Other languages]
        if len(fields) >= 5 and fields[1].startswith("en") and not fields[4].startswith("mb/"):
            accents.add(fields[1])
    if not accents:
        sys.exit("make-english-corpus: espeak-ng lists no English voice (apt-get install espeak-ng)")
    return sorted(accents)


def check_variants(variants, data_dir):
    folder = os.path.join(data_dir, "voices", "!v")
    missing = [v for v in variants if not os.path.exists(os.path.join(folder, v))]
    if missing:
        sys.exit(f"make-english-corpus: espeak-ng lacks the voice variants {', '.join(missing)} "
                 f"(not in {folder})")


def split_voices(accents, variants, seed):
    """{split: [(accent, variant)]}: combination (a, v) is test when (a + rank v) % 8 == 0, dev
    when it is 1, train otherwise; rank is a seeded permutation, so each accent and each variant
    is still heard in train while the combinations of dev and test never are."""
    ranks = list(range(len(variants)))
    random.Random(f"english-corpus:{seed}:voices").shuffle(ranks)
    combos = {split: [] for split in SPLITS}
    for a, accent in enumerate(accents):
        for v, variant in enumerate(variants):
            k = (a + ranks[v]) % HOLDOUT_MODULUS
            split = "test" if k == 0 else "dev" if k == 1 else "train"
            combos[split].append((accent, variant))
    for split, pool in combos.items():
        if not pool:
            sys.exit(f"make-english-corpus: no voice combination left for {split}")
    return combos

# ---- noise ---------------------------------------------------------------------------------


def unit_rms(samples):
    mean = sum(samples) / len(samples)
    centered = [x - mean for x in samples]
    rms = math.sqrt(sum(x * x for x in centered) / len(centered))
    return array.array("d", (x / rms for x in centered))


def make_noise(kind, seed, num_samples):
    """Zero-mean, unit-RMS noise: white (Gaussian), pink (Voss-McCartney: 16 random rows, row k
    redrawn every 2^k samples, plus white) or brown (leaky integral of white)."""
    rng = random.Random(f"english-corpus:{seed}:noise:{kind}")
    gauss = rng.gauss
    if kind == "white":
        samples = [gauss(0.0, 1.0) for _ in range(num_samples)]
    elif kind == "pink":
        rows = [gauss(0.0, 1.0) for _ in range(16)]
        total = sum(rows)
        samples = []
        for n in range(1, num_samples + 1):
            k = min((n & -n).bit_length() - 1, 15)
            new = gauss(0.0, 1.0)
            total += new - rows[k]
            rows[k] = new
            samples.append(total + gauss(0.0, 1.0))
    elif kind == "brown":
        level, samples = 0.0, []
        for _ in range(num_samples):
            level = 0.998 * level + gauss(0.0, 1.0)
            samples.append(level)
    else:
        raise ValueError(kind)
    return unit_rms(samples)

# ---- synthesis -----------------------------------------------------------------------------


def plan_utterances(split, sentences, combos, count, seed):
    """Draws `count` utterance plans: sentence, voice, prosody, noise and level. Train walks a
    seeded shuffle of its sentences (repeating them, with other voices, only when it runs out);
    dev and test speak each of theirs once."""
    rng = random.Random(f"english-corpus:{seed}:{split}")
    order = list(sentences)
    rng.shuffle(order)
    plans = []
    for number in range(count):
        transcript, speakable, collection = order[number % len(order)]
        accent, variant = rng.choice(combos)
        plans.append({
            "name": f"{split}_{number:05d}",
            "split": split,
            "text": transcript,
            "speakable": speakable,
            "collection": collection,
            "accent": accent,
            "variant": variant,
            "rate": rng.randint(*RATE_WPM),
            "pitch": rng.randint(*PITCH),
            "gap": rng.choice(WORD_GAPS),
            "noise": rng.choice(NOISE_TYPES),
            "snr_db": round(rng.uniform(*SNR_DB), 1),
            "peak_dbfs": round(rng.uniform(*PEAK_DBFS), 1),
            "noise_offset": rng.random(),
        })
    return plans


NOISE = {}   # kind -> unit-RMS noise, set before the worker processes fork


def synthesize(plan, wav_dir):
    """espeak-ng (22.05 kHz WAV) | sox (16 kHz, no dither) -> noise at the SNR -> peak level ->
    WAV_DIR/NAME.wav. Returns the number of samples."""
    espeak = subprocess.Popen(
        ["espeak-ng", "--stdout", "-v", f"{plan['accent']}+{plan['variant']}",
         "-s", str(plan["rate"]), "-p", str(plan["pitch"]), "-g", str(plan["gap"])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sox = subprocess.Popen(
        ["sox", "-D", "-t", "wav", "-", "-t", "raw", "-e", "signed-integer", "-b", "16",
         "-c", "1", "-L", "-", "rate", "-h", str(SAMPLE_RATE)],
        stdin=espeak.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    espeak.stdout.close()
    espeak.stdin.write(plan["speakable"].encode("ascii"))
    espeak.stdin.close()
    raw, sox_err = sox.communicate()
    espeak_err = espeak.stderr.read()
    espeak.stderr.close()
    if espeak.wait() != 0 or sox.returncode != 0 or not raw:
        raise RuntimeError(f"{plan['name']} ({plan['accent']}+{plan['variant']}): espeak-ng "
                           f"{espeak.returncode} {espeak_err.decode(errors='replace').strip()}; "
                           f"sox {sox.returncode} {sox_err.decode(errors='replace').strip()}")
    speech = array.array("h")
    speech.frombytes(raw)
    if sys.byteorder != "little":
        speech.byteswap()
    n = len(speech)
    noise = NOISE[plan["noise"]]
    if n > len(noise):
        raise RuntimeError(f"{plan['name']}: {n / SAMPLE_RATE:.1f} s is longer than the "
                           f"{NOISE_SECONDS} s noise buffer")
    start = int(plan["noise_offset"] * (len(noise) - n + 1))
    power = sum(x * x for x in speech) / n
    gain = math.sqrt(power / 10 ** (plan["snr_db"] / 10))
    mixed = [x + gain * y for x, y in zip(speech, noise[start:start + n])]
    peak = max(max(mixed), -min(mixed)) or 1.0
    scale = 32767 * 10 ** (plan["peak_dbfs"] / 20) / peak
    pcm = array.array("h", [round(x * scale) for x in mixed])
    if sys.byteorder != "little":
        pcm.byteswap()
    with wave.open(os.path.join(wav_dir, plan["name"] + ".wav"), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(SAMPLE_WIDTH)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm.tobytes())
    return n


def synthesize_job(job):
    plan, wav_dir = job
    return synthesize(plan, wav_dir)


def encode_flacs(wav_paths, out_dir, workers):
    """WAV files -> out_dir/NAME.flac, FILES_PER_FLAC_CALL files per flac call, in parallel."""
    command = ["flac", "--silent", "--force", f"--output-prefix={out_dir}{os.sep}"]
    batches = [wav_paths[i:i + FILES_PER_FLAC_CALL]
               for i in range(0, len(wav_paths), FILES_PER_FLAC_CALL)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as threads:
        for done in threads.map(lambda batch: subprocess.run(command + batch), batches):
            if done.returncode != 0:
                sys.exit(f"make-english-corpus: flac failed with exit code {done.returncode}")


def build_split(split, plans, out, pool, jobs, tmp_dir):
    """Synthesizes, encodes and writes the manifest of one split; returns its seconds of audio."""
    split_dir = os.path.join(out, "audio", split)
    os.makedirs(split_dir, exist_ok=True)
    stale = re.compile(rf"^{split}_\d+\.flac$")
    for name in os.listdir(split_dir):
        if stale.match(name):
            os.remove(os.path.join(split_dir, name))
    wav_dir = os.path.join(tmp_dir, split)
    os.makedirs(wav_dir)
    try:
        lengths = list(pool.imap(synthesize_job, ((plan, wav_dir) for plan in plans),
                                 chunksize=4))
    except RuntimeError as e:
        sys.exit(f"make-english-corpus: synthesis failed: {e}")
    encode_flacs([os.path.join(wav_dir, p["name"] + ".wav") for p in plans], split_dir, jobs)
    shutil.rmtree(wav_dir)

    manifest_path = os.path.join(out, f"{split}.jsonl")
    with open(manifest_path + ".tmp", "w", encoding="utf-8", newline="\n") as manifest:
        for plan, n in zip(plans, lengths):
            plan["duration"] = round(n / SAMPLE_RATE, 3)
            manifest.write(json.dumps({"audio_filepath": f"audio/{split}/{plan['name']}.flac",
                                       "duration": plan["duration"],
                                       "text": plan["text"]}) + "\n")
    os.replace(manifest_path + ".tmp", manifest_path)
    seconds = sum(lengths) / SAMPLE_RATE
    voices = len({(p["accent"], p["variant"]) for p in plans})
    print(f"{split}: {len(plans)} utterances, {seconds / 3600:.3f} hours, "
          f"{len({p['text'] for p in plans})} sentences, {voices} voices -> {manifest_path}")
    return seconds

# ---- outputs besides the audio -------------------------------------------------------------


SYNTHESIS_COLUMNS = ("audio_filepath", "split", "accent", "variant", "rate", "pitch", "gap",
                     "noise", "snr_db", "peak_dbfs", "collection", "speakable")


def write_synthesis_table(path, plans_by_split):
    with open(path, "w", encoding="utf-8", newline="\n") as table:
        table.write("\t".join(SYNTHESIS_COLUMNS) + "\n")
        for split in SPLITS:
            for plan in plans_by_split[split]:
                row = dict(plan, audio_filepath=f"audio/{split}/{plan['name']}.flac")
                table.write("\t".join(str(row[c]) for c in SYNTHESIS_COLUMNS) + "\n")


def package_version(name):
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name],
                              capture_output=True, text=True)
    except OSError:
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def write_attribution(path, args, stats, accents, variants, hours):
    def paragraph(text):
        return textwrap.fill(text, width=100, break_on_hyphens=False) + "\n"

    copyright_path = "/usr/share/doc/fortunes/copyright"
    parts = [
        "# English corpus: attribution\n",
        paragraph(f"Made by scripts/make-english-corpus.py --size {args.size} --seed {args.seed} "
                  "of the ds2 project: synthetic speech, no recordings of people. "
                  + ", ".join(f"{split} {hours[split]:.3f} h" for split in SPLITS) + "."),
        "## Text\n",
        paragraph("Sentences from the fortune files of the Debian packages fortunes "
                  f"({package_version('fortunes')}) and fortunes-min "
                  f"({package_version('fortunes-min')}), in {args.fortunes} (sentences kept of "
                  "those read: "
                  + ", ".join(f"{name} {kept}/{seen}" for name, (seen, kept) in stats.items())
                  + "), split into sentences, numbers spelled out, punctuation and case removed. "
                  "The fortune files come from BSD fortune(6) (Ken Arnold; the Linux port by "
                  "Florian LaRoche, files reworked by Amy A. Lewis; Debian packaging by Pascal "
                  "Hakim and Joshua Kwan) and are distributed under the BSD licence of "
                  f"{copyright_path}, copied below; the quotations in them name their authors."),
    ]
    if os.path.exists(copyright_path):
        with open(copyright_path, encoding="utf-8", errors="replace") as f:
            parts.append(f"{copyright_path}:\n\n```\n{f.read().rstrip()}\n```\n")
    parts += [
        "## Speech\n",
        paragraph(f"Synthesized by eSpeak NG {espeak_version()} (GPL-3.0-or-later), accents "
                  f"{', '.join(accents)}, variants {', '.join(variants)}; resampled to 16 kHz by "
                  "SoX; white, pink and brown noise generated by the script. Keep this file "
                  "with the corpus when passing it on."),
    ]
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("\n".join(parts))


def build_lm(out, train_sentences):
    """Writes DIR/train-text.txt (every training-side sentence) and DIR/lm-3gram.arpa from it
    with scripts/build-arpa.py (run in DIR, so the ARPA header names no absolute path)."""
    with open(os.path.join(out, "train-text.txt"), "w", encoding="utf-8", newline="\n") as text:
        for transcript, _, _ in sorted(train_sentences):
            text.write(transcript + "\n")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build-arpa.py")
    subprocess.run([sys.executable, script, "train-text.txt", "-o", "lm-3gram.arpa"],
                   cwd=out, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="corpus folder to write")
    parser.add_argument("--size", choices=sorted(SIZES), default="small",
                        help="utterances per split: " + "; ".join(
                            f"{size} {c['train']}/{c['dev']}/{c['test']}"
                            for size, c in SIZES.items()))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fortunes", default=FORTUNE_DIR, help="folder of the fortune files")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="parallel synthesis processes and flac encoders")
    args = parser.parse_args()
    for tool, package in (("espeak-ng", "espeak-ng"), ("sox", "sox"), ("flac", "flac")):
        if shutil.which(tool) is None:
            sys.exit(f"make-english-corpus: the `{tool}` command is missing "
                     f"(apt-get install {package}, or scripts/install-deps.sh)")
    if args.jobs < 1:
        sys.exit("make-english-corpus: --jobs must be >= 1")
    counts = SIZES[args.size]

    triples, stats = load_sentences(args.fortunes, COLLECTIONS)
    sentences = split_sentences(triples, counts, random.Random(f"english-corpus:{args.seed}:text"))
    accents = english_accents()
    check_variants(VARIANTS, espeak_data_dir())
    combos = split_voices(accents, VARIANTS, args.seed)
    print(f"{len(triples)} sentences ({len(sentences['train'])} train-side), "
          f"{len(accents)} accents x {len(VARIANTS)} variants: "
          + ", ".join(f"{split} {len(combos[split])}" for split in SPLITS) + " combinations")
    plans = {split: plan_utterances(split, sentences[split], combos[split], counts[split],
                                    args.seed)
             for split in SPLITS}

    for kind in NOISE_TYPES:
        NOISE[kind] = make_noise(kind, args.seed, NOISE_SECONDS * SAMPLE_RATE)
    os.makedirs(args.out, exist_ok=True)
    hours = {}
    with tempfile.TemporaryDirectory(prefix="english-corpus-") as tmp_dir, \
            multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for split in SPLITS:
            hours[split] = build_split(split, plans[split], args.out, pool, args.jobs,
                                       tmp_dir) / 3600
    write_synthesis_table(os.path.join(args.out, "synthesis.tsv"), plans)
    build_lm(args.out, sentences["train"])
    write_attribution(os.path.join(args.out, "ATTRIBUTION.md"), args, stats, accents, VARIANTS,
                      hours)
    # The corpus is built, not committed, wherever it is written (e.g. data/english/ here).
    with open(os.path.join(args.out, ".gitignore"), "w", encoding="utf-8") as ignore:
        ignore.write("*\n")


if __name__ == "__main__":
    main()
