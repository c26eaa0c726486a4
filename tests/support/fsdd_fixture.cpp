#include "support/fsdd_fixture.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "audio/audio_io.h"
#include "core/error.h"

namespace ds2::testing {

std::string write_digit_manifest(const std::filesystem::path& dir, const std::string& speaker,
                                 const std::vector<int>& digits, int takes,
                                 const std::string& name) {
  static const char* kWords[] = {"zero", "one", "two",   "three", "four",
                                 "five", "six", "seven", "eight", "nine"};
  const std::string data = std::string(DS2_SOURCE_DIR) + "/data/fsdd/";
  std::ifstream index(data + "index.tsv");
  DS2_CHECK(index, data << "index.tsv: missing");
  int rate = 0;
  const std::vector<float> audio = read_audio(data + speaker + ".flac", &rate);
  std::ofstream manifest(dir / name);
  std::string line;
  std::getline(index, line);  // header
  while (std::getline(index, line)) {
    std::istringstream row(line);
    std::string spk, file;
    int digit, take;
    int64_t start, count;
    row >> spk >> digit >> take >> file >> start >> count;
    if (spk != speaker || take >= takes) continue;
    bool wanted = false;
    for (int d : digits) wanted |= d == digit;
    if (!wanted) continue;
    const std::string wav =
        speaker + "_" + std::to_string(digit) + "_" + std::to_string(take) + ".wav";
    write_audio((dir / wav).string(),
                std::vector<float>(audio.begin() + start, audio.begin() + start + count), rate);
    manifest << "{\"audio_filepath\": \"" << wav
             << "\", \"duration\": " << static_cast<double>(count) / rate << ", \"text\": \""
             << kWords[digit] << "\"}\n";
  }
  return (dir / name).string();
}

}  // namespace ds2::testing
