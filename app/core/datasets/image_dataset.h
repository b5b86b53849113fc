// Image datasets: the records a dataset-level evaluation of a vision model reads.
//   Fashion-MNIST / MNIST  a folder holding t10k-images-idx3-ubyte[.gz] and
//                          t10k-labels-idx1-ubyte[.gz] (Debian's dataset-fashion-mnist installs
//                          /usr/share/datasets/fashion-mnist); "FOLDER:train" takes the
//                          train-* files instead
//   image folder           one subfolder per class (classes in name order, label = index), or
//                          images directly in the folder (no labels); every file stb_image
//                          decodes, in name order
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/arch/image.h"

namespace attn::core {

struct ImageRecord {
  std::string source;    // "t10k-images-idx3-ubyte.gz:17" or "folder/cat/a.png"
  models::Image8 image;  // in the channels asked for
  int label = -1;        // class index; -1 = unlabelled
};

struct ImageDataset {
  std::vector<ImageRecord> records;
  std::vector<std::string> classes;  // folder names; empty for IDX (labels are the model's ids)
};

// Reads at most `limit` records (0 = all) as `channels` (1 gray, 3 RGB). Throws Error(Io) for a
// path that cannot be read and Error(Format) naming the file for a malformed IDX file (see
// read_idx), images and labels of different counts, a label file that is not one byte per
// image, an undecodable image, or a dataset without records.
ImageDataset read_image_dataset(const std::string& path, int channels, int64_t limit = 0);

// True when `path` names an image dataset (an IDX folder, or a folder holding images or class
// folders) rather than a text one.
bool is_image_dataset(const std::string& path);

}  // namespace attn::core
