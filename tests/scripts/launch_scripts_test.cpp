// The multi-GPU scripts run where CI can run them: bench-scaling.sh with CPU ranks (the table,
// speedup and efficiency columns, the per-GPU-batch and overhead split), and launch-multinode.sh's
// dry run (rank count, mapping, NCCL environment). (held-out-speakers.sh has its own ctest entry,
// tests/scripts/held_out_speakers_test.sh, run alone: it loads every core.)
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/mpi_session_dir.h"
#include "support/run_command.h"

namespace ds2 {
namespace {
using testing::run_command;

const std::string kSource = DS2_SOURCE_DIR;

TEST(BenchScaling, CpuRanksGiveATableWithEfficiency) {
#ifndef DS2_HAVE_MPI
  GTEST_SKIP() << "this ds2 was built without MPI";
#endif
  if (run_command("mpirun --version").code != 0) GTEST_SKIP() << "mpirun is not installed";
  if (run_command("nvidia-smi -L").code == 0) GTEST_SKIP() << "GPUs present: CPU ranks not used";
  const testing::MpiSessionDir mpi;
  const auto r = run_command(mpi.env() + " DS2=" + std::string(DS2_BINARY) + " bash " + kSource +
                             "/scripts/bench-scaling.sh --gpus '1 2' --batches 4 --seconds 1 "
                             "--steps 2 --config " +
                             kSource + "/configs/fsdd.yaml -- run.device=cpu run.threads=1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("batch  GPUs  per-GPU"), std::string::npos) << r.output;
  // 1 rank is the baseline; 2 ranks have 2 utterances each and a measured communication wait.
  EXPECT_NE(r.output.find("\n4      1     4 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1.00     100.0%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n4      2     2 "), std::string::npos) << r.output;
  // Several ranks: one rank alone at the per-GPU batch splits the efficiency (two more columns).
  EXPECT_NE(r.output.find("per-GPU batch  overhead"), std::string::npos) << r.output;
  const size_t row = r.output.find("\n4      2     2 ");
  const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  EXPECT_EQ(std::count(line.begin(), line.end(), '%'), 3) << line;
  EXPECT_EQ(line.substr(line.size() - 3), " ms") << line;
}

TEST(BenchScaling, RejectsAnUnknownOption) {
  const auto r = run_command("bash " + kSource + "/scripts/bench-scaling.sh --gpu 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown option '--gpu'"), std::string::npos) << r.output;
}

TEST(LaunchMultinode, DryRunPlacesRanksPerNodeWithNcclEnvironment) {
  const auto r = run_command("bash " + kSource +
                             "/scripts/launch-multinode.sh --hosts node1,node2 --gpus-per-node 4 "
                             "--net-if eth0 --dry-run train configs/ds2-large.yaml");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* part :
       {"-np 8", "node1:4", "node2:4", "--map-by ppr:4:node", "--bind-to none",
        "NCCL_NVLS_ENABLE=0", "NCCL_SOCKET_IFNAME=eth0", "train configs/ds2-large.yaml"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  const auto missing = run_command("bash " + kSource + "/scripts/launch-multinode.sh train x.yaml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("--gpus-per-node is required"), std::string::npos);
}

}  // namespace
}  // namespace ds2
