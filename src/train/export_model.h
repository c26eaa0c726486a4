// Model export: a checkpoint's inference weights and everything needed to use them, in one
// standard safetensors file that any safetensors reader (Python's `safetensors`, or json + numpy)
// can load without ds2.
//
//   ds2::ExportSummary s = ds2::export_model("runs/fsdd/best.ckpt", "fsdd.safetensors");
//   printf("%d tensors, %lld values\n", s.tensors, (long long)s.values);
//
// Layout (safetensors): an 8-byte little-endian header length N, N bytes of JSON header (padded
// with spaces to a multiple of 8), then the tensors' raw little-endian float32 data back to back
// in model order, without gaps. The header maps every tensor name to {"dtype": "F32", "shape":
// [...], "data_offsets": [begin, end]} (byte offsets into the data) and holds "__metadata__", a
// string-to-string map:
//   format          "ds2-export-1"
//   config          the resolved YAML config the model was trained with (features, model, ...)
//   alphabet        JSON array of the output symbols: class k (k >= 1) is alphabet[k - 1]; class 0
//                   is the CTC blank
//   model           JSON object: num_classes, blank (0), input_features, sample_rate, window_ms,
//                   hop_ms, feature_type, normalize, conv_time_stride, output_frame_seconds
//                   (hop * conv time stride), parameters and buffers (the tensor names of each
//                   kind, in model order), parameter_count
//   feature_mean, feature_stddev   JSON arrays, only when features.normalize is "global"
//   source, source_step, source_epoch   the checkpoint exported (step/epoch when it records them)
//   ds2.crc32c      JSON object: CRC-32C of every tensor's bytes (readers may ignore it)
// Tensor names are the checkpoint's: the trainable parameters ("conv0.weight", "rnn0.fwd.W",
// "fc.bias", ...; see nn/model.h) and the batch-norm running statistics ("conv0.bn.running_mean",
// ...), which inference needs (a model with model.batch_norm_statistics: utterance has none: it
// normalizes each utterance by its own frames, as the config in the metadata says); training state
// that a checkpoint may also hold (optimizer moments, ...) is left out. The exported file is itself
// a ds2 checkpoint: `ds2 transcribe` and `ds2 eval` accept it. It is written atomically (temporary
// file, fsync, rename).
#pragma once

#include <cstdint>
#include <string>

#include "train/acoustic_model.h"
#include "train/checkpoint.h"

namespace ds2 {

struct ExportSummary {
  int tensors = 0;
  int64_t values = 0;
  int64_t bytes = 0;  // file size
};

// The export of a model, without writing it (metadata as above, less the source_* keys).
Checkpoint export_checkpoint(const AcousticModel& am);

// Loads `checkpoint_path`, checks it rebuilds its model, and writes the export to `out_path`.
ExportSummary export_model(const std::string& checkpoint_path, const std::string& out_path);

}  // namespace ds2
