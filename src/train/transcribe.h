// Transcription of recordings of any length, with word timings and confidences.
//
//   ds2::TranscribeOptions opt;                 // 20 s windows with 2 s overlap, 8 per batch
//   opt.word_timings = true;
//   ds2::Transcriber tr(am, decoder, opt);
//   tr.run({"a.wav", "long.flac"}, [](const ds2::Transcript& t) {
//     if (!t.error.empty()) return report(t.error);
//     printf("%s\t%s\n", t.path.c_str(), t.text.c_str());
//     for (const ds2::WordTiming& w : t.words) printf("%s %.2f-%.2f\n", ...);
//   });
//
// Long recordings: a recording longer than `window_s` is cut into windows of `window_s` seconds
// that overlap by `overlap_s` (the last one ends with the recording, overlapping more), each
// window starting on an output-frame boundary (a multiple of hop * conv time stride samples), so
// output frame f of a window is frame first + f of the whole recording. The network runs on the
// windows in batches; the logits are stitched by frame, each window keeping the frames from the
// middle of its overlap with the previous window to the middle of its overlap with the next, so
// every kept frame is at least overlap/2 away from a window edge, where the convolutions' padding
// and the recurrence's missing context distort the output. The whole recording's logits are then
// decoded at once (greedy or beam search + LM), so no word is cut at a window boundary. Memory is
// bounded by one batch of windows plus the recording's samples and logits (1 h of 16 kHz audio: 230
// MB of samples, logits of a few tens of MB), whatever the recording's length. With utterance
// feature normalization every window is normalized with the statistics of the whole recording
// (an extra spectrogram pass over it), as without windowing. A recording of at most `window_s`
// seconds is one window: exactly what the network computes without windowing.
//
// Word timings come from the CTC alignment: with a greedy decoder the best path (the argmax
// class of every frame), otherwise the most probable path that spells the decoded text
// (ctc/ctc_alignment.h). Output frame t covers [t * d, (t + 1) * d) seconds, d =
// output_frame_seconds() = hop * conv time stride / sample rate. A word starts at the first
// frame of its first character and ends at the end of the last frame of its last character
// (clamped to the recording's duration). A word's confidence is the mean posterior probability
// of its characters' frames on that path; the utterance's confidence is the mean of its words'
// (with no words: the mean posterior of the path's frames, i.e. how sure the model is that
// nothing was said).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "train/acoustic_model.h"
#include "train/evaluate.h"
#include "train/text_decoder.h"

namespace ds2 {

struct TranscribeOptions {
  int batch_size = 8;      // windows per forward pass
  int threads = 2;         // featurizing and decoding threads
  double window_s = 20.0;  // longer recordings are cut into windows of this length; 0: never
  double overlap_s = 2.0;  // overlap of neighbouring windows
  bool word_timings = false;
};

struct WordTiming {
  std::string word;
  double start_s = 0;
  double end_s = 0;
  double confidence = 0;
};

struct Transcript {
  std::string path;
  std::string error;  // "PATH: reason" when the recording could not be transcribed
  double duration_s = 0;
  int windows = 0;                // network windows the recording was cut into
  std::string text;               // words separated by single spaces
  double confidence = 0;          // with word_timings
  std::vector<WordTiming> words;  // with word_timings
};

class Transcriber {
 public:
  // `am` and `decoder` must outlive the Transcriber. Throws on invalid options.
  Transcriber(AcousticModel& am, const TextDecoder& decoder, const TranscribeOptions& options);

  // Transcribes `paths` and calls `emit` once per path, in order, as soon as a recording and
  // all before it are done (recordings are processed in groups of about batch_size windows).
  void run(const std::vector<std::string>& paths,
           const std::function<void(const Transcript&)>& emit);

  // The model's output for `samples` (at the featurizer's sample rate), windowed and stitched as
  // described above; `windows` (may be null) receives the number of windows.
  UtteranceLogits logits(const std::vector<float>& samples, int* windows = nullptr);

  // Seconds per output frame: hop * conv time stride / sample rate.
  double output_frame_seconds() const;

 private:
  struct Window {
    int recording;
    int64_t first_sample, num_samples;
    int first_frame;  // output frame of the whole recording where this window starts
    int frames = 0;   // output frames of this window
    UtteranceLogits out;
  };
  struct Recording;

  std::vector<Window> plan(int recording, int64_t num_samples) const;
  // With utterance normalization and several windows: the feature mean and deviation of the
  // whole recording, which every window is normalized with.
  void recording_stats(Recording& recording) const;
  // Runs the network on `windows` (their samples in `recordings`), batch by batch.
  void compute(std::vector<Recording>& recordings, std::vector<Window*>& windows);
  UtteranceLogits stitch(const std::vector<Window>& windows) const;
  void finish(Recording& recording) const;

  AcousticModel& am_;
  const TextDecoder& decoder_;
  TranscribeOptions options_;
  int frame_samples_;  // samples per output frame
  int64_t window_samples_, step_samples_;
};

// Words of a transcript from per-frame log-probabilities ({frames, classes}, frame-major) and
// the CTC path chosen for each frame; words are the labels between the alphabet's spaces.
std::vector<WordTiming> words_from_path(const std::vector<float>& log_probs, int classes,
                                        const std::vector<int>& path, const Alphabet& alphabet,
                                        double frame_seconds, double duration_s,
                                        double* utterance_confidence);

}  // namespace ds2
