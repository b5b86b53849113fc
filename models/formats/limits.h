// Limits on what the loaders accept from files and inputs. Every loader checks a size it reads
// from a file (a shape, a length, an offset, an image's width and height, a zip entry's size)
// against these limits and against the file's actual size BEFORE allocating anything
// proportional to it, and refuses with Error(Format) (a file) or Error(InvalidArgument) (an
// input) naming the file, the value and the limit.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attn::models {

// Longest token sequence a text or id input may have. A longer input is cut to its first
// kMaxInputTokens tokens (or the model's own context, when shorter) with the truncation notice;
// raw .npy tensors with more tokens are refused. Same bound as synthetic inputs.
constexpr int kMaxInputTokens = 65536;
// Longest text given to a tokenizer, in bytes (64 MiB: ~16M tokens of English, far above
// kMaxInputTokens). Longer texts are refused before tokenising.
constexpr size_t kMaxInputTextBytes = size_t(64) << 20;

// Largest image side and pixel count accepted, checked from the header before decoding
// (134M pixels: above any camera; 384 MiB of RGB once decoded).
constexpr int kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = int64_t(1) << 27;
// Largest image file read (stb_image takes an int length).
constexpr uint64_t kMaxImageFileBytes = uint64_t(INT32_MAX);

// Largest single tensor, in bytes (8 GiB: twice the largest embedding of a 70B Llama in bf16,
// and a [64, 65536, 128] f32 q/k/v dump is 2 GiB). Applies to safetensors tensors, .npy arrays
// and .npz entries.
constexpr uint64_t kMaxTensorBytes = uint64_t(8) << 30;
// Largest .npy header (NumPy itself refuses headers over 10,000 bytes unless told otherwise).
constexpr uint64_t kMaxNpyHeaderBytes = uint64_t(1) << 20;
// Largest safetensors JSON header (the reference reader's limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t(100) << 20;

// Largest token id a vocabulary file may use (4M; the largest real vocabularies have 256K).
// Ids may leave holes, but at most as many as there are entries plus kMaxVocabHoles, since a
// table indexed by id is allocated from the largest one.
constexpr int32_t kMaxVocabId = (1 << 22) - 1;
constexpr int64_t kMaxVocabHoles = 4096;

}  // namespace attn::models
