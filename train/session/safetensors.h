// safetensors files (https://github.com/huggingface/safetensors): how mnemo saves and loads
// parameters, data batches and the PyTorch golden fixtures (docs/FORMATS.md describes the layout).
//   [8 bytes: header size N, little-endian u64][N bytes: JSON header][data]
//   header: {"<name>": {"dtype": "F32"|"F64"|"I32", "shape": [...], "data_offsets": [begin, end]},
//            ..., "__metadata__": {"key": "value", ...}}   (metadata values are strings)
//   data: each tensor little-endian, row-major, contiguous, at [begin, end) relative to the start
//   of the data; the tensors cover the data exactly (no holes, no overlap, nothing after).
// Reading validates all of this and throws mnemo::Error naming the file, the tensor and what was
// expected versus found. Writing is atomic: a failed save leaves the previous file untouched.
#pragma once
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace mnemo {

struct TensorFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // without the checksums
  std::set<std::string> checksummed;            // tensors whose checksum was present and matched
};

// Reads a whole file. Throws mnemo::Error for an unreadable file, a file too short for its header,
// a header size beyond the end of the file, invalid JSON, a duplicate name, an unknown or
// unsupported dtype, a shape whose byte size differs from its data_offsets, offsets outside the
// data, overlapping or leaving holes, and bytes after the last tensor; and a tensor whose bytes do
// not match its checksum (metadata `crc32/<name>`, which mnemo writes for every tensor; files
// from elsewhere have none and are read as they are).
TensorFile read_safetensors(const std::string& path);

// Writes the tensors (in the given order), the metadata and a CRC-32 per tensor (metadata
// `crc32/<name>`) to `path`, atomically: the bytes go to `path + ".tmp.<pid>"` in the same
// directory, which is flushed and fsynced, renamed over `path`, and the directory is fsynced. A
// symlink is written through to its target; an existing target that is not a regular file is
// refused. Temporary files of earlier saves whose process no longer exists are removed first. On any failure the temporary file is removed, the file previously
// at `path` (if any) is unchanged, and mnemo::Error says what failed. Names must be unique,
// non-empty and not "__metadata__"; dtypes float32, float64 and int32 are stored as F32, F64, I32.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace mnemo
