// libFuzzer target for the config loader: any input either parses (and its model builds) or
// throws mnemo::Error; anything else (a crash, another exception) is a finding.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -DMNEMO_FUZZ=ON && ninja -C build-fuzz fuzz_config
// Run:   build-fuzz/fuzz_config -max_total_time=60 configs/
#include <cstdint>
#include <string>

#include "core/error.h"
#include "train/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    mnemo::Config c = mnemo::parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
    if (c.data.source.rfind("synthetic", 0) == 0 && c.data.batch <= 64) {
      mnemo::DataShape ds = mnemo::static_data_shape(c);
      if (mnemo::numel(ds.sample) * c.data.batch < (1 << 20)) mnemo::build_model(c, ds, c.data.batch);
    }
  } catch (const mnemo::Error&) {
  }
  return 0;
}
