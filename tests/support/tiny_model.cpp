#include "support/tiny_model.h"

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "audio/audio_io.h"
#include "core/error.h"
#include "train/config.h"
#include "train/trainer.h"

namespace ds2::testing {
namespace {

const char* const kWords[] = {"zero", "one", "two",   "three", "four",
                              "five", "six", "seven", "eight", "nine"};

// The kTinyDigits recordings of one speaker, keyed by (digit, take).
struct Takes {
  int rate = 0;
  std::map<std::pair<int, int>, std::vector<float>> audio;
};

Takes load_takes(const std::string& speaker) {
  const std::string data = std::string(DS2_SOURCE_DIR) + "/data/fsdd/";
  std::ifstream index(data + "index.tsv");
  DS2_CHECK(index, data << "index.tsv: missing");
  Takes takes;
  const std::vector<float> all = read_audio(data + speaker + ".flac", &takes.rate);
  std::string line;
  std::getline(index, line);  // header
  while (std::getline(index, line)) {
    std::istringstream row(line);
    std::string spk, file;
    int digit, take;
    int64_t start, count;
    row >> spk >> digit >> take >> file >> start >> count;
    if (spk != speaker || take >= kTinyTakes) continue;
    for (int d : kTinyDigits)
      if (d == digit)
        takes.audio[{digit, take}].assign(all.begin() + start, all.begin() + start + count);
  }
  return takes;
}

// Appends a pause of `seconds` of faint uniform noise.
void add_pause(std::vector<float>& out, double seconds, int rate, std::mt19937& rng) {
  std::uniform_real_distribution<float> noise(-0.002f, 0.002f);
  for (int64_t i = 0; i < static_cast<int64_t>(seconds * rate); ++i) out.push_back(noise(rng));
}

}  // namespace

std::string write_connected_digits(const std::filesystem::path& dir, const std::string& speaker,
                                   int count, int seed, const std::string& name) {
  const Takes takes = load_takes(speaker);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> words(1, 3), digit(0, 2), take(0, kTinyTakes - 1);
  std::uniform_real_distribution<double> pause(0.1, 0.3);
  std::ofstream manifest(dir / name);
  for (int u = 0; u < count; ++u) {
    std::vector<float> audio;
    std::string text;
    add_pause(audio, pause(rng), takes.rate, rng);
    for (int w = 0, n = words(rng); w < n; ++w) {
      const int d = kTinyDigits[digit(rng)];
      const std::vector<float>& rec = takes.audio.at({d, take(rng)});
      audio.insert(audio.end(), rec.begin(), rec.end());
      add_pause(audio, pause(rng), takes.rate, rng);
      text += (text.empty() ? "" : " ") + std::string(kWords[d]);
    }
    const std::string wav = std::filesystem::path(name).stem().string() + "_" + speaker + "_" +
                            std::to_string(u) + ".wav";
    write_audio((dir / wav).string(), audio, takes.rate);
    manifest << "{\"audio_filepath\": \"" << wav
             << "\", \"duration\": " << static_cast<double>(audio.size()) / takes.rate
             << ", \"text\": \"" << text << "\"}\n";
  }
  return (dir / name).string();
}

std::string train_tiny_model(const std::filesystem::path& dir, const std::string& manifest,
                             int epochs, const std::vector<std::string>& overrides) {
  // Overrides, not assignments after parsing: the checkpoint keeps the resolved config, and
  // what starts from it (train.init_from, self-training) reads its paths there.
  std::vector<std::string> all = {
      "run.dir=" + (dir / "run").string(), "data.train_manifest=" + manifest,
      "data.dev_manifest=" + manifest, "train.epochs=" + std::to_string(epochs)};
  all.insert(all.end(), overrides.begin(), overrides.end());
  Config cfg = parse_config(
      "run: {seed: 3, threads: 2}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 32}\n"
      "model: {conv: [{channels: 8, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1,"
      " rnn_hidden: 48}\n"
      "optim: {lr: 0.005, schedule: cosine}\n"
      "train: {batch_size: 8, log_every: 1000}\n",
      all);
  Trainer(cfg).run();
  return (dir / "run" / "best.ckpt").string();
}

Spliced splice_digits(const std::filesystem::path& dir, const std::string& speaker, double seconds,
                      const std::string& name, int seed) {
  const Takes takes = load_takes(speaker);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> pause(0.15, 0.4);
  Spliced out;
  std::vector<float> audio;
  add_pause(audio, pause(rng), takes.rate, rng);
  for (int i = 0; static_cast<double>(audio.size()) / takes.rate < seconds; ++i) {
    const int d = kTinyDigits[i % 3];
    const std::vector<float>& rec = takes.audio.at({d, (i / 3) % kTinyTakes});
    audio.insert(audio.end(), rec.begin(), rec.end());
    add_pause(audio, pause(rng), takes.rate, rng);
    out.text += (out.text.empty() ? "" : " ") + std::string(kWords[d]);
    ++out.words;
  }
  out.path = (dir / name).string();
  out.seconds = static_cast<double>(audio.size()) / takes.rate;
  write_audio(out.path, audio, takes.rate);
  return out;
}

TinyModel& shared_tiny_model() {
  static TinyModel model;
  static const bool trained = [] {
    model.manifest = write_connected_digits(model.dir.path(), "george", 40);
    model.checkpoint = train_tiny_model(model.dir.path(), model.manifest);
    return true;
  }();
  (void)trained;
  return model;
}

}  // namespace ds2::testing
