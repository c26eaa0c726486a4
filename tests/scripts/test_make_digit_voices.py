"""Tests scripts/make-digit-voices.py: it rebuilds the committed data/voices takes bit for bit.

    python3 -m unittest discover -s tests/scripts
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "make-digit-voices.py")
VOICES = os.path.join(REPO, "data", "voices")

spec = importlib.util.spec_from_file_location("make_fsdd_corpus",
                                              os.path.join(REPO, "scripts", "make-fsdd-corpus.py"))
corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corpus)

spec = importlib.util.spec_from_file_location("make_digit_voices", SCRIPT)
voices = importlib.util.module_from_spec(spec)
spec.loader.exec_module(voices)

TOOLS = ("flite", "text2wave", "sox", "flac")
HAVE_TOOLS = all(shutil.which(t) for t in TOOLS) and os.path.isdir(
    "/usr/share/asterisk/sounds/en/digits")


class CommittedVoicesTest(unittest.TestCase):
    def test_every_voice_has_40_takes_of_every_digit(self):
        rows = corpus.load_index(VOICES)
        self.assertEqual(len(rows), 7 * 10 * 40)
        with tempfile.TemporaryDirectory() as tmp:
            clips = corpus.decode_clips(VOICES, rows, tmp)
        for key, pcm in clips.items():
            seconds = len(pcm) / 2 / 8000
            self.assertTrue(0.15 < seconds < 2.0, f"{key}: {seconds:.2f} s")

    @unittest.skipUnless(HAVE_TOOLS, "needs flite, festival, sox, flac and the Asterisk digits "
                                     "(scripts/install-deps.sh)")
    def test_regenerated_takes_equal_the_committed_ones(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "v")
            # Take 0 of each digit: a take's rate, pitch and level depend only on the seed, the
            # voice, the digit and the take, so one take reproduces the first of forty.
            subprocess.run([sys.executable, SCRIPT, "--out", out, "--takes", "1",
                            "--voices", "kal,ked,allison", "--jobs", "2"], check=True,
                           stdout=subprocess.DEVNULL)
            fresh_rows = corpus.load_index(out)
            self.assertEqual(len(fresh_rows), 3 * 10)
            fresh = corpus.decode_clips(out, fresh_rows, tmp)
            committed = corpus.decode_clips(VOICES, corpus.load_index(VOICES), tmp)
            for key, pcm in fresh.items():
                self.assertEqual(pcm, committed[key], key)

    def test_the_default_voices_are_the_committed_ones(self):
        committed = {r["speaker"] for r in corpus.load_index(VOICES)}
        self.assertEqual(set(voices.DEFAULT_VOICES), committed)

    def test_every_accented_voice_has_ten_respelled_words_in_its_encoding(self):
        languages = {v.language for v in voices.VOICES.values() if v.language}
        self.assertEqual(languages, set(voices.RESPELLED))
        for language, (encoding, words) in voices.RESPELLED.items():
            self.assertEqual(len(words), 10, language)
            for word in words:
                word.encode(encoding)  # raises if festival's front end could not read it

    def test_unknown_voice_is_refused_by_name(self):
        result = subprocess.run([sys.executable, SCRIPT, "--out", "/nonexistent/x", "--voices",
                                 "kal,hal9000"], capture_output=True, text=True)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("unknown voice 'hal9000'", result.stderr)


if __name__ == "__main__":
    unittest.main()
