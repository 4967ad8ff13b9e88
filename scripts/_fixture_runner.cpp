// Tiny C++ runner for scripts/make_fixtures.py (dev only): runs a .pte with an
// ETDumpGen whose debug log level can be set, which the Python bindings cannot do.
// Built by make_fixtures.py against the headers and libraries shipped in the
// executorch 1.5.1 wheel.
//
// usage: runner MODEL.pte INPUT.f32 ETDUMP_OUT DEBUG_OUT DEBUG_BUFFER_SIZE RUNS LEVEL
//   INPUT.f32: the single float32 input's bytes (shape taken from the method meta)
//   LEVEL: none | program_outputs | intermediate_outputs
#include <executorch/devtools/etdump/etdump_flatcc.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

using executorch::etdump::ETDumpGen;
using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EventTracerDebugLogLevel;

static bool write_file(const char* path, const void* data, size_t size) {
  FILE* f = std::fopen(path, "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s MODEL.pte INPUT.f32 ETDUMP_OUT DEBUG_OUT SIZE RUNS LEVEL\n", argv[0]);
    return 2;
  }
  const size_t debug_size = std::strtoull(argv[5], nullptr, 10);
  const int runs = std::atoi(argv[6]);
  const std::string level = argv[7];

  auto tracer = std::make_unique<ETDumpGen>();
  ETDumpGen* gen = tracer.get();
  std::vector<uint8_t> debug_buffer(debug_size, 0);
  if (debug_size > 0) {
    auto res = gen->set_debug_buffer({debug_buffer.data(), debug_buffer.size()});
    if (!res.ok()) {
      std::fprintf(stderr, "set_debug_buffer failed\n");
      return 1;
    }
  }
  if (level == "none") {
    gen->set_event_tracer_debug_level(EventTracerDebugLogLevel::kNoLogging);
  } else if (level == "program_outputs") {
    gen->set_event_tracer_debug_level(EventTracerDebugLogLevel::kProgramOutputs);
  } else if (level == "intermediate_outputs") {
    gen->set_event_tracer_debug_level(EventTracerDebugLogLevel::kIntermediateOutputs);
  } else {
    std::fprintf(stderr, "unknown level %s\n", level.c_str());
    return 2;
  }

  Module module(argv[1], Module::LoadMode::File, std::move(tracer));
  auto meta = module.method_meta("forward");
  if (!meta.ok()) {
    std::fprintf(stderr, "method_meta failed: %d\n", (int)meta.error());
    return 1;
  }
  auto info = meta->input_tensor_meta(0);
  if (!info.ok()) {
    std::fprintf(stderr, "input_tensor_meta failed\n");
    return 1;
  }
  std::vector<executorch::aten::SizesType> sizes(info->sizes().begin(), info->sizes().end());
  size_t numel = 1;
  for (auto s : sizes) numel *= static_cast<size_t>(s);

  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() != numel * sizeof(float)) {
    std::fprintf(stderr, "input has %zu bytes, expected %zu\n", bytes.size(), numel * sizeof(float));
    return 1;
  }
  std::vector<float> data(numel);
  std::memcpy(data.data(), bytes.data(), bytes.size());
  auto tensor = executorch::extension::from_blob(data.data(), sizes, executorch::aten::ScalarType::Float);

  for (int i = 0; i < runs; ++i) {
    auto out = module.forward(tensor);
    if (!out.ok()) {
      std::fprintf(stderr, "forward failed: %d\n", (int)out.error());
      return 1;
    }
  }
  auto result = gen->get_etdump_data();
  if (result.buf == nullptr || !write_file(argv[3], result.buf, result.size)) {
    std::fprintf(stderr, "writing the etdump failed\n");
    return 1;
  }
  std::free(result.buf);
  if (debug_size > 0 && !write_file(argv[4], debug_buffer.data(), debug_buffer.size())) {
    std::fprintf(stderr, "writing the debug buffer failed\n");
    return 1;
  }
  return 0;
}
