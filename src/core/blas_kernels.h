// Which OpenBLAS kernels the process runs. OpenBLAS builds for many CPUs at once (DYNAMIC_ARCH, as
// Debian's) pick their kernels from the CPU model at load. Where a hypervisor hides the model
// ("Intel(R) Xeon(R) Processor") that pick can fall back to Prescott, SSE3 kernels: on this
// project's 2-core AVX-512 machine the digits recipe's step ran 2.5x slower on them than on the
// SkylakeX kernels (README, "The CPU backend's threads"). OPENBLAS_CORETYPE chooses the kernels,
// but OpenBLAS reads it when it loads, before main: so a main that wants better kernels sets it
// and runs itself again.
//
//   int main(int argc, char** argv) {
//     ds2::rerun_with_better_blas_kernels(argv);    // first: returns unless nothing changes
//     ...
//   std::cout << ds2::blas_kernels();             // "OpenBLAS SkylakeX kernels"
#pragma once

#include <string>

namespace ds2 {

// This CPU's widest vector instructions as OpenBLAS's kernels use them: "avx512" (F, CD, BW, DQ
// and VL), "avx2" (with FMA), "avx" or "sse"; "" off x86.
std::string cpu_vector_isa();

// The OPENBLAS_CORETYPE for a CPU of `cpu_isa` (cpu_vector_isa()'s names) where its vectors are
// wider than those of `current` (OpenBLAS's name for the kernels it picked): "SkylakeX"
// (avx512), "Haswell" (avx2) or "Sandybridge" (avx). "" where `current` is no narrower, or
// either name is one this table does not know (a newer OpenBLAS's core, a CPU off x86).
std::string wider_openblas_core(const std::string& current, const std::string& cpu_isa);

// OpenBLAS's name for the kernels it runs ("Prescott", "SkylakeX", ...).
std::string openblas_core();

// "OpenBLAS <core> kernels", and why where not by OpenBLAS's own pick: "(chosen for this CPU;
// OpenBLAS's own pick: Prescott)" after rerun_with_better_blas_kernels, "(OPENBLAS_CORETYPE)"
// where the user set it.
std::string blas_kernels();

// Where OPENBLAS_CORETYPE is unset and wider_openblas_core(openblas_core(), cpu_vector_isa())
// names kernels, sets it and replaces the process with /proc/self/exe and the same arguments.
// Returns where there is nothing to change or the exec fails (the process then runs on
// OpenBLAS's own pick). Call it first thing in main, before any thread or file is opened.
void rerun_with_better_blas_kernels(char** argv);

}  // namespace ds2
