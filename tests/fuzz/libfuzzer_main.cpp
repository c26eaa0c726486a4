// libFuzzer entry point for one target of fuzz_targets.h, chosen at compile time by
// DS2_FUZZ_ENTRY (CMakeLists.txt builds one binary per target with -DDS2_BUILD_FUZZERS=ON).
// An exception escaping the target (anything but a caught ds2::Error) aborts: a crash to report.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.h"

#ifndef DS2_FUZZ_ENTRY
#error "define DS2_FUZZ_ENTRY as one of the ds2::fuzz::fuzz_*_one functions"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ds2::fuzz::DS2_FUZZ_ENTRY(data, size);
}
