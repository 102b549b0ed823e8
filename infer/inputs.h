// Where ocrt-infer's lines come from: image paths, list files, label files, folders and stdin,
// read lazily in command-line order, so a list of millions of lines streams through.
//
// How an argument is read:
//   "-"                       stdin, one image path per line
//   a folder                  every image in it and below (.png .jpg .jpeg .bmp .tga .gif .pgm
//                             .ppm .pnm, sorted by path), each with the text of name.gt.txt
//                             beside it when there is one (the ocropus / tesstrain convention)
//   a file ending .txt/.tsv   a label file: `path<TAB>text` per line, paths relative to the
//                             label file's folder (the PaddleOCR format, as in training)
//   anything else             one image path (a missing or bad one fails on its own line)
//   --list FILE               one image path per line, used as written (relative to the
//                             working directory)
// Empty lines are skipped and a trailing '\r' is dropped everywhere.
//
// infer/ does not use train/ (docs/architecture.md), so the label-file and .gt.txt readers here are small
// lazy counterparts of train/data.cpp's, with the same rules.
#pragma once
#include <cstdint>
#include <fstream>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ocrt::infer {

struct InputLine {
  std::string path;
  std::optional<std::string> truth;  // from a label file or a .gt.txt
};

class InputReader {
 public:
  // need_truth (--eval): every line must come with its text. Image paths, list files and stdin
  // are then refused when added, and a folder's images without a .gt.txt are skipped (counted
  // in skipped_without_truth()).
  explicit InputReader(bool need_truth = false, std::istream* standard_input = nullptr);
  ~InputReader();

  void add(const std::string& arg);        // classified as above; throws for a bad use
  void add_list(const std::string& file);  // --list FILE; throws when it cannot be opened
  bool empty() const { return sources_.empty(); }

  // The next line, false at the end. Throws naming the file and line for a malformed label file.
  bool next(InputLine& line);

  int64_t skipped_without_truth() const { return skipped_; }

 private:
  enum class Kind { image, folder, label_file, list_file, stdin_paths };
  struct Source {
    Kind kind;
    std::string path;
  };
  bool open_next_source();
  bool read_line(std::istream& in, std::string& line);

  bool need_truth_;
  std::istream* stdin_;
  std::vector<Source> sources_;
  size_t next_source_ = 0;
  // The source being read.
  std::optional<Source> current_;
  std::unique_ptr<std::ifstream> file_;
  int64_t lineno_ = 0;
  std::vector<std::string> folder_images_;
  size_t folder_pos_ = 0;
  int64_t skipped_ = 0;
};

// Image file name extensions a folder is scanned for (lower case, with the dot).
bool is_image_file_name(const std::string& path);

}  // namespace ocrt::infer
