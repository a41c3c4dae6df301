//===- DeepSpeedJson.cpp - The syntax of ds_config files ------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// DeepSpeed reads its config with hjson and rejects duplicate keys. Real
// files use two of hjson's liberties over JSON, comments (`#`, `//`,
// `/* */`) and trailing commas; this reader takes those, rejects duplicate
// keys, and otherwise holds to JSON (numbers such as 01, 1. or 1e400 and
// unpaired \u surrogates are errors, where hjson would read a quoteless
// string a later type check rejects). Every value keeps its line and column,
// so that every error, syntax or value, names file:line:col.
//
//
//===----------------------------------------------------------------------===//

#include "DeepSpeedJson.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::deepspeed;
namespace json = llvm::json;

namespace {

//===----------------------------------------------------------------------===//
// Syntax
//===----------------------------------------------------------------------===//

/// Deeper nesting would overflow the parser's stack.
constexpr unsigned kMaxDepth = 1000;

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

/// A recursive-descent reader of the file into llvm::json values.
class Parser {
public:
  Parser(StringRef text, Positions &positions)
      : text(text), positions(positions) {}

  std::optional<SyntaxError> parse(json::Value &root) {
    if (text.starts_with("\xEF\xBB\xBF"))
      pos = 3;
    size_t bad;
    if (!json::isUTF8(text, &bad))
      return fail(bad, "invalid UTF-8");
    if (!skipSpace() || !value(root, "", 0))
      return err;
    if (!skipSpace())
      return err;
    if (pos != text.size())
      return fail(pos, "unexpected text after the top-level value");
    return std::nullopt;
  }

private:
  Position at(size_t offset) const {
    StringRef before = text.take_front(offset);
    size_t lineStart = before.rfind('\n') + 1; // npos + 1 == 0
    return {static_cast<unsigned>(before.count('\n') + 1),
            static_cast<unsigned>(offset - lineStart + 1)};
  }

  std::optional<SyntaxError> fail(size_t offset, const Twine &message) {
    err = SyntaxError{at(offset), message.str()};
    return err;
  }
  bool error(size_t offset, const Twine &message) {
    fail(offset, message);
    return false;
  }

  /// Skips white space and comments; false on an unterminated comment.
  bool skipSpace() {
    while (pos < text.size()) {
      char c = text[pos];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos;
      } else if (c == '#' || text.substr(pos, 2) == "//") {
        pos = std::min(text.find_first_of("\r\n", pos), text.size());
      } else if (text.substr(pos, 2) == "/*") {
        size_t end = text.find("*/", pos + 2);
        if (end == StringRef::npos)
          return error(pos, "unterminated comment");
        pos = end + 2;
      } else {
        break;
      }
    }
    return true;
  }

  bool value(json::Value &out, const std::string &path, unsigned depth) {
    positions[path] = at(pos);
    if (pos >= text.size())
      return error(pos, "expected a value, got the end of the file");
    char c = text[pos];
    if (c == '{' || c == '[') {
      if (depth + 1 > kMaxDepth)
        return error(pos, "brackets nested deeper than " + Twine(kMaxDepth) +
                              " levels (the parser would overflow its "
                              "stack)");
      return c == '{' ? object(out, path, depth + 1)
                      : array(out, path, depth + 1);
    }
    if (c == '"') {
      std::string s;
      if (!string(s))
        return false;
      out = std::move(s);
      return true;
    }
    if (llvm::isDigit(c) || c == '-' || c == '+' || c == '.')
      return number(out);
    for (auto [word, v] : {std::pair<StringRef, json::Value>{"true", true},
                           {"false", false},
                           {"null", nullptr}}) {
      if (text.substr(pos).starts_with(word) &&
          (pos + word.size() == text.size() ||
           !llvm::isAlnum(text[pos + word.size()]))) {
        pos += word.size();
        out = std::move(v);
        return true;
      }
    }
    size_t end = std::max(text.find_first_of(" \t\r\n,:]}", pos), pos + 1);
    return error(pos, "expected a value, got '" +
                          text.slice(pos, std::min(end, pos + 20)) + "'" +
                          (c == '\'' ? " (strings take double quotes)" : ""));
  }

  bool object(json::Value &out, const std::string &path, unsigned depth) {
    json::Object obj;
    llvm::StringMap<Position> keys;
    ++pos; // {
    for (;;) {
      if (!skipSpace())
        return false;
      if (pos < text.size() && text[pos] == '}')
        break;
      if (pos >= text.size() || text[pos] != '"')
        return error(pos, "expected a key in double quotes or '}'");
      size_t keyStart = pos;
      std::string key;
      if (!string(key))
        return false;
      auto [it, inserted] = keys.try_emplace(key, at(keyStart));
      if (!inserted)
        return error(keyStart, "duplicate key \"" + key + "\" (first at line " +
                                   Twine(it->second.line) + ", column " +
                                   Twine(it->second.column) +
                                   "); DeepSpeed rejects duplicate keys");
      if (!skipSpace())
        return false;
      if (pos >= text.size() || text[pos] != ':')
        return error(pos, "expected ':' after the key \"" + key + "\"");
      ++pos;
      if (!skipSpace())
        return false;
      json::Value v = nullptr;
      if (!value(v, path + kPathSeparator + key, depth))
        return false;
      obj[key] = std::move(v);
      if (!skipSpace())
        return false;
      if (pos < text.size() && text[pos] == ',') {
        ++pos; // A trailing comma before '}' is taken, as hjson takes it.
        continue;
      }
      if (pos >= text.size() || text[pos] != '}')
        return error(pos,
                     "expected ',' or '}' after the value of \"" + key + "\"");
      break;
    }
    ++pos; // }
    out = std::move(obj);
    return true;
  }

  bool array(json::Value &out, const std::string &path, unsigned depth) {
    json::Array arr;
    ++pos; // [
    for (;;) {
      if (!skipSpace())
        return false;
      if (pos < text.size() && text[pos] == ']')
        break;
      json::Value v = nullptr;
      if (!value(v, path + kPathSeparator + std::to_string(arr.size()), depth))
        return false;
      arr.push_back(std::move(v));
      if (!skipSpace())
        return false;
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos >= text.size() || text[pos] != ']')
        return error(pos, "expected ',' or ']' after an array element");
      break;
    }
    ++pos; // ]
    out = std::move(arr);
    return true;
  }

  /// Reads a 4-digit \u escape at `j`.
  std::optional<unsigned> escapeAt(size_t j) const {
    unsigned code;
    StringRef hex = text.substr(j + 2, 4);
    if (!text.substr(j).starts_with("\\u") || hex.size() != 4 ||
        !llvm::all_of(hex, llvm::isHexDigit) || hex.getAsInteger(16, code))
      return std::nullopt;
    return code;
  }

  bool string(std::string &out) {
    size_t start = pos++;
    while (pos < text.size() && text[pos] != '"') {
      unsigned char c = text[pos];
      if (c < 0x20)
        return error(pos, "control character in a string (escape it)");
      if (c != '\\') {
        out += c;
        ++pos;
        continue;
      }
      if (pos + 1 >= text.size())
        break;
      char e = text[pos + 1];
      static constexpr StringRef kEscapes = "\"\\/bfnrt";
      static constexpr StringRef kValues = "\"\\/\b\f\n\r\t";
      if (size_t k = kEscapes.find(e); k != StringRef::npos) {
        out += kValues[k];
        pos += 2;
        continue;
      }
      std::optional<unsigned> code = escapeAt(pos);
      if (!code)
        return error(pos, "invalid escape in a string");
      unsigned cp = *code;
      size_t len = 6;
      if (cp >= 0xD800 && cp <= 0xDFFF) {
        std::optional<unsigned> low = escapeAt(pos + 6);
        if (cp >= 0xDC00 || !low || *low < 0xDC00 || *low > 0xDFFF)
          return error(pos, "unpaired UTF-16 surrogate " + text.substr(pos, 6));
        cp = 0x10000 + ((cp - 0xD800) << 10) + (*low - 0xDC00);
        len = 12;
      }
      char buf[4];
      char *p = buf;
      llvm::ConvertCodePointToUTF8(cp, p);
      out.append(buf, p);
      pos += len;
    }
    if (pos >= text.size())
      return error(start, "unterminated string");
    ++pos; // "
    return true;
  }

  bool number(json::Value &out) {
    size_t end =
        std::min(text.find_first_not_of("0123456789+-.eE", pos), text.size());
    std::string token = text.slice(pos, end).str();
    if (!isJsonNumber(token))
      return error(pos, "invalid number '" + token + "'");
    // As llvm::json: an integer when it is one that fits, else a double.
    bool integral = token.find_first_of(".eE") == std::string::npos;
    int64_t i;
    uint64_t u;
    if (integral && !StringRef(token).getAsInteger(10, i))
      out = i;
    else if (integral && !StringRef(token).getAsInteger(10, u))
      out = u;
    else {
      double d = std::strtod(token.c_str(), nullptr);
      if (!std::isfinite(d))
        return error(pos, "number '" + token + "' is out of range");
      out = d;
    }
    pos = end;
    return true;
  }

  StringRef text;
  Positions &positions;
  size_t pos = 0;
  std::optional<SyntaxError> err;
};

//===----------------------------------------------------------------------===//
// Values as messages echo them
//===----------------------------------------------------------------------===//

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
  return formatDeepSpeedNumber(d);
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

} // namespace

std::optional<SyntaxError>
deepspeed::parseJson(StringRef text, Positions &positions, json::Value &root) {
  return Parser(text, positions).parse(root);
}

std::vector<StringRef> deepspeed::sortedKeys(const json::Object &obj) {
  std::vector<StringRef> keys;
  for (const auto &kv : obj)
    keys.push_back(kv.first);
  llvm::sort(keys);
  return keys;
}

void deepspeed::dump(const json::Value &v, llvm::raw_ostream &os) {
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

std::string deepspeed::dump(const json::Value &v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  dump(v, os);
  return s;
}

/// `d` as nlohmann/json printed it: the shortest digits that read back as
/// `d`, written out (with ".0" on whole numbers) when the decimal point falls
/// between -4 and 15 digits from their start, otherwise as 1.5e+20.
std::string deepspeed::formatDeepSpeedNumber(double d) {
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
