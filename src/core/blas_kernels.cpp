#include "core/blas_kernels.h"

#include <cblas.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>

namespace ds2 {
namespace {

// Vector widths, narrowest first, by cpu_vector_isa()'s name, with the OpenBLAS kernels that use
// them (none for SSE: nothing narrower is ever asked for).
struct Level {
  const char* isa;
  const char* core;
};
constexpr Level kLevels[] = {
    {"sse", ""}, {"avx", "Sandybridge"}, {"avx2", "Haswell"}, {"avx512", "SkylakeX"}};
constexpr int kSse = 0, kAvx = 1, kAvx2 = 2, kAvx512 = 3, kUnknown = -1;

// OpenBLAS's x86-64 core names (driver/others/dynamic.c's list) by the widest vector instructions
// their sgemm kernels use; kUnknown for names not listed.
int level_of_core(const std::string& name) {
  static const struct {
    const char* name;
    int level;
  } kCores[] = {
      {"Prescott", kSse},    {"Core2", kSse},         {"Penryn", kSse},
      {"Dunnington", kSse},  {"Nehalem", kSse},       {"Atom", kSse},
      {"Athlon", kSse},      {"Opteron", kSse},       {"Opteron_SSE3", kSse},
      {"Barcelona", kSse},   {"Nano", kSse},          {"Bobcat", kSse},
      {"Katmai", kSse},      {"Coppermine", kSse},    {"Northwood", kSse},
      {"Banias", kSse},      {"Unknown", kSse},       {"Sandybridge", kAvx},
      {"Bulldozer", kAvx},   {"Piledriver", kAvx},    {"Steamroller", kAvx},
      {"Haswell", kAvx2},    {"Excavator", kAvx2},    {"Zen", kAvx2},
      {"SkylakeX", kAvx512}, {"Cooperlake", kAvx512}, {"SapphireRapids", kAvx512},
  };
  for (const auto& c : kCores)
    if (strcasecmp(name.c_str(), c.name) == 0) return c.level;
  return kUnknown;
}

int level_of_isa(const std::string& isa) {
  for (int i = 0; i < static_cast<int>(std::size(kLevels)); ++i)
    if (isa == kLevels[i].isa) return i;
  return kUnknown;
}

// Set before the exec: OpenBLAS's own pick, for blas_kernels() in the process that follows.
constexpr const char* kOwnPick = "DS2_OPENBLAS_OWN_CORE";

}  // namespace

std::string cpu_vector_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512cd"))
    return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  return "sse";
#else
  return "";  // not x86: OpenBLAS's own pick stands
#endif
}

std::string wider_openblas_core(const std::string& current, const std::string& cpu_isa) {
  const int can = level_of_isa(cpu_isa), have = level_of_core(current);
  if (can == kUnknown || have == kUnknown || can <= have) return "";
  return kLevels[can].core;
}

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string blas_kernels() {
  std::string s = "OpenBLAS " + openblas_core() + " kernels";
  const char* own = std::getenv(kOwnPick);
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (own && *own)
    s += std::string(" (chosen for this CPU; OpenBLAS's own pick: ") + own + ")";
  else if (forced && *forced)
    s += " (OPENBLAS_CORETYPE)";
  return s;
}

void rerun_with_better_blas_kernels(char** argv) {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced && *forced) return;  // chosen by the user, or by the run before this exec
  const std::string own = openblas_core();
  const std::string core = wider_openblas_core(own, cpu_vector_isa());
  if (core.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  setenv(kOwnPick, own.c_str(), 1);
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // the exec failed: OpenBLAS's own pick runs, and says so
  unsetenv(kOwnPick);
}

}  // namespace ds2
