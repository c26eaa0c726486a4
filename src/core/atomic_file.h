// Atomic file writes: the content goes to a temporary file in the same folder, is fsync'ed, then
// renamed over the target and the folder fsync'ed, so a reader (or a crash) sees either the old
// file or the complete new one, never a partial write.
//
//   ds2::write_file_atomic("runs/x/config.yaml", yaml_text);
#pragma once

#include <string>

namespace ds2 {

void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);

}  // namespace ds2
