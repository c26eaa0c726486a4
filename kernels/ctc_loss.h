// CTC loss and its gradient on the GPU, with the contract of the CPU reference src/ctc/ctc_loss.h
// (which see): time-major raw activations [T, B, K], class 0 the blank, labels 1..K-1,
// loss[b] = -log p(label_b | x_b) over the first input_lengths[b] frames, gradient = softmax minus
// the posterior class occupancy on valid frames and exactly 0 on padding frames, +inf loss and an
// all-zero gradient for an utterance that cannot be aligned. Log space, double arithmetic.
// The API follows warp-ctc: the caller owns the workspace (size from a query) and the stream.
//
//   size_t bytes = ds2::kernels::ctc_workspace_bytes(T, B, K, max_label_length);
//   workspace.reserve(bytes);                         // grow-only, e.g. a DeviceArray<uint8_t>
//   ds2::kernels::ctc_loss(logits, T, B, K, input_lengths, labels, label_offsets,
//                          max_label_length, losses, gradient /* or nullptr */,
//                          workspace.data(), bytes, stream);
//
// src/ctc/cuda/ctc_loss_cuda.h wraps this for host labels and DeviceSequences.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ds2::kernels {

// Bytes of device workspace ctc_loss needs for these sizes: the log-softmax [B, T, K] and the
// alpha and beta lattices [B, T, 2*max_label_length+1] in double, plus O(B * max_label_length)
// small arrays. Grows with T * max_label_length like the CPU reference; there is no label-length
// limit beyond memory.
size_t ctc_workspace_bytes(int max_frames, int batch, int alphabet_size, int max_label_length);

// Computes per-utterance losses and, when `gradient` is not null, d loss / d logits, on `stream`,
// returning without waiting. All pointers are device pointers.
//   logits            [max_frames, batch, alphabet_size] float, unnormalized activations; padding
//                     frames are never read
//   input_lengths     [batch], each in [0, max_frames]
//   labels            all label sequences concatenated, values in [1, alphabet_size-1]
//   label_offsets     [batch+1]: utterance b's label is labels[label_offsets[b] ..
//                     label_offsets[b+1]); every length <= max_label_length (empty allowed)
//   losses            [batch] double output
//   gradient          [max_frames, batch, alphabet_size] float output, every element written
//                     (padding frames 0), or nullptr for the loss only. May alias `logits`.
//   workspace         at least ctc_workspace_bytes(...) bytes, 8-byte aligned (cudaMalloc's is)
// The host checks the sizes; the preconditions on device data (lengths, label values, offsets)
// are the caller's (CudaCtcLoss checks them on the host). Deterministic: no atomics on floats.
void ctc_loss(const float* logits, int max_frames, int batch, int alphabet_size,
              const int* input_lengths, const int* labels, const int* label_offsets,
              int max_label_length, double* losses, float* gradient, void* workspace,
              size_t workspace_bytes, cudaStream_t stream);

}  // namespace ds2::kernels
