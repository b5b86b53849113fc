// Images for vision models: decoding (PNG, JPEG, BMP, GIF, PNM, ... via stb_image), and the
// preprocessing of Hugging Face image processors (ViTImageProcessor, DeiTImageProcessor) as
// described by preprocessor_config.json: resize, center crop, rescale, normalise, channels.
// Resizing reproduces Pillow's Image.resize on 8-bit images exactly (same filters, support
// widened when downscaling, 22-bit fixed-point weights, rounding to 8 bits after each pass),
// since that is what the image processors call.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/formats/limits.h"

namespace attn::models {

struct HfConfig;

// Decoded 8-bit pixels.
struct Image8 {
  int height = 0, width = 0, channels = 0;  // channels: 1 (gray) or 3 (RGB)
  std::vector<uint8_t> data;                // u8 [height, width, channels]
};

// Model-ready pixels.
struct Image {
  int channels = 0, height = 0, width = 0;
  std::vector<float> data;  // f32 [channels, height, width]
  bool empty() const { return data.empty(); }
};

// Largest side and pixel count accepted: kMaxImageSide, kMaxImagePixels in limits.h (checked
// from the header, before decoding, as is the pixel count against the file's size).

// Decodes an image file as RGB (`channels` 3) or Pillow-style luminance (`channels` 1).
// Throws Error(Io) when the file cannot be read, Error(Format) naming the file when it is not an
// image stb_image can decode, has a zero side, or exceeds the limits above.
Image8 load_image(const std::string& path, int channels = 3);
Image8 decode_image(std::span<const uint8_t> bytes, const std::string& name, int channels = 3);

enum class Resample { Nearest, Bilinear, Bicubic };
// Pillow's codes: 0 nearest, 2 bilinear, 3 bicubic (others: Error(Unsupported)).
Resample resample_from_pil(int code);
// Resizes like Pillow's Image.resize((width, height), resample) on 8-bit images.
Image8 resize_image(const Image8& in, int height, int width, Resample r);

struct ImagePreprocessor {
  int channels = 3;  // the model's num_channels
  bool do_resize = true;
  int height = 224, width = 224;  // resize target (when shortest_edge is 0)
  int shortest_edge = 0;          // > 0: resize the shorter side to this, keep the aspect ratio
  Resample resample = Resample::Bilinear;
  bool do_center_crop = false;
  int crop_height = 224, crop_width = 224;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::vector<double> mean = {0.5, 0.5, 0.5}, std = {0.5, 0.5, 0.5};  // [channels]

  // From `dir`/preprocessor_config.json when present, else the ViT defaults at the config's
  // image_size. Throws Error(Format) naming the file and key for malformed values.
  static ImagePreprocessor from_folder(const std::string& dir, const HfConfig& config);
  // Resize, crop, rescale, normalise; `in` must have this preprocessor's channel count.
  Image operator()(const Image8& in) const;
};

}  // namespace attn::models
