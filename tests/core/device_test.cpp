#include "core/device.h"

#include <gtest/gtest.h>

namespace ds2 {
namespace {

TEST(Devices, ReportIsConsistent) {
  DeviceReport r = query_devices();
#ifdef DS2_HAVE_CUDA
  EXPECT_TRUE(r.cuda_built);
#else
  EXPECT_FALSE(r.cuda_built);
#endif
  EXPECT_EQ(static_cast<int>(r.names.size()), r.cuda_devices);
  if (r.cuda_devices == 0) {
    EXPECT_FALSE(r.note.empty());
    GTEST_SKIP() << "no GPU here: " << r.note;
  }
}

}  // namespace
}  // namespace ds2
