"""Tests scripts/make-fsdd-corpus.py against the committed data/fsdd/ pack.

    python3 -m unittest discover -s tests/scripts
"""

import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest
import wave

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "make-fsdd-corpus.py")
DATA = os.path.join(REPO, "data", "fsdd")
VOICES = os.path.join(REPO, "data", "voices")

spec = importlib.util.spec_from_file_location("make_fsdd_corpus", SCRIPT)
corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corpus)


def build(out_dir, *extra):
    subprocess.run([sys.executable, SCRIPT, "--out", out_dir, "--train", "6", "--dev", "3",
                    "--test", "4", "--adapt", "2", *extra], check=True, stdout=subprocess.DEVNULL)


def read_manifest(path):
    with open(path, encoding="utf-8") as manifest:
        return [json.loads(line) for line in manifest]


def decode(flac_path, tmp_dir):
    wav_path = os.path.join(tmp_dir, "decoded.wav")
    subprocess.run(["flac", "--silent", "--force", "-d", "-o", wav_path, flac_path], check=True)
    with wave.open(wav_path, "rb") as wav:
        return wav.readframes(wav.getnframes())


class SplitPoolsTest(unittest.TestCase):
    def test_every_recording_in_exactly_one_split(self):
        rows = corpus.load_index(DATA)
        self.assertEqual(len(rows), 2500)
        pools = corpus.split_pools(rows, "jackson", 45, 30)
        self.assertEqual(sorted(pools["test"]), ["jackson"])
        self.assertEqual(pools["test"]["jackson"][7], list(range(30)))
        self.assertEqual(sorted(pools["adapt"]), ["jackson"])
        self.assertEqual(pools["adapt"]["jackson"][7], list(range(30, 50)))
        self.assertEqual(sorted(pools["train"]), ["george", "lucas", "nicolas", "yweweler"])
        self.assertEqual(pools["train"]["lucas"][3], list(range(45)))
        self.assertEqual(pools["dev"]["lucas"][3], list(range(45, 50)))
        whole = corpus.split_pools(rows, "george", 45, 50)
        self.assertEqual(whole["test"]["george"][0], list(range(50)))
        self.assertEqual(whole["adapt"], {})


class BuildTest(unittest.TestCase):
    def test_same_seed_same_bytes_and_audio_matches_plan(self):
        with tempfile.TemporaryDirectory() as tmp:
            first, second = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            build(first)
            build(second, "--jobs", "1")
            for split in corpus.SPLITS:
                with open(os.path.join(first, f"{split}.jsonl"), "rb") as a, \
                        open(os.path.join(second, f"{split}.jsonl"), "rb") as b:
                    self.assertEqual(a.read(), b.read())
            audio = os.path.join("audio", "dev", "dev_00002.flac")
            with open(os.path.join(first, audio), "rb") as a, \
                    open(os.path.join(second, audio), "rb") as b:
                self.assertEqual(a.read(), b.read())

            # Re-draw the dev plans the way the script does and check the audio holds each
            # planned clip, unchanged, exactly after its planned silence.
            rows = corpus.load_index(DATA)
            pools = corpus.split_pools(rows, "jackson", 45, 30)
            plans = corpus.plan_utterances(pools["dev"], 3, random.Random("fsdd-corpus:1:dev"))
            with tempfile.TemporaryDirectory() as decode_dir:
                clips = corpus.decode_clips(DATA, rows, decode_dir)
                entries = read_manifest(os.path.join(first, "dev.jsonl"))
                self.assertEqual(len(entries), 3)
                for number, (entry, plan) in enumerate(zip(entries, plans)):
                    self.assertEqual(entry["audio_filepath"], f"audio/dev/dev_{number:05d}.flac")
                    self.assertEqual(entry["text"], corpus.transcript(plan))
                    pcm = decode(os.path.join(first, entry["audio_filepath"]), decode_dir)
                    self.assertAlmostEqual(entry["duration"], len(pcm) / 2 / 8000, places=3)
                    offset = 0
                    for silence, (digit, take) in zip(plan["silences"], plan["words"]):
                        self.assertIn(take, range(45, 50))
                        clip = clips[(plan["speaker"], digit, take)]
                        offset += silence * 2
                        self.assertEqual(pcm[offset:offset + len(clip)], clip)
                        offset += len(clip)
                    self.assertEqual(len(pcm), offset + plan["silences"][-1] * 2)

    def test_adapt_split_is_the_held_out_speakers_other_takes(self):
        with tempfile.TemporaryDirectory() as tmp:
            build(tmp, "--adapt", "5")
            self.assertEqual(len(read_manifest(os.path.join(tmp, "adapt.jsonl"))), 5)
            rows = corpus.load_index(DATA)
            pools = corpus.split_pools(rows, "jackson", 45, 30)
            plans = corpus.plan_utterances(pools["adapt"], 5, random.Random("fsdd-corpus:1:adapt"))
            for plan in plans:
                self.assertEqual(plan["speaker"], "jackson")
                for _, take in plan["words"]:
                    self.assertIn(take, range(30, 50))
            nothing_left = subprocess.run(
                [sys.executable, SCRIPT, "--out", os.path.join(tmp, "x"), "--test-takes", "50"],
                capture_output=True, text=True)
            self.assertNotEqual(nothing_left.returncode, 0)
            self.assertIn("leaves no take of jackson for --adapt", nothing_left.stderr)

    def test_extra_voices_join_train_only_and_leave_the_real_utterances_alone(self):
        with tempfile.TemporaryDirectory() as tmp:
            plain, extra = os.path.join(tmp, "plain"), os.path.join(tmp, "extra")
            build(plain)
            build(extra, "--extra-data", VOICES, "--extra-train", "5")
            voices = {row["speaker"] for row in corpus.load_index(VOICES)}
            self.assertEqual(len(voices), 7)
            train = read_manifest(os.path.join(extra, "train.jsonl"))
            self.assertEqual(len(train), 6 + 5)
            # The real speakers' utterances come first, byte for byte as without extras.
            self.assertEqual(train[:6], read_manifest(os.path.join(plain, "train.jsonl")))
            for number in range(6):
                audio = os.path.join("audio", "train", f"train_{number:05d}.flac")
                with open(os.path.join(plain, audio), "rb") as a, \
                        open(os.path.join(extra, audio), "rb") as b:
                    self.assertEqual(a.read(), b.read())
            self.assertTrue(all(entry["speaker"] in voices for entry in train[6:]))
            for split in ("dev", "test", "adapt"):
                for entry in read_manifest(os.path.join(extra, f"{split}.jsonl")):
                    self.assertNotIn(entry["speaker"], voices)
            # The extra utterances splice the voices' takes, unchanged, after their silences.
            plans = corpus.plan_utterances(
                {v: {d: list(range(40)) for d in range(10)} for v in sorted(voices)}, 5,
                random.Random("fsdd-corpus:1:train:extra"))
            with tempfile.TemporaryDirectory() as decode_dir:
                clips = corpus.decode_clips(VOICES, corpus.load_index(VOICES), decode_dir)
                for entry, plan in zip(train[6:], plans):
                    self.assertEqual(entry["text"], corpus.transcript(plan))
                    pcm = decode(os.path.join(extra, entry["audio_filepath"]), decode_dir)
                    offset = plan["silences"][0] * 2
                    digit, take = plan["words"][0]
                    clip = clips[(plan["speaker"], digit, take)]
                    self.assertEqual(pcm[offset:offset + len(clip)], clip)

    def test_extra_options_go_together_and_voices_must_not_clash(self):
        with tempfile.TemporaryDirectory() as tmp:
            alone = subprocess.run([sys.executable, SCRIPT, "--out", tmp, "--extra-train", "3"],
                                   capture_output=True, text=True)
            self.assertNotEqual(alone.returncode, 0)
            self.assertIn("--extra-data and --extra-train go together", alone.stderr)
            clash = subprocess.run([sys.executable, SCRIPT, "--out", tmp, "--extra-data", DATA,
                                    "--extra-train", "3"], capture_output=True, text=True)
            self.assertNotEqual(clash.returncode, 0)
            self.assertIn("speakers also in --data", clash.stderr)

    def test_transcript_spells_digits(self):
        plan = {"speaker": "x", "words": [(3, 0), (1, 4), (0, 2)], "silences": [0, 0, 0, 0]}
        self.assertEqual(corpus.transcript(plan), "three one zero")


if __name__ == "__main__":
    unittest.main()
