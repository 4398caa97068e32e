// Writes the ids Google's own sentencepiece library gives for a text, as JSON, so that our
// SentencePiece encoder is checked against the real thing (tests/test_sentencepiece.cc).
// Build and run: see generate.sh beside this file.
#include <sentencepiece_processor.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: sp_reference MODEL TEXT_FILE\n");
        return 2;
    }
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.Load(argv[1]).ok()) return 1;
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<int> ids;
    if (!sp.Encode(ss.str(), &ids).ok()) return 1;
    std::printf("{\"model\": \"%s\", \"text_file\": \"%s\", \"add_bos\": false, \"token_ids\": [", argv[1], argv[2]);
    for (size_t i = 0; i < ids.size(); i++) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]}\n");
    return 0;
}
