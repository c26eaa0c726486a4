// A private Open MPI session folder for the mpirun commands of one test. ctest runs tests in
// parallel, and mpiruns that share /tmp/ompi.<host>.<uid> race: one's cleanup removes that folder
// while another creates its own in it ("mkdir /tmp/ompi.vm.0/pid.N: No such file or directory",
// then orte_init fails; seen once in CI). Short on purpose: Open MPI puts Unix sockets there,
// whose paths may not exceed 107 bytes.
//
//   ds2::testing::MpiSessionDir mpi;
//   run_command(mpi.env() + " mpirun -np 2 ds2 train ...");
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "support/run_command.h"

namespace ds2::testing {

class MpiSessionDir {
 public:
  MpiSessionDir() {
    char name[] = "/tmp/ompiXXXXXX";
    if (mkdtemp(name) == nullptr) throw std::runtime_error("MpiSessionDir: mkdtemp failed");
    path_ = name;
  }
  ~MpiSessionDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  MpiSessionDir(const MpiSessionDir&) = delete;
  MpiSessionDir& operator=(const MpiSessionDir&) = delete;

  // The environment assignment to put before `mpirun` (Open MPI makes its session folder under
  // TMPDIR).
  std::string env() const { return "TMPDIR=" + shell_quote(path_); }

 private:
  std::string path_;
};

}  // namespace ds2::testing
