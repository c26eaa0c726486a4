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

  # where each spilled register is stored and reloaded, against the step loop (nvdisasm):
  python3 scripts/dev/ptxas-try.py --where '<3,6,4,true,kBf16,kGruForward>'

--where needs nvdisasm (CUDA's, not on this machine's toolkit): PyPI's nvidia-cuda-nvdisasm wheel
has it (`pip install --target .tools/nvdisasm nvidia-cuda-nvdisasm`; found there, on PATH, in
/usr/local/cuda/bin or by --nvdisasm). A spill outside the step loop costs once a launch, which is
how the GRU forward's `<3, 6>` at four n-tiles came to run (prnn_mma_allowed_local_bytes, which
names each kernel allowed local memory).

A kernel is <MT, KPW, NT, tags, form, cell>: form kBf16, kFp16Split or kStackedSplit, cell kRelu,
kGruForward or kGruBackward (the template arguments of prnn_mma_kernel_t). The copy is compiled
in a temporary directory; the tree is not touched. Needs nvcc (CUDA 12.x or 13, sm_90).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "kernels", "persistent_rnn_mma.cu")
# In the order of MmaForm's and MmaCell's enumerators (kernels/persistent_rnn_mma.cu): a mangled
# name carries their values.
FORMS = ["kBf16", "kFp16Split", "kStackedSplit"]
CELLS = ["kRelu", "kGruForward", "kGruBackward"]


def parse_kernel(text):
    parts = [p.strip() for p in text.strip().strip("<>").split(",")]
    if len(parts) != 6 or parts[3] not in ("true", "false") or parts[4] not in FORMS or \
            parts[5] not in CELLS or not all(p.isdigit() for p in parts[:3]):
        sys.exit(f"ptxas-try: '{text}' is not <MT,KPW,NT,true|false,form,cell> "
                 f"(forms {FORMS}, cells {CELLS})")
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


KERNEL = re.compile(r"prnn_mma_kernel_tILi(\d+)ELi(\d+)ELi(\d+)ELb(\d)ELNS\d_7MmaFormE(\d)"
                    r"ELNS\d_7MmaCellE(\d)")


def kernel_name(mangled):
    """'<MT, KPW, NT, tags, form, cell>' of a mangled prnn_mma_kernel_t (None: another function)."""
    m = KERNEL.search(mangled)
    if not m:
        return None
    mt, kpw, nt, tags, form, cell = m.groups()
    return (f"<{mt}, {kpw}, {nt}, {'true' if tags == '1' else 'false'}, "
            f"{FORMS[int(form)]}, {CELLS[int(cell)]}>")


def report(log):
    """(name, registers and spills) of each kernel in ptxas's -v log."""
    current, spill, frame, rows = None, 0, 0, []
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = kernel_name(m.group(1))
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m:
            frame, spill = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            # The stack frame is the local memory a launch reports (cudaFuncAttributes::
            # localSizeBytes), which the plans compare with prnn_mma_allowed_local_bytes.
            rows.append((current, f"{current:52} {m.group(1):>4} registers  {spill:>4} bytes "
                                  f"spilled  {frame:>4} bytes stack frame"))
            current = None
    return rows


def find_nvdisasm(given):
    candidates = [given] if given else []
    candidates += [shutil.which("nvdisasm") or "", "/usr/local/cuda/bin/nvdisasm",
                   os.path.join(ROOT, ".tools", "nvdisasm", "nvidia", "cu13", "bin", "nvdisasm")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("ptxas-try: --where needs nvdisasm: pip install --target .tools/nvdisasm "
             "nvidia-cuda-nvdisasm, or pass --nvdisasm PATH")


def spill_sites(sass, source_lines):
    """Each local store/load (STL/LDL) of a kernel's SASS with its source line and whether it sits
    in the step loop: the widest backward branch's span (every other loop of the kernel, the
    fragments' loads before it and the steps' inner loops, is narrower or outside it)."""
    address = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*)")
    label_at, branches, sites, line, pending = {}, [], [], None, []
    for text in sass.splitlines():
        m = re.search(r'//## File "(.*)", line (\d+)', text)
        if m:
            line = (m.group(1), int(m.group(2)))
            continue
        m = re.match(r"\s*(\.L_x_\d+):", text)
        if m:
            pending.append(m.group(1))
            continue
        m = address.search(text)
        if not m:
            continue
        at, op = int(m.group(1), 16), m.group(2)
        for label in pending:
            label_at[label] = at
        pending = []
        b = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", op)
        if b:
            branches.append((at, b.group(1)))
        if re.search(r"\b(STL|LDL)(\.\S+)?\b", op):
            sites.append((at, re.sub(r"\s*\(\*.*?\*\)", "", op.split(";")[0]).strip(), line))
    loops = [(label_at[l], at) for at, l in branches if l in label_at and label_at[l] < at]
    step_loop = max(loops, key=lambda span: span[1] - span[0]) if loops else None
    rows = []
    for at, op, line in sites:
        where = ("in the step loop" if step_loop and step_loop[0] <= at <= step_loop[1]
                 else "before the step loop" if step_loop and at < step_loop[0]
                 else "after the step loop")
        # The copy's own lines are the source's; an inlined header's are named.
        file, number = line if line else ("?", 0)
        if file.endswith("ptxas_try.cu") and 0 < number <= len(source_lines):
            place = f"line {number}: {source_lines[number - 1].strip()[:60]}"
        else:
            place = f"{os.path.basename(file)}:{number}"
        rows.append(f"  {at:#07x}  {op:34} {where:21} {place}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="+", help="<MT,KPW,NT,tags,form,cell>")
    ap.add_argument("--replace", nargs=2, action="append", default=[], metavar=("OLD", "NEW"),
                    help="a literal edit of the source copy first (repeatable)")
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    ap.add_argument("--where", action="store_true",
                    help="list each spill's store and load against the step loop (nvdisasm)")
    ap.add_argument("--nvdisasm", default=os.environ.get("NVDISASM", ""))
    args = ap.parse_args()
    nvdisasm = find_nvdisasm(args.nvdisasm) if args.where else None
    kernels = [parse_kernel(k) for k in args.kernels]
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, "ptxas_try.cu")
        with open(cu, "w") as f:
            f.write(source_with(kernels, args.replace))
        # --where: a cubin with line info (the copy keeps the source's line numbers up to
        # prnn_mma_kernel, past every kernel's body).
        out = os.path.join(tmp, "ptxas_try.cubin" if args.where else "ptxas_try.o")
        cmd = [args.nvcc, "-I" + os.path.join(ROOT, "src"), "-I" + ROOT, "-DDS2_HAVE_CUDA=1",
               "-O3", "-DNDEBUG", "-std=c++17", "--generate-code=arch=compute_90,code=sm_90",
               "-Xptxas", "-v"] + (["-cubin", "-lineinfo"] if args.where else ["-c"]) + \
              [cu, "-o", out]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stdout + run.stderr)
            sys.exit(f"ptxas-try: nvcc failed ({run.returncode})")
        sass = {}
        if args.where:
            dis = subprocess.run([nvdisasm, "-g", "-c", out], capture_output=True, text=True)
            if dis.returncode != 0:
                sys.exit(f"ptxas-try: nvdisasm failed: {dis.stderr.strip()}")
            # One section a kernel: its mangled name, then its instructions.
            for part in re.split(r"\n\s*\.text\.", dis.stdout)[1:]:
                name = kernel_name(part.split(":", 1)[0])
                if name:
                    sass[name] = part
    rows = report(run.stdout + run.stderr)
    if len(rows) != len(kernels):
        sys.exit(f"ptxas-try: expected {len(kernels)} kernels in ptxas's report, found {len(rows)}")
    source_lines = open(SOURCE).read().splitlines()
    for name, row in rows:
        print(row)
        if args.where:
            sites = spill_sites(sass.get(name, ""), source_lines)
            print("\n".join(sites) if sites else "  no local loads or stores")

if __name__ == "__main__":
    main()
