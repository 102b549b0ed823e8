// Reading a whole page (docs/pages.md): the detector finds the text lines, each is cut out
// upright, the recogniser reads them all in one run, and the lines are placed on the page and
// put in reading order.
//
//   TextDetector detector("weights/det-en.safetensors");
//   Predictor predictor("weights/crnn-en.safetensors");
//   Page page = read_page(image, "scan.png", detector, predictor);
//   std::string hocr = format_pages({page}, PageFormat::hocr);
//
// The steps:
//   1. detect: line outlines in page pixels (infer/detector.h); none gives an empty page;
//   2. orientation: how the page is turned (0, 90, 180 or 270 degrees clockwise), see below;
//   3. each outline is given the corner order of that orientation, so that its top edge runs
//      the way the text reads, and cut out upright (crop_line) at least 32 pixels high;
//      lines are added where the page has ink the size of a glyph or a dash that no outline
//      covers (missed_ink in page.h), and kept when read surely;
//   4. the predictor reads every line of the page in one run (sorted by width and batched,
//      on every device it has);
//   5. place_words puts each line's words back on the page; regions that read as nothing
//      (a figure, a rule, a speck) are left out;
//   6. lines the detector ran across the gutter between two columns are split where it runs
//      (split_at_gutters: a gap in the line that the lines around it leave empty too);
//   7. reading_order groups the lines into blocks, found on the page as it would stand: turned
//      upright and deskewed by the lines' median slant (reading_order compares axis-aligned
//      boxes, which a skew of a degree or two makes overlap); the lines keep the input
//      image's pixels.
//
// Orientation. The detector's outlines say whether the text runs across or down the page: each
// outline whose long side is at least 1.5 times its short side votes with its length for the
// direction of that side; more length down the page than across means 90 or 270, otherwise 0 or
// 180. Which of the two cannot be seen from outlines (a line turned by 180 degrees has the same
// box), so the recogniser reads up to `orientation_lines` of the longest lines as if upright (0
// or 90); when their mean confidence per character is below `orientation_sure` it reads them the
// other way too, and the lines that read as text vote for the way they read surer
// (orientation_vote, vote_confidence); an undecided vote reads the next longest lines both ways
// too, up to `orientation_max_lines`. Those lines' readings are kept, so the probe costs at most
// the reading of those lines once more, not a second run over the page. A page whose probe still
// reads poorly both ways (below `sideways_check`) without a decisive vote may lie sideways with
// lines the detector, trained on upright text, did not find: it is detected again turned by a
// quarter turn, and that detection is kept when its probe reads better or votes decisively
// (take_sideways). A page found turned is then detected again standing upright, where the
// detector finds its lines best (`detect_upright`). Vertical scripts are not read (a page of vertical text looks like a
// page turned by 90 degrees).
#pragma once
#include <cstdint>
#include <string>

#include "infer/detector.h"
#include "infer/page.h"
#include "infer/predictor.h"

namespace ocrt::infer {

// How much better (mean confidence per character) a page's probe must read turned by a quarter
// turn to be taken for a page lying sideways (PageReaderOptions::sideways_check): pages lying
// sideways read 0.13-0.37 better so (6 real pages, crnn-en and crnn-s), a hard table upright
// read as junk both ways 0.01 better.
constexpr double kSidewaysMargin = 0.1;

struct PageReaderOptions {
  // How the page is turned, clockwise, in degrees: -1 decides (see above); 0, 90, 180 or 270
  // is taken as given (e.g. ocrt-infer --rotation 0 for pages known to be upright).
  int rotation = -1;
  int64_t orientation_lines = 8;  // lines read both ways to tell 0 from 180 (90 from 270)
  // When those lines' vote is undecided (the two ways within one vote), the next longest
  // orientation_lines are read both ways too, up to this many in all.
  int64_t orientation_max_lines = 32;
  // Read upright (0 or 90) with at least this mean confidence per character, the probe lines
  // are not read the other way: upright pages read at 0.952 or more (24 synthetic pages), pages
  // turned by 180 degrees at 0.847 or less read as if upright (16 pages), and the second reading
  // cost an eighth of a page's recogniser time. 1.01: always both ways.
  double orientation_sure = 0.93;
  // Read both ways, still below this mean confidence per character and without a decisive vote
  // (the winner ahead by three quarters of the probe lines), the page is detected again turned by
  // a quarter turn (a page lying sideways, whose lines the detector misses), and that detection
  // is kept when its probe reads at least kSidewaysMargin better or votes decisively
  // (take_sideways); 0: never. Real pages standing upright or on their heads read their winning way
  // at 0.92 or more, except pages of charts and ruled tables (0.40-0.87, half of them with a
  // decisive vote); pages lying sideways read 0.18-0.75 (docs/pages.md, "Orientation").
  double sideways_check = 0.9;
  // A page found turned (by 90, 180 or 270 degrees) is detected again standing upright, where
  // the detector, trained on upright text, finds its lines best; false: its first outlines are
  // read (turned).
  bool detect_upright = true;
  int64_t min_line_height = 32;   // line images are cut at least this high (the recogniser's height)
  // A batch of the page's lines holds at most this many columns (lines x width at the model's
  // height), below the predictor's own cap: a page's lines are long (a 300 dpi column line is
  // about 460 columns), and a batch's activations take about 30 KB a column in crnn. 4096 (8
  // such lines) kept a 300 dpi page at 394 MiB peak RSS, against 627 MiB with batches of 32
  // lines, for about 9% more time (bench/results/pages.md). 0: the predictor's cap. Only a
  // predictor with a CPU worker takes it (Predictor::run).
  int64_t max_batch_columns = 4096;
  // Each line is cut out lengthened at both ends by this many times its height (lengthen in
  // page.h): the detector's region of a short word in small type can stop inside its first or
  // last glyph, which the recogniser then drops ("(120)" read "120)", "Net" read "et"). 0.15
  // took 29 real pages from 86.4% to 88.6% of the words right (0.2: 88.5%, 0.3: 88.6%;
  // bench/results/pages.md); where the words sit on the page comes from the characters'
  // positions, not from this margin.
  double end_pad = 0.15;
  // And where the outline's end cuts a glyph, the end follows the glyph's ink out to at most
  // this many heights and stops end_pad past it (fit_ends_to_ink in page.h); 0: end_pad alone.
  double end_reach = 0.6;
  // Then each outline grows above and below into the blank rows beside it, by half of those
  // found within this many heights (grow_into_blank in page.h); 0: not at all.
  double side_reach = 0.2;
  // A line's cut printed on a halftone screen is blurred by this many of its pixels before it
  // is read (descreen_line in page.h); 0: never.
  double descreen_lines = 1.0;
  // Underlines and rules caught in a line's cut are erased: runs of ink along a row at least
  // this many times the cut's height (erase_rules in page.h); 0: kept.
  double erase_rules = 2.5;
  // And a table's column rules crossing a line's cut: columns of ink across it that go on past
  // it on the page for this many outline heights (erase_column_rules in page.h); 0: kept.
  double erase_column_rules = 0.5;
  // A line read with a mean confidence per character below this is dropped from the page (not
  // from the count of outlines): what the detector took for text in a chart, a photo or a row of
  // dots reads as junk, sure of nothing. PaddleOCR's drop_score rule at its default, 0.5: on the
  // 29 real pages it left out 64% of the extra words (684 -> 246) and 12 of 11147 words read
  // right (bench/results/pages.md). 0: every line kept.
  double min_confidence = 0.5;
  // Lines are looked for where the page has ink the size of a glyph or a dash that no outline
  // covers (missed_ink in page.h: a deposition's lone line numbers, a table's "-" cells; on a
  // page found turned, on the page turned upright), and kept only when read with at least this
  // mean confidence per character (and min_confidence); 0: not looked for.
  double missed_ink = 0.8;
  // Spaces the recogniser left out in tightly set print are put in where the line image shows a
  // word gap (split_at_ink_gaps in page.h), and spaces it read into an e-mail address after a
  // full stop are taken out where it shows none (join_address_spaces): at least (and under)
  // space_gap times the line image's height and
  // space_gap_ratio times the line's median gap between characters. 0: never. On the 29 real
  // pages (bench/results/pages.md) 0.15 read 27 more words right of the digital pages' 7734
  // (tables of tight PDF spacing: "Inc (PFE.N)", "Keryx Biopharmaceuticals") and the same of
  // the scans'; 0.12 and 0.18 fewer (+24, +20 in all).
  double space_gap = 0.15;
  double space_gap_ratio = 2.5;
  // Words read as capitals whose first glyph stands at least this share of its height above
  // the others' (small capitals) are put in lower case after it (lower_small_caps in page.h);
  // 0: never.
  double small_caps_drop = 0.1;
  // Lines that run across a gutter between columns are split (split_at_gutters in page.h).
  bool split_gutters = true;
  GutterOptions gutters;
  ReadingOrderOptions order;
};

// What read_page found out on the way, for reports and tests.
struct PageReadInfo {
  int rotation = 0;               // degrees clockwise the page was found (or said) to be turned
  bool rotation_decided = false;  // decided from the page (not given)
  bool vertical = false;          // the outlines ran down the page (90 or 270)
  int64_t boxes = 0;              // outlines the detector found
  int64_t lines = 0;              // lines on the page (boxes that read as something)
  int64_t failed_lines = 0;       // lines the recogniser could not read (each keeps its error)
  int64_t dropped_lines = 0;      // lines read below options.min_confidence, left out
  int64_t ink_lines = 0;          // lines looked for at ink no outline covered (options.missed_ink)
  int64_t ink_lines_kept = 0;     // of them, read surely enough to stay on the page
  double skew_deg = 0;            // the lines' median slant on the upright page, clockwise positive
  // Mean confidence per character of the probe lines read upright for 0 (or 90) and for 180 (or
  // 270); 0 when nothing was probed.
  double probe_confidence[2] = {0, 0};
  int64_t probe_lines = 0;
  bool probed_both = false;  // the probe lines were read both ways (else the first was sure)
  // Read both ways: the probe lines that read surer (per character) each way; the way with
  // more wins, the mean confidence above breaks a tie.
  int64_t probe_votes[2] = {0, 0};
  // Of those votes, the ones of lines read at least kSureVote per character the way they voted:
  // what decides whether the vote was decisive (options.sideways_check). A page lying sideways
  // reads as junk such as "88838" at 0.5-0.8 either way, which looks like text and votes.
  int64_t probe_sure_votes[2] = {0, 0};
  // The page was detected again turned by a quarter turn (options.sideways_check), and the
  // winning way's mean confidence there (0 when nothing was found); when it beat the first
  // detection's, rotation, boxes and the probe's figures above are the turned detection's.
  bool sideways_tried = false;
  double sideways_confidence = 0;
  bool detected_upright = false;  // detected again upright (options.detect_upright)
  // Seconds spent in each step: the detector's (TextDetector::Times), cutting the lines out, the
  // recogniser (the orientation probe included), placing the words and finding the order.
  int64_t gutter_splits = 0;  // lines added by splitting lines at gutters
  int64_t gap_spaces = 0;     // spaces put in at word gaps the recogniser read run together
  int64_t address_spaces = 0; // spaces taken out of e-mail addresses where the ink has no gap
  int64_t small_caps_words = 0;  // words of small capitals put back in lower case (lower_small_caps)
  TextDetector::Times detect;
  double cut_s = 0, recognise_s = 0, layout_s = 0;
};

// Reads one page. `name` names the page in the result and in line errors ("scan.png line 4:
// ..."). A blank page (no outlines) gives a page with no blocks, not an error; a line the
// recogniser cannot read keeps its error in the page. Throws only for an empty image or a bad
// option. The predictor must not be running anything else (one run at a time).
Page read_page(const GrayImage& image, const std::string& name, TextDetector& detector, Predictor& predictor,
               const PageReaderOptions& options = {}, PageReadInfo* info = nullptr);

// Which way a page's probe lines read better, once read both ways (docs/pages.md,
// "Orientation"): `upright` and `turned` hold each probe line's confidence per character read
// the first way (0, or 90) and turned by 180 degrees, `mean_*` the mean over all their
// characters. Each line that reads as text at least one way (kOrientationVoteFloor per character)
// votes for the way it reads surer; more votes win, and the means decide a tie (the first way
// when they are equal). Returns 0 for the first way, 1 for the turned one; `votes` gets the
// counts. Why votes: a long run of dots or rules, or a chart's graphics, reads as junk either way
// (0.1-0.2 per character) and outweighed the lines of text in the mean: a table page standing
// upright read at 0.54 against 0.63 turned while 7 of its 8 probe lines were surer upright; a
// chart page turned by 180 degrees had 2 lines of text among its 8 longest, and 6 of junk.
constexpr double kOrientationVoteFloor = 0.5;
constexpr double kSureVote = 0.8;
// A probe line's confidence per character as it votes: 0 unless its reading looks like text (at
// least 3 letters or digits, making up at least half of its characters other than spaces), so
// that a table's rules and leader dots, read as runs of dots and dashes about as surely either
// way up, do not vote. A failed reading is 0.
double vote_confidence(const LineResult& reading);

// Whether a page's detection turned by a quarter turn (options.sideways_check) replaces the first
// one: when its probe's winning way reads at least kSidewaysMargin better per character than the
// first's, or when its probe lines, read both ways, voted decisively (three quarters of them
// ahead among the sure votes, PageReadInfo::probe_sure_votes), which the first's had not. A dense
// table lying sideways (scribeocr's table_10 turned by 90) read 0.392 a character in its turned
// detection against 0.415 in the first, one long line of junk holding the mean down, while its
// turned probe voted 6 sure lines to none.
bool take_sideways(const PageReadInfo& first, const PageReadInfo& turned);

// The image turned clockwise by `degrees` (0, 90, 180 or 270; width and height swap for 90 and
// 270), pixel for pixel: turning by 90 and then by 270 gives the image back. What the page
// reader does to a page it found turned, in reverse (tests and bench_orientation turn pages).
GrayImage turn_clockwise(const GrayImage& image, int degrees);
int orientation_vote(const std::vector<double>& upright, const std::vector<double>& turned, double mean_upright,
                     double mean_turned, int votes[2]);

// The outline with its corners in the order of a page turned clockwise by `rotation` (0, 90,
// 180 or 270): the corner order of the four that makes the top edge (corner 0 to corner 1) run
// closest to the text direction of such a page (right, down, left, up).
Quad orient_outline(const Quad& outline, int rotation);

// The page turned back upright: a point of a `width` x `height` image turned clockwise by
// `rotation`, in the upright page's pixels (whose size is height x width for 90 and 270), and
// back. Exact for whole multiples of 90 degrees.
Point to_upright(const Point& p, int rotation, int64_t width, int64_t height);
Point from_upright(const Point& p, int rotation, int64_t width, int64_t height);

}  // namespace ocrt::infer
