// Fault injection for testing how a distributed run ends when a rank fails: the environment
// variable DS2_FAULT=KIND@RANK:STEP makes rank RANK, on reaching step STEP, either die at once
// (kind "kill": SIGKILL, as a crash or the OOM killer would) or stop answering (kind "hang": it
// sleeps, as a rank stuck in a driver call would). Unset, it does nothing.
//
//   DS2_FAULT=hang@1:3 mpirun -np 2 ds2 train cfg.yaml dist.timeout_s=5
//   dist::inject_fault(world.rank(), step);     // in the training loop
#pragma once

#include <cstdint>
#include <string>

namespace ds2::dist {

struct Fault {
  std::string kind;  // "kill" | "hang"; empty = none
  int rank = -1;
  int64_t step = -1;
};

// Parses DS2_FAULT's value; throws with the expected form on anything else.
Fault parse_fault(const std::string& text);
// Acts on DS2_FAULT (read once) when it names this rank and step.
void inject_fault(int rank, int64_t step);

}  // namespace ds2::dist
