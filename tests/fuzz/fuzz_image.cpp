// Image bytes (decode_image: stb_image's PNG, JPEG, BMP, GIF, PSD, TGA, HDR, PIC, PNM decoders
// behind the project's header and size checks), as RGB and as luminance; a decoded image is
// resized with each of Pillow's filters, up and down (its top-left 512 x 512 pixels at most).
#include <algorithm>

#include "models/arch/image.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const int channels : {3, 1}) {
    fuzz::refuse_only_with_attn_error([&] {
      const models::Image8 img = models::decode_image({data, size}, "fuzz.img", channels);
      fuzz::check(img.channels == channels && img.height > 0 && img.width > 0 &&
                      img.data.size() == size_t(img.height) * img.width * img.channels,
                  "decoded image has inconsistent dimensions");
      if (channels == 1) return;
      // Resizing runs on at most the top-left 512 x 512 pixels: a few hundred bytes of RLE can
      // decode to megapixels, and libFuzzer's comparison tracing of every filter tap made
      // resampling those take 10-26 s per input (0.1-0.4 s in a release build).
      models::Image8 part{std::min(img.height, 512), std::min(img.width, 512), img.channels, {}};
      for (int y = 0; y < part.height; ++y)
        part.data.insert(part.data.end(), img.data.begin() + size_t(y) * img.width * img.channels,
                         img.data.begin() + (size_t(y) * img.width + part.width) * img.channels);
      for (const models::Resample r :
           {models::Resample::Nearest, models::Resample::Bilinear, models::Resample::Bicubic}) {
        (void)resize_image(part, 5, 7, r);
        (void)resize_image(part, part.height * 2 > 64 ? 64 : part.height * 2, 3, r);
      }
    });
  }
  return 0;
}
