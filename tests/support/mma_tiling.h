// A tensor-core persistent-RNN tiling as a plan would build it, for host-side tests of the
// kernels' layout and kernel choice (tests/kernels/persistent_rnn_mma_*_test.cpp): tagged
// exchange, fp32 split (bf16_weights false) unless the test says otherwise.
//
//   ds2::kernels::PrnnTiling t = ds2::kernels::tagged_mma_tiling(1152, 4, 24, 48);
//   t.bf16_weights = true;  // then a bf16 tiling of the same shape
#pragma once

#include "kernels/persistent_rnn.h"
#include "kernels/persistent_rnn_mma.h"

namespace ds2::kernels {

// `rows` rows a CTA on `ctas` CTAs, batch up to `max_batch`.
inline PrnnTiling tagged_mma_tiling(int hidden, int max_batch, int rows, int ctas) {
  PrnnTiling t;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.tensor_cores = true;
  t.tagged_exchange = true;
  t.threads = kPrnnMmaThreads;
  t.rows_per_cta = rows;
  t.ctas_per_direction = ctas;
  return t;
}

}  // namespace ds2::kernels
