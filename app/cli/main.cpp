// attnscope command line (placeholder until the CLI commands land).
#include <cstdio>

int main() {
  std::puts("attnscope: CLI under construction");
  return 0;
}
