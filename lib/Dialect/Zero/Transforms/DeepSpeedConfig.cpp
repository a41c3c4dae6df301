//===- DeepSpeedConfig.cpp - Reading a DeepSpeed ds_config.json -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The file is parsed with llvm::json. Configs used to be read with
// nlohmann/json, whose grammar users' files were written against: a scan
// before the parse keeps what it accepted that llvm::json does not (comments,
// a byte-order mark) and rejects what llvm::json would take loosely (numbers
// such as 01, 1. or 1e400, unpaired \u surrogates). Values are echoed in
// messages as nlohmann's dump() printed them.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/Pipeline.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

using namespace mlir;
using namespace mlir::zero;
namespace json = llvm::json;

namespace {

//===----------------------------------------------------------------------===//
// Syntax
//===----------------------------------------------------------------------===//

struct SyntaxError {
  unsigned line, column; // 1-based, in bytes
  std::string message;
};

/// Deeper nesting would overflow the stack of llvm::json's recursive parser.
constexpr unsigned kMaxDepth = 1000;

SyntaxError errorAt(StringRef text, size_t offset, const Twine &message) {
  StringRef before = text.take_front(offset);
  size_t lineStart = before.rfind('\n') + 1; // npos + 1 == 0
  return {static_cast<unsigned>(before.count('\n') + 1),
          static_cast<unsigned>(offset - lineStart + 1), message.str()};
}

/// Whether `t` is exactly -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
bool isJsonNumber(StringRef t) {
  auto digits = [&t] {
    size_t n = std::min(t.find_first_not_of("0123456789"), t.size());
    t = t.drop_front(n);
    return n != 0;
  };
  t.consume_front("-");
  if (!t.consume_front("0") && !digits())
    return false;
  if (t.consume_front(".") && !digits())
    return false;
  if (t.consume_front("e") || t.consume_front("E")) {
    if (!t.consume_front("+"))
      t.consume_front("-");
    if (!digits())
      return false;
  }
  return t.empty();
}

/// Checks the \u escapes of the string whose opening quote is at `i` and
/// moves `i` to its closing quote (or the end). llvm::json would replace an
/// unpaired surrogate with U+FFFD; nlohmann/json rejected it.
std::optional<SyntaxError> skipString(StringRef text, size_t &i) {
  auto escapeAt = [&](size_t j) -> std::optional<unsigned> {
    unsigned code;
    StringRef hex = text.substr(j + 2, 4);
    if (!text.substr(j).starts_with("\\u") || hex.size() != 4 ||
        hex.getAsInteger(16, code))
      return std::nullopt;
    return code;
  };
  for (++i; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] != '\\')
      continue;
    std::optional<unsigned> code = escapeAt(i);
    if (!code || *code < 0xD800 || *code > 0xDFFF) {
      ++i; // Skips the escaped character; llvm::json checks the rest.
      continue;
    }
    std::optional<unsigned> low = escapeAt(i + 6);
    if (*code >= 0xDC00 || !low || *low < 0xDC00 || *low > 0xDFFF)
      return errorAt(text, i, "unpaired UTF-16 surrogate " + text.substr(i, 6));
    i += 11; // The pair's last hex digit.
  }
  return std::nullopt;
}

/// Turns `text` into what llvm::json::parse reads as nlohmann/json read the
/// file: comments and a byte-order mark become spaces, so that line:col stay
/// those of the file. Returns the first error nlohmann/json found that
/// llvm::json would not.
std::optional<SyntaxError> prepare(std::string &text) {
  if (StringRef(text).starts_with("\xEF\xBB\xBF"))
    text.replace(0, 3, "   ");
  unsigned depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      if (auto err = skipString(text, i))
        return err;
    } else if (c == '/' && (StringRef(text).substr(i, 2) == "//" ||
                            StringRef(text).substr(i, 2) == "/*")) {
      bool block = text[i + 1] == '*';
      size_t end =
          block ? text.find("*/", i + 2) : text.find_first_of("\r\n", i);
      if (end == std::string::npos && block)
        return errorAt(text, i, "unterminated comment");
      end = block ? end + 2 : std::min(end, text.size());
      for (size_t j = i; j < end; ++j)
        if (text[j] != '\n')
          text[j] = ' ';
      i = end - 1;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        return errorAt(text, i,
                       "brackets nested deeper than " + Twine(kMaxDepth) +
                           " levels (the parser would overflow its stack)");
    } else if (c == ']' || c == '}') {
      depth -= depth != 0;
    } else if (llvm::isDigit(c) || c == '-' || c == '+' || c == '.') {
      // llvm::json reads a number from these and takes +1 and .5 as well.
      size_t end =
          std::min(text.find_first_not_of("0123456789+-.eE", i), text.size());
      std::string token = text.substr(i, end - i);
      if (!isJsonNumber(token))
        return errorAt(text, i, "invalid number '" + token + "'");
      if (!std::isfinite(std::strtod(token.c_str(), nullptr)))
        return errorAt(text, i, "number '" + token + "' is out of range");
      i = end - 1;
    }
  }
  size_t bad;
  if (!json::isUTF8(text, &bad))
    return errorAt(text, bad, "invalid UTF-8");
  return std::nullopt;
}

/// Parses `text` into `root`.
std::optional<SyntaxError> parse(std::string text, json::Value &root) {
  if (auto err = prepare(text))
    return err;
  llvm::Expected<json::Value> value = json::parse(text);
  if (value) {
    root = std::move(*value);
    return std::nullopt;
  }
  // json::ParseError keeps its position private; its text is
  // "[line:col, byte=N]: message", the column already 1-based.
  std::string log = llvm::toString(value.takeError());
  SyntaxError err{1, 1, log};
  StringRef rest(log);
  size_t colon = rest.find("]: ");
  if (rest.consume_front("[") && !rest.consumeInteger(10, err.line) &&
      rest.consume_front(":") && !rest.consumeInteger(10, err.column) &&
      colon != StringRef::npos)
    err.message = log.substr(colon + 3);
  err.column = std::max(err.column, 1u);
  // Diagnostics start in lower case.
  if (!err.message.empty())
    err.message[0] = llvm::toLower(err.message[0]);
  return err;
}

//===----------------------------------------------------------------------===//
// Values as messages echo them
//===----------------------------------------------------------------------===//

std::vector<StringRef> sortedKeys(const json::Object &obj) {
  std::vector<StringRef> keys;
  for (const auto &kv : obj)
    keys.push_back(kv.first);
  llvm::sort(keys);
  return keys;
}

/// `d` as nlohmann/json printed it: the shortest digits that read back as
/// `d`, written out (with ".0" on whole numbers) when the decimal point falls
/// between -4 and 15 digits from their start, otherwise as 1.5e+20.
std::string formatDouble(double d) {
  if (d == 0)
    return std::signbit(d) ? "-0.0" : "0.0";
  char buf[32];
  for (int precision = 0; precision < 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  // buf is [-]d[.ddd]e(+|-)xx.
  StringRef s(buf);
  std::string out = s.consume_front("-") ? "-" : "";
  auto [mantissa, exponent] = s.split('e');
  std::string digits = mantissa.str();
  llvm::erase(digits, '.');
  int k = digits.size(), n = std::atoi(exponent.str().c_str()) + 1;
  if (k <= n && n <= 15)
    return out + digits + std::string(n - k, '0') + ".0";
  if (0 < n && n <= 15)
    return out + digits.substr(0, n) + "." + digits.substr(n);
  if (-4 < n && n <= 0)
    return out + "0." + std::string(-n, '0') + digits;
  out += digits.substr(0, 1);
  if (k > 1)
    out += "." + digits.substr(1);
  std::snprintf(buf, sizeof(buf), "e%c%02d", n - 1 < 0 ? '-' : '+',
                std::abs(n - 1));
  return out + buf;
}

std::string formatNumber(const json::Value &v) {
  if (std::optional<uint64_t> u = v.getAsUINT64()) // a non-negative integer
    return std::to_string(*u);
  double d = *v.getAsNumber();
  // llvm::json keeps -1 and -1.0 apart but does not say which it holds; its
  // printer shows a double in an exponent only from -1e17 down. Whole
  // negatives above that are echoed as integers (nlohmann wrote -1.0).
  std::optional<int64_t> i = v.getAsInteger();
  if (i && d < 0 && !StringRef(llvm::formatv("{0}", v).str()).contains('e'))
    return std::to_string(*i);
  return formatDouble(d);
}

void quote(StringRef s, llvm::raw_ostream &os) {
  os << '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      os << "\\\"";
      break;
    case '\\':
      os << "\\\\";
      break;
    case '\b':
      os << "\\b";
      break;
    case '\f':
      os << "\\f";
      break;
    case '\n':
      os << "\\n";
      break;
    case '\r':
      os << "\\r";
      break;
    case '\t':
      os << "\\t";
      break;
    default:
      if (c < 0x20)
        os << llvm::format("\\u%04x", c);
      else
        os << c;
    }
  }
  os << '"';
}

/// `v` in compact JSON as nlohmann/json's dump() wrote it, keys sorted.
void dump(const json::Value &v, llvm::raw_ostream &os) {
  switch (v.kind()) {
  case json::Value::Null:
    os << "null";
    return;
  case json::Value::Boolean:
    os << (*v.getAsBoolean() ? "true" : "false");
    return;
  case json::Value::Number:
    os << formatNumber(v);
    return;
  case json::Value::String:
    quote(*v.getAsString(), os);
    return;
  case json::Value::Array:
    os << '[';
    llvm::interleave(
        *v.getAsArray(), os, [&](const json::Value &e) { dump(e, os); }, ",");
    os << ']';
    return;
  case json::Value::Object: {
    const json::Object &obj = *v.getAsObject();
    os << '{';
    llvm::interleave(
        sortedKeys(obj), os,
        [&](StringRef key) {
          quote(key, os);
          os << ':';
          dump(*obj.get(key), os);
        },
        ",");
    os << '}';
    return;
  }
  }
}

std::string dump(const json::Value &v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  dump(v, os);
  return s;
}

//===----------------------------------------------------------------------===//
// Keys
//===----------------------------------------------------------------------===//

/// One object of the config. Each key is named once, by the read that takes
/// it; the keys no read named are warned about as unsupported.
class Section {
public:
  /// Reads `obj` with `body`, then warns about the keys it did not read.
  static void read(DeepSpeedConfig &cfg, const json::Object &obj,
                   std::string prefix, function_ref<void(Section &)> body) {
    size_t firstWarning = cfg.warnings.size();
    Section s(cfg, obj, std::move(prefix));
    body(s);
    // Ahead of the warnings of its subsections, as the file nests them.
    std::vector<std::string> unread;
    for (StringRef key : sortedKeys(obj))
      if (!s.seen.contains(key))
        unread.push_back("unsupported key '" + s.prefix + key.str() +
                         "' is ignored");
    cfg.warnings.insert(cfg.warnings.begin() + firstWarning, unread.begin(),
                        unread.end());
  }

  void error(StringRef key, const Twine &msg) {
    cfg.errors.push_back((prefix + key + ": " + msg).str());
  }
  void warning(const Twine &msg) { cfg.warnings.push_back(msg.str()); }

  /// The value at `key`, or null when the key is absent.
  const json::Value *get(StringRef key) {
    seen.insert(key);
    return obj.get(key);
  }

  /// Reads the object at `key`, if there is one, with `body`.
  void section(StringRef key, function_ref<void(Section &)> body) {
    const json::Value *v = get(key);
    if (!v)
      return;
    if (const json::Object *o = v->getAsObject())
      return read(cfg, *o, prefix + key.str() + ".", body);
    error(key, "expected an object");
  }

  /// A number; null reads as absent.
  std::optional<double> number(StringRef key) {
    const json::Value *v = get(key);
    if (!v || v->kind() == json::Value::Null)
      return std::nullopt;
    std::optional<double> d = v->getAsNumber();
    if (!d)
      error(key, "expected a number, got " + dump(*v));
    return d;
  }

  std::optional<int64_t> integer(StringRef key) {
    std::optional<double> v = number(key);
    if (!v)
      return std::nullopt;
    // DeepSpeed configs write sizes as 5e8, so any whole number will do.
    if (std::floor(*v) != *v || std::fabs(*v) > 9.0e18) {
      error(key, "expected an integer, got " + dump(*get(key)));
      return std::nullopt;
    }
    return static_cast<int64_t>(*v);
  }

  /// An integer in [lo, hi]: the config's own error, rather than one about
  /// the pass option it sets.
  std::optional<int64_t>
  integerIn(StringRef key, int64_t lo,
            int64_t hi = std::numeric_limits<int64_t>::max()) {
    std::optional<int64_t> v = integer(key);
    if (!v || (*v >= lo && *v <= hi))
      return v;
    std::string range = hi == std::numeric_limits<int64_t>::max()
                            ? "must be >= " + std::to_string(lo)
                            : "must be between " + std::to_string(lo) +
                                  " and " + std::to_string(hi);
    error(key, range + ", got " + std::to_string(*v));
    return std::nullopt;
  }

  /// A boolean; null reads as absent.
  std::optional<bool> boolean(StringRef key) {
    const json::Value *v = get(key);
    if (!v || v->kind() == json::Value::Null)
      return std::nullopt;
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      error(key, "expected true or false, got " + dump(*v));
    return b;
  }

private:
  Section(DeepSpeedConfig &cfg, const json::Object &obj, std::string prefix)
      : cfg(cfg), obj(obj), prefix(std::move(prefix)) {}

  DeepSpeedConfig &cfg;
  const json::Object &obj;
  std::string prefix;
  llvm::StringSet<> seen;
};

/// Every supported key and the DeepSpeedConfig field it sets; each field is
/// one zero-pipeline option (see buildZeroPipeline).
void readKeys(Section &top, DeepSpeedConfig &cfg) {
  top.section("zero_optimization", [&](Section &z) {
    cfg.stage = z.integerIn("stage", 0, 3);
    cfg.reduceBucketSize = z.integerIn("reduce_bucket_size", 1);
    cfg.allgatherBucketSize = z.integerIn("allgather_bucket_size", 1);
    cfg.reduceScatter = z.boolean("reduce_scatter");
    cfg.overlapComm = z.boolean("overlap_comm");
    cfg.contiguousGradients = z.boolean("contiguous_gradients");
    cfg.prefetchBucketSize = z.integerIn("stage3_prefetch_bucket_size", 1);
    cfg.maxLiveParameters = z.integerIn("stage3_max_live_parameters", 1);
    cfg.maxReuseDistance = z.integerIn("stage3_max_reuse_distance", 0);
    cfg.paramPersistenceThreshold =
        z.integerIn("stage3_param_persistence_threshold", 0);
  });

  std::optional<bool> fp16, bf16;
  top.section("fp16", [&](Section &f) {
    fp16 = f.boolean("enabled");
    cfg.initialScalePower = f.integer("initial_scale_power");
    cfg.lossScaleWindow = f.integer("loss_scale_window");
    cfg.hysteresis = f.integer("hysteresis");
    cfg.minLossScale = f.number("min_loss_scale");
    // Only the dynamic loss scaler (loss_scale 0) exists here.
    if (std::optional<double> s = f.number("loss_scale"); s && *s != 0.0)
      f.warning("unsupported key 'fp16.loss_scale' (a static loss scale) is "
                "ignored: the dynamic loss scaler is used");
  });
  top.section("bf16", [&](Section &b) { bf16 = b.boolean("enabled"); });
  if (fp16.value_or(false) && bf16.value_or(false))
    cfg.errors.push_back("fp16.enabled and bf16.enabled are both true");
  else if (fp16.value_or(false))
    cfg.dtype = "fp16";
  else if (bf16.value_or(false))
    cfg.dtype = "bf16";
  else if (fp16 || bf16)
    cfg.dtype = "fp32";

  top.section("optimizer", [&](Section &o) {
    if (const json::Value *t = o.get("type")) {
      std::optional<StringRef> s = t->getAsString();
      std::string type = s ? s->str() : dump(*t);
      std::string lower = StringRef(type).lower();
      if (lower == "adam" || lower == "adamw")
        cfg.optimizerType = lower;
      else
        o.error("type",
                "'" + type + "' is not supported (expected Adam or AdamW)");
    }
    o.section("params", [&](Section &p) {
      cfg.lr = p.number("lr");
      cfg.eps = p.number("eps");
      cfg.weightDecay = p.number("weight_decay");
      if (const json::Value *b = p.get("betas")) {
        const json::Array *a = b->getAsArray();
        if (!a || a->size() != 2 || !(*a)[0].getAsNumber() ||
            !(*a)[1].getAsNumber()) {
          p.error("betas", "expected [beta1, beta2], got " + dump(*b));
        } else {
          cfg.beta1 = (*a)[0].getAsNumber();
          cfg.beta2 = (*a)[1].getAsNumber();
        }
      }
    });
  });

  // Checkpointing whole transformer layers is zero-remat's layer policy;
  // the runtime knobs of DeepSpeed's implementation stay unsupported keys.
  top.section("activation_checkpointing", [&](Section &a) {
    cfg.remat = "layer";
    cfg.rematBlocks = a.integerIn("number_checkpoints", 1);
    for (StringRef key : {"partition_activations", "cpu_checkpointing"})
      if (a.boolean(key).value_or(false))
        a.error(key, "is not implemented: recomputed activations stay whole "
                     "on each rank, in device memory");
  });

  cfg.gradientClipping = top.number("gradient_clipping");
  if (cfg.gradientClipping && (!(*cfg.gradientClipping >= 0.0) ||
                               !std::isfinite(*cfg.gradientClipping))) {
    top.error("gradient_clipping", "must be >= 0 (0 disables clipping), got " +
                                       dump(*top.get("gradient_clipping")));
    cfg.gradientClipping.reset();
  }
  cfg.gradientAccumulationSteps =
      top.integerIn("gradient_accumulation_steps", 1, kMaxAccumulationSteps);
  cfg.trainBatchSize = top.integerIn("train_batch_size", 1);
  cfg.trainMicroBatchSizePerGpu =
      top.integerIn("train_micro_batch_size_per_gpu", 1);
}

} // namespace

DeepSpeedConfig mlir::zero::parseDeepSpeedConfig(llvm::StringRef path) {
  DeepSpeedConfig cfg;
  cfg.path = path.str();
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    cfg.errors.push_back("cannot read the file: " +
                         buffer.getError().message());
    return cfg;
  }
  json::Value root = nullptr;
  if (std::optional<SyntaxError> err =
          parse((*buffer)->getBuffer().str(), root)) {
    // The pipeline puts cfg.path before each message: file:line:col.
    cfg.path = llvm::formatv("{0}:{1}:{2}", path, err->line, err->column);
    cfg.errors.push_back("is not valid JSON: " + err->message);
    return cfg;
  }
  const json::Object *top = root.getAsObject();
  if (!top) {
    cfg.errors.push_back("the top level must be a JSON object");
    return cfg;
  }
  Section::read(cfg, *top, "", [&](Section &s) { readKeys(s, cfg); });
  return cfg;
}
