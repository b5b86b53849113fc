#include "models/arch/text_input.h"

#include "compute/error.h"
#include "models/formats/limits.h"

namespace attn::models {
namespace {

// Cuts to the model's context, or to kMaxInputTokens when the model sets none or a longer one.
void truncate(const Model& model, TextInput& in) {
  const int context = model.info().max_tokens;
  const bool by_model = context > 0 && context <= kMaxInputTokens;
  const int max = by_model ? context : kMaxInputTokens;
  if (int64_t(in.ids.size()) <= max) return;
  const size_t total = in.ids.size();
  in.ids.resize(size_t(max));
  in.labels.resize(size_t(max));
  if (!in.tokens.empty()) in.tokens.resize(size_t(max));
  in.truncated = true;
  in.notice = "input has " + std::to_string(total) + " tokens; " +
              (by_model ? "the model's context is " + std::to_string(max)
                        : "attnscope's limit is " + std::to_string(max) + " (kMaxInputTokens)") +
              ", so only the first " + std::to_string(max) + " are used (" +
              std::to_string(total - size_t(max)) + " dropped)";
}

}  // namespace

TextInput encode_for_model(const Model& model, std::string_view text, const std::string& source) {
  const Tokenizer* tok = model.tokenizer();
  require(!model.info().vision, ErrorCode::InvalidArgument,
          model.info().dir + " is a vision model; give it an image, not text");
  require(tok != nullptr, ErrorCode::InvalidArgument,
          model.info().dir +
              " has no tokenizer files (tokenizer.json, vocab.json + merges.txt, "
              "vocab.txt or tokenizer.model); feed token ids instead");
  require(!text.empty(), ErrorCode::InvalidArgument, source + " is empty: nothing to run");
  require(text.size() <= kMaxInputTextBytes, ErrorCode::InvalidArgument,
          source + " has " + std::to_string(text.size()) + " bytes, over the limit of " +
              std::to_string(kMaxInputTextBytes) + " bytes of text (kMaxInputTextBytes); at most " +
              std::to_string(kMaxInputTokens) + " tokens are used, so give the first part only");
  TextInput in;
  try {
    in.tokens = tok->encode(text);
  } catch (const Error& e) {
    throw Error(e.code(), source + ": " + e.what());
  }
  require(!in.tokens.empty(), ErrorCode::InvalidArgument,
          source + " gives no tokens: nothing to run");
  for (const Token& t : in.tokens) {
    in.ids.push_back(t.id);
    in.labels.push_back(t.piece);
  }
  truncate(model, in);
  return in;
}

TextInput ids_for_model(const Model& model, std::vector<int32_t> ids) {
  require(!ids.empty(), ErrorCode::InvalidArgument, "no token ids: nothing to run");
  const int vocab = model.info().vocab > 0 ? model.info().vocab : int(model.config().vocab_size);
  TextInput in;
  for (size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] < vocab, ErrorCode::InvalidArgument,
            "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    std::string label = std::to_string(ids[i]);
    label.insert(label.begin(), '#');  // not "#" + s: GCC 12 misreports that as -Wrestrict
    if (const Tokenizer* tok = model.tokenizer(); tok && size_t(ids[i]) < tok->vocab_size()) {
      try {
        label = tok->id_to_piece(ids[i]);
      } catch (const Error&) {
      }
    }
    in.labels.push_back(std::move(label));
  }
  in.ids = std::move(ids);
  truncate(model, in);
  return in;
}

}  // namespace attn::models
