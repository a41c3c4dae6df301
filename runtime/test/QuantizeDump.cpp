//===- QuantizeDump.cpp - The quantization kernels on files ---------------===//
//
// Part of the zero-mlir project.
//
// zrt-quantize-dump DTYPE BITS N CHUNKS IN QUANTIZED DEQUANTIZED
//
// Reads CHUNKS * N elements of DTYPE (f32, bf16, f16) from IN, quantizes
// them with zrt_quantize into QUANTIZED and dequantizes that with
// zrt_dequantize into DEQUANTIZED: the raw buffers a test's independent
// model of the block quantization compares bit for bit.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/quantize.h"
#include "zero_rt/zrt.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

[[noreturn]] void fail(const char *message, const char *what) {
  std::fprintf(stderr, "zrt-quantize-dump: %s%s\n", message, what);
  std::exit(1);
}

std::vector<char> readFile(const char *path, size_t bytes) {
  std::FILE *f = std::fopen(path, "rb");
  if (!f)
    fail("cannot open ", path);
  std::vector<char> data(bytes);
  size_t got = std::fread(data.data(), 1, bytes, f);
  bool extra = std::fgetc(f) != EOF;
  std::fclose(f);
  if (got != bytes || extra)
    fail("wrong size: ", path);
  return data;
}

void writeFile(const char *path, const void *data, size_t bytes) {
  std::FILE *f = std::fopen(path, "wb");
  if (!f || std::fwrite(data, 1, bytes, f) != bytes || std::fclose(f) != 0)
    fail("cannot write ", path);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 8)
    fail("usage: zrt-quantize-dump DTYPE BITS N CHUNKS IN QUANTIZED "
         "DEQUANTIZED",
         "");
  int32_t dtype;
  if (!std::strcmp(argv[1], "f32"))
    dtype = ZRT_F32;
  else if (!std::strcmp(argv[1], "bf16"))
    dtype = ZRT_BF16;
  else if (!std::strcmp(argv[1], "f16"))
    dtype = ZRT_F16;
  else
    fail("unknown dtype ", argv[1]);
  int32_t bits = std::atoi(argv[2]);
  int64_t n = std::atoll(argv[3]), chunks = std::atoll(argv[4]);
  if (!zrt_quant_bits_valid(bits) || n < 0 || chunks < 0)
    fail("bad BITS, N or CHUNKS", "");
  size_t values = size_t(n * chunks * zrt_dtype_size(dtype));
  std::vector<char> in = readFile(argv[5], values);
  // Filled with a pattern so that a byte the kernel leaves unwritten shows.
  std::vector<char> q(size_t(chunks * zrt_quant_bytes(n, bits)), char(0x5a));
  std::vector<char> out(values, char(0x5a));
  zrt_quantize(dtype, in.data(), n, chunks, bits, q.data());
  zrt_dequantize(dtype, q.data(), n, chunks, bits, out.data());
  writeFile(argv[6], q.data(), q.size());
  writeFile(argv[7], out.data(), out.size());
  return 0;
}
