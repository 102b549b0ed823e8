// What ocrt knows about a page once its lines are found and read: blocks of lines in reading
// order, lines of words, words of characters, each with its box on the page and a confidence.
// The output formats (infer/page_format.h) write this; the pipeline that fills it is
// detect -> crop -> recognise (docs/pages.md).
//
// Two steps live here because they need no model:
//   place_words    a recognised line's characters (CTC frame positions along the cropped line)
//                  back on the page, split into words at spaces;
//   reading_order  lines found anywhere on a page into blocks in the order a person reads them.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/predictor.h"
#include "runtime/geometry.h"

namespace ocrt::infer {

struct PageChar {
  std::string ch;  // UTF-8
  Rect box;
  double confidence = 0;
  // Where it lies along its line's outline, as fractions of its length: its span (as its box)
  // and its CTC position.
  double begin = 0, end = 0, centre = 0;
};

struct PageWord {
  std::string text;
  Rect box;
  double confidence = 0;  // the mean of its characters' (the line's rule, models/ctc_decode.h)
  std::vector<PageChar> chars;
  double begin = 0, end = 0;  // where it lies along its line's outline, as fractions of its length
};

struct PageLine {
  Quad outline;
  Rect box;                // outline.box()
  // Where its characters lie along the outline, as fractions of its length (from the first
  // character's left edge to the last one's right edge, by their CTC positions): the detector's
  // outline reaches past the text by a margin, which can close a narrow gutter between columns.
  double text_begin = 0, text_end = 1;
  std::string text;
  double confidence = 0;
  std::vector<PageWord> words;
  std::string error;       // set when the line could not be read (its text is then empty)
};

struct PageBlock {
  Rect box;
  std::vector<PageLine> lines;
};

struct Page {
  std::string name;        // the input's path (and "#N" for the Nth page of a multi-page file)
  int64_t width = 0, height = 0;
  int rotation = 0;        // degrees clockwise the page was found (or said) to be turned
  std::vector<PageBlock> blocks;  // in reading order
  std::string error;       // set when the page could not be read at all
};

// The part of a line's outline between fractions f0 and f1 of its length (0 its start, corner
// 0 to 3; 1 its end): a character's, a word's or the text's place on the page.
Quad outline_slice(const Quad& outline, double f0, double f1);

// The outline lengthened at both ends (along corner 0 -> 1) by `pad` times its height (corner 0
// -> 3); pad <= 0 leaves it as it is. The second form lengthens its start (corners 0, 3) and its
// end (corners 1, 2) by their own amounts.
Quad lengthen(const Quad& outline, double pad);
Quad lengthen(const Quad& outline, double start_pad, double end_pad);

// The outline lengthened to take in the glyphs its ends cut. A detector's outline of a short
// word or number in small type often stops inside its first or last glyph ("(170)" read
// "170)"), a fraction of a glyph the fixed `pad` does not always reach. From each end of the
// outline, this follows the ink of the line's middle band (rows 0.2 to 0.8 of its height, so that
// a neighbouring line's ascenders and descenders and an underline do not count) outward, through
// gaps narrower than `pad` times the height, and stops at the first wider gap; the end then lies
// `pad` heights past the last inked column. An end already in blank space, a line without clear
// ink (less than 48 grey levels between its 5th and 95th percentiles), and ink that runs on past
// `reach` heights (a rule, a neighbour set closer than a word space) keep the plain `pad`.
// Ink is the darker side of the threshold midway between those percentiles, or the lighter side
// when most of the line's top and bottom rows are dark (light text on a dark ground).
Quad fit_ends_to_ink(const GrayImage& page, const Quad& outline, double pad, double reach = 0.6);

// The outline grown above and below into the blank rows beside it: from its top edge up and
// its bottom edge down, the rows (across the whole outline) up to `reach` heights that hold no
// ink (the threshold midway between the line's 5th and 95th grey percentiles; the ground is what
// those rows beside it mostly show), and the outline grows by half of those on each side
// (the other half is the neighbour's margin); it stops at the first inked row. A detector's
// outline of a line of digits or capitals is only their height, tighter than the lines the
// recogniser learned from, which carry room for ascenders and descenders. A line without clear
// ink, and an outline under a pixel, come back unchanged.
Quad grow_into_blank(const GrayImage& page, const Quad& outline, double reach = 0.2);

// A recognised line placed on the page: `r` is the recogniser's result for the line image cut
// out along `outline`, `line_width` the width in pixels of that image (the x of r.chars are in
// its pixels). Characters get boxes from their CTC positions: a character spans from midway to
// its left neighbour to midway to its right one (half the line's typical character pitch at the
// ends), the full height of the line; words are the runs of characters between spaces. Boxes
// are the axis-aligned boxes of those slices of the outline; text_begin and text_end are where
// the first and last characters (not spaces) begin and end. A failed line keeps its error and
// no words.
PageLine place_words(const LineResult& r, const Quad& outline, double line_width);

// Lines that run across a gutter, split where it runs. A detector can join the lines of two
// columns into one where the gutter between them is narrow, and the reading order then reads
// across the columns. A gutter is told from a space by the lines around it, not by its width
// (between justified columns at 300 dpi it was as wide as a space of the justified text: 40 px
// against a 35 px pitch). On the page as it would stand (`upright` turns and deskews a page
// point), each character taken to span half its line's pitch (the median distance between
// neighbours in a word) either side of its CTC position, a line is split between two
// characters when
//   - the gap between them is at least `min_gap` pitches wide, and
//   - the lines around it (their middles within `reach` of its heights, their heights within a
//     factor of 1.6 of its height) leave a band of that gap at least `min_gutter` pitches wide
//     free of characters, and one of them has `min_beside` characters on its left (within 3
//     heights) and one on its right (the first characters of a paragraph's lines, which CTC can
//     place apart from the rest, are no column), and at least `min_lines` of them have text that
//     comes up to the band (within 2 of their pitches) on one side or the other (two spaces in
//     two lines can line up; a gutter has a column's edge on each side).
// The spaces of a paragraph do not line up from line to line; a gutter does. Each piece keeps
// `min_beside` characters at least (CTC can place a line's first character apart from the rest).
// Pieces keep the line's confidence; a word that straddles the split becomes two.
struct GutterOptions {
  double min_gap = 0.8;
  double min_gutter = 0.5;
  double reach = 4.0;
  size_t min_beside = 2;
  size_t min_lines = 3;
  // A line over joined_height times the page's median line height, with a character pitch
  // under joined_pitch times the median pitch, is taken for two lines run together (across a
  // gutter and a line apart in height): its neighbours are found by the median height, not its
  // own. A heading in large type is as much wider in pitch as it is taller.
  double joined_height = 1.6;
  double joined_pitch = 1.5;
  // When set: the widest run of columns free of ink across a line between fractions f0 and f1
  // of its outline, in page pixels (the page reader measures it on the page with widest_blank);
  // a cut then also needs min_gutter pitches of blank between the two characters' CTC
  // positions. CTC positions alone took the gap after a wide "@" for a gutter where a column of
  // right-aligned e-mail addresses ("mderchin@crtllc.com") lined up its "@crtllc.com"s.
  std::function<double(const PageLine&, double f0, double f1)> blank_run;
};
std::vector<PageLine> split_at_gutters(std::vector<PageLine> lines, const std::function<Point(const Point&)>& upright,
                                       const GutterOptions& o = {});

// The line under `outline` cut out of the page and turned upright: the outline's top edge
// (corner 0 to corner 1) becomes the image's top row. `height` rows high (0: the outline's own
// height, rounded), its width in proportion to the outline's (at most max_width); each pixel
// sampled bilinearly at its centre's place on the page; what lies outside the page is
// `outside`. This is the image the recogniser reads, and place_words maps its x back.
GrayImage crop_line(const GrayImage& page, const Quad& outline, int64_t height = 0, uint8_t outside = 255,
                    int64_t max_width = 16384);

// Underlines and table rules erased from a cut-out line image, in place: every run of ink along
// a row at least `min_run` times the image's height long becomes paper, and so does the lighter
// fringe just above and below it. The recogniser never saw ruled text in training: under an
// underline it read the spaces as '_' or '.' ("Date_of_leaving"), and a cell's rule caught in
// the cut as '_' or '-'. Glyphs are left alone: a letter's stroke is at most about one text
// height long (an em dash, a "W"), while the image is taller than its text. Ink is the side of
// the midpoint between the 2nd and 98th percentiles of the pixels that fewer pixels lie on
// (light print on a dark slide too); paper is the 90th percentile on the paper's side (the
// 10th for light print), ink the 2nd (98th); an image with less than 48 levels between paper
// and ink is left as it is. Returns the runs erased.
int64_t erase_rules(GrayImage& line, double min_run = 2.5);

// A line image cut from a page printed on a halftone screen (a table's shaded cells, a sidebar
// or a slide on a grey or dark screen), blurred by `sigma` of its pixels, in place, so that the
// recogniser, which never saw a screen in training, reads its text on a smooth ground: it read
// "kee@janney.com" as "Idece@jannoy com." and lost numbers in shaded cells. The cut is screened
// when under 40% of its pixels are within 24 levels of its paper (as in erase_column_rules)
// and it looks_screened against its blur (runtime/image.h: mostly grey once blurred, and far
// from the blur on average). A cut whose glyphs themselves are printed in dots (dotted_ink
// below: a fax of grey type, which the recogniser read "Contral", "Dale", "Repod") is blurred
// the same way. Returns whether it was blurred.
bool descreen_line(GrayImage& line, double sigma = 1.0);

// Whether a line image's glyphs are themselves printed in dots (a fax of grey type, a dithered
// scan): 4% to 10% of its ink pixels are specks (at most one inked 4-neighbour) and paper
// pixels with three or four inked neighbours (pinholes in a stroke) make 3% to 8% as many as
// its ink pixels; ink as in erase_rules. Solid strokes have neither, past their ends and
// corners; noise scattered over a scan has more specks than that.
bool dotted_ink(const GrayImage& line);

// Short outlines turned to the page's text direction, in place. The detector fits each region
// its least-area rectangle, and a region of one or two glyphs has no direction of its own: a
// lone "1" in a table cell (its flag and stem) was fitted at -26.5 degrees on an upright page,
// cut out slanted and read "7". Outlines at least 3 times as long as they are high give the
// page's direction (the mean of their angles taken modulo 180 degrees; none is changed when
// there are fewer than 3 of them or they disagree: the mean's resultant under 0.9); an outline
// under twice as long as high whose direction is more than 5 degrees off it (modulo 180) becomes
// the smallest rectangle in that direction around its corners, its corners in outline order.
// Returns the outlines turned.
int64_t align_short_outlines(std::vector<Quad>& outlines);

// The widest run of columns with no ink in the middle 80% of their rows, between fractions f0
// and f1 (0 <= f0 <= f1 <= 1) of `outline` cut from `page` at the page's scale, in the page's
// pixels; ink as in erase_rules, over the whole cut (a cut with no contrast is all blank).
double widest_blank(const GrayImage& page, const Quad& outline, double f0, double f1);

// A table's column rules erased from a line image cut out of `page` along `outline` (by
// crop_line), in place: a cell's text set tight against a rule read "16%|" or "(171)|". A run of
// neighbouring columns of `line`, each inked (as in erase_rules) on at least 90% of its rows, at
// most 0.3 image heights wide in all, is a rule when on the page the ink goes on past the cut's
// top or bottom edge, perpendicular to the line, for `reach` outline heights (ink within a pixel
// of the run's width at 90% of the points on the way). A glyph's stroke crosses the cut (it has
// blank rows above and below the text) only when the cut is tight, and never goes on past it as
// far as half a line; a rule of a table does (to the next row's text, or to the table's border).
// A screened shade is no rule: beside the run, one column of the cut past its fringe must be
// mostly paper, and on the page one side of its way mostly paper too; and a line on a shaded
// ground (under 40% of its pixels within 24 levels of the paper) is left as it is. The run, and
// the lighter fringe beside it, takes the levels of the ground on either side (drawn across each
// row; the paper where both are ink). Returns the rules erased.
int64_t erase_column_rules(const GrayImage& page, const Quad& outline, GrayImage& line, double reach = 0.5);

// Spaces the recogniser left out where the ink shows a word gap, put into its reading of a
// line image (the image it read: r.chars' x are in its pixels). Tightly set print (tables and
// narrow columns of PDFs, word spaces of a fifth of an em) reads run together ("KeryxBiopharma-
// ceuticals", "Inc(PFE.N)"): the model saw wider spaces in training. Between each two
// neighbouring characters with no space between them, the widest run of blank columns from one's
// CTC position to the other's (ink as in erase_rules' sense: the side of the midpoint between the
// 5th and 95th percentiles, over the rows of the image's middle 80%) is that pair's gap; a space
// goes in where a gap is at least `min_gap` times the image's height and at least `ratio` times
// the line's median gap between neighbouring characters (so that a line of wide letter-spacing
// keeps its words); half as wide again next to a glyph a stem wide ("i l I 1 j f t r"), whose
// side bearings are wide beside its ink. Never between digits and the marks of numbers
// ("2015", "4.61", "08/13"), before a mark that holds on to the word before it (", . ; : ) %"),
// after one that holds on to the next ("( $ #"), nor beside quotes, hyphens and dashes. The
// space gets the gap's centre as its position, the frame midway, and the lower of its
// neighbours' confidences. Lines of fewer than 4 characters, failed lines and faint images are
// left as they are. Returns the spaces put in.
int64_t split_at_ink_gaps(LineResult& r, const GrayImage& line, double min_gap, double ratio);

// Where the detector found no line but the page has ink the size of a glyph or a dash: the outlines
// of lines to read there (docs/pages.md, "Ink the detector missed"). The detector learnt lines of
// words and finds no region around a lone short token: a deposition's line numbers, a table's "-"
// and "$" cells, a rating's letter. Ink as in erase_rules, over the whole page (pages of light ink
// on dark paper, or of no contrast, give none), looked at in cells of a sixteenth of the type's
// height (the median height of `covered`, the detector's outlines; fewer than three, or a median
// beyond the page's size, give none). A connected piece of ink is left out when it touches an
// outline's box grown by `margin` of its height on every side (it belongs to a line found), when it
// is not the size of a glyph (0.3 to 1.2 heights high, at most 3 long, a little of its box inked)
// or of a dash (under 0.3 heights high, 0.3 to 2 long, solid); pieces level with each other and at
// most 0.8 heights apart make one line. More than `max_pieces` pieces outside the outlines, or more
// than `max_lines` such lines, give none: what lies there is speckle, a photo or a figure's texture
// (a page of small type whose figure gave 229 lines, all read as junk). Outlines are axis-aligned
// (corners top-left, top-right, bottom-right, bottom-left), for text that runs across the page, and
// reach 0.15 heights past the ink at each end and 0.15 above and below (0.8 heights high at least,
// for a dash).
struct MissedInkOptions {
  double margin = 0.35;
  size_t max_pieces = 4000;
  size_t max_lines = 64;
};
std::vector<Quad> missed_ink(const GrayImage& page, const std::vector<Quad>& covered, const MissedInkOptions& o = {});

// Spaces the recogniser read into an e-mail address, taken out where the line image shows no
// word gap: "Matthew.Harrison@morganstanley.com" read "Matthew. Harrison@morganstanley.com" (the
// model learnt a space after a full stop before a capital). A space after '.', '_' or '-' and
// before a word that holds an '@' goes when the widest blank run between the mark's CTC position
// and the next character's (ink as split_at_ink_gaps reads it) is under `min_gap` times the line
// image's height, the least word gap split_at_ink_gaps puts a space into. Failed lines, faint
// images and min_gap 0 are left alone. Returns the spaces taken out.
int64_t join_address_spaces(LineResult& r, const GrayImage& line, double min_gap);

// Words set in small capitals, read as capitals, put back in lower case after their first letter:
// "Davenport" set as a capital D and small capitals read "DAVENPORT" or "DavENPORT" (the recogniser
// cannot tell a small capital from a capital by its shape; its height tells). In a word of at least
// three ASCII letters (then only ": , . ;" and a possessive "'s"), the first a capital and some
// after it read as capitals, each letter's glyph is the run of inked columns (in the middle band of
// the line image; ink as split_at_ink_gaps reads it) that holds its CTC position, or the nearest,
// between the positions of the characters before and after the word (specks under 0.3 of the
// tallest run's height are no glyph); a glyph's top and bottom follow its ink up and down from the
// band. The letters read as capitals after the first are lowered when the first letter's glyph is
// its own, does not run off the cut, and stands higher than each of theirs by `least_drop` (0.1) to
// 0.42 of its height above the glyphs' median bottom (2 pixels at least; small capitals are 0.6-0.9
// of a capital's height), and their tops agree within 0.1 of it. A word of capitals alike ("NYSE"),
// one with a tall capital inside ("McDonald"), or one of small capitals alone stays as read.
// Returns the words changed.
int64_t lower_small_caps(LineResult& r, const GrayImage& line, double least_drop = 0.1);

// The text of a page in reading order: lines joined by '\n', a blank line between blocks.
std::string page_text(const Page& page);

// Reading order (docs/pages.md). Lines are grouped and ordered by recursive cuts along empty
// bands of the page (the X-Y cut): where the lines of a region leave a vertical gap at least
// `column_gap` text-line heights wide from top to bottom, the region is split into columns, read
// left to right; where lines wider than half the region (headings) close the gutter between
// columns that the other lines form, the region is cut at the first such line's bottom; otherwise
// it is split at its widest horizontal gaps into bands, read top to bottom (the widest first: a
// heading's gap before the columns' line gaps); a region with none of these is
// one block, its lines top to bottom (left to right where they share a
// height). One exception: columns of short lines (cells: a median line shorter than half of
// `cell_width_in_heights` line heights, or shorter than all of it while filling under three
// quarters of its column) whose lines share rows with the next column are a table
// or a form, and are read row by row, each row a block. Consecutive single-column bands become
// one block when they are closer than `paragraph_gap` line heights and overlap horizontally.
struct ReadingOrderOptions {
  double column_gap = 0.5;              // in median line heights
  // A vertical gap down to narrow_column_gap line heights also splits columns when at least
  // narrow_column_lines lines lie on each side of it.
  double narrow_column_gap = 0.2;
  int64_t narrow_column_lines = 5;
  double paragraph_gap = 0.8;           // in median line heights
  double cell_width_in_heights = 12.0;  // a column of lines shorter than this is table cells
  // Where a band of a would-be table holds this many lines in each of two columns, most of
  // them must sit beside a line of the other (infer/page.cpp, is_table): else it is text side
  // by side, not rows of cells.
  int64_t table_row_lines = 4;
};
std::vector<PageBlock> reading_order(std::vector<PageLine> lines, const ReadingOrderOptions& o = {});
// The same order as indices into `lines`: each block's lines, the blocks in reading order.
std::vector<std::vector<size_t>> reading_order_indices(std::vector<PageLine> lines, const ReadingOrderOptions& o = {});

}  // namespace ocrt::infer
