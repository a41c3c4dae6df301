// Being written.
#include "CudaTestUtil.h"
TEST(Placeholder, Gpu) { ZRT_REQUIRE_GPU(); }
