// Fault injection for testing how a run copes when a rank fails: the environment variable
// DS2_FAULT=KIND@RANK:STEP makes rank RANK, on reaching step STEP, die at once (kind "kill":
// SIGKILL, as a crash or the OOM killer would), stop answering (kind "hang": it sleeps, as a rank
// stuck in a driver call would), or produce non-finite gradients (kind "nan": the caller scales
// that step's loss gradient by NaN, as an overflow would). Unset, it does nothing.
//
//   DS2_FAULT=hang@1:3 mpirun -np 2 ds2 train cfg.yaml dist.timeout_s=5
//   const bool poison = dist::inject_fault(world.rank(), step);   // in the training loop
#pragma once

#include <cstdint>
#include <string>

namespace ds2::dist {

struct Fault {
  std::string kind;  // "kill" | "hang" | "nan"; empty = none
  int rank = -1;
  int64_t step = -1;
};

// Parses DS2_FAULT's value; throws with the expected form on anything else.
Fault parse_fault(const std::string& text);
// Acts on DS2_FAULT (read once) the first time it names this rank and step; true when this step's
// gradients are to be poisoned (kind "nan").
bool inject_fault(int rank, int64_t step);

}  // namespace ds2::dist
