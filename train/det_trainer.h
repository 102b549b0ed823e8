// Training a text detector (ocrt-train --arch dbnet): the recognisers' loop (trainer.h) with
// pages instead of lines. What is the same: the optimizer, the schedule, clipping, checkpoints
// with the optimizer's state and exact resume, --init, --max-minutes, --stop-at, signals,
// metrics.jsonl, best.safetensors, and data parallelism (the replicas sum gradients through the
// same communicators). What differs:
//
//   data   pages, each with the outlines of its lines: rendered on the fly (--train synth,
//          train/synth_page.h) or read from folders that ocrt-synth --pages wrote (NAME.png +
//          NAME.json), so pages can be rendered once on every core and reused with fresh crops;
//          sample i of step s is a pure function of (seed, s, i): page, scale and crop
//          (train/det_targets.h make_det_sample)
//   step   maps = model.forward_maps(x, with_threshold = true); loss = det_loss(maps, targets)
//          (train/det_loss.h); backward; clip; update
//   eval   every validation page read as inference reads it (models/dbnet.h detect_text_lines)
//          and its lines matched one to one with the truth's (box IoU >= 0.5): precision,
//          recall and their harmonic mean F. The best model is the one of the highest F; the
//          checkpoint's best_cer field holds 1 - F (an error, lower is better, like a CER).
#pragma once

#include "runtime/comm.h"
#include "runtime/device.h"
#include "runtime/geometry.h"
#include "train/trainer.h"

namespace ocrt::train {

// One replica of a detector's training run (run_training calls it for a detector arch, once per
// replica, as it calls the recognisers' loop). A signal (runtime/interrupt.h) stops it after
// the step in progress, with a checkpoint; with one replica, also during validation.
TrainResult run_detector_replica(const TrainConfig& cfg, Communicator& comm, Device device);

// Detection quality of found outlines against true ones: each found box is matched to the
// unmatched true box it overlaps most, and counts when their intersection over union (of the
// axis-aligned boxes) is at least iou.
struct DetectionScore {
  int64_t found = 0, truth = 0, matched = 0;
  double precision() const { return found > 0 ? (double)matched / (double)found : (truth == 0 ? 1 : 0); }
  double recall() const { return truth > 0 ? (double)matched / (double)truth : 1; }
  double f_measure() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0;
  }
  void add(const DetectionScore& o) { found += o.found, truth += o.truth, matched += o.matched; }
};
DetectionScore score_detection(const std::vector<Quad>& found, const std::vector<Quad>& truth, double iou = 0.5);

}  // namespace ocrt::train
