// Test support: runs a shell command as a user would and captures what it prints.
//
//   ds2::testing::CommandResult r = ds2::testing::run_command(std::string(DS2_BINARY) + " --help");
//   EXPECT_EQ(r.code, 0);
//   r = ds2::testing::run_command("printf 'a\\n' | ds2 transcribe CKPT -", /*stderr_too=*/false);
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ds2::testing {

struct CommandResult {
  int code = -1;       // exit status (-1: did not exit normally)
  std::string output;  // stdout, and stderr too when asked
};

inline CommandResult run_command(const std::string& command, bool stderr_too = true) {
  const std::string cmd = "(" + command + ")" + (stderr_too ? " 2>&1" : "");
  CommandResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Quotes `s` for a POSIX shell.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace ds2::testing
