#!/usr/bin/env python3
"""Word-level system combination (ROVER, Fiscus 1997) of several decodings of one test set.

A developer's measurement for the README, not part of ds2: it scores whether models that make
partly independent mistakes (other seeds, other test-time speeds) out-vote each other. Inputs are
the sclite trn files `ds2 eval --trn PREFIX` writes (PREFIX.ref.trn, PREFIX.hyp.trn), one
hypothesis file per system, all over the same utterances in the same order.

    scripts/dev/rover.py REF.trn HYP1.trn HYP2.trn ...      # each system's WER, then the vote's

Per utterance the hypotheses are aligned one after another into a word network (each new one
against every column so far, a mismatch costing the fraction of earlier systems it disagrees
with), and each column's most frequent entry wins; a gap winning drops the column. Ties go to the
system listed first. WER is (S + D + I) / N over the whole set.
"""
import sys

GAP = None


def read_trn(path):
    """The word lists of a trn file, in file order (the "(id)" at each line's end dropped)."""
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            text, _, _ = line.rstrip("\n").rpartition(" (")
            texts.append(text.split())
    return texts


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, row[0] = row[0], i
        for j in range(1, len(b) + 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return row[len(b)]


def add_to_network(columns, systems, hyp):
    """Aligns `hyp` to `columns` (lists of one entry per earlier system) and returns the new
    columns, one entry longer each."""
    n, m = len(columns), len(hyp)

    def disagree(column, word):
        return sum(x != word for x in column) / systems

    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    back = [[None] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            moves = []
            if i > 0:
                moves.append((cost[i - 1][j] + disagree(columns[i - 1], GAP), (i - 1, j)))
            if j > 0:
                moves.append((cost[i][j - 1] + 1.0, (i, j - 1)))
            if i > 0 and j > 0:
                moves.append((cost[i - 1][j - 1] + disagree(columns[i - 1], hyp[j - 1]), (i - 1, j - 1)))
            for c, b in moves:
                if c < cost[i][j]:
                    cost[i][j], back[i][j] = c, b
    out, i, j = [], n, m
    while (i, j) != (0, 0):
        pi, pj = back[i][j]
        if pi < i and pj < j:
            out.append(columns[i - 1] + [hyp[j - 1]])
        elif pi < i:
            out.append(columns[i - 1] + [GAP])
        else:
            out.append([GAP] * systems + [hyp[j - 1]])
        i, j = pi, pj
    return out[::-1]


def vote(hyps):
    columns = []
    for k, hyp in enumerate(hyps):
        columns = add_to_network(columns, k, hyp)
    words = []
    for column in columns:
        counts = {}
        for x in column:
            counts[x] = counts.get(x, 0) + 1
        best = max(counts.items(), key=lambda kv: (kv[1], kv[0] is not GAP))[0]
        if best is not GAP:
            words.append(best)
    return words


def wer(refs, hyps):
    return 100.0 * sum(edit_distance(r, h) for r, h in zip(refs, hyps)) / sum(len(r) for r in refs)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    refs = read_trn(argv[1])
    systems = [read_trn(p) for p in argv[2:]]
    for path, hyps in zip(argv[2:], systems):
        if len(hyps) != len(refs):
            sys.exit(f"rover.py: {path} has {len(hyps)} utterances, {argv[1]} has {len(refs)}")
        print(f"{wer(refs, hyps):6.2f}% {path}")
    combined = [vote([s[u] for s in systems]) for u in range(len(refs))]
    print(f"{wer(refs, combined):6.2f}% vote of {len(systems)}")


if __name__ == "__main__":
    main(sys.argv)
