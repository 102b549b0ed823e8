// Where ocrt-infer's inputs come from: image paths, list files, label files, folders and stdin,
// read lazily in command-line order, so a list of millions of lines streams through; and
// whether each image is a text line or a whole page (ItemReader, at the end).
//
// How an argument is read:
//   "-"                       stdin, one image path per line
//   a folder                  every image in it and below (.png .jpg .jpeg .bmp .tga .gif .pgm
//                             .ppm .pnm .tif .tiff, sorted by path), each with the text of
//                             name.gt.txt beside it when there is one (the ocropus / tesstrain
//                             convention)
//   a file ending .txt/.tsv   a label file: `path<TAB>text` per line, paths relative to the
//                             label file's folder (the PaddleOCR format, as in training)
//   a stream                  a pipe or a device (<(...), /dev/null), or /dev/stdin, /dev/fd/N
//                             whatever they are: text read once, as it comes; a label file if
//                             its first line holds a tab, else one image path a line; relative
//                             paths from the working directory. Binary data (an image sent
//                             through a pipe) is an error of that input.
//   anything else             one image path (a missing or bad one fails on its own line)
//   --list FILE               one image path per line, used as written (relative to the
//                             working directory); any readable file, a pipe too
// Empty lines are skipped and a trailing '\r' is dropped everywhere. A label line without a tab
// (or with an empty path) is that line's error; the lines around it are read.
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
#include <utility>
#include <vector>

#include "runtime/image.h"

namespace ocrt::infer {

struct InputLine {
  std::string path;
  std::optional<std::string> truth;  // from a label file or a .gt.txt
  std::string error;                 // a malformed label line ("FILE line N: ..."); path is then "FILE line N"
};

class InputReader {
 public:
  // need_truth (--eval): every line must come with its text. Image paths, list files and stdin
  // are then refused when added, and a folder's images without a .gt.txt are skipped (counted
  // in skipped_without_truth()). With `pages` too (inputs may be pages, whose truth is a file
  // beside them: page_truth_file), image paths, lists and stdin are taken, and a folder's
  // images are kept when they have a .gt.txt or a page truth file.
  explicit InputReader(bool need_truth = false, std::istream* standard_input = nullptr, bool pages = false);
  ~InputReader();

  void add(const std::string& arg);        // classified as above; throws for a bad use
  void add_list(const std::string& file);  // --list FILE; throws when it cannot be opened
  bool empty() const { return sources_.empty(); }

  // The next line, false at the end. A malformed label line is a line with an error.
  bool next(InputLine& line);

  int64_t skipped_without_truth() const { return skipped_; }
  // What the reader noticed that is not an error of any line (a folder with no image in it),
  // one sentence each, taken once.
  std::vector<std::string> take_notes() { return std::exchange(notes_, {}); }

 private:
  enum class Kind { image, folder, label_file, list_file, stdin_paths, stream };
  struct Source {
    Kind kind;
    std::string path;
  };
  bool open_next_source();
  bool read_line(std::istream& in, std::string& line);
  InputLine label_line(const std::string& line, const std::string& base) const;
  std::string where() const;  // "FILE line N": the line just read

  bool need_truth_, pages_;
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
  int stream_labels_ = -1;  // a stream's kind, from its first line: 1 labels, 0 paths, -1 not seen
  std::vector<std::string> notes_;
};

// Image file name extensions a folder is scanned for (lower case, with the dot).
bool is_image_file_name(const std::string& path);

// The image files (is_image_file_name) in folder `dir` and below, sorted by path: a stable order
// whatever the file system's.
std::vector<std::string> folder_image_files(const std::string& dir);

// ---- Lines and pages
//
// ocrt-infer reads an image as a text line or as a whole page (docs/cli.md, "Pages"). Unless
// --line or --page says which, the image's shape decides: a page is more than kPageMinHeight
// (100) pixels high and less than kPageMaxAspect (6) times as wide as it is high. A text line is
// either low (the samples are 35-46 pixels high; a line scanned at 600 dpi is about 60-100) or
// long (a line is many times as wide as high: a 150-pixel-high line of 30 characters is
// about 3000 wide). So a pair of words at 600 dpi or a tall single word is read as a page; the
// detector then finds that one line, so reading it costs time, not the text, while a page read
// as one line would give nothing useful: when in doubt, a page. A multi-page TIFF is pages
// (scanners write documents as multi-page TIFFs; text lines are not stored so). An input from a
// label file or with a .gt.txt carries a line's text, so it is a line.
constexpr int64_t kPageMinHeight = 100;
constexpr double kPageMaxAspect = 6;
bool page_shaped(int64_t width, int64_t height);

// The size in an image file's header, without decoding it (the formats stb_image reads; not
// TIFF). False when the file cannot be read or its header is not an image's.
bool image_file_size(const std::string& path, int64_t& width, int64_t& height);

// The truth file of a page for --eval, beside its image: NAME.json (ocrt-synth --pages),
// NAME.hocr or NAME.xml (ALTO or PAGE XML), where NAME is the image's path without its
// extension, followed by "-N" for page N (from 1) of a multi-page file (page_number > 0).
// Empty when there is none.
std::string page_truth_file(const std::string& image_path, int64_t page_number = 0);

enum class InputKind { automatic, line, page };

// One thing to read: a text line or a page.
struct InputItem {
  bool page = false;
  std::string path;                  // the input file
  std::string name;                  // path, or "path#N" for page N (from 1) of a multi-page file
  int64_t page_number = 0;           // N above; 0 for a file of one image
  int64_t pages_in_file = 1;         // the file's pages (1 unless a multi-page TIFF)
  std::optional<GrayImage> image;    // already decoded (TIFF pages); else read from path
  std::optional<std::string> truth;  // a line's text (label file, .gt.txt)
  std::string why;                   // for a page: why it is read as one ("--page", its size...)
  std::string error;                 // it could not be read (a TIFF page that does not decode)
};

// The items of an InputReader's inputs, lines or pages as `kind` says (see above). Images are
// not decoded here, except TIFFs (whose pages are counted and decoded one at a time, as they
// are asked for) and, in automatic mode, the header of every other image.
class ItemReader {
 public:
  ItemReader(InputReader& inputs, InputKind kind, int64_t max_image_pixels = kDefaultMaxImagePixels);
  // The next item, false at the end. A malformed label line is an item with its error (never
  // opened as a file); an unreadable image is an item with an error or a line that fails when
  // read.
  bool next(InputItem& item);

 private:
  InputReader& inputs_;
  InputKind kind_;
  int64_t max_image_pixels_;
  // The TIFF whose pages are being handed out.
  std::string tiff_bytes_;
  InputLine tiff_input_;
  int64_t tiff_pages_ = 0, tiff_next_ = 0;
};

}  // namespace ocrt::infer
