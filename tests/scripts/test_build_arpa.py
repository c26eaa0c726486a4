"""Tests scripts/build-arpa.py: the ARPA file it writes is well formed and every context's
distribution sums to 1 over the vocabulary and </s>.

    python3 -m unittest discover -s tests/scripts
"""

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "build-arpa.py")


def read_arpa(path):
    """Returns (header counts, {ngram tuple: (log10 prob, log10 backoff)}), checking the layout."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    at = lines.index("\\data\\")
    counts = {}
    i = at + 1
    while lines[i].startswith("ngram "):
        n, c = lines[i][6:].split("=")
        counts[int(n)] = int(c)
        i += 1
    entries = {}
    seen = {}
    n = 0
    for line in lines[i:]:
        if not line:
            continue
        if line == "\\end\\":
            break
        if line.startswith("\\"):
            n = int(line[1:line.index("-")])
            seen[n] = 0
            continue
        fields = line.split()
        assert len(fields) in (n + 1, n + 2), line
        ngram = tuple(fields[1:n + 1])
        assert ngram not in entries, line
        backoff = float(fields[n + 1]) if len(fields) == n + 2 else 0.0
        entries[ngram] = (float(fields[0]), backoff)
        seen[n] += 1
    assert seen == counts, (seen, counts)
    return counts, entries


def log10_prob(entries, context, word):
    """Back-off scoring, the way an ARPA reader does it."""
    ngram = tuple(context) + (word,)
    if ngram in entries:
        return entries[ngram][0]
    backoff = entries[tuple(context)][1] if tuple(context) in entries else 0.0
    return backoff + log10_prob(entries, context[1:], word)


def build(corpus_lines, order, *extra, manifest=False):
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            for line in corpus_lines:
                f.write((json.dumps({"text": line}) if manifest else line) + "\n")
        out = os.path.join(tmp, "lm.arpa")
        subprocess.run([sys.executable, SCRIPT, corpus, "-o", out, "--order", str(order), *extra],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        return (*read_arpa(out), text)


def sample_corpus(seed, n):
    rng = random.Random(seed)
    words = ["one", "two", "three", "four", "five", "oh"]
    # Skewed, with some fixed phrases, so that many n-grams have counts 1 and 2 and others many.
    lines = []
    for _ in range(n):
        k = rng.randint(1, 6)
        sentence = [rng.choice(words[:3]) if rng.random() < 0.7 else rng.choice(words)
                    for _ in range(k)]
        if rng.random() < 0.2:
            sentence = ["four", "five"] + sentence
        lines.append(" ".join(sentence))
    return lines


class BuildArpaTest(unittest.TestCase):
    def check_normalized(self, entries, order):
        vocab = [w for (w,) in (g for g in entries if len(g) == 1) if w != "<s>"]
        self.assertIn("</s>", vocab)
        self.assertIn("<unk>", vocab)
        contexts = [()] + [g for g in entries if len(g) < order and g[-1] != "</s>"]
        for context in contexts:
            total = sum(10 ** log10_prob(entries, context, w) for w in vocab)
            self.assertAlmostEqual(total, 1.0, delta=1e-4, msg=f"context {context}")
        return len(contexts)

    def test_every_context_sums_to_one(self):
        lines = sample_corpus(1, 300)
        for order in (1, 2, 3, 4):
            with self.subTest(order=order):
                counts, entries, _ = build(lines, order)
                self.assertEqual(sorted(counts), list(range(1, order + 1)))
                checked = self.check_normalized(entries, order)
                self.assertGreaterEqual(checked, 1 if order == 1 else 9)

    def test_small_corpus_by_hand(self):
        # Unigram model of "a a b": adjusted counts are raw for the highest order: a=2, b=1,
        # </s>=1, total 4; n1 = 2, n2 = 1 -> D = 2 / (2 + 2) = 0.5. gamma = 0.5 * 3 / 4 = 0.375
        # spread over the 4 vocabulary entries (a, b, </s>, <unk>).
        _, entries, text = build(["a a b"], 1)
        self.assertAlmostEqual(10 ** entries[("a",)][0], 1.5 / 4 + 0.375 / 4, places=5)
        self.assertAlmostEqual(10 ** entries[("b",)][0], 0.5 / 4 + 0.375 / 4, places=5)
        self.assertAlmostEqual(10 ** entries[("<unk>",)][0], 0.375 / 4, places=5)
        self.assertEqual(entries[("<s>",)][0], -99)
        self.assertTrue(text.startswith("# scripts/build-arpa.py --order 1 "), text[:80])
        # Bigram: "<s> a" begins with <s> -> raw count; P(a | <s>) interpolates with the
        # continuation unigram; the backoff weight of <s> is its gamma.
        _, entries, _ = build(["a a b", "a b"], 2)
        self.check_normalized(entries, 2)
        self.assertIn(("<s>", "a"), entries)
        self.assertNotIn(("<s>", "b"), entries)
        self.assertLess(entries[("<s>",)][1], 0)

    def test_manifest_input_and_determinism(self):
        lines = sample_corpus(2, 50)
        _, _, text1 = build(lines, 3)
        _, _, text2 = build(lines, 3, "--manifest", manifest=True)
        strip = lambda t: t[t.index("\\data\\"):]
        self.assertEqual(strip(text1), strip(text2))
        self.assertEqual(strip(build(lines, 3)[2]), strip(text1))

    def test_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.txt")
            with open(bad, "w", encoding="utf-8") as f:
                f.write("one two\nthree <s> four\n")
            r = subprocess.run([sys.executable, SCRIPT, bad, "-o", os.path.join(tmp, "x.arpa")],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertEqual(r.stderr.strip(),
                             f"build-arpa: {bad}:2: the corpus uses the reserved token <s>")
            r = subprocess.run([sys.executable, SCRIPT, bad, "-o", os.path.join(tmp, "x.arpa"),
                                "--order", "6"], capture_output=True, text=True)
            self.assertIn("--order must be in 1..5", r.stderr)


if __name__ == "__main__":
    unittest.main()
