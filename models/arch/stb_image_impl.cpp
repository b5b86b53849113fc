// stb_image's implementation (Debian's libstb, v2.27), compiled once, apart from the code that
// uses it (image.cpp), so that sanitizer builds can exempt this third-party code from one check:
// it copies an empty PNG IDAT chunk with memcpy(NULL, src, 0), which UBSan's nonnull-attribute
// check reports although no memory is touched (models/CMakeLists.txt). The real faults found in
// it are guarded in image.cpp before stb sees a file.
//
// The decoder state comes from calloc, not malloc: v2.27 decodes a scan whose component names a
// Huffman table that no DHT segment defined, and read such a table's leftover heap as codes
// (its symbol lookup then indexed values[-849], found by tests/fuzz). A zeroed table decodes
// every code as symbol 0 without consuming bits, so such a scan ends as an all-zero image.
#include <cstdlib>
#define STBI_MALLOC(sz) std::calloc(1, sz)
#define STBI_REALLOC(p, newsz) std::realloc(p, newsz)
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb_image.h>
