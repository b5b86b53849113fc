// stb_image's implementation (Debian's libstb, v2.27), compiled once, apart from the code that
// uses it (image.cpp), so that sanitizer builds can exempt this third-party code from one check:
// it copies an empty PNG IDAT chunk with memcpy(NULL, src, 0), which UBSan's nonnull-attribute
// check reports although no memory is touched (models/CMakeLists.txt). The real faults found in
// it are guarded in image.cpp before stb sees a file.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb_image.h>
