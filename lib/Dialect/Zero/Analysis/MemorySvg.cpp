//===- MemorySvg.cpp - The memory plan as a picture -----------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::zero;

//===----------------------------------------------------------------------===//
// Memory picture
//===----------------------------------------------------------------------===//

namespace {

/// A binary byte unit for axis labels.
struct ByteUnit {
  double scale;
  StringRef name;
};

ByteUnit pickUnit(double bytes) {
  if (bytes >= double(1ll << 30))
    return {double(1ll << 30), "GiB"};
  if (bytes >= double(1 << 20))
    return {double(1 << 20), "MiB"};
  if (bytes >= 1024)
    return {1024, "KiB"};
  return {1, "B"};
}

std::string formatBytes(double bytes) {
  ByteUnit u = pickUnit(bytes);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f ", bytes / u.scale) << u.name;
  return s;
}

/// A 1-2-5 step giving about `count` intervals over [0, max].
double niceStep(double max, int count) {
  double raw = max / count;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw)
      return m * p;
  return 10 * p;
}

std::string escapeXml(StringRef s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// Tableau-like palette, one color per MemoryCategory.
constexpr const char *kCategoryColors[kNumMemoryCategories] = {
    "#4e79a7", "#59a14f", "#f28e2b", "#e15759", "#b07aa1", "#9c755f",
    "#76b7b2", "#edc948", "#ff9da7", "#17becf", "#bab0ac", "#8cd17d"};

} // namespace

void mlir::zero::writeMemorySvg(const MemoryPlan &plan,
                                const StepSchedule &schedule,
                                llvm::raw_ostream &os) {
  constexpr double width = 1060, height = 580;
  constexpr double left = 90, right = 270, top = 50, bottom = 60;
  constexpr double plotW = width - left - right, plotH = height - top - bottom;
  const int64_t numOps = plan.ops.size();

  // Downsample to at most one bin per pixel; a bin shows its op with the most
  // live bytes so that no peak is lost.
  int64_t bins = std::min<int64_t>(numOps, int64_t(plotW));
  struct Bin {
    int64_t lo, hi; // op index range [lo, hi)
    std::array<int64_t, kNumMemoryCategories> live;
  };
  std::vector<Bin> binned;
  double maxArena = 0;
  for (int64_t b = 0; b < bins; ++b) {
    int64_t lo = b * numOps / bins, hi = (b + 1) * numOps / bins;
    int64_t best = lo, bestTotal = -1;
    for (int64_t i = lo; i < hi; ++i) {
      int64_t total = 0;
      for (int64_t v : plan.liveByCategory[i])
        total += v;
      if (total > bestTotal) {
        best = i;
        bestTotal = total;
      }
    }
    binned.push_back({lo, hi, plan.liveByCategory[best]});
    maxArena = std::max(maxArena, double(bestTotal));
  }

  double persistentTotal = 0;
  for (int64_t v : plan.persistentByCategory)
    persistentTotal += v;
  double yMax =
      std::max({double(plan.peakBytes), persistentTotal + maxArena, 1.0}) * 1.1;
  ByteUnit unit = pickUnit(yMax);
  auto xOf = [&](double opIndex) {
    return left + (numOps ? opIndex / numOps : 0) * plotW;
  };
  auto yOf = [&](double bytes) { return top + plotH * (1 - bytes / yMax); };
  auto num = [](double v) { return llvm::format("%.1f", v); };

  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width)
     << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << num(width)
     << " " << num(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << num(left) << "\" y=\"24\" font-size=\"15\" "
     << "font-weight=\"bold\">Memory per rank: @"
     << escapeXml(schedule.getStep().getSymName()) << " (ZeRO stage "
     << schedule.getStage() << ", " << schedule.getWorldSize()
     << " ranks)</text>\n";

  // Grid and y axis.
  double step = niceStep(yMax / unit.scale, 8);
  for (double v = 0; v * unit.scale <= yMax; v += step) {
    double y = yOf(v * unit.scale);
    os << "<line x1=\"" << num(left) << "\" y1=\"" << num(y) << "\" x2=\""
       << num(left + plotW) << "\" y2=\"" << num(y)
       << "\" stroke=\"#e0e0e0\"/>\n";
    os << "<text x=\"" << num(left - 6) << "\" y=\"" << num(y + 4)
       << "\" text-anchor=\"end\">" << llvm::format("%g", v) << "</text>\n";
  }
  os << "<text transform=\"translate(20," << num(top + plotH / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">bytes per rank (" << unit.name
     << ")</text>\n";

  // x axis.
  if (numOps > 0) {
    double xs = std::max(1.0, niceStep(double(numOps), 8));
    for (double i = 0; i <= numOps; i += xs)
      os << "<text x=\"" << num(xOf(i)) << "\" y=\"" << num(top + plotH + 18)
         << "\" text-anchor=\"middle\">" << int64_t(i) << "</text>\n";
  }
  os << "<text x=\"" << num(left + plotW / 2) << "\" y=\"" << num(height - 16)
     << "\" text-anchor=\"middle\">op index in the step (program order; "
     << numOps << " ops)</text>\n";

  // Persistent bands at the bottom, then the stacked step arena.
  struct LegendEntry {
    unsigned category;
    bool persistent;
    double bytes;
  };
  std::vector<LegendEntry> legend;
  double base = 0;
  for (unsigned c = 0; c < kNumMemoryCategories; ++c) {
    double bytes = plan.persistentByCategory[c];
    if (bytes <= 0)
      continue;
    os << "<rect x=\"" << num(left) << "\" y=\"" << num(yOf(base + bytes))
       << "\" width=\"" << num(plotW) << "\" height=\""
       << num(yOf(base) - yOf(base + bytes)) << "\" fill=\""
       << kCategoryColors[c] << "\" fill-opacity=\"0.55\"/>\n";
    base += bytes;
    legend.push_back({c, true, bytes});
  }
  std::vector<double> below(binned.size(), base);
  for (unsigned c = 0; c < kNumMemoryCategories; ++c) {
    if (plan.peakByCategory[c] <= 0)
      continue;
    // Step outline: each bin holds its value over [lo, hi).
    std::string d;
    llvm::raw_string_ostream path(d);
    std::vector<double> above(binned.size());
    for (auto [b, bin] : llvm::enumerate(binned)) {
      above[b] = below[b] + bin.live[c];
      path << (b ? " L" : "M") << num(xOf(bin.lo)) << "," << num(yOf(above[b]))
           << " L" << num(xOf(bin.hi)) << "," << num(yOf(above[b]));
    }
    for (size_t b = binned.size(); b-- > 0;)
      path << " L" << num(xOf(binned[b].hi)) << "," << num(yOf(below[b]))
           << " L" << num(xOf(binned[b].lo)) << "," << num(yOf(below[b]));
    os << "<path d=\"" << d << " Z\" fill=\"" << kCategoryColors[c]
       << "\" fill-opacity=\"0.85\" stroke=\"none\"/>\n";
    below = std::move(above);
    legend.push_back({c, false, double(plan.peakByCategory[c])});
  }
  os << "<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\""
     << num(plotW) << "\" height=\"" << num(plotH)
     << "\" fill=\"none\" stroke=\"#444\"/>\n";

  // Backward start and peak.
  if (plan.backwardStart >= 0 && numOps > 0) {
    double x = xOf(plan.backwardStart);
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(top) << "\" x2=\""
       << num(x) << "\" y2=\"" << num(top + plotH)
       << "\" stroke=\"#333\" stroke-dasharray=\"6,4\"/>\n";
    os << "<text x=\"" << num(x + 4) << "\" y=\"" << num(top + 14)
       << "\" fill=\"#333\">backward</text>\n";
  }
  double py = yOf(plan.peakBytes);
  os << "<line x1=\"" << num(left) << "\" y1=\"" << num(py) << "\" x2=\""
     << num(left + plotW) << "\" y2=\"" << num(py)
     << "\" stroke=\"#d62728\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"8,4\"/>\n";
  os << "<text x=\"" << num(left + plotW - 4) << "\" y=\"" << num(py - 6)
     << "\" text-anchor=\"end\" fill=\"#d62728\">peak "
     << formatBytes(plan.peakBytes) << " (persistent "
     << formatBytes(plan.persistentBytes) << " + arena "
     << formatBytes(plan.arenaBytes) << ")</text>\n";

  // Legend.
  double lx = left + plotW + 20, ly = top;
  for (const LegendEntry &e : legend) {
    os << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly) << "\" width=\"14\" "
       << "height=\"14\" fill=\"" << kCategoryColors[e.category]
       << "\" fill-opacity=\"" << (e.persistent ? "0.55" : "0.85") << "\"/>\n";
    os << "<text x=\"" << num(lx + 20) << "\" y=\"" << num(ly + 11) << "\">"
       << stringifyMemoryCategory(static_cast<MemoryCategory>(e.category))
       << "</text>\n";
    os << "<text x=\"" << num(lx + 20) << "\" y=\"" << num(ly + 25)
       << "\" fill=\"#666\" font-size=\"10\">"
       << (e.persistent ? "persistent " : "step arena, max ")
       << formatBytes(e.bytes) << "</text>\n";
    ly += 32;
  }
  os << "</svg>\n";
}
