#include "tests/fuzz/tokenizer_checks.h"

#include <algorithm>
#include <vector>

#include "tests/fuzz/fuzz_util.h"

namespace attn::fuzz {

void check_encode(const models::Tokenizer& tok, std::string_view text) {
  for (const bool special : {true, false}) {
    std::vector<models::Token> tokens;
    try {
      tokens = tok.encode(text, {.add_special_tokens = special, .parse_special = special});
    } catch (const attn::Error&) {
      continue;  // e.g. text that is not UTF-8, or a tokenizer whose parts cannot run it
    }
    size_t last_begin = 0;
    std::vector<int32_t> ids;
    for (const models::Token& t : tokens) {
      check(t.begin <= t.end && t.end <= text.size(), "token span outside the text");
      check(t.begin >= last_begin, "token spans out of order");
      last_begin = t.begin;
      check(t.id >= 0 && size_t(t.id) < tok.vocab_size(),
            "encode produced id " + std::to_string(t.id) + " outside the vocabulary of " +
                std::to_string(tok.vocab_size()));
      (void)tok.id_to_piece(t.id);
      ids.push_back(t.id);
    }
    (void)tok.decode(ids, /*skip_special=*/true);
    (void)tok.decode(ids, /*skip_special=*/false);
  }
}

void exercise_tokenizer(const models::Tokenizer& tok) {
  static const char* kTexts[] = {
      "Hello world",
      "  The lighthouse keeper's log,   1893: 'fog'!\n\tNext line.",
      "Caf\xc3\xa9 na\xc3\xafve \xc3\xbc"
      "ber stra\xc3\x9f"
      "e \xe6\x9d\xb1\xe4\xba\xac "
      "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 2024",
      "emoji \xf0\x9f\x91\x8b\xf0\x9f\x8c\x8d \xe2\x98\x83 \xe2\x88\x91 \xef\xbf\xbd",
      "<|endoftext|><s></s>[CLS] a [SEP][MASK][UNK][PAD] <unk>",
      "\x01\x02 \x7f control \xc2\x85 \xe2\x80\x8b zero\xe2\x80\x8bwidth",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "A\xcc\x81 e\xcc\x81 combining and \xef\xac\x81 ligature, I\xcc\x87stanbul",
      "",
      "\xff not utf-8",
  };
  for (const char* t : kTexts) check_encode(tok, t);
  const size_t n = std::min<size_t>(tok.vocab_size(), 64);
  for (size_t id = 0; id < n; ++id) {
    const std::string piece = tok.id_to_piece(int32_t(id));
    (void)tok.token_to_id(piece);
    (void)tok.is_special(int32_t(id));
  }
}

}  // namespace attn::fuzz
