// Sequences: a batch of variable-length sequences stored time-major, so one GEMM covers every
// timestep of every utterance and a timestep's batch rows are contiguous for the recurrence.
//
//   data shape {T, B, F}      for recurrent/linear layers (frame t of utterance b at (t*B+b)*F)
//   data shape {T, B, C, F}   for the convolutional front-end (C channels over F frequencies)
//   lengths[b]                valid frames of utterance b; frames t >= lengths[b] are padding.
//
// Layers must leave padding frames of their outputs at exactly zero and never let padding
// influence valid frames, so a result never depends on what else is in the batch.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace ds2 {

struct Sequences {
  Tensor data;
  std::vector<int> lengths;

  int64_t time() const { return data.dim(0); }
  int64_t batch() const { return data.dim(1); }
  // Features per frame (C*F for 4-D data).
  int64_t frame_size() const {
    const int64_t frames = data.dim(0) * data.dim(1);
    return frames > 0 ? data.numel() / frames : 0;
  }
};

// Sets every padding frame (t >= lengths[b]) of `seq` to zero.
void zero_padding(Sequences& seq);

// Throws ds2::Error naming `where` unless `seq` has rank >= 3, one length per batch entry, and
// every length within [0, T].
void check_sequences(const Sequences& seq, const std::string& where);
// The same check on a shape and its lengths (shared with the GPU's DeviceSequences).
void check_sequence_shape(const Shape& shape, const std::vector<int>& lengths,
                          const std::string& where);

}  // namespace ds2
