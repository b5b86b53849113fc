// A transformer loaded from a Hugging Face model folder (config.json + *.safetensors + tokenizer
// or preprocessor files), run on the CPU with hooks and attention substitution.
//
//   auto model = load_model("path/to/gpt2");
//   ModelInput in;  in.ids = encode_for_model(*model, "Hello world").ids;
//   Capture cap(HookSelection::parse("blocks.*.attn.pattern"));
//   ModelOutput out = model->forward(in, {.capture = &cap});
//
// Architectures: GPT-2, Llama family (Llama, SmolLM, TinyLlama, Qwen2), BERT family (BERT,
// MiniLM), ViT family (ViT, DeiT, DINO). Every one is one file in this folder.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compute/result.h"
#include "models/arch/hooks.h"
#include "models/arch/image.h"
#include "models/arch/kv_cache.h"
#include "models/arch/layers.h"
#include "models/formats/hf_config.h"
#include "models/tokenizers/tokenizer.h"

namespace attn::models {

struct Substitution;
struct Intervention;
struct ReverseTrace;
struct ReverseTarget;
struct ReverseOptions;
struct Reverse;
struct AttentionParts;

enum class Family { Gpt2, Llama, Bert, Vit };
const char* family_name(Family f);  // "gpt2", "llama", "bert", "vit"

struct ModelInfo {
  std::string dir;  // folder it was loaded from
  Family family = Family::Gpt2;
  std::string model_type;    // config.json model_type: "gpt2", "qwen2", "deit", ...
  std::string architecture;  // first of config.json architectures, or ""
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA when < n_heads)
  int head_dim = 0;
  int hidden = 0;
  int vocab = 0;       // columns of the token logits (0 when the model has no LM/MLM head)
  int n_classes = 0;   // columns of the image logits (0 without a classifier)
  int max_tokens = 0;  // longest input the position embeddings allow (0 = no limit)
  bool causal = true;  // causal self-attention (decoders) or bidirectional (encoders)
  bool vision = false;
  std::vector<std::string> class_names;  // [n_classes] from id2label, when given
  // How the weight matrices are held: "f32", "bf16", "f16" (used as stored) or "mixed", and the
  // bytes of weights read in place from the memory map / held as f32 copies.
  std::string weight_dtype = "f32";
  size_t weight_bytes_mapped = 0, weight_bytes_converted = 0;
};

struct ModelInput {
  std::vector<int32_t> ids;          // i32 [N] token ids (text models)
  std::vector<int32_t> token_types;  // i32 [N] BERT segment ids; empty = all 0
  std::vector<int32_t> positions;    // i32 [N] explicit positions (GPT-2, Llama family); empty =
                                     // 0..N-1. Attention stays causal in input order.
  Image image;                       // preprocessed pixels (vision models)
  std::vector<std::string> labels;   // optional token labels [N] for captured problems
  std::vector<float> embeddings;     // f32 [N, hidden] token-embedding rows used instead of the
                                     // ids' rows (integrated gradients); empty = the ids' rows
};

// One layer that ran a substituted variant.
struct SubstitutedLayer {
  int layer = 0;
  std::vector<int> heads;  // query heads that used the variant
  Stats stats;             // the compute core's stats for those heads
  // The variant's whole result on the layer's problem, when Substitution::keep_results asked for
  // it (an analysis takes a dense pass's own results as its reference instead of a second run).
  std::optional<Result> result;
};

struct ModelOutput {
  int n_tokens = 0;  // N: tokens, or CLS (+ distillation) + patches for ViT
  int hidden = 0;
  std::vector<float> hidden_state;  // f32 [N, hidden]: last hidden state (after the final norm)
  int n_logits = 0;                 // vocab (text) or classes (vision)
  FloatBuffer logits;               // f32 [N, vocab] (LM / MLM head) or f32 [n_classes]
                                    // (image classifier); empty without a head
  // >= 0 after ForwardOptions::logits_row: logits hold that row alone, f32 [1, vocab].
  int logits_row = -1;
  // Row t's logits (t = 0 for a classifier), or null when the pass did not compute them.
  const float* logits_of(int t) const {
    if (logits.empty() || t < 0 || (logits_row >= 0 && t != logits_row)) return nullptr;
    return logits.data() + (logits_row >= 0 ? 0 : size_t(t) * size_t(n_logits));
  }
  std::vector<SubstitutedLayer> substituted;
  double seconds = 0;  // wall time of the forward pass
};

struct ForwardOptions {
  Capture* capture = nullptr;                  // hooks to fill (null: capture nothing)
  const Substitution* substitution = nullptr;  // variant in chosen layers/heads (null: dense)
  const Intervention* intervention = nullptr;  // ablations and patches (intervention.h)
  int threads = 0;                             // 0 = all hardware threads (or ATTNSCOPE_THREADS)
  ReverseTrace* trace = nullptr;  // fills what a reverse pass reads (reverse.h); no cache
  // Causal LMs: only this row's logits are computed and kept (ModelOutput::logits_row), not the
  // N x vocab block a repeated pass (integrated gradients' steps) would allocate and discard.
  int logits_row = -1;
  // With logits_row: only these ids of that row are computed (dot products with their rows of
  // the head), the others are 0; for passes that read z alone (integrated gradients' steps).
  std::vector<int> logits_ids{};
  Matmul matmul = Matmul::F32;  // precision of the layers' matrix products (layers.h)
  // Causal LMs over a whole sequence: the logits go here in blocks of vocabulary columns,
  // ascending ([N, cols] row-major, valid during the call), and ModelOutput::logits stays empty:
  // a pass compared against another (EndToEndStream) never holds its N x vocab logits.
  std::function<void(int col0, int cols, const float* block)> logits_sink{};
  int logits_sink_columns = 4096;  // columns per block (16 MiB of f32 at N = 1,024)
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  const HfConfig& config() const { return config_; }
  // The tokenizer of the folder (null for vision models or when the folder has none).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // How images are prepared for this model (vision models).
  const ImagePreprocessor& preprocessor() const { return preprocessor_; }

  // Runs the model. Throws Error(InvalidArgument) naming the problem for empty input, ids
  // outside the vocabulary, too many tokens, or an image the model cannot take.
  virtual ModelOutput forward(const ModelInput& in, const ForwardOptions& opt = {}) const = 0;
  // Incremental decoding (causal language models): runs `ids`, which follow the cache's tokens,
  // attending over the cache and themselves, and appends their keys and values to the cache.
  // An empty cache makes it a prefill; one id a decode step. With the default policy (kv_full)
  // the logits (f32 [ids, vocab]) equal those rows of a full forward pass over every token so
  // far; other policies (cache.policy) evict, quantise and re-position as kv_policy.h says.
  // Hooks and substitution apply to this pass's queries over what the cache gives them. Throws
  // Error(Unsupported) for encoders and vision models, and Error(InvalidArgument) when a
  // learned-position model would run out of positions.
  virtual ModelOutput decode(const std::vector<int32_t>& ids, KvCache& cache,
                             const ForwardOptions& opt = {}) const;
  // The reverse pass (reverse.h): the forward pass, then dz/d the input and the hook points for
  // one target scalar z. Throws Error(InvalidArgument) for a bad target.
  virtual Reverse reverse(const ModelInput& in, const ReverseTarget& target,
                          const ReverseOptions& opt) const = 0;
  // Layer `layer`'s attention sublayer (attention_parts.h): its projections and X, its input
  // after the norm, from `trace` (a forward pass run with opt.trace). Throws Error(Unsupported)
  // for an architecture that does not open it, Error(InvalidArgument) for a bad layer.
  virtual AttentionParts attention_parts(const ReverseTrace& trace, int layer) const;

 protected:
  ModelInfo info_;
  HfConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ImagePreprocessor preprocessor_;
};

// Loads a model folder. The architecture comes from config.json's model_type (and
// architectures); an unsupported one throws Error(Unsupported) naming it and what is supported.
// Missing or mis-shaped tensors throw Error(Format) naming the tensor and the file.
std::unique_ptr<Model> load_model(const std::string& dir);

}  // namespace attn::models
