#!/usr/bin/env python3
"""Builds an ARPA back-off n-gram language model from a text corpus, for ds2's beam search.

    scripts/build-arpa.py corpus.txt -o lm.arpa                 # one sentence per line, order 3
    scripts/build-arpa.py --order 2 --manifest train.jsonl -o lm.arpa   # the "text" of a manifest

Smoothing: interpolated Kneser-Ney with one absolute discount per order,
D_n = n1 / (n1 + 2 n2) (n1, n2: the numbers of n-grams of order n whose count is 1 and 2;
0.5 when either is zero). Counts are Kneser-Ney's adjusted counts: raw counts for the highest
order and for n-grams that begin with <s>, otherwise the number of distinct words seen before
the n-gram. For context h, word w and h' = h without its oldest word:

    P(w | h) = max(a(h w) - D, 0) / S(h) + gamma(h) * P(w | h'),
    S(h) = sum_v a(h v),  gamma(h) = D * |{v : a(h v) > 0}| / S(h),

and the unigram level interpolates with the uniform distribution over the vocabulary (every
corpus word, </s> and <unk>), which is where <unk> gets its probability. The interpolated model
is written in back-off form: each listed n-gram carries its full interpolated log10 probability
and each context its log10 gamma(h) as the backoff weight, so P(w | h) of an unlisted n-gram is
gamma(h) * P(w | h'), and every context's distribution sums to 1 over the vocabulary.

Words are the whitespace-separated tokens of each line, taken as they are (no case folding);
blank lines are skipped. The output starts with one comment line saying how it was made (ARPA
readers ignore text before \\data\\). The same input always gives the same bytes.
Uses only the Python standard library.
"""

import argparse
import json
import math
import os
import sys
from collections import defaultdict

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
MAX_ORDER = 5


def read_sentences(path, manifest):
    """Returns the token lists of the corpus (or of the manifest's "text" fields)."""
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    sentences = []
    with stream:
        for line_no, line in enumerate(stream, start=1):
            if manifest:
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)["text"]
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"build-arpa: {path}:{line_no}: not a manifest line with a text: {e}")
            else:
                text = line
            words = text.split()
            if not words:
                continue
            for w in words:
                if w in (BOS, EOS, UNK):
                    sys.exit(f"build-arpa: {path}:{line_no}: the corpus uses the reserved "
                             f"token {w}")
            sentences.append(words)
    if not sentences:
        sys.exit(f"build-arpa: {path}: no sentences")
    return sentences


def count_ngrams(sentences, order):
    """Raw counts: counts[n][ngram tuple] for n = 1..order, over <s> w1 .. wk </s>."""
    counts = [None] + [defaultdict(int) for _ in range(order)]
    for words in sentences:
        padded = [BOS] + words + [EOS]
        for n in range(1, order + 1):
            for i in range(len(padded) - n + 1):
                counts[n][tuple(padded[i:i + n])] += 1
    return counts


def adjusted_counts(counts, order):
    """Kneser-Ney adjusted counts (see the module comment)."""
    adjusted = [None] + [dict() for _ in range(order)]
    adjusted[order] = dict(counts[order])
    for n in range(order - 1, 0, -1):
        left_words = defaultdict(int)
        for ngram in counts[n + 1]:
            left_words[ngram[1:]] += 1
        for ngram, raw in counts[n].items():
            adjusted[n][ngram] = raw if ngram[0] == BOS else left_words[ngram]
    # <s> is never predicted: it only starts contexts.
    adjusted[1].pop((BOS,), None)
    return adjusted


def discount(adjusted_n):
    n1 = sum(1 for c in adjusted_n.values() if c == 1)
    n2 = sum(1 for c in adjusted_n.values() if c == 2)
    if n1 == 0 or n2 == 0:
        return 0.5
    return n1 / (n1 + 2 * n2)


def build(sentences, order):
    """Returns (vocabulary, probs, backoffs, discounts): probs[n][ngram] = P(last | rest) for
    every seen n-gram, backoffs[n][context] = gamma(context) for contexts of order n."""
    counts = count_ngrams(sentences, order)
    adjusted = adjusted_counts(counts, order)
    vocab = sorted({w for words in sentences for w in words} | {EOS, UNK})
    discounts = [None] + [discount(adjusted[n]) for n in range(1, order + 1)]

    probs = [None] + [dict() for _ in range(order)]
    backoffs = [None] + [dict() for _ in range(order)]  # keyed by the context's own order

    # Totals per context for each order: S(h) and the number of distinct continuations.
    for n in range(1, order + 1):
        d = discounts[n]
        total = defaultdict(int)
        types = defaultdict(int)
        for ngram, a in adjusted[n].items():
            total[ngram[:-1]] += a
            types[ngram[:-1]] += 1
        gamma = {h: d * types[h] / total[h] for h in total}
        if n == 1:
            uniform = 1.0 / len(vocab)
            g = gamma[()]
            for w in vocab:
                a = adjusted[1].get((w,), 0)
                probs[1][(w,)] = max(a - d, 0) / total[()] + g * uniform
        else:
            for ngram, a in adjusted[n].items():
                h = ngram[:-1]
                lower = lower_prob(probs, backoffs, ngram[1:])
                probs[n][ngram] = max(a - d, 0) / total[h] + gamma[h] * lower
            for h, g in gamma.items():
                backoffs[n - 1][h] = g
    return vocab, probs, backoffs, discounts


def lower_prob(probs, backoffs, ngram):
    """P(ngram[-1] | ngram[:-1]) in back-off form, from the orders built so far."""
    n = len(ngram)
    if ngram in probs[n]:
        return probs[n][ngram]
    return backoffs[n - 1].get(ngram[:-1], 1.0) * lower_prob(probs, backoffs, ngram[1:])


def log10(p):
    return math.log10(p)


def write_arpa(out, vocab, probs, backoffs, order, comment):
    out.write(f"# {comment}\n\n\\data\\\n")
    # Unigrams: the vocabulary plus <s>; higher orders: the seen n-grams.
    entries = [None, [(BOS,)] + [(w,) for w in vocab]]
    for n in range(2, order + 1):
        entries.append(sorted(probs[n]))
    for n in range(1, order + 1):
        out.write(f"ngram {n}={len(entries[n])}\n")
    for n in range(1, order + 1):
        out.write(f"\n\\{n}-grams:\n")
        for ngram in entries[n]:
            prob = "-99" if ngram == (BOS,) else f"{log10(probs[n][ngram]):.6f}"
            line = prob + "\t" + " ".join(ngram)
            if n < order and ngram in backoffs[n]:
                line += f"\t{log10(backoffs[n][ngram]):.6f}"
            out.write(line + "\n")
    out.write("\n\\end\\\n")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Build an ARPA n-gram LM (interpolated Kneser-Ney) from a text corpus.")
    parser.add_argument("corpus", help="text file, one sentence per line ('-' = stdin)")
    parser.add_argument("-o", "--output", required=True, help="ARPA file to write")
    parser.add_argument("--order", type=int, default=3, help=f"n-gram order, 1-{MAX_ORDER}")
    parser.add_argument("--manifest", action="store_true",
                        help="the corpus is a JSON-lines manifest: use each line's \"text\"")
    args = parser.parse_args(argv)
    if not 1 <= args.order <= MAX_ORDER:
        sys.exit(f"build-arpa: --order must be in 1..{MAX_ORDER}, got {args.order}")
    sentences = read_sentences(args.corpus, args.manifest)
    vocab, probs, backoffs, discounts = build(sentences, args.order)
    tokens = sum(len(s) for s in sentences)
    comment = (f"scripts/build-arpa.py --order {args.order}"
               f"{' --manifest' if args.manifest else ''} {args.corpus}: interpolated "
               f"Kneser-Ney, discounts {', '.join(f'{d:.3f}' for d in discounts[1:])}; "
               f"{len(sentences)} sentences, {tokens} words, vocabulary {len(vocab) - 2} "
               f"+ </s> <unk>")
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        write_arpa(out, vocab, probs, backoffs, args.order, comment)
    os.replace(tmp, args.output)
    print(f"{args.output}: order {args.order}, "
          + ", ".join(f"{len(probs[n]) + (1 if n == 1 else 0)} {n}-grams"
                      for n in range(1, args.order + 1)))


if __name__ == "__main__":
    main()
