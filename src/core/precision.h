// Arithmetic precision of the GPU's matrix work: fp32 throughout, or bf16 operands with fp32
// accumulation (mixed precision: cuBLAS GEMMs on tensor cores, persistent RNN weights held on chip
// in bf16). Master weights, gradients and optimizer state stay fp32 either way.
//
//   ds2::Precision p = ds2::parse_precision("bf16");   // throws on anything but fp32 | bf16
//   std::cout << ds2::precision_name(p);               // "bf16"
#pragma once

#include <string>

namespace ds2 {

enum class Precision { kFp32, kBf16 };

const char* precision_name(Precision p);
Precision parse_precision(const std::string& name);

}  // namespace ds2
