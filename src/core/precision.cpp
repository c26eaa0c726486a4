#include "core/precision.h"

#include "core/error.h"

namespace ds2 {

const char* precision_name(Precision p) {
  return p == Precision::kBf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  DS2_FAIL("precision '" << name << "' is not one of fp32, bf16");
}

}  // namespace ds2
