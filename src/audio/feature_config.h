// Settings of the audio front-end and of data augmentation (YAML sections `features` and
// `augment`; defaults are the documented ones, see configs/README.md).
//
//   ds2::FeatureConfig fc;  fc.sample_rate = 8000;  fc.type = "mel";
//   ds2::FeatureExtractor fx(fc);
#pragma once

#include <string>

namespace ds2 {

struct FeatureConfig {
  int sample_rate = 16000;         // audio is resampled to this rate before featurizing
  double window_ms = 20.0;         // analysis window length
  double hop_ms = 10.0;            // frame shift
  std::string window = "hamming";  // hamming | hann
  std::string type = "linear";  // linear: log power spectrogram (DS2); mel: log-mel; mfcc: cepstra
  int n_mels = 40;              // mel bands when type == mel or mfcc
  int n_ceps = 13;              // cepstra kept when type == mfcc (orthonormal DCT-II of log-mel)
  bool remove_dc = false;       // subtract each frame's mean before windowing
  double preemphasis = 0.0;     // x[i] -= p * x[i-1] per frame (0 = off; 0.97 is common)
  std::string normalize = "utterance";  // utterance | global | none
};

struct AugmentConfig {
  double speed_min = 1.0;  // speed perturbation factor range (resampling; 1 = off)
  double speed_max = 1.0;
  double gain_db = 0.0;     // random gain in [-gain_db, +gain_db]
  double noise_prob = 0.0;  // probability of adding noise (white, or from noise_manifest)
  std::string
      noise_manifest;  // JSON-lines list of noise recordings ("audio_filepath"); empty = white
  double noise_snr_min_db = 10.0;
  double noise_snr_max_db = 40.0;
  double freq_warp = 0.0;   // frequency-axis warp: factor in [1 - w, 1 + w] (0 = off)
  int freq_masks = 0;       // SpecAugment: number of frequency masks
  int freq_mask_width = 0;  // maximum width in feature bins
  int time_masks = 0;       // SpecAugment: number of time masks
  int time_mask_width = 0;  // maximum width in frames
};

}  // namespace ds2
