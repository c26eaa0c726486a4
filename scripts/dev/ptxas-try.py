#!/usr/bin/env python3
"""Registers and spills of chosen tensor-core persistent kernels, in seconds instead of minutes.

A full ptxas of kernels/persistent_rnn_mma.cu takes 4-5 minutes on two cores; a copy whose
prnn_mma_kernel names only the instantiations under test takes ~10 s. Which fragments a kernel
keeps in registers is decided by ptxas's spills (bf16_register_k_tiles and its neighbours), so
each rule there was found this way (kernels/NOTES.md, sessions 61-62).

  # registers and spill bytes of two kernels as the source stands:
  python3 scripts/dev/ptxas-try.py '<3,6,4,true,kBf16,kGruForward>' '<1,18,1,true,kBf16,kGruBackward>'
  # the same after a literal source edit (each OLD must occur exactly once), e.g. a rule tried:
  python3 scripts/dev/ptxas-try.py --replace 'return kpw < 3 ? kpw : 3;' 'return kpw < 2 ? kpw : 2;' \
      '<3,6,4,true,kBf16,kGruForward>'

A kernel is <MT, KPW, NT, tags, form, cell>: form kBf16, kFp16Split or kStackedSplit, cell kRelu,
kGruForward or kGruBackward (the template arguments of prnn_mma_kernel_t). The copy is compiled
in a temporary directory; the tree is not touched. Needs nvcc (CUDA 12.x or 13, sm_90).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "kernels", "persistent_rnn_mma.cu")
FORMS = {"kBf16", "kFp16Split", "kStackedSplit"}
CELLS = {"kRelu", "kGruForward", "kGruBackward"}


def parse_kernel(text):
    parts = [p.strip() for p in text.strip().strip("<>").split(",")]
    if len(parts) != 6 or parts[3] not in ("true", "false") or parts[4] not in FORMS or \
            parts[5] not in CELLS or not all(p.isdigit() for p in parts[:3]):
        sys.exit(f"ptxas-try: '{text}' is not <MT,KPW,NT,true|false,form,cell> "
                 f"(forms {sorted(FORMS)}, cells {sorted(CELLS)})")
    return parts


def source_with(kernels, replacements):
    src = open(SOURCE).read()
    for old, new in replacements:
        count = src.count(old)
        if count != 1:
            sys.exit(f"ptxas-try: --replace text occurs {count} times in {SOURCE}, not once: {old!r}")
        src = src.replace(old, new)
    start = src.index("const void* prnn_mma_kernel(const PrnnTiling& t) {")
    end = src.index("\n}\n", start)
    cases = "".join(
        f"    case {i}: return reinterpret_cast<const void*>(prnn_mma_kernel_t<{k[0]}, {k[1]}, "
        f"{k[2]}, {k[3]}, MmaForm::{k[4]}, MmaCell::{k[5]}>);\n"
        for i, k in enumerate(kernels))
    body = ("const void* prnn_mma_kernel(const PrnnTiling& t) {\n"
            "  switch (t.rows_per_cta) {\n" + cases + "    default: return nullptr;\n  }")
    return src[:start] + body + src[end:]


def report(log):
    pattern = re.compile(r"prnn_mma_kernel_tILi(\d+)ELi(\d+)ELi(\d+)ELb(\d)ELNS\d_7MmaFormE(\d)"
                         r"ELNS\d_7MmaCellE(\d)")
    forms = ["kBf16", "kFp16Split", "kStackedSplit"]
    cells = ["kRelu", "kGruForward", "kGruBackward"]
    current, spill, rows = None, 0, []
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = pattern.search(m.group(1))
            continue
        m = re.search(r"(\d+) bytes spill stores", line)
        if m:
            spill = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            mt, kpw, nt, tags, form, cell = current.groups()
            name = (f"<{mt}, {kpw}, {nt}, {'true' if tags == '1' else 'false'}, "
                    f"{forms[int(form)]}, {cells[int(cell)]}>")
            rows.append(f"{name:52} {m.group(1):>4} registers  {spill:>4} bytes spilled")
            current = None
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="+", help="<MT,KPW,NT,tags,form,cell>")
    ap.add_argument("--replace", nargs=2, action="append", default=[], metavar=("OLD", "NEW"),
                    help="a literal edit of the source copy first (repeatable)")
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    args = ap.parse_args()
    kernels = [parse_kernel(k) for k in args.kernels]
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, "ptxas_try.cu")
        with open(cu, "w") as f:
            f.write(source_with(kernels, args.replace))
        cmd = [args.nvcc, "-I" + os.path.join(ROOT, "src"), "-I" + ROOT, "-DDS2_HAVE_CUDA=1",
               "-O3", "-DNDEBUG", "-std=c++17", "--generate-code=arch=compute_90,code=sm_90",
               "-Xptxas", "-v", "-c", cu, "-o", os.path.join(tmp, "ptxas_try.o")]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stdout + run.stderr)
            sys.exit(f"ptxas-try: nvcc failed ({run.returncode})")
    rows = report(run.stdout + run.stderr)
    if len(rows) != len(kernels):
        sys.exit(f"ptxas-try: expected {len(kernels)} kernels in ptxas's report, found {len(rows)}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
