// Image bytes (decode_image: stb_image's PNG, JPEG, BMP, GIF, PSD, TGA, HDR, PIC, PNM decoders
// behind the project's header and size checks), as RGB and as luminance; a decoded image is
// resized with each of Pillow's filters, up and down.
#include "models/arch/image.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const int channels : {3, 1}) {
    fuzz::refuse_only_with_attn_error([&] {
      const Image8 img = decode_image({data, size}, "fuzz.img", channels);
      fuzz::check(img.channels == channels && img.height > 0 && img.width > 0 &&
                      img.data.size() == size_t(img.height) * img.width * img.channels,
                  "decoded image has inconsistent dimensions");
      if (channels == 1) return;
      for (const Resample r : {Resample::Nearest, Resample::Bilinear, Resample::Bicubic}) {
        (void)resize_image(img, 5, 7, r);
        (void)resize_image(img, img.height * 2 > 64 ? 64 : img.height * 2, 3, r);
      }
    });
  }
  return 0;
}
