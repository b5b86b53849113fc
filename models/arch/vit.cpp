// ViT family (ViT, DeiT, DINO): patches embedded by a strided convolution (a GEMM here), a CLS
// token (and DeiT's distillation token when the checkpoint has one), learned position
// embeddings (resampled bicubically for other image sizes, see interpolate.h), pre-LN encoder
// blocks with bidirectional attention and exact GELU, final LayerNorm, and the classifier on
// the CLS token (DeiT with a teacher head: the mean of both heads, as transformers does).
#include <chrono>
#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/architectures.h"
#include "models/arch/attention.h"
#include "models/arch/interpolate.h"
#include "models/arch/layers.h"
#include "models/arch/reverse.h"
#include "models/arch/weights.h"

namespace attn::models {
namespace {

class Vit : public Model {
 public:
  Vit(const std::string& dir, const HfConfig& c) : ws_(dir) {
    config_ = c;
    info_.dir = dir;
    info_.family = Family::Vit;
    info_.model_type = c.model_type;
    info_.architecture = c.architectures.empty() ? "" : c.architectures[0];
    info_.n_layers = config_int(c, c.num_hidden_layers, "num_hidden_layers");
    info_.n_heads = info_.n_kv_heads = config_int(c, c.num_attention_heads, "num_attention_heads");
    info_.head_dim = config_int(c, c.head_dim, "head_dim");
    info_.hidden = config_int(c, c.hidden_size, "hidden_size");
    info_.causal = false;
    info_.vision = true;
    ws_.set_prefixes({c.model_type + ".", "vit.", "deit."});
    const int C = info_.hidden;
    require(info_.n_heads * info_.head_dim == C, ErrorCode::Format,
            c.source + ": ViT needs hidden_size = num_attention_heads * head_dim");
    patch_ = config_int(c, c.patch_size, "patch_size");
    channels_ = config_int(c, c.num_channels, "num_channels");
    grid_ = config_int(c, c.image_size, "image_size") / patch_;
    inter_ = config_int(c, c.intermediate_size, "intermediate_size");
    act_ = activation_from_name(c.hidden_act, c.source);
    eps_ = float(c.norm_eps);
    cls_ = ws_.get("embeddings.cls_token", {1, 1, C});
    dist_ = ws_.get_optional("embeddings.distillation_token", {1, 1, C});
    n_special_ = dist_ ? 2 : 1;
    pos_ =
        ws_.get("embeddings.position_embeddings", {1, n_special_ + grid_ * grid_, C},
                "[1, " + std::string(dist_ ? "2" : "1") + " + (image_size/patch_size)^2, hidden]");
    // The conv weight [C, ch, p, p] is used as a Linear [C, ch*p*p]: the same bytes.
    patch_embed_.in = channels_ * patch_ * patch_;
    patch_embed_.out = C;
    patch_embed_.w =
        ws_.get_matrix("embeddings.patch_embeddings.projection.weight",
                       {C, channels_, patch_, patch_}, "[hidden, num_channels, patch, patch]");
    patch_embed_.b = ws_.get("embeddings.patch_embeddings.projection.bias", {C});
    for (int l = 0; l < info_.n_layers; ++l) {
      const std::string b = "encoder.layer." + std::to_string(l) + ".";
      Layer L;
      L.ln1_g = ws_.get(b + "layernorm_before.weight", {C});
      L.ln1_b = ws_.get(b + "layernorm_before.bias", {C});
      L.q = load_linear(ws_, b + "attention.attention.query", C, C, c.attention_bias);
      L.k = load_linear(ws_, b + "attention.attention.key", C, C, c.attention_bias);
      L.v = load_linear(ws_, b + "attention.attention.value", C, C, c.attention_bias);
      L.o = load_linear(ws_, b + "attention.output.dense", C, C, true);
      L.ln2_g = ws_.get(b + "layernorm_after.weight", {C});
      L.ln2_b = ws_.get(b + "layernorm_after.bias", {C});
      L.inter = load_linear(ws_, b + "intermediate.dense", C, inter_, true);
      L.out = load_linear(ws_, b + "output.dense", inter_, C, true);
      layers_.push_back(L);
    }
    ln_g_ = ws_.get("layernorm.weight", {C});
    ln_b_ = ws_.get("layernorm.bias", {C});
    // Classifier: its row count is the number of classes (id2label when given).
    // ViTForImageClassification / DeiTForImageClassification: "classifier";
    // DeiTForImageClassificationWithTeacher: "cls_classifier" + "distillation_classifier".
    const std::string head = ws_.has("cls_classifier.weight") ? "cls_classifier" : "classifier";
    if (ws_.has(head + ".weight")) {
      const std::vector<int64_t> stored = ws_.shape_of(head + ".weight");
      const int n = !c.id2label.empty()  ? int(c.id2label.size())
                    : stored.size() == 2 ? int(stored[0])
                                         : 0;
      classifier_ = load_linear(ws_, head, C, n, true);
      if (dist_ && ws_.has("distillation_classifier.weight")) {
        distill_ = load_linear(ws_, "distillation_classifier", C, classifier_.out, true);
      }
      info_.n_classes = classifier_.out;
      for (int i = 0; i < info_.n_classes; ++i) {
        auto it = c.id2label.find(i);
        info_.class_names.push_back(it != c.id2label.end() ? it->second : std::to_string(i));
      }
    }
    preprocessor_ = ImagePreprocessor::from_folder(dir, c);
    require(preprocessor_.channels == channels_, ErrorCode::Format,
            c.source + ": preprocessor and model disagree on channels");
    ws_.describe(info_);
  }

  ModelOutput forward(const ModelInput& in, const ForwardOptions& opt) const override {
    const auto t0 = std::chrono::steady_clock::now();
    const Image& img = in.image;
    require(!img.empty(), ErrorCode::InvalidArgument,
            info_.dir + " is a vision model: give it an image");
    require(img.channels == channels_ &&
                img.data.size() == size_t(img.channels) * img.height * img.width,
            ErrorCode::InvalidArgument,
            "image has " + std::to_string(img.channels) + " channels; the model takes " +
                std::to_string(channels_));
    const int gh = img.height / patch_, gw = img.width / patch_;  // remainder pixels dropped
    require(gh >= 1 && gw >= 1, ErrorCode::InvalidArgument,
            "image of " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                " is smaller than one " + std::to_string(patch_) + "x" + std::to_string(patch_) +
                " patch");
    const int P = gh * gw, S = n_special_, N = S + P, C = info_.hidden;
    const int H = info_.n_heads, d = info_.head_dim, K = channels_ * patch_ * patch_;
    std::vector<std::string> labels = in.labels;
    if (labels.size() != size_t(N)) labels = token_labels(gh, gw);
    ForwardContext ctx(info_, opt, N, &labels);
    const int th = ctx.threads;

    // Patches as rows [P, ch*p*p] in the conv weight's (channel, row, column) order.
    std::vector<float> patches(size_t(P) * K);
    for (int py = 0; py < gh; ++py) {
      for (int px = 0; px < gw; ++px) {
        float* row = patches.data() + (size_t(py) * gw + px) * K;
        for (int ch = 0; ch < channels_; ++ch) {
          for (int y = 0; y < patch_; ++y) {
            const float* src = img.data.data() +
                               (size_t(ch) * img.height + size_t(py) * patch_ + y) * img.width +
                               size_t(px) * patch_;
            std::copy_n(src, patch_, row + (size_t(ch) * patch_ + y) * patch_);
          }
        }
      }
    }
    std::vector<float> x(size_t(N) * C);
    linear(patches.data(), P, patch_embed_, x.data() + size_t(S) * C, th);
    std::copy_n(cls_, C, x.data());
    if (dist_) std::copy_n(dist_, C, x.data() + C);
    std::vector<float> resampled;
    const float* grid_pos = pos_ + size_t(S) * C;
    if (gh != grid_ || gw != grid_) {
      resampled = interpolate_grid_bicubic(grid_pos, grid_, grid_, C, gh, gw);
      grid_pos = resampled.data();
    }
    add_inplace(x.data(), pos_, size_t(S) * C);
    add_inplace(x.data() + size_t(S) * C, grid_pos, size_t(P) * C);

    std::vector<float> h(x.size());
    EncoderScratch s(N, C, inter_);
    ReverseTrace* tr = opt.trace;
    if (tr) tr->blocks.resize(size_t(info_.n_layers));
    for (int l = 0; l < info_.n_layers; ++l) {
      const Layer& L = layers_[size_t(l)];
      BlockTrace* b = tr ? &tr->blocks[size_t(l)] : nullptr;
      // Pre-LN: each sublayer reads the normed stream and adds to the stream.
      if (b) b->x_attn = x;
      layer_norm(x.data(), N, C, L.ln1_g, L.ln1_b, eps_, h.data(), th);
      encoder_attention(ctx, l, h.data(), L.q, L.k, L.v, L.o, H, d, s, x.data(), b);
      if (b) b->x_mlp = x;
      layer_norm(x.data(), N, C, L.ln2_g, L.ln2_b, eps_, h.data(), th);
      encoder_mlp(h.data(), N, L.inter, act_, L.out, s, x.data(), th, b);
      ctx.end_block(l, x.data());
    }
    if (tr) tr->final_in = x;
    ModelOutput out;
    out.n_tokens = N;
    out.hidden = C;
    out.hidden_state.resize(x.size());
    layer_norm(x.data(), N, C, ln_g_, ln_b_, eps_, out.hidden_state.data(), th);
    if (classifier_.w) {
      out.n_logits = classifier_.out;
      out.logits.resize(size_t(classifier_.out));
      linear(out.hidden_state.data(), 1, classifier_, out.logits.data(), 1);
      if (distill_.w) {
        std::vector<float> dl(out.logits.size());
        linear(out.hidden_state.data() + C, 1, distill_, dl.data(), 1);
        for (size_t i = 0; i < dl.size(); ++i) out.logits[i] = 0.5f * (out.logits[i] + dl[i]);
      }
    }
    out.substituted = std::move(ctx.substituted);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }

  Reverse reverse(const ModelInput& in, const ReverseTarget& target,
                  const ReverseOptions& o) const override {
    ReverseTrace tr;
    const MatmulScope matmul(o.matmul);  // the backward's products too
    Reverse r = begin_reverse(info_, forward(in, traced(o, tr, target, in)), target, o);
    const auto t0 = std::chrono::steady_clock::now();
    const int N = r.n_tokens, C = info_.hidden, S = n_special_, th = thread_count(o.threads);
    std::vector<float> g(size_t(N) * C, 0.0f), gh(g.size(), 0.0f);
    // The classifier reads the CLS row (DeiT with a teacher: the mean of both heads).
    head_row_grad(classifier_, r.id, r.foil, distill_.w ? 0.5f : 1.0f, gh.data());
    if (distill_.w) head_row_grad(distill_, r.id, r.foil, 0.5f, gh.data() + C);
    layer_norm_backward(tr.final_in.data(), N, C, ln_g_, eps_, gh.data(), g.data(), o.rule, false,
                        th);
    for (int l = info_.n_layers - 1; l >= 0; --l) {
      const Layer& L = layers_[size_t(l)];
      const BlockTrace& b = tr.blocks[size_t(l)];
      if (!r.resid_grad.empty()) r.resid_grad[size_t(l)] = g;
      encoder_mlp_backward(b, L.inter, act_, L.out, g.data(), gh.data(), false, o.rule, th);
      layer_norm_backward(b.x_mlp.data(), N, C, L.ln2_g, eps_, gh.data(), g.data(), o.rule, true,
                          th);
      encoder_attention_backward(b, L.q, L.k, L.v, L.o, g.data(), gh.data(), false, l, o.rule, r,
                                 th);
      layer_norm_backward(b.x_attn.data(), N, C, L.ln1_g, eps_, gh.data(), g.data(), o.rule, true,
                          th);
    }
    // Patch rows back to pixels: the embedding is a Linear over each patch's (channel, row,
    // column) values; pixels past the last whole patch get no gradient.
    const Image& img = in.image;
    const int gw = img.width / patch_, P = N - S, K = channels_ * patch_ * patch_;
    std::vector<float> gp(size_t(P) * K);
    linear_backward(g.data() + size_t(S) * C, P, patch_embed_, gp.data(), false, th);
    std::vector<float> gx(img.data.size(), 0.0f);
    for (int i = 0; i < P; ++i) {
      const int py = i / gw, px = i % gw;
      for (int ch = 0; ch < channels_; ++ch) {
        for (int y = 0; y < patch_; ++y) {
          float* dst = gx.data() + (size_t(ch) * img.height + size_t(py) * patch_ + y) * img.width +
                       size_t(px) * patch_;
          std::copy_n(gp.data() + size_t(i) * K + (size_t(ch) * patch_ + y) * patch_, patch_, dst);
        }
      }
    }
    return end_reverse(std::move(r), img.data, std::move(gx), {img.channels, img.height, img.width},
                       tr, t0);
  }

 private:
  struct Layer {
    const float *ln1_g, *ln1_b, *ln2_g, *ln2_b;  // f32 [C]
    Linear q, k, v, o, inter, out;               // nn.Linear [out, in]
  };

  std::vector<std::string> token_labels(int gh, int gw) const {
    std::vector<std::string> l = {"[CLS]"};
    if (dist_) l.push_back("[DIST]");
    for (int y = 0; y < gh; ++y) {
      for (int x = 0; x < gw; ++x) l.push_back("p" + std::to_string(y) + "," + std::to_string(x));
    }
    return l;
  }

  WeightStore ws_;
  int patch_ = 16, channels_ = 3, grid_ = 14, inter_ = 0, n_special_ = 1;
  Activation act_ = Activation::GeluErf;
  float eps_ = 1e-12f;
  const float* cls_ = nullptr;   // f32 [1, 1, C]
  const float* dist_ = nullptr;  // f32 [1, 1, C] (DeiT) or null
  const float* pos_ = nullptr;   // f32 [1, S + grid^2, C]
  Linear patch_embed_;           // conv [C, ch, p, p] as [C, ch*p*p]
  std::vector<Layer> layers_;
  const float *ln_g_ = nullptr, *ln_b_ = nullptr;
  Linear classifier_, distill_;  // f32 [classes, C]
};

}  // namespace

std::unique_ptr<Model> make_vit(const std::string& dir, const HfConfig& config) {
  return std::make_unique<Vit>(dir, config);
}

}  // namespace attn::models
